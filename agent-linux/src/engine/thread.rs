//! The state of one traced thread: its session, process and fd table, where
//! it is, and the syscall it is inside. A leaf: the engine's other modules
//! use it, it uses none of them.

use agent_core::{Arch, FdKind, PeerAddr, SyscallId};

use crate::fd::SharedFds;
use crate::sys::Tid;

/// The syscall a thread is inside, as seen at its entry (or seccomp) stop.
#[derive(Clone, Copy, Debug)]
pub(super) struct Call {
    pub(super) arch: Arch,
    pub(super) nr: u32,
    pub(super) id: SyscallId,
    pub(super) args: [u64; 6],
    pub(super) entry_ns: u64,
    pub(super) fd_kind: FdKind,
    /// The remote end of the fd's socket, when known.
    pub(super) peer: Option<PeerAddr>,
}

/// Where a traced thread is, besides the call it may be inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ThreadState {
    /// Traced.
    Traced,
    /// After a seccomp stop on a kernel that stops at syscall entry after
    /// it (before 4.8): the next syscall stop is that entry, not the exit.
    EntryStopDue,
    /// To be let go at its next stop.
    Detaching,
}

/// One traced thread.
#[derive(Debug)]
pub(super) struct Thread {
    pub(super) session: usize,
    pub(super) tgid: Tid,
    pub(super) fds: SharedFds,
    pub(super) state: ThreadState,
    /// The syscall it is inside, from its entry (or seccomp) stop until its
    /// exit stop.
    pub(super) call: Option<Call>,
}

impl Thread {
    /// Between an entry (or seccomp) stop and the exit stop.
    #[inline]
    pub(super) fn in_call(&self) -> bool {
        self.call.is_some()
    }

    pub(super) fn is_detaching(&self) -> bool {
        self.state == ThreadState::Detaching
    }
}
