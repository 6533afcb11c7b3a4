//! The CPU time of a session's processes, per window and per run.
//!
//! Each process's cumulative user and system time (all its threads, the
//! exited ones included) is read from the kernel ([`crate::backend::StopBackend::cpu_time`],
//! /proc/TGID/stat, in clock ticks) when the session first sees it (a
//! process attached to: what it used before does not count; a new child
//! starts at zero), as each of its threads exits (the `PTRACE_EVENT_EXIT`
//! stop, while the process is still whole), when the agent lets its last
//! thread go, and for the live ones at each window cut. A window gets what
//! the readings grew by since the previous cut, so the windows of a run add
//! up exactly to the run's figure. Never read per syscall. A leaf.

use std::collections::HashMap;

use agent_core::CpuTime;

use crate::sys::Tid;

/// One process's readings.
#[derive(Clone, Copy, Debug, Default)]
struct ProcCpu {
    /// What earlier windows already got.
    counted: CpuTime,
    /// The latest reading.
    last: CpuTime,
    /// Its threads still traced.
    live: u32,
}

/// The CPU time of a session's processes.
#[derive(Debug, Default)]
pub struct CpuAccount {
    procs: HashMap<Tid, ProcCpu>,
}

impl CpuAccount {
    /// Whether process `tgid` is known (its first reading taken).
    pub(super) fn knows(&self, tgid: Tid) -> bool {
        self.procs.contains_key(&tgid)
    }

    /// A traced thread of `tgid` was added; `base`: the process's CPU time
    /// so far, for a process not known yet (zero for a new child).
    pub(super) fn thread_added(&mut self, tgid: Tid, base: CpuTime) {
        let p = self.procs.entry(tgid).or_insert(ProcCpu {
            counted: base,
            last: base,
            live: 0,
        });
        p.live = p.live.saturating_add(1);
    }

    /// A traced thread of `tgid` is gone; true when it was the process's
    /// last one.
    pub(super) fn thread_removed(&mut self, tgid: Tid) -> bool {
        match self.procs.get_mut(&tgid) {
            Some(p) => {
                p.live = p.live.saturating_sub(1);
                p.live == 0
            }
            None => false,
        }
    }

    /// A reading of `tgid`'s CPU time (each figure only grows: a stale
    /// reading never takes time back).
    pub(super) fn sample(&mut self, tgid: Tid, now: CpuTime) {
        if let Some(p) = self.procs.get_mut(&tgid) {
            p.last.user_ns = p.last.user_ns.max(now.user_ns);
            p.last.system_ns = p.last.system_ns.max(now.system_ns);
        }
    }

    /// The processes with a thread still traced.
    pub(super) fn live_processes(&self) -> impl Iterator<Item = Tid> + '_ {
        self.procs
            .iter()
            .filter(|(_, p)| p.live > 0)
            .map(|(tgid, _)| *tgid)
    }

    /// What the readings grew by since the last call (a window's CPU
    /// time); forgets the processes that are gone.
    pub(super) fn take(&mut self) -> CpuTime {
        let grown = self.pending();
        for p in self.procs.values_mut() {
            p.counted = p.last;
        }
        self.procs.retain(|_, p| p.live > 0);
        grown
    }

    /// What the readings grew by since the last [`CpuAccount::take`] (the
    /// last window's, or the whole run's CPU time).
    pub fn pending(&self) -> CpuTime {
        let mut sum = CpuTime::default();
        for p in self.procs.values() {
            sum.user_ns = sum
                .user_ns
                .saturating_add(p.last.user_ns.saturating_sub(p.counted.user_ns));
            sum.system_ns = sum
                .system_ns
                .saturating_add(p.last.system_ns.saturating_sub(p.counted.system_ns));
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(user_ns: u64, system_ns: u64) -> CpuTime {
        CpuTime { user_ns, system_ns }
    }

    #[test]
    fn windows_add_up_to_the_run_and_attach_time_is_not_counted() {
        let mut a = CpuAccount::default();
        // Attached to a process that had used 5/1 already.
        a.thread_added(10, cpu(5, 1));
        a.thread_added(10, cpu(99, 99)); // a second thread: base ignored
        a.sample(10, cpu(8, 2));
        let w1 = a.take();
        assert_eq!(w1, cpu(3, 1));
        // A forked child starts at zero; a stale reading takes nothing back.
        a.thread_added(11, CpuTime::default());
        a.sample(11, cpu(4, 0));
        a.sample(10, cpu(7, 2));
        assert!(!a.thread_removed(10));
        assert!(a.thread_removed(11));
        let w2 = a.take();
        assert_eq!(w2, cpu(4, 0));
        assert_eq!(a.live_processes().collect::<Vec<_>>(), vec![10]);
        a.sample(10, cpu(9, 3));
        let last = a.pending();
        assert_eq!(last, cpu(1, 1));
        let total = cpu(
            w1.user_ns + w2.user_ns + last.user_ns,
            w1.system_ns + w2.system_ns + last.system_ns,
        );
        assert_eq!(total, cpu(4 + 4, 2), "(9-5) + 4 user, (3-1) system");
    }
}
