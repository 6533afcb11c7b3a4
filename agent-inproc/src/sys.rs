//! The only `unsafe` of the in-process backend's recording path: the few
//! calls it makes itself, each wrapped safely. None allocates or takes a
//! lock, so each may run inside a wrapper called from a signal handler.
//! The fd questions are raw system calls (`syscall(2)`), not libc's
//! functions: under `LD_PRELOAD` libc's `fstat` is our own wrapper, which
//! would ask again.

use agent_core::{FdKind, PeerAddr, PeerIp};

/// Filesystems whose files are not paths: what `/proc` shows as
/// `anon_inode:[...]` (eventfd, epoll, timerfd, ...), pidfds, namespace
/// files. The eBPF backend tells them the same way.
const ANON_INODE_FS_MAGIC: i64 = 0x0904_1934;
const PIDFS_MAGIC: i64 = 0x5049_4446;
const NSFS_MAGIC: i64 = 0x6e73_6673;

/// `st_mode`'s type bits (UAPI values; libc's `mode_t` is 16 bits on
/// 32-bit Android, where `st_mode` is not).
const S_IFMT: u32 = 0o170_000;
const S_IFSOCK: u32 = 0o140_000;
const S_IFIFO: u32 = 0o010_000;

/// The monotonic clock, ns (the vDSO's `clock_gettime`: no system call).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call; CLOCK_MONOTONIC is always supported on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// What `fd` is, asked of the kernel (the same classes as the ptrace
/// backend's `/proc/PID/fd` reading): `None` when it is not open. Leaves
/// `errno` as it found it, so a wrapper may ask after the real call.
pub fn fd_kind_of(fd: i32) -> FdKind {
    let saved = errno();
    let kind = classify(fd);
    set_errno(saved);
    kind
}

/// The kernel's `struct stat` of `fstat` on this ABI, and that call.
#[cfg(target_pointer_width = "64")]
type KernelStat = libc::stat;
#[cfg(target_pointer_width = "64")]
const FSTAT: libc::c_long = crate::calls::SYS_FSTAT;
/// The 32-bit ABIs' `fstat64` and its `struct stat64`.
#[cfg(target_pointer_width = "32")]
type KernelStat = libc::stat64;
#[cfg(target_pointer_width = "32")]
const FSTAT: libc::c_long = libc::SYS_fstat64;

/// `fstat(2)` of `fd`'s file mode, asked of the kernel directly.
fn file_mode(fd: i32) -> Option<u32> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: KernelStat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is valid and writable and is the kernel's struct for
    // this call on this ABI; the call writes only into it and fails
    // harmlessly (EBADF) on an fd that is not open.
    let ok = unsafe { libc::syscall(FSTAT, fd as libc::c_long, &mut st as *mut KernelStat) } == 0;
    #[allow(clippy::unnecessary_cast)] // st_mode's width differs by ABI
    ok.then_some(st.st_mode as u32)
}

/// The magic number of the filesystem `fd` is on.
fn fs_magic(fd: i32) -> Option<i64> {
    #[cfg(target_pointer_width = "64")]
    {
        // SAFETY: a plain C struct, written by the kernel.
        let mut fs: libc::statfs = unsafe { core::mem::zeroed() };
        // SAFETY: `fs` is valid and writable for the call.
        let ok = unsafe {
            libc::syscall(
                crate::calls::SYS_FSTATFS,
                fd as libc::c_long,
                &mut fs as *mut libc::statfs,
            )
        } == 0;
        #[allow(clippy::unnecessary_cast)] // f_type's width differs by ABI
        ok.then_some(fs.f_type as i64)
    }
    #[cfg(target_pointer_width = "32")]
    {
        // SAFETY: a plain C struct, written by the kernel.
        let mut fs: libc::statfs64 = unsafe { core::mem::zeroed() };
        let size = core::mem::size_of::<libc::statfs64>();
        // SAFETY: `fs` is valid and writable, `size` its size.
        let ok = unsafe {
            libc::syscall(
                libc::SYS_fstatfs64,
                fd,
                size,
                &mut fs as *mut libc::statfs64,
            )
        } == 0;
        #[allow(clippy::unnecessary_cast)] // f_type's width differs by ABI
        ok.then_some(fs.f_type as i64)
    }
}

/// An `int` socket option of `fd`, asked of the kernel directly.
fn socket_option(fd: i32, name: libc::c_int) -> Option<u64> {
    let mut value: libc::c_int = 0;
    let mut len = core::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid and writable, `len` is `value`'s
    // size; the kernel writes at most `len` bytes.
    let ok = unsafe {
        libc::syscall(
            libc::SYS_getsockopt,
            fd as libc::c_long,
            libc::SOL_SOCKET as libc::c_long,
            name as libc::c_long,
            &mut value as *mut libc::c_int,
            &mut len as *mut libc::socklen_t,
        )
    } == 0;
    ok.then_some(value as u32 as u64)
}

fn classify(fd: i32) -> FdKind {
    let Some(mode) = file_mode(fd) else {
        return FdKind::None;
    };
    match mode & S_IFMT {
        S_IFSOCK => match (
            socket_option(fd, libc::SO_DOMAIN),
            socket_option(fd, libc::SO_TYPE),
            socket_option(fd, libc::SO_PROTOCOL),
        ) {
            (Some(domain), Some(ty), Some(protocol)) => FdKind::of_socket(domain, ty, protocol),
            _ => FdKind::Socket,
        },
        S_IFIFO => FdKind::Pipe,
        0 => FdKind::Other,
        _ => match fs_magic(fd) {
            Some(magic) if [ANON_INODE_FS_MAGIC, PIDFS_MAGIC, NSFS_MAGIC].contains(&magic) => {
                FdKind::Other
            }
            _ => FdKind::File,
        },
    }
}

/// The remote end of socket `fd` (TCP or UDP, `transport`), when it has
/// one. Leaves `errno` as it found it.
pub fn peer_of(fd: i32, transport: FdKind) -> Option<PeerAddr> {
    let saved = errno();
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut addr: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
    let mut len = core::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `addr` and `len` are valid and writable, `len` is `addr`'s
    // size; the kernel writes at most `len` bytes.
    let ok = unsafe {
        libc::syscall(
            libc::SYS_getpeername,
            fd as libc::c_long,
            &mut addr as *mut libc::sockaddr_storage,
            &mut len as *mut libc::socklen_t,
        )
    } == 0;
    set_errno(saved);
    if !ok {
        return None;
    }
    let (ip, port) = match addr.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in (family AF_INET) into
            // storage large and aligned enough for any address.
            let a =
                unsafe { &*(&addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            // s_addr is in network order in memory already.
            (
                PeerIp::V4(a.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(a.sin_port),
            )
        }
        libc::AF_INET6 => {
            // SAFETY: as above, a sockaddr_in6 (family AF_INET6).
            let a =
                unsafe { &*(&addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            (PeerIp::V6(a.sin6_addr.s6_addr), u16::from_be(a.sin6_port))
        }
        _ => return None,
    };
    Some(PeerAddr {
        transport,
        ip,
        port,
    })
}

/// The socket address at `addr` (`len` bytes, as given to `connect`) as
/// the peer of a `transport` socket (TCP or UDP; other kinds have none).
///
/// # Safety
/// `addr` must be readable for `len` bytes (the kernel read them).
pub unsafe fn peer_named(transport: FdKind, addr: *const u8, len: usize) -> Option<PeerAddr> {
    if !matches!(transport, FdKind::Tcp | FdKind::Udp) || addr.is_null() || len < 2 {
        return None;
    }
    // SAFETY: readable for `len` bytes (the caller's promise), which is
    // at least the family's two; unaligned reads, as the program's buffer
    // may be anywhere.
    let family = unsafe { addr.cast::<libc::sa_family_t>().read_unaligned() } as libc::c_int;
    let (ip, port) = match family {
        libc::AF_INET if len >= core::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: as above, a whole sockaddr_in is readable.
            let a = unsafe { addr.cast::<libc::sockaddr_in>().read_unaligned() };
            (
                PeerIp::V4(a.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(a.sin_port),
            )
        }
        libc::AF_INET6 if len >= core::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, a whole sockaddr_in6 is readable.
            let a = unsafe { addr.cast::<libc::sockaddr_in6>().read_unaligned() };
            (PeerIp::V6(a.sin6_addr.s6_addr), u16::from_be(a.sin6_port))
        }
        // AF_UNSPEC: a UDP socket's peer removed.
        _ => return None,
    };
    Some(PeerAddr {
        transport,
        ip,
        port,
    })
}

/// Lets another thread run (a raw `sched_yield`: never our wrapper, never
/// an error).
pub fn yield_now() {
    // SAFETY: sched_yield takes no arguments and always succeeds.
    unsafe { libc::syscall(libc::SYS_sched_yield) };
}

/// The calling thread's id (a raw `gettid`: one call per thread, then
/// remembered by the caller).
pub fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The calling process's id, asked of the kernel (libc may cache it
/// across a `clone` it did not make).
pub fn getpid() -> u32 {
    // SAFETY: getpid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_getpid) as u32 }
}

/// Ends the process with `status` (the raw `exit_group`: what `_exit`
/// does, for a libc whose `_exit` could not be found).
pub fn exit_now(status: i32) -> ! {
    // SAFETY: exit_group takes an int and does not return.
    unsafe { libc::syscall(libc::SYS_exit_group, status as libc::c_long) };
    unreachable!("exit_group returned")
}

/// This thread's `errno` (glibc and musl: `__errno_location`; bionic:
/// `__errno`).
fn errno_place() -> *mut libc::c_int {
    #[cfg(target_os = "android")]
    // SAFETY: bionic's __errno returns this thread's errno, always valid.
    return unsafe { libc::__errno() };
    #[cfg(not(target_os = "android"))]
    // SAFETY: __errno_location returns this thread's errno, always valid.
    return unsafe { libc::__errno_location() };
}

pub fn errno() -> i32 {
    // SAFETY: `errno_place` is this thread's errno, valid for its life.
    unsafe { *errno_place() }
}

pub fn set_errno(value: i32) {
    // SAFETY: as in `errno`.
    unsafe { *errno_place() = value };
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    /// The kernel's answer for each kind of fd a program meets, as the
    /// ptrace backend names them.
    #[test]
    fn each_kind_of_fd_is_told() {
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(fd_kind_of(file.as_raw_fd()), FdKind::File);
        let dir = std::fs::File::open("/").unwrap();
        assert_eq!(fd_kind_of(dir.as_raw_fd()), FdKind::File);
        let null = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(fd_kind_of(null.as_raw_fd()), FdKind::File);
        let (reader, writer) = std::io::pipe().unwrap();
        assert_eq!(fd_kind_of(reader.as_raw_fd()), FdKind::Pipe);
        assert_eq!(fd_kind_of(writer.as_raw_fd()), FdKind::Pipe);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(fd_kind_of(listener.as_raw_fd()), FdKind::Tcp);
        let v6 = std::net::UdpSocket::bind("[::1]:0")
            .or_else(|_| std::net::UdpSocket::bind("127.0.0.1:0"))
            .unwrap();
        assert_eq!(fd_kind_of(v6.as_raw_fd()), FdKind::Udp);
        let (unix, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(fd_kind_of(unix.as_raw_fd()), FdKind::Unix);
        // An anonymous inode: what /proc shows as anon_inode:[eventpoll].
        assert_eq!(fd_kind_of(epoll_fd()), FdKind::Other);
        // Not open.
        let closed = {
            let f = std::fs::File::open("/dev/null").unwrap();
            f.as_raw_fd()
        };
        assert_eq!(fd_kind_of(closed), FdKind::None);
    }

    /// Asking leaves `errno` as the wrapped call left it.
    #[test]
    fn errno_is_kept() {
        set_errno(libc::EAGAIN);
        assert_eq!(fd_kind_of(-1), FdKind::None);
        assert_eq!(errno(), libc::EAGAIN);
    }

    /// An epoll fd, made by the test (an anonymous inode).
    fn epoll_fd() -> i32 {
        // SAFETY: epoll_create1 takes no pointers; the fd is left open for
        // the rest of the test process.
        unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }
    }
}
