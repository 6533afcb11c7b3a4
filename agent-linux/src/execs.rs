//! The process-events connector's execs, handed to the tracer thread at
//! once: a reader thread takes each exec from the kernel ([`ProcEvents`]),
//! queues its process id and wakes the tracer with SIGALRM (a blocking
//! waitpid returns EINTR; the loop then asks `watch` what to do). An idle
//! tracer waits on the queue itself ([`ExecFeed::wait`]), woken by the
//! queue alone: no signal handler runs on its way to the seize.
//!
//! The program is not stopped meanwhile: the calls it makes between its
//! exec and the tracer's seize are missed (docs/edge-agent.md gives the
//! measured count), but none after. So that a loaded machine does not make
//! the agent late for a 10 ms program, the reader and the tracer thread run
//! in the lowest real-time class (`sys::become_realtime`): each wakes, does
//! microseconds of work and sleeps (the reader per exec, the tracer per
//! tracee stop), so they take no more CPU than before, only sooner; a
//! traced program's stops are served at once too.
//!
//! Asked to (`watch --light`), it also queues each process's exit (its
//! wait status and when), which light runs take at the tracer's next tick:
//! no wake-up for those.
//!
//! Both queues are bounded ([`EXEC_QUEUE`], [`EXIT_QUEUE`]): under an exec
//! storm a tracer that falls behind must not grow the agent. An exec that
//! finds its queue full is shed: counted ([`ExecFeed::take_shed`], which
//! `watch` puts in a summary fact) and treated as a lost event, so the
//! tracer rescans /proc and a long-lived matching process is still found;
//! a shed exit leaves its light run to notice the process gone, as
//! without the connector.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::procevents::{Ended, ProcEvent, ProcEvents};
use crate::sys::{self, Tid};

/// How long the reader waits for an event before it looks at its stop flag.
const READ_TIMEOUT: Duration = Duration::from_millis(200);
/// How often the reader wakes the tracer again while its news is not taken
/// (a SIGALRM that lands just before the tracer's waitpid does not
/// interrupt it), and how many times at most.
const REKICK_EVERY: Duration = Duration::from_micros(500);
const REKICKS: u32 = 200;
/// Execs queued for the tracer at most (a process id each).
pub const EXEC_QUEUE: usize = 4096;
/// Exits queued for the light runs at most.
pub const EXIT_QUEUE: usize = 4096;

/// Flags the reader and the tracer share.
#[derive(Debug, Default)]
struct Shared {
    /// Stop reading (the feed was dropped).
    stop: AtomicBool,
    /// Execs queued and not taken yet.
    pending: AtomicBool,
    /// The tracer is idle, blocked on the queue ([`ExecFeed::wait`]): a
    /// queued exec wakes it, and a SIGALRM on top would only run its
    /// handler on the way to the seize.
    waiting: AtomicBool,
    /// Events were lost: the tracer must rescan /proc.
    lost: AtomicBool,
    /// The reader ended on an error: no more events will come.
    dead: AtomicBool,
    /// Execs and exits shed (their queue was full) and not taken yet.
    shed: AtomicU64,
}

/// Execs as they happen, for the thread that created the feed.
#[derive(Debug)]
pub struct ExecFeed {
    execs: Receiver<Tid>,
    /// Process exits: pid, how it ended, when (CLOCK_MONOTONIC ns); only
    /// when asked for at the start (nobody drains them otherwise).
    exits: Receiver<(Tid, Ended, u64)>,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
}

impl ExecFeed {
    /// Subscribes (failing with [`ProcEvents::subscribe`]'s reason) and
    /// starts the reader; the calling thread is the one woken, and both
    /// run in the real-time class from here on (where the agent may).
    /// `exits`: also queue every process's exit for
    /// [`ExecFeed::take_exits`].
    pub fn start(exits: bool) -> anyhow::Result<ExecFeed> {
        let mut events = ProcEvents::subscribe()?;
        realtime("tracer");
        let tracer = sys::current_thread();
        let shared = Arc::new(Shared::default());
        let (tx, execs) = mpsc::sync_channel(EXEC_QUEUE);
        let (exits_tx, exits_rx) = mpsc::sync_channel(EXIT_QUEUE);
        let flags = Arc::clone(&shared);
        let reader = crate::signals::spawn_quiet_thread("edge-agent-execs", move || {
            realtime("exec reader");
            while !flags.stop.load(Ordering::SeqCst) {
                let event = match events.next(READ_TIMEOUT) {
                    Ok(Some(e)) => e,
                    Ok(None) => continue,
                    Err(e) => {
                        eprintln!(
                            "edge-agent: process events stopped ({e}); scanning /proc instead"
                        );
                        flags.dead.store(true, Ordering::SeqCst);
                        flags.lost.store(true, Ordering::SeqCst);
                        let _ = sys::alarm_thread(tracer);
                        return;
                    }
                };
                match event {
                    ProcEvent::Exec { tgid, .. } => {
                        flags.pending.store(true, Ordering::SeqCst);
                        match tx.try_send(tgid) {
                            Ok(()) => {}
                            Err(TrySendError::Full(_)) => {
                                flags.shed.fetch_add(1, Ordering::SeqCst);
                                flags.lost.store(true, Ordering::SeqCst);
                            }
                            Err(TrySendError::Disconnected(_)) => return,
                        }
                    }
                    ProcEvent::Lost => flags.lost.store(true, Ordering::SeqCst),
                    // A process's end (its last thread, the leader's id).
                    ProcEvent::Exit {
                        pid,
                        tgid,
                        ended,
                        at_ns,
                    } if exits && pid == tgid => {
                        match exits_tx.try_send((tgid, ended, at_ns)) {
                            Ok(()) => {}
                            Err(TrySendError::Full(_)) => {
                                flags.shed.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(TrySendError::Disconnected(_)) => return,
                        }
                        continue;
                    }
                    ProcEvent::Exit { .. } => continue,
                }
                // Wake the tracer until it has taken the news: a tracer
                // blocked on the queue was woken by the send (checked
                // after it: a wait that timed out meanwhile is kicked
                // at the next turn).
                for _ in 0..REKICKS {
                    if !flags.waiting.load(Ordering::SeqCst) {
                        let _ = sys::alarm_thread(tracer);
                    }
                    std::thread::sleep(REKICK_EVERY);
                    if !flags.pending.load(Ordering::SeqCst) && !flags.lost.load(Ordering::SeqCst) {
                        break;
                    }
                    if flags.stop.load(Ordering::SeqCst) {
                        return;
                    }
                }
            }
        })?;
        Ok(ExecFeed {
            execs,
            exits: exits_rx,
            shared,
            reader: Some(reader),
        })
    }

    /// The processes that exec'd since the last call, in order.
    pub fn take(&self) -> Vec<Tid> {
        self.shared.pending.store(false, Ordering::SeqCst);
        self.execs.try_iter().collect()
    }

    /// The processes that ended since the last call: pid, how, when
    /// (CLOCK_MONOTONIC ns). Empty unless the feed was started with exits.
    pub fn take_exits(&self) -> Vec<(Tid, Ended, u64)> {
        self.exits.try_iter().collect()
    }

    /// Whether events were lost since the last call (the caller rescans).
    pub fn take_lost(&self) -> bool {
        self.shared.lost.swap(false, Ordering::SeqCst)
    }

    /// How many execs and exits were shed (their queue was full) since
    /// the last call.
    pub fn take_shed(&self) -> u64 {
        self.shared.shed.swap(0, Ordering::SeqCst)
    }

    /// Whether the reader ended (an error it reported): the caller goes
    /// back to scanning /proc.
    pub fn is_dead(&self) -> bool {
        self.shared.dead.load(Ordering::SeqCst)
    }

    /// Waits up to `timeout` for an exec; `None` if none came.
    pub fn wait(&self, timeout: Duration) -> Option<Tid> {
        self.shared.waiting.store(true, Ordering::SeqCst);
        let got = self.execs.recv_timeout(timeout);
        self.shared.waiting.store(false, Ordering::SeqCst);
        match got {
            Ok(pid) => {
                // The caller takes the rest with `take`.
                self.shared.pending.store(false, Ordering::SeqCst);
                Some(pid)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                // The reader ended (its error was said): do not spin.
                std::thread::sleep(timeout);
                None
            }
        }
    }
}

/// Puts the calling thread in the real-time class, or says it cannot.
fn realtime(which: &str) {
    if let Err(e) = sys::become_realtime() {
        eprintln!(
            "edge-agent: the {which} keeps an ordinary priority ({e}: SCHED_FIFO needs CAP_SYS_NICE); on a loaded machine a short run may be missed or lose its first calls"
        );
    }
}

impl Drop for ExecFeed {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}
