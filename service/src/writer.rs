//! The writers: a writer thread owns a write connection and commits
//! whatever requests are waiting in one transaction (group commit), so the
//! cost of a commit's fsync is shared by every request that arrived while
//! the previous one was being written. SQLite has one writer (a second would
//! only wait for the file's lock); PostgreSQL several, each with its own
//! connection, whose commits overlap (the database orders them; see
//! `store::postgres` for why they cannot deadlock).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;
use crate::store::{Inserted, NewRun, Store, StoreError};

/// Requests waiting for the writer, at most (each up to 1 MiB of body, so
/// this bounds the memory held); beyond, the server answers 503.
pub const QUEUE_REQUESTS: usize = 128;
/// Runs committed in one transaction, at most (bounds a commit's latency).
pub const MAX_RUNS_PER_COMMIT: usize = 4096;

/// Why a batch was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The queue is full: the server is overloaded.
    #[error("ingest queue full")]
    QueueFull,
    /// The writer stopped (its store failed to open or it panicked).
    #[error("store writer stopped")]
    Stopped,
    /// The store refused the transaction.
    #[error(transparent)]
    Store(#[from] StoreError),
}

struct Job {
    runs: Vec<NewRun>,
    reply: oneshot::Sender<Result<Vec<Inserted>, StoreError>>,
}

/// Handle to the writer thread; dropping every handle stops it once the
/// queue is drained.
#[derive(Clone, Debug)]
pub struct Writer {
    queue: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Job({} runs)", self.runs.len())
    }
}

impl Writer {
    /// Starts one writer thread on each of `stores` (connections to one
    /// store); they take turns at the queue.
    pub fn start(stores: Vec<Box<dyn Store>>, metrics: Metrics) -> std::io::Result<Writer> {
        let (queue, rx) = mpsc::channel::<Job>(QUEUE_REQUESTS);
        let rx = Arc::new(Mutex::new(rx));
        for mut store in stores {
            let (rx, metrics) = (Arc::clone(&rx), metrics.clone());
            std::thread::Builder::new()
                .name("store-writer".into())
                .spawn(move || {
                    while let Some(jobs) = next_jobs(&rx) {
                        commit(store.as_mut(), jobs, &metrics);
                    }
                })?;
        }
        Ok(Writer { queue })
    }

    /// Stores `runs` durably (one transaction, possibly shared with other
    /// requests); one outcome per run, in order.
    pub async fn write(&self, runs: Vec<NewRun>) -> Result<Vec<Inserted>, WriteError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        self.queue
            .try_send(Job { runs, reply })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => WriteError::QueueFull,
                mpsc::error::TrySendError::Closed(_) => WriteError::Stopped,
            })?;
        Ok(answer.await.map_err(|_| WriteError::Stopped)??)
    }
}

/// The next commit's jobs: the first to come and every one waiting behind
/// it (up to [`MAX_RUNS_PER_COMMIT`] runs); `None` once every handle is
/// dropped and the queue is drained.
fn next_jobs(rx: &Mutex<mpsc::Receiver<Job>>) -> Option<Vec<Job>> {
    // A writer that panicked while holding the lock left the queue intact.
    let mut rx = rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let first = rx.blocking_recv()?;
    let mut runs = first.runs.len();
    let mut jobs = vec![first];
    while runs < MAX_RUNS_PER_COMMIT {
        match rx.try_recv() {
            Ok(job) => {
                runs += job.runs.len();
                jobs.push(job);
            }
            Err(_) => break,
        }
    }
    Some(jobs)
}

/// Writes every job's runs in one transaction and answers each job.
fn commit(store: &mut dyn Store, jobs: Vec<Job>, metrics: &Metrics) {
    let mut all = Vec::with_capacity(jobs.iter().map(|j| j.runs.len()).sum());
    let mut replies = Vec::with_capacity(jobs.len());
    for job in jobs {
        replies.push((job.runs.len(), job.reply));
        all.extend(job.runs);
    }
    let started = Instant::now();
    let result = store.insert_runs(&all);
    metrics.observe_commit(started.elapsed(), all.len(), result.is_ok());
    match result {
        Ok(outcomes) => {
            let mut rest = &outcomes[..];
            for (n, reply) in replies {
                let (mine, later) = rest.split_at(n.min(rest.len()));
                rest = later;
                // A requester that went away (client disconnected) needs no
                // answer; its runs are stored all the same.
                let _ = reply.send(Ok(mine.to_vec()));
            }
        }
        Err(e) => {
            for (_, reply) in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}
