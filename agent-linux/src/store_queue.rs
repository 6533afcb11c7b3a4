//! `watch`'s summaries on their way to storage: a bounded queue between
//! the tracer's thread and a writer thread of their own (a write and its
//! fsync on the tracer's thread would hold up its tracees and delay the
//! attach to the next program).
//!
//! Under an exec storm runs end faster than a spool's fsyncs store them.
//! The queue holds at most [`QUEUE`] summaries; one that finds it full is
//! shed, never waited for: counted, said on stderr, and the count rides
//! on the next summary stored as the fact [`SHED_FACT`]. So the agent's
//! memory is bounded whatever the rate of runs, and the tracer never
//! blocks on the disk.
//!
//! After a stop (SIGTERM) the writer stores what is queued for at most
//! [`AFTER_STOP`], then counts the rest as not stored (said on stderr): the
//! agent exits promptly rather than after minutes of fsyncs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agent_core::Summary;

/// Summaries waiting for the writer at most (each a few KiB in memory).
pub const QUEUE: usize = 64;
/// How long the writer goes on storing after a stop was requested.
pub const AFTER_STOP: Duration = Duration::from_secs(1);
/// The fact that carries how many summaries were shed (the queue was full)
/// since the previous summary stored.
pub const SHED_FACT: &str = "watch.shed_summaries";

/// What the writer did, once it ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// Summaries stored.
    pub stored: u64,
    /// Summaries the store refused (its error was said).
    pub failed: u64,
    /// Summaries shed because the queue was full.
    pub shed: u64,
    /// Summaries still queued when the time after the stop ran out.
    pub unstored_at_stop: u64,
}

/// The tracer's end of the queue.
#[derive(Debug)]
pub struct StoreQueue {
    to_writer: Option<SyncSender<Summary>>,
    /// Shed since the last summary that carried the count.
    shed_pending: Arc<AtomicU64>,
    shed_total: u64,
    writer: Option<JoinHandle<Stored>>,
}

impl StoreQueue {
    /// Starts the writer: each summary goes to `store` (its error, if any,
    /// is said by the writer and counted). The thread never takes the
    /// agent's signals.
    pub fn start(
        mut store: impl FnMut(&mut Summary) -> anyhow::Result<()> + Send + 'static,
    ) -> std::io::Result<StoreQueue> {
        let (to_writer, summaries) = mpsc::sync_channel::<Summary>(QUEUE);
        let shed_pending = Arc::new(AtomicU64::new(0));
        let pending = Arc::clone(&shed_pending);
        let writer = crate::signals::spawn_quiet_thread("edge-agent-store", move || {
            let mut done = Stored::default();
            let mut stop_at: Option<Instant> = None;
            for mut s in summaries {
                if crate::signals::stop_requested().is_some() {
                    let at = *stop_at.get_or_insert_with(|| Instant::now() + AFTER_STOP);
                    if Instant::now() >= at {
                        done.unstored_at_stop += 1;
                        continue;
                    }
                }
                let shed = pending.swap(0, Ordering::SeqCst);
                if shed > 0 && s.facts.add(SHED_FACT, &shed.to_string()).is_err() {
                    // No room for it here: the next one carries it.
                    pending.fetch_add(shed, Ordering::SeqCst);
                }
                match store(&mut s) {
                    Ok(()) => done.stored += 1,
                    Err(e) => {
                        done.failed += 1;
                        eprintln!(
                            "edge-agent: cannot store the summary of {}: {e:#}",
                            s.facts.program
                        );
                    }
                }
            }
            done
        })?;
        Ok(StoreQueue {
            to_writer: Some(to_writer),
            shed_pending,
            shed_total: 0,
            writer: Some(writer),
        })
    }

    /// Queues `summary` for the writer, or sheds it (counted) when the
    /// queue is full. Never waits.
    pub fn put(&mut self, summary: Summary) {
        let Some(tx) = &self.to_writer else {
            return;
        };
        match tx.try_send(summary) {
            Ok(()) => {}
            Err(TrySendError::Full(s)) => {
                self.shed_pending.fetch_add(1, Ordering::SeqCst);
                self.shed_total += 1;
                // Said at the first and then at each power of two: a storm
                // must not flood stderr either.
                if self.shed_total.is_power_of_two() {
                    eprintln!(
                        "edge-agent: the summary of {} was not stored: {} summaries shed so far (the store is behind; the next summary stored carries the count as {SHED_FACT})",
                        s.facts.program, self.shed_total
                    );
                }
            }
            // The writer is gone (it panicked): nothing stores any more.
            Err(TrySendError::Disconnected(_)) => {
                self.shed_total += 1;
            }
        }
    }

    /// Lets the writer store what is queued (for at most [`AFTER_STOP`]
    /// once a stop was requested) and says what was not stored.
    pub fn finish(mut self) -> anyhow::Result<Stored> {
        self.to_writer = None;
        let writer = self.writer.take().expect("the writer runs until finish");
        let mut done = writer
            .join()
            .map_err(|_| anyhow::anyhow!("the thread that stores summaries panicked"))?;
        done.shed = self.shed_total;
        let left = self.shed_pending.load(Ordering::SeqCst);
        if done.shed > 0 {
            eprintln!(
                "edge-agent: {} summaries were shed while the store was behind ({left} of them counted in no stored summary)",
                done.shed
            );
        }
        if done.unstored_at_stop > 0 {
            eprintln!(
                "edge-agent: {} summaries queued at the stop were not stored (the store took longer than {} ms)",
                done.unstored_at_stop,
                AFTER_STOP.as_millis()
            );
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn summary() -> Summary {
        Summary::empty()
    }

    /// A store slower than the runs: the queue never holds more than
    /// [`QUEUE`], the rest is shed and its count rides on a later summary.
    #[test]
    fn a_full_queue_sheds_and_counts() {
        let (gate_tx, gate) = channel::<()>();
        let (seen_tx, seen) = channel::<Option<String>>();
        let mut queue = StoreQueue::start(move |s| {
            // Held until the test lets it go: the queue fills meanwhile.
            let _ = gate.recv();
            let _ = seen_tx.send(s.facts.get(SHED_FACT).map(str::to_string));
            Ok(())
        })
        .unwrap();
        // The writer takes one and waits in the store; QUEUE more fit.
        let n = 3 * QUEUE as u64;
        for _ in 0..n {
            queue.put(summary());
        }
        assert!(
            queue.shed_total >= n - QUEUE as u64 - 1,
            "{}",
            queue.shed_total
        );
        // One more after the writer has room: it carries the count.
        for _ in 0..n {
            let _ = gate_tx.send(());
        }
        drop(gate_tx);
        let mut facts: Vec<Option<String>> = Vec::new();
        while facts.len() < (n - queue.shed_total) as usize {
            facts.push(seen.recv().unwrap());
        }
        queue.put(summary());
        let done = queue.finish().unwrap();
        facts.extend(seen.try_iter());
        let counted: u64 = facts
            .iter()
            .flatten()
            .map(|v| v.parse::<u64>().unwrap())
            .sum();
        assert_eq!(done.shed, n - done.stored + 1);
        assert_eq!(counted, done.shed, "{facts:?}");
        assert_eq!(done.failed, 0);
    }
}
