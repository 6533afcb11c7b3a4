//! The in-process backend's core (issue 32): what wrappers inside the
//! observed program (an app that observes itself, or a program under
//! `LD_PRELOAD`) do with each call they observed. The wrappers and their
//! installation come on top of this crate; it holds the one part every
//! way of installing them shares:
//!
//! - [`FdKinds`] with [`fd_kind_of`]: what each fd is (file, pipe, TCP,
//!   UDP, Unix, other socket, other), asked of the kernel once per fd as
//!   the ptrace backend asks `/proc`, remembered in one atomic byte per fd.
//! - [`Recorder`]: the process's statistics, one agent-core `Collector`
//!   (the same implementation every backend feeds), recorded into from any
//!   thread, from a signal handler, and from a handler that interrupted
//!   another recording, with no lock that can deadlock, no allocation, and
//!   nothing lost uncounted.
//!
//! - [`got`]: GOT/PLT patching, how an app (or any process that loads the
//!   agent itself) routes the libc calls of its libraries, loaded already
//!   or later, through the wrappers.
//!
//! The recorder calls nothing: the caller gives each event's times and
//! thread id and a key of the calling thread, so the recording can be
//! tested as it is. The few libc calls (the clock, `fstat`, `getsockopt`)
//! are in `sys`, the only `unsafe` here.

mod fd_kinds;
// GOT/PLT patching (issue 32): an FFI layer like `sys` (the loader's
// structures in memory, mprotect, the dlopen entries in assembly), so it
// may use `unsafe`, each block with its SAFETY comment.
#[allow(unsafe_code)]
pub mod got;
mod recorder;
// The one module of this crate that may use `unsafe` (workspace lint
// `unsafe_code = "deny"`): the libc calls the backend makes itself.
#[allow(unsafe_code)]
mod sys;

pub use fd_kinds::{FdKinds, CACHED_FDS};
pub use recorder::{Recorder, RecorderStats, LOST_FACT, RING, SLOTS};
pub use sys::{fd_kind_of, monotonic_ns};
