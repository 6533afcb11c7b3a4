//! The body of the service's alert webhook (`serve --alert-webhook URL`):
//! one POST per incident event, opened or closed, sent by the live peer
//! analysis (`docs/peers.md`, "Online"). Receivers (Alertmanager's webhook
//! adapters, PagerDuty/Slack relays, the tests' receiver) read this struct.

use agent_core::DeviceId;
use serde::{Deserialize, Serialize};

/// What happened to the incident.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IncidentEvent {
    /// A finding persisted k of n windows: the incident is open.
    Opened,
    /// Its device has been clean long enough: the incident is closed.
    Closed,
}

/// Why a peer was flagged: the research's fault classes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IncidentCause {
    /// Its storage calls are slower than its peers' (a disk hog, a slow disk).
    Disk,
    /// Its network calls are slower than its peers' (packet loss, a slow link).
    Network,
    /// It returns an error its peers do not (`name`: the errno's name, e.g. `EIO`).
    Errno {
        /// The errno's name.
        name: String,
    },
    /// Its program ended by a signal or vanished while peers kept running.
    Crash,
    /// It stopped answering while its clients wait on it.
    Hang,
}

impl IncidentCause {
    /// The cause's kind as the body's `kind` names it (`disk`, `errno`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            IncidentCause::Disk => "disk",
            IncidentCause::Network => "network",
            IncidentCause::Errno { .. } => "errno",
            IncidentCause::Crash => "crash",
            IncidentCause::Hang => "hang",
        }
    }

    /// The errno's name of an errno cause.
    pub fn errno(&self) -> Option<&str> {
        match self {
            IncidentCause::Errno { name } => Some(name),
            _ => None,
        }
    }

    /// The kind read back (`errno`: with its name); `None` for a kind this
    /// build does not know (a newer build wrote it).
    pub fn from_kind(kind: &str, errno: Option<String>) -> Option<IncidentCause> {
        Some(match kind {
            "disk" => IncidentCause::Disk,
            "network" => IncidentCause::Network,
            "errno" => IncidentCause::Errno {
                name: errno.unwrap_or_default(),
            },
            "crash" => IncidentCause::Crash,
            "hang" => IncidentCause::Hang,
            _ => return None,
        })
    }
}

/// `disk`, `network`, ... and `errno EIO`: how logs and pages name it.
impl std::fmt::Display for IncidentCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.errno() {
            Some(name) => write!(f, "errno {name}"),
            None => f.write_str(self.kind()),
        }
    }
}

/// One webhook POST: an incident opened or closed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IncidentAlert {
    /// `opened` or `closed`.
    pub event: IncidentEvent,
    /// The incident's id in the service's store (stable across its events).
    pub id: i64,
    /// The group of the devices compared.
    pub group: String,
    /// The program whose windows were compared.
    pub program: String,
    /// The culprit device.
    pub device: DeviceId,
    /// Why it was flagged.
    pub cause: IncidentCause,
    /// The metric that deviates (e.g. `read@file latency p90`).
    pub metric: String,
    /// How far the device was from its peers, in the method's own unit
    /// (e.g. a ratio to the peers' median, or a histogram distance).
    pub deviation: f64,
    /// Start of the first window that flagged it (Unix ns).
    pub first_window_unix_ns: u64,
    /// Start of the last window that flagged it (Unix ns).
    pub last_window_unix_ns: u64,
    /// When the service opened the incident (Unix ns).
    pub opened_unix_ns: u64,
    /// When it closed (Unix ns); `None` while open.
    pub closed_unix_ns: Option<u64>,
    /// A link to the incident's page in the web UI, when the service knows
    /// its own public address.
    #[serde(default)]
    pub url: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_reads_back_and_names_its_fields_as_documented() {
        let alert = IncidentAlert {
            event: IncidentEvent::Opened,
            id: 7,
            group: "fleet".into(),
            program: "glusterfsd".into(),
            device: DeviceId([1; 16]),
            cause: IncidentCause::Errno { name: "EIO".into() },
            metric: "read@file errors".into(),
            deviation: 3.5,
            first_window_unix_ns: 1,
            last_window_unix_ns: 2,
            opened_unix_ns: 3,
            closed_unix_ns: None,
            url: None,
        };
        let json = serde_json::to_value(&alert).unwrap();
        assert_eq!(json["event"], "opened");
        assert_eq!(json["cause"]["kind"], "errno");
        assert_eq!(json["cause"]["name"], "EIO");
        let back: IncidentAlert = serde_json::from_value(json).unwrap();
        assert_eq!(back, alert);
        let disk = serde_json::to_value(IncidentCause::Disk).unwrap();
        assert_eq!(disk, serde_json::json!({"kind": "disk"}));
    }

    #[test]
    fn every_cause_reads_back_from_its_kind_as_serde_names_it() {
        let causes = [
            IncidentCause::Disk,
            IncidentCause::Network,
            IncidentCause::Errno { name: "EIO".into() },
            IncidentCause::Crash,
            IncidentCause::Hang,
        ];
        for cause in causes {
            let json = serde_json::to_value(&cause).unwrap();
            assert_eq!(json["kind"], cause.kind());
            let errno = cause.errno().map(str::to_string);
            assert_eq!(IncidentCause::from_kind(cause.kind(), errno), Some(cause));
        }
        assert_eq!(IncidentCause::from_kind("meteor", None), None);
        assert_eq!(
            IncidentCause::Errno {
                name: "ENOSPC".into()
            }
            .to_string(),
            "errno ENOSPC"
        );
        assert_eq!(IncidentCause::Hang.to_string(), "hang");
    }
}
