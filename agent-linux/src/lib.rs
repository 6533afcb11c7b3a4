//! Edge Agent on Linux: the backends behind `edge-agent` (ptrace and eBPF)
//! and what drives them.
//!
//! - `tracer`: the one seam: a [`Tracer`] (ptrace or eBPF) is chosen once
//!   and starts a command ([`Traced`]), attaches to a process, or runs
//!   [`watch`]'s loop, which traces every process whose command line
//!   matches, those already running and those that start later;
//!   [`trace_command`] and [`attach`] are ptrace's own entry points.
//! - [`device_id`] keeps the random id every summary names its device by.
//! - The engine ([`engine`]) follows forks, clones and execs, passes signals
//!   through, handles group-stops with PTRACE_LISTEN, and detaches on
//!   request: the traced program is never harmed. It takes typed stops
//!   (`stop`) from a `backend`: ptrace. Where BPF programs load, the
//!   [`ebpf`] backend feeds the same statistics without stopping anyone.
//! - Syscall details come from PTRACE_GET_SYSCALL_INFO, or on older kernels
//!   from the registers, decoded per architecture in [`arch`].
//! - `unsafe` lives only in [`sys`], the thin system-call layer.

// Public: every layout is built (and unit-tested) on every host, not only
// the one it runs on.
pub mod arch;
mod backend;
mod coverage;
pub mod device_id;
pub mod directives;
pub mod ebpf;
pub mod engine;
mod execs;
pub mod facts;
mod fd;
// Public for agent-android's app runs: the same light records, `/proc`
// reads and directive counting inside an app.
pub mod light;
pub mod preload;
mod procevents;
pub mod relay;
mod seccomp;
pub mod shim;
mod shim_folder;
pub mod signals;
#[cfg(feature = "upload")]
pub mod steering;
mod stop;
pub mod store_queue;
// The one module of this crate that may use `unsafe` (workspace lint
// `unsafe_code = "deny"`): thin, safe wrappers of the system calls. The
// allow covers its files under sys/.
#[allow(unsafe_code)]
pub mod sys;
pub mod trace;
mod tracee_file;
mod tracer;
pub mod wait;
mod watch;
mod watch_ebpf;
mod watch_shed;
mod watching;

pub use facts::PlatformFacts;
pub use trace::{attach, trace_command, AttachOptions, Started, TraceOptions, TraceOutcome};
pub use tracer::{Traced, Tracer};
pub use wait::WaitPolicy;
pub use watch::{Discover, WatchOptions};
pub use watching::{watch, watch_changing, watch_steered};
