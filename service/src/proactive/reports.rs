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

/// A stored report and the devices it traced (the row types live with
/// the store).
pub use crate::store::{Report, ReportDevice};

impl Report {
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
    use agent_core::DeviceId;

    #[test]
    fn devices_round_trip_through_json() {
        let devices = vec![ReportDevice {
            device: DeviceId([3; 16]),
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
