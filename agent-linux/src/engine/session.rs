//! What the engine hands its caller: one [`Session`] per traced program
//! (its statistics and how it ended), and the engine's own counters. It
//! uses only the engine's leaves [`super::window::Windows`] and
//! [`super::cpu::CpuAccount`].

use std::time::Duration;

use agent_core::{Collector, CpuTime, Exit, Facts, InFlight, Origin, RunRecord, Summary};

use super::cpu::CpuAccount;
use super::window::{Ended, Windows};
use crate::arch::{Abi, Native};
use crate::coverage::TraceStart;

use crate::sys::{self, Tid, WaitStatus};

/// One traced program: the process the agent started or attached to, and
/// every process and thread descending from it.
#[derive(Debug)]
pub struct Session {
    /// The process the session started from.
    pub root: Tid,
    /// Statistics (boxed once: ~60 KB).
    pub collector: Box<Collector>,
    /// Monotonic start, ns.
    pub start_ns: u64,
    /// Wall-clock start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Monotonic end (set when the session ends), ns.
    pub end_ns: u64,
    /// Processes seen.
    pub processes: u32,
    /// Threads seen.
    pub threads: u32,
    /// Threads still traced.
    pub live: u32,
    /// How the root process ended, when it did while traced.
    pub root_status: Option<WaitStatus>,
    /// The agent detached before the end.
    pub detached: bool,
    /// Facts for the summary (filled by the caller).
    pub facts: Facts,
    /// Take the program fact from the root's executable after it execs
    /// (attach and watch: the process may have been caught before its
    /// exec, e.g. a shell's child).
    pub program_from_exec: bool,
    /// Where its summaries come from: the device id (set by the caller;
    /// zero until then), the stream id (random, shared by all the
    /// session's windows) and the window length.
    pub origin: Origin,
    /// Its window rotation (`None`: one summary for the whole run; see
    /// [`Session::set_window`]).
    pub(super) windows: Option<Windows>,
    /// The CPU time of its processes.
    pub(super) cpu: CpuAccount,
    /// The calls in flight when the agent let the session go (empty for a
    /// session that ended).
    pub in_flight_at_end: InFlight,
    /// Where the trace began (set by the caller: started or attached),
    /// for the summaries' coverage.
    pub trace_start: TraceStart,
    /// When the first traced syscall entered (CLOCK_MONOTONIC ns).
    first_call_ns: Option<u64>,
}

impl Session {
    /// A session for `root`, starting now.
    pub fn new(root: Tid, facts: Facts) -> Session {
        let start_ns = sys::monotonic_ns();
        Session {
            root,
            collector: Box::new(Collector::new(start_ns)),
            start_ns,
            start_unix_ns: unix_now_ns(),
            end_ns: start_ns,
            processes: 0,
            threads: 0,
            live: 0,
            root_status: None,
            detached: false,
            facts,
            program_from_exec: false,
            origin: Origin {
                stream: random_id(),
                ..Origin::default()
            },
            windows: None,
            cpu: CpuAccount::default(),
            in_flight_at_end: InFlight::default(),
            trace_start: TraceStart::Unknown,
            first_call_ns: None,
        }
    }

    /// How the program ended, for the summary.
    pub fn exit(&self) -> Exit {
        match self.root_status {
            Some(st) => match (st.exited(), st.signaled()) {
                (Some(code), _) => Exit::Code(code),
                (_, Some(sig)) => Exit::Signal(sig),
                _ => Exit::Detached,
            },
            None if self.detached => Exit::Detached,
            None => Exit::Running,
        }
    }
}

impl Session {
    /// A traced syscall entered at `entry_ns` (both backends call this for
    /// each recorded call: only the first is kept).
    #[inline]
    pub fn note_call(&mut self, entry_ns: u64) {
        if self.first_call_ns.is_none() {
            self.first_call_ns = Some(entry_ns);
        }
    }

    /// How much of the run the trace saw: how late its first traced
    /// syscall came after the process started (before any call: until
    /// now, or the session's end). The same in every window once a call
    /// was traced.
    pub fn coverage(&self) -> agent_core::Coverage {
        let first = self.first_call_ns.unwrap_or_else(|| {
            if self.live == 0 {
                self.end_ns
            } else {
                sys::monotonic_ns()
            }
        });
        self.trace_start.coverage(first)
    }

    /// Cuts the session into windows of `len` (at least 1 ns; the agent
    /// takes [`MIN_WINDOW`] to [`MAX_WINDOW`]), aligned to multiples of
    /// `len` in wall-clock time. Call before the session's first thread.
    pub fn set_window(&mut self, len: Duration) {
        let w = Windows::new(
            len,
            self.start_ns,
            self.start_unix_ns,
            self.processes,
            self.threads,
        );
        self.origin.window_ns = w.len_ns;
        self.windows = Some(w);
    }

    /// A thread of process `tgid` joins the session (`leader`: the
    /// process's first); `cpu_base`: the CPU time the process had used when
    /// first seen (zero for a new child; ignored for a known process).
    pub(crate) fn thread_added(&mut self, tgid: Tid, leader: bool, cpu_base: CpuTime) {
        self.threads = self.threads.saturating_add(1);
        self.live = self.live.saturating_add(1);
        if leader {
            self.processes = self.processes.saturating_add(1);
        }
        if let Some(w) = self.windows.as_mut() {
            w.thread_added(leader);
        }
        self.cpu.thread_added(tgid, cpu_base);
    }

    /// Whether process `tgid`'s CPU time is counted already.
    pub(crate) fn knows_process(&self, tgid: Tid) -> bool {
        self.cpu.knows(tgid)
    }

    /// A reading of process `tgid`'s CPU time (/proc/TGID/stat).
    pub(crate) fn cpu_read(&mut self, tgid: Tid, now: CpuTime) {
        self.cpu.sample(tgid, now);
    }

    /// A thread of `tgid` is gone from the CPU account; true when it was
    /// the process's last.
    pub(crate) fn cpu_thread_removed(&mut self, tgid: Tid) -> bool {
        self.cpu.thread_removed(tgid)
    }

    /// The processes whose CPU time is still read.
    pub(crate) fn cpu_live_processes(&self) -> Vec<Tid> {
        self.cpu.live_processes().collect()
    }

    /// The session's windows (`None`: one summary for the whole run).
    pub fn windows(&self) -> Option<&Windows> {
        self.windows.as_ref()
    }

    /// When the current window ends (monotonic ns); never without windows.
    pub(crate) fn next_cut(&self) -> u64 {
        self.windows.as_ref().map_or(u64::MAX, |w| w.end_ns)
    }

    /// A monotonic time as wall-clock time, through the offset taken at the
    /// session's start (so a time converts the same way in every window).
    pub fn to_unix_ns(&self, mono_ns: u64) -> u64 {
        let unix = self.start_unix_ns as i128 + (mono_ns as i128 - self.start_ns as i128);
        unix.clamp(0, u64::MAX as i128) as u64
    }

    /// The summary of the session's end: the whole run, or its last window
    /// (which carries the real exit). CPU time: what the readings grew by
    /// since the last window. In flight: what was when the agent let go.
    pub fn summary(&self) -> Summary {
        let end = if self.live == 0 {
            self.end_ns
        } else {
            crate::sys::monotonic_ns()
        };
        let (start, window, processes, threads) = match &self.windows {
            Some(w) => (w.start_ns, w.index, w.processes, w.threads),
            None => (self.start_ns, 0, self.processes, self.threads),
        };
        let run = RunRecord {
            processes,
            threads,
            window,
            ..RunRecord::new(
                self.to_unix_ns(start),
                end.saturating_sub(start),
                self.exit(),
                Native::NATIVE,
            )
        };
        let mut summary = self
            .collector
            .summarize(random_id(), run, self.facts.clone());
        summary.origin = self.origin;
        summary.cpu = Some(self.cpu.pending());
        summary.in_flight = self.in_flight_at_end.clone();
        summary.coverage = self.coverage();
        summary
    }

    /// The summary of an ended window (never the last: `Exit::Running`).
    pub(super) fn window_summary(&self, e: &Ended, collector: &Collector, cpu: CpuTime) -> Summary {
        let run = RunRecord {
            processes: e.processes,
            threads: e.threads,
            window: e.index,
            ..RunRecord::new(
                self.to_unix_ns(e.start_ns),
                e.end_ns.saturating_sub(e.start_ns),
                Exit::Running,
                Native::NATIVE,
            )
        };
        let mut summary = collector.summarize(random_id(), run, self.facts.clone());
        summary.origin = self.origin;
        summary.cpu = Some(cpu);
        summary.in_flight = e.in_flight.clone();
        summary.coverage = self.coverage();
        summary
    }
}

/// 128 random bits (a summary's `RunId` or a `StreamId`). Without an
/// entropy source: the time and the agent's pid, still unique enough on
/// one device.
pub fn random_id<Id: From<[u8; 16]>>() -> Id {
    let mut id = [0u8; 16];
    if getrandom::fill(&mut id).is_err() {
        id[..8].copy_from_slice(&unix_now_ns().to_le_bytes());
        id[8..12].copy_from_slice(&(sys::getpid() as u32).to_le_bytes());
        id[12..].copy_from_slice(&sys::monotonic_ns().to_le_bytes()[..4]);
    }
    Id::from(id)
}

/// Nanoseconds since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Counters of the engine's own work, for `--stats`.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineStats {
    /// Syscalls recorded.
    pub syscalls: u64,
    /// Stops handled.
    pub stops: u64,
}
