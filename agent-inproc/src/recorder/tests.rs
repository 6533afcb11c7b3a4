use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use agent_core::{Arch, Exit, Facts, FdKind, RunId, RunRecord, Summary, SyscallEvent};

use super::*;

/// x86_64's `read` and `write`.
const READ: u32 = 0;
const WRITE: u32 = 1;

fn call(tid: u32, nr: u32, at: u64) -> SyscallEvent {
    SyscallEvent {
        tid,
        arch: Arch::X86_64,
        nr,
        args: [3, 0, 64, 0, 0, 0],
        ret: 64,
        entry_ns: at,
        exit_ns: at + 100,
        fd_kind: FdKind::File,
        peer: None,
    }
}

fn cut(r: &Recorder) -> Summary {
    r.cut(
        RunId([1; 16]),
        RunRecord::new(1_700_000_000_000_000_000, 1, Exit::Code(0), Arch::X86_64),
        Facts::new(),
        1_000_000,
    )
}

/// Calls of syscall `name` in `s`, over fd kinds.
fn count(s: &Summary, name: &str) -> u64 {
    s.syscalls
        .iter()
        .filter(|k| k.key.id.name() == Some(name))
        .map(|k| k.count)
        .sum()
}

fn lost_fact(s: &Summary) -> Option<u64> {
    s.facts.get(LOST_FACT).map(|v| v.parse().unwrap())
}

#[test]
fn calls_are_recorded_at_once_when_no_one_else_records() {
    let r = Recorder::new(0);
    for i in 0..1000 {
        r.record(1, &call(10, READ, i * 1000));
    }
    let s = cut(&r);
    assert_eq!(count(&s, "read"), 1000);
    assert_eq!(
        r.stats(),
        RecorderStats {
            direct: 1000,
            deferred: 0,
            waited: 0,
            gave_up: 0,
            lost: 0
        }
    );
    assert_eq!(lost_fact(&s), None);
}

/// A recording interrupted (by a signal whose handler calls a wrapper, or
/// by another thread holding the lock) does not block the new one: it
/// waits in a ring and is counted at the next recording, nothing lost.
#[test]
fn a_call_made_while_another_records_is_counted_not_blocked() {
    let r = Recorder::new(0);
    r.while_recording(|| {
        for i in 0..10 {
            r.record(1, &call(10, WRITE, i));
        }
    });
    assert_eq!(r.stats().deferred, 0, "still waiting in the ring");
    r.record(1, &call(10, READ, 100));
    let s = cut(&r);
    assert_eq!(count(&s, "write"), 10);
    assert_eq!(count(&s, "read"), 1);
    assert_eq!(
        r.stats(),
        RecorderStats {
            direct: 1,
            deferred: 10,
            waited: 0,
            gave_up: 0,
            lost: 0
        }
    );
    assert!(
        r.slots.iter().all(|s| s.owner.load(Ordering::Relaxed) == 0),
        "slots given back"
    );
}

/// What no ring can take while the lock stays held is counted as lost,
/// and the window's summary says how many.
#[test]
fn calls_beyond_the_rings_are_counted_as_lost() {
    let r = Recorder::new(0);
    let made = 200u64;
    r.while_recording(|| {
        for i in 0..made {
            r.record(7, &call(10, WRITE, i));
        }
    });
    let held = (PROBES * RING) as u64;
    assert_eq!(r.stats().lost, made - held);
    let s = cut(&r);
    assert_eq!(count(&s, "write"), held);
    assert_eq!(lost_fact(&s), Some(made - held));
    // The next window lost nothing.
    r.record(7, &call(10, READ, 1));
    let s = cut(&r);
    assert_eq!(lost_fact(&s), None);
    assert_eq!(count(&s, "read"), 1);
    assert_eq!(count(&s, "write"), 0);
}

/// A cut takes what waits in the rings too.
#[test]
fn a_cut_drains_the_rings() {
    let r = Recorder::new(0);
    r.while_recording(|| r.record(3, &call(10, WRITE, 0)));
    let s = cut(&r);
    assert_eq!(count(&s, "write"), 1);
}

/// Threads recording at once, some holding the lock for a while as a
/// slow recording would: every call is in the statistics or counted as
/// lost, none twice, and the tables stay consistent.
#[test]
fn threads_at_once_lose_nothing_uncounted() {
    const THREADS: u64 = 6;
    const CALLS: u64 = 20_000;
    let r = Arc::new(Recorder::new(0));
    let go = Arc::new(AtomicBool::new(false));
    let workers: std::vec::Vec<_> = (1..=THREADS)
        .map(|t| {
            let (r, go) = (Arc::clone(&r), Arc::clone(&go));
            std::thread::spawn(move || {
                while !go.load(Ordering::Acquire) {
                    core::hint::spin_loop();
                }
                for i in 0..CALLS {
                    let ev = call(t as u32, if i % 2 == 0 { READ } else { WRITE }, i);
                    if i % 997 == 0 {
                        // A handler's call inside a recording.
                        r.while_recording(|| r.record(t as usize, &ev));
                    } else {
                        r.record(t as usize, &ev);
                    }
                }
            })
        })
        .collect();
    go.store(true, Ordering::Release);
    for w in workers {
        w.join().unwrap();
    }
    let s = cut(&r);
    let stats = r.stats();
    let counted = count(&s, "read") + count(&s, "write");
    assert_eq!(counted + stats.lost, THREADS * CALLS, "{stats:?}");
    assert_eq!(counted, stats.direct + stats.deferred + stats.waited);
    assert_eq!(lost_fact(&s).unwrap_or(0), stats.lost);
    assert_eq!(r.pending.load(Ordering::Relaxed), 0);
}

/// Holds the collector's lock on another thread, as thread `key`, until
/// every ring this test's thread can use is full, and `then` longer.
fn hold_until_rings_full(
    r: &Arc<Recorder>,
    key: usize,
    then: std::time::Duration,
) -> std::thread::JoinHandle<()> {
    let r = Arc::clone(r);
    let held = Arc::new(AtomicBool::new(false));
    let h = {
        let held = Arc::clone(&held);
        std::thread::spawn(move || {
            let guard = r.collector.lock();
            r.holder.store(key, Ordering::Relaxed);
            held.store(true, Ordering::Release);
            while r.pending.load(Ordering::Acquire) < (PROBES * RING) as u64 {
                std::thread::yield_now();
            }
            std::thread::sleep(then);
            r.holder.store(0, Ordering::Relaxed);
            drop(guard);
        })
    };
    while !held.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    h
}

/// A thread whose rings are full while another thread's recording is
/// descheduled waits for it rather than losing calls (the preload test's
/// threads lost 498 of 1 200 writes once on a loaded machine).
#[test]
fn a_thread_with_full_rings_waits_for_another_threads_recording() {
    let r = Arc::new(Recorder::new(0));
    let holder = hold_until_rings_full(&r, 99, std::time::Duration::from_millis(1));
    let made = (PROBES * RING) as u64 + 5;
    for i in 0..made {
        r.record(7, &call(10, WRITE, i));
    }
    holder.join().unwrap();
    let stats = r.stats();
    assert_eq!(stats.lost, 0, "{stats:?}");
    assert_eq!(count(&cut(&r), "write"), made, "{stats:?}");
}

/// A holder that never lets go (its process was killed in a recording)
/// is waited for once, for at most WAIT_NS, then not again; a holder that
/// is this thread (a handler interrupted its recording) never.
#[test]
fn a_lock_held_for_good_or_by_this_thread_is_not_waited_for() {
    let made = (PROBES * RING) as u64 + 3;
    // (the holder's key, waits that ran out): another thread's, waited
    // for once; this thread's own, never.
    for (holder, gave_up) in [(99, 1), (7, 0)] {
        let r = Recorder::new(0);
        r.while_recording(|| {
            r.holder.store(holder, Ordering::Relaxed);
            for i in 0..made {
                r.record(7, &call(10, WRITE, i));
            }
        });
        let stats = r.stats();
        assert_eq!((stats.gave_up, stats.lost), (gave_up, 3), "{stats:?}");
    }
}
