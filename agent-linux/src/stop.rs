//! Typed ptrace stops: what a wait status says, as an enum, and a guard for
//! every stop that leaves a tracee waiting for the tracer.
//!
//! A tracee in a ptrace-stop runs again only when the tracer resumes,
//! detaches or listens to it; forgetting one hangs the program, and
//! resuming one twice is a bug. So each such stop comes with a [`Stopped`]
//! guard whose methods consume it: the compiler sees every path hand the
//! guard on, and a guard dropped unused is caught in debug builds (and, in
//! release builds, resumes the tracee rather than leave it stopped).
//!
//! Which syscall a syscall-like stop is in, and whether it is the entry or
//! the exit, is read afterwards through the backend
//! ([`crate::backend::StopBackend::read_syscall`]), one path for syscall and
//! seccomp stops alike: most stops need it, some (a detaching thread's) do
//! not, and reading costs a ptrace request.

use crate::sys::{self, Tid, WaitStatus};

/// How a resumed tracee runs until its next stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// To the next syscall entry or exit (`PTRACE_SYSCALL`).
    Syscall,
    /// Without syscall stops (`PTRACE_CONT`): only seccomp stops, signals
    /// and events stop it.
    Cont,
}

/// What can be done to a stopped tracee: the part of a backend that the
/// guard's methods use (a backend implements it).
pub trait Control {
    /// Resumes `tid`, delivering `sig` (0: none).
    fn resume(&mut self, tid: Tid, how: Resume, sig: i32);
    /// Lets `tid` go, delivering `sig` (0: none).
    fn detach(&mut self, tid: Tid, sig: i32);
    /// Leaves `tid` in its group-stop while still hearing of it.
    fn listen(&mut self, tid: Tid);
}

/// `SIGTRAP | 0x80`: a syscall stop under `PTRACE_O_TRACESYSGOOD`.
pub const SYSCALL_TRAP: i32 = libc::SIGTRAP | 0x80;

/// One report of a tracee, typed.
#[derive(Debug)]
pub enum Stop {
    /// A syscall-entry or -exit stop (`PTRACE_SYSCALL`).
    Syscall(Stopped),
    /// A seccomp stop (`SECCOMP_RET_TRACE`): a selected syscall's entry.
    Seccomp(Stopped),
    /// A signal is about to be delivered; resuming with it delivers it.
    SignalDelivery(Stopped, i32),
    /// A job-control stop (SIGSTOP, SIGTSTP, ...) of a seized tracee.
    #[allow(clippy::enum_variant_names)] // "group-stop" is ptrace(2)'s name
    GroupStop(Stopped, i32),
    /// A ptrace event.
    Event(Stopped, Event),
    /// The tracee exited (its status, for the program's own).
    Exited(Tid, WaitStatus),
    /// The tracee was killed by a signal.
    Killed(Tid, WaitStatus),
}

/// The ptrace events the engine asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `fork`: the event message is the new child's pid.
    Fork,
    /// `vfork`: likewise.
    Vfork,
    /// `clone`: the new task's tid.
    Clone,
    /// `execve` succeeded: the message is the tid the task had before (a
    /// non-leader thread that execs takes the leader's tid).
    Exec,
    /// The task is about to exit (`PTRACE_O_TRACEEXIT`): still whole, so
    /// its CPU time can be read one last time.
    Exit,
    /// `PTRACE_EVENT_STOP` with SIGTRAP: after `PTRACE_INTERRUPT`, a new
    /// child's first stop, or the end of a group-stop being listened to.
    Interrupt,
    /// Anything else (not asked for): resumed as is.
    Other,
}

impl Event {
    /// Whether the event announces a new task.
    pub fn is_new_task(self) -> bool {
        matches!(self, Event::Fork | Event::Vfork | Event::Clone)
    }
}

/// What a wait status says about `tid`; `None` for a status that is none
/// of these (a continued report, which the engine never asks for).
pub fn classify(tid: Tid, status: WaitStatus) -> Option<Stop> {
    if status.exited().is_some() {
        return Some(Stop::Exited(tid, status));
    }
    if status.signaled().is_some() {
        return Some(Stop::Killed(tid, status));
    }
    let sig = status.stopped()?;
    let stopped = Stopped { tid };
    Some(match (sig, status.event()) {
        (SYSCALL_TRAP, 0) => Stop::Syscall(stopped),
        (libc::SIGTRAP, sys::PTRACE_EVENT_SECCOMP) => Stop::Seccomp(stopped),
        (libc::SIGTRAP, sys::PTRACE_EVENT_FORK) => Stop::Event(stopped, Event::Fork),
        (libc::SIGTRAP, sys::PTRACE_EVENT_VFORK) => Stop::Event(stopped, Event::Vfork),
        (libc::SIGTRAP, sys::PTRACE_EVENT_CLONE) => Stop::Event(stopped, Event::Clone),
        (libc::SIGTRAP, sys::PTRACE_EVENT_EXEC) => Stop::Event(stopped, Event::Exec),
        (libc::SIGTRAP, sys::PTRACE_EVENT_EXIT) => Stop::Event(stopped, Event::Exit),
        (libc::SIGTRAP, sys::PTRACE_EVENT_STOP) => Stop::Event(stopped, Event::Interrupt),
        (_, sys::PTRACE_EVENT_STOP) => Stop::GroupStop(stopped, sig),
        (_, 0) => Stop::SignalDelivery(stopped, sig),
        _ => Stop::Event(stopped, Event::Other),
    })
}

/// A tracee in a ptrace-stop, waiting for the tracer. Every method
/// consumes the guard.
#[derive(Debug)]
#[must_use = "a stopped tracee must be resumed, detached, listened to or held"]
pub struct Stopped {
    tid: Tid,
}

impl Stopped {
    /// The guard of a stop that a backend reported (the fake backend of the
    /// engine's tests makes its own).
    pub fn new(tid: Tid) -> Stopped {
        Stopped { tid }
    }

    /// The stopped task.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// Resumes the tracee, delivering `sig` (0: none).
    pub fn resume<C: Control + ?Sized>(self, backend: &mut C, how: Resume, sig: i32) {
        backend.resume(self.release(), how, sig);
    }

    /// Lets the tracee go, delivering `sig` (0: none).
    pub fn detach<C: Control + ?Sized>(self, backend: &mut C, sig: i32) {
        backend.detach(self.release(), sig);
    }

    /// Leaves the tracee in its group-stop, as the signal wants, while the
    /// tracer still hears of its SIGCONT (`PTRACE_LISTEN`).
    pub fn listen<C: Control + ?Sized>(self, backend: &mut C) {
        backend.listen(self.release());
    }

    /// The tracee is gone (killed meanwhile; its exit report follows):
    /// there is nothing to resume.
    pub fn vanished(self) {
        self.release();
    }

    /// The tid, with the duty to resume handed over: for the tracer that
    /// resumes a task by tid alone. Only the methods above call it.
    fn release(self) -> Tid {
        let tid = self.tid;
        std::mem::forget(self);
        tid
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // Unreachable by design: every path consumes the guard. A debug
        // build says so loudly; a release build cannot reach the backend
        // from here, so it resumes the tracee directly rather than leave
        // the program stopped for good.
        debug_assert!(
            std::thread::panicking(),
            "the stop of task {} was dropped without being resumed",
            self.tid
        );
        let _ = sys::resume_syscall(self.tid, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop's status word: `sig` in bits 8-15, the event in 16-23, 0x7f
    /// below (WIFSTOPPED).
    fn stopped(sig: i32, event: i32) -> WaitStatus {
        WaitStatus((event << 16) | (sig << 8) | 0x7f)
    }

    /// The stop in words; the guards are forgotten (task 7 is no tracee).
    fn kind(stop: Option<Stop>) -> String {
        match stop {
            Some(Stop::Syscall(s)) => forget(s, "syscall".into()),
            Some(Stop::Seccomp(s)) => forget(s, "seccomp".into()),
            Some(Stop::SignalDelivery(s, sig)) => forget(s, format!("signal {sig}")),
            Some(Stop::GroupStop(s, sig)) => forget(s, format!("group-stop {sig}")),
            Some(Stop::Event(s, e)) => forget(s, format!("event {e:?}")),
            Some(Stop::Exited(_, st)) => format!("exited {:?}", st.exited()),
            Some(Stop::Killed(_, st)) => format!("killed {:?}", st.signaled()),
            None => "none".to_string(),
        }
    }

    fn forget(s: Stopped, text: String) -> String {
        s.release();
        text
    }

    #[test]
    fn wait_statuses_become_typed_stops() {
        let c = |st| kind(classify(7, st));
        assert_eq!(c(stopped(SYSCALL_TRAP, 0)), "syscall");
        assert_eq!(
            c(stopped(libc::SIGTRAP, sys::PTRACE_EVENT_SECCOMP)),
            "seccomp"
        );
        assert_eq!(
            c(stopped(libc::SIGTRAP, sys::PTRACE_EVENT_FORK)),
            "event Fork"
        );
        assert_eq!(
            c(stopped(libc::SIGTRAP, sys::PTRACE_EVENT_VFORK)),
            "event Vfork"
        );
        assert_eq!(
            c(stopped(libc::SIGTRAP, sys::PTRACE_EVENT_CLONE)),
            "event Clone"
        );
        assert_eq!(
            c(stopped(libc::SIGTRAP, sys::PTRACE_EVENT_EXEC)),
            "event Exec"
        );
        assert_eq!(
            c(stopped(libc::SIGTRAP, sys::PTRACE_EVENT_STOP)),
            "event Interrupt"
        );
        assert_eq!(
            c(stopped(libc::SIGSTOP, sys::PTRACE_EVENT_STOP)),
            format!("group-stop {}", libc::SIGSTOP)
        );
        assert_eq!(
            c(stopped(libc::SIGINT, 0)),
            format!("signal {}", libc::SIGINT)
        );
        // A plain SIGTRAP (a breakpoint, kill -TRAP) is a signal to deliver.
        assert_eq!(
            c(stopped(libc::SIGTRAP, 0)),
            format!("signal {}", libc::SIGTRAP)
        );
        assert_eq!(c(WaitStatus(3 << 8)), "exited Some(3)");
        assert_eq!(c(WaitStatus(libc::SIGKILL)), "killed Some(9)");
        // A "continued" report is none of these.
        assert_eq!(c(WaitStatus(0xffff)), "none");
    }
}
