//! Waiting for an fd to become readable (the eBPF backend's ring buffer,
//! whose loader hands out only a raw fd). Raw `libc::poll`: nix's wrapper
//! takes a `BorrowedFd`, which a raw fd becomes only through `unsafe`
//! anyway.

use std::io;
use std::os::fd::RawFd;

/// Waits up to `timeout_ms` for `fd` to be readable; `Ok(false)` on
/// timeout or interruption by a signal (the caller checks its stop flag).
pub fn poll_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, its count 1; the kernel only writes
    // `revents`.
    let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if n < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(err);
    }
    Ok(n > 0 && pfd.revents & libc::POLLIN != 0)
}
