//! Findings into incidents: a device's findings of one cause are one
//! incident, opened at the first tick that finds it (the methods' k-of-n
//! rule has already held it back until it persisted), extended while
//! findings keep flagging newer windows, and closed once the device has
//! not been flagged for `close_after` windows.

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
}

/// The webhook's cause of a finding; `None` for node isolation
/// (`Cause::Unknown`), which the alert body has no word for.
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

fn cause_key(cause: &IncidentCause) -> String {
    match cause {
        IncidentCause::Errno { name } => format!("errno {name}"),
        other => crate::store::cause_columns(other).0.to_string(),
    }
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
    /// The open incidents.
    pub fn open(&self) -> impl Iterator<Item = (&Key, &IncidentRow)> {
        self.open.iter()
    }

    /// Takes back an incident stored open by an earlier process.
    pub fn restore(&mut self, row: IncidentRow) {
        let key = (row.device, row.program.clone(), cause_key(&row.cause));
        self.open.insert(key, row);
    }

    /// Sets the store's id of an incident just opened.
    pub fn set_id(&mut self, key: &Key, id: i64) {
        if let Some(row) = self.open.get_mut(key) {
            row.id = id;
        }
    }

    /// Applies one tick's diagnosis of `group`: `newest` is the newest
    /// window index held, `close_after` in windows, `now` the time of
    /// the tick. Findings whose last window is `close_after` or more
    /// before the newest are stale (still in the recent windows after the
    /// fault ended): they open nothing. Returns the changes, and a line
    /// per finding left out because the alert has no cause for it.
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
                    "group {group}: {} finding on device {} ({}, {}) opens no incident: the alert has no cause for node isolation",
                    f.method.name(),
                    device.id,
                    device.program(),
                    f.metric
                ));
                continue;
            };
            let key = (device.id, device.program().to_string(), cause_key(&cause));
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
        let mut changes = Vec::new();
        for (key, (first, last, f, cause)) in found {
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
        changes.extend(self.close(newest, window_ns, close_after, now));
        (changes, notes)
    }

    /// Closes the incidents whose last flagged window is `close_after`
    /// windows (of `window_ns`) or more before `newest`, at `now`.
    pub fn close(
        &mut self,
        newest: u64,
        window_ns: u64,
        close_after: u64,
        now: u64,
    ) -> Vec<Change> {
        let window_ns = window_ns.max(1);
        let closing: Vec<Key> = self
            .open
            .iter()
            .filter(|(_, row)| {
                newest.saturating_sub(row.last_window_unix_ns / window_ns) >= close_after
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut changes = Vec::new();
        for key in closing {
            if let Some(mut row) = self.open.remove(&key) {
                row.closed_unix_ns = Some(now);
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
