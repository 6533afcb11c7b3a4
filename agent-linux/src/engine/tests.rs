//! The engine on a scripted backend: the task tree (fork, a child whose
//! first stop comes early, exec with a leader change, group-stops, detach
//! on request, serving a seccomp-filtered program) without real processes.
//!
//! Task ids are above the kernel's `PID_MAX_LIMIT` (2^22), so nothing the
//! engine asks `/proc` about (fd kinds) can be a real task.

use std::collections::{HashMap, VecDeque};
use std::io;

use agent_core::{Arch, CpuTime, Exit, Facts, RunId, RunRecord, Summary, SyscallId};

use super::{Engine, Observer, Session};
use crate::backend::{Control, RawCall, Requests, Resume, StopBackend, SyscallRead};
use crate::stop::{Event, Stop, Stopped};
use crate::sys::{Tid, WaitStatus};

const P: Tid = 5_000_001;
const C: Tid = 5_000_002;
const T: Tid = 5_000_003;

/// What a scripted stop is.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A syscall entry stop of `name` (x86_64 numbering) with arguments.
    Entry(&'static str, [u64; 6]),
    /// A syscall exit stop with the result.
    Exit(i64),
    /// A seccomp stop of `name`.
    Seccomp(&'static str),
    /// An event stop with its message.
    Event(Event, Tid),
    GroupStop(i32),
    Signal(i32),
    Exited(i32),
    /// The agent is asked to stop (SIGINT).
    RequestStop,
    /// The clock moves on this many ns (no stop).
    Advance(u64),
    /// A timer tick (no stop).
    Tick,
    /// The task's process has used this much CPU, user and system ns (no
    /// stop).
    Cpu(u64, u64),
}

/// What the engine asked of the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Resume(Tid, Resume, i32),
    Detach(Tid, i32),
    Listen(Tid),
    Interrupt(Tid),
}

/// A scripted backend: the stops it reports, in order, and a log of what
/// the engine did with them. When the script ends it reports ECHILD.
#[derive(Debug, Default)]
struct Fake {
    script: VecDeque<(Tid, Step)>,
    /// The current stop's syscall and event message, per task.
    reads: HashMap<Tid, SyscallRead>,
    msgs: HashMap<Tid, u64>,
    /// (tgid, ppid) of tasks, as /proc would say.
    ids: HashMap<Tid, (Tid, Tid)>,
    stop: bool,
    tick: bool,
    /// The clock (monotonic ns).
    now: u64,
    /// Each process's CPU time, as /proc would say.
    cpu: HashMap<Tid, CpuTime>,
    log: Vec<Action>,
}

fn nr(name: &str) -> u32 {
    (0..1000)
        .find(|n| SyscallId::from_raw(Arch::X86_64, *n).name() == Some(name))
        .unwrap_or_else(|| panic!("no x86_64 number for {name}"))
}

fn call(name: &str, args: [u64; 6]) -> RawCall {
    RawCall {
        arch: Arch::X86_64,
        nr: nr(name),
        args,
    }
}

impl Fake {
    fn new(script: &[(Tid, Step)]) -> Fake {
        Fake {
            script: script.iter().copied().collect(),
            now: crate::sys::monotonic_ns(),
            ..Fake::default()
        }
    }

    fn actions_of(&self, tid: Tid) -> Vec<Action> {
        self.log
            .iter()
            .copied()
            .filter(|a| match a {
                Action::Resume(t, ..) | Action::Detach(t, _) => *t == tid,
                Action::Listen(t) | Action::Interrupt(t) => *t == tid,
            })
            .collect()
    }
}

impl Control for Fake {
    fn resume(&mut self, tid: Tid, how: Resume, sig: i32) {
        self.log.push(Action::Resume(tid, how, sig));
    }

    fn detach(&mut self, tid: Tid, sig: i32) {
        self.log.push(Action::Detach(tid, sig));
    }

    fn listen(&mut self, tid: Tid) {
        self.log.push(Action::Listen(tid));
    }
}

impl StopBackend for Fake {
    fn next_stop(&mut self) -> io::Result<Option<Stop>> {
        let Some((tid, step)) = self.script.pop_front() else {
            return Err(io::Error::from_raw_os_error(libc::ECHILD));
        };
        let s = Stopped::new(tid);
        Ok(Some(match step {
            Step::Entry(name, args) => {
                self.reads.insert(tid, SyscallRead::Entry(call(name, args)));
                Stop::Syscall(s)
            }
            Step::Exit(ret) => {
                self.reads.insert(tid, SyscallRead::Exit(ret));
                Stop::Syscall(s)
            }
            Step::Seccomp(name) => {
                self.reads
                    .insert(tid, SyscallRead::Entry(call(name, [0; 6])));
                Stop::Seccomp(s)
            }
            Step::Event(event, msg) => {
                self.msgs.insert(tid, msg as u64);
                Stop::Event(s, event)
            }
            Step::GroupStop(sig) => Stop::GroupStop(s, sig),
            Step::Signal(sig) => Stop::SignalDelivery(s, sig),
            Step::Exited(code) => {
                s.vanished();
                Stop::Exited(tid, WaitStatus(code << 8))
            }
            Step::RequestStop => {
                s.vanished();
                self.stop = true;
                return Ok(None);
            }
            Step::Advance(ns) => {
                s.vanished();
                self.now += ns;
                return Ok(None);
            }
            Step::Tick => {
                s.vanished();
                self.tick = true;
                return Ok(None);
            }
            Step::Cpu(user_ns, system_ns) => {
                s.vanished();
                self.cpu.insert(tid, CpuTime { user_ns, system_ns });
                return Ok(None);
            }
        }))
    }

    fn read_syscall(&mut self, stop: &Stopped, _seccomp: bool) -> SyscallRead {
        self.reads
            .remove(&stop.tid())
            .unwrap_or(SyscallRead::Unreadable)
    }

    fn event_msg(&mut self, stop: &Stopped) -> Option<u64> {
        self.msgs.remove(&stop.tid())
    }

    fn interrupt(&mut self, tid: Tid) -> io::Result<()> {
        self.log.push(Action::Interrupt(tid));
        Ok(())
    }

    fn seize(&mut self, _tid: Tid) -> io::Result<()> {
        Ok(())
    }

    fn task_ids(&mut self, tid: Tid) -> Option<(Tid, Tid)> {
        self.ids.get(&tid).copied()
    }

    fn share_files(&mut self, _a: Tid, _b: Tid) -> Option<bool> {
        None
    }

    fn read_u64(&mut self, _tid: Tid, _addr: u64) -> Option<u64> {
        None
    }

    fn exe_name(&mut self, _tid: Tid) -> Option<String> {
        Some("after-exec".into())
    }

    fn cpu_time(&mut self, tgid: Tid) -> Option<CpuTime> {
        self.cpu.get(&tgid).copied()
    }

    fn monotonic_ns(&mut self) -> u64 {
        self.now
    }

    fn requests(&mut self) -> Requests {
        Requests {
            stop: self.stop,
            tick: std::mem::take(&mut self.tick),
        }
    }

    fn quiet(&mut self) {}
}

/// The sessions the engine handed over, in order, and the windows.
#[derive(Default)]
struct Done(Vec<Session>, Vec<Summary>);

impl Observer<Fake> for Done {
    fn window_done(&mut self, summary: Summary) {
        self.1.push(summary);
    }
    fn session_done(&mut self, session: Session) {
        self.0.push(session);
    }
}

/// An engine on `fake` tracing process P (one thread, its leader).
fn engine(fake: Fake, seccomp: bool) -> Engine<Fake> {
    let mut e = Engine::with_backend(fake, None, seccomp, false);
    let s = e.add_session(Session::new(P, Facts::default()));
    e.add_thread(s, P, P);
    e
}

/// Runs the script to its end; the sessions handed over.
fn run(e: &mut Engine<Fake>) -> Vec<Session> {
    let mut done = Done::default();
    e.run(&mut done).unwrap();
    done.0.extend(e.take_sessions());
    done.0
}

fn counts(session: &Session) -> HashMap<String, u64> {
    let run = RunRecord::new(0, 1, session.exit(), Arch::X86_64);
    let summary = session
        .collector
        .summarize(RunId([0; 16]), run, Facts::default());
    summary
        .syscalls
        .iter()
        .map(|s| (s.key.id.to_string(), s.count))
        .collect()
}

const SYSCALL: Resume = Resume::Syscall;

#[test]
fn a_syscall_is_recorded_between_its_entry_and_exit() {
    let mut e = engine(
        Fake::new(&[
            (P, Step::Entry("getpid", [0; 6])),
            (P, Step::Exit(42)),
            // An exit without its entry (attached mid-call) is not timed.
            (P, Step::Exit(0)),
            (P, Step::Exited(3)),
        ]),
        false,
    );
    let done = run(&mut e);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].exit(), Exit::Code(3));
    assert_eq!(counts(&done[0]).get("getpid"), Some(&1));
    assert_eq!(e.stats().syscalls, 1);
    assert_eq!(
        e.backend().actions_of(P),
        vec![Action::Resume(P, SYSCALL, 0); 3],
        "every stop resumed once, to the next syscall stop"
    );
}

#[test]
fn fork_follows_the_child_with_the_parents_session() {
    const SIGCHLD: u64 = 17;
    let mut e = engine(
        Fake::new(&[
            (P, Step::Entry("clone", [SIGCHLD, 0, 0, 0, 0, 0])),
            (P, Step::Event(Event::Fork, C)),
            // The child's first stop, after its parent's event.
            (C, Step::Event(Event::Interrupt, 0)),
            (C, Step::Entry("getpid", [0; 6])),
            (C, Step::Exit(1)),
            (P, Step::Exit(C as i64)),
            (C, Step::Exited(0)),
            (P, Step::Exited(0)),
        ]),
        false,
    );
    let done = run(&mut e);
    assert_eq!(done.len(), 1, "one session for the program");
    let s = &done[0];
    assert_eq!((s.processes, s.threads), (2, 2));
    assert_eq!(s.exit(), Exit::Code(0), "the root's status");
    let c = counts(s);
    assert_eq!((c.get("clone"), c.get("getpid")), (Some(&1), Some(&1)));
    assert_eq!(
        e.backend().actions_of(C),
        vec![Action::Resume(C, SYSCALL, 0); 3]
    );
}

#[test]
fn a_child_whose_first_stop_comes_early_is_held_until_its_parents_event() {
    let mut e = engine(
        Fake::new(&[
            (P, Step::Entry("fork", [0; 6])),
            // /proc does not name its parent yet: the child is held.
            (C, Step::Event(Event::Interrupt, 0)),
            (P, Step::Event(Event::Fork, C)),
            (P, Step::Exit(C as i64)),
            (C, Step::Exited(0)),
            (P, Step::Exited(0)),
        ]),
        false,
    );
    let done = run(&mut e);
    let log = &e.backend().log;
    let held_resumed = log
        .iter()
        .position(|a| *a == Action::Resume(C, SYSCALL, 0))
        .expect("the held child is resumed");
    let parent_event_resumed = log
        .iter()
        .position(|a| *a == Action::Resume(P, SYSCALL, 0))
        .unwrap();
    assert!(
        held_resumed > parent_event_resumed,
        "held until the fork event: {log:?}"
    );
    assert_eq!(done[0].processes, 2);

    // When /proc names the parent, the child is placed at once.
    let mut fake = Fake::new(&[
        (C, Step::Event(Event::Interrupt, 0)),
        (P, Step::Event(Event::Fork, C)),
        (C, Step::Exited(0)),
        (P, Step::Exited(0)),
    ]);
    fake.ids.insert(C, (C, P));
    let mut e = engine(fake, false);
    let done = run(&mut e);
    assert_eq!(e.backend().log[0], Action::Resume(C, SYSCALL, 0));
    assert_eq!((done[0].processes, done[0].threads), (2, 2));
}

#[test]
fn exec_by_a_non_leader_thread_takes_the_leaders_tid() {
    let mut fake = Fake::new(&[
        (T, Step::Entry("execve", [0; 6])),
        // The kernel reports the exec on the leader's tid, with the tid
        // the thread had before; the old leader vanishes unreported.
        (P, Step::Event(Event::Exec, T)),
        (P, Step::Exit(0)),
        (P, Step::Exited(7)),
    ]);
    fake.ids.insert(T, (P, P));
    let mut e = Engine::with_backend(fake, None, false, false);
    let mut session = Session::new(P, Facts::default());
    session.program_from_exec = true;
    let s = e.add_session(session);
    e.add_thread(s, P, P);
    e.add_thread(s, T, P);
    let done = run(&mut e);
    assert_eq!(done.len(), 1, "the session ends: no thread is left behind");
    let s = &done[0];
    assert_eq!((s.processes, s.threads, s.live), (1, 2, 0));
    assert_eq!(s.exit(), Exit::Code(7));
    assert_eq!(
        counts(s).get("execve"),
        Some(&1),
        "the call entered as T completes as P"
    );
    assert_eq!(s.facts.program.as_str(), "after-exec");
}

#[test]
fn a_group_stop_is_listened_to_not_resumed() {
    let mut e = engine(
        Fake::new(&[
            (P, Step::GroupStop(libc::SIGSTOP)),
            // SIGCONT ends the group-stop: an interrupt-like event stop.
            (P, Step::Event(Event::Interrupt, 0)),
            (P, Step::Signal(libc::SIGCONT)),
            (P, Step::Exited(0)),
        ]),
        false,
    );
    run(&mut e);
    assert_eq!(
        e.backend().actions_of(P),
        vec![
            Action::Listen(P),
            Action::Resume(P, SYSCALL, 0),
            Action::Resume(P, SYSCALL, libc::SIGCONT),
        ]
    );
}

#[test]
fn a_stop_request_lets_every_thread_go_with_its_signal() {
    let mut fake = Fake::new(&[
        (P, Step::Entry("read", [0; 6])),
        (P, Step::RequestStop),
        // Each thread is let go at its next stop; a signal it stopped for
        // is delivered, not lost.
        (T, Step::Signal(libc::SIGUSR1)),
        // A fork while detaching: the child is let go at its first stop too.
        (P, Step::Event(Event::Fork, C)),
        (C, Step::Event(Event::Interrupt, 0)),
    ]);
    fake.ids.insert(T, (P, P));
    let mut e = Engine::with_backend(fake, None, false, false);
    let s = e.add_session(Session::new(P, Facts::default()));
    e.add_thread(s, P, P);
    e.add_thread(s, T, P);
    let done = run(&mut e);
    assert!(e.is_detaching());
    let b = e.backend();
    assert!(b.log.contains(&Action::Interrupt(P)) && b.log.contains(&Action::Interrupt(T)));
    assert_eq!(
        b.actions_of(T),
        vec![Action::Interrupt(T), Action::Detach(T, libc::SIGUSR1)]
    );
    assert!(b.actions_of(P).ends_with(&[Action::Detach(P, 0)]));
    assert_eq!(b.actions_of(C), vec![Action::Detach(C, 0)]);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].exit(), Exit::Detached);
    assert_eq!(done[0].live, 0);
}

#[test]
fn a_seccomp_program_is_served_to_its_end_after_a_stop_request() {
    let only = [SyscallId::from_name("write").unwrap()];
    let fake = Fake::new(&[
        (P, Step::Seccomp("write")),
        (P, Step::Exit(1)),
        (P, Step::RequestStop),
        // Served: resumed without syscall stops, nothing recorded.
        (P, Step::Seccomp("write")),
        (P, Step::Exited(5)),
    ]);
    let mut e = Engine::with_backend(fake, Some(&only), true, false);
    let s = e.add_session(Session::new(P, Facts::default()));
    e.add_thread(s, P, P);
    let mut done = Done::default();
    e.run(&mut done).unwrap();
    assert!(e.is_serving(), "a stop request returns at once");
    assert!(done.0.is_empty());
    assert_eq!(counts(e.sessions().next().unwrap()).get("write"), Some(&1));
    e.run(&mut done).unwrap();
    done.0.extend(e.take_sessions());
    let s = &done.0[0];
    assert_eq!(
        counts(s).get("write"),
        Some(&1),
        "nothing recorded while serving"
    );
    assert_eq!(s.root_status.and_then(WaitStatus::exited), Some(5));
    assert_eq!(
        e.backend().actions_of(P),
        vec![
            // The seccomp stop: on to the call's exit.
            Action::Resume(P, SYSCALL, 0),
            // The exit: on to the next seccomp stop.
            Action::Resume(P, Resume::Cont, 0),
            Action::Resume(P, Resume::Cont, 0),
        ]
    );
}

/// An engine on `fake` tracing P in a session that started at wall-clock
/// 10.5 s (the fake clock's now), cut into 1 s windows.
fn windowed_engine(fake: Fake) -> Engine<Fake> {
    let t0 = fake.now;
    let mut e = Engine::with_backend(fake, None, false, false);
    let mut session = Session::new(P, Facts::default());
    session.start_ns = t0;
    session.start_unix_ns = 10_500_000_000;
    session.set_window(std::time::Duration::from_secs(1));
    let s = e.add_session(session);
    e.add_thread(s, P, P);
    e
}

fn summary_counts(summary: &Summary) -> HashMap<String, u64> {
    summary
        .syscalls
        .iter()
        .map(|s| (s.key.id.to_string(), s.count))
        .collect()
}

const MS: u64 = 1_000_000;

#[test]
fn a_call_completing_past_a_boundary_counts_in_the_next_window_once() {
    let mut e = windowed_engine(Fake::new(&[
        (P, Step::Entry("getpid", [0; 6])),
        (P, Step::Exit(1)),
        // Enters in window 1, completes past its end (10.5 s + 600 ms).
        (P, Step::Entry("read", [3, 0, 0, 0, 0, 0])),
        (P, Step::Advance(600 * MS)),
        (P, Step::Exit(5)),
        (P, Step::Entry("getpid", [0; 6])),
        (P, Step::Exit(1)),
        // Idle past two more boundaries: the tick cuts windows 2 and 3.
        (P, Step::Advance(1_900 * MS)),
        (P, Step::Tick),
        (P, Step::Entry("write", [1, 0, 0, 0, 0, 0])),
        (P, Step::Exit(1)),
        (P, Step::Exited(0)),
    ]));
    let mut done = Done::default();
    e.run(&mut done).unwrap();
    let windows = done.1;
    assert_eq!(done.0.len(), 1);
    let last = done.0[0].summary();

    assert_eq!(
        windows.iter().map(|w| w.run.window).collect::<Vec<_>>(),
        vec![1, 2, 3],
        "windows cut at the exit past the boundary and at the tick"
    );
    assert_eq!(last.run.window, 4);
    assert_eq!(last.run.exit, Exit::Code(0));
    assert!(windows.iter().all(|w| w.run.exit == Exit::Running));

    // The read counts where it completed, and only there.
    assert_eq!(
        summary_counts(&windows[0]),
        HashMap::from([("getpid".into(), 1)])
    );
    assert_eq!(
        summary_counts(&windows[1]),
        HashMap::from([("read".into(), 1), ("getpid".into(), 1)])
    );
    assert_eq!(windows[2].run.events, 0);
    assert_eq!(summary_counts(&last), HashMap::from([("write".into(), 1)]));
    let total: u64 = windows.iter().map(|w| w.run.events).sum::<u64>() + last.run.events;
    assert_eq!(total, 4);
    assert_eq!(total, e.stats().syscalls);

    // The thread's last call carries over the boundary: getpid -> read.
    let getpid = SyscallId::from_name("getpid").unwrap();
    let read = SyscallId::from_name("read").unwrap();
    assert!(
        windows[1]
            .transitions
            .iter()
            .any(|t| (t.from, t.to) == (getpid, read)),
        "{:?}",
        windows[1].transitions
    );

    // Wall-clock spans: the first from the start, then whole seconds.
    let spans: Vec<(u64, u64)> = windows
        .iter()
        .chain([&last])
        .map(|w| (w.run.start_unix_ns, w.run.duration_ns))
        .collect();
    assert_eq!(
        spans,
        vec![
            (10_500_000_000, 500 * MS),
            (11_000_000_000, 1_000 * MS),
            (12_000_000_000, 1_000 * MS),
            (13_000_000_000, 0),
        ]
    );
    // One stream, the window length, for all.
    assert!(windows
        .iter()
        .all(|w| w.origin == last.origin && w.origin.window_ns == 1_000 * MS));

    // The read was in flight at the first cut, from its entry.
    assert_eq!(windows[0].in_flight.count, 1);
    let flying = windows[0].in_flight.oldest[0];
    assert_eq!((flying.tid, flying.id), (P as u32, read));
    assert_eq!(flying.start_unix_ns, 10_500_000_000);
    assert_eq!(windows[1].in_flight.count, 0);
    assert_eq!(
        last.in_flight.count, 0,
        "an ended run has nothing in flight"
    );
}

#[test]
fn a_blocked_call_is_in_flight_in_every_window_with_its_start() {
    let mut e = windowed_engine(Fake::new(&[
        (P, Step::Advance(100 * MS)),
        (P, Step::Entry("read", [3, 0, 0, 0, 0, 0])),
        (P, Step::Advance(500 * MS)),
        (P, Step::Tick),
        (P, Step::Advance(1_000 * MS)),
        (P, Step::Tick),
        (P, Step::Exit(0)),
        (P, Step::Exited(0)),
    ]));
    let mut done = Done::default();
    e.run(&mut done).unwrap();
    let windows = done.1;
    assert_eq!(windows.len(), 2);
    for w in &windows {
        assert_eq!(w.in_flight.count, 1, "window {}", w.run.window);
        assert_eq!(w.in_flight.oldest[0].start_unix_ns, 10_600_000_000);
    }
    let last = done.0[0].summary();
    assert_eq!(summary_counts(&last).get("read"), Some(&1));
}

#[test]
fn window_cpu_times_add_up_to_the_runs() {
    let mut fake = Fake::new(&[
        (P, Step::Cpu(1_300 * MS, 100 * MS)),
        (P, Step::Advance(600 * MS)),
        (P, Step::Tick),
        (P, Step::Cpu(1_500 * MS, 150 * MS)),
        // The exit stop reads the process one last time.
        (P, Step::Event(Event::Exit, 0)),
        (P, Step::Cpu(9_000 * MS, 9_000 * MS)), // gone: never read
        (P, Step::Exited(0)),
    ]);
    // Attached to a process that had used 1 s already: not counted.
    fake.cpu.insert(
        P,
        CpuTime {
            user_ns: 1_000 * MS,
            system_ns: 0,
        },
    );
    let mut e = windowed_engine(fake);
    let mut done = Done::default();
    e.run(&mut done).unwrap();
    let w1 = done.1[0].cpu.unwrap();
    let last = done.0[0].summary().cpu.unwrap();
    assert_eq!((w1.user_ns, w1.system_ns), (300 * MS, 100 * MS));
    assert_eq!((last.user_ns, last.system_ns), (200 * MS, 50 * MS));
}

#[test]
fn without_windows_one_summary_has_the_whole_run() {
    let mut e = engine(
        Fake::new(&[
            (P, Step::Entry("getpid", [0; 6])),
            (P, Step::Advance(5_000 * MS)),
            (P, Step::Exit(1)),
            (P, Step::Tick),
            (P, Step::Exited(0)),
        ]),
        false,
    );
    let mut done = Done::default();
    e.run(&mut done).unwrap();
    assert!(done.1.is_empty());
    let s = done.0[0].summary();
    assert_eq!((s.run.window, s.origin.window_ns), (0, 0));
    assert_eq!(s.run.events, 1);
}

#[test]
fn a_finished_sessions_slot_is_reused() {
    let mut e = engine(Fake::new(&[(P, Step::Exited(0))]), false);
    assert_eq!(run(&mut e).len(), 1);
    // A watch's next process: the slot P's session had is free again.
    let s = e.add_session(Session::new(C, Facts::default()));
    assert_eq!(s, 0, "the freed slot is taken");
    e.add_thread(s, C, C);
    e.backend.script.extend([
        (C, Step::Entry("getpid", [0; 6])),
        (C, Step::Exit(7)),
        (C, Step::Exited(1)),
    ]);
    let done = run(&mut e);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].root, C);
    assert_eq!(counts(&done[0]).get("getpid"), Some(&1));
    assert_eq!(e.sessions.len(), 1, "no slot per session ever had");
}

#[test]
fn a_session_that_never_got_a_thread_can_be_forgotten() {
    let mut e = engine(Fake::new(&[]), false);
    let refused = e.add_session(Session::new(C, Facts::default()));
    e.forget_empty_session(refused);
    e.forget_empty_session(0);
    assert!(e.sessions[0].is_some(), "P's session has a thread: kept");
    assert_eq!(
        e.add_session(Session::new(T, Facts::default())),
        refused,
        "the slot is free again"
    );
}
