//! Propagated errors (Kasick et al., §7, "Propagated errors"): an errno a
//! server's call returned that its role never returned from that syscall
//! in the training windows, and that a client's call returned too, close
//! in time, names that server: the client's error came from it.
//!
//! Normal errnos are learnt per (role, syscall) over every device of the
//! role (a server's `openat` failing ENOENT in training makes it normal for
//! every server). A client's errno counts only when it, too, is unexpected
//! for clients, so an errno both sides return every second (EAGAIN) never
//! matches.
//!
//! An errno matched at most of a program's servers that were up (3 or
//! more, over half) is the workload's, not one server's fault (a
//! small-file workload's lookups of files it is about to create fail
//! ENOENT at every brick; after a brick hangs and returns, the others'
//! lookups fail ENOENT while it heals): the method compares peers, and a
//! server stands out only from a majority that did not fail, so a note
//! says so instead of a finding per server.

use std::collections::{BTreeMap, BTreeSet};

use agent_core::SyscallId;
use summary_view::errno_name;

use super::fleet::Fleet;
use super::metrics::Cause;
use super::trail::Failure;
use super::{Finding, Method};

/// The method's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrnoParams {
    /// A client's errno matches a server's when their failures are at
    /// most this far apart, ns (the research's 3 s window: ±1.5 s).
    pub window_ns: u64,
}

impl Default for ErrnoParams {
    fn default() -> ErrnoParams {
        ErrnoParams {
            window_ns: 1_500_000_000,
        }
    }
}

/// The (syscall, errno) pairs each role returned in training: `[clients,
/// servers]`.
pub fn trained_errnos(fleet: &Fleet) -> [BTreeSet<(SyscallId, u16)>; 2] {
    let mut normal: [BTreeSet<(SyscallId, u16)>; 2] = Default::default();
    for (d, device) in fleet.devices.iter().enumerate() {
        normal[usize::from(device.is_server())].extend(fleet.trails[d].trained.iter().copied());
    }
    normal
}

/// Whether two failures' time spans come within `slack` ns of each other.
fn near(a: &Failure, b: &Failure, slack: u64) -> bool {
    a.first_unix_ns <= b.last_unix_ns.saturating_add(slack)
        && b.first_unix_ns <= a.last_unix_ns.saturating_add(slack)
}

/// What was matched for one (server, errno).
#[derive(Default)]
struct Matched {
    /// The server's unexpected failures that a client's matched.
    calls: u64,
    /// Their syscalls.
    syscalls: BTreeSet<SyscallId>,
    /// Their windows.
    windows: BTreeSet<u64>,
    /// The client devices with a matching failure.
    clients: BTreeSet<usize>,
    /// The clients' syscalls.
    client_syscalls: BTreeSet<SyscallId>,
}

/// Fewest servers of a program an errno must be matched at, and over half
/// of those up, to be taken as the workload's rather than a culprit's.
const FLEET_WIDE: usize = 3;

/// Whether `matched` servers of `up` are the fleet's errors, not
/// culprits: at least [`FLEET_WIDE`] and a majority.
fn fleet_wide(matched: usize, up: usize) -> bool {
    matched >= FLEET_WIDE && matched * 2 > up
}

/// The errno method over the whole fleet (servers and clients need not
/// trace the same program); findings and notes.
pub fn errno(fleet: &Fleet, params: &ErrnoParams) -> (Vec<Finding>, Vec<String>) {
    let normal = trained_errnos(fleet);
    let unexpected = |d: usize, f: &Failure| {
        let server = fleet.devices[d].is_server();
        !normal[usize::from(server)].contains(&(f.id, f.errno))
    };
    // The clients' unexpected failures, by errno.
    let mut at_clients: BTreeMap<u16, Vec<(usize, &Failure)>> = BTreeMap::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        if device.is_server() {
            continue;
        }
        for f in &fleet.trails[d].failures {
            if unexpected(d, f) {
                at_clients.entry(f.errno).or_default().push((d, f));
            }
        }
    }
    let mut matched: BTreeMap<(usize, u16), Matched> = BTreeMap::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        if !device.is_server() {
            continue;
        }
        for f in &fleet.trails[d].failures {
            if !unexpected(d, f) {
                continue;
            }
            let Some(candidates) = at_clients.get(&f.errno) else {
                continue;
            };
            let clients: Vec<&(usize, &Failure)> = candidates
                .iter()
                .filter(|(_, c)| near(f, c, params.window_ns))
                .collect();
            if clients.is_empty() {
                continue;
            }
            let m = matched.entry((d, f.errno)).or_default();
            m.calls = m.calls.saturating_add(f.count);
            m.syscalls.insert(f.id);
            m.windows.insert(f.window);
            for (c, cf) in clients {
                m.clients.insert(*c);
                m.client_syscalls.insert(cf.id);
            }
        }
    }
    let mut notes = Vec::new();
    // Per (program, errno) the servers matched and the windows they were
    // matched in; then the servers of the program that made calls in those
    // windows: every server that was up, not a silent (hung, crashed) one,
    // which cannot return the workload's errors.
    let mut at: BTreeMap<(&str, u16), (usize, BTreeSet<u64>)> = BTreeMap::new();
    for ((d, errno), m) in &matched {
        let e = at.entry((fleet.devices[*d].program(), *errno)).or_default();
        e.0 += 1;
        e.1.extend(m.windows.iter().copied());
    }
    let servers: BTreeMap<(&str, u16), usize> = at
        .iter()
        .map(|(key, (_, windows))| {
            let up = fleet
                .devices
                .iter()
                .enumerate()
                .filter(|(d, device)| {
                    device.is_server()
                        && device.program() == key.0
                        && windows.iter().any(|w| fleet.trails[*d].active.contains(w))
                })
                .count();
            (*key, up)
        })
        .collect();
    let at: BTreeMap<(&str, u16), usize> = at.into_iter().map(|(k, (n, _))| (k, n)).collect();
    // The (program, errno)s that are the workload's: a note each, no finding.
    let mut workloads: BTreeSet<(&str, u16)> = BTreeSet::new();
    for ((program, errno), n) in &at {
        let up = servers.get(&(*program, *errno)).copied().unwrap_or(0);
        if fleet_wide(*n, up) {
            workloads.insert((*program, *errno));
            notes.push(format!(
                "errno: {} from {n} of the {up} {program} servers up at once, matched at clients: \
                 the workload's errors, not one server's (train with this workload to make them normal)",
                errno_name(*errno)
            ));
        }
    }
    let findings = matched
        .into_iter()
        .filter(|((d, errno), _)| !workloads.contains(&(fleet.devices[*d].program(), *errno)))
        .map(|((d, errno), m)| {
            let name = errno_name(errno);
            let names = |ids: &BTreeSet<SyscallId>| {
                ids.iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let windows: Vec<u64> = m.windows.into_iter().collect();
            Finding {
                device: d,
                method: Method::Errno,
                cause: Cause::Errno,
                metric: name.clone(),
                first_window_unix_ns: fleet.window_start(windows[0]),
                last_window_unix_ns: fleet.window_start(windows[windows.len() - 1]),
                score: m.calls as f64,
                evidence: format!(
                    "{} {} call(s) ({}) failed with {name}, never seen from servers in training; \
                     {} client device(s) got {name} within ±{:.1} s ({})",
                    m.calls,
                    fleet.devices[d].program(),
                    names(&m.syscalls),
                    m.clients.len(),
                    params.window_ns as f64 / 1e9,
                    names(&m.client_syscalls),
                ),
                windows,
            }
        })
        .collect();
    (findings, notes)
}
