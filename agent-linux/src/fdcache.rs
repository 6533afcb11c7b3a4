//! What each fd refers to, resolved once per (fd table, fd) and cached
//! until the fd can have changed: on close, close_range, dup2/dup3 onto it,
//! a syscall returning it as a new fd, and exec (the table is replaced).
//! Tasks that share a table (CLONE_FILES) share one cache.
//!
//! Most kinds are known without asking `/proc`: `socket(domain, type, _)`
//! says TCP, UDP or Unix from its arguments, and accept/dup/dup2/F_DUPFD
//! give the new fd the kind of the one they copy. An fd opened by path
//! (open, openat, creat) is a file unless a `stat` of `/proc/TID/fd/N`
//! says FIFO. Anything else is resolved from `readlink /proc/TID/fd/N`;
//! a `socket:[INODE]` is looked up by its inode in the tracee's
//! `/proc/TID/net/{tcp,tcp6,udp,udp6,unix}` (the tracee's network
//! namespace), and a socket found in none of them stays `socket`.

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

/// A cache slot for an fd opened by path whose file type is not yet known
/// (a file, or a FIFO).
const OPENED_BY_PATH: u8 = 0xff;

/// One fd table's cache: `kinds[fd]` is 0 (unknown), 1 + `FdKind`, or
/// [`OPENED_BY_PATH`].
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
        let cached = self.kinds.get(slot).copied().unwrap_or(0);
        let kind = match cached {
            0 => resolve(tid, fd as i32),
            OPENED_BY_PATH => resolve_opened_by_path(tid, fd as i32),
            k => return FdKind::from_u8(k - 1).unwrap_or(FdKind::None),
        };
        if kind != FdKind::None {
            self.set(fd, kind);
        }
        kind
    }

    /// Records that `fd` is of `kind` (learnt from the call that made it).
    pub fn set(&mut self, fd: i64, kind: FdKind) {
        self.store(fd, kind as u8 + 1);
    }

    /// Records that `fd` was just opened by path.
    pub fn set_opened_by_path(&mut self, fd: i64) {
        self.store(fd, OPENED_BY_PATH);
    }

    fn store(&mut self, fd: i64, value: u8) {
        let Ok(slot) = usize::try_from(fd) else {
            return;
        };
        if slot >= MAX_CACHED_FD {
            return;
        }
        if slot >= self.kinds.len() {
            self.kinds.resize((slot + 1).next_power_of_two(), 0);
        }
        self.kinds[slot] = value;
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

/// `/proc/TID/fd/FD`, NUL-terminated, in `buf`.
fn fd_path(buf: &mut [u8; 48], tid: Tid, fd: i32) -> Option<&CStr> {
    let mut len = 0;
    buf[..6].copy_from_slice(b"/proc/");
    len += 6;
    len += write_decimal(&mut buf[len..], tid as u64);
    buf[len..len + 4].copy_from_slice(b"/fd/");
    len += 4;
    len += write_decimal(&mut buf[len..], fd as u64);
    buf[len] = 0;
    CStr::from_bytes_with_nul(&buf[..=len]).ok()
}

/// Reads what `/proc/TID/fd/FD` points to. No allocation: the path and the
/// link target live on the stack.
pub fn resolve(tid: Tid, fd: i32) -> FdKind {
    let mut path = [0u8; 48];
    let Some(cpath) = fd_path(&mut path, tid, fd) else {
        return FdKind::None;
    };
    let mut target = [0u8; 64];
    let Ok(n) = sys::readlink(cpath, &mut target) else {
        return FdKind::None;
    };
    classify_link(
        &target[..n],
        || sys::file_type(cpath).ok(),
        |inode| socket_kind(tid, inode),
    )
}

/// An fd that open/openat/creat returned: a file or a FIFO (only an
/// `O_PATH` open reaches a socket's inode, and such an fd carries no
/// traffic). One `stat`, no `readlink`.
fn resolve_opened_by_path(tid: Tid, fd: i32) -> FdKind {
    let mut path = [0u8; 48];
    let Some(cpath) = fd_path(&mut path, tid, fd) else {
        return FdKind::None;
    };
    match sys::file_type(cpath) {
        Ok(S_IFIFO) => FdKind::Pipe,
        Ok(S_IFSOCK) => FdKind::Socket,
        Ok(_) => FdKind::File,
        Err(_) => FdKind::None,
    }
}

/// The kind of an fd from its `/proc` link target; `file_type` stats it
/// (needed only for paths: a named FIFO or socket looks like a file), and
/// `socket` classifies a socket by its inode.
pub fn classify_link(
    target: &[u8],
    file_type: impl FnOnce() -> Option<u32>,
    socket: impl FnOnce(u64) -> FdKind,
) -> FdKind {
    if let Some(rest) = target.strip_prefix(b"socket:[") {
        match parse_decimal(rest.strip_suffix(b"]").unwrap_or(rest)) {
            Some(inode) => socket(inode),
            None => FdKind::Socket,
        }
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

/// The tables of `/proc/TID/net` that name a socket's inode, with the
/// column holding it and the kind a match means.
const SOCKET_TABLES: [(&str, usize, FdKind); 5] = [
    ("tcp", 9, FdKind::Tcp),
    ("tcp6", 9, FdKind::Tcp),
    ("udp", 9, FdKind::Udp),
    ("udp6", 9, FdKind::Udp),
    ("unix", 6, FdKind::Unix),
];

/// A socket's kind from its inode, looked up in the tracee's own network
/// namespace; `Socket` when no table lists it (netlink, packet, raw, a
/// socket closed meanwhile) or `/proc` cannot be read. Allocates the
/// table paths: it runs only for sockets the agent did not see created.
pub fn socket_kind(tid: Tid, inode: u64) -> FdKind {
    for (table, column, kind) in SOCKET_TABLES {
        let path = format!("/proc/{tid}/net/{table}");
        let Ok(file) = std::fs::File::open(&path) else {
            continue;
        };
        sys::COUNTERS
            .proc_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if table_lists_inode(file, column, inode) {
            return kind;
        }
    }
    FdKind::Socket
}

/// Whether a `/proc/net` table lists `inode` in whitespace-separated
/// column `column` of some line after the header. Reads line by line
/// through a fixed buffer; a line longer than the buffer (no table has
/// one: a Unix socket's path is at most 108 bytes) ends the search.
pub fn table_lists_inode(mut table: impl std::io::Read, column: usize, inode: u64) -> bool {
    let lists = |line: &[u8]| {
        line.split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .nth(column)
            .and_then(parse_decimal)
            == Some(inode)
    };
    let mut buf = [0u8; 4096];
    let mut filled = 0;
    let mut header = true;
    loop {
        let n = match table.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        filled += n;
        let mut start = 0;
        while let Some(end) = buf[start..filled].iter().position(|&b| b == b'\n') {
            let line = &buf[start..start + end];
            start += end + 1;
            if !std::mem::take(&mut header) && lists(line) {
                return true;
            }
        }
        if n == 0 {
            // The last line may lack its newline.
            return !header && lists(&buf[start..filled]);
        }
        if start == 0 && filled == buf.len() {
            return false;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
    }
}

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        d.is_ascii_digit()
            .then(|| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')))
            .flatten()
    })
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
    /// Argument 0 is an fd, and a success returns a new fd of its kind
    /// (accept, dup).
    UsesReturnsNew,
    /// A success returns a new fd opened by path (open, openat, creat).
    OpensPath,
    /// socket(domain, type, protocol): the arguments tell the kind.
    Socket,
    /// A success returns a new fd (epoll_create, eventfd, ...).
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
const OPENS_PATH: &[&str] = &["open", "openat", "openat2", "creat", "open_by_handle_at"];
const RETURNS_NEW: &[&str] = &[
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
        for n in OPENS_PATH {
            set(n, FdRole::OpensPath);
        }
        set("socket", FdRole::Socket);
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
            FdRole::None
            | FdRole::ReturnsNew
            | FdRole::OpensPath
            | FdRole::Socket
            | FdRole::CloseRange => None,
        }
    }

    /// Updates the cache after a call with arguments `args` returned `ret`;
    /// `arg_kind` is the kind of its fd argument, resolved at entry.
    #[inline]
    pub fn after(self, fds: &mut FdTable, args: &[u64; 6], ret: i64, arg_kind: FdKind) {
        const F_DUPFD: u64 = 0;
        const F_DUPFD_CLOEXEC: u64 = 1030;
        let ok = ret >= 0;
        // A copy of an fd is of the original's kind (when that was known).
        let copy_of_arg = |fds: &mut FdTable, new_fd: i64| match arg_kind {
            FdKind::None => fds.invalidate(new_fd),
            kind => fds.set(new_fd, kind),
        };
        match self {
            FdRole::None | FdRole::Uses(_) => {}
            FdRole::ReturnsNew => {
                if ok {
                    fds.invalidate(ret);
                }
            }
            FdRole::OpensPath => {
                if ok {
                    fds.set_opened_by_path(ret);
                }
            }
            FdRole::Socket => {
                if ok {
                    fds.set(ret, socket_kind_from_args(args[0], args[1], args[2]));
                }
            }
            FdRole::UsesReturnsNew => {
                if ok {
                    copy_of_arg(fds, ret);
                }
            }
            // The fd is gone even when close fails with EINTR or EIO.
            FdRole::Close => fds.invalidate(args[0] as i32 as i64),
            FdRole::Dup2 => {
                if ok {
                    copy_of_arg(fds, args[1] as i32 as i64);
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
                    copy_of_arg(fds, ret);
                }
            }
        }
    }
}

/// The kind of a socket from `socket(domain, type, protocol)`'s arguments
/// (the UAPI values, the same on every architecture the agent supports).
pub fn socket_kind_from_args(domain: u64, ty: u64, protocol: u64) -> FdKind {
    const AF_UNIX: u64 = 1;
    const AF_INET: u64 = 2;
    const AF_INET6: u64 = 10;
    const SOCK_STREAM: u64 = 1;
    const SOCK_DGRAM: u64 = 2;
    const IPPROTO_TCP: u64 = 6;
    const IPPROTO_UDP: u64 = 17;
    // The type's low bits; SOCK_NONBLOCK and SOCK_CLOEXEC sit above them.
    const SOCK_TYPE_MASK: u64 = 0xf;
    let (domain, ty, protocol) = (
        domain as u32 as u64,
        ty as u32 as u64,
        protocol as u32 as u64,
    );
    match (domain, ty & SOCK_TYPE_MASK, protocol) {
        (AF_UNIX, _, _) => FdKind::Unix,
        (AF_INET | AF_INET6, SOCK_STREAM, 0 | IPPROTO_TCP) => FdKind::Tcp,
        (AF_INET | AF_INET6, SOCK_DGRAM, 0 | IPPROTO_UDP) => FdKind::Udp,
        _ => FdKind::Socket,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_link_targets() {
        let never = |_| panic!("not a socket");
        assert_eq!(
            classify_link(
                b"socket:[1234]",
                || None,
                |ino| {
                    assert_eq!(ino, 1234);
                    FdKind::Tcp
                }
            ),
            FdKind::Tcp
        );
        assert_eq!(
            classify_link(b"socket:[12x]", || None, never),
            FdKind::Socket
        );
        assert_eq!(classify_link(b"pipe:[99]", || None, never), FdKind::Pipe);
        assert_eq!(
            classify_link(b"anon_inode:[eventfd]", || None, never),
            FdKind::Other
        );
        assert_eq!(
            classify_link(b"/tmp/f", || Some(S_IFREG), never),
            FdKind::File
        );
        assert_eq!(
            classify_link(b"/tmp/fifo", || Some(S_IFIFO), never),
            FdKind::Pipe
        );
    }

    #[test]
    fn resolves_our_own_fds() {
        use std::os::fd::AsRawFd;
        let me = std::process::id() as Tid;
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(resolve(me, file.as_raw_fd()), FdKind::File);
        let (r, w) = std::io::pipe().unwrap();
        assert_eq!(resolve(me, r.as_raw_fd()), FdKind::Pipe);
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(resolve(me, udp.as_raw_fd()), FdKind::Udp);
        let udp6 = std::net::UdpSocket::bind("[::1]:0");
        if let Ok(udp6) = &udp6 {
            assert_eq!(resolve(me, udp6.as_raw_fd()), FdKind::Udp);
        }
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(resolve(me, tcp.as_raw_fd()), FdKind::Tcp);
        let client = std::net::TcpStream::connect(tcp.local_addr().unwrap()).unwrap();
        assert_eq!(resolve(me, client.as_raw_fd()), FdKind::Tcp);
        let (ua, ub) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(resolve(me, ua.as_raw_fd()), FdKind::Unix);
        assert_eq!(resolve(me, 100_000), FdKind::None);
        // Opened by path: one stat tells a file from a FIFO.
        assert_eq!(resolve_opened_by_path(me, file.as_raw_fd()), FdKind::File);
        assert_eq!(resolve_opened_by_path(me, r.as_raw_fd()), FdKind::Pipe);
        drop((r, w, ua, ub));
    }

    #[test]
    fn socket_kinds_from_arguments() {
        const NONBLOCK_CLOEXEC: u64 = 0o4000 | 0o2000000;
        assert_eq!(socket_kind_from_args(2, 1, 0), FdKind::Tcp);
        assert_eq!(
            socket_kind_from_args(10, 1 | NONBLOCK_CLOEXEC, 6),
            FdKind::Tcp
        );
        assert_eq!(socket_kind_from_args(2, 2, 17), FdKind::Udp);
        assert_eq!(
            socket_kind_from_args(10, 2 | NONBLOCK_CLOEXEC, 0),
            FdKind::Udp
        );
        assert_eq!(socket_kind_from_args(1, 5, 0), FdKind::Unix);
        // ICMP "ping" sockets, SCTP, netlink, raw: no finer kind.
        assert_eq!(socket_kind_from_args(2, 2, 1), FdKind::Socket);
        assert_eq!(socket_kind_from_args(2, 1, 132), FdKind::Socket);
        assert_eq!(socket_kind_from_args(16, 3, 0), FdKind::Socket);
        assert_eq!(socket_kind_from_args(2, 3, 6), FdKind::Socket);
    }

    #[test]
    fn finds_inodes_in_net_tables() {
        let tcp = b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0\n";
        assert!(table_lists_inode(&tcp[..], 9, 31337));
        assert!(!table_lists_inode(&tcp[..], 9, 3133));
        // The header is never matched, and a missing final newline is fine.
        let unix = b"Num       RefCount Protocol Flags    Type St Inode Path\n0000000000000000: 00000002 00000000 00010000 0001 01 4242 /run/x.sock";
        assert!(table_lists_inode(&unix[..], 6, 4242));
        assert!(!table_lists_inode(&b"a b c d e f 7\n"[..], 6, 7));
        // A line too long for the buffer ends the search without a match.
        let mut long = b"header\n".to_vec();
        long.extend(std::iter::repeat_n(b'x', 10_000));
        long.extend(b" 1 2 3 4 5 6\n");
        assert!(!table_lists_inode(&long[..], 6, 6));
        // Lines split across reads are reassembled.
        let mut many = b"header\n".to_vec();
        for i in 0..500u64 {
            many.extend(format!("{i}: a b c d e {}\n", 1_000_000 + i).bytes());
        }
        assert!(table_lists_inode(&many[..], 6, 1_000_499));
        assert!(!table_lists_inode(&many[..], 6, 1_000_500));
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
        close.after(&mut t, &[fd as u64, 0, 0, 0, 0, 0], 0, FdKind::Pipe);
        assert_eq!(t.kinds[fd as usize], 0);
        t.kind(me, fd);
        roles.get(SyscallId::from_name("dup2").unwrap()).after(
            &mut t,
            &[0, fd as u64, 0, 0, 0, 0],
            fd,
            FdKind::None,
        );
        assert_eq!(t.kinds[fd as usize], 0);
        // A copy of a known fd takes its kind without asking /proc.
        roles.get(SyscallId::from_name("dup").unwrap()).after(
            &mut t,
            &[0, 0, 0, 0, 0, 0],
            fd,
            FdKind::Tcp,
        );
        assert_eq!(t.kind(me, fd), FdKind::Tcp);
        roles.get(SyscallId::from_name("socket").unwrap()).after(
            &mut t,
            &[1, 1, 0, 0, 0, 0],
            fd,
            FdKind::None,
        );
        assert_eq!(t.kind(me, fd), FdKind::Unix);
        roles.get(SyscallId::from_name("openat").unwrap()).after(
            &mut t,
            &[0, 0, 0, 0, 0, 0],
            fd,
            FdKind::None,
        );
        assert_eq!(t.kinds[fd as usize], OPENED_BY_PATH);
        // (fd is really our pipe's read end: the stat says FIFO.)
        assert_eq!(t.kind(me, fd), FdKind::Pipe);
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
