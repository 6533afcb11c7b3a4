//! The task tree: which threads are traced, for which session, sharing
//! which fd table; new children (fork, vfork, clone, including children
//! whose first stop comes before their parent's event), exec (a non-leader
//! thread that execs takes the leader's tid), exits, and letting go
//! (detach on request, or serving a seccomp-filtered program to its end).

use std::rc::Rc;

use agent_core::CpuTime;

use super::thread::{Call, Thread, ThreadState};
use super::{Engine, Mode};
use crate::backend::StopBackend;
use crate::fd::{new_table, SharedFds};
use crate::stop::{Event, Stopped};
use crate::sys::{Tid, WaitStatus};

const CLONE_FILES: u64 = 0x400;
const CLONE_THREAD: u64 = 0x10000;

impl<B: StopBackend> Engine<B> {
    /// Registers a seized thread of `session` (process `tgid`). Threads of
    /// one process share one fd cache.
    pub fn add_thread(&mut self, session: usize, tid: Tid, tgid: Tid) {
        if self.threads.contains_key(&tid) {
            return;
        }
        let fds = self
            .threads
            .values()
            .find(|t| t.tgid == tgid)
            .map(|t| Rc::clone(&t.fds))
            .unwrap_or_else(new_table);
        // A process attached to: what it used before does not count.
        let known = self
            .sessions
            .get(session)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.knows_process(tgid));
        let base = if known {
            CpuTime::default()
        } else {
            self.backend.cpu_time(tgid).unwrap_or_default()
        };
        self.insert_thread(session, tid, tgid, fds, base);
    }

    /// `cpu_base`: the CPU time the process had used when first seen (zero
    /// for a new child).
    fn insert_thread(
        &mut self,
        session: usize,
        tid: Tid,
        tgid: Tid,
        fds: SharedFds,
        cpu_base: CpuTime,
    ) {
        if let Some(Some(s)) = self.sessions.get_mut(session) {
            s.thread_added(tgid, tid == tgid, cpu_base);
        }
        let state = if self.mode == Mode::Detaching {
            ThreadState::Detaching
        } else {
            ThreadState::Traced
        };
        self.threads.insert(
            tid,
            Thread {
                session,
                tgid,
                fds,
                state,
                call: None,
            },
        );
    }

    /// A fork/vfork/clone event of `parent`: registers the child with the
    /// parent's session and the right fd cache, and releases it if its
    /// first stop already came.
    pub(super) fn new_child(&mut self, parent: &Stopped, event: Event) {
        let Some(child) = self.backend.event_msg(parent) else {
            return;
        };
        let child = child as Tid;
        let Some(p) = self.threads.get(&parent.tid()) else {
            return;
        };
        if self.threads.contains_key(&child) || self.let_go.contains(&child) {
            return;
        }
        let (session, parent_tgid, parent_fds) = (p.session, p.tgid, Rc::clone(&p.fds));
        let flags = p.call.and_then(|c| self.clone_flags(parent_tgid, &c));
        let is_thread = match (event, flags) {
            (Event::Clone, Some(f)) => f & CLONE_THREAD != 0,
            (Event::Clone, None) => {
                self.backend.task_ids(child).map(|(tgid, _)| tgid) == Some(parent_tgid)
            }
            _ => false,
        };
        let shares_files = match flags {
            Some(f) => f & CLONE_FILES != 0,
            None => self
                .backend
                .share_files(parent.tid(), child)
                .unwrap_or(is_thread),
        };
        let tgid = if is_thread { parent_tgid } else { child };
        let fds = if shares_files {
            parent_fds
        } else {
            new_table()
        };
        self.insert_thread(session, child, tgid, fds, CpuTime::default());
        if let Some(pos) = self.early.iter().position(|s| s.tid() == child) {
            let held = self.early.swap_remove(pos);
            if self.mode == Mode::Detaching {
                self.detach_thread(held, 0);
            } else {
                self.resume(held, 0);
            }
        }
    }

    /// The clone flags of the call the parent is inside, when it is clone
    /// or clone3 and its entry was seen.
    fn clone_flags(&mut self, parent_tgid: Tid, call: &Call) -> Option<u64> {
        match call.id.name()? {
            "clone" => Some(call.args[0]),
            // struct clone_args starts with `u64 flags`.
            "clone3" => self.backend.read_u64(parent_tgid, call.args[0]),
            "fork" | "vfork" => Some(0),
            _ => None,
        }
    }

    /// A stop of a task we do not know yet: an auto-attached child whose
    /// parent's fork/clone event is still queued. Placed at once when the
    /// kernel names a traced parent (its thread group or parent process);
    /// else held stopped until the event comes.
    pub(super) fn unknown_stop(&mut self, s: Stopped, deliver: i32) {
        if self.mode == Mode::Detaching {
            self.let_go.push(s.tid());
            s.detach(&mut self.backend, 0);
            return;
        }
        if self.early.iter().any(|held| held.tid() == s.tid()) {
            // A second stop while held cannot happen; never strand it.
            s.resume(&mut self.backend, crate::backend::Resume::Syscall, deliver);
            return;
        }
        if let Err(s) = self.place_orphan(s, None) {
            self.early.push(s);
        }
    }

    /// Registers the stopped, unknown task under the traced task the kernel
    /// says created it, or under `fallback`'s session, and resumes it. The
    /// guard comes back when no owner was found.
    fn place_orphan(&mut self, s: Stopped, fallback: Option<usize>) -> Result<(), Stopped> {
        let tid = s.tid();
        let (tgid, ppid) = self.backend.task_ids(tid).unwrap_or((tid, 0));
        let owner = [tgid, ppid]
            .into_iter()
            .filter(|p| *p != tid)
            .find_map(|p| {
                self.threads
                    .get(&p)
                    .map(|t| (p, t.session, Rc::clone(&t.fds)))
            });
        let (session, fds) = match owner {
            Some((parent, session, parent_fds)) => {
                let shares = self.backend.share_files(parent, tid).unwrap_or(tgid != tid);
                (session, if shares { parent_fds } else { new_table() })
            }
            None => match fallback {
                Some(session) => (session, new_table()),
                None => return Err(s),
            },
        };
        self.insert_thread(session, tid, tgid, fds, CpuTime::default());
        self.resume(s, 0);
        Ok(())
    }

    /// After execve: a non-leader thread that exec'd took over the leader's
    /// tid (its old tid is in the event message, the old leader vanishes
    /// unreported); the fd table is the process's own now, close-on-exec
    /// fds gone.
    pub(super) fn exec_stop(&mut self, s: Stopped) {
        let tid = s.tid();
        let former = self.backend.event_msg(&s).map(|m| m as Tid).unwrap_or(tid);
        if former != tid {
            if let Some(moved) = self.threads.remove(&former) {
                if let Some(old_leader) = self.threads.remove(&tid) {
                    self.forget_thread(tid, &old_leader, None);
                }
                if let Some(Some(session)) = self.sessions.get_mut(moved.session) {
                    session.collector.thread_exited(former as u32);
                }
                self.threads.insert(tid, moved);
            }
        }
        let program_from_exec = match self.threads.get(&tid) {
            Some(t) => self
                .sessions
                .get(t.session)
                .and_then(Option::as_ref)
                .is_some_and(|session| session.program_from_exec && session.root == tid),
            None => false,
        };
        let exe = if program_from_exec {
            self.backend.exe_name(tid)
        } else {
            None
        };
        if let Some(t) = self.threads.get_mut(&tid) {
            t.fds = new_table();
            t.tgid = tid;
            if let (Some(name), Some(Some(session))) = (exe, self.sessions.get_mut(t.session)) {
                session.facts.program = agent_core::facts::truncated(&name);
            }
        }
        self.resume(s, 0);
    }

    /// A task exited or was killed (`status`), or vanished (`None`).
    pub(super) fn thread_gone(&mut self, tid: Tid, status: Option<WaitStatus>) {
        if let Some(pos) = self.early.iter().position(|s| s.tid() == tid) {
            self.early.swap_remove(pos).vanished();
        }
        if let Some(t) = self.threads.remove(&tid) {
            let session = t.session;
            self.forget_thread(tid, &t, status);
            // A held child whose parent died before its fork event was
            // reported would wait forever: place it now.
            for held in std::mem::take(&mut self.early) {
                if let Err(held) = self.place_orphan(held, Some(session)) {
                    // Unreachable: a fallback session always places it.
                    self.early.push(held);
                }
            }
        }
    }

    fn forget_thread(&mut self, tid: Tid, t: &Thread, status: Option<WaitStatus>) {
        let now = self.backend.monotonic_ns();
        if let Some(Some(s)) = self.sessions.get_mut(t.session) {
            s.collector.thread_exited(tid as u32);
            s.live = s.live.saturating_sub(1);
            if tid == s.root && status.is_some() {
                s.root_status = status;
            }
            if s.live == 0 {
                s.end_ns = now;
            }
            // The last thread of a process let go (not exited, its exit
            // stop read it then): read what the process used until now.
            if s.cpu_thread_removed(t.tgid) && status.is_none() {
                if let Some(cpu) = self.backend.cpu_time(t.tgid) {
                    s.cpu_read(t.tgid, cpu);
                }
            }
        }
    }

    /// A thread's exit stop (`PTRACE_EVENT_EXIT`): its process is still
    /// whole, so its CPU time is read (the last reading before the process
    /// is gone is its final figure, but for the exit itself).
    pub(super) fn exiting(&mut self, tid: Tid) {
        let Some(t) = self.threads.get(&tid) else {
            return;
        };
        let (session, tgid) = (t.session, t.tgid);
        if let (Some(cpu), Some(Some(s))) =
            (self.backend.cpu_time(tgid), self.sessions.get_mut(session))
        {
            s.cpu_read(tgid, cpu);
        }
    }

    /// Notes, in each open session, the calls in flight as the agent lets
    /// go (for its last summary).
    fn note_in_flight_at_end(&mut self) {
        for i in 0..self.sessions.len() {
            let Some(Some(s)) = self.sessions.get(i) else {
                continue;
            };
            let (flying, _) = super::rotate::in_flight(&self.threads, i, |m| s.to_unix_ns(m));
            if let Some(Some(s)) = self.sessions.get_mut(i) {
                s.in_flight_at_end = flying;
            }
        }
    }

    /// Stops recording and keeps the tracees running under the tracer
    /// until they end (a stop request in seccomp mode, see
    /// [`Engine::run`]). Threads already waiting for a syscall's exit stop
    /// get it and are then resumed without syscall stops.
    pub(super) fn serve_only(&mut self) {
        self.note_in_flight_at_end();
        self.mode = Mode::Serving;
        self.refresh_next_cut();
        let now = self.backend.monotonic_ns();
        for s in self.sessions.iter_mut().flatten() {
            s.detached = true;
            s.end_ns = now;
        }
    }

    /// Detaches every tracee: interrupts each; each is let go at its next
    /// stop, with the signal it was stopped for, so nothing is lost.
    pub fn detach_all(&mut self) {
        if self.mode == Mode::Detaching {
            return;
        }
        self.note_in_flight_at_end();
        self.mode = Mode::Detaching;
        self.refresh_next_cut();
        let tids: Vec<Tid> = self.threads.keys().copied().collect();
        for tid in tids {
            match self.threads.get_mut(&tid) {
                Some(t) => t.state = ThreadState::Detaching,
                None => continue,
            }
            // A thread in a group-stop under PTRACE_LISTEN is not in a
            // ptrace-stop, so a detach would fail and leave it traced; the
            // interrupt makes it report a stop, where it is detached and
            // stays in its group-stop. An error: gone already, its exit
            // report follows.
            let _ = self.backend.interrupt(tid);
        }
        for held in std::mem::take(&mut self.early) {
            self.let_go.push(held.tid());
            held.detach(&mut self.backend, 0);
        }
    }

    pub(super) fn detach_thread(&mut self, s: Stopped, sig: i32) {
        let tid = s.tid();
        s.detach(&mut self.backend, sig);
        if let Some(t) = self.threads.remove(&tid) {
            if let Some(Some(session)) = self.sessions.get_mut(t.session) {
                session.detached = true;
            }
            self.forget_thread(tid, &t, None);
        }
    }
}
