//! What a summary says about how much of a run it saw: how late its trace
//! began after the process started and whether it began before the
//! program's first syscall (format version 3), and which calls its source
//! could see at all (format version 4).

use serde::{Deserialize, Serialize};

/// How much of the traced run the trace saw.
///
/// A trace that began from the start (`from_start`) and whose run ended
/// while traced (its `Exit` is `Code` or `Signal`) covered the whole run,
/// as far as its [`Source`] sees calls.
/// The default (no `late_ns`, not from the start, the kernel's view) means
/// "lateness not known": every version 1 and 2 summary decodes to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Coverage {
    /// Nanoseconds from the traced process's start (its start time in
    /// `/proc/PID/stat`, in clock ticks: 10 ms on most kernels) to the first
    /// traced syscall; `None`: not measured. The same in every window of a
    /// stream.
    pub late_ns: Option<u64>,
    /// The trace began before the program's first syscall (the agent
    /// started it, itself or through a shim), so no call was missed at the
    /// start; false when it attached to a running process. For an
    /// in-process source: the wrappers were in place before the program's
    /// own code made its first call through libc.
    pub from_start: bool,
    /// Which calls the trace could see. Not written here but after the
    /// summary's last version 3 field (format version 4 appends it: see
    /// `Summary`'s `Serialize`), so the version 3 layout of this struct is
    /// unchanged; a version 1 to 3 summary decodes with [`Source::Kernel`].
    #[serde(skip)]
    pub source: Source,
}

/// How the calls of a run were observed: which calls a summary can
/// contain at all.
///
/// The two sources count different things for the same program, by
/// construction: an in-process run has no calls libc makes internally
/// (stdio's writes, malloc's `mmap`/`munmap`/`madvise`, the dynamic
/// loader's `openat`/`read`/`mmap`/`close` before `main`, the resolver's
/// calls inside `getaddrinfo`) and no raw `syscall()`. The diagnosis does
/// not compare runs of different sources.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum Source {
    /// Every syscall the kernel saw the traced threads make, wherever it
    /// was made (ptrace and eBPF backends). Every summary older than
    /// format version 4 was made this way.
    #[default]
    Kernel,
    /// Calls the program made through libc's exported functions, recorded
    /// by wrappers inside the process (`LD_PRELOAD`, GOT patching): not
    /// raw `syscall()`, not the calls libc and the dynamic loader make
    /// internally.
    InProcess,
}

impl Source {
    /// Both sources at once: what a run merged from parts of both sources
    /// (the windows of one stream) may claim. `InProcess` if either part
    /// is: the merged counts are complete only if every part's were, and a
    /// run missing libc's own calls anywhere must not be compared with
    /// kernel-observed runs as if it had them.
    pub fn combined(self, other: Source) -> Source {
        self.max(other)
    }

    /// The source's name in the JSON view and the service's pages
    /// (`kernel`, `in-process`).
    pub fn name(self) -> &'static str {
        match self {
            Source::Kernel => "kernel",
            Source::InProcess => "in-process",
        }
    }

    /// What the source sees, in words, for reports and pages.
    pub fn description(self) -> &'static str {
        match self {
            Source::Kernel => "kernel (every syscall)",
            Source::InProcess => "in-process (libc calls)",
        }
    }
}

impl Coverage {
    /// A trace the agent began before the program's first syscall.
    pub const FROM_START: Coverage = Coverage {
        late_ns: Some(0),
        from_start: true,
        source: Source::Kernel,
    };

    /// A trace that attached to a process `late_ns` after it started.
    pub fn attached(late_ns: u64) -> Coverage {
        Coverage {
            late_ns: Some(late_ns),
            from_start: false,
            source: Source::Kernel,
        }
    }

    /// In-process wrappers in place before the program's own first call
    /// through libc (`LD_PRELOAD`: installed by the library's constructor,
    /// before `main`). What the dynamic loader did before is never seen,
    /// whatever the coverage: that is the source's limit, not lateness.
    pub const fn in_process_from_start() -> Coverage {
        Coverage {
            late_ns: Some(0),
            from_start: true,
            source: Source::InProcess,
        }
    }

    /// In-process wrappers installed in a process `late_ns` after it
    /// started (GOT patching in an app already running).
    pub fn in_process_attached(late_ns: u64) -> Coverage {
        Coverage {
            late_ns: Some(late_ns),
            from_start: false,
            source: Source::InProcess,
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
