//! From a syscall's entry and exit stops to one `SyscallEvent` in the
//! session's collector: the fd argument's kind and, for a TCP or UDP
//! socket, its remote end at entry, the fd cache kept right at exit, the
//! `--only` selection. The hot path: no allocation, no `/proc` access once
//! an fd's kind and remote end are cached.

use agent_core::{FdKind, SyscallEvent, SyscallId};

use super::thread::{Call, ThreadState};
use super::Engine;
use crate::backend::{RawCall, StopBackend};
use crate::fd::resolve::FdFacts;
use crate::fd::sockaddr::read_peer;
use crate::fd::{has_peer, FdRole};
use crate::sys::Tid;

impl<B: StopBackend> Engine<B> {
    /// A syscall's entry (`from_seccomp_early`: a seccomp stop on a kernel
    /// that stops at the same syscall's entry again right after).
    #[inline]
    pub(super) fn entry(&mut self, tid: Tid, raw: RawCall, now: u64, from_seccomp_early: bool) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if t.state == ThreadState::EntryStopDue {
            // The entry stop that follows a seccomp stop on old kernels: the
            // call was already taken at the seccomp stop.
            t.state = ThreadState::Traced;
            return;
        }
        let RawCall { arch, nr, args } = raw;
        // An unknown number keeps its own id (a call in flight is named
        // `syscall_0x1d8`); the collector decides whether it gets a row.
        let id = SyscallId::from_raw_carrying(arch, nr);
        let role = self.roles.get(id);
        let mut fd = match role.fd_arg() {
            Some(i) => {
                let fd = if arch.is_32bit() {
                    args[i] as i32 as i64
                } else {
                    args[i] as i64
                };
                t.fds.borrow_mut().facts(tid, fd)
            }
            None => FdFacts::of(FdKind::None),
        };
        if role == FdRole::Connect && has_peer(fd.kind) {
            // The connect is the named remote end's call (its errors are
            // that peer's): read the address it names.
            let backend = &mut self.backend;
            fd.peer = role
                .named_address(&args, arch.is_32bit())
                .and_then(|(ptr, len)| read_peer(|a| backend.read_u64(tid, a), ptr, len, fd.kind));
        }
        if from_seccomp_early {
            t.state = ThreadState::EntryStopDue;
        }
        t.call = Some(Call {
            arch,
            nr,
            id,
            args,
            entry_ns: now,
            fd_kind: fd.kind,
            peer: fd.peer,
        });
    }

    /// A syscall's exit with result `ret`.
    #[inline]
    pub(super) fn exit(&mut self, tid: Tid, ret: i64, now: u64) {
        // Past a window boundary: the call counts in the next window (and
        // was in flight at the cut).
        self.cut_if_due(now);
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        // An exit without its entry (attached mid-call): nothing to time.
        let Some(c) = t.call.take() else {
            return;
        };
        let ret = if c.arch.is_32bit() {
            ret as i32 as i64
        } else {
            ret
        };
        let role = self.roles.get(c.id);
        if role != FdRole::None {
            let named = match role {
                // The connect's own peer: the address it named.
                FdRole::Connect => c.peer,
                // A new socket's remote end, when the program asked for it.
                FdRole::Accept if ret >= 0 && has_peer(c.fd_kind) => {
                    let backend = &mut self.backend;
                    role.named_address(&c.args, c.arch.is_32bit())
                        .and_then(|(ptr, len)| {
                            read_peer(|a| backend.read_u64(tid, a), ptr, len, c.fd_kind)
                        })
                }
                _ => None,
            };
            role.after(&mut t.fds.borrow_mut(), &c.args, ret, c.fd_kind, named);
        }
        let recorded = match &self.record {
            Some(set) => set.get(c.id.0 as usize).copied().unwrap_or(false),
            None => true,
        };
        if !recorded {
            return;
        }
        if let Some(Some(s)) = self.sessions.get_mut(t.session) {
            s.note_call(c.entry_ns);
            s.collector.record(&SyscallEvent {
                tid: tid as u32,
                arch: c.arch,
                nr: c.nr,
                args: c.args,
                ret,
                entry_ns: c.entry_ns,
                exit_ns: now,
                fd_kind: c.fd_kind,
                peer: c.peer,
            });
            self.stats.syscalls += 1;
        }
    }
}
