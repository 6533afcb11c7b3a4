//! Starting a traced command: a forked child that stops itself, installs
//! the seccomp prefilter and execs; the close-on-exec pipe it reports a
//! failure on.
//!
//! Everything the child runs (between fork and exec or `_exit`) is raw
//! `libc`: the parent may have other threads, so the child may only make
//! async-signal-safe calls and must not allocate (nix's `execv` builds a
//! vector of pointers; its `prctl` module does not exist on Android).

use std::ffi::CStr;
use std::io;
use std::os::fd::IntoRawFd;
use std::os::raw::{c_int, c_long, c_void};

use nix::fcntl::OFlag;

use super::signal::restore_ignored_signals;
use super::{errno, Tid};

// seccomp (include/uapi/linux/seccomp.h, prctl.h).
const SECCOMP_SET_MODE_FILTER: c_long = 1;
const PR_SET_NO_NEW_PRIVS: c_int = 38;

/// One classic-BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// Installs a seccomp filter on the calling thread (and its future
/// children). Tries without `no_new_privs` first (allowed with
/// CAP_SYS_ADMIN, and keeps set-uid programs working), then with it.
/// Async-signal-safe: called between fork and exec. Raw calls: nix wraps
/// no seccomp(2), and no prctl on Android.
pub fn install_seccomp(filter: &[SockFilter]) -> Result<(), i32> {
    let prog = SockFprog {
        len: filter.len() as u16,
        filter: filter.as_ptr(),
    };
    let set = || {
        // SAFETY: the kernel copies `prog` and the instructions it points
        // to; both outlive the call.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_SET_MODE_FILTER,
                0 as c_long,
                &prog as *const SockFprog,
            )
        }
    };
    if set() == 0 {
        return Ok(());
    }
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes plain integers.
    if unsafe {
        libc::prctl(
            PR_SET_NO_NEW_PRIVS,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    } != 0
    {
        return Err(errno());
    }
    if set() == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// What the child must do between fork and exec.
#[derive(Debug)]
pub struct ChildSetup<'a> {
    /// The executable (already resolved through PATH).
    pub path: &'a CStr,
    /// NULL-terminated argv.
    pub argv: &'a [*const libc::c_char],
    /// The seccomp prefilter, if any.
    pub filter: Option<&'a [SockFilter]>,
    /// NULL-terminated environment; `None`: the agent's own.
    pub envp: Option<&'a [*const libc::c_char]>,
    /// Write end of a close-on-exec pipe for reporting a failure (errno,
    /// preceded by a stage byte).
    pub error_fd: c_int,
}

/// Forks a child that stops itself with SIGSTOP and, once continued,
/// installs the filter and execs the command. Returns the child's pid.
///
/// The stop comes before the filter: once the filter is in, every syscall
/// it selects needs a tracer (without one it fails with ENOSYS), and the
/// tracer seizes the child only at this stop. So the filter may select any
/// syscall, `kill` and `getpid` included.
///
/// The child only makes async-signal-safe calls (the parent may have other
/// threads); everything it needs was allocated before the fork.
pub fn fork_stopped_exec(setup: &ChildSetup<'_>) -> io::Result<Tid> {
    // SAFETY: fork has no preconditions; the child below only makes
    // async-signal-safe system calls before exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid > 0 {
        return Ok(pid);
    }
    // Child.
    let fail = |stage: u8, err: i32| -> ! {
        let mut msg = [0u8; 5];
        msg[0] = stage;
        msg[1..].copy_from_slice(&err.to_ne_bytes());
        // SAFETY: write and _exit are async-signal-safe; `msg` is on our
        // stack.
        unsafe {
            libc::write(setup.error_fd, msg.as_ptr() as *const c_void, msg.len());
            libc::_exit(127)
        }
    };
    restore_ignored_signals();
    // SAFETY: getpid and kill are async-signal-safe. kill is a bare system
    // call (unlike raise, which would leave signal-mask calls to trace).
    unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
    if let Some(filter) = setup.filter {
        if let Err(e) = install_seccomp(filter) {
            fail(b's', e);
        }
    }
    match setup.envp {
        // SAFETY: path, argv and envp are NUL-terminated and outlive the
        // call; execve is async-signal-safe.
        Some(envp) => unsafe {
            libc::execve(setup.path.as_ptr(), setup.argv.as_ptr(), envp.as_ptr())
        },
        // SAFETY: as above; execv is async-signal-safe.
        None => unsafe { libc::execv(setup.path.as_ptr(), setup.argv.as_ptr()) },
    };
    fail(b'e', errno())
}

/// A close-on-exec pipe: (read end, write end).
pub fn cloexec_pipe() -> io::Result<(c_int, c_int)> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    Ok((read.into_raw_fd(), write.into_raw_fd()))
}

// `close` and `read_fd` take plain fd numbers, so they stay on raw libc:
// nix's `close`/`read` want an `OwnedFd`/`AsFd`, and making one from a
// plain number is itself an unsafe promise (that the fd is open and ours)
// this signature cannot back; the raw calls on a wrong fd just fail with
// EBADF.

/// Closes `fd`.
pub fn close(fd: c_int) {
    // SAFETY: closing an fd we own.
    unsafe { libc::close(fd) };
}

/// Reads up to `buf.len()` bytes from `fd`.
pub fn read_fd(fd: c_int, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: read writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut c_void, buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Forks the agent itself, which must have a single thread (checked in
/// `/proc/self/task`: a thread elsewhere could hold a lock, e.g. the
/// allocator's, that the child would never see released). `Ok(None)` in
/// the child, `Ok(Some(pid))` in the parent.
pub fn fork_single_threaded() -> io::Result<Option<Tid>> {
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(format!(
            "the agent runs {threads} threads: it forks only with one"
        )));
    }
    // SAFETY: fork has no preconditions. With the one thread checked above
    // (nothing between the check and the call starts another), the child is
    // a whole copy of the agent and may make any call, allocation included.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid)),
    }
}
