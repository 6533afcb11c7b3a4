//! `run --only` keeps its tracer in a process of its own, apart from the
//! PID the user sees and signals.
//!
//! A program traced through a seccomp prefilter cannot run without a
//! tracer: the filter stays in it for good, and once no tracer is attached
//! every filtered syscall fails with ENOSYS. SIGINT and SIGTERM are handled
//! (the tracer serves the program to its end), but SIGKILL cannot be. So
//! `run --only` forks first: the child becomes the tracer (it starts the
//! program, traces it and writes the summary); this process, the one the
//! user started, becomes a relay that forwards SIGINT and SIGTERM to the
//! tracer, waits for it and ends as it ended (the program's own status).
//! `kill -9` of the relay leaves the tracer serving the program, which runs
//! on unharmed, and the summary is still written. What remains: `kill -9`
//! of the tracer process itself (or of the whole process group) still
//! harms the program (docs/edge-agent.md).

use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitCode, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::sys::{self, Tid};

/// The tracer's pid, for the relay's signal handler.
static TRACER: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let tracer = TRACER.load(Ordering::SeqCst);
    if tracer > 0 {
        // kill(2) is async-signal-safe.
        let _ = sys::kill(tracer, sig);
    }
}

/// Runs `tracer` in a child process and relays: returns in the child with
/// the child's own exit code from `tracer`; in this process, forwards
/// SIGINT and SIGTERM to the child and ends as the child ended (the same
/// code, or death by the same signal).
///
/// Must be called while the agent has a single thread (fork copies only
/// the calling thread).
pub fn run_in_tracer_process(tracer: impl FnOnce() -> ExitCode) -> anyhow::Result<ExitCode> {
    let Some(child) = sys::fork_single_threaded()? else {
        return Ok(tracer());
    };
    TRACER.store(child, Ordering::SeqCst);
    sys::set_handler(libc::SIGINT, forward)?;
    sys::set_handler(libc::SIGTERM, forward)?;
    Ok(relay_exit(child))
}

/// Waits for the tracer and ends as it ended.
fn relay_exit(child: Tid) -> ExitCode {
    loop {
        match sys::wait_pid(child, 0, true) {
            Ok(Some(status)) if status.exited().is_some() || status.signaled().is_some() => {
                return end_as(ExitStatus::from_raw(status.0));
            }
            // A stop report (never asked for) or an interrupted wait.
            Ok(_) => {}
            Err(e) => {
                eprintln!("edge-agent: cannot wait for the tracer process {child}: {e}");
                return ExitCode::from(1);
            }
        }
    }
}

/// The agent's own exit for the program's status (`run`, and the relay for
/// its tracer's): the same code, or death by the same signal.
pub fn end_as(status: ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(code as u8);
    }
    if let Some(sig) = status.signal() {
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        sys::die_of_signal(sig);
        return ExitCode::from(128u8.wrapping_add(sig as u8));
    }
    ExitCode::from(1)
}
