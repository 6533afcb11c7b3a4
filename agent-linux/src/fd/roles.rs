//! What each syscall does to an fd table: which argument is an fd (the
//! kind a call is filed under), and which calls make, copy or close fds
//! (how the cache is kept right). Built once per run from canonical
//! syscall names.

use agent_core::{FdKind, PeerAddr, SyscallId};

use super::cache::FdTable;

/// How a syscall involves fds: which argument is one, and what it does to
/// the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FdRole {
    /// No fd argument.
    #[default]
    None,
    /// Argument `n` is an fd.
    Uses(u8),
    /// Argument 0 is an fd, and a success returns a copy of it (dup).
    UsesReturnsNew,
    /// accept(listener, ...): a success returns a new socket of the
    /// listener's kind, with a remote end of its own.
    Accept,
    /// connect(fd, addr, len): gives the socket a remote end, or changes
    /// or removes it (UDP).
    Connect,
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
        for n in ["accept", "accept4"] {
            set(n, FdRole::Accept);
        }
        set("dup", FdRole::UsesReturnsNew);
        set("connect", FdRole::Connect);
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

    /// Syscalls that change fd tables or a socket's remote end: the
    /// seccomp prefilter must stop on them too (without recording them) so
    /// the cache stays right.
    pub fn invalidating() -> Vec<SyscallId> {
        ["close", "close_range", "dup2", "dup3", "connect"]
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
            FdRole::UsesReturnsNew
            | FdRole::Accept
            | FdRole::Connect
            | FdRole::Close
            | FdRole::Dup2
            | FdRole::Fcntl => Some(0),
            FdRole::None
            | FdRole::ReturnsNew
            | FdRole::OpensPath
            | FdRole::Socket
            | FdRole::CloseRange => None,
        }
    }

    /// The socket address in the tracee's memory, as (pointer, bytes),
    /// that names the remote end of the socket the call connects
    /// (connect's argument, read at entry) or makes (accept's result, read
    /// after a success; its length is not checked: the program's buffer
    /// holds the address of the family its listener accepts).
    /// `is_32bit`: the call's ABI has 32-bit pointers.
    #[inline]
    pub fn named_address(self, args: &[u64; 6], is_32bit: bool) -> Option<(u64, u64)> {
        const SOCKADDR_IN6_LEN: u64 = 28;
        let ptr = if is_32bit {
            args[1] as u32 as u64
        } else {
            args[1]
        };
        match self {
            FdRole::Connect => Some((ptr, args[2] as u32 as u64)),
            FdRole::Accept if ptr != 0 => Some((ptr, SOCKADDR_IN6_LEN)),
            _ => None,
        }
    }

    /// Updates the cache after a call with arguments `args` returned `ret`;
    /// `arg_kind` is the kind of its fd argument, resolved at entry;
    /// `named`: the remote end the call's socket address names (see
    /// [`FdRole::named_address`]), when it was read.
    #[inline]
    pub fn after(
        self,
        fds: &mut FdTable,
        args: &[u64; 6],
        ret: i64,
        arg_kind: FdKind,
        named: Option<PeerAddr>,
    ) {
        const F_DUPFD: u64 = 0;
        const F_DUPFD_CLOEXEC: u64 = 1030;
        let ok = ret >= 0;
        let arg_fd = args[0] as i32 as i64;
        // A copy of an fd is of the original's kind (when that was known),
        // with its remote end.
        let copy_of_arg = |fds: &mut FdTable, new_fd: i64| fds.copy(arg_fd, new_fd, arg_kind);
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
                    fds.set_unconnected(ret, socket_kind_from_args(args[0], args[1], args[2]));
                }
            }
            FdRole::UsesReturnsNew => {
                if ok {
                    copy_of_arg(fds, ret);
                }
            }
            // A socket of the listener's kind; its remote end is learnt at
            // its first use.
            FdRole::Accept => {
                if ok {
                    match arg_kind {
                        FdKind::None => fds.invalidate(ret),
                        kind => {
                            fds.set(ret, kind);
                            if let Some(peer) = named {
                                fds.set_peer(ret, peer);
                            }
                        }
                    }
                }
            }
            // A connect that succeeded or is in progress has the remote end
            // it named. Any other may still have changed it (a UDP connect
            // to AF_UNSPEC removes it; a failed one may leave the last):
            // ask again at the next call.
            FdRole::Connect => match named {
                Some(peer) if ok || ret == -(libc::EINPROGRESS as i64) => {
                    fds.set_peer(arg_fd, peer)
                }
                // A socket no net table listed (a TCP socket seen before it
                // was bound, at attach) may be listed now: its kind and
                // peer are asked again together.
                _ if arg_kind == FdKind::Socket => fds.invalidate(arg_fd),
                _ => fds.forget_peer(arg_fd),
            },
            // The fd is gone even when close fails with EINTR or EIO.
            FdRole::Close => fds.invalidate(arg_fd),
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

/// The kind of a socket from `socket(domain, type, protocol)`'s arguments:
/// agent-core's one rule for every backend.
pub fn socket_kind_from_args(domain: u64, ty: u64, protocol: u64) -> FdKind {
    FdKind::of_socket(domain, ty, protocol)
}

#[cfg(test)]
mod tests {
    use super::super::cache::OPENED_BY_PATH;
    use super::*;
    use crate::sys::Tid;

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
        close.after(&mut t, &[fd as u64, 0, 0, 0, 0, 0], 0, FdKind::Pipe, None);
        assert_eq!(t.kinds[fd as usize], 0);
        t.kind(me, fd);
        roles.get(SyscallId::from_name("dup2").unwrap()).after(
            &mut t,
            &[0, fd as u64, 0, 0, 0, 0],
            fd,
            FdKind::None,
            None,
        );
        assert_eq!(t.kinds[fd as usize], 0);
        // A copy of a known fd takes its kind without asking /proc.
        roles.get(SyscallId::from_name("dup").unwrap()).after(
            &mut t,
            &[0, 0, 0, 0, 0, 0],
            fd,
            FdKind::Tcp,
            None,
        );
        assert_eq!(t.kind(me, fd), FdKind::Tcp);
        roles.get(SyscallId::from_name("socket").unwrap()).after(
            &mut t,
            &[1, 1, 0, 0, 0, 0],
            fd,
            FdKind::None,
            None,
        );
        assert_eq!(t.kind(me, fd), FdKind::Unix);
        roles.get(SyscallId::from_name("openat").unwrap()).after(
            &mut t,
            &[0, 0, 0, 0, 0, 0],
            fd,
            FdKind::None,
            None,
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

    /// `/proc` reads made by `f`.
    fn proc_reads(f: impl FnOnce()) -> u64 {
        use crate::sys::COUNTERS;
        use std::sync::atomic::Ordering::Relaxed;
        let before = COUNTERS.proc_reads.load(Relaxed);
        f();
        COUNTERS.proc_reads.load(Relaxed) - before
    }

    #[test]
    fn socket_peers_are_learnt_once_per_change() {
        use agent_core::{PeerAddr, PeerIp};
        use std::os::fd::AsRawFd;
        // The counter is global and other tests run in parallel: take the
        // smallest of a few tries (each measures this thread's reads, plus
        // whatever ran meanwhile).
        let quiet = |f: &dyn Fn()| (0..20).map(|_| proc_reads(f)).min().unwrap();
        let me = std::process::id() as Tid;
        let roles = FdRoles::new();
        let role = |n: &str| roles.get(SyscallId::from_name(n).unwrap());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let peer_at = |port| {
            Some(PeerAddr {
                transport: FdKind::Tcp,
                ip: PeerIp::V4([127, 0, 0, 1]),
                port,
            })
        };
        let client = std::net::TcpStream::connect(server).unwrap();
        let cfd = client.as_raw_fd() as i64;
        let table = std::cell::RefCell::new(FdTable::default());
        let facts = |fd| table.borrow_mut().facts(me, fd);

        // socket(): a TCP socket without a remote end, no /proc read.
        role("socket").after(
            &mut table.borrow_mut(),
            &[2, 1, 0, 0, 0, 0],
            cfd,
            FdKind::None,
            None,
        );
        assert_eq!(quiet(&|| assert_eq!(facts(cfd).peer, None)), 0);
        // connect(): asked once at the next call, then cached.
        role("connect").after(
            &mut table.borrow_mut(),
            &[cfd as u64, 0, 0, 0, 0, 0],
            0,
            FdKind::Tcp,
            None,
        );
        assert!(proc_reads(|| assert_eq!(facts(cfd).peer, peer_at(server.port()))) >= 2);
        assert_eq!(
            quiet(&|| assert_eq!(facts(cfd).peer, peer_at(server.port()))),
            0
        );
        // dup: the copy has its original's remote end, without asking.
        let copy = 900;
        role("dup").after(
            &mut table.borrow_mut(),
            &[cfd as u64, 0, 0, 0, 0, 0],
            copy,
            FdKind::Tcp,
            None,
        );
        assert_eq!(
            table.borrow().peers.get(&(copy as u32)).copied(),
            Some(peer_at(server.port()))
        );
        // accept: a socket of the listener's kind, its remote end unknown
        // until its first use.
        let (accepted, from) = listener.accept().unwrap();
        let afd = accepted.as_raw_fd() as i64;
        let lfd = listener.as_raw_fd() as i64;
        assert_eq!(facts(lfd), super::super::resolve::FdFacts::of(FdKind::Tcp));
        role("accept4").after(
            &mut table.borrow_mut(),
            &[lfd as u64, 0, 0, 0, 0, 0],
            afd,
            FdKind::Tcp,
            None,
        );
        assert_eq!(table.borrow().peers.get(&(afd as u32)), None);
        assert_eq!(facts(afd).peer, peer_at(from.port()));
        assert_eq!(
            quiet(&|| assert_eq!(facts(afd).peer, peer_at(from.port()))),
            0
        );
        // close forgets it.
        role("close").after(
            &mut table.borrow_mut(),
            &[afd as u64, 0, 0, 0, 0, 0],
            0,
            FdKind::Tcp,
            None,
        );
        assert_eq!(table.borrow().peers.get(&(afd as u32)), None);
        // An fd resolved from scratch gets kind and remote end from one
        // look at /proc (readlink, then the tcp table).
        table.borrow_mut().clear();
        assert!(table.borrow().peers.is_empty());
        assert_eq!(facts(afd).peer, peer_at(from.port()));
        assert_eq!(
            quiet(&|| assert_eq!(facts(afd).peer, peer_at(from.port()))),
            0
        );
        table.borrow_mut().invalidate_range(0, 1 << 20);
        assert!(table.borrow().peers.is_empty());

        // The address a connect or accept names is the remote end, without
        // asking /proc (a made-up one here: /proc would say otherwise).
        let named = peer_at(4242);
        let connect = |ret: i64, named| {
            role("connect").after(
                &mut table.borrow_mut(),
                &[cfd as u64, 0, 16, 0, 0, 0],
                ret,
                FdKind::Tcp,
                named,
            )
        };
        // (The connect's entry resolved the fd's kind.)
        facts(cfd);
        connect(0, named);
        assert_eq!(quiet(&|| assert_eq!(facts(cfd).peer, named)), 0);
        // In progress (non-blocking): the same.
        connect(-(libc::EINPROGRESS as i64), peer_at(4343));
        assert_eq!(quiet(&|| assert_eq!(facts(cfd).peer, peer_at(4343))), 0);
        // Refused, or nothing read: /proc is asked again.
        connect(-(libc::ECONNREFUSED as i64), named);
        assert_eq!(facts(cfd).peer, peer_at(server.port()));
        connect(0, None);
        assert_eq!(facts(cfd).peer, peer_at(server.port()));
        role("accept").after(
            &mut table.borrow_mut(),
            &[lfd as u64, 0x1000, 0x2000, 0, 0, 0],
            afd,
            FdKind::Tcp,
            named,
        );
        assert_eq!(quiet(&|| assert_eq!(facts(afd).peer, named)), 0);
        // A socket of unknown family that connects is asked again.
        table.borrow_mut().set(700, FdKind::Socket);
        role("connect").after(
            &mut table.borrow_mut(),
            &[700, 0, 16, 0, 0, 0],
            0,
            FdKind::Socket,
            None,
        );
        assert_eq!(table.borrow().kinds[700], 0);
        // Where the address is, and how much of it.
        assert_eq!(
            role("connect").named_address(&[3, 0x1_0000_1000, 16, 0, 0, 0], true),
            Some((0x1000, 16))
        );
        assert_eq!(
            role("accept4").named_address(&[3, 0x7f00_0000_1000, 0x2000, 0, 0, 0], false),
            Some((0x7f00_0000_1000, 28))
        );
        assert_eq!(
            role("accept").named_address(&[3, 0, 0, 0, 0, 0], false),
            None
        );
        assert_eq!(role("read").named_address(&[3, 9, 9, 0, 0, 0], false), None);
    }
}
