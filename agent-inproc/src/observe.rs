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

/// A call as the statistics file it: the raw number libc makes for it
/// and its canonical id, both known when the wrapper is built (each
/// wrapper holds its `Call` as a constant: no table lookup per call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    nr: u32,
    id: SyscallId,
}

impl Call {
    /// The call of raw number `nr` on this ABI.
    pub const fn of(nr: u32) -> Call {
        Call {
            nr,
            id: SyscallId::from_raw(ARCH, nr),
        }
    }

    /// Its canonical id.
    pub const fn id(self) -> SyscallId {
        self.id
    }
}

/// The calls this module files itself.
const EXECVE: Call = Call::of(crate::calls::EXECVE);
const VFORK: Call = Call::of(crate::calls::VFORK);
const SPAWN: Call = Call::of(crate::calls::SPAWN_AS);
const WAIT4: Call = Call::of(crate::calls::WAIT4);

/// Begins observing `call`, if the process is observed and the call
/// wanted.
#[inline]
pub fn begin(call: Call) -> Option<Observation> {
    let table = crate::active::table()?;
    if !table.wants(call.id) {
        return None;
    }
    Some(Observation {
        table,
        nr: call.nr,
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
/// A `vfork` child shares its parent's memory, this thread-local
/// included: it neither keeps its own id there (the parent would take it
/// for its own) nor counts a thread.
fn this_thread(table: &RunTable) -> u32 {
    TID.try_with(|t| match t.get() {
        0 => {
            let tid = sys::gettid();
            if sys::getpid() == JOINED_PID.load(Ordering::Relaxed) {
                t.set(tid);
                table.thread_started();
            }
            tid
        }
        tid => tid,
    })
    .unwrap_or_else(|_| sys::gettid())
}

/// The last `vfork` child that counted its parent's `vfork` (in memory the
/// child shares with its parent: each child counts it once).
static VFORK_COUNTED: AtomicU32 = AtomicU32::new(0);

/// Called by the calls a `vfork` child may make (the `exec` family,
/// `_exit`): in such a child, the first one counts the parent's `vfork`.
/// `vfork` itself is not wrapped: a wrapper's frame would be returned
/// through twice on the one stack parent and child share, and the parent
/// would resume in a frame the child has overwritten. So the child, the
/// only one to run between the two returns, files the call for its
/// parent: on the parent's thread (whose id is in the thread-local the
/// child shares; the parent thread is suspended until the child execs or
/// exits, so nothing else records as it), returning the child's pid, with
/// no duration (its time is the parent's wait for this exec or exit).
/// Costs one `getpid` per exec or `_exit` of an observed process.
pub fn vfork_child_check() {
    let Some(table) = crate::active::table() else {
        return;
    };
    let pid = sys::getpid();
    if pid == JOINED_PID.load(Ordering::Relaxed)
        || VFORK_COUNTED.swap(pid, Ordering::Relaxed) == pid
    {
        return;
    }
    if !table.wants(VFORK.id) {
        return;
    }
    let now = sys::monotonic_ns();
    let obs = Observation {
        table,
        nr: VFORK.nr,
        entry_ns: now,
    };
    obs.record_at([0; 6], i64::from(pid), FdKind::None, None, now, now);
}

/// A `posix_spawn` (or `system`, `popen`) in progress, observed.
#[derive(Debug)]
pub struct Spawn {
    table: &'static RunTable,
    entry_ns: u64,
}

/// Begins observing a call that makes a process inside libc, where no
/// wrapper sees the process made nor its `execve` (libc calls both
/// directly, the `execve` in the child on a stack of its own).
#[inline]
pub fn spawn_begins() -> Option<Spawn> {
    let table = crate::active::table()?;
    Some(Spawn {
        table,
        entry_ns: sys::monotonic_ns(),
    })
}

/// How a spawn ended, as the calls libc made for it.
#[derive(Debug, Clone, Copy)]
pub enum Spawned {
    /// The process was made and its `execve` succeeded (`pid`: the
    /// child's, 0 when not known).
    Ran { pid: u32 },
    /// The process was made (and reaped, glibc's `posix_spawn` waits for
    /// a child whose exec failed) but its `execve` failed with `errno`.
    ExecFailed { errno: i32 },
    /// No process was made (`clone` failed with `errno`).
    NotMade { errno: i32 },
}

impl Spawned {
    /// What `posix_spawn`'s return (0 or an error number) says: the
    /// errors `clone` gives (EAGAIN, ENOMEM, ENOSYS) are the process's,
    /// any other is the `execve`'s (or a file action's: filed so too).
    pub fn of_posix_spawn(ret: i32, pid: u32) -> Spawned {
        match ret {
            0 => Spawned::Ran { pid },
            libc::EAGAIN | libc::ENOMEM | libc::ENOSYS => Spawned::NotMade { errno: ret },
            errno => Spawned::ExecFailed { errno },
        }
    }
}

impl Spawn {
    /// The spawn ended so: files the process-making call, its `execve`
    /// and (an exec that failed) the reaping `wait4`, each timed over
    /// the whole libc call (the parent waits for the child's exec).
    pub fn ended(self, how: Spawned) {
        let now = sys::monotonic_ns();
        let (made, exec, reaped) = match how {
            Spawned::Ran { pid } => (i64::from(pid.max(1)), Some(0), false),
            Spawned::ExecFailed { errno } => (1, Some(-i64::from(errno)), true),
            Spawned::NotMade { errno } => (-i64::from(errno), None, false),
        };
        self.file(SPAWN, made, now);
        if let Some(ret) = exec {
            self.file(EXECVE, ret, now);
        }
        if reaped {
            self.file(WAIT4, made, now);
        }
    }

    /// Files the `wait4` a call made inside libc (`system`'s, `pclose`'s)
    /// that returned `ret` (the kernel's form).
    pub fn waited(&self, ret: i64) {
        self.file(WAIT4, ret, sys::monotonic_ns());
    }

    fn file(&self, call: Call, ret: i64, now: u64) {
        if !self.table.wants(call.id) {
            return;
        }
        let obs = Observation {
            table: self.table,
            nr: call.nr,
            entry_ns: self.entry_ns,
        };
        obs.record_at([0; 6], ret, FdKind::None, None, self.entry_ns, now);
    }
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
            nr: EXECVE.nr,
            entry_ns,
        };
        if table.wants(EXECVE.id) {
            obs.record_at([0; 6], 0, FdKind::None, None, entry_ns, now);
        }
        return true;
    }
    false
}
