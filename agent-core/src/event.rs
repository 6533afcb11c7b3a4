//! The event model: one completed syscall, as the platform shim saw it.

use serde::{Deserialize, Serialize};

use crate::Arch;

/// What the fd a syscall used refers to, as resolved by the platform shim
/// (on Linux from `/proc/PID/fd/N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum FdKind {
    /// The syscall takes no fd (or the shim did not resolve it).
    None = 0,
    /// A regular file, directory or device.
    File = 1,
    /// A socket of another family or type (netlink, packet, raw, SCTP,
    /// ...), or one whose family could not be told.
    Socket = 2,
    /// A pipe or FIFO.
    Pipe = 3,
    /// Anything else: eventfd, epoll, timerfd, signalfd, anon inodes, ...
    Other = 4,
    /// A TCP socket (IPv4 or IPv6).
    Tcp = 5,
    /// A UDP socket (IPv4 or IPv6).
    Udp = 6,
    /// A Unix-domain socket.
    Unix = 7,
}

impl FdKind {
    /// Number of kinds (the kinds are 0..COUNT).
    pub const COUNT: usize = 8;

    /// The kind of a socket of `domain`, `ty` and `protocol` (`socket(2)`'s
    /// arguments, or what `getsockopt` says of an open socket: the UAPI
    /// values, the same on every architecture the agent supports). One
    /// rule for every backend: ptrace reads the arguments of `socket`, the
    /// in-process backend asks the socket.
    pub fn of_socket(domain: u64, ty: u64, protocol: u64) -> FdKind {
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
    /// Every kind, in numeric order.
    pub const ALL: [FdKind; 8] = [
        FdKind::None,
        FdKind::File,
        FdKind::Socket,
        FdKind::Pipe,
        FdKind::Other,
        FdKind::Tcp,
        FdKind::Udp,
        FdKind::Unix,
    ];

    /// The name used in reports and attribute suffixes (`@file`).
    pub const fn name(self) -> &'static str {
        match self {
            FdKind::None => "none",
            FdKind::File => "file",
            FdKind::Socket => "socket",
            FdKind::Pipe => "pipe",
            FdKind::Other => "other",
            FdKind::Tcp => "tcp",
            FdKind::Udp => "udp",
            FdKind::Unix => "unix",
        }
    }

    /// The kind with this numeric value.
    pub const fn from_u8(v: u8) -> Option<FdKind> {
        match v {
            0 => Some(FdKind::None),
            1 => Some(FdKind::File),
            2 => Some(FdKind::Socket),
            3 => Some(FdKind::Pipe),
            4 => Some(FdKind::Other),
            5 => Some(FdKind::Tcp),
            6 => Some(FdKind::Udp),
            7 => Some(FdKind::Unix),
            _ => None,
        }
    }

    /// Whether the fd is a socket of any family.
    pub const fn is_socket(self) -> bool {
        matches!(
            self,
            FdKind::Socket | FdKind::Tcp | FdKind::Udp | FdKind::Unix
        )
    }

    /// Parses a name produced by [`FdKind::name`].
    pub fn from_name(name: &str) -> Option<FdKind> {
        FdKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A socket's remote end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PeerIp {
    /// IPv4, network order.
    V4([u8; 4]),
    /// IPv6, network order.
    V6([u8; 16]),
}

/// A socket peer: transport, remote address and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PeerAddr {
    /// [`FdKind::Tcp`] or [`FdKind::Udp`].
    pub transport: FdKind,
    /// Remote address.
    pub ip: PeerIp,
    /// Remote port.
    pub port: u16,
}

/// One completed syscall.
///
/// `ret` is the raw return value, sign-extended from 32 bits for 32-bit ABIs;
/// values in `-4095..=-1` are failures with errno `-ret` (the kernel's rule).
/// Timestamps are from one monotonic clock (CLOCK_MONOTONIC on Linux), in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallEvent {
    /// Thread id (the kernel's tid).
    pub tid: u32,
    /// The ABI the syscall was made through.
    pub arch: Arch,
    /// The raw syscall number in that ABI.
    pub nr: u32,
    /// The six argument registers.
    pub args: [u64; 6],
    /// The raw return value.
    pub ret: i64,
    /// Monotonic time at syscall entry, ns.
    pub entry_ns: u64,
    /// Monotonic time at syscall exit, ns.
    pub exit_ns: u64,
    /// What the fd argument refers to.
    pub fd_kind: FdKind,
    /// The remote end of the fd's socket, when the shim knows it (a
    /// connected TCP or UDP socket).
    pub peer: Option<PeerAddr>,
}

impl SyscallEvent {
    /// The errno of a failed call, `None` for a success.
    #[inline]
    pub const fn errno(&self) -> Option<u16> {
        if self.ret < 0 && self.ret >= -4095 {
            Some((-self.ret) as u16)
        } else {
            None
        }
    }

    /// Time spent in the call, ns (0 if the clock went backwards).
    #[inline]
    pub const fn duration_ns(&self) -> u64 {
        self.exit_ns.saturating_sub(self.entry_ns)
    }
}
