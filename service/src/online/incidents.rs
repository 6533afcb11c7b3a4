//! Findings into incidents: a device's findings of one cause are one
//! incident, opened at the first tick that finds it (the methods' k-of-n
//! rule has already held it back until it persisted), extended while
//! findings keep flagging newer windows, and closed once the device has
//! been seen clean for `close_after` windows: an unbroken run of its own
//! windows that long after the last flagged one, and (a crash or a hang)
//! windows in which it made calls, not a silent device's empty windows. A
//! device that sends nothing is not clean: its incident stays open.

use std::collections::BTreeMap;

use agent_core::DeviceId;
use diagnose::peers::metrics::Cause;
use diagnose::peers::{Finding, PeerDiagnosis};
use serde_json::{json, Value};
use wire::alert::IncidentCause;

use crate::store::IncidentRow;

/// An incident's identity within a group: the device, its program, and
/// the cause (with its errno's name).
pub type Key = (DeviceId, String, String);

/// What happened to an incident at a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A finding opened it.
    Opened,
    /// Findings flagged newer windows (last window, deviation).
    Updated,
    /// Its device has been clean long enough.
    Closed,
}

/// One incident's change, with the incident as it now is.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub event: Event,
    pub key: Key,
    pub incident: IncidentRow,
}

/// The open incidents of one group.
#[derive(Debug, Default)]
pub struct Incidents {
    open: BTreeMap<Key, IncidentRow>,
    /// Per device, its latest unbroken runs of windows sent, and of
    /// windows in which it made calls: what tells it clean, or silent.
    seen: BTreeMap<DeviceId, Seen>,
    /// Hang and crash incidents closed lately: per (device, program), the
    /// first window index and that of the tick that closed it (see
    /// [`Outage`]).
    ended_outages: BTreeMap<(DeviceId, String), (u64, u64)>,
}

/// A hang or crash of one device of a program (open, found this tick, or
/// closed within `close_after` windows): failures that begin on the
/// program's other devices meanwhile are its consequences, not faults of
/// theirs. A client that gave up on the silent server, or finds its files
/// half made when it answers again, makes the other servers fail the
/// lookups it then sends (on the file-system fleet, `ENOENT` at two or
/// three of the other bricks as the hung one comes back), the propagation
/// the PVFS paper traces to the server where the failure began.
#[derive(Clone, Debug)]
struct Outage {
    device: DeviceId,
    program: String,
    /// Its first window index.
    first: u64,
    /// The last window index of its consequences (`u64::MAX` while open).
    until: u64,
}

/// Whether a finding of `cause` on a device of `program`, beginning
/// during or just after an outage of a device of `outage_program`, is the
/// outage's consequence: failures on its peers (the same program), or
/// slow calls on the devices of another program, its clients (a call that
/// waited on the stopped server ends, slow, as it answers again, and the
/// clients' calls queued behind it with it). A slow call on a peer, or a
/// second outage, is not: those are judged as ever.
fn is_consequence(cause: &IncidentCause, program: &str, outage_program: &str) -> bool {
    match cause {
        IncidentCause::Errno { .. } => program == outage_program,
        IncidentCause::Disk | IncidentCause::Network => program != outage_program,
        IncidentCause::Crash | IncidentCause::Hang => false,
    }
}

/// A device's latest runs of consecutive windows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Seen {
    sent: Option<Streak>,
    active: Option<Streak>,
}

/// Window indices `first..=last`, none missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Streak {
    first: u64,
    last: u64,
}

impl Streak {
    /// The streak after window `index` came: extended by the next window,
    /// begun anew after a gap. An older window (late, or repeated) changes
    /// nothing: a device whose windows come out of order is found clean a
    /// little later, never earlier.
    fn with(streak: Option<Streak>, index: u64) -> Streak {
        match streak {
            Some(s) if index <= s.last => s,
            Some(s) if index == s.last + 1 => Streak {
                first: s.first,
                last: index,
            },
            _ => Streak {
                first: index,
                last: index,
            },
        }
    }

    /// Whether these windows hold `close_after` clean ones after window
    /// `flagged`.
    fn clean_after(&self, flagged: u64, close_after: u64) -> bool {
        let from = self.first.max(flagged.saturating_add(1));
        self.last.saturating_add(1).saturating_sub(from) >= close_after
    }
}

/// The webhook's cause of a finding; `None` for the histogram method's
/// node isolation (`Cause::Unknown`): it opens no incident, because its
/// rule flags fault-free peers of synthetic and real fleets alike (one
/// `bind` or `socket` more than peers that made none is "beyond" them;
/// see the Hadoop issue's rework of the method), so it is logged only.
pub fn cause_of(finding: &Finding) -> Option<IncidentCause> {
    Some(match finding.cause {
        Cause::Disk => IncidentCause::Disk,
        Cause::Network => IncidentCause::Network,
        Cause::Errno => IncidentCause::Errno {
            name: finding.metric.clone(),
        },
        Cause::Crash => IncidentCause::Crash,
        Cause::Hang => IncidentCause::Hang,
        Cause::Unknown => return None,
    })
}

/// What the HTML report draws for a finding: the method, its line of
/// evidence, the flagged windows' starts, and (median) the metric's time
/// series in the finding's peer set: every device's mean service time,
/// the median and each device's threshold.
pub fn evidence(diagnosis: &PeerDiagnosis, finding: &Finding) -> Value {
    let device = &diagnosis.devices[finding.device];
    let series = diagnosis.series.iter().find(|s| {
        s.metric == finding.metric
            && s.devices.contains(&finding.device)
            && diagnosis
                .sets
                .iter()
                .any(|set| set.name() == s.program && set.program == device.program())
    });
    let start = |w: &u64| w.saturating_mul(diagnosis.window_ns);
    json!({
        "method": finding.method.name(),
        "evidence": finding.evidence,
        "score": finding.score,
        "flagged_windows_unix_ns": finding.windows.iter().map(start).collect::<Vec<_>>(),
        "window_ns": diagnosis.window_ns,
        "series": series.map(|s| json!({
            "program": s.program,
            "metric": s.metric,
            "devices": s.devices.iter().map(|d| diagnosis.devices[*d].id.to_string()).collect::<Vec<_>>(),
            "windows_unix_ns": s.windows.iter().map(start).collect::<Vec<_>>(),
            "values_ns": s.values,
            "median_ns": s.median,
            "thresholds_ns": s.thresholds,
        })),
    })
}

impl Incidents {
    /// The outages that explain failures elsewhere at this tick: the open
    /// hang and crash incidents, those found in `found`, and those closed
    /// less than `close_after` windows ago.
    fn outages(
        &self,
        found: &BTreeMap<Key, (u64, u64, &Finding, IncidentCause)>,
        window_ns: u64,
        close_after: u64,
    ) -> Vec<Outage> {
        let is_outage = |c: &IncidentCause| matches!(c, IncidentCause::Crash | IncidentCause::Hang);
        let open = self
            .open
            .iter()
            .filter(|(_, row)| is_outage(&row.cause))
            .map(|(k, row)| (k, row.first_window_unix_ns));
        let new = found
            .iter()
            .filter(|(_, e)| is_outage(&e.3))
            .map(|(k, e)| (k, e.0));
        let mut out: Vec<Outage> = open
            .chain(new)
            .map(|(k, first)| Outage {
                device: k.0,
                program: k.1.clone(),
                first: first / window_ns,
                until: u64::MAX,
            })
            .collect();
        out.extend(
            self.ended_outages
                .iter()
                .map(|((device, program), (first, closed))| Outage {
                    device: *device,
                    program: program.clone(),
                    first: *first,
                    until: closed.saturating_add(close_after),
                }),
        );
        out
    }

    /// The open incidents.
    pub fn open(&self) -> impl Iterator<Item = (&Key, &IncidentRow)> {
        self.open.iter()
    }

    /// Takes back an incident stored open by an earlier process.
    pub fn restore(&mut self, row: IncidentRow) {
        let key = (row.device, row.program.clone(), row.cause.to_string());
        self.open.insert(key, row);
    }

    /// Sets the store's id of an incident just opened.
    pub fn set_id(&mut self, key: &Key, id: i64) {
        if let Some(row) = self.open.get_mut(key) {
            row.id = id;
        }
    }

    /// Notes that `device` sent the window of index `window`, with calls
    /// in it or not.
    pub fn saw(&mut self, device: DeviceId, window: u64, active: bool) {
        let seen = self.seen.entry(device).or_default();
        seen.sent = Some(Streak::with(seen.sent, window));
        if active {
            seen.active = Some(Streak::with(seen.active, window));
        }
    }

    /// Applies one tick's diagnosis of `group`: `newest` is the newest
    /// window index held, `close_after` in windows, `now` the time of
    /// the tick. Findings whose last window is `close_after` or more
    /// before the newest are stale (still in the recent windows after the
    /// fault ended): they open nothing. Returns the changes, and a line
    /// per finding left out because it has no cause an incident takes.
    pub fn update(
        &mut self,
        group: &str,
        diagnosis: &PeerDiagnosis,
        newest: u64,
        close_after: u64,
        now: u64,
    ) -> (Vec<Change>, Vec<String>) {
        let window_ns = diagnosis.window_ns.max(1);
        let fresh = |last_ns: u64| newest.saturating_sub(last_ns / window_ns) < close_after;
        let mut notes = Vec::new();
        // Per key: the first and last windows of its findings, and the one
        // with the highest score (its metric and deviation are the alert's).
        let mut found: BTreeMap<Key, (u64, u64, &Finding, IncidentCause)> = BTreeMap::new();
        for f in &diagnosis.findings {
            if !fresh(f.last_window_unix_ns) {
                continue;
            }
            let device = &diagnosis.devices[f.device];
            let Some(cause) = cause_of(f) else {
                notes.push(format!(
                    "group {group}: {} finding on device {} ({}, {}) opens no incident: node isolation is logged only",
                    f.method.name(),
                    device.id,
                    device.program(),
                    f.metric
                ));
                continue;
            };
            let key = (device.id, device.program().to_string(), cause.to_string());
            let e = found.entry(key).or_insert((
                f.first_window_unix_ns,
                f.last_window_unix_ns,
                f,
                cause,
            ));
            e.0 = e.0.min(f.first_window_unix_ns);
            e.1 = e.1.max(f.last_window_unix_ns);
            if f.score > e.2.score {
                e.2 = f;
            }
        }
        let outages = self.outages(&found, window_ns, close_after);
        self.ended_outages
            .retain(|_, (_, closed)| closed.saturating_add(close_after) >= newest);
        let mut changes = Vec::new();
        for (key, (first, last, f, cause)) in found {
            if !self.open.contains_key(&key) {
                let (first_index, last_index) = (first / window_ns, last / window_ns);
                if let Some(o) = outages.iter().find(|o| {
                    o.device != key.0
                        && o.first <= last_index
                        && first_index <= o.until
                        && is_consequence(&cause, &key.1, &o.program)
                }) {
                    notes.push(format!(
                        "group {group}: {} on device {} ({}) began during or just after the hang or crash of device {}: taken for its consequence, no incident",
                        f.metric, key.0, key.1, o.device
                    ));
                    continue;
                }
            }
            match self.open.get_mut(&key) {
                Some(row) => {
                    if last > row.last_window_unix_ns || f.score > row.deviation {
                        row.last_window_unix_ns = row.last_window_unix_ns.max(last);
                        if f.score > row.deviation {
                            row.deviation = f.score;
                            row.metric = f.metric.clone();
                            row.evidence = evidence(diagnosis, f);
                        }
                        changes.push(Change {
                            event: Event::Updated,
                            key: key.clone(),
                            incident: row.clone(),
                        });
                    }
                }
                None => {
                    let row = IncidentRow {
                        id: 0,
                        group: group.to_string(),
                        program: key.1.clone(),
                        device: key.0,
                        cause,
                        metric: f.metric.clone(),
                        deviation: f.score,
                        first_window_unix_ns: first,
                        last_window_unix_ns: last,
                        opened_unix_ns: now,
                        closed_unix_ns: None,
                        evidence: evidence(diagnosis, f),
                    };
                    self.open.insert(key.clone(), row.clone());
                    changes.push(Change {
                        event: Event::Opened,
                        key,
                        incident: row,
                    });
                }
            }
        }
        changes.extend(self.close(window_ns, close_after, now));
        (changes, notes)
    }

    /// Closes, at `now`, the incidents whose device has been clean for
    /// `close_after` windows (of `window_ns`) after its last flagged
    /// window: that many consecutive windows of its own, and for a crash or
    /// a hang with calls in each (a hung server's agent still cuts empty
    /// windows).
    pub fn close(&mut self, window_ns: u64, close_after: u64, now: u64) -> Vec<Change> {
        let window_ns = window_ns.max(1);
        let seen = &self.seen;
        let closing: Vec<Key> = self
            .open
            .iter()
            .filter(|(_, row)| {
                let Some(seen) = seen.get(&row.device) else {
                    return false;
                };
                let streak = match row.cause {
                    IncidentCause::Crash | IncidentCause::Hang => seen.active,
                    _ => seen.sent,
                };
                streak.is_some_and(|s| {
                    s.clean_after(row.last_window_unix_ns / window_ns, close_after)
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut changes = Vec::new();
        for key in closing {
            if let Some(mut row) = self.open.remove(&key) {
                row.closed_unix_ns = Some(now);
                if matches!(row.cause, IncidentCause::Crash | IncidentCause::Hang) {
                    self.ended_outages.insert(
                        (row.device, row.program.clone()),
                        (row.first_window_unix_ns / window_ns, now / window_ns),
                    );
                }
                changes.push(Change {
                    event: Event::Closed,
                    key,
                    incident: row,
                });
            }
        }
        changes
    }
}
