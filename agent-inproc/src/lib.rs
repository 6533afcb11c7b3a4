//! The in-process backend (issue 32): wrappers of libc's functions inside
//! the observed program (an app that observes itself, or a program under
//! `LD_PRELOAD`), that time each call and record it into agent-core's
//! `Collector`. This crate holds what every way of installing them
//! shares:
//!
//! - [`libc_wrappers!`]: the wrapper set, made by the crate that installs
//!   it (`agent-preload` under libc's names; an app's library under its
//!   own, for GOT patching), each filed as the system call libc makes
//!   for it ([`calls`]).
//! - [`RunTable`]: a run's statistics and settings, in memory the agent
//!   can share with every process of the run (a SIGKILL takes nothing).
//! - [`Recorder`]: the statistics, recorded into from any thread, from a
//!   signal handler, and from a handler that interrupted another
//!   recording, with no lock that can deadlock, no allocation, and nothing
//!   lost uncounted.
//! - [`FdKinds`] with [`fd_kind_of`]: what each fd is, asked of the kernel
//!   once per fd as the ptrace backend asks `/proc`.
//!
//! - [`got`]: GOT/PLT patching, how an app (or any process that loads the
//!   agent itself) routes the libc calls of its libraries, loaded already
//!   or later, through the wrappers.
//!
//! [`activate`] starts recording into a table, [`deactivate`] stops: the
//! wrappers then pass straight through (one atomic load each).

mod fd_kinds;
mod fd_peers;
// GOT/PLT patching (issue 32): an FFI layer like `sys` (the loader's
// structures in memory, mprotect, the dlopen entries in assembly), so it
// may use `unsafe`, each block with its SAFETY comment.
#[allow(unsafe_code)]
pub mod got;
mod recorder;
mod table;

pub mod calls;
#[doc(hidden)]
pub mod observe;
mod ret;
mod wrappers;

// The modules of this crate that may use `unsafe` (workspace lint
// `unsafe_code = "deny"`): the calls the backend makes itself, the one
// pointer to the active table, and the lookup of libc's functions.
#[allow(unsafe_code)]
mod active;
#[allow(unsafe_code)]
mod real;
#[allow(unsafe_code)]
mod sys;

pub use active::{activate, deactivate, table as active_table};
pub use fd_kinds::{FdKinds, CACHED_FDS};
pub use fd_peers::{FdPeers, Known, CACHED_PEER_FDS};
pub use real::{Real, Wrapped};
pub use recorder::{Recorder, RecorderStats, LOST_FACT, RING, SLOTS};
pub use sys::{fd_kind_of, monotonic_ns};
pub use table::{RunTable, EXEC_SLOTS};

/// What [`libc_wrappers!`] expands to uses; not an API.
#[doc(hidden)]
pub mod __private {
    pub use crate::calls;
    pub use crate::observe;
    pub use crate::ret::{unresolved, CRet};
    pub use crate::sys::{errno, exit_now, peer_named, set_errno};
    pub use agent_core::FdKind;
    pub use libc;
}
