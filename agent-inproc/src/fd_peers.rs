//! Each socket fd's remote end, remembered: a wrapper of a TCP or UDP
//! call asks the kernel (`getpeername`) once per fd, not at every call (a
//! system call per `read` was a tenth of a loopback download's time). Kept
//! right as the fd kinds are: forgotten when the fd is closed, replaced or
//! made anew, set by `connect` to the address it names. Lock-free,
//! allocation-free and never waiting (a wrapper may run in a signal
//! handler that interrupted another on the same thread): per fd an epoch,
//! a sequence word and three data words. Forgetting bumps the epoch, and
//! an entry counts only if written in the current epoch, so a peer asked
//! before a `close` and stored after it is not taken for the new fd's. A
//! write claims the entry by compare-and-swap (a second writer at the
//! same moment skips caching); a read that raced a write asks the kernel.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use agent_core::{FdKind, PeerAddr, PeerIp};

/// Fds below this have their peer remembered; higher ones ask each time.
pub const CACHED_PEER_FDS: usize = 256;

/// What an entry holds (in the low byte of its first data word).
const UNKNOWN: u64 = 0;
const NO_PEER: u64 = 1;
const V4: u64 = 2;
const V6: u64 = 3;

/// One fd's peer: `seq` odd while being written; the first word carries
/// the epoch it was asked in.
#[derive(Debug)]
struct Entry {
    epoch: AtomicU32,
    seq: AtomicU32,
    words: [AtomicU64; 3],
}

/// The remembered peers of the process's fds.
#[derive(Debug)]
pub struct FdPeers {
    entries: [Entry; CACHED_PEER_FDS],
}

/// What is known of an fd's peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// Nothing: ask the kernel.
    Unknown,
    /// Asked: this (or none).
    Peer(Option<PeerAddr>),
}

impl Default for FdPeers {
    fn default() -> Self {
        FdPeers::new()
    }
}

impl FdPeers {
    /// Nothing known.
    pub const fn new() -> FdPeers {
        FdPeers {
            entries: [const {
                Entry {
                    epoch: AtomicU32::new(0),
                    seq: AtomicU32::new(0),
                    words: [const { AtomicU64::new(0) }; 3],
                }
            }; CACHED_PEER_FDS],
        }
    }

    /// The epoch of `fd`'s entry: take it before asking the kernel, and
    /// give it to [`FdPeers::set`].
    pub fn epoch(&self, fd: i64) -> u32 {
        self.entry(fd)
            .map_or(0, |e| e.epoch.load(Ordering::Acquire))
    }

    /// What is known of `fd`'s peer.
    pub fn get(&self, fd: i64) -> Known {
        let Some(e) = self.entry(fd) else {
            return Known::Unknown;
        };
        let before = e.seq.load(Ordering::Acquire);
        if before % 2 == 1 {
            return Known::Unknown;
        }
        let w = [
            e.words[0].load(Ordering::Acquire),
            e.words[1].load(Ordering::Acquire),
            e.words[2].load(Ordering::Acquire),
        ];
        if e.seq.load(Ordering::Acquire) != before
            || (w[0] >> 32) as u32 != e.epoch.load(Ordering::Acquire)
        {
            return Known::Unknown;
        }
        decode(w)
    }

    /// `fd`'s peer is `peer`, asked (or named by `connect`) in `epoch`
    /// ([`FdPeers::epoch`]); skipped if another write holds the entry.
    pub fn set(&self, fd: i64, peer: Option<PeerAddr>, epoch: u32) {
        let Some(e) = self.entry(fd) else {
            return;
        };
        let seq = e.seq.load(Ordering::Acquire);
        if seq % 2 == 1
            || e.seq
                .compare_exchange(seq, seq + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        let mut w = encode(peer);
        w[0] |= u64::from(epoch) << 32;
        for (slot, value) in e.words.iter().zip(w) {
            slot.store(value, Ordering::Release);
        }
        e.seq.fetch_add(1, Ordering::AcqRel);
    }

    /// `fd` was closed, replaced or made anew: what was known (or is being
    /// stored) of it no longer counts.
    pub fn forget(&self, fd: i64) {
        if let Some(e) = self.entry(fd) {
            e.epoch.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn entry(&self, fd: i64) -> Option<&Entry> {
        usize::try_from(fd).ok().and_then(|i| self.entries.get(i))
    }
}

fn encode(peer: Option<PeerAddr>) -> [u64; 3] {
    let Some(p) = peer else {
        return [NO_PEER, 0, 0];
    };
    let head = |tag: u64| tag | (p.transport as u64) << 8 | u64::from(p.port) << 16;
    match p.ip {
        PeerIp::V4(ip) => [head(V4), u64::from(u32::from_ne_bytes(ip)), 0],
        PeerIp::V6(ip) => {
            let mut lo = [0u8; 8];
            let mut hi = [0u8; 8];
            lo.copy_from_slice(&ip[..8]);
            hi.copy_from_slice(&ip[8..]);
            [head(V6), u64::from_ne_bytes(lo), u64::from_ne_bytes(hi)]
        }
    }
}

fn decode(w: [u64; 3]) -> Known {
    let tag = w[0] & 0xff;
    let w0 = w[0] & 0xffff_ffff;
    let transport = FdKind::from_u8((w0 >> 8) as u8).unwrap_or(FdKind::Tcp);
    let port = (w0 >> 16) as u16;
    let ip = match tag {
        UNKNOWN => return Known::Unknown,
        NO_PEER => return Known::Peer(None),
        V4 => PeerIp::V4((w[1] as u32).to_ne_bytes()),
        V6 => {
            let mut ip = [0u8; 16];
            ip[..8].copy_from_slice(&w[1].to_ne_bytes());
            ip[8..].copy_from_slice(&w[2].to_ne_bytes());
            PeerIp::V6(ip)
        }
        _ => return Known::Unknown,
    };
    Known::Peer(Some(PeerAddr {
        transport,
        ip,
        port,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(port: u16) -> PeerAddr {
        PeerAddr {
            transport: FdKind::Tcp,
            ip: PeerIp::V4([127, 0, 0, 1]),
            port,
        }
    }

    #[test]
    fn a_peer_is_kept_until_forgotten() {
        let peers = FdPeers::new();
        assert_eq!(peers.get(5), Known::Unknown);
        peers.set(5, Some(v4(80)), peers.epoch(5));
        assert_eq!(peers.get(5), Known::Peer(Some(v4(80))));
        let six = PeerAddr {
            transport: FdKind::Udp,
            ip: PeerIp::V6([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]),
            port: 53,
        };
        peers.set(6, Some(six), peers.epoch(6));
        assert_eq!(peers.get(6), Known::Peer(Some(six)));
        peers.set(7, None, peers.epoch(7));
        assert_eq!(peers.get(7), Known::Peer(None));
        peers.forget(5);
        assert_eq!(peers.get(5), Known::Unknown);
        // Asked before a close, stored after it: not the new fd's peer.
        let asked_in = peers.epoch(8);
        peers.forget(8);
        peers.set(8, Some(v4(9)), asked_in);
        assert_eq!(peers.get(8), Known::Unknown);
        // Out of range: never remembered.
        peers.set(CACHED_PEER_FDS as i64, Some(v4(1)), 0);
        assert_eq!(peers.get(CACHED_PEER_FDS as i64), Known::Unknown);
        assert_eq!(peers.get(-1), Known::Unknown);
    }

    #[test]
    fn a_read_never_sees_half_a_write() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let peers = Arc::new(FdPeers::new());
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (peers, stop) = (peers.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut port = 0u16;
                while !stop.load(Ordering::Relaxed) {
                    port = port.wrapping_add(1);
                    peers.set(3, Some(v4(port)), peers.epoch(3));
                }
            })
        };
        for _ in 0..200_000 {
            if let Known::Peer(Some(p)) = peers.get(3) {
                assert_eq!(p.ip, PeerIp::V4([127, 0, 0, 1]));
                assert_eq!(p.transport, FdKind::Tcp);
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
    }
}
