//! What format version 3 adds to say how much of a run a summary saw: how
//! late its trace began after the process started, and whether it began
//! before the program's first syscall.

use serde::{Deserialize, Serialize};

/// How much of the traced run the trace saw.
///
/// A trace that began from the start (`from_start`) and whose run ended
/// while traced (its `Exit` is `Code` or `Signal`) covered the whole run.
/// The default (no `late_ns`, not from the start) means "not known": every
/// version 1 and 2 summary decodes to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Coverage {
    /// Nanoseconds from the traced process's start (its start time in
    /// `/proc/PID/stat`, in clock ticks: 10 ms on most kernels) to the first
    /// traced syscall; `None`: not measured. The same in every window of a
    /// stream.
    pub late_ns: Option<u64>,
    /// The trace began before the program's first syscall (the agent
    /// started it, itself or through a shim), so no call was missed at the
    /// start; false when it attached to a running process.
    pub from_start: bool,
}

impl Coverage {
    /// A trace the agent began before the program's first syscall.
    pub const FROM_START: Coverage = Coverage {
        late_ns: Some(0),
        from_start: true,
    };

    /// A trace that attached to a process `late_ns` after it started.
    pub fn attached(late_ns: u64) -> Coverage {
        Coverage {
            late_ns: Some(late_ns),
            from_start: false,
        }
    }

    /// Whether the summary is known to have missed the run's first calls
    /// (`None`: not known, a version 1 or 2 summary or an unmeasured start).
    pub fn began_late(&self) -> Option<bool> {
        if self.from_start {
            Some(false)
        } else {
            self.late_ns.map(|_| true)
        }
    }

    /// Checks the rules of the coverage; names the one broken.
    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        if self.from_start && self.late_ns.is_none() {
            return Err("coverage: from the start but lateness not measured");
        }
        Ok(())
    }
}
