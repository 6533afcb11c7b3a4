//! How the engine waits for its tracees' next stop: poll briefly, then
//! sleep.
//!
//! Every ptrace stop wakes the tracer and every resume wakes the tracee.
//! When the sleeper's CPU has gone idle, that wake-up costs far more than
//! the ptrace requests themselves: on this project's 2-vCPU test machines a
//! bare stop-and-resume loop runs `dd bs=64` about 6x slower when tracer and
//! tracee sit on different CPUs than when both share one. Most stops follow
//! the previous resume within microseconds (the tracee only ran one short
//! syscall), so the tracer first polls `waitpid(WNOHANG)` and only then
//! sleeps in `waitpid`: its CPU does not go idle between two stops of a
//! syscall-heavy program.
//!
//! The polling budget adapts, as the kernel's haltpoll idle governor does:
//! it shrinks while stops keep arriving after it has run out (the program
//! blocks: polling would only burn the agent's CPU) and grows back when a
//! stop that had to be slept for came soon after all. The cost is the
//! agent's own CPU time, at most the budget per stop. With a single usable
//! CPU polling cannot help (the tracee cannot run while the tracer polls)
//! and the policy always sleeps.

use std::io;

use crate::sys::{self, Tid, WaitStatus};

/// The polling budget's bounds and its current value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitPolicy {
    max_ns: u64,
    budget_ns: u64,
}

/// The smallest budget grown from zero, ns.
const GROW_START_NS: u64 = 5_000;

impl WaitPolicy {
    /// The default maximum budget, in microseconds: a few times the round
    /// trip of a short syscall under ptrace on the machines measured
    /// (`scripts/bench-tracer` compares against `--spin-us 0`).
    pub const DEFAULT_SPIN_US: u64 = 50;

    /// Always sleep in `waitpid` (what strace does).
    pub const fn blocking() -> WaitPolicy {
        WaitPolicy {
            max_ns: 0,
            budget_ns: 0,
        }
    }

    /// Poll for up to `us` microseconds before sleeping; 0, or a single
    /// usable CPU, means always sleep.
    pub fn spin_us(us: u64) -> WaitPolicy {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            return WaitPolicy::blocking();
        }
        let max_ns = us.saturating_mul(1000);
        WaitPolicy {
            max_ns,
            budget_ns: max_ns,
        }
    }

    /// The largest polling budget in nanoseconds (0: never polls).
    pub fn max_spin_ns(&self) -> u64 {
        self.max_ns
    }

    /// The next report of any tracee; `Ok(None)` when a signal interrupted
    /// the sleep.
    pub fn wait(&mut self) -> io::Result<Option<(Tid, WaitStatus)>> {
        if self.max_ns == 0 {
            return sys::wait_any();
        }
        let start = sys::monotonic_ns();
        if self.budget_ns > 0 {
            loop {
                if let Some(report) = sys::try_wait_any()? {
                    return Ok(Some(report));
                }
                if sys::monotonic_ns().wrapping_sub(start) >= self.budget_ns {
                    break;
                }
                std::thread::yield_now();
            }
        }
        let report = sys::wait_any();
        let waited = sys::monotonic_ns().wrapping_sub(start);
        self.budget_ns = if waited <= self.max_ns {
            // A longer poll would have caught it.
            (self.budget_ns * 2).clamp(GROW_START_NS, self.max_ns)
        } else {
            let half = self.budget_ns / 2;
            if half < GROW_START_NS {
                0
            } else {
                half
            }
        };
        report
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
        assert_eq!(WaitPolicy::spin_us(0).max_spin_ns(), 0);
        assert_eq!(WaitPolicy::blocking().max_spin_ns(), 0);
    }

    #[test]
    // The policy itself reaps the children (that is what is tested).
    #[allow(clippy::zombie_processes)]
    fn waits_for_a_child_and_adapts_the_budget() {
        let mut policy = WaitPolicy::spin_us(50);
        if policy.max_spin_ns() == 0 {
            return; // one usable CPU: nothing to adapt
        }
        // A report long after the budget ran out halves it.
        let child = std::process::Command::new("sleep")
            .arg("0.05")
            .spawn()
            .unwrap();
        let (tid, status) = policy.wait().unwrap().unwrap();
        assert_eq!(tid, child.id() as Tid);
        assert_eq!(status.exited(), Some(0));
        assert_eq!(policy.budget_ns, 25_000);
        // A report that comes within the maximum (here: at once) is caught
        // by polling or, if slept for, grows the budget back.
        let child = std::process::Command::new("true").spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (tid, status) = policy.wait().unwrap().unwrap();
        assert_eq!(tid, child.id() as Tid);
        assert_eq!(status.exited(), Some(0));
        assert!(policy.budget_ns >= 25_000);
    }
}
