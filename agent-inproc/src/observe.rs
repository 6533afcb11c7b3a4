//! What a wrapper does around the real call: whether to observe it, the
//! clock before and after, the fd's kind and peer, and the recording.
//! Per-process state lives here (the fd kinds, each thread's id); the
//! statistics are the run's [`RunTable`].

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};

use agent_core::{FdKind, PeerAddr, SyscallEvent, SyscallId};

use crate::calls::ARCH;
use crate::fd_kinds::FdKinds;
use crate::fd_peers::{FdPeers, Known};
use crate::sys;
use crate::table::RunTable;

/// This process's fds (not shared with the run: fd numbers are each
/// process's own; a forked child inherits a copy, as it inherits the fds).
static FDS: FdKinds = FdKinds::new();

/// This process's sockets' remote ends (per process, as the kinds).
static PEERS: FdPeers = FdPeers::new();

/// The process the run counted this memory as (set when it joined; a
/// `vfork` child shares it, and so tells itself apart by its pid).
static JOINED_PID: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// This thread's id (0: not asked yet). A const thread-local with no
    /// destructor: no allocation, no registration, safe in a handler.
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// A call being observed: what its end needs.
#[derive(Debug)]
pub struct Observation {
    table: &'static RunTable,
    nr: u32,
    entry_ns: u64,
}

/// Begins observing a call filed as syscall `nr`, if the process is
/// observed and the call wanted.
#[inline]
pub fn begin(nr: u32) -> Option<Observation> {
    let table = crate::active::table()?;
    if !table.wants(SyscallId::from_raw(ARCH, nr)) {
        return None;
    }
    Some(Observation {
        table,
        nr,
        entry_ns: sys::monotonic_ns(),
    })
}

impl Observation {
    /// The call with arguments `args` returned `ret` (the kernel's form:
    /// `-errno` for a failure); `fd_kind`: what its fd argument was;
    /// `peer`: its socket's remote end.
    #[inline]
    pub fn end(self, args: [u64; 6], ret: i64, fd_kind: FdKind, peer: Option<PeerAddr>) {
        let exit_ns = sys::monotonic_ns();
        self.record_at(args, ret, fd_kind, peer, self.entry_ns, exit_ns);
    }

    /// As [`Observation::end`], with the call's times given.
    pub fn record_at(
        &self,
        args: [u64; 6],
        ret: i64,
        fd_kind: FdKind,
        peer: Option<PeerAddr>,
        entry_ns: u64,
        exit_ns: u64,
    ) {
        let tid = this_thread(self.table);
        let ev = SyscallEvent {
            tid,
            arch: ARCH,
            nr: self.nr,
            args,
            ret,
            entry_ns,
            exit_ns,
            fd_kind,
            peer,
        };
        self.table.record(tid, &ev);
    }

    /// When the call began.
    pub fn entry_ns(&self) -> u64 {
        self.entry_ns
    }

    /// The run's table.
    pub fn table(&self) -> &'static RunTable {
        self.table
    }
}

/// This thread's id, asked once (its first observed call counts it).
fn this_thread(table: &RunTable) -> u32 {
    TID.try_with(|t| match t.get() {
        0 => {
            let tid = sys::gettid();
            t.set(tid);
            table.thread_started();
            tid
        }
        tid => tid,
    })
    .unwrap_or_else(|_| sys::gettid())
}

/// The calling process joined the run's `table` (at load, or as a child
/// just forked, whose only thread is the caller): counted, with its
/// thread, whose id is asked anew.
pub fn process_joined(table: &RunTable) {
    table.process_started();
    JOINED_PID.store(sys::getpid(), Ordering::Relaxed);
    let _ = TID.try_with(|t| t.set(0));
    this_thread(table);
}

/// What `fd` is (asked once, then remembered).
#[inline]
pub fn kind_of(fd: i64) -> FdKind {
    FDS.kind(fd, sys::fd_kind_of)
}

/// The remote end of `fd` if it is a TCP or UDP socket (asked once, then
/// remembered).
#[inline]
pub fn peer_of(fd: i64, kind: FdKind) -> Option<PeerAddr> {
    if !matches!(kind, FdKind::Tcp | FdKind::Udp) {
        return None;
    }
    let epoch = PEERS.epoch(fd);
    match PEERS.get(fd) {
        Known::Peer(peer) => peer,
        Known::Unknown => {
            let peer = sys::peer_of(i32::try_from(fd).ok()?, kind);
            PEERS.set(fd, peer, epoch);
            peer
        }
    }
}

/// `fd`'s socket was connected to `peer` (the address `connect` named).
#[inline]
pub fn connected(fd: i64, peer: Option<PeerAddr>) {
    PEERS.forget(fd);
    if peer.is_some() {
        PEERS.set(fd, peer, PEERS.epoch(fd));
    }
}

/// `fd` was closed or replaced: asked again at its next use.
#[inline]
pub fn forget(fd: i64) {
    FDS.forget(fd);
    PEERS.forget(fd);
}

/// `fd` was just made and is of `kind` (its peer asked at its next use).
#[inline]
pub fn made(fd: i64, kind: FdKind) {
    FDS.set(fd, kind);
    PEERS.forget(fd);
}

/// A libc return of -1 with `errno`, in the kernel's form.
#[inline]
pub fn kernel_ret(ret: i64, errno: i32) -> i64 {
    if ret == -1 {
        -(errno as i64)
    } else {
        ret
    }
}

/// Up to six arguments as the event's.
#[inline]
pub fn args(given: &[u64]) -> [u64; 6] {
    let mut args = [0; 6];
    for (to, from) in args.iter_mut().zip(given) {
        *to = *from;
    }
    args
}

/// An `execve` of this process: said in the run's table, so the image it
/// starts counts it (with its entry time) when it succeeds. False when
/// the table had no room (a success is then not counted: the caller's
/// image is gone before it could).
pub fn exec_begins(obs: &Observation) -> bool {
    let pid = sys::getpid();
    let uncounted = pid != JOINED_PID.load(Ordering::Relaxed);
    obs.table.exec_begins(pid, obs.entry_ns, uncounted)
}

/// The `execve` returned: it failed; counted so.
pub fn exec_returned(pending: bool, obs: Observation, args: [u64; 6], ret: i64) {
    if pending {
        let _ = obs.table.exec_done(sys::getpid());
    }
    obs.end(args, ret, FdKind::None, None);
}

/// A new image of this process started in an observed run: the `execve`
/// that started it, if the old image said it was in flight, is counted
/// as a success (entered then, ended now). True when there was one (the
/// process was in the run already).
pub fn exec_arrived_counted(table: &'static RunTable) -> bool {
    let now = sys::monotonic_ns();
    if let Some((entry_ns, uncounted)) = table.exec_done(sys::getpid()) {
        if uncounted {
            process_joined(table);
        } else {
            // The same process and thread as before the exec, counted then.
            JOINED_PID.store(sys::getpid(), Ordering::Relaxed);
            let _ = TID.try_with(|t| t.set(sys::gettid()));
        }
        let obs = Observation {
            table,
            nr: crate::calls::EXECVE,
            entry_ns,
        };
        if table.wants(SyscallId::from_raw(ARCH, crate::calls::EXECVE)) {
            obs.record_at([0; 6], 0, FdKind::None, None, entry_ns, now);
        }
        return true;
    }
    false
}
