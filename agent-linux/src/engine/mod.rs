//! The tracer core: one loop that takes every tracee's stops from a
//! [`StopBackend`], turns syscall entry/exit pairs into `SyscallEvent`s for the
//! session's collector ([`calls`]), follows forks, clones and execs
//! ([`tasks`]), passes signals through unchanged, and detaches everything
//! on request. What it hands its caller is in [`session`].
//!
//! The engine talks to the tracing mechanism only through the backend, so
//! its unit tests (`tests.rs`) run it on a scripted backend, without real
//! processes. No allocation and no `/proc` access on the path of a traced
//! syscall once its fd's kind is cached.

mod calls;
mod cpu;
pub(crate) mod rotate;
pub mod session;
mod tasks;
#[cfg(test)]
mod tests;
mod thread;
pub mod window;

use std::collections::HashMap;
use std::io;

use agent_core::{Summary, SyscallId};

use crate::backend::ptrace::Ptrace;
use crate::backend::{Resume, StopBackend, SyscallRead};
use crate::fd::FdRoles;
use crate::stop::{Event, Stop, Stopped};
use crate::sys::Tid;
use crate::wait::WaitPolicy;

pub use crate::backend::ptrace::ptrace_options;
pub use session::{random_id, unix_now_ns, EngineStats, Session};
use thread::Thread;

/// What the caller does at the loop's turning points.
pub trait Observer<B: StopBackend = Ptrace> {
    /// A SIGALRM tick (watch scans, attach deadlines). May add sessions.
    fn tick(&mut self, _engine: &mut Engine<B>) {}
    /// Whether to keep running with no tracee left (watch).
    fn keep_alive(&self) -> bool {
        false
    }
    /// Nothing is traced and the loop is kept alive: wait a little (watch
    /// waits for news of a new program here, and may add sessions).
    fn idle(&mut self, _engine: &mut Engine<B>) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    /// A window of a session cut into windows ended (all but the session's
    /// last: that one comes with [`Observer::session_done`], as
    /// [`Session::summary`]). Called by the loop after the tracee that
    /// reached the boundary was resumed.
    fn window_done(&mut self, summary: Summary);
    /// A session ended (its last thread exited, or it was detached).
    fn session_done(&mut self, session: Session);
}

/// What the engine is doing with its tracees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Recording.
    Tracing,
    /// A stop was requested: each tracee is let go at its next stop.
    Detaching,
    /// A stop was requested while a seccomp prefilter is in the tracees:
    /// they cannot be let go (without a tracer every filtered syscall fails
    /// with ENOSYS), so they are resumed at each stop, nothing recorded,
    /// until they end.
    Serving,
}

/// The tracer.
#[derive(Debug)]
pub struct Engine<B: StopBackend = Ptrace> {
    backend: B,
    threads: HashMap<Tid, Thread>,
    sessions: Vec<Option<Session>>,
    /// Auto-attached children whose first stop came before their parent's
    /// fork/clone event: held stopped until the event says whose they are.
    early: Vec<Stopped>,
    /// Unknown tasks let go while detaching (their parent's event may still
    /// follow: they must not be waited for).
    let_go: Vec<Tid>,
    roles: FdRoles,
    /// Only seccomp-selected syscalls stop (`--only`).
    seccomp: bool,
    /// Record only these ids (`--only`); `None`: all.
    record: Option<Vec<bool>>,
    /// The kernel stops at syscall entry after a seccomp stop (before 4.8).
    seccomp_before_entry: bool,
    mode: Mode,
    stats: EngineStats,
    /// When the first open session's current window ends (monotonic ns;
    /// `u64::MAX`: no windows).
    next_cut: u64,
    /// Windows were cut and wait for [`Engine::emit_windows`].
    windows_pending: bool,
}

impl Engine<Ptrace> {
    /// A ptrace engine; `only` selects the recorded syscalls (and means a
    /// seccomp prefilter is installed in started commands when `seccomp`).
    pub fn new(only: Option<&[SyscallId]>, seccomp: bool) -> Engine<Ptrace> {
        let before_entry = seccomp && crate::facts::kernel_older_than(4, 8);
        Engine::with_backend(Ptrace::new(seccomp), only, seccomp, before_entry)
    }

    /// How the loop waits for stops (default: [`WaitPolicy::default`]).
    pub fn set_wait_policy(&mut self, wait: WaitPolicy) {
        self.backend.set_wait_policy(wait);
    }
}

impl<B: StopBackend> Engine<B> {
    /// An engine on `backend`. `only`: the recorded syscalls; `seccomp`:
    /// the tracees stop only at syscalls a seccomp prefilter selects;
    /// `seccomp_before_entry`: the kernel also stops at a syscall's entry
    /// after its seccomp stop (before Linux 4.8).
    pub fn with_backend(
        backend: B,
        only: Option<&[SyscallId]>,
        seccomp: bool,
        seccomp_before_entry: bool,
    ) -> Engine<B> {
        let record = only.map(|ids| {
            let mut v = vec![false; SyscallId::COUNT];
            for id in ids {
                if let Some(slot) = v.get_mut(id.0 as usize) {
                    *slot = true;
                }
            }
            v
        });
        Engine {
            backend,
            threads: HashMap::new(),
            sessions: Vec::new(),
            early: Vec::new(),
            let_go: Vec::new(),
            roles: FdRoles::new(),
            seccomp,
            record,
            seccomp_before_entry,
            mode: Mode::Tracing,
            stats: EngineStats::default(),
            next_cut: u64::MAX,
            windows_pending: false,
        }
    }

    /// The backend (tests read what it was asked).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The engine's counters.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Whether `tid` is traced.
    pub fn is_traced(&self, tid: Tid) -> bool {
        self.threads.contains_key(&tid)
    }

    /// Whether any thread is traced.
    pub fn traces_any(&self) -> bool {
        !self.threads.is_empty()
    }

    /// Whether a stop was requested and the engine is detaching.
    pub fn is_detaching(&self) -> bool {
        self.mode == Mode::Detaching
    }

    /// Whether a stop was requested in seccomp mode: the tracees are only
    /// served until they end (see [`Engine::run`]).
    pub fn is_serving(&self) -> bool {
        self.mode == Mode::Serving
    }

    /// The sessions still open.
    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.iter().flatten()
    }

    /// Starts a session; returns its index for [`Engine::add_thread`].
    ///
    /// The slot of a session already handed over is reused (no thread
    /// refers to it any more): a `watch` that runs for months through
    /// thousands of short processes keeps as many slots as sessions ever
    /// open at once, not one per session it ever had.
    pub fn add_session(&mut self, session: Session) -> usize {
        if let Some(free) = self.sessions.iter().position(Option::is_none) {
            self.sessions[free] = Some(session);
            return free;
        }
        self.sessions.push(Some(session));
        self.refresh_next_cut();
        self.sessions.len() - 1
    }

    /// Drops a session that never got a thread (its process refused to be
    /// seized), freeing its slot; a session with threads is left alone.
    pub fn forget_empty_session(&mut self, session: usize) {
        if let Some(slot) = self.sessions.get_mut(session) {
            if slot.as_ref().is_some_and(|s| s.threads == 0) {
                *slot = None;
            }
        }
    }

    /// Starts tracing the running task `tid` of process `tgid` for
    /// `session` (attach, watch, a started command).
    pub fn seize(&mut self, session: usize, tid: Tid, tgid: Tid) -> io::Result<()> {
        self.backend.seize(tid)?;
        self.add_thread(session, tid, tgid);
        Ok(())
    }

    /// Seizes the process `pid` (its leader) and stops it at once, then
    /// starts the session `make` builds and registers the leader with it;
    /// returns the session's index. For `watch`: a program found at its
    /// exec runs on untraced until the interrupt, so nothing that can wait
    /// comes between the seize and the interrupt (building the session and
    /// reading the process's CPU time come after). The loop reads no stop
    /// meanwhile (one thread), so the leader is registered before its
    /// first report is taken. Its other threads are the caller's
    /// (`trace::seize_all`).
    pub fn seize_stopped(&mut self, pid: Tid, make: impl FnOnce() -> Session) -> io::Result<usize> {
        self.backend.seize(pid)?;
        // An error: it is gone already; its exit report follows.
        let _ = self.backend.interrupt(pid);
        let session = self.add_session(make());
        self.add_thread(session, pid, pid);
        Ok(session)
    }

    /// Makes a seized task stop, so that the loop starts it on syscall
    /// stops. Fails for a task that is gone.
    pub fn interrupt(&mut self, tid: Tid) -> io::Result<()> {
        self.backend.interrupt(tid)
    }

    /// Runs until every tracee is gone (and `observer` does not keep it
    /// alive), handing each ended session to the observer.
    ///
    /// A stop request detaches every tracee, except in seccomp mode: a
    /// tracee whose filter returns SECCOMP_RET_TRACE cannot run without a
    /// tracer (its filtered syscalls would fail with ENOSYS), so the engine
    /// marks the open sessions detached, records nothing more, and returns
    /// at once with the tracees still traced ([`Engine::is_serving`]); the
    /// caller takes its summaries from [`Engine::sessions`] and calls `run`
    /// again, which resumes the tracees at each stop until they have all
    /// ended.
    pub fn run(&mut self, observer: &mut dyn Observer<B>) -> io::Result<()> {
        loop {
            let requests = self.backend.requests();
            if requests.stop && self.mode == Mode::Tracing {
                if self.seccomp {
                    self.serve_only();
                    return Ok(());
                }
                self.detach_all();
            }
            if requests.tick {
                match self.mode {
                    // A stop request's kick timer: nothing to kick now.
                    Mode::Serving => self.backend.quiet(),
                    Mode::Tracing => {
                        // Windows end on time even when nothing stops.
                        let now = self.backend.monotonic_ns();
                        self.cut_if_due(now);
                        self.emit_windows(observer);
                        observer.tick(self);
                    }
                    Mode::Detaching => {}
                }
            }
            self.flush_done(observer);
            if self.threads.is_empty() && self.early.is_empty() {
                if self.mode == Mode::Detaching || !observer.keep_alive() {
                    return Ok(());
                }
                observer.idle(self);
                continue;
            }
            match self.backend.next_stop() {
                Ok(Some(stop)) => {
                    self.handle(stop);
                    // The stopped tracee runs again: summarize what it cut.
                    self.emit_windows(observer);
                }
                Ok(None) => {}
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => self.all_vanished(),
                Err(e) => return Err(e),
            }
        }
    }

    fn flush_done(&mut self, observer: &mut dyn Observer<B>) {
        for i in 0..self.sessions.len() {
            let Some(end_ns) = self.sessions[i]
                .as_ref()
                .filter(|s| s.live == 0 && s.threads > 0)
                .map(|s| s.end_ns)
            else {
                continue;
            };
            if self.mode == Mode::Tracing {
                // The windows that ended before the session did.
                self.cut_session(i, end_ns);
                self.emit_windows(observer);
            }
            if let Some(s) = self.sessions[i].take() {
                observer.session_done(s);
            }
        }
        self.refresh_next_cut();
    }

    /// Ends every session still open (after [`Engine::run`] returned with
    /// sessions that never got a thread).
    pub fn take_sessions(&mut self) -> Vec<Session> {
        self.sessions.iter_mut().filter_map(Option::take).collect()
    }

    fn handle(&mut self, stop: Stop) {
        self.stats.stops += 1;
        match stop {
            Stop::Exited(tid, status) | Stop::Killed(tid, status) => {
                self.thread_gone(tid, Some(status))
            }
            Stop::Syscall(s) => {
                if let Some(s) = self.admit(s, 0, None) {
                    self.syscall_stop(s);
                }
            }
            Stop::Seccomp(s) => {
                if let Some(s) = self.admit(s, 0, None) {
                    self.seccomp_stop(s);
                }
            }
            Stop::Event(s, event) => {
                if let Some(s) = self.admit(s, 0, Some(event)) {
                    match event {
                        Event::Fork | Event::Vfork | Event::Clone => {
                            self.new_child(&s, event);
                            self.resume(s, 0);
                        }
                        Event::Exec => self.exec_stop(s),
                        Event::Exit => {
                            self.exiting(s.tid());
                            self.resume(s, 0);
                        }
                        // PTRACE_INTERRUPT, a new child's first stop, or the
                        // end of a group-stop we listened to: carry on.
                        Event::Interrupt | Event::Other => self.resume(s, 0),
                    }
                }
            }
            Stop::GroupStop(s, _) => {
                // Stay stopped, as the signal wants, but hear of SIGCONT.
                if let Some(s) = self.admit(s, 0, None) {
                    s.listen(&mut self.backend);
                }
            }
            Stop::SignalDelivery(s, sig) => {
                // Pass the signal on.
                if let Some(s) = self.admit(s, sig, None) {
                    self.resume(s, sig);
                }
            }
        }
    }

    /// What every stop of a task goes through first: a task not known yet
    /// is placed (or held), a detaching thread is let go (with `deliver`,
    /// the signal it stopped for, so nothing is lost). Returns the guard
    /// when the stop is the engine's to handle.
    fn admit(&mut self, s: Stopped, deliver: i32, event: Option<Event>) -> Option<Stopped> {
        let Some(thread) = self.threads.get(&s.tid()) else {
            self.unknown_stop(s, deliver);
            return None;
        };
        if thread.is_detaching() {
            if let Some(event) = event.filter(|e| e.is_new_task()) {
                // The new child is already attached: wait for its first stop
                // to let it go too, or it would stay stopped.
                self.new_child(&s, event);
            }
            self.detach_thread(s, deliver);
            return None;
        }
        Some(s)
    }

    /// Resumes a stopped thread: to the next syscall stop when every
    /// syscall is traced or this one's exit is awaited, else to the next
    /// seccomp stop (and always so while serving).
    #[inline]
    fn resume(&mut self, s: Stopped, sig: i32) {
        let to_syscall = self.mode != Mode::Serving
            && (!self.seccomp || self.threads.get(&s.tid()).is_some_and(Thread::in_call));
        let how = if to_syscall {
            Resume::Syscall
        } else {
            Resume::Cont
        };
        s.resume(&mut self.backend, how, sig);
    }

    fn syscall_stop(&mut self, s: Stopped) {
        if self.mode == Mode::Serving {
            // The exit stop of a call entered before the stop request.
            self.resume(s, 0);
            return;
        }
        let now = self.backend.monotonic_ns();
        match self.backend.read_syscall(&s, false) {
            SyscallRead::Entry(call) => self.entry(s.tid(), call, now, false),
            SyscallRead::Exit(ret) => self.exit(s.tid(), ret, now),
            SyscallRead::EntryOrExit(call, ret) => {
                if self.threads.get(&s.tid()).is_some_and(Thread::in_call) {
                    self.exit(s.tid(), ret, now);
                } else {
                    self.entry(s.tid(), call, now, false);
                }
            }
            SyscallRead::Unreadable => {}
            SyscallRead::Gone => return s.vanished(),
        }
        self.resume(s, 0);
    }

    fn seccomp_stop(&mut self, s: Stopped) {
        if self.mode == Mode::Serving {
            // Let the call run, unrecorded.
            self.resume(s, 0);
            return;
        }
        let now = self.backend.monotonic_ns();
        match self.backend.read_syscall(&s, true) {
            SyscallRead::Entry(call) | SyscallRead::EntryOrExit(call, _) => {
                let before_entry = self.seccomp_before_entry;
                self.entry(s.tid(), call, now, before_entry);
            }
            SyscallRead::Exit(_) | SyscallRead::Unreadable => {}
            SyscallRead::Gone => return s.vanished(),
        }
        self.resume(s, 0);
    }

    /// `ECHILD`: every tracee vanished without a report (cannot happen with
    /// `__WALL`, but never spin).
    fn all_vanished(&mut self) {
        let tids: Vec<Tid> = self.threads.keys().copied().collect();
        for tid in tids {
            self.thread_gone(tid, None);
        }
        for held in std::mem::take(&mut self.early) {
            held.vanished();
        }
    }
}
