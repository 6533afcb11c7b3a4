//! What the semantic methods ([`super::errno`], [`super::hang`]) keep of
//! each device's windows, reduced as they are read: failed calls with
//! their errno and time, calls in flight (each once, however many windows
//! it spans), the windows in which the device made calls, and per socket
//! peer its most recent call as each window saw it, and per window the
//! peer of the latest socket call that ended in it (the wait method's
//! sample of whom the device was waiting on, [`super::wait`]).
//!
//! Failure times come from the windows' `Failures::first_ns`/`last_ns`
//! (per syscall and fd kind, ns since the window's start): an errno is
//! placed between the first and last failure of its entry in that window,
//! to the nanosecond when the entry has one errno, within the window when
//! it has several.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use agent_core::summary::LastCall;
use agent_core::{FdKind, PeerAddr, Summary, SyscallId};

use super::fleet::ip_of;
use super::metrics::WindowCalls;
use super::phase::Phase;

/// Failed calls of one (syscall, fd kind, errno) in one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The syscall.
    pub id: SyscallId,
    /// What its fd referred to.
    pub fd_kind: FdKind,
    /// The errno.
    pub errno: u16,
    /// How many calls failed with it.
    pub count: u64,
    /// Earliest it can have happened, ns since the Unix epoch.
    pub first_unix_ns: u64,
    /// Latest it can have happened.
    pub last_unix_ns: u64,
    /// The window's index.
    pub window: u64,
}

/// One call seen in flight, over every window it spanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flying {
    /// Its thread.
    pub tid: u32,
    /// The syscall.
    pub id: SyscallId,
    /// What its fd referred to.
    pub fd_kind: FdKind,
    /// The socket's peer, if any.
    pub peer: Option<PeerAddr>,
    /// When it started, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// The end of the last window it was still in flight at.
    pub seen_until_unix_ns: u64,
}

/// A window's latest socket call that ended in it: its end (ns since the
/// Unix epoch), its peer, and how long before the window's end it ended
/// (ns).
pub type Latest = (u64, IpAddr, u64);

/// How many training windows a call must be seen in flight across, whole,
/// before it counts as a wait by nature ([`Trail::waits`]): a wait by
/// nature recurs (an idle reader, a worker's poll), while a call stalled a
/// second or two once (an `openat` behind a TCP retransmission under
/// packet loss, which the live analysis' baseline can take in: the client
/// is not the lossy device) is not, and learnt as a wait it would hide
/// the same call stuck on a hung server for the baseline's whole span
/// (the fleet run of 2026-11-29, stop 48: every hang missed after two
/// such windows).
pub const WAIT_WINDOWS: usize = 5;

/// What the semantic methods keep of one device (one peer of the fleet).
#[derive(Debug, Clone, Default)]
pub struct Trail {
    /// (syscall, errno) of the failures in training windows: its normal
    /// errnos.
    pub trained: BTreeSet<(SyscallId, u16)>,
    /// Failures in diagnosis windows, in the order read.
    pub failures: Vec<Failure>,
    /// (syscall, fd kind) of the calls seen in flight across a whole
    /// training window in at least [`WAIT_WINDOWS`] of them: calls that
    /// wait by nature (for work, a timer, a child), which are not hangs.
    pub waits: BTreeSet<(SyscallId, FdKind)>,
    /// Calls in flight in diagnosis windows, by (thread, start).
    pub flying: BTreeMap<(u32, u64), Flying>,
    /// The diagnosis windows (indices) in which it made at least one call.
    pub active: BTreeSet<u64>,
    /// Per socket peer, its most recent call as each diagnosis window
    /// listed it (distinct calls, in the order read).
    pub peers: BTreeMap<PeerAddr, Vec<LastCall>>,
    /// How many training windows gave each of `trained` and of `waits`:
    /// a training window taken out again ([`Trail::untrain`], the live
    /// analysis evicting its baseline's oldest windows) removes what no
    /// other window holds.
    trained_windows: BTreeMap<(SyscallId, u16), usize>,
    waits_windows: BTreeMap<(SyscallId, FdKind), usize>,
    /// Per (phase, window index): the end (ns since the Unix epoch) and
    /// peer address of the latest socket call that ended inside the
    /// window, over every stream of the device in it, and how long before
    /// the window's end it ended (ns): how long the device had then been
    /// waiting on no socket call. A window whose calls all predate it (a
    /// peer stays listed one window after its last call) has none: the
    /// device was not working then.
    pub latest: BTreeMap<(Phase, u64), Latest>,
}

impl Trail {
    /// Takes what it keeps of window `index` (of `phase`), which is
    /// `summary`, `window_ns` long; `calls`, its classification
    /// ([`super::metrics::Classifier::window_calls`]), gives its failures
    /// and whether it made any call.
    pub fn add(
        &mut self,
        phase: Phase,
        index: u64,
        window_ns: u64,
        summary: &Summary,
        calls: &WindowCalls,
    ) {
        let start = summary.run.start_unix_ns;
        let end = start.saturating_add(window_ns);
        self.add_latest(phase, index, start, end, summary);
        for f in &calls.failures {
            match phase {
                Phase::Training => {
                    self.trained.insert((f.id, f.errno));
                    *self.trained_windows.entry((f.id, f.errno)).or_default() += 1;
                }
                Phase::Diagnosis => self.failures.push(Failure {
                    id: f.id,
                    fd_kind: f.fd_kind,
                    errno: f.errno,
                    count: f.count,
                    first_unix_ns: start.saturating_add(f.first_ns),
                    last_unix_ns: start.saturating_add(f.last_ns),
                    window: index,
                }),
            }
        }
        if phase == Phase::Training {
            for c in &summary.in_flight.oldest {
                if end.saturating_sub(c.start_unix_ns) >= window_ns {
                    let n = self.waits_windows.entry((c.id, c.fd_kind)).or_default();
                    *n += 1;
                    if *n >= WAIT_WINDOWS {
                        self.waits.insert((c.id, c.fd_kind));
                    }
                }
            }
            return;
        }
        if calls.active {
            self.active.insert(index);
        }
        for c in &summary.in_flight.oldest {
            let f = self
                .flying
                .entry((c.tid, c.start_unix_ns))
                .or_insert(Flying {
                    tid: c.tid,
                    id: c.id,
                    fd_kind: c.fd_kind,
                    peer: c.peer,
                    start_unix_ns: c.start_unix_ns,
                    seen_until_unix_ns: end,
                });
            f.seen_until_unix_ns = f.seen_until_unix_ns.max(end);
        }
        for p in &summary.peers.list {
            let Some(last) = p.last else { continue };
            let calls = self.peers.entry(p.addr).or_default();
            // A peer stays listed a window after its last call: the same
            // call again.
            if !calls
                .iter()
                .rev()
                .take(2)
                .any(|c| c.end_unix_ns == last.end_unix_ns)
            {
                calls.push(last);
            }
        }
    }

    /// Keeps the peer of the window's latest socket call that ended in
    /// `[start, end)`, if any (two streams of the device in one window:
    /// the later call).
    fn add_latest(&mut self, phase: Phase, index: u64, start: u64, end: u64, summary: &Summary) {
        let latest = summary
            .peers
            .list
            .iter()
            .filter_map(|p| Some((p.last?.end_unix_ns, ip_of(&p.addr.ip))))
            .filter(|(t, _)| start <= *t && *t < end)
            .max_by_key(|(t, _)| *t)
            .map(|(t, ip)| (t, ip, end - t));
        let Some(latest) = latest else { return };
        let kept = self.latest.entry((phase, index)).or_insert(latest);
        if latest.0 > kept.0 {
            *kept = latest;
        }
    }

    /// Forgets the latest calls of training windows of index below
    /// `before` (the live analysis evicting its baseline's oldest windows).
    pub fn evict_latest(&mut self, before: u64) {
        let diagnosis = self.latest.split_off(&(Phase::Diagnosis, 0));
        self.latest = self.latest.split_off(&(Phase::Training, before));
        self.latest.extend(diagnosis);
    }

    /// Takes back what [`Trail::add`] kept of training window `summary`,
    /// `window_ns` long: its errnos and waits stay only when another
    /// training window has them too.
    pub fn untrain(&mut self, window_ns: u64, summary: &Summary) {
        fn take<K: Ord + Copy>(n: &mut BTreeMap<K, usize>, set: &mut BTreeSet<K>, key: K) {
            if let Some(c) = n.get_mut(&key) {
                *c -= 1;
                if *c == 0 {
                    n.remove(&key);
                    set.remove(&key);
                }
            }
        }
        let end = summary.run.start_unix_ns.saturating_add(window_ns);
        for s in &summary.syscalls {
            let Some(f) = &s.failures else { continue };
            for &(errno, _) in &f.errnos {
                take(
                    &mut self.trained_windows,
                    &mut self.trained,
                    (s.key.id, errno),
                );
            }
        }
        for c in &summary.in_flight.oldest {
            if end.saturating_sub(c.start_unix_ns) >= window_ns {
                let key = (c.id, c.fd_kind);
                take(&mut self.waits_windows, &mut self.waits, key);
                if self
                    .waits_windows
                    .get(&key)
                    .is_some_and(|n| *n < WAIT_WINDOWS)
                {
                    self.waits.remove(&key);
                }
            }
        }
    }

    /// Forgets every diagnosis window (what [`Trail::add`] kept of them),
    /// keeping what the training windows gave.
    pub fn clear_diagnosis(&mut self) {
        self.failures.clear();
        self.flying.clear();
        self.active.clear();
        self.peers.clear();
        self.latest.split_off(&(Phase::Diagnosis, 0));
    }

    /// The most recent call on `peer`'s sockets that ended before `until`.
    pub fn last_call_before(&self, peer: &PeerAddr, until: u64) -> Option<LastCall> {
        self.peers
            .get(peer)?
            .iter()
            .filter(|c| c.end_unix_ns < until)
            .max_by_key(|c| c.end_unix_ns)
            .copied()
    }

    /// Whether `errno` from `id` failed in its training windows.
    pub fn is_trained(&self, id: SyscallId, errno: u16) -> bool {
        self.trained.contains(&(id, errno))
    }
}
