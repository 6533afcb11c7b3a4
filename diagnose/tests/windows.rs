//! `--merge-windows`: the windows of a run, cut with
//! `Collector::reset_window` from one synthetic event stream, merge into
//! exactly the summary of the whole run; without the flag windows are left
//! out with a note.

use agent_core::{
    Arch, Collector, DeviceId, Exit, Facts, FdKind, Origin, PeerAddr, PeerIp, RunId, RunRecord,
    Source, StreamId, Summary, SyscallEvent, SyscallId,
};
use diagnose::windows::{merge_stream, whole_runs};
use rand::{Rng, SeedableRng};

const BASE_UNIX: u64 = 1_763_700_000_000_000_000;
const WINDOW: u64 = 1_000_000_000;
const DEVICE: DeviceId = DeviceId([0xd1; 16]);
const STREAM: StreamId = StreamId([0x5e; 16]);

fn nr(name: &str) -> u32 {
    SyscallId::from_name(name)
        .unwrap()
        .to_raw(Arch::X86_64)
        .unwrap()
}

/// Three threads making reads and writes on two socket peers and a file,
/// futex waits and failing opens, for about `secs` seconds; in completion
/// order, as the tracer hands them to the collector. Calls last up to
/// 300 ms, so many span a window boundary.
fn events(seed: u64, secs: u64) -> Vec<SyscallEvent> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let peers = [
        PeerAddr {
            transport: FdKind::Tcp,
            ip: PeerIp::V4([192, 0, 2, 1]),
            port: 80,
        },
        PeerAddr {
            transport: FdKind::Udp,
            ip: PeerIp::V4([192, 0, 2, 53]),
            port: 53,
        },
    ];
    let mut all = Vec::new();
    for tid in [100u32, 101, 102] {
        let mut now = rng.random_range(0..1_000_000);
        while now < secs * WINDOW - 400_000_000 {
            let (name, fd_kind, peer, ret) = match rng.random_range(0..10) {
                0..=2 => {
                    let p = peers[rng.random_range(0..2)];
                    let ret = if rng.random_bool(0.1) { -104 } else { 512 };
                    ("read", p.transport, Some(p), ret)
                }
                3..=4 => {
                    let ret = if rng.random_bool(0.05) { -32 } else { 256 };
                    ("write", FdKind::Tcp, Some(peers[0]), ret)
                }
                5 => ("read", FdKind::File, None, 4096),
                6..=7 => {
                    let ret = if rng.random_bool(0.3) { -110 } else { 0 };
                    ("futex", FdKind::None, None, ret)
                }
                _ => {
                    let ret = match rng.random_range(0..4) {
                        0 => -2,
                        1 => -13,
                        _ => 3,
                    };
                    ("openat", FdKind::None, None, ret)
                }
            };
            let entry = now + rng.random_range(1_000..2_000_000);
            let dur = if name == "futex" {
                rng.random_range(1_000..300_000_000)
            } else {
                rng.random_range(500..200_000)
            };
            all.push(SyscallEvent {
                tid,
                arch: Arch::X86_64,
                nr: nr(name),
                args: [4, 0, 512, 0, 0, 0],
                ret,
                entry_ns: entry,
                exit_ns: entry + dur,
                fd_kind,
                peer,
            });
            now = entry + dur;
        }
    }
    all.sort_by_key(|e| (e.exit_ns, e.tid));
    all
}

fn facts() -> Facts {
    let mut f = Facts::new();
    f.program = agent_core::facts::truncated("server");
    f
}

/// The whole run's summary and its windows' (the collector's clock starts
/// at 0 = `BASE_UNIX`, aligned to the window length).
fn whole_and_windows(seed: u64, secs: u64) -> (Summary, Vec<Summary>) {
    let events = events(seed, secs);
    let end = secs * WINDOW - 1;
    let mut whole: Collector = Collector::new(0);
    for e in &events {
        whole.record(e);
    }
    let mut whole = whole.summarize(
        RunId([seed as u8; 16]),
        RunRecord::new(BASE_UNIX, end, Exit::Code(0), Arch::X86_64),
        facts(),
    );
    whole.origin = Origin {
        device: DEVICE,
        stream: STREAM,
        window_ns: 0,
    };

    let mut windows = Vec::new();
    let mut c: Collector = Collector::new(0);
    let mut index: u64 = 0;
    let cut = |c: &Collector, index: u64, duration: u64, exit: Exit| {
        let run = RunRecord {
            window: index as u32 + 1,
            ..RunRecord::new(BASE_UNIX + index * WINDOW, duration, exit, Arch::X86_64)
        };
        let mut id = [seed as u8; 16];
        id[15] = index as u8 + 1;
        let mut s = c.summarize(RunId(id), run, facts());
        s.origin = Origin {
            device: DEVICE,
            stream: STREAM,
            window_ns: WINDOW,
        };
        s
    };
    for e in &events {
        // A call is counted in the window where it completes.
        while e.exit_ns >= (index + 1) * WINDOW {
            windows.push(cut(&c, index, WINDOW, Exit::Running));
            index += 1;
            c.reset_window(index * WINDOW);
        }
        c.record(e);
    }
    windows.push(cut(&c, index, end - index * WINDOW, Exit::Code(0)));
    (whole, windows)
}

#[test]
fn merged_windows_equal_the_whole_run() {
    for seed in 1..6 {
        let (whole, windows) = whole_and_windows(seed, 5);
        assert_eq!(windows.len(), 5, "seed {seed}");
        // The split is real: each window has calls, none has all.
        for w in &windows {
            assert!(w.run.events > 0 && w.run.events < whole.run.events);
            assert!(!w.truncated);
        }
        let merged = merge_stream(&windows);
        // Every entry exactly: counts, times, errors and errnos, failure
        // times, spread and histogram, consecutive calls, results, sizes.
        assert_eq!(merged.syscalls, whole.syscalls, "seed {seed}");
        assert!(whole.syscalls.iter().any(|s| s.errors() > 0));
        assert!(whole.syscalls.iter().any(|s| s.consecutive_count() > 0));
        assert_eq!(merged.transitions, whole.transitions, "seed {seed}");
        assert_eq!(merged.peers, whole.peers, "seed {seed}");
        assert_eq!(merged.run, whole.run, "seed {seed}");
        assert_eq!(merged.origin, whole.origin);
        assert!(!merged.truncated);
        assert_eq!(merged.id, windows[0].id);
    }
}

/// Windows of two sources merged (a stream whose later windows were
/// recorded in-process): the run is in-process, so the diagnosis keeps it
/// away from kernel-observed runs; lateness stays the first window's.
#[test]
fn a_merged_run_is_in_process_if_any_window_is() {
    let (_, mut windows) = whole_and_windows(3, 4);
    for w in &mut windows {
        w.coverage = agent_core::Coverage::attached(5_000);
    }
    assert_eq!(merge_stream(&windows).coverage.source, Source::Kernel);
    windows[2].coverage.source = Source::InProcess;
    let merged = merge_stream(&windows);
    assert_eq!(merged.coverage.source, Source::InProcess);
    assert_eq!(merged.coverage.late_ns, Some(5_000));
    windows[2].coverage.source = Source::Kernel;
    windows[0].coverage.source = Source::InProcess;
    assert_eq!(merge_stream(&windows).coverage.source, Source::InProcess);
}

#[test]
fn without_the_flag_windows_are_left_out_and_with_it_each_stream_is_one_run() {
    let (whole, mut windows) = whole_and_windows(7, 4);
    let (other_whole, mut other) = whole_and_windows(8, 3);
    for w in &mut other {
        w.origin.stream = StreamId([0x77; 16]);
    }
    // Uploads arrive in any order.
    windows.reverse();
    let mut input = vec![whole.clone()];
    input.extend(windows.iter().cloned());
    input.extend(other.iter().cloned());

    let (runs, note) = whole_runs(input.clone(), false);
    assert_eq!(runs, vec![whole.clone()]);
    let note = note.unwrap();
    assert_eq!((note.windows, note.streams, note.merged), (7, 2, false));
    assert!(note.to_string().contains("--merge-windows"), "{note}");

    let (runs, note) = whole_runs(input, true);
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[0], whole);
    assert_eq!(runs[1].syscalls, whole.syscalls);
    assert_eq!(runs[2].syscalls, other_whole.syscalls);
    assert_eq!(runs[2].run.duration_ns, other_whole.run.duration_ns);
    let note = note.unwrap();
    assert_eq!((note.incomplete, note.orphans, note.repeats), (0, 0, 0));
    assert_eq!(
        note.to_string(),
        "merged 7 window summaries into 2 runs (one per stream)"
    );

    // A lost window and a repeated one are said; the same stream id on
    // another device is another stream.
    let mut gappy = windows.clone();
    gappy.retain(|w| w.run.window != 2);
    let mut again = gappy[0].clone();
    again.id.0[0] ^= 1;
    gappy.push(again);
    let mut elsewhere = other[1].clone();
    elsewhere.origin.device = DeviceId([0xd2; 16]);
    gappy.push(elsewhere);
    let (runs, note) = whole_runs(gappy, true);
    assert_eq!(runs.len(), 2);
    let note = note.unwrap();
    assert_eq!((note.incomplete, note.repeats), (2, 1), "{note}");
    assert!(note.to_string().contains("windows missing"), "{note}");
    // Without window 2 its calls are missing from the sum.
    assert!(runs[0].run.events < whole.run.events);

    // No windows: no note.
    assert_eq!(whole_runs(vec![whole.clone()], true), (vec![whole], None));
}
