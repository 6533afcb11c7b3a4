//! A run's table: what every process of one observed run records into.
//! Under `LD_PRELOAD` (`edge-agent run --backend preload`) the agent makes
//! it in a file of the run's private folder and every process of the run
//! maps that file shared, so a process killed by SIGKILL leaves its counts
//! where the agent still reads them, and the run's processes are one set
//! of statistics (as the ptrace backend keeps one per run) without a merge.
//! An app observing itself keeps one in its own memory.
//!
//! The table is plain data: the [`Recorder`] (atomics, try-only locks and
//! fixed arrays), which syscalls are wanted, and the `execve` calls in
//! flight. Its first words say what it is ([`RunTable::is_current`]), so a
//! process of another build never reads it as its own.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use agent_core::{SyscallEvent, SyscallId};

use crate::recorder::Recorder;

/// "EDGEINP" and the layout's version.
const MAGIC: u64 = u64::from_le_bytes(*b"EDGEINP1");

/// `execve` calls a run may have in flight at once.
pub const EXEC_SLOTS: usize = 32;

/// Words of the wanted-syscalls bit set (one bit per [`SyscallId`]).
const ONLY_WORDS: usize = SyscallId::COUNT.div_ceil(64);

/// An `execve` in flight: its entry time, by the calling process.
#[derive(Debug)]
#[repr(C)]
struct PendingExec {
    /// The calling process (0: a free slot).
    pid: AtomicU32,
    /// 1 when the caller is a process the run has not counted yet (a
    /// `vfork` child, which shares its parent's memory and runs no fork
    /// handler): the image it starts counts it.
    uncounted: AtomicU32,
    entry_ns: AtomicU64,
}

/// One observed run's statistics and settings.
#[derive(Debug)]
#[repr(C)]
pub struct RunTable {
    magic: u64,
    layout: u64,
    /// The calls recorded.
    pub recorder: Recorder,
    /// Which syscalls are recorded (bit per id); all set: every one.
    only: [AtomicU64; ONLY_WORDS],
    execs: [PendingExec; EXEC_SLOTS],
    /// Processes that joined the run (each image after an `execve` too
    /// counts once: the agent counts processes as started images do not).
    processes: AtomicU32,
    /// Threads that recorded a call.
    threads: AtomicU32,
}

/// What this build's table looks like: a table made by another build
/// (another layout) is not used.
fn layout() -> u64 {
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    let mut h = core::mem::size_of::<RunTable>() as u64;
    for b in version {
        h = h.wrapping_mul(0x100_0000_01b3) ^ u64::from(*b);
    }
    h
}

impl RunTable {
    /// An empty table whose statistics start at `start_ns`, recording
    /// `only` these syscalls (`None`: all).
    pub fn new(start_ns: u64, only: Option<&[SyscallId]>) -> RunTable {
        let table = RunTable {
            magic: MAGIC,
            layout: layout(),
            recorder: Recorder::new(start_ns),
            only: [const { AtomicU64::new(0) }; ONLY_WORDS],
            execs: [const {
                PendingExec {
                    pid: AtomicU32::new(0),
                    uncounted: AtomicU32::new(0),
                    entry_ns: AtomicU64::new(0),
                }
            }; EXEC_SLOTS],
            processes: AtomicU32::new(0),
            threads: AtomicU32::new(0),
        };
        match only {
            None => table
                .only
                .iter()
                .for_each(|w| w.store(u64::MAX, Ordering::Relaxed)),
            Some(ids) => {
                for id in ids {
                    let i = id.0 as usize;
                    if let Some(word) = table.only.get(i / 64) {
                        word.fetch_or(1 << (i % 64), Ordering::Relaxed);
                    }
                }
            }
        }
        table
    }

    /// Whether the words at the start of a table, read as two `u64`, are
    /// this build's (check before taking memory of unknown origin as a
    /// table).
    pub fn is_current(magic: u64, layout_word: u64) -> bool {
        magic == MAGIC && layout_word == layout()
    }

    /// The table's size, bytes (the file the agent makes is this long).
    pub const fn size() -> usize {
        core::mem::size_of::<RunTable>()
    }

    /// Records nothing from now on (the agent let the run go: its
    /// processes' wrappers pass straight through).
    pub fn stop_recording(&self) {
        self.only.iter().for_each(|w| w.store(0, Ordering::Relaxed));
    }

    /// Whether calls of `id` are recorded.
    #[inline]
    pub fn wants(&self, id: SyscallId) -> bool {
        let i = id.0 as usize;
        self.only
            .get(i / 64)
            .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (i % 64)) != 0)
    }

    /// Records a completed call of thread `tid` (see [`Recorder::record`]).
    #[inline]
    pub fn record(&self, tid: u32, ev: &SyscallEvent) {
        self.recorder.record(tid as usize, ev);
    }

    /// A process joined the run.
    pub fn process_started(&self) {
        self.processes.fetch_add(1, Ordering::Relaxed);
    }

    /// A thread recorded its first call.
    pub fn thread_started(&self) {
        self.threads.fetch_add(1, Ordering::Relaxed);
    }

    /// Processes and threads counted so far.
    pub fn population(&self) -> (u32, u32) {
        (
            self.processes.load(Ordering::Relaxed),
            self.threads.load(Ordering::Relaxed),
        )
    }

    /// Process `pid` is about to `execve` (entered at `entry_ns`). The call
    /// is counted by the new image when it starts ([`RunTable::exec_done`]),
    /// or as a failure by the caller if it returns. False when no slot was
    /// free (the call is then counted as its caller sees it end, a success
    /// not at all: said as lost).
    /// `uncounted`: the caller is not a process the run counted yet.
    pub fn exec_begins(&self, pid: u32, entry_ns: u64, uncounted: bool) -> bool {
        for slot in &self.execs {
            if slot
                .pid
                .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                slot.uncounted.store(uncounted as u32, Ordering::Release);
                slot.entry_ns.store(entry_ns, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// Process `pid`'s `execve` ended: returned (a failure, in the old
    /// image) or succeeded (asked by the new image). The entry time and
    /// whether the caller was uncounted, if the call was in flight.
    pub fn exec_done(&self, pid: u32) -> Option<(u64, bool)> {
        for slot in &self.execs {
            if slot.pid.load(Ordering::Acquire) == pid {
                let entry = slot.entry_ns.load(Ordering::Acquire);
                let uncounted = slot.uncounted.load(Ordering::Acquire) != 0;
                slot.pid.store(0, Ordering::Release);
                return Some((entry, uncounted));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_wanted_calls_are_wanted() {
        let read = SyscallId::from_name("read").unwrap();
        let write = SyscallId::from_name("write").unwrap();
        let all = RunTable::new(0, None);
        assert!(all.wants(read) && all.wants(write));
        let some = RunTable::new(0, Some(&[read]));
        assert!(some.wants(read));
        assert!(!some.wants(write));
    }

    #[test]
    fn an_exec_in_flight_is_found_once_by_its_process() {
        let t = RunTable::new(0, None);
        assert!(t.exec_begins(10, 500, false));
        assert!(t.exec_begins(11, 600, true));
        assert_eq!(t.exec_done(11), Some((600, true)));
        assert_eq!(t.exec_done(11), None);
        assert_eq!(t.exec_done(10), Some((500, false)));
        for pid in 1..=EXEC_SLOTS as u32 {
            assert!(t.exec_begins(pid, 1, false));
        }
        assert!(!t.exec_begins(99, 1, false), "every slot taken");
    }

    #[test]
    fn a_table_says_what_it_is() {
        let t = RunTable::new(0, None);
        assert!(RunTable::is_current(t.magic, t.layout));
        assert!(!RunTable::is_current(t.magic, t.layout ^ 1));
        assert!(!RunTable::is_current(0, t.layout));
    }
}
