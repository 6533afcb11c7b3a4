//! The proactive loop's rows as the store keeps them: per-device
//! directives and the detector's reports. Their behaviour (validation,
//! the device's and the API's views) is `proactive`'s; the store only
//! needs their shape, so it does not depend on the loop.

use agent_core::DeviceId;
use serde_json::{json, Value};

/// The free fact a fully traced run carries to say which directive asked
/// for it (its value: the directive's id in decimal).
pub const DIRECTIVE_FACT: &str = "directive";

/// The directive a summary says it was traced for: its `directive` fact,
/// when that is a decimal id.
pub fn directive_of(facts: &agent_core::Facts) -> Option<i64> {
    let text = facts.get(DIRECTIVE_FACT)?;
    text.parse::<i64>().ok().filter(|id| *id > 0)
}

/// One per-device directive as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceDirective {
    /// Its id (the store's, from 1); 0 before it is stored.
    pub id: i64,
    pub group: String,
    pub device: DeviceId,
    /// Only runs of this program (the `program` fact); `None`: any.
    pub program: Option<String>,
    /// Only runs whose command line contains this text; `None`: any.
    pub match_text: Option<String>,
    /// Full runs asked for.
    pub runs: u32,
    pub expires_unix_ns: u64,
    pub created_unix_ns: u64,
    /// Full runs received so far carrying `directive=<id>` from the device.
    pub received: u32,
    /// Who issued it: `operator` or `detector`.
    pub issuer: String,
}

/// One device an investigation traced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportDevice {
    pub device: DeviceId,
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
    /// `slow` or `failing` (`proactive::reports::TRIGGER_*`).
    pub trigger: String,
    /// `diagnosed` or `failed` (`proactive::reports::STATUS_*`).
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
                        "device": d.device.to_string(),
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
                            device: d["device"].as_str()?.parse().ok()?,
                            cluster: d["cluster"].as_str()?.to_string(),
                            directive: d["directive"].as_str()?.parse().ok()?,
                            runs: u32::try_from(d["runs"].as_u64()?).ok()?,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}
