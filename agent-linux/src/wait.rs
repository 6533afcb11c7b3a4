//! How the engine waits for its tracees' next stop: poll briefly, then
//! sleep.
//!
//! Every ptrace stop wakes the tracer and every resume wakes the tracee.
//! When the sleeper's CPU has gone idle, that wake-up costs far more than
//! the ptrace requests themselves: on this project's 2-vCPU test machines a
//! bare stop-and-resume loop runs `dd bs=64` about 6x slower when tracer and
//! tracee sit on different CPUs than when both share one, and the scheduler
//! mostly keeps them apart. Most stops follow the previous resume within
//! microseconds (the tracee only ran one short syscall), so the tracer
//! polls `waitpid(WNOHANG)` for a short budget before sleeping in
//! `waitpid`: its CPU does not go idle between two stops of a
//! syscall-heavy program, and a stop needs no wake-up.
//!
//! The cost is the agent's own CPU time: at most the budget per stop, so a
//! program that mostly blocks (network waits) costs little more than
//! before. It does not pay everywhere: when the scheduler happens to keep
//! tracer and tracee on one CPU (a shell starting many short processes),
//! sleeping is faster, and polling keeps them apart. `scripts/bench-tracer`
//! measures both (`--spin-us 0` is the sleeping agent). Choosing the mode
//! at run time from measured stop cycles was tried and dropped: short
//! trials could not see the slow convergence of the scheduler's placement.
//!
//! While polling the tracer yields its CPU on every turn, so a runnable
//! thread sharing that CPU is not held back. With a single usable CPU
//! polling cannot help (the tracee cannot run while the tracer polls) and
//! the policy always sleeps.

use std::io;

use crate::signals;
use crate::sys::{self, Tid, WaitStatus};

/// The polling budget per wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    spin_ns: u64,
}

impl WaitPolicy {
    /// The default budget, in microseconds: a few times the round trip of
    /// a short syscall under ptrace on the machines measured.
    pub const DEFAULT_SPIN_US: u64 = 50;

    /// Always sleep in `waitpid` (what strace does).
    pub const fn blocking() -> WaitPolicy {
        WaitPolicy { spin_ns: 0 }
    }

    /// Poll for up to `us` microseconds before sleeping; 0, or a single
    /// usable CPU, means always sleep.
    pub fn spin_us(us: u64) -> WaitPolicy {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            return WaitPolicy::blocking();
        }
        WaitPolicy {
            spin_ns: us.saturating_mul(1000),
        }
    }

    /// The polling budget in nanoseconds (0: never polls).
    pub fn spin_ns(&self) -> u64 {
        self.spin_ns
    }

    /// The next report of any tracee; `Ok(None)` when a signal interrupted
    /// the sleep.
    pub fn wait(&self) -> io::Result<Option<(Tid, WaitStatus)>> {
        if self.spin_ns > 0 {
            let start = sys::monotonic_ns();
            loop {
                if let Some(report) = sys::try_wait_any()? {
                    return Ok(Some(report));
                }
                if signals::tick_pending() {
                    return Ok(None);
                }
                if sys::monotonic_ns().wrapping_sub(start) >= self.spin_ns {
                    break;
                }
                std::thread::yield_now();
            }
        }
        // A tick (a kick from watch's exec reader) that came while the
        // tracer was busy or polling ends this wait as its signal would
        // have ended the sleep; only one landing between this look and the
        // sleep waits for the next kick.
        if signals::tick_pending() {
            return Ok(None);
        }
        sys::wait_any()
    }
}

impl Default for WaitPolicy {
    fn default() -> WaitPolicy {
        WaitPolicy::spin_us(WaitPolicy::DEFAULT_SPIN_US)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_budget_always_sleeps() {
        assert_eq!(WaitPolicy::spin_us(0).spin_ns(), 0);
        assert_eq!(WaitPolicy::blocking().spin_ns(), 0);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let expected = if cpus < 2 { 0 } else { 50_000 };
        assert_eq!(WaitPolicy::spin_us(50).spin_ns(), expected);
    }

    #[test]
    // The policy itself reaps the children (that is what is tested).
    #[allow(clippy::zombie_processes)]
    fn reports_children_in_both_modes() {
        for policy in [WaitPolicy::spin_us(50), WaitPolicy::blocking()] {
            // One exits at once (caught while polling), one after the
            // budget (caught asleep).
            for (program, arg, code) in [("true", "", 0), ("sh", "sleep 0.05; exit 3", 3)] {
                let mut cmd = std::process::Command::new(program);
                if !arg.is_empty() {
                    cmd.args(["-c", arg]);
                }
                let child = cmd.spawn().unwrap();
                let (tid, status) = policy.wait().unwrap().unwrap();
                assert_eq!(tid, child.id() as Tid);
                assert_eq!(status.exited(), Some(code));
            }
        }
    }
}
