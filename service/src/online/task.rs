//! `serve --peers-online`: the live analysis' thread. Every tick it takes
//! the one-instance lock (PostgreSQL: a session advisory lock; SQLite: one
//! process), reads the window summaries that started since its last read
//! (plus a margin for late uploads), judges them ([`super::analysis`]),
//! stores each incident change and hands opened and closed incidents to
//! the sink. An instance that does not hold the lock hands the sink the
//! store's open incidents instead (its gauges follow the running one's).
//! Every decision is one line on stderr (`edge-service: online: ...`).

use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::{Kind, Summary};
use wire::alert::{IncidentAlert, IncidentEvent};

use super::analysis::Online;
use super::incidents::Event;
use super::sink::SinkQueue;
use super::windows::Added;
use super::{ns, OnlineOptions};
use crate::store::{RunFilter, Store, StoreOpener};

/// How far back of the newest window start read each read goes again:
/// windows stored later than this after they started are not judged live
/// (the `peers` command still reads them).
fn lateness(options: &OnlineOptions) -> u64 {
    ns(options.tick)
        .saturating_mul(2)
        .saturating_add(10_000_000_000)
}

/// Windows starting further than this in the future (a device's clock
/// ahead) are not read.
const FUTURE_NS: u64 = 60_000_000_000;

fn log(message: &str) {
    eprintln!("edge-service: online: {message}");
}

/// The thread's state between ticks.
#[derive(Debug)]
pub struct OnlineTask {
    online: Online,
    /// Start time from which the next read begins; `None` before the
    /// first (then: one baseline span back).
    cursor: Option<u64>,
    /// Whether this instance held the lock at the last tick.
    holding: Option<bool>,
    sink: Option<SinkQueue>,
}

impl OnlineTask {
    /// A task with these (checked) options; opened and closed incidents
    /// go to `sink` when given.
    pub fn new(options: OnlineOptions, sink: Option<SinkQueue>) -> OnlineTask {
        OnlineTask {
            online: Online::new(options),
            cursor: None,
            holding: None,
            sink,
        }
    }

    /// The analysis (its open incidents, what it holds).
    pub fn online(&self) -> &Online {
        &self.online
    }

    /// One tick at `now` (Unix ns): returns the alerts of the incidents
    /// opened and closed (also handed to the sink).
    pub fn tick(&mut self, store: &mut dyn Store, now: u64) -> anyhow::Result<Vec<IncidentAlert>> {
        let held = store.hold_online_lock()?;
        if Some(held) != self.holding {
            match (held, self.holding) {
                (true, _) => {
                    let open = store.open_incidents(None)?;
                    log(&format!(
                        "this instance runs the live analysis ({} open incident(s) taken over from the store)",
                        open.len()
                    ));
                    for row in open {
                        self.online.restore(row);
                    }
                }
                (false, Some(true)) => {
                    log("lost the lock: another instance runs the live analysis now; this one waits");
                    self.online = Online::new(self.online.options().clone());
                    self.cursor = None;
                }
                (false, _) => log("another instance runs the live analysis; this one waits"),
            }
            self.holding = Some(held);
        }
        if !held {
            // The running instance's incidents, for this one's gauges.
            if let Some(sink) = &self.sink {
                let open = store.open_incidents(None)?;
                sink.offer_open(
                    open.iter()
                        .map(|row| row.alert(IncidentEvent::Opened))
                        .collect(),
                );
            }
            return Ok(Vec::new());
        }
        self.read(store, now)?;
        let tick = self.online.tick(now);
        for line in &tick.lines {
            log(line);
        }
        let mut alerts = Vec::new();
        for mut change in tick.changes {
            let row = &mut change.incident;
            let event = match change.event {
                Event::Opened => {
                    row.id = store.add_incident(row)?;
                    self.online.set_id(&row.group, &change.key, row.id);
                    IncidentEvent::Opened
                }
                Event::Updated => {
                    store.update_incident(row)?;
                    continue;
                }
                Event::Closed => {
                    store.update_incident(row)?;
                    IncidentEvent::Closed
                }
            };
            log(&format!(
                "group {}: incident {} {}: device {} ({}), cause {}, {} deviation {:.2}, windows {}..{} (Unix ns)",
                row.group,
                row.id,
                match event {
                    IncidentEvent::Opened => "opened",
                    IncidentEvent::Closed => "closed",
                },
                row.device,
                row.program,
                row.cause,
                row.metric,
                row.deviation,
                row.first_window_unix_ns,
                row.last_window_unix_ns
            ));
            let alert = row.alert(event);
            if let Some(sink) = &self.sink {
                if !sink.offer(alert.clone()) {
                    log(&format!(
                        "incident {} {event:?}: the alert queue is full, alert dropped ({} so far)",
                        row.id,
                        sink.dropped()
                    ));
                }
            }
            alerts.push(alert);
        }
        Ok(alerts)
    }

    /// Reads the windows that started since the cursor into the analysis.
    fn read(&mut self, store: &mut dyn Store, now: u64) -> anyhow::Result<()> {
        let options = self.online.options();
        let since = self
            .cursor
            .unwrap_or_else(|| now.saturating_sub(ns(options.baseline)));
        let lateness = lateness(options);
        let rows = store.load(&RunFilter {
            kind: Some(Kind::Full),
            since_unix_ns: Some(since),
            until_unix_ns: Some(now.saturating_add(FUTURE_NS)),
            ..RunFilter::default()
        })?;
        // Decoded in place into the box the analysis keeps (a summary is
        // 34 KB: no copy of it by value).
        let mut summary = Box::new(Summary::empty());
        let mut undecodable = 0usize;
        let mut newest = None::<u64>;
        for row in rows {
            if Summary::decode_into(&row.raw, &mut summary).is_err() {
                undecodable += 1;
                continue;
            }
            if summary.run.window == 0 {
                continue;
            }
            newest = newest.max(Some(summary.run.start_unix_ns));
            // Repeats of the re-read margin and windows already judged
            // are left out by the analysis itself.
            let taken = std::mem::replace(&mut summary, Box::new(Summary::empty()));
            let _: Added = self.online.add(&row.group, taken);
        }
        if undecodable > 0 {
            log(&format!(
                "{undecodable} stored window(s) no longer decode: left out"
            ));
        }
        if let Some(newest) = newest {
            let next = newest.saturating_sub(lateness);
            self.cursor = Some(self.cursor.map_or(next, |c| c.max(next)));
        } else if self.cursor.is_none() {
            self.cursor = Some(since);
        }
        Ok(())
    }
}

fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Starts the live analysis on a thread of its own, with a store
/// connection of its own, for the life of the process.
pub fn start(
    open_store: StoreOpener,
    options: OnlineOptions,
    sink: Option<SinkQueue>,
) -> anyhow::Result<()> {
    options.check()?;
    let mut store = open_store()?;
    log(&format!(
        "on: every {:?}; baseline {:?} of fault-free windows per group; k {} of n {} (servers' bursts {}); hang after {:?}; incidents close after {:?} clean",
        options.tick,
        options.baseline,
        options.k,
        options.n,
        options.strong_k,
        options.hang_after,
        options.close_after
    ));
    let every = options.tick;
    let mut task = OnlineTask::new(options, sink);
    std::thread::Builder::new()
        .name("peers-online".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            if let Err(e) = task.tick(store.as_mut(), now_unix_ns()) {
                log(&format!("tick failed (trying again next tick): {e:#}"));
            }
        })?;
    Ok(())
}
