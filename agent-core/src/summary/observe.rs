//! What format version 2 adds to a summary for continuous observation:
//! where it comes from (device, stream, window length), the CPU time of the
//! traced processes, the calls still in flight when it was cut, and the
//! statistics of each socket peer.

use heapless::Vec;
use serde::{Deserialize, Serialize};

use crate::event::PeerAddr;
use crate::{DeviceId, FdKind, StreamId, SyscallId};

/// Most in-flight calls described one by one (the oldest ones).
pub const MAX_IN_FLIGHT: usize = 4;
/// Most socket peers with their own entry; the rest are folded into
/// [`Peers::rest`].
pub const MAX_PEERS: usize = 8;

/// Where a summary comes from and which piece of a stream it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Origin {
    /// The device's random 128-bit id (made on first use, kept in the
    /// agent's state folder; never derived from hardware). All zero: not
    /// known (a version 1 summary).
    pub device: DeviceId,
    /// Shared by every window of one traced run (random, 128 bits). All
    /// zero: not known (a version 1 summary).
    pub stream: StreamId,
    /// The window length the run was cut into, ns; 0 for a whole run. The
    /// window's index is `RunRecord::window`.
    pub window_ns: u64,
}

/// CPU time of the traced processes during the run or window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuTime {
    /// User-mode CPU time, ns.
    pub user_ns: u64,
    /// Kernel-mode CPU time, ns.
    pub system_ns: u64,
}

/// The most recent completed call on a peer's socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastCall {
    /// The syscall.
    pub id: SyscallId,
    /// Its raw result (`-4095..=-1`: failed with that errno).
    pub result: i64,
    /// When it completed, ns since the Unix epoch.
    pub end_unix_ns: u64,
}

/// Calls on the sockets connected to one peer in the run or window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    /// The peer.
    pub addr: PeerAddr,
    /// Calls on its sockets.
    pub calls: u64,
    /// Bytes moved by the successful read/write-family calls among them.
    pub bytes: u64,
    /// Time in those calls, ns.
    pub total_ns: u64,
    /// Failed calls.
    pub errors: u64,
    /// The most recent call (it may predate the window: a peer stays listed
    /// one window after its last call, so a silent peer is seen as such).
    pub last: Option<LastCall>,
}

/// The peers beyond [`MAX_PEERS`], folded together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PeerRest {
    /// How many peers were folded.
    pub peers: u32,
    /// Their calls.
    pub calls: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Their time, ns.
    pub total_ns: u64,
    /// Their failed calls.
    pub errors: u64,
}

/// Per-peer statistics of socket calls.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Peers {
    /// The peers with their own entry, most calls first (ties: lower
    /// address first).
    pub list: Vec<Peer, MAX_PEERS>,
    /// The rest.
    pub rest: PeerRest,
}

/// One call that had not completed when the summary was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightCall {
    /// The thread.
    pub tid: u32,
    /// The syscall.
    pub id: SyscallId,
    /// What its fd argument refers to.
    pub fd_kind: FdKind,
    /// The socket's peer, when it has one.
    pub peer: Option<PeerAddr>,
    /// When it started, ns since the Unix epoch (the same in every window
    /// the call spans).
    pub start_unix_ns: u64,
}

/// Calls in flight when the summary was cut (the last window of a run that
/// ended has none).
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InFlight {
    /// How many.
    pub count: u32,
    /// The oldest of them, oldest first.
    pub oldest: Vec<InFlightCall, MAX_IN_FLIGHT>,
}

impl PeerRest {
    /// Adds `p`'s figures (one more folded peer).
    pub fn fold(&mut self, p: &Peer) {
        self.peers = self.peers.saturating_add(1);
        self.calls = self.calls.saturating_add(p.calls);
        self.bytes = self.bytes.saturating_add(p.bytes);
        self.total_ns = self.total_ns.saturating_add(p.total_ns);
        self.errors = self.errors.saturating_add(p.errors);
    }

    /// Adds another rest.
    pub fn merge(&mut self, o: &PeerRest) {
        self.peers = self.peers.saturating_add(o.peers);
        self.calls = self.calls.saturating_add(o.calls);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.total_ns = self.total_ns.saturating_add(o.total_ns);
        self.errors = self.errors.saturating_add(o.errors);
    }
}

impl Peers {
    /// Checks the rules of the peer table; names the one broken.
    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        let mut prev: Option<&Peer> = None;
        for (i, p) in self.list.iter().enumerate() {
            if !matches!(p.addr.transport, FdKind::Tcp | FdKind::Udp) {
                return Err("peers: transport is neither tcp nor udp");
            }
            if p.errors > p.calls {
                return Err("peers: more errors than calls");
            }
            if p.calls == 0 && p.last.is_none() {
                return Err("peers: entry with neither calls nor a last call");
            }
            if let Some(q) = prev {
                if (q.calls, core::cmp::Reverse(q.addr)) <= (p.calls, core::cmp::Reverse(p.addr)) {
                    return Err("peers: not in decreasing call order");
                }
            }
            if self.list[..i].iter().any(|q| q.addr == p.addr) {
                return Err("peers: the same peer twice");
            }
            prev = Some(p);
        }
        let r = &self.rest;
        if r.errors > r.calls {
            return Err("peers: folded peers have more errors than calls");
        }
        if r.peers == 0 && (r.calls | r.bytes | r.total_ns) != 0 {
            return Err("peers: folded figures without folded peers");
        }
        Ok(())
    }
}

impl InFlight {
    /// Checks the rules of the in-flight list; names the one broken.
    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        if self.oldest.len() as u64 > self.count as u64 {
            return Err("in_flight: more calls described than counted");
        }
        if self
            .oldest
            .windows(2)
            .any(|w| w[0].start_unix_ns > w[1].start_unix_ns)
        {
            return Err("in_flight: calls not oldest first");
        }
        if self.oldest.iter().any(|c| {
            c.peer
                .is_some_and(|p| !matches!(p.transport, FdKind::Tcp | FdKind::Udp))
        }) {
            return Err("in_flight: peer transport is neither tcp nor udp");
        }
        Ok(())
    }
}
