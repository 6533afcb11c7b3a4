//! How late a trace began: the traced process's start (`/proc/PID/stat`
//! field 22, clock ticks since boot on CLOCK_BOOTTIME) against the first
//! traced syscall (CLOCK_MONOTONIC, the tracer's clock), for the summary's
//! [`Coverage`]. A program the agent started (`run`, a shim) is traced
//! from before its first syscall; one it attached to (`attach`, `watch`)
//! began late by that difference, measured to a clock tick (10 ms on most
//! kernels: the start time's resolution).

use agent_core::Coverage;

use crate::sys::{self, Tid};

/// Where a session's trace began.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceStart {
    /// Not known (the process's start could not be read).
    #[default]
    Unknown,
    /// The agent started the program: nothing was missed at its start.
    FromStart,
    /// The agent attached to a running process that started at this
    /// CLOCK_MONOTONIC time (ns; may be before the clock's zero: then 0).
    Attached { process_start_ns: u64 },
}

impl TraceStart {
    /// The start of an attach to `pid`, from its `/proc/PID/stat`;
    /// [`TraceStart::Unknown`] when that cannot be read.
    pub fn attached_to(pid: Tid) -> TraceStart {
        let Some(start_ticks) = crate::tracee_file::read_proc_text(pid, "stat")
            .and_then(|stat| parse_start_ticks(&stat))
        else {
            return TraceStart::Unknown;
        };
        let start_boot = start_ticks.saturating_mul(sys::ns_per_clock_tick());
        // The clocks differ by the time the machine was suspended: take
        // both now and carry the start over to the tracer's clock.
        let (boot, mono) = (sys::boottime_ns(), sys::monotonic_ns());
        let suspended = boot.saturating_sub(mono);
        TraceStart::Attached {
            process_start_ns: start_boot.saturating_sub(suspended),
        }
    }

    /// The summary's coverage when the first traced syscall entered at
    /// `first_call_ns` (CLOCK_MONOTONIC).
    pub fn coverage(&self, first_call_ns: u64) -> Coverage {
        match *self {
            TraceStart::Unknown => Coverage::default(),
            TraceStart::FromStart => Coverage::FROM_START,
            TraceStart::Attached { process_start_ns } => {
                Coverage::attached(first_call_ns.saturating_sub(process_start_ns))
            }
        }
    }
}

/// The start time (field 22, clock ticks since boot) of a /proc/PID/stat
/// line. The command name (field 2) may hold spaces and parentheses: the
/// fields are counted after its last `)`.
fn parse_start_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Fields from 3 (state) on: the start time is the 20th of them.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ticks_after_an_odd_command_name() {
        let stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 3 4 0 0 20 0 1 0 98765 1000 10 18446744073709551615";
        assert_eq!(parse_start_ticks(stat), Some(98765));
        assert_eq!(parse_start_ticks("42 (x) S 1"), None);
        assert_eq!(parse_start_ticks("no parenthesis"), None);
    }

    #[test]
    fn our_own_start_is_in_the_past_and_late_is_measured_from_it() {
        let TraceStart::Attached { process_start_ns } = TraceStart::attached_to(sys::getpid())
        else {
            panic!("our own /proc/self/stat is readable");
        };
        let now = sys::monotonic_ns();
        assert!(process_start_ns <= now, "{process_start_ns} > {now}");
        let c = TraceStart::Attached { process_start_ns }.coverage(process_start_ns + 5_000);
        assert_eq!(c, Coverage::attached(5_000));
        assert_eq!(TraceStart::FromStart.coverage(0), Coverage::FROM_START);
        assert_eq!(TraceStart::Unknown.coverage(9), Coverage::default());
    }

    #[test]
    fn a_session_keeps_its_first_call_for_every_summary() {
        let mut s = crate::engine::Session::new(1, agent_core::Facts::default());
        assert_eq!(s.summary().coverage, Coverage::default(), "unknown start");
        s.trace_start = TraceStart::Attached {
            process_start_ns: 100,
        };
        s.note_call(500);
        s.note_call(900);
        assert_eq!(s.coverage(), Coverage::attached(400));
        assert_eq!(s.summary().coverage, Coverage::attached(400));
        s.trace_start = TraceStart::FromStart;
        assert_eq!(s.summary().coverage, Coverage::FROM_START);
    }

    #[test]
    fn a_child_started_just_now_started_within_a_tick_or_two() {
        let mut child = std::process::Command::new("sleep")
            .arg("1")
            .spawn()
            .unwrap();
        let start = TraceStart::attached_to(child.id() as Tid);
        let now = sys::monotonic_ns();
        let _ = child.kill();
        let _ = child.wait();
        let TraceStart::Attached { process_start_ns } = start else {
            panic!("{start:?}");
        };
        // Truncated to a tick, and a tick or so to fork and read.
        let late = now.saturating_sub(process_start_ns);
        assert!(
            late < 3 * sys::ns_per_clock_tick() + 50_000_000,
            "{late} ns"
        );
    }
}
