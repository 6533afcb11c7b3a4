//! What each fd refers to, resolved once per (fd table, fd) from
//! `/proc/TID/fd/N` and cached until the fd can have changed: on close,
//! close_range, dup2/dup3 onto it, a syscall returning it as a new fd, and
//! exec (the table is replaced). Tasks that share a table (CLONE_FILES)
//! share one cache.

use std::cell::RefCell;
use std::ffi::CStr;
use std::rc::Rc;

use agent_core::{FdKind, SyscallId};

use crate::sys::{self, Tid};

/// File type bits of `st_mode` (`mode_t` is 16 bits on some targets, so
/// these are plain u32 here).
pub const S_IFIFO: u32 = 0o010000;
/// A socket.
pub const S_IFSOCK: u32 = 0o140000;
/// A regular file.
pub const S_IFREG: u32 = 0o100000;

/// Fds above this are resolved every time rather than cached (keeps the
/// cache's memory bounded by a hostile fd number).
const MAX_CACHED_FD: usize = 1 << 16;

/// One fd table's cache: `kinds[fd]` is 0 (unknown) or 1 + `FdKind`.
#[derive(Debug, Default)]
pub struct FdTable {
    kinds: Vec<u8>,
}

/// A cache shared by the tasks that share the fd table.
pub type SharedFds = Rc<RefCell<FdTable>>;

/// A fresh, empty cache.
pub fn new_table() -> SharedFds {
    Rc::new(RefCell::new(FdTable { kinds: vec![0; 64] }))
}

impl FdTable {
    /// The kind of `fd` in task `tid`'s table, from the cache or `/proc`.
    /// `FdKind::None` when it is not an open fd.
    pub fn kind(&mut self, tid: Tid, fd: i64) -> FdKind {
        if !(0..=i32::MAX as i64).contains(&fd) {
            return FdKind::None;
        }
        let slot = fd as usize;
        if let Some(&k) = self.kinds.get(slot) {
            if k != 0 {
                return FdKind::from_u8(k - 1).unwrap_or(FdKind::None);
            }
        }
        let kind = resolve(tid, fd as i32);
        if kind != FdKind::None && slot < MAX_CACHED_FD {
            if slot >= self.kinds.len() {
                self.kinds.resize((slot + 1).next_power_of_two(), 0);
            }
            self.kinds[slot] = kind as u8 + 1;
        }
        kind
    }

    /// Forgets `fd`.
    pub fn invalidate(&mut self, fd: i64) {
        if let Ok(slot) = usize::try_from(fd) {
            if let Some(k) = self.kinds.get_mut(slot) {
                *k = 0;
            }
        }
    }

    /// Forgets fds `first..=last`.
    pub fn invalidate_range(&mut self, first: u64, last: u64) {
        let len = self.kinds.len() as u64;
        if first >= len {
            return;
        }
        let end = last.min(len - 1);
        for k in &mut self.kinds[first as usize..=end as usize] {
            *k = 0;
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.kinds.iter_mut().for_each(|k| *k = 0);
    }
}

/// Reads what `/proc/TID/fd/FD` points to. No allocation: the path and the
/// link target live on the stack.
pub fn resolve(tid: Tid, fd: i32) -> FdKind {
    let mut path = [0u8; 48];
    let mut len = 0;
    path[..6].copy_from_slice(b"/proc/");
    len += 6;
    len += write_decimal(&mut path[len..], tid as u64);
    path[len..len + 4].copy_from_slice(b"/fd/");
    len += 4;
    len += write_decimal(&mut path[len..], fd as u64);
    path[len] = 0;
    let Ok(cpath) = CStr::from_bytes_with_nul(&path[..=len]) else {
        return FdKind::None;
    };
    let mut target = [0u8; 64];
    let Ok(n) = sys::readlink(cpath, &mut target) else {
        return FdKind::None;
    };
    classify_link(&target[..n], || sys::file_type(cpath).ok())
}

/// The kind of an fd from its `/proc` link target; `file_type` stats it
/// (needed only for paths: a named FIFO or socket looks like a file).
pub fn classify_link(target: &[u8], file_type: impl FnOnce() -> Option<u32>) -> FdKind {
    if target.starts_with(b"socket:[") {
        FdKind::Socket
    } else if target.starts_with(b"pipe:[") {
        FdKind::Pipe
    } else if target.starts_with(b"/") {
        match file_type() {
            Some(t) if t == S_IFIFO => FdKind::Pipe,
            Some(t) if t == S_IFSOCK => FdKind::Socket,
            _ => FdKind::File,
        }
    } else {
        // anon_inode:[eventfd], anon_inode:[eventpoll], net:[...], ...
        FdKind::Other
    }
}

fn write_decimal(out: &mut [u8], mut v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    n
}

/// How a syscall involves fds: which argument is one, and what it does to
/// the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FdRole {
    /// No fd argument.
    #[default]
    None,
    /// Argument `n` is an fd.
    Uses(u8),
    /// Argument 0 is an fd, and a success returns a new fd (accept, dup).
    UsesReturnsNew,
    /// A success returns a new fd (open, socket, ...).
    ReturnsNew,
    /// close(fd).
    Close,
    /// dup2/dup3(old, new): `new` is replaced.
    Dup2,
    /// close_range(first, last, flags).
    CloseRange,
    /// fcntl: F_DUPFD and F_DUPFD_CLOEXEC return a new fd.
    Fcntl,
}

const USES_ARG0: &[&str] = &[
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "recvfrom",
    "sendto",
    "recvmsg",
    "sendmsg",
    "recvmmsg",
    "sendmmsg",
    "recv",
    "send",
    "fstat",
    "fstat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "fdatasync",
    "lseek",
    "_llseek",
    "ioctl",
    "connect",
    "bind",
    "listen",
    "getsockopt",
    "setsockopt",
    "getsockname",
    "getpeername",
    "shutdown",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_ctl",
    "getdents",
    "getdents64",
    "ftruncate",
    "ftruncate64",
    "fchmod",
    "fchown",
    "fchown32",
    "flock",
    "fadvise64",
    "fadvise64_64",
    "arm_fadvise64_64",
    "fallocate",
    "sync_file_range",
    "syncfs",
    "fgetxattr",
    "fsetxattr",
    "flistxattr",
    "fremovexattr",
    "fchdir",
    "splice",
    "tee",
    "sendfile",
    "sendfile64",
    "copy_file_range",
    "readahead",
    "timerfd_settime",
    "timerfd_gettime",
    "io_uring_enter",
    "vmsplice",
];
const RETURNS_NEW: &[&str] = &[
    "open",
    "openat",
    "openat2",
    "creat",
    "socket",
    "epoll_create",
    "epoll_create1",
    "eventfd",
    "eventfd2",
    "timerfd_create",
    "signalfd",
    "signalfd4",
    "memfd_create",
    "inotify_init",
    "inotify_init1",
    "fanotify_init",
    "pidfd_open",
    "pidfd_getfd",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "open_by_handle_at",
    "fsopen",
    "fsmount",
    "open_tree",
    "memfd_secret",
];

/// The role of every syscall id, built once.
#[derive(Debug)]
pub struct FdRoles(Vec<FdRole>);

impl FdRoles {
    /// The table for this build's syscall ids.
    pub fn new() -> FdRoles {
        let mut roles = vec![FdRole::None; SyscallId::COUNT];
        let mut set = |name: &str, role: FdRole| {
            if let Some(id) = SyscallId::from_name(name) {
                if let Some(r) = roles.get_mut(id.0 as usize) {
                    *r = role;
                }
            }
        };
        for n in USES_ARG0 {
            set(n, FdRole::Uses(0));
        }
        for n in RETURNS_NEW {
            set(n, FdRole::ReturnsNew);
        }
        for n in ["accept", "accept4", "dup"] {
            set(n, FdRole::UsesReturnsNew);
        }
        for n in ["dup2", "dup3"] {
            set(n, FdRole::Dup2);
        }
        for n in ["fcntl", "fcntl64"] {
            set(n, FdRole::Fcntl);
        }
        set("close", FdRole::Close);
        set("close_range", FdRole::CloseRange);
        FdRoles(roles)
    }

    /// The role of `id`.
    #[inline]
    pub fn get(&self, id: SyscallId) -> FdRole {
        self.0.get(id.0 as usize).copied().unwrap_or_default()
    }

    /// Syscalls that change fd tables: the seccomp prefilter must stop on
    /// them too (without recording them) so the cache stays right.
    pub fn invalidating() -> Vec<SyscallId> {
        ["close", "close_range", "dup2", "dup3"]
            .iter()
            .filter_map(|n| SyscallId::from_name(n))
            .collect()
    }
}

impl Default for FdRoles {
    fn default() -> Self {
        FdRoles::new()
    }
}

impl FdRole {
    /// The fd argument whose kind the call is filed under.
    #[inline]
    pub fn fd_arg(self) -> Option<usize> {
        match self {
            FdRole::Uses(n) => Some(n as usize),
            FdRole::UsesReturnsNew | FdRole::Close | FdRole::Dup2 | FdRole::Fcntl => Some(0),
            FdRole::None | FdRole::ReturnsNew | FdRole::CloseRange => None,
        }
    }

    /// Updates the cache after a call with arguments `args` returned `ret`.
    #[inline]
    pub fn after(self, fds: &mut FdTable, args: &[u64; 6], ret: i64) {
        const F_DUPFD: u64 = 0;
        const F_DUPFD_CLOEXEC: u64 = 1030;
        let ok = ret >= 0;
        match self {
            FdRole::None | FdRole::Uses(_) => {}
            FdRole::ReturnsNew | FdRole::UsesReturnsNew => {
                if ok {
                    fds.invalidate(ret);
                }
            }
            // The fd is gone even when close fails with EINTR or EIO.
            FdRole::Close => fds.invalidate(args[0] as i32 as i64),
            FdRole::Dup2 => {
                if ok {
                    fds.invalidate(args[1] as i32 as i64);
                }
            }
            FdRole::CloseRange => {
                if ok {
                    fds.invalidate_range(args[0] as u32 as u64, args[1] as u32 as u64);
                }
            }
            FdRole::Fcntl => {
                let cmd = args[1] as u32 as u64;
                if ok && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
                    fds.invalidate(ret);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_link_targets() {
        assert_eq!(classify_link(b"socket:[1234]", || None), FdKind::Socket);
        assert_eq!(classify_link(b"pipe:[99]", || None), FdKind::Pipe);
        assert_eq!(
            classify_link(b"anon_inode:[eventfd]", || None),
            FdKind::Other
        );
        assert_eq!(classify_link(b"/tmp/f", || Some(S_IFREG)), FdKind::File);
        assert_eq!(classify_link(b"/tmp/fifo", || Some(S_IFIFO)), FdKind::Pipe);
    }

    #[test]
    fn resolves_our_own_fds() {
        let me = std::process::id() as Tid;
        let file = std::fs::File::open("/proc/self/status").unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(resolve(me, file.as_raw_fd()), FdKind::File);
        let (r, w) = std::io::pipe().unwrap();
        assert_eq!(resolve(me, r.as_raw_fd()), FdKind::Pipe);
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(resolve(me, sock.as_raw_fd()), FdKind::Socket);
        assert_eq!(resolve(me, 100_000), FdKind::None);
        drop((r, w));
    }

    #[test]
    fn cache_invalidation() {
        let me = std::process::id() as Tid;
        let roles = FdRoles::new();
        let close = roles.get(SyscallId::from_name("close").unwrap());
        let mut t = FdTable::default();
        let (r, _w) = std::io::pipe().unwrap();
        use std::os::fd::AsRawFd;
        let fd = r.as_raw_fd() as i64;
        assert_eq!(t.kind(me, fd), FdKind::Pipe);
        assert_eq!(t.kinds[fd as usize], FdKind::Pipe as u8 + 1);
        close.after(&mut t, &[fd as u64, 0, 0, 0, 0, 0], 0);
        assert_eq!(t.kinds[fd as usize], 0);
        t.kind(me, fd);
        roles.get(SyscallId::from_name("dup2").unwrap()).after(
            &mut t,
            &[0, fd as u64, 0, 0, 0, 0],
            fd,
        );
        assert_eq!(t.kinds[fd as usize], 0);
        t.kind(me, fd);
        t.invalidate_range(0, u32::MAX as u64);
        assert!(t.kinds.iter().all(|k| *k == 0));
        assert_eq!(
            roles.get(SyscallId::from_name("read").unwrap()).fd_arg(),
            Some(0)
        );
        assert_eq!(
            roles.get(SyscallId::from_name("openat").unwrap()).fd_arg(),
            None
        );
    }
}
