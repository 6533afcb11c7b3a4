//! The streaming collector: folds each syscall event into fixed-size tables
//! in O(1), and turns them into a [`Summary`] at the end of a run or window.

use heapless::index_map::FnvIndexMap;
use heapless::Vec;

use crate::stats::KeyStats;
use crate::summary::{merge_into_other_syscall, merge_into_other_transition, top_errnos};
use crate::summary::{
    Consecutive, Failures, RunRecord, Spread, Summary, SyscallSummary, Transition,
    DEFAULT_SUMMARY_TRANSITIONS, MAX_ERRNOS, MAX_SUMMARY_SYSCALLS, MAX_SUMMARY_TRANSITIONS,
};
use crate::summary::{
    Coverage, InFlight, Kind, LastCall, Origin, Peer, PeerAddr, PeerRest, Peers, MAX_PEERS,
};
use crate::{Facts, FdKind, Key, Overflow, RunId, SyscallEvent, SyscallId};

/// Distinct peers the collector follows in a window; the summary keeps the
/// [`MAX_PEERS`] busiest and folds the rest.
pub const COLLECT_PEERS: usize = 2 * MAX_PEERS;

/// A peer's figures in the current window, and its last call.
#[derive(Clone, Copy, Debug)]
struct PeerStats {
    addr: PeerAddr,
    calls: u64,
    bytes: u64,
    total_ns: u64,
    errors: u64,
    /// The last call, its end on the events' monotonic clock.
    last: Option<(SyscallId, i64, u64)>,
}

/// A peer's figures counted elsewhere ([`Collector::merge_peer`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerFigures {
    /// Calls on its sockets.
    pub calls: u64,
    /// Bytes moved by the successful read/write-family calls among them.
    pub bytes: u64,
    /// Time in those calls, ns.
    pub total_ns: u64,
    /// Failed calls.
    pub errors: u64,
}

/// What the collector remembers of a thread between two of its syscalls.
#[derive(Clone, Copy, Debug)]
struct ThreadState {
    last: SyscallId,
    last_exit_ns: u64,
}

/// Count and gap sum of one transition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TransitionStats {
    count: u64,
    gap_sum_ns: u64,
}

impl TransitionStats {
    fn add(&mut self, gap_ns: u64) {
        self.count = self.count.saturating_add(1);
        self.gap_sum_ns = self.gap_sum_ns.saturating_add(gap_ns);
    }

    fn merge(&mut self, other: &TransitionStats) {
        self.count = self.count.saturating_add(other.count);
        self.gap_sum_ns = self.gap_sum_ns.saturating_add(other.gap_sum_ns);
    }
}

/// Distinct unknown raw numbers a window keeps apart, each under the id
/// carrying it (`syscall_0x1d8`, [`SyscallId::carrying_raw`]), as strace
/// does; calls of further ones are counted together as `<unknown>`.
pub const UNKNOWN_ROWS: usize = 4;

/// Rows of the direct index: every named id, then the unknown rows.
const INDEX_LEN: usize = (SyscallId::COUNT + UNKNOWN_ROWS) * FdKind::COUNT;

/// Entries a hash table of capacity `cap` is filled to: three quarters, so
/// that probe sequences stay short (a full open-addressing table makes every
/// miss scan it).
pub const fn usable(cap: usize) -> usize {
    cap - cap / 4
}

/// Streaming per-syscall statistics in fixed memory.
///
/// Capacities (const generics; the map capacities must be powers of two):
/// - `KEYS`: distinct (syscall, fd kind) keys; later keys are counted in the
///   "other" entry.
/// - `TRANSITIONS`: distinct (previous, next) syscall pairs; later pairs
///   are counted in the "other" transition.
/// - `THREADS`: threads followed at once (call [`Collector::thread_exited`]
///   when one ends); events of threads beyond it keep their per-key
///   statistics but not their consecutive-call and transition statistics.
/// - `ERRNOS`: distinct (key, errno) pairs tallied; later failures count as
///   `errno_other`.
///
/// The three hash tables are filled to [`usable`] (3/4) of their capacity.
///
/// The defaults keep the state under 64 KiB (see the `collector` bench).
#[derive(Debug)]
pub struct Collector<
    const KEYS: usize = 120,
    const TRANSITIONS: usize = 256,
    const THREADS: usize = 64,
    const ERRNOS: usize = 64,
> {
    start_ns: u64,
    /// Key -> 1 + position in `keys` (0: not present). Direct indexing keeps
    /// the per-event lookup to one load.
    index: [u16; INDEX_LEN],
    /// The carried unknown ids given rows of their own, in order of first
    /// call (row `SyscallId::COUNT + position` of `index`).
    unknown_rows: Vec<SyscallId, UNKNOWN_ROWS>,
    keys: Vec<(Key, KeyStats), KEYS>,
    other: KeyStats,
    threads: FnvIndexMap<u32, ThreadState, THREADS>,
    transitions: FnvIndexMap<u32, TransitionStats, TRANSITIONS>,
    transition_other: TransitionStats,
    /// (packed key << 16 | errno) -> failures.
    errnos: FnvIndexMap<u64, u64, ERRNOS>,
    /// Socket peers, in order of first call.
    peers: Vec<PeerStats, COLLECT_PEERS>,
    /// Calls of peers that found no room in `peers`.
    peer_overflow: PeerRest,
    events: u64,
    overflow: Overflow,
}

impl<const KEYS: usize, const TRANSITIONS: usize, const THREADS: usize, const ERRNOS: usize>
    Collector<KEYS, TRANSITIONS, THREADS, ERRNOS>
{
    /// An empty collector; `start_ns` is the run's start on the events'
    /// monotonic clock (failure times are reported relative to it).
    pub fn new(start_ns: u64) -> Self {
        Collector {
            start_ns,
            index: [0; INDEX_LEN],
            unknown_rows: Vec::new(),
            keys: Vec::new(),
            other: KeyStats::EMPTY,
            threads: FnvIndexMap::new(),
            transitions: FnvIndexMap::new(),
            transition_other: TransitionStats::default(),
            errnos: FnvIndexMap::new(),
            peers: Vec::new(),
            peer_overflow: PeerRest::default(),
            events: 0,
            overflow: Overflow::default(),
        }
    }

    /// Folds one completed syscall into the statistics.
    #[inline]
    pub fn record(&mut self, ev: &SyscallEvent) {
        self.events = self.events.saturating_add(1);
        let id = self.admit(SyscallId::from_raw_carrying(ev.arch, ev.nr));
        let consecutive_gap = self.track_thread(ev.tid, id, ev.entry_ns, ev.exit_ns);
        let own_key = Key {
            id,
            fd_kind: ev.fd_kind,
        };
        let slot = self.slot(own_key);
        let key = if slot.is_some() { own_key } else { Key::OTHER };
        let errno = ev.errno();
        let tracked_errno = match errno {
            Some(e) => self.tally_errno(key, e),
            None => true,
        };
        let start_ns = self.start_ns;
        let stats = match slot {
            Some(i) => &mut self.keys[i].1,
            None => &mut self.other,
        };
        stats.add_call(ev.duration_ns());
        if let Some(gap) = consecutive_gap {
            stats.add_consecutive(gap);
        }
        match errno {
            Some(_) => {
                stats.add_failure(ev.exit_ns.saturating_sub(start_ns));
                if !tracked_errno {
                    stats.errno_untracked = stats.errno_untracked.saturating_add(1);
                }
            }
            None => stats.add_result(ev.ret),
        }
        if let Some(arg) = id.size_arg() {
            stats.add_param(ev.args[arg]);
        }
        if let Some(peer) = ev.peer {
            self.record_peer(peer, id, ev, errno.is_some());
        }
    }

    /// Counts a call on a socket connected to `addr`.
    fn record_peer(&mut self, addr: PeerAddr, id: SyscallId, ev: &SyscallEvent, failed: bool) {
        let bytes = if !failed && ev.ret > 0 && id.is_read_write_family() {
            ev.ret as u64
        } else {
            0
        };
        let duration = ev.duration_ns();
        let slot = match self.peers.iter().position(|p| p.addr == addr) {
            Some(i) => Some(i),
            None => {
                let fresh = PeerStats {
                    addr,
                    calls: 0,
                    bytes: 0,
                    total_ns: 0,
                    errors: 0,
                    last: None,
                };
                match self.peers.push(fresh) {
                    Ok(()) => Some(self.peers.len() - 1),
                    // A full table: a peer silent in this window (kept from
                    // the last one only to show its silence) gives way to
                    // one that is called, else the call is folded.
                    Err(fresh) => {
                        let silent = self.peers.iter().position(|p| p.calls == 0);
                        if let Some(i) = silent {
                            self.peers[i] = fresh;
                        }
                        silent
                    }
                }
            }
        };
        match slot {
            Some(i) => {
                let p = &mut self.peers[i];
                p.calls = p.calls.saturating_add(1);
                p.bytes = p.bytes.saturating_add(bytes);
                p.total_ns = p.total_ns.saturating_add(duration);
                p.errors = p.errors.saturating_add(failed as u64);
                p.last = Some((id, ev.ret, ev.exit_ns));
            }
            None => {
                let r = &mut self.peer_overflow;
                // Peers without a slot are counted together, as one.
                r.peers = 1;
                r.calls = r.calls.saturating_add(1);
                r.bytes = r.bytes.saturating_add(bytes);
                r.total_ns = r.total_ns.saturating_add(duration);
                r.errors = r.errors.saturating_add(failed as u64);
            }
        }
    }

    /// Forgets a thread that ended (frees its slot in the thread table).
    pub fn thread_exited(&mut self, tid: u32) {
        self.threads.remove(&tid);
    }

    /// Starts a new window: clears every statistic but keeps what is known of
    /// live threads, so consecutive calls spanning the boundary still count,
    /// and keeps the peers called in the ended window with their last call
    /// (so a peer that falls silent is still listed, with no calls, in the
    /// next window).
    pub fn reset_window(&mut self, start_ns: u64) {
        let threads = core::mem::take(&mut self.threads);
        let peers = self.carried_peers();
        *self = Collector::new(start_ns);
        self.threads = threads;
        self.peers = peers;
    }

    /// Makes this collector the one of the window that follows `ended`'s,
    /// starting at `start_ns`: what [`Collector::reset_window`] would make
    /// of `ended`, while `ended` stays as it is (to be summarized later,
    /// off the tracer's stop path). Reuses this collector's memory.
    pub fn follow(&mut self, ended: &Self, start_ns: u64) {
        *self = Collector::new(start_ns);
        self.threads = ended.threads.clone();
        self.peers = ended.carried_peers();
    }

    /// The peers a new window starts with: those called in this one, their
    /// figures zeroed, their last call kept.
    fn carried_peers(&self) -> Vec<PeerStats, COLLECT_PEERS> {
        self.peers
            .iter()
            .filter(|p| p.calls > 0)
            .map(|p| PeerStats {
                calls: 0,
                bytes: 0,
                total_ns: 0,
                errors: 0,
                ..*p
            })
            .collect()
    }

    /// The peer table of a summary whose window started at `start_unix_ns`
    /// (the wall-clock time of the collector's `start_ns`): the
    /// [`MAX_PEERS`] busiest peers, the rest folded.
    fn peer_summary(&self, start_unix_ns: u64) -> Peers {
        let to_unix = |mono: u64| -> u64 {
            let unix = start_unix_ns as i128 + (mono as i128 - self.start_ns as i128);
            unix.clamp(0, u64::MAX as i128) as u64
        };
        let mut all: Vec<Peer, COLLECT_PEERS> = self
            .peers
            .iter()
            .map(|p| Peer {
                addr: p.addr,
                calls: p.calls,
                bytes: p.bytes,
                total_ns: p.total_ns,
                errors: p.errors,
                last: p.last.map(|(id, result, end)| LastCall {
                    id,
                    result,
                    end_unix_ns: to_unix(end),
                }),
            })
            .collect();
        all.sort_unstable_by(|a, b| b.calls.cmp(&a.calls).then(a.addr.cmp(&b.addr)));
        let mut peers = Peers {
            list: Vec::new(),
            rest: self.peer_overflow,
        };
        for p in all {
            if peers.list.len() < MAX_PEERS {
                // Cannot fail: checked above.
                let _ = peers.list.push(p);
            } else {
                peers.rest.fold(&p);
            }
        }
        peers
    }

    /// Syscalls recorded so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The run's start on the events' clock, the origin of
    /// [`KeyStats`]' failure times.
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    // Merging statistics aggregated elsewhere (the eBPF backend's kernel
    // maps) as if each of their calls had been recorded here: the same
    // tables, the same "other" entries and overflow counts when they are
    // full. Merge a window's keys first, then their failures' errnos
    // ([`Collector::merge_errno`] finds the key where
    // [`Collector::merge_key`] put it), in any order otherwise.

    /// Adds `stats`, the calls of `key` counted elsewhere (`has_param` and
    /// `errno_untracked` are set here: from the syscall and from the
    /// errno table), failure times since [`Collector::start_ns`].
    pub fn merge_key(&mut self, key: Key, stats: &KeyStats) {
        if stats.count == 0 {
            return;
        }
        self.events = self.events.saturating_add(stats.count);
        let key = Key {
            id: self.admit(key.id),
            ..key
        };
        let mut add = *stats;
        add.has_param = key.id.size_arg().is_some();
        if !add.has_param {
            add.param_sum = 0;
        }
        add.errno_untracked = 0;
        match self.slot(key) {
            Some(i) => self.keys[i].1.merge(&add),
            None => {
                // `slot` counted one overflow; the calls are `count`.
                self.overflow.keys = self.overflow.keys.saturating_add(stats.count - 1);
                self.other.merge(&add);
            }
        }
    }

    /// Adds `failures` calls of `key` that failed with `errno` (after
    /// their [`Collector::merge_key`]).
    pub fn merge_errno(&mut self, key: Key, errno: u16, failures: u64) {
        if failures == 0 {
            return;
        }
        let key = Key {
            id: self.admit(key.id),
            ..key
        };
        let slot = match self.index_of(key).map(|i| self.index[i]) {
            Some(pos) if pos != 0 => Some(pos as usize - 1),
            _ => None,
        };
        let key = if slot.is_some() { key } else { Key::OTHER };
        let k = ((key.packed() as u64) << 16) | errno as u64;
        if let Some(n) = self.errnos.get_mut(&k) {
            *n = n.saturating_add(failures);
            return;
        }
        if self.errnos.len() < usable(ERRNOS) && self.errnos.insert(k, failures).is_ok() {
            return;
        }
        self.overflow.errnos = self.overflow.errnos.saturating_add(failures);
        let stats = match slot {
            Some(i) => &mut self.keys[i].1,
            None => &mut self.other,
        };
        stats.errno_untracked = stats.errno_untracked.saturating_add(failures);
    }

    /// Adds `count` transitions from `from` to `to` on one thread, their
    /// gaps summing to `gap_sum_ns`.
    pub fn merge_transition(
        &mut self,
        from: SyscallId,
        to: SyscallId,
        count: u64,
        gap_sum_ns: u64,
    ) {
        if count == 0 {
            return;
        }
        let (from, to) = (self.admit(from), self.admit(to));
        let add = TransitionStats { count, gap_sum_ns };
        let pair = ((from.0 as u32) << 16) | to.0 as u32;
        if let Some(t) = self.transitions.get_mut(&pair) {
            t.merge(&add);
            return;
        }
        if self.transitions.len() >= usable(TRANSITIONS)
            || self.transitions.insert(pair, add).is_err()
        {
            self.transition_other.merge(&add);
            self.overflow.transitions = self.overflow.transitions.saturating_add(count);
        }
    }

    /// Adds calls on the sockets connected to `addr` counted elsewhere:
    /// `calls` of them, `errors` failed, `bytes` moved by the successful
    /// read/write-family ones, `total_ns` spent; `last`: the latest of
    /// them (id, result, end on the events' clock), kept when it is later
    /// than the peer's last call known here. A full peer table folds them
    /// as [`Collector::record`] does.
    pub fn merge_peer(
        &mut self,
        addr: PeerAddr,
        figures: PeerFigures,
        last: Option<(SyscallId, i64, u64)>,
    ) {
        if figures.calls == 0 {
            return;
        }
        let slot = match self.peers.iter().position(|p| p.addr == addr) {
            Some(i) => Some(i),
            None => {
                let fresh = PeerStats {
                    addr,
                    calls: 0,
                    bytes: 0,
                    total_ns: 0,
                    errors: 0,
                    last: None,
                };
                match self.peers.push(fresh) {
                    Ok(()) => Some(self.peers.len() - 1),
                    Err(fresh) => {
                        let silent = self.peers.iter().position(|p| p.calls == 0);
                        if let Some(i) = silent {
                            self.peers[i] = fresh;
                        }
                        silent
                    }
                }
            }
        };
        match slot {
            Some(i) => {
                let p = &mut self.peers[i];
                p.calls = p.calls.saturating_add(figures.calls);
                p.bytes = p.bytes.saturating_add(figures.bytes);
                p.total_ns = p.total_ns.saturating_add(figures.total_ns);
                p.errors = p.errors.saturating_add(figures.errors);
                if let Some(l) = last {
                    if p.last.is_none_or(|(_, _, end)| l.2 >= end) {
                        p.last = Some(l);
                    }
                }
            }
            None => {
                let r = &mut self.peer_overflow;
                r.peers = 1;
                r.calls = r.calls.saturating_add(figures.calls);
                r.bytes = r.bytes.saturating_add(figures.bytes);
                r.total_ns = r.total_ns.saturating_add(figures.total_ns);
                r.errors = r.errors.saturating_add(figures.errors);
            }
        }
    }

    /// Updates the thread's last syscall; returns the gap when this call
    /// repeats the previous one.
    #[inline]
    fn track_thread(
        &mut self,
        tid: u32,
        id: SyscallId,
        entry_ns: u64,
        exit_ns: u64,
    ) -> Option<u64> {
        let now = ThreadState {
            last: id,
            last_exit_ns: exit_ns,
        };
        match self.threads.get_mut(&tid) {
            Some(state) => {
                let prev = core::mem::replace(state, now);
                let gap = entry_ns.saturating_sub(prev.last_exit_ns);
                self.count_transition(prev.last, id, gap);
                (prev.last == id).then_some(gap)
            }
            None => {
                if self.threads.len() >= usable(THREADS) || self.threads.insert(tid, now).is_err() {
                    self.overflow.threads = self.overflow.threads.saturating_add(1);
                }
                None
            }
        }
    }

    #[inline]
    fn count_transition(&mut self, from: SyscallId, to: SyscallId, gap_ns: u64) {
        let pair = ((from.0 as u32) << 16) | to.0 as u32;
        if let Some(t) = self.transitions.get_mut(&pair) {
            t.add(gap_ns);
            return;
        }
        let mut fresh = TransitionStats::default();
        fresh.add(gap_ns);
        // A full table would only probe again to refuse the insert.
        if self.transitions.len() >= usable(TRANSITIONS)
            || self.transitions.insert(pair, fresh).is_err()
        {
            self.transition_other.add(gap_ns);
            self.overflow.transitions = self.overflow.transitions.saturating_add(1);
        }
    }

    /// Counts one failure with `errno`; false when the table had no room.
    fn tally_errno(&mut self, key: Key, errno: u16) -> bool {
        let k = ((key.packed() as u64) << 16) | errno as u64;
        if let Some(n) = self.errnos.get_mut(&k) {
            *n = n.saturating_add(1);
            return true;
        }
        if self.errnos.len() < usable(ERRNOS) && self.errnos.insert(k, 1).is_ok() {
            true
        } else {
            self.overflow.errnos = self.overflow.errnos.saturating_add(1);
            false
        }
    }

    /// The id calls of `id` are counted under: `id` itself, except for a
    /// carried unknown number when the window already keeps
    /// [`UNKNOWN_ROWS`] others apart: then `<unknown>` (counted, never
    /// dropped).
    #[inline]
    fn admit(&mut self, id: SyscallId) -> SyscallId {
        if (id.0 as usize) < SyscallId::COUNT || id.carried_raw().is_none() {
            return id;
        }
        if self.unknown_rows.contains(&id) || self.unknown_rows.push(id).is_ok() {
            id
        } else {
            SyscallId::UNKNOWN
        }
    }

    /// The position of `key` in `index`: by id for the named ones, after
    /// them for the unknown rows; `None` for an id with no row (newer than
    /// this build, or a carried number not [`Collector::admit`]ted).
    #[inline]
    fn index_of(&self, key: Key) -> Option<usize> {
        let id = key.id.0 as usize;
        let row = if id < SyscallId::COUNT {
            id
        } else {
            SyscallId::COUNT + self.unknown_rows.iter().position(|r| *r == key.id)?
        };
        Some(row * FdKind::COUNT + key.fd_kind as usize)
    }

    /// Where an event of `key` is counted: its own slot (found or created),
    /// or `None` for the "other" entry when the key table is full.
    #[inline]
    fn slot(&mut self, key: Key) -> Option<usize> {
        let index = self.index_of(key);
        match index.map(|i| (i, self.index[i])) {
            Some((i, 0)) if self.keys.push((key, KeyStats::EMPTY)).is_ok() => {
                self.index[i] = self.keys.len() as u16;
                Some(self.keys.len() - 1)
            }
            Some((_, pos)) if pos != 0 => Some(pos as usize - 1),
            // The key table is full (or, unreachable for ids that went
            // through `admit`, the id has no row): counted, never lost.
            _ => {
                self.overflow.keys = self.overflow.keys.saturating_add(1);
                None
            }
        }
    }

    /// The wire form of one key's statistics.
    fn entry(&self, key: Key, s: &KeyStats) -> SyscallSummary {
        let failures = (s.errors > 0).then(|| {
            let mut all: Vec<(u16, u64), ERRNOS> = Vec::new();
            for (k, n) in self.errnos.iter() {
                if (k >> 16) as u32 == key.packed() {
                    // Cannot fail: at most ERRNOS entries.
                    let _ = all.push(((k & 0xffff) as u16, *n));
                }
            }
            let tallied = all.iter().fold(0u64, |a, (_, n)| a.saturating_add(*n));
            let mut errno_other = s.errors.saturating_sub(tallied);
            let errnos = top_errnos(&mut all, &mut errno_other);
            Failures {
                errors: s.errors,
                errnos,
                errno_other,
                first_ns: s.first_failure_ns,
                last_ns: s.last_failure_ns,
            }
        });
        SyscallSummary {
            key,
            count: s.count,
            total_ns: s.total_ns,
            spread: (s.count > 1).then_some(Spread {
                min_ns: s.min_ns,
                max_ns: s.max_ns,
                sum_sq_ns: s.sum_sq_ns,
                histogram: s.histogram,
            }),
            failures,
            consecutive: (s.consecutive > 0).then_some(Consecutive {
                count: s.consecutive,
                gap_sum_ns: s.consecutive_gap_ns,
            }),
            result_sum: s.result_sum,
            param_sum: s.has_param.then_some(s.param_sum),
        }
    }

    /// The summary of everything recorded so far. `run` comes from the
    /// platform shim; its `events` and `overflow` are filled in here, and
    /// the peer table (times made wall-clock from `run.start_unix_ns`, the
    /// wall-clock time of the collector's start). The shim fills `origin`,
    /// `cpu` and `in_flight`, which the collector does not see.
    ///
    /// The largest keys (by count) get their own entries, the rest are
    /// folded into "other"; the [`DEFAULT_SUMMARY_TRANSITIONS`] most frequent
    /// transitions are kept, the rest folded into the "other" transition.
    pub fn summarize(&self, id: RunId, mut run: RunRecord, facts: Facts) -> Summary {
        run.events = self.events;
        run.overflow = self.overflow;

        // Keys by count, largest first (ties: lower key first).
        let mut order: Vec<u16, KEYS> = (0..self.keys.len() as u16).collect();
        order.sort_unstable_by(|a, b| {
            let (ka, sa) = &self.keys[*a as usize];
            let (kb, sb) = &self.keys[*b as usize];
            sb.count.cmp(&sa.count).then(ka.cmp(kb))
        });
        let mut syscalls: Vec<SyscallSummary, MAX_SUMMARY_SYSCALLS> = Vec::new();
        let mut rest: Option<SyscallSummary> =
            (self.other.count > 0).then(|| self.entry(Key::OTHER, &self.other));
        for i in order {
            let (key, stats) = &self.keys[i as usize];
            let entry = self.entry(*key, stats);
            if syscalls.len() + 1 < MAX_SUMMARY_SYSCALLS {
                // Cannot fail: checked above.
                let _ = syscalls.push(entry);
            } else {
                match &mut rest {
                    Some(r) => r.merge(&entry),
                    None => {
                        let mut r = entry;
                        r.key = Key::OTHER;
                        rest = Some(r);
                    }
                }
            }
        }
        syscalls.sort_unstable_by_key(|s| s.key);
        if let Some(r) = rest {
            merge_into_other_syscall(&mut syscalls, &r);
        }

        // Transitions by count, largest first.
        let mut all: Vec<Transition, TRANSITIONS> = self
            .transitions
            .iter()
            .map(|(pair, t)| Transition {
                from: SyscallId((pair >> 16) as u16),
                to: SyscallId((pair & 0xffff) as u16),
                count: t.count,
                gap_sum_ns: t.gap_sum_ns,
            })
            .collect();
        all.sort_unstable_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then((a.from, a.to).cmp(&(b.from, b.to)))
        });
        let keep = DEFAULT_SUMMARY_TRANSITIONS.min(MAX_SUMMARY_TRANSITIONS - 1);
        let mut transitions: Vec<Transition, MAX_SUMMARY_TRANSITIONS> = Vec::new();
        let mut folded = Transition {
            from: SyscallId::OTHER,
            to: SyscallId::OTHER,
            count: self.transition_other.count,
            gap_sum_ns: self.transition_other.gap_sum_ns,
        };
        for (i, t) in all.iter().enumerate() {
            if i < keep {
                let _ = transitions.push(*t);
            } else {
                folded.merge(t);
            }
        }
        transitions.sort_unstable_by_key(|t| (t.from, t.to));
        if folded.count > 0 {
            merge_into_other_transition(&mut transitions, &folded);
        }

        let peers = self.peer_summary(run.start_unix_ns);
        Summary {
            id,
            run,
            facts,
            truncated: false,
            syscalls,
            transitions,
            origin: Origin::default(),
            cpu: None,
            in_flight: InFlight::default(),
            peers,
            kind: Kind::Full,
            coverage: Coverage::default(),
            io: None,
        }
    }
}

// Keep the unused-import lint quiet for MAX_ERRNOS, which documents the
// failure tally's width alongside `top_errnos`.
const _: usize = MAX_ERRNOS;
