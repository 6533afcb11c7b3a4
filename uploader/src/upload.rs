//! One upload pass: take the spool's upload lock, send what is pending in
//! batches with retries, delete only what the service acknowledged, set
//! aside what it refused for good, then fetch the directives.

use std::time::{Duration, Instant};

use agent_core::RunId;

use crate::retry::Backoff;
use crate::spool::{Pending, SetAside, Spool};
use crate::transport::{Client, SendError};

/// How a pass behaves.
#[derive(Debug, Clone, Copy)]
pub struct PassOptions {
    /// Summaries per request.
    pub batch: usize,
    /// Tries per batch before the pass gives up.
    pub attempts: u32,
    /// Spacing of the tries.
    pub backoff: Backoff,
    /// No retry starts after this moment (the window closes).
    pub deadline: Option<Instant>,
    /// How long to wait for another uploader holding the spool.
    pub lock_wait: Duration,
    /// Most time the pass spends waiting between tries, in total (`--once`:
    /// a cron run must end); `None`: no limit but the tries and the window.
    /// A wait that would pass it (a long `Retry-After`) ends the pass at
    /// once instead.
    pub wait_limit: Option<Duration>,
}

/// What a pass did.
#[derive(Debug, Default)]
pub struct PassReport {
    /// Summaries acknowledged and deleted from the spool.
    pub sent: usize,
    /// Requests made (tries included).
    pub requests: usize,
    /// Summaries the service refused for good, moved to `rejected/`:
    /// (id, service's reason).
    pub rejected: Vec<(RunId, String)>,
    /// Spool files that were not valid summaries, moved to `rejected/`.
    pub set_aside: Vec<SetAside>,
    /// Summaries still in the spool because sending failed.
    pub unsent: usize,
    /// Why the pass stopped early, if it did.
    pub failure: Option<String>,
    /// The directives could not be fetched (only a warning).
    pub directives_warning: Option<String>,
    /// Another uploader held the spool for longer than the lock wait.
    pub lock_busy: bool,
    /// Time spent waiting between tries.
    pub waited: Duration,
}

/// Runs one pass. Errors of the spool itself (unreadable directory, cannot
/// delete) end the pass with an error; network failures are in the report.
pub fn run_pass(
    spool: &Spool,
    client: &Client,
    opts: &PassOptions,
) -> Result<PassReport, crate::spool::SpoolError> {
    let mut report = PassReport::default();
    let Some(_lock) = wait_for_lock(spool, opts.lock_wait)? else {
        report.lock_busy = true;
        return Ok(report);
    };
    let listing = spool.pending()?;
    report.set_aside = listing.set_aside;
    let batch_size = opts.batch.clamp(1, crate::transport::MAX_BATCH);
    let mut batches = listing.pending.chunks(batch_size);
    for batch in batches.by_ref() {
        if opts.deadline.is_some_and(|d| Instant::now() >= d) {
            report.unsent += batch.len();
            report.failure = Some("the upload window closed".into());
            break;
        }
        if let Err(failure) = send_with_retries(spool, client, batch, opts, &mut report)? {
            report.failure = Some(failure);
            break;
        }
    }
    report.unsent += batches.map(<[Pending]>::len).sum::<usize>();
    if report.failure.is_none() {
        match client.fetch_directives() {
            Ok(json) => {
                if let Err(e) = spool.store_directives(&json) {
                    report.directives_warning = Some(e.to_string());
                }
            }
            Err(e) => report.directives_warning = Some(e.to_string()),
        }
    }
    Ok(report)
}

fn wait_for_lock(
    spool: &Spool,
    wait: Duration,
) -> Result<Option<crate::spool::SpoolLock>, crate::spool::SpoolError> {
    let until = Instant::now() + wait;
    loop {
        if let Some(lock) = spool.lock_upload(false)? {
            return Ok(Some(lock));
        }
        if Instant::now() >= until {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends one batch until every item is acknowledged or refused. Items the
/// service answered neither way are sent again (they are already stored or
/// the service will store them: ids make a repeat harmless).
/// `Ok(Err(why))`: gave up, the rest of the batch stays in the spool.
fn send_with_retries(
    spool: &Spool,
    client: &Client,
    batch: &[Pending],
    opts: &PassOptions,
    report: &mut PassReport,
) -> Result<Result<(), String>, crate::spool::SpoolError> {
    let mut left: Vec<&Pending> = batch.iter().collect();
    let mut attempt = 0u32;
    loop {
        let items: Vec<&[u8]> = left.iter().map(|p| p.bytes.as_slice()).collect();
        report.requests += 1;
        let retry_after = match client.send_batch(&items) {
            Ok(ack) => {
                let mut still = Vec::new();
                for (index, item) in left.iter().enumerate() {
                    if ack.accepted.contains(&item.id) {
                        spool.remove(&item.id)?;
                        report.sent += 1;
                    } else if let Some((_, reason)) = ack.rejected.iter().find(|(i, _)| *i == index)
                    {
                        spool.reject(&item.id, reason)?;
                        report.rejected.push((item.id, reason.clone()));
                    } else {
                        still.push(*item);
                    }
                }
                left = still;
                if left.is_empty() {
                    return Ok(Ok(()));
                }
                attempt += 1;
                if attempt >= opts.attempts {
                    report.unsent += left.len();
                    return Ok(Err(format!(
                        "the service left {} summaries unacknowledged after {attempt} tries",
                        left.len()
                    )));
                }
                None
            }
            Err(SendError::Forbidden(message)) if left.len() == 1 => {
                spool.reject(&left[0].id, &message)?;
                report.rejected.push((left[0].id, message));
                return Ok(Ok(()));
            }
            Err(SendError::Forbidden(_)) => {
                // Find the culprit: each summary alone.
                for (i, item) in left.iter().enumerate() {
                    let single = std::slice::from_ref(*item);
                    if let Err(why) = send_with_retries(spool, client, single, opts, report)? {
                        report.unsent += left.len() - i - 1;
                        return Ok(Err(why));
                    }
                }
                return Ok(Ok(()));
            }
            Err(SendError::Permanent(message)) => {
                report.unsent += left.len();
                return Ok(Err(message));
            }
            Err(SendError::Transient {
                message,
                retry_after,
            }) => {
                attempt += 1;
                if attempt >= opts.attempts {
                    report.unsent += left.len();
                    return Ok(Err(format!("gave up after {attempt} tries: {message}")));
                }
                retry_after
            }
        };
        let delay = opts.backoff.delay(attempt.saturating_sub(1), retry_after);
        if opts.deadline.is_some_and(|d| Instant::now() + delay >= d) {
            report.unsent += left.len();
            return Ok(Err("the upload window closes before the next try".into()));
        }
        if let Some(limit) = opts.wait_limit {
            if report.waited + delay > limit {
                report.unsent += left.len();
                return Ok(Err(format!(
                    "the next try would be in {} s, past the {} s --once-wait limit (waited {} s so far)",
                    delay.as_secs_f64().ceil(),
                    limit.as_secs(),
                    report.waited.as_secs()
                )));
            }
        }
        report.waited += delay;
        std::thread::sleep(delay);
    }
}
