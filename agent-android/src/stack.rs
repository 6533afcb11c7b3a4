//! Runs the library's work on a thread of its own with a known stack.
//!
//! Callers' threads have small stacks (Java threads: 1 MiB or less on
//! Android and the JDK), while a summary is a fixed-size value of about
//! 32 KiB that unoptimized builds copy many times while decoding: run on a
//! JVM thread, decoding overflowed the stack. A dedicated thread with
//! [`STACK_BYTES`] makes the need independent of the caller. Tracing is
//! fine there too: that thread is the tracer for the whole run.

use std::panic::resume_unwind;

use crate::error::Error;

/// Stack of the worker thread.
pub const STACK_BYTES: usize = 16 << 20;

/// Runs `work` on a fresh thread with [`STACK_BYTES`] of stack and returns
/// its result; a panic in `work` is resumed in the caller (where the C and
/// JNI layers catch it).
pub fn run<T: Send>(work: impl FnOnce() -> Result<T, Error> + Send) -> Result<T, Error> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("edge-agent".into())
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, work)
            .map_err(|e| Error::Internal(format!("cannot start a worker thread: {e}")))?;
        handle
            .join()
            .unwrap_or_else(|payload| resume_unwind(payload))
    })
}
