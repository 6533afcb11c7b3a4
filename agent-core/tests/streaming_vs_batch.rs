//! Property tests: over random event streams (interleaved threads included),
//! the streaming collector's summary equals a straightforward batch
//! computation written separately here, with its own rules for full tables.

use std::collections::HashMap;

use agent_core::histogram::{bucket_of, BUCKETS};
use agent_core::summary::{DEFAULT_SUMMARY_TRANSITIONS, MAX_ERRNOS};
use agent_core::*;
use proptest::prelude::*;

/// Raw x86_64 numbers the generator picks from: read, write, close, openat,
/// recvfrom, sendto, poll, futex, mmap, pread64.
const NRS: [u32; 10] = [0, 1, 3, 257, 45, 44, 7, 202, 9, 17];

fn event_strategy() -> impl Strategy<Value = (u32, usize, u8, i64, u64, u64, u64)> {
    (
        1u32..6,           // tid
        0usize..NRS.len(), // syscall
        // Six of the eight fd kinds: 10 syscalls x 6 kinds stay within the
        // summary's 64 entries, so nothing is folded.
        prop::sample::select(vec![0u8, 1, 3, 5, 6, 7]),
        prop_oneof![3 => 0i64..100_000, 1 => -20i64..0], // result (errno 1..20)
        0u64..5_000,                                     // gap before the call
        0u64..3_000_000,                                 // duration
        0u64..1_000_000,                                 // size argument
    )
}

fn to_events(raw: &[(u32, usize, u8, i64, u64, u64, u64)]) -> Vec<SyscallEvent> {
    let mut now: HashMap<u32, u64> = HashMap::new();
    let mut clock = 1_000u64;
    raw.iter()
        .map(|&(tid, s, kind, ret, gap, dur, size)| {
            // Per-thread clocks interleave the threads' timelines.
            let t = now.entry(tid).or_insert(clock);
            let entry = *t + gap;
            let exit = entry + dur;
            *t = exit;
            clock += 1;
            SyscallEvent {
                tid,
                arch: Arch::X86_64,
                nr: NRS[s],
                args: [3, 0, size, 0, 0, 0],
                ret,
                entry_ns: entry,
                exit_ns: exit,
                fd_kind: FdKind::from_u8(kind).unwrap(),
                peer: None,
            }
        })
        .collect()
}

#[derive(Default, Debug)]
struct RefStats {
    count: u64,
    errors: u64,
    total: u64,
    sum_sq: u128,
    min: u64,
    max: u64,
    hist: [u64; BUCKETS],
    consec: u64,
    gap: u64,
    result: i128,
    param: Option<u128>,
    errnos: HashMap<u16, u64>,
    untracked: u64,
    first_fail: Option<u64>,
    last_fail: u64,
}

struct Reference {
    keys: Vec<Key>,
    stats: HashMap<Key, RefStats>,
    transitions: Vec<(SyscallId, SyscallId)>,
    trans_stats: HashMap<(SyscallId, SyscallId), (u64, u64)>,
    trans_other: (u64, u64),
    errno_pairs: Vec<(Key, u16)>,
    overflow: Overflow,
}

/// The batch computation, with capacities `keys`, `transitions`, `threads`,
/// `errnos`: the first keys/pairs/threads seen get the slots.
fn reference(events: &[SyscallEvent], caps: (usize, usize, usize, usize)) -> Reference {
    let mut r = Reference {
        keys: vec![],
        stats: HashMap::new(),
        transitions: vec![],
        trans_stats: HashMap::new(),
        trans_other: (0, 0),
        errno_pairs: vec![],
        overflow: Overflow::default(),
    };
    let mut threads: Vec<u32> = vec![];
    let mut last: HashMap<u32, (SyscallId, u64)> = HashMap::new();
    for ev in events {
        let id = SyscallId::from_raw(ev.arch, ev.nr);
        // Thread bookkeeping.
        let mut consecutive_gap = None;
        if threads.contains(&ev.tid) {
            let (prev, prev_exit) = last[&ev.tid];
            let gap = ev.entry_ns.saturating_sub(prev_exit);
            let pair = (prev, id);
            if r.transitions.contains(&pair) || r.transitions.len() < caps.1 {
                if !r.transitions.contains(&pair) {
                    r.transitions.push(pair);
                }
                let t = r.trans_stats.entry(pair).or_default();
                t.0 += 1;
                t.1 += gap;
            } else {
                r.trans_other.0 += 1;
                r.trans_other.1 += gap;
                r.overflow.transitions += 1;
            }
            if prev == id {
                consecutive_gap = Some(gap);
            }
            last.insert(ev.tid, (id, ev.exit_ns));
        } else if threads.len() < caps.2 {
            threads.push(ev.tid);
            last.insert(ev.tid, (id, ev.exit_ns));
        } else {
            r.overflow.threads += 1;
        }
        // Key.
        let own = Key {
            id,
            fd_kind: ev.fd_kind,
        };
        let key = if r.keys.contains(&own) || r.keys.len() < caps.0 {
            if !r.keys.contains(&own) {
                r.keys.push(own);
            }
            own
        } else {
            r.overflow.keys += 1;
            Key::OTHER
        };
        let s = r.stats.entry(key).or_insert_with(|| RefStats {
            min: u64::MAX,
            ..Default::default()
        });
        let dur = ev.exit_ns - ev.entry_ns;
        s.count += 1;
        s.total += dur;
        s.sum_sq += (dur as u128) * (dur as u128);
        s.min = s.min.min(dur);
        s.max = s.max.max(dur);
        s.hist[bucket_of(dur)] += 1;
        if let Some(g) = consecutive_gap {
            s.consec += 1;
            s.gap += g;
        }
        if ev.ret < 0 {
            let errno = (-ev.ret) as u16;
            s.errors += 1;
            let at = ev.exit_ns;
            s.first_fail = Some(s.first_fail.map_or(at, |f| f.min(at)));
            s.last_fail = s.last_fail.max(at);
            let pair = (key, errno);
            if r.errno_pairs.contains(&pair) || r.errno_pairs.len() < caps.3 {
                if !r.errno_pairs.contains(&pair) {
                    r.errno_pairs.push(pair);
                }
                *s.errnos.entry(errno).or_default() += 1;
            } else {
                s.untracked += 1;
                r.overflow.errnos += 1;
            }
        } else {
            s.result += ev.ret as i128;
        }
        if matches!(ev.nr, 0 | 1 | 45 | 44 | 17) {
            *s.param.get_or_insert(0) += ev.args[2] as u128;
        }
    }
    r
}

fn run_record() -> RunRecord {
    RunRecord {
        threads: 5,
        ..RunRecord::new(1_700_000_000_000_000_000, 1, Exit::Code(0), Arch::X86_64)
    }
}

fn check<const K: usize, const T: usize, const TH: usize, const E: usize>(events: &[SyscallEvent]) {
    let mut c: Box<Collector<K, T, TH, E>> = Box::new(Collector::new(0));
    for ev in events {
        c.record(ev);
    }
    let summary = c.summarize(RunId([1; 16]), run_record(), Facts::new());
    use agent_core::collector::usable;
    let r = reference(events, (K, usable(T), usable(TH), usable(E)));

    assert_eq!(summary.run.events, events.len() as u64);
    assert_eq!(summary.run.overflow, r.overflow);
    // With fewer keys than the summary's capacity nothing is folded.
    assert_eq!(summary.syscalls.len(), r.stats.len());
    for s in &summary.syscalls {
        let e = &r.stats[&s.key];
        assert_eq!(s.count, e.count, "{:?}", s.key);
        assert_eq!(s.errors(), e.errors);
        assert_eq!(s.total_ns, e.total);
        assert_eq!(s.sum_sq_ns(), e.sum_sq);
        assert_eq!(s.min_ns(), e.min);
        assert_eq!(s.max_ns(), e.max);
        assert_eq!(s.histogram().counts, e.hist);
        assert_eq!(s.consecutive_count(), e.consec);
        assert_eq!(s.consecutive.map_or(0, |c| c.gap_sum_ns), e.gap);
        assert_eq!(s.result_sum, e.result);
        assert_eq!(s.param_sum, e.param);
        match &s.failures {
            None => assert_eq!(e.errors, 0),
            Some(f) => {
                assert_eq!(f.first_ns, e.first_fail.unwrap());
                assert_eq!(f.last_ns, e.last_fail);
                let mut expect: Vec<(u16, u64)> = e.errnos.iter().map(|(a, b)| (*a, *b)).collect();
                expect.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                let kept: Vec<(u16, u64)> = expect.iter().take(MAX_ERRNOS).copied().collect();
                let rest: u64 =
                    expect.iter().skip(MAX_ERRNOS).map(|x| x.1).sum::<u64>() + e.untracked;
                assert_eq!(f.errnos.as_slice(), kept.as_slice());
                assert_eq!(f.errno_other, rest);
            }
        }
    }
    // Transitions: the most frequent are kept, the rest folded into other.
    let mut all: Vec<((SyscallId, SyscallId), (u64, u64))> =
        r.trans_stats.iter().map(|(k, v)| (*k, *v)).collect();
    all.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    let mut other = r.trans_other;
    for (_, v) in all.iter().skip(DEFAULT_SUMMARY_TRANSITIONS) {
        other.0 += v.0;
        other.1 += v.1;
    }
    let mut kept: Vec<Transition> = all
        .iter()
        .take(DEFAULT_SUMMARY_TRANSITIONS)
        .map(|((from, to), (count, gap))| Transition {
            from: *from,
            to: *to,
            count: *count,
            gap_sum_ns: *gap,
        })
        .collect();
    if other.0 > 0 {
        kept.push(Transition {
            from: SyscallId::OTHER,
            to: SyscallId::OTHER,
            count: other.0,
            gap_sum_ns: other.1,
        });
    }
    kept.sort_by_key(|t| (t.from, t.to));
    assert_eq!(summary.transitions.as_slice(), kept.as_slice());

    // And the summary survives the wire unchanged (or folded, but valid).
    let mut encoded = summary.clone();
    let mut buf = [0u8; MAX_ENCODED_LEN];
    let bytes = encoded.encode(&mut buf).expect("encode").to_vec();
    assert!(bytes.len() <= MAX_ENCODED_LEN);
    let decoded = Summary::decode(&bytes).expect("decode");
    assert_eq!(decoded, encoded);
    if !encoded.truncated {
        assert_eq!(decoded, summary);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn default_capacities(raw in proptest::collection::vec(event_strategy(), 0..600)) {
        check::<120, 256, 64, 64>(&to_events(&raw));
    }

    #[test]
    fn full_tables_spill_into_other(raw in proptest::collection::vec(event_strategy(), 0..400)) {
        check::<4, 4, 2, 4>(&to_events(&raw));
    }
}

/// Distinct peers the generator picks from: more than the collector
/// follows in a window ([`collector::COLLECT_PEERS`]), TCP and UDP, IPv4
/// and IPv6.
const PEER_CHOICES: u8 = 24;

fn peer_addr(i: u8) -> PeerAddr {
    PeerAddr {
        transport: if i % 3 == 0 { FdKind::Udp } else { FdKind::Tcp },
        ip: if i % 2 == 0 {
            PeerIp::V4([10, 0, 0, i])
        } else {
            PeerIp::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i])
        },
        // Ports in reverse order of addresses, so the tie rule matters.
        port: 9000 - u16::from(i),
    }
}

/// One peer's figures in the batch reference.
#[derive(Clone, Debug)]
struct RefPeer {
    addr: PeerAddr,
    calls: u64,
    bytes: u64,
    total: u64,
    errors: u64,
    last: Option<(SyscallId, i64, u64)>,
}

/// The wall-clock time of monotonic 0 in the peer tests.
const UNIX_BASE: u64 = 1_700_000_000_000_000_000;

/// The collector's peer tables over windows cut at `cuts` (event indices),
/// against a batch reference: per window, the peers in order of first call
/// (the ones still called in the last window first, kept with their last
/// call), the first `COLLECT_PEERS` with their own figures, a silent one
/// giving way to a new one when the table is full, the calls of the rest
/// counted together; the summary lists the 8 with most calls (ties: lower
/// address first) and folds the others.
fn check_peers(events: &[SyscallEvent], cuts: &[usize]) {
    use agent_core::collector::COLLECT_PEERS;
    use agent_core::summary::MAX_PEERS;
    use agent_core::syscall::READ_WRITE_FAMILY;
    let mut c: Box<Collector> = Box::new(Collector::new(0));
    let mut table: Vec<RefPeer> = Vec::new();
    let mut bounds: Vec<usize> = cuts.iter().map(|&i| i.min(events.len())).collect();
    bounds.sort_unstable();
    bounds.push(events.len());
    let mut start = 0;
    let mut window_start_ns = 0;
    for end in bounds {
        let window = &events[start..end];
        let mut folded = PeerRest::default();
        for ev in window {
            c.record(ev);
            let Some(addr) = ev.peer else { continue };
            let id = SyscallId::from_raw(ev.arch, ev.nr);
            let failed = (-4095..=-1).contains(&ev.ret);
            let rw = READ_WRITE_FAMILY.contains(&id.name().unwrap_or(""));
            let bytes = if !failed && ev.ret > 0 && rw {
                ev.ret as u64
            } else {
                0
            };
            let fresh = RefPeer {
                addr,
                calls: 0,
                bytes: 0,
                total: 0,
                errors: 0,
                last: None,
            };
            let at = match table.iter().position(|p| p.addr == addr) {
                Some(i) => Some(i),
                None if table.len() < COLLECT_PEERS => {
                    table.push(fresh);
                    Some(table.len() - 1)
                }
                None => table.iter().position(|p| p.calls == 0).inspect(|&i| {
                    table[i] = fresh;
                }),
            };
            let dur = ev.exit_ns.saturating_sub(ev.entry_ns);
            match at {
                Some(i) => {
                    let p = &mut table[i];
                    p.calls += 1;
                    p.bytes += bytes;
                    p.total += dur;
                    p.errors += failed as u64;
                    p.last = Some((id, ev.ret, ev.exit_ns));
                }
                None => {
                    folded.peers = 1;
                    folded.calls += 1;
                    folded.bytes += bytes;
                    folded.total_ns += dur;
                    folded.errors += failed as u64;
                }
            }
        }
        let run = RunRecord {
            start_unix_ns: UNIX_BASE + window_start_ns,
            ..run_record()
        };
        let summary = c.summarize(RunId([1; 16]), run, Facts::new());
        let got = &summary.peers;

        let mut sorted = table.clone();
        sorted.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.addr.cmp(&b.addr)));
        let mut want = Peers {
            list: Default::default(),
            rest: folded,
        };
        for p in &sorted {
            let peer = Peer {
                addr: p.addr,
                calls: p.calls,
                bytes: p.bytes,
                total_ns: p.total,
                errors: p.errors,
                last: p.last.map(|(id, result, end)| LastCall {
                    id,
                    result,
                    end_unix_ns: UNIX_BASE + end,
                }),
            };
            if want.list.len() < MAX_PEERS {
                want.list.push(peer).unwrap();
            } else {
                want.rest.fold(&peer);
            }
        }
        assert_eq!(got, &want);

        // Stated without the reference: at most 8 listed, most calls first
        // (ties: lower address first), and no call lost.
        assert!(got.list.len() <= MAX_PEERS);
        for w in got.list.windows(2) {
            assert!(
                w[0].calls > w[1].calls || (w[0].calls == w[1].calls && w[0].addr < w[1].addr),
                "{w:?}"
            );
        }
        let with_peer = window.iter().filter(|e| e.peer.is_some()).count() as u64;
        let listed: u64 = got.list.iter().map(|p| p.calls).sum();
        assert_eq!(listed + got.rest.calls, with_peer);
        let bytes: u64 = got.list.iter().map(|p| p.bytes).sum();
        let all_bytes: u64 = table.iter().map(|p| p.bytes).sum::<u64>() + folded.bytes;
        assert_eq!(bytes + got.rest.bytes, all_bytes);

        // The table survives the wire.
        let mut encoded = summary.clone();
        let mut buf = [0u8; MAX_ENCODED_LEN];
        let bytes = encoded.encode(&mut buf).expect("encode").to_vec();
        assert_eq!(
            Summary::decode(&bytes).expect("decode").peers,
            encoded.peers
        );

        // The next window keeps the peers called in this one, with their
        // last call.
        window_start_ns = window.last().map_or(window_start_ns, |e| e.exit_ns);
        c.reset_window(window_start_ns);
        table.retain(|p| p.calls > 0);
        for p in &mut table {
            (p.calls, p.bytes, p.total, p.errors) = (0, 0, 0, 0);
        }
        start = end;
    }
}

fn with_peers(mut events: Vec<SyscallEvent>, peers: &[u8]) -> Vec<SyscallEvent> {
    for (ev, &p) in events.iter_mut().zip(peers.iter().cycle()) {
        ev.peer = (p < PEER_CHOICES).then(|| peer_addr(p));
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// One window, peers from a few (all listed) to more than the table.
    #[test]
    fn peers_match_the_batch_reference(
        raw in proptest::collection::vec(event_strategy(), 0..600),
        // Values >= PEER_CHOICES: a call without a peer.
        peers in proptest::collection::vec(0u8..32, 1..64),
        few in 1u8..12,
    ) {
        let narrow: Vec<u8> = peers.iter().map(|p| p % few).collect();
        check_peers(&with_peers(to_events(&raw), &narrow), &[]);
        check_peers(&with_peers(to_events(&raw), &peers), &[]);
    }

    /// Windows: peers carried across a cut, silent ones giving way.
    #[test]
    fn peers_across_windows(
        raw in proptest::collection::vec(event_strategy(), 0..600),
        peers in proptest::collection::vec(0u8..32, 1..64),
        cuts in proptest::collection::vec(0usize..600, 0..5),
    ) {
        check_peers(&with_peers(to_events(&raw), &peers), &cuts);
    }
}

/// A busy server's clients change every window (a new port per
/// connection): the peers kept from the last window, silent now, must not
/// crowd out the ones called in this one.
#[test]
fn silent_peers_give_way_to_called_ones() {
    let ev = |peer: u8, exit_ns: u64| SyscallEvent {
        tid: 1,
        arch: Arch::X86_64,
        nr: 0,
        args: [3, 0, 100, 0, 0, 0],
        ret: 100,
        entry_ns: exit_ns - 10,
        exit_ns,
        fd_kind: FdKind::Tcp,
        peer: Some(PeerAddr {
            transport: FdKind::Tcp,
            ip: PeerIp::V4([127, 0, 0, 1]),
            port: 1000 + u16::from(peer),
        }),
    };
    let first: Vec<SyscallEvent> = (0..16).map(|p| ev(p, 100 + u64::from(p))).collect();
    let second: Vec<SyscallEvent> = (16..32).map(|p| ev(p, 1000 + u64::from(p))).collect();
    let mut c: Box<Collector> = Box::new(Collector::new(0));
    first.iter().for_each(|e| c.record(e));
    c.reset_window(500);
    second.iter().for_each(|e| c.record(e));
    let s = c.summarize(RunId([0; 16]), run_record(), Facts::new());
    assert_eq!(s.peers.rest.calls, 8, "{:?}", s.peers);
    assert!(s
        .peers
        .list
        .iter()
        .all(|p| p.calls == 1 && p.addr.port >= 1016));
    check_peers(&[first, second].concat(), &[16]);
}

/// The memory bound for the whole collector state, with the
/// default capacities (the `collector` bench prints the exact figure).
#[test]
fn collector_state_fits_in_64_kib() {
    let size = std::mem::size_of::<Collector>();
    assert!(size <= 64 * 1024, "Collector is {size} bytes");
}

/// Per-key counts and the transitions' total count of a summary.
fn counts_of(summary: &Summary) -> (HashMap<Key, u64>, u64) {
    let keys = summary.syscalls.iter().map(|s| (s.key, s.count)).collect();
    let transitions = summary.transitions.iter().map(|t| t.count).sum();
    (keys, transitions)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Windows cut with `Collector::follow` (the tracer's rotation) lose and
    /// double nothing: their counts add up to the whole stream's, and the
    /// consecutive-call state carries over (the transitions add up too).
    #[test]
    fn windows_cut_with_follow_add_up_to_the_whole(
        raw in proptest::collection::vec(event_strategy(), 0..400),
        cuts in proptest::collection::vec(0usize..400, 0..4),
    ) {
        let events = to_events(&raw);
        let mut whole: Box<Collector> = Box::new(Collector::new(0));
        for ev in &events {
            whole.record(ev);
        }
        let (want_keys, want_transitions) =
            counts_of(&whole.summarize(RunId([1; 16]), run_record(), Facts::new()));

        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(events.len())).collect();
        cuts.sort_unstable();
        let mut current: Box<Collector> = Box::new(Collector::new(0));
        let mut keys: HashMap<Key, u64> = HashMap::new();
        let mut transitions = 0;
        let mut add = |c: &Collector| {
            let (k, t) = counts_of(&c.summarize(RunId([1; 16]), run_record(), Facts::new()));
            for (key, n) in k {
                *keys.entry(key).or_default() += n;
            }
            transitions += t;
        };
        let mut from = 0;
        for cut in cuts.iter().copied().chain([events.len()]) {
            for ev in &events[from..cut] {
                current.record(ev);
            }
            from = cut;
            let mut next: Box<Collector> = Box::new(Collector::new(0));
            next.follow(&current, cut as u64);
            add(&current);
            current = next;
        }
        prop_assert_eq!(keys, want_keys);
        prop_assert_eq!(transitions, want_transitions);
    }
}

/// What a per-CPU aggregator (the eBPF backend's kernel maps) holds for
/// one CPU: per key the statistics, per (key, errno) the failures, per
/// transition the count and gap sum. Built here call by call, with its own
/// per-thread previous call.
#[derive(Default)]
struct Partial {
    keys: HashMap<Key, agent_core::stats::KeyStats>,
    errnos: HashMap<(Key, u16), u64>,
    transitions: HashMap<(SyscallId, SyscallId), (u64, u64)>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Statistics aggregated elsewhere on several CPUs and merged with
    /// `merge_key`, `merge_errno` and `merge_transition` give the summary
    /// recording each call gives (tables large enough that the order of
    /// first appearance cannot matter).
    #[test]
    fn merged_partials_equal_recorded_calls(
        raw in proptest::collection::vec(event_strategy(), 0..600),
        cpus in proptest::collection::vec(0usize..3, 600),
    ) {
        let events = to_events(&raw);
        let mut recorded: Box<Collector<120, 256, 64, 2048>> = Box::new(Collector::new(0));
        for ev in &events {
            recorded.record(ev);
        }
        let mut partials: Vec<Partial> = (0..3).map(|_| Partial::default()).collect();
        let mut last: HashMap<u32, (SyscallId, u64)> = HashMap::new();
        for (ev, cpu) in events.iter().zip(&cpus) {
            let p = &mut partials[*cpu];
            let id = SyscallId::from_raw(ev.arch, ev.nr);
            let key = Key { id, fd_kind: ev.fd_kind };
            let s = p.keys.entry(key).or_default();
            s.add_call(ev.duration_ns());
            if let Some((prev, prev_exit)) = last.insert(ev.tid, (id, ev.exit_ns)) {
                let gap = ev.entry_ns.saturating_sub(prev_exit);
                if prev == id {
                    s.add_consecutive(gap);
                }
                let t = p.transitions.entry((prev, id)).or_default();
                t.0 += 1;
                t.1 += gap;
            }
            match ev.errno() {
                Some(e) => {
                    s.add_failure(ev.exit_ns);
                    *p.errnos.entry((key, e)).or_default() += 1;
                }
                None => s.add_result(ev.ret),
            }
            // The aggregator sums the size argument of every call; the
            // merge keeps it for the syscalls that have one.
            s.add_param(ev.args[2]);
        }
        let mut merged: Box<Collector<120, 256, 64, 2048>> = Box::new(Collector::new(0));
        for p in &partials {
            for (key, s) in &p.keys {
                merged.merge_key(*key, s);
            }
        }
        for p in &partials {
            for ((key, errno), n) in &p.errnos {
                merged.merge_errno(*key, *errno, *n);
            }
            for ((from, to), (n, gap)) in &p.transitions {
                merged.merge_transition(*from, *to, *n, *gap);
            }
        }
        prop_assert_eq!(
            merged.summarize(RunId([1; 16]), run_record(), Facts::new()),
            recorded.summarize(RunId([1; 16]), run_record(), Facts::new())
        );
    }
}

/// What a per-CPU aggregator holds per (peer, syscall) (the eBPF
/// backend's `PEERS` map): calls, errors, time, the positive results of
/// the successful calls, and the latest call's end and result.
#[derive(Clone, Copy, Default)]
struct PartialPeer {
    calls: u64,
    errors: u64,
    total_ns: u64,
    ok_result_sum: u64,
    last: Option<(i64, u64)>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Per-peer statistics aggregated elsewhere per (peer, syscall) on
    /// several CPUs and merged with `merge_peer` (bytes counted for the
    /// read/write family only, the latest last call over syscalls and
    /// CPUs) give the peer table recording each call gives, as long as the
    /// collector's peer table has room for every peer (the order of first
    /// call, which decides who is folded beyond it, is not aggregated).
    #[test]
    fn merged_peers_equal_recorded_calls(
        raw in proptest::collection::vec(event_strategy(), 0..600),
        cpus in proptest::collection::vec(0usize..3, 600),
        peers in proptest::collection::vec(0u8..20, 1..40),
    ) {
        use agent_core::collector::COLLECT_PEERS;
        // Peers 0..16 (at most the collector's table), none for >= 16; in
        // the order a tracer sees them end (one call per end time: which
        // of two calls ending at once is the last is not defined).
        let mut events = to_events(&raw);
        events.sort_by_key(|e| e.exit_ns);
        events.dedup_by_key(|e| e.exit_ns);
        let events: Vec<SyscallEvent> = events
            .into_iter()
            .zip(peers.iter().cycle())
            .map(|(mut ev, &p)| {
                ev.peer = ((p as usize) < COLLECT_PEERS).then(|| peer_addr(p));
                ev
            })
            .collect();
        let mut recorded: Box<Collector> = Box::new(Collector::new(0));
        for ev in &events {
            recorded.record(ev);
        }
        let mut partials: Vec<HashMap<(PeerAddr, SyscallId), PartialPeer>> =
            (0..3).map(|_| HashMap::new()).collect();
        for (ev, cpu) in events.iter().zip(&cpus) {
            let Some(addr) = ev.peer else { continue };
            let id = SyscallId::from_raw(ev.arch, ev.nr);
            let p = partials[*cpu].entry((addr, id)).or_default();
            p.calls += 1;
            p.total_ns += ev.duration_ns();
            match ev.errno() {
                Some(_) => p.errors += 1,
                None if ev.ret > 0 => p.ok_result_sum += ev.ret as u64,
                None => {}
            }
            if p.last.is_none_or(|(_, end)| ev.exit_ns >= end) {
                p.last = Some((ev.ret, ev.exit_ns));
            }
        }
        let mut merged: Box<Collector> = Box::new(Collector::new(0));
        for p in &partials {
            for ((addr, id), s) in p {
                let figures = PeerFigures {
                    calls: s.calls,
                    bytes: if id.is_read_write_family() { s.ok_result_sum } else { 0 },
                    total_ns: s.total_ns,
                    errors: s.errors,
                };
                merged.merge_peer(*addr, figures, s.last.map(|(ret, end)| (*id, ret, end)));
            }
        }
        let m = merged.summarize(RunId([1; 16]), run_record(), Facts::new());
        let r = recorded.summarize(RunId([1; 16]), run_record(), Facts::new());
        prop_assert_eq!(m.peers, r.peers);
    }
}
