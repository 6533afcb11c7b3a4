//! Symptoms set apart from culprits: a client's slow calls at the time a
//! server it uses is flagged are that server's doing.
//!
//! A server's fault reaches every client that uses it, but not evenly: a
//! client of a distributed file system works on one server's file at a
//! time, so in any stretch of windows some clients wait on the slow server
//! more than others, and the median over the clients flags them (the
//! PVFS paper compared servers with servers and clients with clients, and
//! its clients spread every request over every server, so they were
//! slowed alike). The statistical findings (median, histogram, link, wait) on a
//! client whose flagged span meets a statistical finding on a server are
//! therefore moved out of the findings, each with the server that explains
//! it. A client flagged while no server is stays a culprit (a slow client
//! link). The semantic methods already match servers to clients and are
//! left as they are.

use super::fleet::Device;
use super::{Finding, Method};

/// A finding set apart, and the finding that explains it.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// The symptom.
    pub finding: Finding,
    /// Index into the diagnosis's devices: the server whose finding
    /// explains it.
    pub by: usize,
}

fn statistical(f: &Finding) -> bool {
    matches!(
        f.method,
        Method::Median | Method::Histogram | Method::Link | Method::Wait
    )
}

/// Splits `findings` into culprits and explained symptoms. `pad_ns`: how
/// far past its last flagged window a finding's span reaches (a window, or
/// a slice of windows, is flagged by its start).
pub fn explain(
    findings: Vec<Finding>,
    devices: &[Device],
    pad_ns: u64,
) -> (Vec<Finding>, Vec<Explained>) {
    let span = |f: &Finding| {
        (
            f.first_window_unix_ns,
            f.last_window_unix_ns.saturating_add(pad_ns),
        )
    };
    let servers: Vec<&Finding> = findings
        .iter()
        .filter(|f| statistical(f) && devices[f.device].is_server())
        .collect();
    let mut explained_by: Vec<Option<usize>> = vec![None; findings.len()];
    for (i, f) in findings.iter().enumerate() {
        if !statistical(f) || devices[f.device].is_server() {
            continue;
        }
        let (a, b) = span(f);
        explained_by[i] = servers
            .iter()
            .filter(|s| {
                let (c, d) = span(s);
                a < d && c < b
            })
            .max_by(|x, y| x.score.total_cmp(&y.score))
            .map(|s| s.device);
    }
    let mut culprits = Vec::new();
    let mut explained = Vec::new();
    for (f, by) in findings.into_iter().zip(explained_by) {
        match by {
            Some(by) => explained.push(Explained { finding: f, by }),
            None => culprits.push(f),
        }
    }
    (culprits, explained)
}
