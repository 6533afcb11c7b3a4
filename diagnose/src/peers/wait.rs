//! The wait method: the server its clients are waiting on.
//!
//! Why: packet loss at a server (20 % of its inbound or outbound packets
//! dropped) slows the fleet without slowing any traced call. Clients and
//! servers on non-blocking sockets read only once `epoll` says data has
//! arrived, so a retransmission's wait is in `epoll_wait`, not on any
//! socket; the bytes per call do not move either (the lost segment is
//! sent again whole). What changes is *where* the clients are: a client of
//! a distributed file system works on one server's file at a time, and
//! one whose requests or replies to a server are lost sits waiting on that
//! server. Measured on the fleet testbed (`scripts/lib/fleet/wait_share.py`):
//! at the end of a 1 s window the latest socket call of a client was to
//! the lossy server in 68-89 % of its windows under receive or send
//! loss, against about a quarter (one of four servers) fault-free.
//!
//! The method:
//! - a *sample* is one client window's latest socket call that ended inside
//!   the window ([`super::trail::Trail::latest`]), when its peer is a
//!   server of the fleet known by its `addr` fact (clients are the devices
//!   that are not servers); it names that server only when the call ended
//!   `min_wait_ns` (20 ms) or more before the window did: the client was
//!   waiting on the server, not working with it. Under loss the wait is a
//!   retransmission's (median 77-202 ms on the testbed); fault-free
//!   0.4-4.2 ms, also when every client works on one server's files at
//!   once, which without this flagged a healthy server (fleet run s44b).
//!   In a fleet without clients, where every node is a server of the
//!   others (Spark's workers fetch shuffle blocks from each other), the
//!   servers sample instead, a call to another server of the fleet
//!   counting; a server never samples itself, so each server's fair
//!   share is still 1 / servers; such a fleet has a rule of its own
//!   ([`WaitParams::mesh`]);
//! - a server's *share* at window `w` is the fraction of the samples of
//!   windows `w - span + 1 ..= w` that name it; a window is judged when
//!   those windows hold at least two samples per window;
//! - per server, the threshold is the highest share it held in `k` of any
//!   `n` consecutive judged training windows, times `1 + margin`, and at
//!   least `floor` even shares (1.5 / servers: 0.375 with 4 servers);
//! - a server over its threshold in `k` of `n` consecutive judged
//!   diagnosis windows is flagged, cause network, metric `wait-share`.
//!
//! A disk fault at a server keeps its clients waiting on it too; the
//! server's own file calls are slow then and the median method names the
//! disk, so a wait finding on a server with a disk finding of another
//! method through at least half of its windows is left out
//! ([`super::analyse`]; a disk blamed for a few windows of a long wait
//! does not explain it).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::fleet::Fleet;
use super::kofn::{persistent, sustained};
use super::metrics::Cause;
use super::phase::Phase;
use super::{Finding, Method};

/// The method's settings (docs/peers.md, "`wait`"): one rule where
/// clients sample the servers, another where the servers sample each other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaitParams {
    /// In a fleet with clients (a file system's).
    pub clients: WaitRule,
    /// In a fleet of servers only (Spark's workers, each serving the
    /// others' shuffle fetches).
    pub mesh: WaitRule,
    /// Leave out a wait finding with fewer than half the flagged windows
    /// of the longest one of the same analysis ([`keep_dominant`]). The
    /// live analysis turns it off: there a fault that moves from one
    /// server to another must not wait for the first one's finding to
    /// leave its range.
    pub dominant: bool,
}

impl Default for WaitParams {
    fn default() -> WaitParams {
        WaitParams {
            clients: WaitRule::default(),
            // A worker's latest call is as often its own shuffle serving as
            // a wait on a peer, and a fault-free worker's 4-window share
            // swings from 0 to 0.75 in a sort's training: with the clients'
            // 3 of 4 over 1.5 even shares, healthy workers were flagged in
            // 3 of 15 loss phases of the stored MapReduce runs; 4 of 4 over
            // 2 even shares flagged none there (docs/mapreduce-eval.md,
            // "A wait rule for a fleet of servers").
            mesh: WaitRule {
                k: 4,
                floor: 2.0,
                // Three sort jobs of training give 0-11 judged windows here,
                // and a threshold learnt from 2 of them (0.80) hid a 50 %
                // send loss that held 0.75 (run s46 rep 2); the floor
                // alone flagged no healthy worker in any of the 78 phases
                // of the stored runs (docs/mapreduce-eval.md, "Training and
                // the disk's blame", 2026-11-29).
                min_trained: 8,
                ..WaitRule::default()
            },
            dominant: true,
        }
    }
}

impl WaitParams {
    /// The rule for `fleet`: [`WaitParams::mesh`] when every device is a
    /// server, else [`WaitParams::clients`].
    pub fn rule_for(&self, fleet: &Fleet) -> &WaitRule {
        if is_mesh(fleet) {
            &self.mesh
        } else {
            &self.clients
        }
    }
}

/// Whether every device of `fleet` is a server (each samples the others).
fn is_mesh(fleet: &Fleet) -> bool {
    fleet.devices.iter().all(|d| d.is_server())
}

/// One rule of the method.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaitRule {
    /// Windows over which a share is counted (the window judged and the
    /// ones before it).
    pub span: u64,
    /// Over-threshold windows needed ...
    pub k: usize,
    /// ... among this many consecutive judged windows.
    pub n: usize,
    /// The threshold is the training's sustained share times (1 + margin)
    /// ...
    pub margin: f64,
    /// ... and at least this many even shares (`floor / servers`).
    pub floor: f64,
    /// A client window names the server of its latest call only when that
    /// call ended at least this long (ns) before the window did: the
    /// client was *waiting* on it, not busy with it.
    pub min_wait_ns: u64,
    /// Fewest judged training windows a threshold is learnt from; with
    /// fewer, the floor alone is the threshold (a sustained share over a
    /// handful of windows is one job's chance, not the fleet's range). 0:
    /// learn from any number, and judge nothing without a judged training
    /// window (the clients' rule: a file system's training has dozens).
    pub min_trained: usize,
}

impl Default for WaitRule {
    fn default() -> WaitRule {
        WaitRule {
            span: 4,
            k: 3,
            n: 4,
            margin: 0.25,
            floor: 1.5,
            min_wait_ns: 20_000_000,
            min_trained: 0,
        }
    }
}

/// Fewest servers for a share to mean anything (with two, each is half).
pub const MIN_SERVERS: usize = 3;
/// Fewest samples per window of the span for a window to be judged.
const MIN_SAMPLES_PER_WINDOW: u64 = 2;

/// Per window index: the waiting samples per server address, and how
/// many samples in all (waiting or not).
type Samples = BTreeMap<u64, (BTreeMap<IpAddr, u64>, u64)>;

fn samples(
    fleet: &Fleet,
    phase: Phase,
    servers: &BTreeMap<IpAddr, usize>,
    min_wait_ns: u64,
) -> Samples {
    let mut out = Samples::new();
    // Who samples: the clients; in a fleet of servers only (every node
    // serves the others, as Spark's workers serve each other's shuffle
    // fetches) the servers, each naming the others.
    let mesh = is_mesh(fleet);
    for (d, device) in fleet.devices.iter().enumerate() {
        if device.is_server() != mesh {
            continue;
        }
        let own = device.addr();
        for ((_, index), (_, peer, waited)) in
            fleet.trails[d].latest.range((phase, 0)..=(phase, u64::MAX))
        {
            if !servers.contains_key(peer) || own == Some(*peer) {
                continue;
            }
            let (per, all) = out.entry(*index).or_default();
            // A client busy with a server (its latest call just ended)
            // counts in every server's share, for none: fault-free,
            // clients that all work on one brick's files at once (a
            // workload's start) pile onto it for seconds without waiting.
            if *waited >= min_wait_ns {
                *per.entry(*peer).or_default() += 1;
            }
            *all += 1;
        }
    }
    out
}

/// Each judged window's index and the share of every server in it, in
/// window order.
fn shares(
    samples: &Samples,
    servers: &BTreeMap<IpAddr, usize>,
    span: u64,
) -> Vec<(u64, BTreeMap<IpAddr, f64>)> {
    let span = span.max(1);
    let mut out = Vec::new();
    for &w in samples.keys() {
        let mut per: BTreeMap<IpAddr, u64> = BTreeMap::new();
        let mut all = 0u64;
        for (_, (p, n)) in samples.range(w.saturating_sub(span - 1)..=w) {
            for (a, c) in p {
                *per.entry(*a).or_default() += c;
            }
            all += n;
        }
        if all < MIN_SAMPLES_PER_WINDOW * span {
            continue;
        }
        let share = servers
            .keys()
            .map(|a| (*a, per.get(a).copied().unwrap_or(0) as f64 / all as f64))
            .collect();
        out.push((w, share));
    }
    out
}

/// The servers whose clients wait on them far more than training saw, as
/// findings, and notes on what could not be judged.
pub fn wait(fleet: &Fleet, params: &WaitParams) -> (Vec<Finding>, Vec<String>) {
    let dominant = params.dominant;
    let params = params.rule_for(fleet);
    let mut notes = Vec::new();
    // A server's address → its device (the first listed: one brick per
    // address on a file system fleet).
    let mut servers: BTreeMap<IpAddr, usize> = BTreeMap::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        if let (true, Some(a)) = (device.is_server(), device.addr()) {
            servers.entry(a).or_insert(d);
        }
    }
    if servers.len() < MIN_SERVERS {
        if !servers.is_empty() {
            notes.push(format!(
                "wait: {} server(s) known by their addr fact, fewer than {MIN_SERVERS}: not judged",
                servers.len()
            ));
        }
        return (Vec::new(), notes);
    }
    let training = shares(
        &samples(fleet, Phase::Training, &servers, params.min_wait_ns),
        &servers,
        params.span,
    );
    let diagnosis = shares(
        &samples(fleet, Phase::Diagnosis, &servers, params.min_wait_ns),
        &servers,
        params.span,
    );
    if diagnosis.is_empty() {
        return (Vec::new(), notes);
    }
    if training.is_empty() && params.min_trained == 0 {
        notes.push("wait: no training window with enough clients' socket calls: not judged".into());
        return (Vec::new(), notes);
    }
    let learnt = training.len() >= params.min_trained;
    if !learnt {
        // No count in the text: the live analysis says each note once, and
        // its baseline grows window by window.
        notes.push(format!(
            "wait: fewer than {} judged training windows: the floor alone is the threshold",
            params.min_trained
        ));
    }
    // Half again an even share of all the clients' windows (0.375 with 4
    // servers): fault-free, clients seldom end a window waiting, and no
    // server held more than a third of the windows in the stored fleet
    // runs (docs/peers.md, "`wait`").
    let floor = params.floor / servers.len() as f64;
    let mut findings = Vec::new();
    for (addr, &device) in &servers {
        let trained: Vec<f64> = training
            .iter()
            .map(|(_, s)| s.get(addr).copied().unwrap_or(0.0))
            .collect();
        let learnt_level = if learnt {
            sustained(&trained, params.k, params.n).unwrap_or(0.0)
        } else {
            0.0
        };
        let threshold = (learnt_level * (1.0 + params.margin)).max(floor);
        let values: Vec<f64> = diagnosis
            .iter()
            .map(|(_, s)| s.get(addr).copied().unwrap_or(0.0))
            .collect();
        let over: Vec<bool> = values.iter().map(|v| *v > threshold).collect();
        let kept = persistent(&over, params.k, params.n);
        if kept.is_empty() {
            continue;
        }
        let windows: Vec<u64> = kept.iter().map(|i| diagnosis[*i].0).collect();
        let share = kept.iter().map(|i| values[*i]).sum::<f64>() / kept.len() as f64;
        findings.push(Finding {
            device,
            method: Method::Wait,
            cause: Cause::Network,
            metric: "wait-share".to_string(),
            first_window_unix_ns: fleet.window_start(windows[0]),
            last_window_unix_ns: fleet.window_start(windows[windows.len() - 1]),
            score: share / threshold,
            windows,
            evidence: format!(
                "clients were waiting on it (latest socket call to it, {} ms or more \
                 before the window's end) in {:.0}% of their windows ({} windows at a time; \
                 threshold {:.0}%, an even share {:.0}%)",
                params.min_wait_ns / 1_000_000,
                share * 100.0,
                params.span,
                threshold * 100.0,
                100.0 / servers.len() as f64
            ),
        });
    }
    if dominant {
        keep_dominant(&mut findings);
    }
    (findings, notes)
}

/// Leaves out the wait findings with fewer than half the flagged windows
/// of the longest one.
///
/// Why: a file system client's operation that fans out over every server
/// (postmark's creates, lookups and deletes; not ddr's or ddw's reads
/// and writes of one file at a time) sends to each, then waits in
/// `epoll_wait` for all of them; its latest socket call names whichever
/// server it sent to last, not the one it is waiting on. Under packet
/// loss at one server such waits pile up on another one now and then:
/// in the postmark phases of fleet run s50 (N = 10, docs/fleet-eval.md),
/// a second server was flagged for 3-5 windows in 6 of the 20 loss
/// phases, beside the lossy one's 11-20 (in 4 of them after its finding
/// had ended, the loss still on), and no server in a fault-free phase.
/// Half of the longest leaves those out and keeps two servers flagged
/// about as long (a fault on both, or one too short to tell apart: that
/// run's rep 8 of send loss, 3 windows on the lossy server and 4 on
/// another). Where only one server is flagged, nothing changes.
pub fn keep_dominant(findings: &mut Vec<Finding>) {
    let longest = findings.iter().map(|f| f.windows.len()).max().unwrap_or(0);
    findings.retain(|f| f.windows.len() * 2 >= longest);
}

/// Leaves out the wait findings on a server that another method blames on
/// its disk through at least half of the wait's flagged windows (a disk
/// finding's windows and `pad_ns` past its last; windows `window_ns`
/// long): its clients wait on it because its disk is slow.
///
/// Half, not any overlap: a disk fault keeps the clients waiting while
/// the disk is slow, so the two findings cover the same windows. Under
/// 50 % send loss on a Spark worker, `median` blamed the lossy worker's
/// `dread` for 4 windows at the phase's start, and that one overlapping
/// window dropped a wait finding of 10 windows over the next 26 (run s46
/// rep 1). No disk hog of the stored runs, GlusterFS or MapReduce, gave a
/// wait finding to drop (docs/mapreduce-eval.md, "Training and the
/// disk's blame").
pub fn drop_explained_by_disk(findings: &mut Vec<Finding>, window_ns: u64, pad_ns: u64) {
    let disk: BTreeSet<(usize, u64, u64)> = findings
        .iter()
        .filter(|f| f.method != Method::Wait && f.cause == Cause::Disk)
        .map(|f| {
            (
                f.device,
                f.first_window_unix_ns,
                f.last_window_unix_ns.saturating_add(pad_ns),
            )
        })
        .collect();
    let blamed = |device: usize, at: u64| {
        disk.iter()
            .any(|(d, a, b)| *d == device && *a <= at && at < *b)
    };
    findings.retain(|f| {
        if f.method != Method::Wait {
            return true;
        }
        let covered = f
            .windows
            .iter()
            .filter(|w| blamed(f.device, w.saturating_mul(window_ns)))
            .count();
        // At least half of its windows under a disk finding: the disk's.
        covered * 2 < f.windows.len()
    });
}
