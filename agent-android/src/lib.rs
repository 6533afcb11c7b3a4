//! Edge Agent for Android apps (and any native program that prefers a C ABI
//! over running the `edge-agent` command).
//!
//! One safe Rust API ([`api`]) does the work: trace a command with the
//! ptrace tracer of `agent-linux`, fill in the device's facts from Android's
//! system properties ([`device`]), put summaries into the app-private spool,
//! run the uploader, render a summary as JSON, observe the app itself
//! ([`self_observe`]) and take part in the proactive loop with its own runs
//! ([`app_runs`]). Two thin layers expose it:
//!
//! - [`ffi`]: a C ABI, declared in `include/edge_agent.h`. Summaries are at
//!   most [`agent_core::MAX_ENCODED_LEN`] bytes, so callers pass fixed
//!   buffers and no memory ever changes owner across the boundary.
//! - [`jni_api`]: JNI exports for the Java wrapper `dev.edgeagent.EdgeAgent`
//!   (source in `java/`). Errors become Java exceptions with a message.
//!
//! Neither layer lets a panic or an error cross the boundary: every entry
//! point catches both and turns them into an error code or an exception.

pub mod api;
pub mod app_runs;
pub mod device;
pub mod error;
// The C ABI takes raw pointers: the one module of this crate that may use
// `unsafe` (workspace lint `unsafe_code = "deny"`), besides the bionic
// property call in `device`.
#[allow(unsafe_code)]
pub mod ffi;
// JNI exports are `#[no_mangle]` functions, which the `unsafe_code` lint
// counts; the module itself holds no `unsafe` block.
#[allow(unsafe_code)]
pub mod jni_api;
// An app observes itself: the safe half, and the wrappers with their
// hook table (an FFI layer, allowed `unsafe`).
#[allow(unsafe_code)]
mod self_hooks;
pub mod self_observe;
mod stack;

pub use api::{device_id, spool_put, summary_json, trace, upload, TraceRequest};
pub use app_runs::{fetch_directives, run_begin, run_end, set_directives, DirectiveSource};
pub use error::Error;
pub use self_observe::{snapshot_self, start_self, stop_self};
