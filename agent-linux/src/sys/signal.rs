//! Signals: sending them, the agent's handlers, the dispositions a child
//! must get back, the interval timer, and dying of a traced program's
//! signal.
//!
//! Mostly raw `libc`. nix names signals by its `Signal` enum, which has no
//! real-time signals, while these functions take any signal number (a
//! traced program may die of SIGRTMIN+n, and the agent then dies of it
//! too); nix's `sigaction` and `signal` are themselves `unsafe`; it has no
//! `setitimer`. Only `setrlimit` goes through nix.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::raw::{c_int, c_long};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::resource::{setrlimit, Resource};

use super::{check, Tid};

/// setitimer's real-time timer (absent from libc on Android).
const ITIMER_REAL: c_int = 0;

/// Sends `sig` to process `pid`.
pub fn kill(pid: Tid, sig: i32) -> io::Result<()> {
    // SAFETY: kill takes plain integers.
    check(unsafe { libc::kill(pid, sig) } as c_long).map(drop)
}

/// A pidfd for process `pid` (Linux 5.3+; ENOSYS before): while the
/// process it names is not reaped, no other process takes its pid.
pub fn pidfd_open(pid: Tid) -> io::Result<OwnedFd> {
    // SAFETY: plain integers (no flags); a negative result is checked
    // before use.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as c_int) })
}

/// Whether the process of `pidfd` is not reaped yet (running, stopped or
/// a zombie): signal 0, which only checks. EPERM (not ours to signal)
/// says it exists too.
pub fn pidfd_alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: a valid fd, signal 0, no siginfo (null is allowed), no
    // flags.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    ret == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A thread of the agent, to send a signal to.
pub type ThreadHandle = nix::sys::pthread::Pthread;

/// The calling thread.
pub fn current_thread() -> ThreadHandle {
    nix::sys::pthread::pthread_self()
}

/// Sends SIGALRM to one thread of the agent (its handler only sets the
/// tick flag, and a blocking waitpid there returns EINTR).
pub fn alarm_thread(thread: ThreadHandle) -> io::Result<()> {
    nix::sys::pthread::pthread_kill(thread, nix::sys::signal::Signal::SIGALRM).map_err(Into::into)
}

/// Installs `handler` for `sig` without SA_RESTART, so a blocking waitpid
/// returns EINTR when the signal arrives.
pub fn set_handler(sig: i32, handler: extern "C" fn(c_int)) -> io::Result<()> {
    // SAFETY: an all-zero sigaction is valid (empty mask, no flags).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler as usize;
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `sa` is a valid sigaction; `old` receives the previous one.
    check(unsafe { libc::sigaction(sig, &sa, &mut old) } as c_long)?;
    if old.sa_sigaction == libc::SIG_IGN && (0..64).contains(&sig) {
        IGNORED_BEFORE_OUR_HANDLERS.fetch_or(1 << sig, Ordering::SeqCst);
    }
    Ok(())
}

/// Signals (bit N: signal N) that were ignored when the agent put its own
/// handler on them. exec resets handled signals to the default action but
/// keeps ignored ones ignored, so a child must re-ignore these itself to
/// start with the dispositions it would have had without the agent (a
/// program started in the background with SIGINT ignored must not become
/// killable by SIGINT because it is traced).
static IGNORED_BEFORE_OUR_HANDLERS: AtomicU64 = AtomicU64::new(0);

/// In a forked child: ignores again the signals that were ignored before
/// the agent handled them. Async-signal-safe (an atomic load and
/// sigaction calls).
pub(super) fn restore_ignored_signals() {
    let ignored = IGNORED_BEFORE_OUR_HANDLERS.load(Ordering::SeqCst);
    for sig in 1..64 {
        if ignored & (1 << sig) != 0 {
            // SAFETY: an all-zero sigaction with SIG_IGN (0 flags, empty
            // mask) is valid; the old action is not needed.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_IGN;
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
}

/// Arms the real-time interval timer (SIGALRM): first after `first_us`,
/// then every `interval_us` (0: once). `first_us == 0` disarms it.
/// Async-signal-safe (one system call).
pub fn set_timer(first_us: u64, interval_us: u64) {
    let tv = |us: u64| libc::timeval {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_usec: (us % 1_000_000) as libc::suseconds_t,
    };
    let it = libc::itimerval {
        it_interval: tv(interval_us),
        it_value: tv(first_us),
    };
    // SAFETY: setitimer reads `it`; the old value is not needed.
    unsafe { libc::setitimer(ITIMER_REAL as _, &it, std::ptr::null_mut()) };
}

/// Dies of `sig` the way the traced program did: default action, no core
/// file of the agent. Returns only if the signal does not kill.
pub fn die_of_signal(sig: i32) {
    // A zero core limit: the agent's own core file is of no use. A failure
    // only means a core file may be written.
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    // SAFETY: plain system calls on our own process: the default action for
    // `sig`, `sig` unblocked, then the signal itself.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
    }
}
