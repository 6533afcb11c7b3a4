//! The ptrace engine: one loop that waits for every tracee's stops, turns
//! syscall entry/exit pairs into [`SyscallEvent`]s for the session's
//! collector, follows forks, clones and execs, passes signals through
//! unchanged, and detaches everything on request.
//!
//! Cost per traced syscall (full mode, PTRACE_GET_SYSCALL_INFO present):
//! two stops, each one waitpid + one GET_SYSCALL_INFO + one resume: four
//! ptrace requests. No allocation and no /proc access on that path once an
//! fd's kind is cached. How the loop waits for the next stop (poll, then
//! sleep) is [`crate::wait`]'s business.

use std::collections::HashMap;
use std::io;
use std::rc::Rc;

use agent_core::{Arch, Collector, Exit, Facts, FdKind, SyscallEvent, SyscallId};

use crate::arch::{arch_from_audit, Abi, Native};
use crate::fd::{new_table, FdRole, FdRoles, SharedFds};
use crate::signals;
use crate::sys::{self, RegsBuf, SyscallInfo, Tid, WaitStatus};
use crate::wait::WaitPolicy;

const CLONE_FILES: u64 = 0x400;
const CLONE_THREAD: u64 = 0x10000;
/// SIGTRAP | 0x80: a syscall stop under PTRACE_O_TRACESYSGOOD.
const SYSCALL_TRAP: i32 = libc::SIGTRAP | 0x80;

/// The ptrace options every tracee gets. Never PTRACE_O_EXITKILL: if the
/// agent dies, its tracees must run on.
pub fn ptrace_options(seccomp: bool) -> u32 {
    let mut o = sys::PTRACE_O_TRACESYSGOOD
        | sys::PTRACE_O_TRACEFORK
        | sys::PTRACE_O_TRACEVFORK
        | sys::PTRACE_O_TRACECLONE
        | sys::PTRACE_O_TRACEEXEC;
    if seccomp {
        o |= sys::PTRACE_O_TRACESECCOMP;
    }
    o
}

/// The syscall a thread is inside, as seen at its entry (or seccomp) stop.
#[derive(Clone, Copy, Debug)]
struct Call {
    arch: Arch,
    nr: u32,
    id: SyscallId,
    args: [u64; 6],
    entry_ns: u64,
    fd_kind: FdKind,
}

impl Call {
    const NONE: Call = Call {
        arch: Native::NATIVE,
        nr: 0,
        id: SyscallId::UNKNOWN,
        args: [0; 6],
        entry_ns: 0,
        fd_kind: FdKind::None,
    };
}

#[derive(Debug)]
struct Thread {
    session: usize,
    tgid: Tid,
    fds: SharedFds,
    /// Between an entry (or seccomp) stop and the exit stop.
    in_syscall: bool,
    /// After a seccomp stop on a kernel that stops at syscall entry after
    /// it (before 4.8): the next syscall stop is that entry, not the exit.
    entry_stop_due: bool,
    /// Detach at the next stop.
    detaching: bool,
    call: Call,
}

/// One traced program: the process the agent started or attached to, and
/// every process and thread descending from it.
#[derive(Debug)]
pub struct Session {
    /// The process the session started from.
    pub root: Tid,
    /// Statistics (boxed once: ~60 KB).
    pub collector: Box<Collector>,
    /// Monotonic start, ns.
    pub start_ns: u64,
    /// Wall-clock start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Monotonic end (set when the session ends), ns.
    pub end_ns: u64,
    /// Processes seen.
    pub processes: u32,
    /// Threads seen.
    pub threads: u32,
    /// Threads still traced.
    pub live: u32,
    /// How the root process ended, when it did while traced.
    pub root_status: Option<WaitStatus>,
    /// The agent detached before the end.
    pub detached: bool,
    /// Facts for the summary (filled by the caller).
    pub facts: Facts,
    /// Take the program fact from the root's executable after it execs
    /// (attach and watch: the process may have been caught before its
    /// exec, e.g. a shell's child).
    pub program_from_exec: bool,
}

impl Session {
    /// A session for `root`, starting now.
    pub fn new(root: Tid, facts: Facts) -> Session {
        let start_ns = sys::monotonic_ns();
        Session {
            root,
            collector: Box::new(Collector::new(start_ns)),
            start_ns,
            start_unix_ns: unix_now_ns(),
            end_ns: start_ns,
            processes: 0,
            threads: 0,
            live: 0,
            root_status: None,
            detached: false,
            facts,
            program_from_exec: false,
        }
    }

    /// How the program ended, for the summary.
    pub fn exit(&self) -> Exit {
        match self.root_status {
            Some(st) => match (st.exited(), st.signaled()) {
                (Some(code), _) => Exit::Code(code),
                (_, Some(sig)) => Exit::Signal(sig),
                _ => Exit::Detached,
            },
            None if self.detached => Exit::Detached,
            None => Exit::Running,
        }
    }
}

/// Nanoseconds since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// What the caller does at the loop's turning points.
pub trait Observer {
    /// A SIGALRM tick (watch scans, attach deadlines). May add sessions.
    fn tick(&mut self, _engine: &mut Engine) {}
    /// Whether to keep running with no tracee left (watch).
    fn keep_alive(&self) -> bool {
        false
    }
    /// A session ended (its last thread exited, or it was detached).
    fn session_done(&mut self, session: Session);
}

/// Counters of the engine's own work, for `--stats`.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineStats {
    /// Syscalls recorded.
    pub syscalls: u64,
    /// Stops handled.
    pub stops: u64,
}

/// The tracer.
#[derive(Debug)]
pub struct Engine {
    threads: HashMap<Tid, Thread>,
    sessions: Vec<Option<Session>>,
    /// Auto-attached children whose first stop came before their parent's
    /// fork/clone event: held stopped until the event says whose they are.
    early: Vec<Tid>,
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
    /// PTRACE_GET_SYSCALL_INFO works (probed at the first syscall stop).
    syscall_info: Option<bool>,
    info: SyscallInfo,
    regs: RegsBuf,
    detaching: bool,
    /// A stop was requested while a seccomp prefilter is in the tracees:
    /// they cannot be let go (without a tracer every filtered syscall fails
    /// with ENOSYS), so they are resumed at each stop, nothing recorded,
    /// until they end.
    serving: bool,
    stats: EngineStats,
    wait: WaitPolicy,
}

impl Engine {
    /// An engine; `only` selects the recorded syscalls (and means a seccomp
    /// prefilter is installed in started commands when `seccomp`).
    pub fn new(only: Option<&[SyscallId]>, seccomp: bool) -> Engine {
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
            threads: HashMap::new(),
            sessions: Vec::new(),
            early: Vec::new(),
            let_go: Vec::new(),
            roles: FdRoles::new(),
            seccomp,
            record,
            seccomp_before_entry: seccomp && kernel_older_than(4, 8),
            // EDGE_AGENT_FORCE_REGS=1 skips the probe and decodes registers,
            // as on kernels before 5.3 (tests run both paths).
            syscall_info: std::env::var_os("EDGE_AGENT_FORCE_REGS")
                .filter(|v| !v.is_empty() && v != "0")
                .map(|_| false),
            info: SyscallInfo::new(),
            regs: RegsBuf::new(),
            detaching: false,
            serving: false,
            stats: EngineStats::default(),
            wait: WaitPolicy::default(),
        }
    }

    /// How the loop waits for stops (default: [`WaitPolicy::default`]).
    pub fn set_wait_policy(&mut self, wait: WaitPolicy) {
        self.wait = wait;
    }

    /// The engine's counters.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Whether `tid` is traced.
    pub fn is_traced(&self, tid: Tid) -> bool {
        self.threads.contains_key(&tid)
    }

    /// Whether a stop was requested and the engine is detaching.
    pub fn is_detaching(&self) -> bool {
        self.detaching
    }

    /// Whether a stop was requested in seccomp mode: the tracees are only
    /// served until they end (see [`Engine::run`]).
    pub fn is_serving(&self) -> bool {
        self.serving
    }

    /// The sessions still open.
    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.iter().flatten()
    }

    /// Starts a session; returns its index for [`Engine::add_thread`].
    pub fn add_session(&mut self, session: Session) -> usize {
        self.sessions.push(Some(session));
        self.sessions.len() - 1
    }

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
        self.insert_thread(session, tid, tgid, fds);
    }

    fn insert_thread(&mut self, session: usize, tid: Tid, tgid: Tid, fds: SharedFds) {
        if let Some(Some(s)) = self.sessions.get_mut(session) {
            s.threads = s.threads.saturating_add(1);
            s.live = s.live.saturating_add(1);
            if tid == tgid {
                s.processes = s.processes.saturating_add(1);
            }
        }
        self.threads.insert(
            tid,
            Thread {
                session,
                tgid,
                fds,
                in_syscall: false,
                entry_stop_due: false,
                detaching: self.detaching,
                call: Call::NONE,
            },
        );
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
    pub fn run(&mut self, observer: &mut dyn Observer) -> io::Result<()> {
        loop {
            if !self.detaching && !self.serving && signals::stop_requested().is_some() {
                if self.seccomp {
                    self.serve_only();
                    return Ok(());
                }
                self.detach_all();
            }
            if signals::take_tick() {
                if self.serving {
                    // A stop request's kick timer: nothing to kick now.
                    signals::quiet();
                } else if !self.detaching {
                    observer.tick(self);
                }
            }
            self.flush_done(observer);
            if self.threads.is_empty() && self.early.is_empty() {
                if self.detaching || !observer.keep_alive() {
                    return Ok(());
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
            match self.wait.wait() {
                Ok(Some((tid, status))) => self.handle(tid, status),
                Ok(None) => {}
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => {
                    // Every tracee vanished without a report (cannot happen
                    // with __WALL, but never spin).
                    let tids: Vec<Tid> = self.threads.keys().copied().collect();
                    for tid in tids {
                        self.thread_gone(tid, None);
                    }
                    self.early.clear();
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn flush_done(&mut self, observer: &mut dyn Observer) {
        for slot in &mut self.sessions {
            if slot.as_ref().is_some_and(|s| s.live == 0 && s.threads > 0) {
                if let Some(s) = slot.take() {
                    observer.session_done(s);
                }
            }
        }
    }

    /// Ends every session still open (after [`Engine::run`] returned with
    /// sessions that never got a thread).
    pub fn take_sessions(&mut self) -> Vec<Session> {
        self.sessions.iter_mut().filter_map(Option::take).collect()
    }

    fn handle(&mut self, tid: Tid, status: WaitStatus) {
        self.stats.stops += 1;
        if status.exited().is_some() || status.signaled().is_some() {
            self.thread_gone(tid, Some(status));
            return;
        }
        let Some(sig) = status.stopped() else { return };
        let event = status.event();
        let Some(thread) = self.threads.get(&tid) else {
            self.unknown_stop(tid, sig);
            return;
        };
        if thread.detaching {
            if matches!(
                event,
                sys::PTRACE_EVENT_FORK | sys::PTRACE_EVENT_VFORK | sys::PTRACE_EVENT_CLONE
            ) {
                // The new child is already attached: wait for its first stop
                // to let it go too, or it would stay stopped.
                self.new_child(tid, event);
            }
            let deliver = if event == 0 && sig != SYSCALL_TRAP {
                sig
            } else {
                0
            };
            self.detach_thread(tid, deliver);
            return;
        }
        match (sig, event) {
            (SYSCALL_TRAP, 0) => self.syscall_stop(tid),
            (libc::SIGTRAP, sys::PTRACE_EVENT_FORK)
            | (libc::SIGTRAP, sys::PTRACE_EVENT_VFORK)
            | (libc::SIGTRAP, sys::PTRACE_EVENT_CLONE) => {
                self.new_child(tid, event);
                self.resume(tid, 0);
            }
            (libc::SIGTRAP, sys::PTRACE_EVENT_EXEC) => self.exec_stop(tid),
            (libc::SIGTRAP, sys::PTRACE_EVENT_SECCOMP) => self.seccomp_stop(tid),
            (libc::SIGTRAP, sys::PTRACE_EVENT_STOP) => {
                // PTRACE_INTERRUPT, a new child's first stop, or the end of
                // a group-stop we listened to: carry on.
                self.resume(tid, 0);
            }
            (_, sys::PTRACE_EVENT_STOP) => {
                // Group-stop (SIGSTOP, SIGTSTP, ...): stay stopped, as the
                // signal wants, but hear of SIGCONT.
                let _ = sys::listen(tid);
            }
            (_, 0) => self.resume(tid, sig), // signal-delivery-stop: pass it on
            _ => self.resume(tid, 0),
        }
    }

    /// Resumes `tid`: to the next syscall stop when every syscall is traced
    /// or this one's exit is awaited, else to the next seccomp stop.
    #[inline]
    fn resume(&mut self, tid: Tid, sig: i32) {
        let to_syscall = !self.serving
            && (!self.seccomp || self.threads.get(&tid).is_some_and(|t| t.in_syscall));
        // ESRCH: killed meanwhile; its exit is reported next.
        let _ = if to_syscall {
            sys::resume_syscall(tid, sig)
        } else {
            sys::resume_cont(tid, sig)
        };
    }

    fn syscall_stop(&mut self, tid: Tid) {
        if self.serving {
            // The exit stop of a call entered before the stop request.
            self.resume(tid, 0);
            return;
        }
        let now = sys::monotonic_ns();
        if self.syscall_info != Some(false) {
            match sys::syscall_info(tid, &mut self.info) {
                Ok(_) => {
                    self.syscall_info = Some(true);
                    match self.info.op {
                        sys::SYSCALL_INFO_ENTRY => {
                            let arch = arch_from_audit(self.info.arch).unwrap_or(Native::NATIVE);
                            let (nr, args) = (self.info.nr() as u32, self.info.args());
                            self.entry(tid, arch, nr, args, now, false);
                        }
                        sys::SYSCALL_INFO_EXIT => {
                            let ret = self.info.rval();
                            self.exit(tid, ret, now);
                        }
                        _ => {}
                    }
                    self.resume(tid, 0);
                    return;
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
                Err(_) if self.syscall_info.is_none() => self.syscall_info = Some(false),
                Err(_) => {}
            }
        }
        match sys::get_regs(tid, &mut self.regs) {
            Ok(len) => {
                if let Some(r) = self.regs.0.get(..len).and_then(Native::decode) {
                    let in_syscall = self.threads.get(&tid).is_some_and(|t| t.in_syscall);
                    if r.at_entry.unwrap_or(!in_syscall) {
                        self.entry(tid, r.arch, r.nr, r.args, now, false);
                    } else {
                        self.exit(tid, r.ret, now);
                    }
                }
                self.resume(tid, 0);
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(_) => self.resume(tid, 0),
        }
    }

    fn seccomp_stop(&mut self, tid: Tid) {
        if self.serving {
            // Let the call run, unrecorded.
            self.resume(tid, 0);
            return;
        }
        let now = sys::monotonic_ns();
        let mut call = None;
        if self.syscall_info != Some(false) {
            match sys::syscall_info(tid, &mut self.info) {
                Ok(_) if self.info.op == sys::SYSCALL_INFO_SECCOMP => {
                    self.syscall_info = Some(true);
                    let arch = arch_from_audit(self.info.arch).unwrap_or(Native::NATIVE);
                    call = Some((arch, self.info.nr() as u32, self.info.args()));
                }
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return,
                Err(_) => self.syscall_info = Some(false),
            }
        }
        if call.is_none() {
            if let Ok(len) = sys::get_regs(tid, &mut self.regs) {
                call = self
                    .regs
                    .0
                    .get(..len)
                    .and_then(Native::decode)
                    .map(|r| (r.arch, r.nr, r.args));
            }
        }
        if let Some((arch, nr, args)) = call {
            self.entry(tid, arch, nr, args, now, self.seccomp_before_entry);
        }
        self.resume(tid, 0);
    }

    #[inline]
    fn entry(
        &mut self,
        tid: Tid,
        arch: Arch,
        nr: u32,
        args: [u64; 6],
        now: u64,
        from_seccomp_early: bool,
    ) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if t.entry_stop_due {
            // The entry stop that follows a seccomp stop on old kernels: the
            // call was already taken at the seccomp stop.
            t.entry_stop_due = false;
            return;
        }
        let id = SyscallId::from_raw(arch, nr);
        let fd_kind = match self.roles.get(id).fd_arg() {
            Some(i) => {
                let fd = if arch.is_32bit() {
                    args[i] as i32 as i64
                } else {
                    args[i] as i64
                };
                t.fds.borrow_mut().kind(tid, fd)
            }
            None => FdKind::None,
        };
        t.in_syscall = true;
        t.entry_stop_due = from_seccomp_early;
        t.call = Call {
            arch,
            nr,
            id,
            args,
            entry_ns: now,
            fd_kind,
        };
    }

    #[inline]
    fn exit(&mut self, tid: Tid, ret: i64, now: u64) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if !t.in_syscall {
            // An exit without its entry (attached mid-call): nothing to time.
            return;
        }
        t.in_syscall = false;
        let c = t.call;
        let ret = if c.arch.is_32bit() {
            ret as i32 as i64
        } else {
            ret
        };
        let role = self.roles.get(c.id);
        if role != FdRole::None {
            role.after(&mut t.fds.borrow_mut(), &c.args, ret, c.fd_kind);
        }
        let recorded = match &self.record {
            Some(set) => set.get(c.id.0 as usize).copied().unwrap_or(false),
            None => true,
        };
        if !recorded {
            return;
        }
        let session = t.session;
        if let Some(Some(s)) = self.sessions.get_mut(session) {
            s.collector.record(&SyscallEvent {
                tid: tid as u32,
                arch: c.arch,
                nr: c.nr,
                args: c.args,
                ret,
                entry_ns: c.entry_ns,
                exit_ns: now,
                fd_kind: c.fd_kind,
            });
            self.stats.syscalls += 1;
        }
    }

    /// A fork/vfork/clone event on `parent`: registers the child with the
    /// parent's session and the right fd cache, and releases it if its first
    /// stop already came.
    fn new_child(&mut self, parent: Tid, event: i32) {
        let Ok(child) = sys::event_msg(parent) else {
            return;
        };
        let child = child as Tid;
        let Some(p) = self.threads.get(&parent) else {
            return;
        };
        if self.threads.contains_key(&child) || self.let_go.contains(&child) {
            return;
        }
        let (session, parent_tgid, parent_fds) = (p.session, p.tgid, Rc::clone(&p.fds));
        let flags = clone_flags(p);
        let is_thread = match (event, flags) {
            (sys::PTRACE_EVENT_CLONE, Some(f)) => f & CLONE_THREAD != 0,
            (sys::PTRACE_EVENT_CLONE, None) => read_tgid(child) == Some(parent_tgid),
            _ => false,
        };
        let shares_files = match flags {
            Some(f) => f & CLONE_FILES != 0,
            None => sys::share_files(parent, child).unwrap_or(is_thread),
        };
        let tgid = if is_thread { parent_tgid } else { child };
        let fds = if shares_files {
            parent_fds
        } else {
            new_table()
        };
        self.insert_thread(session, child, tgid, fds);
        if let Some(pos) = self.early.iter().position(|t| *t == child) {
            self.early.swap_remove(pos);
            if self.detaching {
                self.detach_thread(child, 0);
            } else {
                self.resume(child, 0);
            }
        }
    }

    /// A stop of a task we do not know yet: an auto-attached child whose
    /// parent's fork/clone event is still queued. Placed at once when
    /// /proc names a traced parent (its thread group or parent process);
    /// else held stopped until the event comes.
    fn unknown_stop(&mut self, tid: Tid, sig: i32) {
        if self.detaching {
            let _ = sys::detach(tid, 0);
            self.let_go.push(tid);
            return;
        }
        if self.early.contains(&tid) {
            // A second stop while held cannot happen; never strand it.
            let _ = sys::resume_syscall(tid, if sig == libc::SIGTRAP { 0 } else { sig });
            return;
        }
        if !self.place_orphan(tid, None) {
            self.early.push(tid);
        }
    }

    /// Registers `tid` (stopped, unknown) under the traced task /proc says
    /// created it, or under `fallback`'s session; resumes it. False when no
    /// owner was found.
    fn place_orphan(&mut self, tid: Tid, fallback: Option<usize>) -> bool {
        let (tgid, ppid) = read_ids(tid).unwrap_or((tid, 0));
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
                let fds = if sys::share_files(parent, tid).unwrap_or(tgid != tid) {
                    parent_fds
                } else {
                    new_table()
                };
                (session, fds)
            }
            None => match fallback {
                Some(session) => (session, new_table()),
                None => return false,
            },
        };
        self.insert_thread(session, tid, tgid, fds);
        self.resume(tid, 0);
        true
    }

    /// After execve: a non-leader thread that exec'd took over the leader's
    /// tid (its old tid is in the event message, the old leader vanishes
    /// unreported); the fd table is the process's own now, close-on-exec
    /// fds gone.
    fn exec_stop(&mut self, tid: Tid) {
        let former = sys::event_msg(tid).map(|m| m as Tid).unwrap_or(tid);
        if former != tid {
            if let Some(moved) = self.threads.remove(&former) {
                if let Some(old_leader) = self.threads.remove(&tid) {
                    self.forget_thread(tid, &old_leader, None);
                }
                if let Some(Some(s)) = self.sessions.get_mut(moved.session) {
                    s.collector.thread_exited(former as u32);
                }
                self.threads.insert(tid, moved);
            }
        }
        if let Some(t) = self.threads.get_mut(&tid) {
            t.fds = new_table();
            t.tgid = tid;
            if let Some(Some(s)) = self.sessions.get_mut(t.session) {
                if s.program_from_exec && s.root == tid {
                    if let Ok(exe) = std::fs::read_link(format!("/proc/{tid}/exe")) {
                        if let Some(name) = exe.file_name() {
                            s.facts.program = agent_core::facts::truncated(&name.to_string_lossy());
                        }
                    }
                }
            }
        }
        self.resume(tid, 0);
    }

    fn thread_gone(&mut self, tid: Tid, status: Option<WaitStatus>) {
        if let Some(pos) = self.early.iter().position(|t| *t == tid) {
            self.early.swap_remove(pos);
        }
        if let Some(t) = self.threads.remove(&tid) {
            let session = t.session;
            self.forget_thread(tid, &t, status);
            // A held child whose parent died before its fork event was
            // reported would wait forever: place it now.
            for held in std::mem::take(&mut self.early) {
                self.place_orphan(held, Some(session));
            }
        }
    }

    fn forget_thread(&mut self, tid: Tid, t: &Thread, status: Option<WaitStatus>) {
        if let Some(Some(s)) = self.sessions.get_mut(t.session) {
            s.collector.thread_exited(tid as u32);
            s.live = s.live.saturating_sub(1);
            if tid == s.root && status.is_some() {
                s.root_status = status;
            }
            if s.live == 0 {
                s.end_ns = sys::monotonic_ns();
            }
        }
    }

    /// Stops recording and keeps the tracees running under the tracer
    /// until they end (a stop request in seccomp mode, see
    /// [`Engine::run`]). Threads already waiting for a syscall's exit stop
    /// get it and are then resumed without syscall stops.
    fn serve_only(&mut self) {
        self.serving = true;
        let now = sys::monotonic_ns();
        for s in self.sessions.iter_mut().flatten() {
            s.detached = true;
            s.end_ns = now;
        }
    }

    /// Detaches every tracee: interrupts each; each is let go at its next
    /// stop, with the signal it was stopped for, so nothing is lost.
    pub fn detach_all(&mut self) {
        if self.detaching {
            return;
        }
        self.detaching = true;
        let tids: Vec<Tid> = self.threads.keys().copied().collect();
        for tid in tids {
            match self.threads.get_mut(&tid) {
                Some(t) => t.detaching = true,
                None => continue,
            }
            // A thread in a group-stop under PTRACE_LISTEN is not in a
            // ptrace-stop, so PTRACE_DETACH would fail (ESRCH) and leave it
            // traced; the interrupt makes it report a PTRACE_EVENT_STOP,
            // where it is detached and stays in its group-stop.
            if sys::interrupt(tid).is_err() {
                // Gone already: its exit report follows.
            }
        }
        for tid in std::mem::take(&mut self.early) {
            let _ = sys::detach(tid, 0);
            self.let_go.push(tid);
        }
    }

    fn detach_thread(&mut self, tid: Tid, sig: i32) {
        let _ = sys::detach(tid, sig);
        if let Some(t) = self.threads.remove(&tid) {
            if let Some(Some(s)) = self.sessions.get_mut(t.session) {
                s.detached = true;
            }
            self.forget_thread(tid, &t, None);
        }
    }
}

/// The clone flags of the syscall `parent` is inside, when it is clone or
/// clone3 and its entry was seen.
fn clone_flags(parent: &Thread) -> Option<u64> {
    if !parent.in_syscall {
        return None;
    }
    let name = parent.call.id.name()?;
    match name {
        "clone" => Some(parent.call.args[0]),
        "clone3" => {
            // struct clone_args starts with `u64 flags`.
            let mut b = [0u8; 8];
            sys::read_memory(parent.tgid, parent.call.args[0], &mut b).ok()?;
            Some(u64::from_ne_bytes(b))
        }
        "fork" | "vfork" => Some(0),
        _ => None,
    }
}

/// The thread-group id of `tid`, from /proc/TID/status.
pub fn read_tgid(tid: Tid) -> Option<Tid> {
    read_ids(tid).map(|(tgid, _)| tgid)
}

/// The thread-group id and parent pid of `tid`, from /proc/TID/status.
pub fn read_ids(tid: Tid) -> Option<(Tid, Tid)> {
    sys::COUNTERS
        .proc_reads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("Tgid:")?, field("PPid:")?))
}

/// Whether the running kernel's release is older than `major.minor`.
pub fn kernel_older_than(major: u32, minor: u32) -> bool {
    let (release, _) = sys::uname();
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let maj = parts.next().and_then(|p| p.parse::<u32>().ok());
    let min = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (maj, min) {
        (Some(a), Some(b)) => (a, b) < (major, minor),
        _ => false,
    }
}
