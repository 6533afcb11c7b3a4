//! Which syscalls each peer metric and histogram group is made of, and
//! where a window summary's entries fall among them.
//!
//! The PVFS metrics (docs/peers.md, "Metrics"):
//! - `dread`: the read family (`read`, `pread64`, `readv`, `preadv`,
//!   `preadv2`) on file fds (`FdKind::File`);
//! - `dwrite`: the write family (`write`, `pwrite64`, `writev`, `pwritev`,
//!   `pwritev2`) on file fds;
//! - `nsread` / `ncread`: socket reads (`read`, `readv`, `recvfrom`,
//!   `recvmsg`, `recvmmsg`) on socket fds (TCP, UDP, Unix and other
//!   sockets), called `nsread` on a server and `ncread` on a client.
//!
//! The Hadoop histogram groups add `stat`, `access`, `connect`, `bind`,
//! `socket`, `execve` and `accept` (each with its newer variants).

use agent_core::histogram::BUCKETS;
use agent_core::{FdKind, Summary, SyscallId, SyscallSummary};

/// A PVFS metric: mean service time of a set of calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Read-family calls on file fds.
    Dread,
    /// Write-family calls on file fds.
    Dwrite,
    /// Socket reads on a server.
    Nsread,
    /// Socket reads on a client.
    Ncread,
}

impl Metric {
    /// Every metric, in report order.
    pub const ALL: [Metric; 4] = [
        Metric::Dread,
        Metric::Dwrite,
        Metric::Nsread,
        Metric::Ncread,
    ];

    /// Its name in reports (the research's).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Dread => "dread",
            Metric::Dwrite => "dwrite",
            Metric::Nsread => "nsread",
            Metric::Ncread => "ncread",
        }
    }

    /// What a slow device on this metric points at: file calls the disk,
    /// unless `files_over_network` (a file system client's files live on
    /// its servers, across the network).
    pub fn cause(self, files_over_network: bool) -> Cause {
        match self {
            Metric::Dread | Metric::Dwrite if !files_over_network => Cause::Disk,
            _ => Cause::Network,
        }
    }
}

/// What a finding blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    /// The device's disk (file reads and writes, stat, access).
    Disk,
    /// The device's network (socket reads, connect).
    Network,
    /// Something else (node isolation: bind, socket, execve, accept).
    Unknown,
    /// An errno the device returned, propagated to its clients.
    Errno,
    /// The device's server process crashed.
    Crash,
    /// The device's server process hung.
    Hang,
}

impl Cause {
    /// Its name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Disk => "disk",
            Cause::Network => "network",
            Cause::Unknown => "unknown",
            Cause::Errno => "errno",
            Cause::Crash => "crash",
            Cause::Hang => "hang",
        }
    }
}

/// The calls a window summary holds for the raw (role-free) metrics:
/// file reads, file writes, socket reads.
pub const RAW_METRICS: usize = 3;
/// [`RAW_METRICS`] index of file reads.
pub const FILE_READ: usize = 0;
/// [`RAW_METRICS`] index of file writes.
pub const FILE_WRITE: usize = 1;
/// [`RAW_METRICS`] index of socket reads.
pub const SOCKET_READ: usize = 2;

/// A Hadoop histogram group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// `stat`, `lstat`, `fstat`, `newfstatat`, `statx` (any fd kind).
    Stat,
    /// `access`, `faccessat`, `faccessat2`.
    Access,
    /// dread's calls.
    FileRead,
    /// dwrite's calls.
    FileWrite,
    /// `connect`.
    Connect,
    /// nsread's / ncread's calls.
    SocketRead,
    /// `bind`.
    Bind,
    /// `socket`.
    Socket,
    /// `execve`, `execveat`.
    Execve,
    /// `accept`, `accept4`.
    Accept,
}

impl Group {
    /// Every group; a group's index in arrays is its position here.
    pub const ALL: [Group; 10] = [
        Group::Stat,
        Group::Access,
        Group::FileRead,
        Group::FileWrite,
        Group::Connect,
        Group::SocketRead,
        Group::Bind,
        Group::Socket,
        Group::Execve,
        Group::Accept,
    ];
    /// Number of groups.
    pub const COUNT: usize = Group::ALL.len();

    /// Its index in [`Group::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Group::Stat => "stat",
            Group::Access => "access",
            Group::FileRead => "file-read",
            Group::FileWrite => "file-write",
            Group::Connect => "connect",
            Group::SocketRead => "socket-read",
            Group::Bind => "bind",
            Group::Socket => "socket",
            Group::Execve => "execve",
            Group::Accept => "accept",
        }
    }
}

const READ_FAMILY: [&str; 5] = ["read", "pread64", "readv", "preadv", "preadv2"];
const WRITE_FAMILY: [&str; 5] = ["write", "pwrite64", "writev", "pwritev", "pwritev2"];
const SOCKET_READS: [&str; 5] = ["read", "readv", "recvfrom", "recvmsg", "recvmmsg"];
const STATS: [&str; 7] = [
    "stat",
    "lstat",
    "fstat",
    "newfstatat",
    "statx",
    "stat64",
    "fstatat64",
];
const ACCESSES: [&str; 3] = ["access", "faccessat", "faccessat2"];

/// What a syscall id can count towards.
#[derive(Debug, Clone, Copy, Default)]
struct Roles {
    read: bool,
    write: bool,
    socket_read: bool,
    /// A group that takes the call whatever its fd kind.
    any_fd: Option<Group>,
}

/// Where each syscall's entries go; built once, looked up per entry.
#[derive(Debug, Clone)]
pub struct Classifier {
    by_id: Vec<Roles>,
    /// Ids of `accept` and `accept4` (a device making them serves).
    accept: Vec<SyscallId>,
}

impl Default for Classifier {
    fn default() -> Classifier {
        Classifier::new()
    }
}

/// One window's calls in one metric or group: count, total time and the
/// log2 latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calls {
    /// Calls.
    pub count: u64,
    /// Their time, ns.
    pub total_ns: u64,
    /// Their latency histogram.
    pub histogram: [u64; BUCKETS],
}

impl Default for Calls {
    fn default() -> Calls {
        Calls {
            count: 0,
            total_ns: 0,
            histogram: [0; BUCKETS],
        }
    }
}

impl Calls {
    /// Adds an entry's calls.
    pub fn add(&mut self, s: &SyscallSummary) {
        self.count = self.count.saturating_add(s.count);
        self.total_ns = self.total_ns.saturating_add(s.total_ns);
        let h = s.histogram();
        for (sum, c) in self.histogram.iter_mut().zip(h.counts.iter()) {
            *sum = sum.saturating_add(*c);
        }
    }

    /// Adds another sum.
    pub fn merge(&mut self, other: &Calls) {
        self.count = self.count.saturating_add(other.count);
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        for (sum, c) in self.histogram.iter_mut().zip(other.histogram.iter()) {
            *sum = sum.saturating_add(*c);
        }
    }
}

/// Count and time of one raw metric in one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Service {
    /// Calls.
    pub count: u64,
    /// Their time, ns.
    pub total_ns: u64,
}

impl Service {
    /// Mean service time, ns; `None` without calls.
    pub fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.total_ns as f64 / self.count as f64)
    }
}

/// What one window summary holds for the peer methods.
#[derive(Debug, Clone, Default)]
pub struct WindowCalls {
    /// File reads, file writes, socket reads ([`RAW_METRICS`]).
    pub service: [Service; RAW_METRICS],
    /// Per [`Group`].
    pub groups: [Calls; Group::COUNT],
    /// Whether the window has `accept`/`accept4` calls.
    pub accepted: bool,
    /// Its failures per syscall entry and errno, in the summary's order
    /// (what [`super::trail::Trail::add`] keeps of them), and ...
    pub failures: Vec<WindowFailure>,
    /// ... whether it made any call: taken here, in the one pass over the
    /// summary's calls, so that a window laid over again at every tick of
    /// the live analysis ([`super::fleet::Fleet::overlay`]) is not read
    /// through again (a summary's calls are most of its 34 KB).
    pub active: bool,
}

/// One errno of one syscall entry's failures in a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowFailure {
    /// The syscall.
    pub id: SyscallId,
    /// What its fd referred to.
    pub fd_kind: FdKind,
    /// The errno.
    pub errno: u16,
    /// How many calls failed with it.
    pub count: u64,
    /// The entry's first failure, ns after the window's start.
    pub first_ns: u64,
    /// Its last.
    pub last_ns: u64,
}

fn is_socket(kind: FdKind) -> bool {
    matches!(
        kind,
        FdKind::Tcp | FdKind::Udp | FdKind::Unix | FdKind::Socket
    )
}

impl Classifier {
    /// The table for this build's syscall names.
    pub fn new() -> Classifier {
        let mut by_id = vec![Roles::default(); SyscallId::COUNT];
        let mut mark = |names: &[&str], f: &mut dyn FnMut(&mut Roles)| {
            for n in names {
                if let Some(id) = SyscallId::from_name(n) {
                    if let Some(r) = by_id.get_mut(id.0 as usize) {
                        f(r);
                    }
                }
            }
        };
        mark(&READ_FAMILY, &mut |r| r.read = true);
        mark(&WRITE_FAMILY, &mut |r| r.write = true);
        mark(&SOCKET_READS, &mut |r| r.socket_read = true);
        mark(&STATS, &mut |r| r.any_fd = Some(Group::Stat));
        mark(&ACCESSES, &mut |r| r.any_fd = Some(Group::Access));
        mark(&["connect"], &mut |r| r.any_fd = Some(Group::Connect));
        mark(&["bind"], &mut |r| r.any_fd = Some(Group::Bind));
        mark(&["socket"], &mut |r| r.any_fd = Some(Group::Socket));
        mark(&["execve", "execveat"], &mut |r| {
            r.any_fd = Some(Group::Execve)
        });
        mark(&["accept", "accept4"], &mut |r| {
            r.any_fd = Some(Group::Accept)
        });
        let accept = ["accept", "accept4"]
            .iter()
            .filter_map(|n| SyscallId::from_name(n))
            .collect();
        Classifier { by_id, accept }
    }

    /// Whether a window summary has `accept`/`accept4` calls (what
    /// [`Classifier::window_calls`] says as `accepted`).
    pub fn accepts(&self, summary: &Summary) -> bool {
        summary.syscalls.iter().any(|s| {
            s.count > 0
                && self.accept.contains(&s.key.id)
                && self
                    .by_id
                    .get(s.key.id.0 as usize)
                    .is_some_and(|r| r.any_fd.is_some())
        })
    }

    /// Sums a window summary's entries into metrics and groups.
    pub fn window_calls(&self, summary: &Summary) -> WindowCalls {
        let mut out = WindowCalls::default();
        for s in &summary.syscalls {
            out.active |= s.count > 0;
            if let Some(f) = &s.failures {
                for &(errno, count) in &f.errnos {
                    out.failures.push(WindowFailure {
                        id: s.key.id,
                        fd_kind: s.key.fd_kind,
                        errno,
                        count,
                        first_ns: f.first_ns,
                        last_ns: f.last_ns,
                    });
                }
            }
            let Some(roles) = self.by_id.get(s.key.id.0 as usize) else {
                continue;
            };
            let kind = s.key.fd_kind;
            let mut add = |metric: Option<usize>, group: Group| {
                if let Some(m) = metric {
                    let sv = &mut out.service[m];
                    sv.count = sv.count.saturating_add(s.count);
                    sv.total_ns = sv.total_ns.saturating_add(s.total_ns);
                }
                out.groups[group.index()].add(s);
            };
            if kind == FdKind::File && roles.read {
                add(Some(FILE_READ), Group::FileRead);
            } else if kind == FdKind::File && roles.write {
                add(Some(FILE_WRITE), Group::FileWrite);
            } else if is_socket(kind) && roles.socket_read {
                add(Some(SOCKET_READ), Group::SocketRead);
            }
            if let Some(g) = roles.any_fd {
                add(None, g);
                if self.accept.contains(&s.key.id) && s.count > 0 {
                    out.accepted = true;
                }
            }
        }
        out
    }
}
