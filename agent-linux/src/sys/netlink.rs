//! Netlink datagram sockets to the kernel (the process-events connector,
//! `procevents.rs`): open and bind one to a multicast group, send a message
//! to the kernel, receive one datagram. Raw `libc`: nix's `SockProtocol`
//! has no `NETLINK_CONNECTOR`, and its `socket` takes only that enum.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use libc::{c_int, c_void, sockaddr, sockaddr_nl, socklen_t};

/// Opens a netlink datagram socket of `protocol` (e.g.
/// `libc::NETLINK_CONNECTOR`) bound to the multicast `groups` (a bit mask),
/// with the port the kernel picks.
pub fn netlink_socket(protocol: c_int, groups: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain integers; a negative result is checked before use.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            protocol,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut addr = kernel_addr();
    addr.nl_groups = groups;
    // SAFETY: `addr` is a valid sockaddr_nl and its size is passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &addr as *const sockaddr_nl as *const sockaddr,
            size_of::<sockaddr_nl>() as socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// The kernel's netlink address (port 0, no group).
fn kernel_addr() -> sockaddr_nl {
    // SAFETY: sockaddr_nl is plain integers; all zero is valid.
    let mut addr: sockaddr_nl = unsafe { zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr
}

/// Sends `message` (one complete netlink message) to the kernel.
pub fn netlink_send(fd: &OwnedFd, message: &[u8]) -> io::Result<()> {
    let addr = kernel_addr();
    loop {
        // SAFETY: `message` is readable for its length; `addr` is a valid
        // sockaddr_nl of the size passed.
        let n = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                message.as_ptr() as *const c_void,
                message.len(),
                0,
                &addr as *const sockaddr_nl as *const sockaddr,
                size_of::<sockaddr_nl>() as socklen_t,
            )
        };
        if n >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Receives one datagram into `buf`; its length (cut to `buf.len()`).
/// `EINTR` is returned as an error of kind `Interrupted` (the caller
/// checks its stop flag), a receive timeout as `WouldBlock`, and a lost
/// datagram (the socket's buffer overran) as `ENOBUFS`.
pub fn recv_datagram(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recv writes at most `buf.len()` bytes into `buf`.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut c_void,
            buf.len(),
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Sets how long [`recv_datagram`] waits before `WouldBlock` (zero: for
/// ever).
pub fn set_recv_timeout(fd: &OwnedFd, timeout: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    set_option(fd, libc::SO_RCVTIMEO, &tv)
}

/// Asks for a receive buffer of `bytes`; past the system's limit when the
/// agent may (SO_RCVBUFFORCE needs CAP_NET_ADMIN), else up to it.
pub fn set_recv_buffer(fd: &OwnedFd, bytes: usize) -> io::Result<()> {
    let size = bytes.min(c_int::MAX as usize) as c_int;
    set_option(fd, libc::SO_RCVBUFFORCE, &size).or_else(|_| set_option(fd, libc::SO_RCVBUF, &size))
}

fn set_option<T>(fd: &OwnedFd, name: c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a valid T of the size passed, read only.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            value as *const T as *const c_void,
            size_of::<T>() as socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
