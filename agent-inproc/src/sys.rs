//! The only `unsafe` of the in-process backend: the few libc calls it
//! makes itself, each wrapped safely. None allocates or takes a lock, so
//! each may run inside a wrapper called from a signal handler.

use agent_core::FdKind;

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

fn classify(fd: i32) -> FdKind {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is valid and writable; fstat writes only into it and
    // fails harmlessly (EBADF) on an fd that is not open.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return FdKind::None;
    }
    #[allow(clippy::unnecessary_cast)] // st_mode's width differs by ABI
    let mode = st.st_mode as u32;
    match mode & S_IFMT {
        S_IFSOCK => {
            let option = |name| {
                let mut value: libc::c_int = 0;
                let mut len = core::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: `value` and `len` are valid and writable, `len`
                // is `value`'s size; getsockopt writes at most `len` bytes.
                let ok = unsafe {
                    libc::getsockopt(
                        fd,
                        libc::SOL_SOCKET,
                        name,
                        (&mut value as *mut libc::c_int).cast(),
                        &mut len,
                    )
                } == 0;
                ok.then_some(value as u32 as u64)
            };
            match (
                option(libc::SO_DOMAIN),
                option(libc::SO_TYPE),
                option(libc::SO_PROTOCOL),
            ) {
                (Some(domain), Some(ty), Some(protocol)) => FdKind::of_socket(domain, ty, protocol),
                _ => FdKind::Socket,
            }
        }
        S_IFIFO => FdKind::Pipe,
        0 => FdKind::Other,
        _ => {
            // SAFETY: as for `stat`: a plain C struct, written by fstatfs.
            let mut fs: libc::statfs = unsafe { core::mem::zeroed() };
            // SAFETY: `fs` is valid and writable for the call.
            let known = unsafe { libc::fstatfs(fd, &mut fs) } == 0;
            #[allow(clippy::unnecessary_cast)] // f_type's width differs by ABI
            let magic = fs.f_type as i64;
            if known && [ANON_INODE_FS_MAGIC, PIDFS_MAGIC, NSFS_MAGIC].contains(&magic) {
                FdKind::Other
            } else {
                FdKind::File
            }
        }
    }
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

fn errno() -> i32 {
    // SAFETY: `errno_place` is this thread's errno, valid for its life.
    unsafe { *errno_place() }
}

fn set_errno(value: i32) {
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
