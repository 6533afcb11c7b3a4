//! What format version 3 adds for light monitoring: a summary's kind (a
//! full trace, or a light record of a run made without tracing it) and the
//! run's I/O byte counts.

use serde::{Deserialize, Serialize};

/// What a summary records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Kind {
    /// Per-syscall statistics of a traced run or window.
    #[default]
    Full,
    /// A run noticed without tracing it: only what `/proc` gives for free
    /// (start, duration, exit, CPU time, I/O bytes, facts); no syscall,
    /// transition, in-flight or peer entries.
    Light,
}

/// Bytes the run's processes moved through read- and write-family calls,
/// of any file or socket (`rchar` and `wchar` of `/proc/PID/io`; page-cache
/// hits count, so this is what the program asked for, not disk traffic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IoBytes {
    /// Bytes read (`rchar`).
    pub read: u64,
    /// Bytes written (`wchar`).
    pub written: u64,
}
