//! One fd table's cache of fd kinds and socket peers, shared by the tasks
//! that share the table (CLONE_FILES). A miss is resolved through
//! [`super::resolve`].
//!
//! A TCP or UDP socket's remote end is learnt once, at the first call on
//! it that follows its creation or its last `connect` (the call that gives
//! or changes it), from the tracee's net tables, and kept until the fd
//! changes. Known without asking: a fresh `socket()` has none, a `dup` has
//! its original's. An unconnected UDP socket, whose every `sendto` and
//! `recvfrom` may name another address, has none; so have listening and
//! Unix sockets.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use agent_core::{FdKind, PeerAddr};

use super::resolve::{resolve, resolve_opened_by_path, socket_peer, FdFacts};
use crate::sys::Tid;

/// Fds above this are resolved every time rather than cached (keeps the
/// cache's memory bounded by a hostile fd number).
const MAX_CACHED_FD: usize = 1 << 16;

/// A cache slot for an fd opened by path whose file type is not yet known
/// (a file, or a FIFO).
pub(super) const OPENED_BY_PATH: u8 = 0xff;

/// One fd table's cache: `kinds[fd]` is 0 (unknown), 1 + `FdKind`, or
/// [`OPENED_BY_PATH`]; `peers` holds the remote end of the TCP and UDP
/// sockets whose remote end is known (`None`: it has none), by fd.
#[derive(Debug, Default)]
pub struct FdTable {
    pub(super) kinds: Vec<u8>,
    pub(super) peers: HashMap<u32, Option<PeerAddr>>,
}

/// A cache shared by the tasks that share the fd table.
pub type SharedFds = Rc<RefCell<FdTable>>;

/// A fresh, empty cache.
pub fn new_table() -> SharedFds {
    Rc::new(RefCell::new(FdTable {
        kinds: vec![0; 64],
        peers: HashMap::new(),
    }))
}

/// Whether an fd of `kind` can have a remote end the agent reports.
pub fn has_peer(kind: FdKind) -> bool {
    matches!(kind, FdKind::Tcp | FdKind::Udp)
}

impl FdTable {
    /// The kind of `fd` in task `tid`'s table, from the cache or `/proc`.
    /// `FdKind::None` when it is not an open fd.
    #[cfg(test)]
    pub fn kind(&mut self, tid: Tid, fd: i64) -> FdKind {
        self.facts(tid, fd).kind
    }

    /// The kind of `fd` in task `tid`'s table and, for a TCP or UDP socket,
    /// its remote end, from the cache or `/proc` (a socket's remote end is
    /// asked of `/proc` at most once after each change).
    pub fn facts(&mut self, tid: Tid, fd: i64) -> FdFacts {
        if !(0..=i32::MAX as i64).contains(&fd) {
            return FdFacts::of(FdKind::None);
        }
        let slot = fd as usize;
        let cached = self.kinds.get(slot).copied().unwrap_or(0);
        let kind = match cached {
            0 => {
                // One look at /proc tells both (the peer from the line of
                // the net table that names the socket).
                let facts = resolve(tid, fd as i32);
                if facts.kind != FdKind::None {
                    self.set(fd, facts.kind);
                    if has_peer(facts.kind) {
                        self.store_peer(fd, facts.peer);
                    }
                }
                return facts;
            }
            OPENED_BY_PATH => {
                let kind = resolve_opened_by_path(tid, fd as i32);
                if kind != FdKind::None {
                    self.set(fd, kind);
                }
                return FdFacts::of(kind);
            }
            k => FdKind::from_u8(k - 1).unwrap_or(FdKind::None),
        };
        if !has_peer(kind) {
            return FdFacts::of(kind);
        }
        let peer = match self.peers.get(&(fd as u32)) {
            Some(peer) => *peer,
            None => {
                let peer = socket_peer(tid, fd as i32, kind);
                self.store_peer(fd, peer);
                peer
            }
        };
        FdFacts { kind, peer }
    }

    /// Records that `fd` is of `kind` (learnt from the call that made it);
    /// its remote end is not known yet (an accepted socket).
    pub fn set(&mut self, fd: i64, kind: FdKind) {
        self.forget_peer(fd);
        self.store(fd, kind as u8 + 1);
    }

    /// Records that `fd` is a fresh socket of `kind`: no remote end until
    /// it is connected.
    pub fn set_unconnected(&mut self, fd: i64, kind: FdKind) {
        self.set(fd, kind);
        if has_peer(kind) {
            self.store_peer(fd, None);
        }
    }

    /// Records that `to` is a copy of `from` (dup), of `kind` (`None`: not
    /// known): the same open file, so the same remote end, if known.
    pub fn copy(&mut self, from: i64, to: i64, kind: FdKind) {
        if from == to {
            return;
        }
        if kind == FdKind::None {
            return self.invalidate(to);
        }
        let peer = u32::try_from(from)
            .ok()
            .and_then(|f| self.peers.get(&f).copied());
        self.set(to, kind);
        if let Some(peer) = peer {
            self.store_peer(to, peer);
        }
    }

    /// Forgets the remote end of `fd` (connect may have given or changed
    /// it): the next call on it asks `/proc`.
    pub fn forget_peer(&mut self, fd: i64) {
        if let Ok(fd) = u32::try_from(fd) {
            self.peers.remove(&fd);
        }
    }

    /// Records the remote end of socket `fd` (named by the call that
    /// connected or made it).
    pub fn set_peer(&mut self, fd: i64, peer: PeerAddr) {
        self.store_peer(fd, Some(peer));
    }

    fn store_peer(&mut self, fd: i64, peer: Option<PeerAddr>) {
        match u32::try_from(fd) {
            Ok(fd) if (fd as usize) < MAX_CACHED_FD => {
                self.peers.insert(fd, peer);
            }
            _ => {}
        }
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
        self.forget_peer(fd);
        if let Ok(slot) = usize::try_from(fd) {
            if let Some(k) = self.kinds.get_mut(slot) {
                *k = 0;
            }
        }
    }

    /// Forgets fds `first..=last`.
    pub fn invalidate_range(&mut self, first: u64, last: u64) {
        self.peers
            .retain(|&fd, _| !(first..=last).contains(&u64::from(fd)));
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
    #[cfg(test)]
    pub fn clear(&mut self) {
        self.kinds.iter_mut().for_each(|k| *k = 0);
        self.peers.clear();
    }
}
