//! waitpid for tracees and children, counted in `COUNTERS.waits`.
//!
//! Raw `libc::waitpid` rather than `nix::sys::wait::waitpid`: nix returns
//! its decoded `WaitStatus`, while the callers need the raw status int
//! (`ExitStatus::from_raw`, the ptrace event in its high bits).

use std::io;
use std::os::raw::c_int;
use std::sync::atomic::Ordering;

use super::{Tid, COUNTERS};

/// waitpid flags: wait for clone children too (threads of tracees), but
/// only for this thread's children and tracees (a library host's other
/// threads keep theirs: ptrace ties tracees to the tracing thread).
const WALL: c_int = 0x4000_0000 | 0x2000_0000;

/// A stop or end reported by waitpid.
#[derive(Clone, Copy, Debug)]
pub struct WaitStatus(pub c_int);

impl WaitStatus {
    pub fn exited(self) -> Option<i32> {
        libc::WIFEXITED(self.0).then(|| libc::WEXITSTATUS(self.0))
    }
    pub fn signaled(self) -> Option<i32> {
        libc::WIFSIGNALED(self.0).then(|| libc::WTERMSIG(self.0))
    }
    pub fn stopped(self) -> Option<i32> {
        libc::WIFSTOPPED(self.0).then(|| libc::WSTOPSIG(self.0))
    }
    /// The ptrace event of an event stop (0 for other stops).
    pub fn event(self) -> i32 {
        (self.0 >> 16) & 0xffff
    }
}

/// Waits for any tracee or child (`__WALL`). `Ok(None)` when interrupted by
/// a signal.
pub fn wait_any() -> io::Result<Option<(Tid, WaitStatus)>> {
    waitpid_any(WALL)
}

/// Like [`wait_any`], but never sleeps: `Ok(None)` when no tracee has a
/// report yet (or a signal interrupted the call).
pub fn try_wait_any() -> io::Result<Option<(Tid, WaitStatus)>> {
    waitpid_any(WALL | libc::WNOHANG)
}

/// `waitpid(-1, flags)`: `Ok(None)` when interrupted, or when `WNOHANG`
/// found nothing to report.
fn waitpid_any(flags: c_int) -> io::Result<Option<(Tid, WaitStatus)>> {
    let mut status: c_int = 0;
    // SAFETY: waitpid writes one int to `status`, which lives on our stack.
    let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
    match pid {
        -1 => {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(None);
            }
            Err(err)
        }
        0 => Ok(None),
        _ => {
            COUNTERS.waits.fetch_add(1, Ordering::Relaxed);
            Ok(Some((pid, WaitStatus(status))))
        }
    }
}

/// Waits for `pid` with `flags` (`libc::WUNTRACED`, ...), retrying on EINTR
/// when `retry` is set; `Ok(None)` when interrupted and not retrying.
pub fn wait_pid(pid: Tid, flags: c_int, retry: bool) -> io::Result<Option<WaitStatus>> {
    loop {
        let mut status: c_int = 0;
        // SAFETY: waitpid writes one int to `status`, which lives on our stack.
        let r = unsafe { libc::waitpid(pid, &mut status, flags | WALL) };
        if r == -1 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                if retry {
                    continue;
                }
                return Ok(None);
            }
            return Err(err);
        }
        return Ok(Some(WaitStatus(status)));
    }
}
