//! Syscall numbers with no name: a few distinct ones per window keep rows
//! of their own, named as strace names them (`syscall_0x1f0`); calls of
//! further ones are counted together as `<unknown>`, never dropped. Both
//! ways in: recorded events (the ptrace backend) and merged statistics
//! (the eBPF backend's kernel aggregate).

use std::collections::BTreeMap;

use agent_core::collector::UNKNOWN_ROWS;
use agent_core::stats::KeyStats;
use agent_core::*;

const ENOSYS: i64 = -38;

fn event(tid: u32, nr: u32, at: u64) -> SyscallEvent {
    SyscallEvent {
        tid,
        arch: Arch::X86_64,
        nr,
        args: [0; 6],
        ret: ENOSYS,
        entry_ns: at,
        exit_ns: at + 10,
        fd_kind: FdKind::None,
        peer: None,
    }
}

fn run_record() -> RunRecord {
    RunRecord::new(1_700_000_000_000_000_000, 1, Exit::Code(0), Arch::X86_64)
}

/// Calls per displayed name, and errors per displayed name.
fn by_name(s: &Summary) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for e in &s.syscalls {
        let c: &mut (u64, u64) = out.entry(e.key.id.to_string()).or_default();
        c.0 += e.count;
        c.1 += e.errors();
    }
    out
}

/// The five raw numbers past the last named one, each called a different
/// number of times: 0x1f0 x1, 0x1f1 x2, 0x3ff x3, 0x3fe x4, 0x3fd x5, then
/// one call of a number too large to carry.
fn unknown_calls() -> Vec<SyscallEvent> {
    let mut events = Vec::new();
    let mut at = 1_000;
    for (i, nr) in [0x1f0u32, 0x1f1, 0x3ff, 0x3fe, 0x3fd].iter().enumerate() {
        for _ in 0..=i {
            events.push(event(7, *nr, at));
            at += 100;
        }
    }
    events.push(event(7, 0x10_0000, at));
    events
}

#[test]
fn the_first_unknown_numbers_get_rows_and_the_rest_are_counted_as_unknown() {
    assert_eq!(UNKNOWN_ROWS, 4);
    let events = unknown_calls();
    let mut c: Box<Collector> = Box::new(Collector::new(0));
    for ev in &events {
        c.record(ev);
    }
    let s = c.summarize(RunId([1; 16]), run_record(), Facts::new());
    let rows = by_name(&s);
    let expect: BTreeMap<String, (u64, u64)> = [
        ("syscall_0x1f0", (1, 1)),
        ("syscall_0x1f1", (2, 2)),
        ("syscall_0x3ff", (3, 3)),
        ("syscall_0x3fe", (4, 4)),
        // The fifth distinct number (5 calls) and the one too large to
        // carry (1 call): counted, together.
        ("<unknown>", (6, 6)),
    ]
    .into_iter()
    .map(|(n, c)| (n.to_string(), c))
    .collect();
    assert_eq!(rows, expect);
    assert_eq!(s.run.events, events.len() as u64);
    // Their failures are tallied on their own keys.
    let row = s
        .syscalls
        .iter()
        .find(|e| e.key.id.carried_raw() == Some(0x3ff))
        .unwrap();
    assert_eq!(row.failures.as_ref().unwrap().errnos.as_slice(), &[(38, 3)]);
    // Transitions name them too: 0x1f0 -> 0x1f1, and the fifth number's
    // calls follow each other as <unknown>.
    let t = |from: SyscallId, to: SyscallId| {
        s.transitions
            .iter()
            .find(|t| (t.from, t.to) == (from, to))
            .map(|t| t.count)
    };
    let carried = |nr| SyscallId::carrying_raw(nr).unwrap();
    assert_eq!(t(carried(0x1f0), carried(0x1f1)), Some(1));
    assert_eq!(t(carried(0x3fe), SyscallId::UNKNOWN), Some(1));
    assert_eq!(t(SyscallId::UNKNOWN, SyscallId::UNKNOWN), Some(5));

    // The summary keeps them through its encoding.
    let mut buf = [0u8; 2048];
    let mut copy = s.clone();
    let bytes = copy.encode(&mut buf).unwrap();
    let back = Summary::decode(bytes).unwrap();
    assert_eq!(by_name(&back), expect);
}

#[test]
fn each_window_keeps_its_own_unknown_rows() {
    let events = unknown_calls();
    let mut first: Box<Collector> = Box::new(Collector::new(0));
    for ev in &events[..10] {
        first.record(ev); // 0x1f0, 0x1f1, 0x3ff, 0x3fe: four rows
    }
    let mut second: Box<Collector> = Box::new(Collector::new(0));
    second.follow(&first, 5_000);
    for ev in &events[10..] {
        second.record(ev);
    }
    let rows = by_name(&second.summarize(RunId([2; 16]), run_record(), Facts::new()));
    assert_eq!(rows["syscall_0x3fd"], (5, 5));
    assert_eq!(rows["<unknown>"], (1, 1));
}

#[test]
fn merged_statistics_keep_unknown_rows_as_recorded_ones_do() {
    // The eBPF backend's kernel keys its statistics by the carrying ids;
    // the collector applies the same limit when merging them.
    let mut c: Box<Collector> = Box::new(Collector::new(0));
    let key = |nr| Key {
        id: SyscallId::carrying_raw(nr).unwrap(),
        fd_kind: FdKind::None,
    };
    let stats = |n: u64| {
        let mut s = KeyStats::EMPTY;
        for _ in 0..n {
            s.add_call(10);
            s.add_failure(100);
        }
        s
    };
    let nrs = [0x1f0u32, 0x1f1, 0x3ff, 0x3fe, 0x3fd, 0x3fc];
    for (i, nr) in nrs.iter().enumerate() {
        c.merge_key(key(*nr), &stats(i as u64 + 1));
    }
    for (i, nr) in nrs.iter().enumerate() {
        c.merge_errno(key(*nr), 38, i as u64 + 1);
    }
    c.merge_transition(key(0x3fd).id, key(0x3fc).id, 4, 400);
    c.merge_transition(key(0x1f0).id, key(0x1f1).id, 1, 100);
    let s = c.summarize(RunId([3; 16]), run_record(), Facts::new());
    let rows = by_name(&s);
    assert_eq!(rows["syscall_0x1f0"], (1, 1));
    assert_eq!(rows["syscall_0x3fe"], (4, 4));
    assert_eq!(rows["<unknown>"], (5 + 6, 5 + 6));
    assert_eq!(rows.len(), 5);
    assert_eq!(s.run.events, 21);
    let unknown = s
        .syscalls
        .iter()
        .find(|e| e.key.id == SyscallId::UNKNOWN)
        .unwrap();
    assert_eq!(
        unknown.failures.as_ref().unwrap().errnos.as_slice(),
        &[(38, 11)]
    );
    let pairs: Vec<(String, String, u64)> = s
        .transitions
        .iter()
        .map(|t| (t.from.to_string(), t.to.to_string(), t.count))
        .collect();
    assert!(pairs.contains(&("<unknown>".into(), "<unknown>".into(), 4)));
    assert!(pairs.contains(&("syscall_0x1f0".into(), "syscall_0x1f1".into(), 1)));
}

#[test]
fn calls_of_newer_kernels_have_names_on_every_abi() {
    // Linux 6.17's file_setattr, 6.18's listns, and rseq_slice_yield
    // (after 6.18): strace 7.2 names all three; the `syscalls` crate 0.8.1
    // stops at file_setattr (build.rs's overlay adds the others).
    for arch in Arch::ALL {
        for (nr, name) in [
            (468, "file_getattr"),
            (469, "file_setattr"),
            (470, "listns"),
            (471, "rseq_slice_yield"),
        ] {
            let id = SyscallId::from_raw(arch, nr);
            assert_eq!(id.name(), Some(name), "{arch:?} {nr}");
            assert_eq!(id.to_raw(arch), Some(nr), "{arch:?} {name}");
        }
    }
    assert_eq!(SyscallId::missing_names(), &[] as &[&str]);
}

#[test]
fn carried_numbers_are_named_as_strace_names_them() {
    let id = SyscallId::from_raw_carrying(Arch::X86_64, 0x1d8);
    assert_eq!(id.to_string(), "syscall_0x1d8");
    assert_eq!(id.carried_raw(), Some(0x1d8));
    assert_eq!(id.name(), None);
    assert!(id.is_known());
    assert_eq!(
        SyscallId::from_raw_carrying(Arch::X86_64, 0).name(),
        Some("read")
    );
    assert_eq!(
        SyscallId::from_raw_carrying(Arch::X86_64, u32::MAX),
        SyscallId::UNKNOWN
    );
    assert_eq!(SyscallId::carrying_raw(SyscallId::UNKNOWN_RAW_LIMIT), None);
    // The largest carried id leaves 0xffff free.
    let last = SyscallId::carrying_raw(SyscallId::UNKNOWN_RAW_LIMIT - 1).unwrap();
    assert_eq!(last.0, 0xfffe);
    assert_eq!(SyscallId(0xffff).carried_raw(), None);
    // Far above the named ids.
    assert!(SyscallId::COUNT < SyscallId::UNKNOWN_RAW_BASE as usize);
    // Not a name `--only` accepts.
    assert!(validate_only_list("syscall_0x1d8").is_err());
}
