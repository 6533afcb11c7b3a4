//! The alerting's Prometheus series, served in the service's `/metrics`:
//!
//! - `edge_incidents_open{group, cause, errno}`: incidents open now
//!   (`cause`: `disk`, `network`, `errno`, `crash`, `hang`; `errno`: the
//!   errno's name for `cause="errno"`, else empty);
//! - `edge_alerts_sent_total`: webhook events a receiver accepted (2xx);
//! - `edge_alerts_failed_total`: attempts that failed and are retried
//!   (connection error, timeout, 5xx, 429);
//! - `edge_alerts_dropped_total{reason}`: events given up: `refused` (a
//!   receiver answered another 4xx, or a 3xx: not retried), `queue_full`
//!   (the oldest waiting event made room for a new one);
//! - `edge_alerts_queued`: events waiting to be sent, every webhook together.
//!
//! The open gauges follow incident ids, so a repeated `opened` or a
//! `closed` of an incident never seen changes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};
use wire::alert::IncidentAlert;

/// Why an event was given up (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The receiver refused it for good (a 4xx other than 429, a 3xx).
    Refused,
    /// The queue was full: the oldest waiting event made room.
    QueueFull,
}

impl DropReason {
    fn label(self) -> &'static str {
        match self {
            DropReason::Refused => "refused",
            DropReason::QueueFull => "queue_full",
        }
    }
}

/// The `group`, `cause`, `errno` labels of an incident.
type Labels = [String; 3];

fn labels_of(alert: &IncidentAlert) -> Labels {
    [
        alert.group.clone(),
        alert.cause.kind().to_string(),
        alert.cause.errno().unwrap_or_default().to_string(),
    ]
}

/// The alerting's series; cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct AlertMetrics {
    open: IntGaugeVec,
    /// The open incidents' labels, by incident id.
    open_ids: Arc<Mutex<HashMap<i64, Labels>>>,
    sent: IntCounter,
    failed: IntCounter,
    dropped: IntCounterVec,
    queued: IntGauge,
}

fn defined<T>(made: prometheus::Result<T>) -> T {
    made.expect("static metric definition")
}

impl AlertMetrics {
    /// Fresh series, all zero, registered in `registry`.
    pub(crate) fn register(registry: &Registry) -> AlertMetrics {
        let open = defined(IntGaugeVec::new(
            Opts::new(
                "edge_incidents_open",
                "Incidents open now, by group and cause (errno: the errno's name for cause errno)",
            ),
            &["group", "cause", "errno"],
        ));
        let sent = defined(IntCounter::new(
            "edge_alerts_sent_total",
            "Incident events a webhook receiver accepted (2xx)",
        ));
        let failed = defined(IntCounter::new(
            "edge_alerts_failed_total",
            "Webhook attempts that failed and are retried (connection error, timeout, 5xx, 429)",
        ));
        let dropped = defined(IntCounterVec::new(
            Opts::new(
                "edge_alerts_dropped_total",
                "Incident events given up, by reason (refused: a 4xx other than 429 or a 3xx; queue_full: the oldest waiting event made room)",
            ),
            &["reason"],
        ));
        for reason in [DropReason::Refused, DropReason::QueueFull] {
            dropped.with_label_values(&[reason.label()]);
        }
        let queued = defined(IntGauge::new(
            "edge_alerts_queued",
            "Incident events waiting to be sent to the webhooks",
        ));
        for c in [
            Box::new(open.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(sent.clone()),
            Box::new(failed.clone()),
            Box::new(dropped.clone()),
            Box::new(queued.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        AlertMetrics {
            open,
            open_ids: Arc::new(Mutex::new(HashMap::new())),
            sent,
            failed,
            dropped,
            queued,
        }
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Labels>> {
        // Every critical section leaves the map and the gauges consistent.
        self.open_ids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The incident of `alert` is open (counted once per id).
    pub fn opened(&self, alert: &IncidentAlert) {
        self.add_open(&mut self.ids(), alert);
    }

    /// Counts `alert`'s incident as open unless it is already.
    fn add_open(&self, ids: &mut HashMap<i64, Labels>, alert: &IncidentAlert) {
        if let std::collections::hash_map::Entry::Vacant(slot) = ids.entry(alert.id) {
            let labels = labels_of(alert);
            self.open.with_label_values(&labels).inc();
            slot.insert(labels);
        }
    }

    /// The incident of `alert` closed (nothing if it was not open).
    pub fn closed(&self, alert: &IncidentAlert) {
        if let Some(labels) = self.ids().remove(&alert.id) {
            self.open.with_label_values(&labels).dec();
        }
    }

    /// Replaces what is open by `open` (e.g. the incidents a new owner of
    /// the analysis finds open in the store); every group and cause seen
    /// before stays, at 0 if nothing of it is open.
    pub fn set_open(&self, open: &[IncidentAlert]) {
        let mut ids = self.ids();
        for labels in ids.values() {
            self.open.with_label_values(labels).set(0);
        }
        ids.clear();
        for alert in open {
            self.add_open(&mut ids, alert);
        }
    }

    /// Incidents open now, every group and cause together.
    pub fn open_count(&self) -> usize {
        self.ids().len()
    }

    pub(crate) fn count_sent(&self) {
        self.sent.inc();
    }

    pub(crate) fn count_failed(&self) {
        self.failed.inc();
    }

    pub(crate) fn count_dropped(&self, reason: DropReason) {
        self.dropped.with_label_values(&[reason.label()]).inc();
    }

    pub(crate) fn queued(&self) -> &IntGauge {
        &self.queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::DeviceId;
    use wire::alert::{IncidentCause, IncidentEvent};

    fn alert(id: i64, group: &str, cause: IncidentCause) -> IncidentAlert {
        IncidentAlert {
            event: IncidentEvent::Opened,
            id,
            group: group.into(),
            program: "glusterfsd".into(),
            device: DeviceId([id as u8; 16]),
            cause,
            metric: "read@file latency p90".into(),
            deviation: 4.0,
            first_window_unix_ns: 1,
            last_window_unix_ns: 2,
            opened_unix_ns: 3,
            closed_unix_ns: None,
            url: None,
        }
    }

    fn gauge(m: &AlertMetrics, group: &str, cause: &str, errno: &str) -> i64 {
        m.open.with_label_values(&[group, cause, errno]).get()
    }

    #[test]
    fn open_gauges_follow_incident_ids() {
        let m = AlertMetrics::register(&Registry::new());
        let disk = alert(1, "fleet", IncidentCause::Disk);
        let eio = alert(2, "fleet", IncidentCause::Errno { name: "EIO".into() });
        m.opened(&disk);
        m.opened(&disk);
        m.opened(&eio);
        m.opened(&alert(3, "fleet", IncidentCause::Disk));
        assert_eq!(gauge(&m, "fleet", "disk", ""), 2);
        assert_eq!(gauge(&m, "fleet", "errno", "EIO"), 1);
        m.closed(&disk);
        m.closed(&disk);
        m.closed(&alert(99, "fleet", IncidentCause::Disk));
        assert_eq!(gauge(&m, "fleet", "disk", ""), 1);
        m.set_open(&[alert(4, "other", IncidentCause::Hang)]);
        assert_eq!(gauge(&m, "fleet", "disk", ""), 0);
        assert_eq!(gauge(&m, "fleet", "errno", "EIO"), 0);
        assert_eq!(gauge(&m, "other", "hang", ""), 1);
        assert_eq!(m.open_count(), 1);
    }
}
