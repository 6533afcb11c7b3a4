//! The summary: one run (or one time window of a run) in at most 2048 bytes.
//!
//! Wire format: postcard. The format version comes first, as a varint `u16`,
//! then the [`Summary`] fields in declaration order. `docs/summary-format.md`
//! describes every field, its unit, the versioning rule and the size budget.

pub mod coverage;
mod decode;
mod encode;
pub mod light;
mod merge;
pub mod observe;

use heapless::Vec;
use serde::{Deserialize, Serialize};

pub use crate::event::{PeerAddr, PeerIp};
pub use coverage::{Coverage, Source};
pub use decode::DecodeError;
pub use encode::EncodeError;
pub(crate) use encode::{merge_into_other_syscall, merge_into_other_transition};
pub use light::{IoBytes, Kind};
pub(crate) use merge::top_errnos;
pub use observe::{
    CpuTime, InFlight, InFlightCall, LastCall, Origin, Peer, PeerRest, Peers, MAX_IN_FLIGHT,
    MAX_PEERS,
};

use crate::histogram::Histogram;
use crate::{Arch, Facts, Key, RunId, SyscallId};

/// The version written first in every summary; decoders refuse versions they
/// do not know. Bumped for any change of layout (docs/summary-format.md,
/// "Versioning rule"); a value appended to an enum does not bump it: an
/// older decoder refuses only the summaries that use the new value, as
/// malformed.
///
/// Version 2 appended [`Summary::origin`], [`Summary::cpu`],
/// [`Summary::in_flight`] and [`Summary::peers`] to version 1's layout;
/// [`Summary::decode`] reads both (a version 1 summary gets their empty
/// values).
///
/// Version 3 appended [`Summary::kind`], [`Summary::coverage`] and
/// [`Summary::io`]; a version 1 or 2 summary decodes with a full kind,
/// unknown coverage and no I/O figures.
///
/// Version 4 appended the coverage's [`Source`] (how the calls were
/// observed: the kernel's view or in-process wrappers) after
/// [`Summary::io`]; a version 1 to 3 summary decodes with
/// [`Source::Kernel`], which is true of every one of them (the ptrace and
/// eBPF backends made them all).
pub const FORMAT_VERSION: u16 = 4;
/// The oldest version [`Summary::decode`] still reads.
pub const OLDEST_FORMAT_VERSION: u16 = 1;
/// Hard cap on an encoded summary, bytes.
pub const MAX_ENCODED_LEN: usize = 2048;
/// Most syscall entries a summary holds (the "other" entry included).
pub const MAX_SUMMARY_SYSCALLS: usize = 64;
/// Most transition entries a summary holds (the "other" entry included).
pub const MAX_SUMMARY_TRANSITIONS: usize = 64;
/// How many transitions [`crate::Collector::summarize`] keeps, by count; the
/// rest are folded into the "other" transition.
pub const DEFAULT_SUMMARY_TRANSITIONS: usize = 24;
/// Most errnos kept per entry; the rest are counted in `errno_other`.
pub const MAX_ERRNOS: usize = 4;

/// How the traced program ended, as far as this summary knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exit {
    /// Still running: a time-window summary of a long-running program.
    Running,
    /// Exited with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// The agent detached (attach ended, or the agent was interrupted).
    Detached,
}

/// Events that did not fit the collector's fixed tables. None is lost: each
/// is still counted, in the "other" entry of its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Overflow {
    /// Events counted under the "other" syscall key because the key table
    /// was full.
    pub keys: u64,
    /// Transitions counted under the "other" transition because the
    /// transition table was full.
    pub transitions: u64,
    /// Events of threads beyond the thread table: their consecutive-call and
    /// transition statistics are not kept.
    pub threads: u64,
    /// Failures whose errno found no room in the errno table (counted as
    /// `errno_other`).
    pub errnos: u64,
}

/// What is known of the run as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Start of the run (or window), ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Length of the run (or window), ns.
    pub duration_ns: u64,
    /// How the program ended.
    pub exit: Exit,
    /// The tracer's native ABI (events of 32-bit processes on a 64-bit kernel
    /// carry their own).
    pub arch: Arch,
    /// Processes seen.
    pub processes: u32,
    /// Threads seen (processes included).
    pub threads: u32,
    /// Syscalls seen.
    pub events: u64,
    /// Events that did not fit a table.
    pub overflow: Overflow,
    /// 0 for a whole run; 1, 2, ... for consecutive windows of one traced
    /// run (the windows of a run share `Origin::stream`).
    pub window: u32,
    /// Summaries the device's spool dropped (full) before this one was made.
    pub spool_dropped: u32,
}

impl RunRecord {
    /// A record of one process and thread with nothing counted yet (the
    /// collector fills `events` and `overflow` when it summarizes).
    pub const fn new(start_unix_ns: u64, duration_ns: u64, exit: Exit, arch: Arch) -> RunRecord {
        RunRecord {
            start_unix_ns,
            duration_ns,
            exit,
            arch,
            processes: 1,
            threads: 1,
            events: 0,
            overflow: Overflow {
                keys: 0,
                transitions: 0,
                threads: 0,
                errnos: 0,
            },
            window: 0,
            spool_dropped: 0,
        }
    }
}

/// Spread of call durations; absent when `count == 1`, where it follows
/// from `total_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spread {
    /// Shortest call, ns.
    pub min_ns: u64,
    /// Longest call, ns.
    pub max_ns: u64,
    /// Sum of squared durations, ns².
    pub sum_sq_ns: u128,
    /// Latency histogram.
    pub histogram: Histogram,
}

/// Failures of one key; absent when no call failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failures {
    /// Failed calls.
    pub errors: u64,
    /// The most frequent errnos, `(errno, count)`, most frequent first (ties:
    /// lower errno first).
    pub errnos: Vec<(u16, u64), MAX_ERRNOS>,
    /// Failures with any other errno.
    pub errno_other: u64,
    /// First failure, ns since the start of the run (or window).
    pub first_ns: u64,
    /// Last failure, ns since the start of the run (or window).
    pub last_ns: u64,
}

/// Calls that came right after the same syscall on the same thread; absent
/// when there were none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consecutive {
    /// How many.
    pub count: u64,
    /// Sum of the gaps before them (start of the later minus end of the
    /// earlier), ns.
    pub gap_sum_ns: u64,
}

/// The statistics of one (syscall, fd kind).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallSummary {
    /// The syscall and fd kind.
    pub key: Key,
    /// Calls.
    pub count: u64,
    /// Sum of durations, ns.
    pub total_ns: u64,
    /// Spread of durations (`None` iff `count == 1`).
    pub spread: Option<Spread>,
    /// Failures (`None` iff no call failed).
    pub failures: Option<Failures>,
    /// Consecutive calls (`None` iff there were none).
    pub consecutive: Option<Consecutive>,
    /// Sum of the results of successful calls.
    pub result_sum: i128,
    /// Sum of requested sizes, for the read/write family.
    pub param_sum: Option<u128>,
}

/// Calls of `to` that came right after `from` on the same thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The earlier syscall (`OTHER` with `to == OTHER`: the folded rest).
    pub from: SyscallId,
    /// The later syscall.
    pub to: SyscallId,
    /// How many times.
    pub count: u64,
    /// Sum of the gaps between them, ns.
    pub gap_sum_ns: u64,
}

/// One run's summary.
///
/// Its `Serialize` (in `encode.rs`) writes the fields in declaration
/// order, then `coverage.source` (version 4); [`Summary::decode`] is its
/// one reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Unique id (128 random bits from the device); the service deduplicates
    /// by it.
    pub id: RunId,
    /// The run.
    pub run: RunRecord,
    /// Facts about the run.
    pub facts: Facts,
    /// Whether entries were folded into "other" to fit the size cap.
    pub truncated: bool,
    /// Per-(syscall, fd kind) statistics, in increasing key order; the
    /// "other" entry (key 0) comes first when present.
    pub syscalls: Vec<SyscallSummary, MAX_SUMMARY_SYSCALLS>,
    /// Transitions, in increasing (from, to) order.
    pub transitions: Vec<Transition, MAX_SUMMARY_TRANSITIONS>,
    // Version 2 from here on: a version 1 summary ends above.
    /// Device, stream and window length.
    pub origin: Origin,
    /// CPU time of the traced processes (`None`: not measured).
    pub cpu: Option<CpuTime>,
    /// Calls in flight when the summary was cut.
    pub in_flight: InFlight,
    /// Statistics per socket peer.
    pub peers: Peers,
    // Version 3 from here on: a version 2 summary ends above.
    /// A full trace or a light record.
    pub kind: Kind,
    /// How late the trace began, and (version 4, written after `io`) how
    /// its calls were observed.
    pub coverage: Coverage,
    /// The run's I/O bytes (`None`: not measured).
    pub io: Option<IoBytes>,
    // Version 4 from here on: `coverage.source`.
}

impl SyscallSummary {
    /// Shortest call, ns.
    pub fn min_ns(&self) -> u64 {
        self.spread.as_ref().map_or(self.total_ns, |s| s.min_ns)
    }
    /// Longest call, ns.
    pub fn max_ns(&self) -> u64 {
        self.spread.as_ref().map_or(self.total_ns, |s| s.max_ns)
    }
    /// Sum of squared durations, ns².
    pub fn sum_sq_ns(&self) -> u128 {
        self.spread
            .as_ref()
            .map_or((self.total_ns as u128) * (self.total_ns as u128), |s| {
                s.sum_sq_ns
            })
    }
    /// Latency histogram.
    pub fn histogram(&self) -> Histogram {
        self.spread
            .as_ref()
            .map_or(Histogram::single(self.total_ns), |s| s.histogram)
    }
    /// Failed calls.
    pub fn errors(&self) -> u64 {
        self.failures.as_ref().map_or(0, |f| f.errors)
    }
    /// Consecutive calls.
    pub fn consecutive_count(&self) -> u64 {
        self.consecutive.map_or(0, |c| c.count)
    }
    /// Mean gap before a consecutive call, ns (0 when there were none).
    pub fn gap_mean_ns(&self) -> f64 {
        match self.consecutive {
            Some(c) if c.count > 0 => c.gap_sum_ns as f64 / c.count as f64,
            _ => 0.0,
        }
    }
    /// Mean duration, ns.
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64
        }
    }
    /// Mean result of successful calls (0 when none succeeded).
    pub fn result_mean(&self) -> f64 {
        let ok = self.count.saturating_sub(self.errors());
        if ok == 0 {
            0.0
        } else {
            self.result_sum as f64 / ok as f64
        }
    }
    /// Mean requested size of read/write-family calls.
    pub fn param_mean(&self) -> Option<f64> {
        self.param_sum.map(|p| {
            if self.count == 0 {
                0.0
            } else {
                p as f64 / self.count as f64
            }
        })
    }
}

impl Transition {
    /// Mean gap, ns.
    pub fn gap_mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.gap_sum_ns as f64 / self.count as f64
        }
    }
}

impl Summary {
    /// A summary with no run, facts or entries (the target of
    /// [`Summary::decode_into`]).
    pub fn empty() -> Summary {
        Summary {
            id: RunId::ZERO,
            run: RunRecord {
                processes: 0,
                threads: 0,
                ..RunRecord::new(0, 0, Exit::Running, Arch::X86_64)
            },
            facts: Facts::default(),
            truncated: false,
            syscalls: Vec::new(),
            transitions: Vec::new(),
            origin: Origin::default(),
            cpu: None,
            in_flight: InFlight::default(),
            peers: Peers::default(),
            kind: Kind::Full,
            coverage: Coverage::default(),
            io: None,
        }
    }

    /// A light record of a run noticed without tracing it: the run (its
    /// `events` must be 0), facts, CPU time and I/O bytes, and nothing else.
    pub fn light(
        id: RunId,
        run: RunRecord,
        facts: Facts,
        origin: Origin,
        cpu: Option<CpuTime>,
        io: Option<IoBytes>,
    ) -> Summary {
        Summary {
            id,
            run,
            facts,
            origin,
            cpu,
            io,
            kind: Kind::Light,
            ..Summary::empty()
        }
    }

    /// The entry for `key`.
    pub fn get(&self, key: Key) -> Option<&SyscallSummary> {
        self.syscalls
            .binary_search_by(|s| s.key.cmp(&key))
            .ok()
            .map(|i| &self.syscalls[i])
    }
}
