//! The JSON report: `{"devices": [{"device", "facts"}], "findings":
//! [{"device", "method", "cause", "metric", "first_window_unix_ns",
//! "last_window_unix_ns", "score", "evidence"}]}` (issue 15's shape), plus
//! `explained` (clients' findings set apart as a flagged server's
//! symptoms, each with `explained_by`), `notes`, `window_ns`,
//! `slice_windows` and `read` (what was taken and skipped).

use serde_json::{json as j, Map, Value};

use super::fact_pairs;
use crate::peers::{Finding, PeerDiagnosis};

/// The diagnosis as JSON.
pub fn json(d: &PeerDiagnosis) -> Value {
    let devices: Vec<Value> = d
        .devices
        .iter()
        .map(|dev| {
            let facts: Map<String, Value> = fact_pairs(&dev.facts)
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                .collect();
            j!({
                "device": dev.id.to_string(),
                "facts": facts,
                "role": if dev.is_server() { "server" } else { "client" },
                "training_windows": dev.windows[0],
                "diagnosis_windows": dev.windows[1],
            })
        })
        .collect();
    let finding = |f: &Finding| {
        j!({
            "device": d.devices[f.device].id.to_string(),
            "method": f.method.name(),
            "cause": f.cause.name(),
            "metric": f.metric,
            "first_window_unix_ns": f.first_window_unix_ns,
            "last_window_unix_ns": f.last_window_unix_ns,
            "score": if f.score.is_finite() { f.score } else { 0.0 },
            "evidence": f.evidence,
            "windows": f.windows.len(),
        })
    };
    let findings: Vec<Value> = d.findings.iter().map(finding).collect();
    let explained: Vec<Value> = d
        .explained
        .iter()
        .map(|e| {
            let mut v = finding(&e.finding);
            v["explained_by"] = Value::String(d.devices[e.by].id.to_string());
            v
        })
        .collect();
    let t = &d.tally;
    j!({
        "devices": devices,
        "findings": findings,
        "explained": explained,
        "notes": d.notes,
        "window_ns": d.window_ns,
        "slice_windows": d.slice_windows,
        "read": {
            "windows": t.windows,
            "skipped_no_device": t.no_device,
            "skipped_whole_runs": t.whole_runs,
            "skipped_other_length": t.other_length,
            "skipped_repeats": t.repeats,
            "skipped_outside": t.outside,
        },
    })
}
