//! The live peer analysis' incidents as the store keeps them: the fields
//! of the alert webhook's body (`wire::alert::IncidentAlert`) and the
//! evidence. The store only needs their shape; how incidents open and
//! close is `online`'s, so the store does not depend on the analysis.

use agent_core::DeviceId;
use serde_json::Value;
use wire::alert::{IncidentAlert, IncidentCause, IncidentEvent};

/// One incident as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct IncidentRow {
    /// The store's id (from 1); 0 before it is stored.
    pub id: i64,
    pub group: String,
    pub program: String,
    pub device: DeviceId,
    pub cause: IncidentCause,
    pub metric: String,
    pub deviation: f64,
    pub first_window_unix_ns: u64,
    pub last_window_unix_ns: u64,
    pub opened_unix_ns: u64,
    /// `None` while open.
    pub closed_unix_ns: Option<u64>,
    /// What the peers report draws for it (JSON: the method, its line of
    /// evidence, the flagged windows and the metric's series).
    pub evidence: Value,
}

/// Which incidents [`super::Store::incidents`] lists: one state (open or
/// closed) of a group, newest first (by id: the order they opened), at
/// most `limit`, older than `before_id` when given (the next page).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncidentFilter {
    /// Every group's when `None`.
    pub group: Option<String>,
    /// Open (`closed_unix_ns` NULL) or closed ones.
    pub open: bool,
    /// Only ids below this one.
    pub before_id: Option<i64>,
    pub limit: u64,
}

impl IncidentRow {
    /// The webhook's body for `event` (no web UI link: the sender adds it).
    pub fn alert(&self, event: IncidentEvent) -> IncidentAlert {
        IncidentAlert {
            event,
            id: self.id,
            group: self.group.clone(),
            program: self.program.clone(),
            device: self.device,
            cause: self.cause.clone(),
            metric: self.metric.clone(),
            deviation: self.deviation,
            first_window_unix_ns: self.first_window_unix_ns,
            last_window_unix_ns: self.last_window_unix_ns,
            opened_unix_ns: self.opened_unix_ns,
            closed_unix_ns: self.closed_unix_ns,
            url: None,
        }
    }
}

/// The `cause` and `errno` columns of a cause.
pub fn cause_columns(cause: &IncidentCause) -> (&'static str, Option<&str>) {
    (cause.kind(), cause.errno())
}

/// The cause the `cause` and `errno` columns hold; `None` for a kind this
/// build does not know (a newer build wrote it).
pub fn cause_of(kind: &str, errno: Option<String>) -> Option<IncidentCause> {
    IncidentCause::from_kind(kind, errno)
}
