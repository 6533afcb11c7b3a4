//! The records the BPF program (`bpf/syscalls.bpf.c`, `struct event`)
//! writes to its ring buffer, read from bytes: a completed syscall, a new
//! task, a task's end. Bytes from the kernel are still checked: a record
//! of the wrong size or kind is refused, never trusted.

use agent_core::{Arch, FdKind, SyscallEvent};

/// `sizeof(struct event)` in the C program.
pub const RECORD_LEN: usize = 96;

const KIND_SYSCALL: u32 = 0;
const KIND_FORK: u32 = 1;
const KIND_EXIT: u32 = 2;

/// One ring-buffer record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A completed syscall (`compat`: made through the host's 32-bit ABI).
    Syscall {
        /// The calling thread's process.
        tgid: u32,
        /// The call, its ABI still to be chosen (see [`Record::event`]).
        event: SyscallEvent,
        /// Made through the compat ABI.
        compat: bool,
    },
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
    },
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(w)
}

impl Record {
    /// Parses one record; `None` for bytes that are not one.
    pub fn parse(b: &[u8]) -> Option<Record> {
        if b.len() < RECORD_LEN {
            return None;
        }
        let kind = u32_at(b, 0);
        let tid = u32_at(b, 4);
        let tgid = u32_at(b, 8);
        let nr = u32_at(b, 12);
        let flag = b[89] != 0;
        match kind {
            KIND_SYSCALL => {
                let mut args = [0u64; 6];
                for (i, a) in args.iter_mut().enumerate() {
                    *a = u64_at(b, 16 + 8 * i);
                }
                Some(Record::Syscall {
                    tgid,
                    compat: flag,
                    event: SyscallEvent {
                        tid,
                        // Set by `Record::event`, which knows the host.
                        arch: Arch::X86_64,
                        nr,
                        args,
                        ret: u64_at(b, 64) as i64,
                        entry_ns: u64_at(b, 72),
                        exit_ns: u64_at(b, 80),
                        fd_kind: FdKind::from_u8(b[88])?,
                        peer: None,
                    },
                })
            }
            KIND_FORK => Some(Record::Fork {
                tid,
                tgid,
                process: flag,
                at_ns: u64_at(b, 80),
            }),
            KIND_EXIT => Some(Record::Exit {
                tid,
                tgid,
                process_ended: flag,
                status: nr as i32,
                at_ns: u64_at(b, 80),
            }),
            _ => None,
        }
    }
}

/// `sizeof(struct inflight)` in the C program: a value of its INFLIGHT map.
pub const PENDING_LEN: usize = 64;

/// A call the program saw enter and not yet leave (an INFLIGHT entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The raw syscall number.
    pub nr: u32,
    /// Made through the compat ABI.
    pub compat: bool,
    /// Its fd argument's kind, resolved at entry.
    pub fd_kind: FdKind,
    /// When it entered (monotonic ns).
    pub entry_ns: u64,
}

impl Pending {
    /// Parses one INFLIGHT value; `None` for bytes that are not one.
    pub fn parse(b: &[u8]) -> Option<Pending> {
        if b.len() < PENDING_LEN {
            return None;
        }
        Some(Pending {
            entry_ns: u64_at(b, 48),
            nr: u32_at(b, 56),
            fd_kind: FdKind::from_u8(b[60])?,
            compat: b[61] != 0,
        })
    }
}

/// A syscall record as the collector takes it: the ABI chosen from the
/// host's pair (`abis[0]` native, `abis[1]` compat), and a compat call's
/// result sign-extended from 32 bits as the ptrace backend does.
pub fn syscall_event(mut event: SyscallEvent, compat: bool, abis: &[Arch]) -> SyscallEvent {
    match (compat, abis) {
        (true, [_, compat_abi, ..]) => {
            event.arch = *compat_abi;
            event.ret = event.ret as i32 as i64;
        }
        (_, [native, ..]) => event.arch = *native,
        _ => {}
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, flag: u8, fd_kind: u8) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..4].copy_from_slice(&kind.to_ne_bytes());
        b[4..8].copy_from_slice(&42u32.to_ne_bytes());
        b[8..12].copy_from_slice(&40u32.to_ne_bytes());
        b[12..16].copy_from_slice(&3u32.to_ne_bytes());
        b[16..24].copy_from_slice(&7u64.to_ne_bytes());
        b[64..72].copy_from_slice(&(-9i64).to_ne_bytes());
        b[72..80].copy_from_slice(&100u64.to_ne_bytes());
        b[80..88].copy_from_slice(&250u64.to_ne_bytes());
        b[88] = fd_kind;
        b[89] = flag;
        b
    }

    #[test]
    fn a_syscall_record_reads_back_field_by_field() {
        let Some(Record::Syscall {
            tgid,
            event,
            compat,
        }) = Record::parse(&record(0, 0, 5))
        else {
            panic!("not a syscall record");
        };
        assert_eq!((tgid, compat), (40, false));
        assert_eq!((event.tid, event.nr, event.args[0]), (42, 3, 7));
        assert_eq!((event.ret, event.entry_ns, event.exit_ns), (-9, 100, 250));
        assert_eq!(event.fd_kind, FdKind::Tcp);
    }

    #[test]
    fn task_records_and_bad_bytes() {
        assert_eq!(
            Record::parse(&record(1, 1, 0)),
            Some(Record::Fork {
                tid: 42,
                tgid: 40,
                process: true,
                at_ns: 250,
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
            })
        );
        assert_eq!(Record::parse(&record(9, 0, 0)), None, "unknown kind");
        assert_eq!(Record::parse(&record(0, 0, 8)), None, "unknown fd kind");
        assert_eq!(Record::parse(&record(0, 0, 0)[..95]), None, "short");
    }

    #[test]
    fn an_in_flight_entry_reads_back() {
        let mut b = [0u8; PENDING_LEN];
        b[48..56].copy_from_slice(&1234u64.to_ne_bytes());
        b[56..60].copy_from_slice(&202u32.to_ne_bytes());
        b[60] = 5;
        b[61] = 1;
        assert_eq!(
            Pending::parse(&b),
            Some(Pending {
                nr: 202,
                compat: true,
                fd_kind: FdKind::Tcp,
                entry_ns: 1234
            })
        );
        b[60] = 8;
        assert_eq!(Pending::parse(&b), None, "unknown fd kind");
        assert_eq!(Pending::parse(&b[..63]), None, "short");
    }

    #[test]
    fn compat_calls_take_the_second_abi_and_a_32_bit_result() {
        let Some(Record::Syscall { event, .. }) = Record::parse(&record(0, 1, 0)) else {
            panic!("not a syscall record");
        };
        let mut ev = event;
        ev.ret = 0xffff_fff7; // -9 in 32 bits, zero-extended
        let e = syscall_event(ev, true, &[Arch::X86_64, Arch::I386]);
        assert_eq!((e.arch, e.ret), (Arch::I386, -9));
        let e = syscall_event(ev, false, &[Arch::Aarch64, Arch::Arm]);
        assert_eq!((e.arch, e.ret), (Arch::Aarch64, 0xffff_fff7));
    }
}
