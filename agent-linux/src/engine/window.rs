//! A session's time windows: where the current one starts and ends, and
//! the windows cut but not summarized yet. A leaf; the cutting is in
//! `rotate.rs`, the summaries in `session.rs`.
//!
//! Boundaries fall on multiples of the window length in wall-clock (Unix)
//! time, so that the windows of different hosts line up; the first window
//! runs from the session's start to the first boundary. Each boundary is
//! turned into the monotonic clock the syscalls are stamped with once, at
//! the session's start (a later step of the wall clock moves nothing).
//!

use std::time::Duration;

use agent_core::{Collector, InFlight};

/// The shortest window `--window` takes.
pub const MIN_WINDOW: Duration = Duration::from_secs(1);
/// The longest window `--window` takes.
pub const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// A session's window rotation.
#[derive(Debug)]
pub struct Windows {
    pub(super) len_ns: u64,
    /// The current window's index (1, 2, ...).
    pub(super) index: u32,
    /// Its start, monotonic ns.
    pub(super) start_ns: u64,
    /// Its end (the next boundary), monotonic ns.
    pub(super) end_ns: u64,
    /// Processes (traced leaders) and threads traced at some time in the
    /// current window: those live at its start and those added since.
    pub(super) processes: u32,
    pub(super) threads: u32,
    /// Windows cut and not summarized yet.
    pub(super) ended: Vec<Ended>,
    /// Collectors to reuse (a collector is ~60 KB).
    pub(super) spare: Vec<Box<Collector>>,
}

/// A window cut on the stop path, summarized later by the loop.
#[derive(Debug)]
pub(super) struct Ended {
    pub(super) index: u32,
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    /// `None`: a window in which nothing stopped the tracees (several
    /// boundaries passed at one cut); summarized empty.
    pub(super) collector: Option<Box<Collector>>,
    pub(super) in_flight: InFlight,
    pub(super) processes: u32,
    pub(super) threads: u32,
}

impl Windows {
    /// The window length, ns.
    pub fn len_ns(&self) -> u64 {
        self.len_ns
    }

    /// The current window's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Windows of `len` for a session that started at `start_ns`
    /// (monotonic) = `start_unix_ns` (wall clock), with `processes` and
    /// `threads` traced so far.
    pub(super) fn new(
        len: Duration,
        start_ns: u64,
        start_unix_ns: u64,
        processes: u32,
        threads: u32,
    ) -> Windows {
        let len_ns = u64::try_from(len.as_nanos()).unwrap_or(u64::MAX).max(1);
        // The first boundary strictly after the start.
        let first = (start_unix_ns / len_ns)
            .saturating_add(1)
            .saturating_mul(len_ns);
        Windows {
            len_ns,
            index: 1,
            start_ns,
            end_ns: start_ns.saturating_add(first.saturating_sub(start_unix_ns)),
            processes,
            threads,
            ended: Vec::with_capacity(4),
            spare: vec![Box::new(Collector::new(0))],
        }
    }

    /// A thread was added (`leader`: a process's first).
    pub(super) fn thread_added(&mut self, leader: bool) {
        self.threads = self.threads.saturating_add(1);
        if leader {
            self.processes = self.processes.saturating_add(1);
        }
    }

    /// Ends the current window at its boundary and starts the next one;
    /// `live`: the (processes, threads) traced at the cut.
    pub(super) fn advance(
        &mut self,
        collector: Option<Box<Collector>>,
        in_flight: InFlight,
        live: (u32, u32),
    ) {
        self.ended.push(Ended {
            index: self.index,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            collector,
            in_flight,
            processes: self.processes,
            threads: self.threads,
        });
        self.index = self.index.saturating_add(1);
        self.start_ns = self.end_ns;
        self.end_ns = self.end_ns.saturating_add(self.len_ns);
        (self.processes, self.threads) = live;
    }
}
