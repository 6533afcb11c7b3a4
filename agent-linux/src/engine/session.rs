//! What the engine hands its caller: one [`Session`] per traced program
//! (its statistics and how it ended), and the engine's own counters. A
//! leaf: it uses nothing of the engine.

use agent_core::{Collector, Exit, Facts, Origin};

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

/// 128 random bits (summary and stream ids). Without an entropy source:
/// the time and the agent's pid, still unique enough on one device.
pub fn random_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    if getrandom::fill(&mut id).is_err() {
        id[..8].copy_from_slice(&unix_now_ns().to_le_bytes());
        id[8..12].copy_from_slice(&(sys::getpid() as u32).to_le_bytes());
        id[12..].copy_from_slice(&sys::monotonic_ns().to_le_bytes()[..4]);
    }
    id
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
