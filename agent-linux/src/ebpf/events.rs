//! The records the BPF program (`bpf/syscalls.bpf.c`, `struct event`)
//! writes to its ring buffer (a new task, a task's end, a call in flight
//! across a window's cut) and its per-thread entries (`struct thread`),
//! read from bytes, with the socket peer (`struct peer`) each carries.
//! Bytes from the kernel are still checked: a record of the wrong size or
//! kind is refused, never trusted.

use core::mem::{offset_of, size_of};

use agent_core::{FdKind, PeerAddr, PeerIp, SyscallId};

use super::kernel_types::{event, peer, thread, KIND_CROSSED, KIND_EXIT, KIND_FORK};
use crate::fd::sockaddr::remote_end;

/// `sizeof(struct event)` in the C program.
pub const RECORD_LEN: usize = size_of::<event>();

/// `sizeof(struct peer)` in the C program.
pub const PEER_LEN: usize = size_of::<peer>();

/// `AF_INET`, `AF_INET6` in `struct peer`'s family.
const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;

/// One ring-buffer record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A traced task made a thread or a process.
    Fork {
        /// The new task's tid.
        tid: u32,
        /// Its process (its own tid for a new process).
        tgid: u32,
        /// A new process rather than a thread.
        process: bool,
        /// When (monotonic ns).
        at_ns: u64,
        /// The run's slot (its parent's).
        slot: u8,
    },
    /// A traced thread ended.
    Exit {
        /// The thread.
        tid: u32,
        /// Its process.
        tgid: u32,
        /// It was the process's last thread.
        process_ended: bool,
        /// The thread's exit code, as `wait` reports it.
        status: i32,
        /// When it ended (monotonic ns).
        at_ns: u64,
        /// The run's slot.
        slot: u8,
    },
    /// A call that entered before a cut and ended after it: in flight at
    /// that cut.
    Crossed {
        /// The calling thread.
        tid: u32,
        /// The call in flight.
        call: Pending,
        /// The cut (monotonic ns).
        cut_ns: u64,
        /// The run's slot.
        slot: u8,
    },
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut w = [0u8; 2];
    w.copy_from_slice(&b[at..at + 2]);
    u16::from_ne_bytes(w)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(w)
}

/// The native-endian u64 at byte `at` of `b` (which holds it).
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(w)
}

/// The `struct peer` at byte `at` of `b` (which holds it) as the peer the
/// ptrace backend names for the same socket: `None` when it has none
/// (family 0), for a family or transport a peer cannot have, and for no
/// remote end by [`remote_end`]'s rule (an IPv4-mapped IPv6 address is
/// given as IPv4).
pub fn peer_at(b: &[u8], at: usize) -> Option<PeerAddr> {
    let p = b.get(at..at + PEER_LEN)?;
    let transport = match FdKind::from_u8(p[offset_of!(peer, transport)])? {
        t @ (FdKind::Tcp | FdKind::Udp) => t,
        _ => return None,
    };
    let mut addr = [0u8; 16];
    let addr_at = offset_of!(peer, addr);
    addr.copy_from_slice(&p[addr_at..addr_at + 16]);
    let ip = match p[offset_of!(peer, family)] {
        AF_INET => PeerIp::V4([addr[0], addr[1], addr[2], addr[3]]),
        AF_INET6 => PeerIp::V6(addr),
        _ => return None,
    };
    remote_end(transport, ip, u16_at(p, offset_of!(peer, port)))
}

/// A syscall id from the kernel: one of this build's or a carried unknown
/// number, else refused.
fn syscall_id(raw: u32) -> Option<SyscallId> {
    let id = SyscallId(u16::try_from(raw).ok()?);
    id.is_known().then_some(id)
}

impl Record {
    /// Parses one record; `None` for bytes that are not one.
    pub fn parse(b: &[u8]) -> Option<Record> {
        if b.len() < RECORD_LEN {
            return None;
        }
        let kind = u32_at(b, offset_of!(event, kind));
        let tid = u32_at(b, offset_of!(event, tid));
        let tgid = u32_at(b, offset_of!(event, tgid));
        let nr = u32_at(b, offset_of!(event, nr));
        let at_ns = u64_at(b, offset_of!(event, at_ns));
        let flag = b[offset_of!(event, flag)] != 0;
        let slot = b[offset_of!(event, slot)];
        match kind {
            KIND_FORK => Some(Record::Fork {
                tid,
                tgid,
                process: flag,
                at_ns,
                slot,
            }),
            KIND_EXIT => Some(Record::Exit {
                tid,
                tgid,
                process_ended: flag,
                status: nr as i32,
                at_ns,
                slot,
            }),
            KIND_CROSSED => Some(Record::Crossed {
                tid,
                call: Pending {
                    id: syscall_id(nr)?,
                    fd_kind: FdKind::from_u8(b[offset_of!(event, fd_kind)])?,
                    peer: peer_at(b, offset_of!(event, peer)),
                    entry_ns: at_ns,
                },
                cut_ns: u64_at(b, offset_of!(event, cut_ns)),
                slot,
            }),
            _ => None,
        }
    }
}

/// `sizeof(struct thread)` in the C program: a value of its THREADS map.
pub const THREAD_LEN: usize = size_of::<thread>();

/// A call the program saw enter and not yet leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The syscall.
    pub id: SyscallId,
    /// Its fd argument's kind, resolved at entry.
    pub fd_kind: FdKind,
    /// Its socket's peer, resolved at entry (connect: the address it
    /// names).
    pub peer: Option<PeerAddr>,
    /// When it entered (monotonic ns).
    pub entry_ns: u64,
}

/// The run's slot in one THREADS value (`struct thread`'s `slot`).
pub fn thread_slot(b: &[u8]) -> Option<u8> {
    (b.len() >= THREAD_LEN).then(|| b[offset_of!(thread, slot)])
}

impl Pending {
    /// The call in flight in one THREADS value: `None` when the thread is
    /// between calls, or for bytes that are not one.
    pub fn parse(b: &[u8]) -> Option<Pending> {
        if b.len() < THREAD_LEN {
            return None;
        }
        let entry_ns = u64_at(b, offset_of!(thread, entry_ns));
        if entry_ns == 0 {
            return None;
        }
        Some(Pending {
            entry_ns,
            id: syscall_id(u16_at(b, offset_of!(thread, id)) as u32)?,
            fd_kind: FdKind::from_u8(b[offset_of!(thread, fd_kind)])?,
            peer: peer_at(b, offset_of!(thread, peer)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, flag: u8, fd_kind: u8) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        let mut put = |at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
        put(offset_of!(event, kind), &kind.to_ne_bytes());
        put(offset_of!(event, tid), &42u32.to_ne_bytes());
        put(offset_of!(event, tgid), &40u32.to_ne_bytes());
        put(offset_of!(event, nr), &3u32.to_ne_bytes());
        put(offset_of!(event, at_ns), &250u64.to_ne_bytes());
        put(offset_of!(event, cut_ns), &300u64.to_ne_bytes());
        put(offset_of!(event, fd_kind), &[fd_kind]);
        put(offset_of!(event, flag), &[flag]);
        put(offset_of!(event, slot), &[9]);
        b
    }

    /// A `struct peer`.
    fn peer_bytes(addr: &[u8], port: u16, family: u8, transport: u8) -> [u8; PEER_LEN] {
        let mut b = [0u8; PEER_LEN];
        let at = offset_of!(peer, addr);
        b[at..at + addr.len()].copy_from_slice(addr);
        let at = offset_of!(peer, port);
        b[at..at + 2].copy_from_slice(&port.to_ne_bytes());
        b[offset_of!(peer, family)] = family;
        b[offset_of!(peer, transport)] = transport;
        b
    }

    /// The kernel's peers read back as ptrace names them: IPv4, IPv6,
    /// an IPv4-mapped IPv6 address as IPv4; none for family 0, another
    /// family, a transport other than TCP or UDP, port 0, the
    /// unspecified address.
    #[test]
    fn peers_read_back_as_ptrace_names_them() {
        let v4 = |a: [u8; 4], port| PeerAddr {
            transport: FdKind::Udp,
            ip: PeerIp::V4(a),
            port,
        };
        assert_eq!(
            peer_at(&peer_bytes(&[127, 0, 0, 1], 53, AF_INET, 6), 0),
            Some(v4([127, 0, 0, 1], 53))
        );
        let mut six = [0u8; 16];
        six[0] = 0x20;
        six[15] = 1;
        assert_eq!(
            peer_at(&peer_bytes(&six, 443, AF_INET6, 5), 0),
            Some(PeerAddr {
                transport: FdKind::Tcp,
                ip: PeerIp::V6(six),
                port: 443
            })
        );
        let mut mapped = [0u8; 16];
        mapped[10..].copy_from_slice(&[0xff, 0xff, 10, 1, 2, 3]);
        assert_eq!(
            peer_at(&peer_bytes(&mapped, 53, AF_INET6, 6), 0),
            Some(v4([10, 1, 2, 3], 53))
        );
        let one = [127, 0, 0, 1];
        assert_eq!(peer_at(&peer_bytes(&one, 53, 0, 6), 0), None, "none");
        assert_eq!(peer_at(&peer_bytes(&one, 53, 1, 6), 0), None, "AF_UNIX");
        assert_eq!(peer_at(&peer_bytes(&one, 53, AF_INET, 7), 0), None, "unix");
        assert_eq!(peer_at(&peer_bytes(&one, 53, AF_INET, 99), 0), None);
        assert_eq!(peer_at(&peer_bytes(&one, 0, AF_INET, 6), 0), None, "port 0");
        assert_eq!(peer_at(&peer_bytes(&[0; 4], 53, AF_INET, 6), 0), None);
        assert_eq!(peer_at(&[0u8; PEER_LEN - 1], 0), None, "short");
    }

    #[test]
    fn records_read_back_field_by_field() {
        assert_eq!(
            Record::parse(&record(1, 1, 0)),
            Some(Record::Fork {
                tid: 42,
                tgid: 40,
                process: true,
                at_ns: 250,
                slot: 9,
            })
        );
        assert_eq!(
            Record::parse(&record(2, 0, 0)),
            Some(Record::Exit {
                tid: 42,
                tgid: 40,
                process_ended: false,
                status: 3,
                at_ns: 250,
                slot: 9,
            })
        );
        assert_eq!(
            Record::parse(&record(3, 0, 5)),
            Some(Record::Crossed {
                tid: 42,
                call: Pending {
                    id: SyscallId(3),
                    fd_kind: FdKind::Tcp,
                    peer: None,
                    entry_ns: 250
                },
                cut_ns: 300,
                slot: 9,
            })
        );
    }

    /// A crossing record carries its call's peer after the fixed fields.
    #[test]
    fn a_crossing_record_reads_back_its_peer() {
        let mut b = record(3, 0, 6);
        b[40..64].copy_from_slice(&peer_bytes(&[10, 0, 0, 7], 53, AF_INET, 6));
        let Some(Record::Crossed { call, .. }) = Record::parse(&b) else {
            panic!("not a crossing record");
        };
        assert_eq!(
            call.peer,
            Some(PeerAddr {
                transport: FdKind::Udp,
                ip: PeerIp::V4([10, 0, 0, 7]),
                port: 53
            })
        );
    }

    #[test]
    fn bad_bytes_are_refused() {
        assert_eq!(Record::parse(&record(0, 0, 0)), None, "kind 0 is gone");
        assert_eq!(Record::parse(&record(9, 0, 0)), None, "unknown kind");
        assert_eq!(Record::parse(&record(3, 0, 8)), None, "unknown fd kind");
        let mut b = record(3, 0, 0);
        b[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(Record::parse(&b), None, "unknown syscall id");
        assert_eq!(
            Record::parse(&record(1, 0, 0)[..RECORD_LEN - 1]),
            None,
            "short"
        );
    }

    #[test]
    fn a_thread_entry_reads_back_its_call_in_flight() {
        let mut b = [0u8; THREAD_LEN];
        let (entry, id) = (offset_of!(thread, entry_ns), offset_of!(thread, id));
        let (fd_kind, peer_at_) = (offset_of!(thread, fd_kind), offset_of!(thread, peer));
        b[entry..entry + 8].copy_from_slice(&1234u64.to_ne_bytes());
        b[id..id + 2].copy_from_slice(&7u16.to_ne_bytes());
        b[fd_kind] = 5;
        b[offset_of!(thread, slot)] = 4;
        assert_eq!(thread_slot(&b), Some(4));
        assert_eq!(
            Pending::parse(&b),
            Some(Pending {
                id: SyscallId(7),
                fd_kind: FdKind::Tcp,
                peer: None,
                entry_ns: 1234
            })
        );
        b[peer_at_..peer_at_ + PEER_LEN].copy_from_slice(&peer_bytes(
            &[10, 0, 0, 9],
            80,
            AF_INET,
            5,
        ));
        assert_eq!(
            Pending::parse(&b).and_then(|p| p.peer),
            Some(PeerAddr {
                transport: FdKind::Tcp,
                ip: PeerIp::V4([10, 0, 0, 9]),
                port: 80
            })
        );
        b[fd_kind] = 8;
        assert_eq!(Pending::parse(&b), None, "unknown fd kind");
        assert_eq!(Pending::parse(&b[..THREAD_LEN - 1]), None, "short");
        b[fd_kind] = 0;
        b[entry..entry + 8].copy_from_slice(&0u64.to_ne_bytes());
        assert_eq!(Pending::parse(&b), None, "between calls");
    }
}
