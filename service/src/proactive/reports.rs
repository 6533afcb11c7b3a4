//! The detector's stored reports: what triggered an investigation, the
//! devices it traced, and the diagnosis in three forms (text, JSON, HTML),
//! served by `GET /v1/reports` and `GET /v1/reports/{id}`.

use serde_json::{json, Value};

/// Why the detector investigated.
pub const TRIGGER_SLOW: &str = "slow";
/// Failing runs (non-zero exit or a signal).
pub const TRIGGER_FAILING: &str = "failing";

/// The investigation ended in a diagnosis.
pub const STATUS_DIAGNOSED: &str = "diagnosed";
/// It ended without one (too few runs came back, the diagnosis refused
/// them); `text` says why.
pub const STATUS_FAILED: &str = "failed";

/// One device an investigation traced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportDevice {
    pub device: [u8; 16],
    /// `slow`, `failing` or `good`: the cluster it was picked from.
    pub cluster: String,
    /// The directive issued to it.
    pub directive: i64,
    /// Full runs received from it.
    pub runs: u32,
}

/// A stored report.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The store's id (from 1); 0 before it is stored.
    pub id: i64,
    pub group: String,
    pub program: String,
    /// [`TRIGGER_SLOW`] or [`TRIGGER_FAILING`].
    pub trigger: String,
    /// [`STATUS_DIAGNOSED`] or [`STATUS_FAILED`].
    pub status: String,
    /// When the detector first saw the cluster.
    pub detected_unix_ns: u64,
    /// When the report was stored.
    pub created_unix_ns: u64,
    /// The cluster in words (sizes, ranges), as logged.
    pub cluster: String,
    pub devices: Vec<ReportDevice>,
    /// The first rule in words, or why there is none.
    pub headline: String,
    /// The diagnosis as `edge-service diagnose` prints it.
    pub text: String,
    /// As `diagnose --json` prints it (`Null` when it failed).
    pub json: Value,
    /// As `diagnose --html` writes it (empty when it failed).
    pub html: String,
}

impl Report {
    /// The devices as stored (JSON text).
    pub fn devices_json(&self) -> Value {
        Value::Array(
            self.devices
                .iter()
                .map(|d| {
                    json!({
                        "device": summary_view::id_hex(&d.device),
                        "cluster": d.cluster,
                        "directive": d.directive.to_string(),
                        "runs": d.runs,
                    })
                })
                .collect(),
        )
    }

    /// Reads the stored devices back; entries that do not parse are left
    /// out (the store only holds what [`Report::devices_json`] wrote).
    pub fn devices_from_json(value: &Value) -> Vec<ReportDevice> {
        value
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|d| {
                        Some(ReportDevice {
                            device: summary_view::id_from_hex(d["device"].as_str()?)?,
                            cluster: d["cluster"].as_str()?.to_string(),
                            directive: d["directive"].as_str()?.parse().ok()?,
                            runs: u32::try_from(d["runs"].as_u64()?).ok()?,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One entry of `GET /v1/reports`: everything but the bodies.
    pub fn summary_view(&self) -> Value {
        json!({
            "id": self.id.to_string(),
            "group": self.group,
            "program": self.program,
            "trigger": self.trigger,
            "status": self.status,
            "detected_unix_ns": self.detected_unix_ns,
            "created_unix_ns": self.created_unix_ns,
            "cluster": self.cluster,
            "devices": self.devices_json(),
            "headline": self.headline,
        })
    }

    /// `GET /v1/reports/{id}`: the summary with the three bodies.
    pub fn full_view(&self) -> Value {
        let mut v = self.summary_view();
        v["text"] = json!(self.text);
        v["json"] = self.json.clone();
        v["html"] = json!(self.html);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_round_trip_through_json() {
        let devices = vec![ReportDevice {
            device: [3; 16],
            cluster: "slow".into(),
            directive: 12,
            runs: 2,
        }];
        let r = Report {
            id: 1,
            group: "g".into(),
            program: "wget".into(),
            trigger: TRIGGER_SLOW.into(),
            status: STATUS_DIAGNOSED.into(),
            detected_unix_ns: 1,
            created_unix_ns: 2,
            cluster: String::new(),
            devices: devices.clone(),
            headline: String::new(),
            text: "t".into(),
            json: Value::Null,
            html: String::new(),
        };
        assert_eq!(Report::devices_from_json(&r.devices_json()), devices);
        assert!(r.summary_view().get("text").is_none());
        assert_eq!(r.full_view()["text"], "t");
    }
}
