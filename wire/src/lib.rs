//! The JSON bodies of the service's HTTP API (`docs/service.md`), as typed
//! structs that the service serializes and the devices, tests and tools
//! read: one contract, no hand-built or hand-walked JSON on either side.
//! [`directive`] is the body a device acts on (its one reader, its caps),
//! [`window`] the daily upload window's rule, [`alert`] the webhook's
//! body for an incident opened or closed. The binary upload body is
//! `agent_core::framing`.

use agent_core::{DeviceId, RunId, StreamId};
use serde::{Deserialize, Serialize};

pub mod alert;
pub mod directive;
pub mod window;

/// The answer to `POST /v1/summaries`: which items are durably stored and
/// which are refused for good.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    /// Ids (32 lowercase hex digits) stored now or before.
    pub accepted: Vec<RunId>,
    /// Items refused for good, by index in the request, in index order.
    #[serde(default)]
    pub rejected: Vec<Rejected>,
}

/// One refused item of a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    /// Its index in the request body.
    pub index: usize,
    /// Its summary id, when it decoded that far.
    pub id: Option<RunId>,
    /// Why, for a person.
    pub reason: String,
}

/// The body of every error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What was wrong, for a person.
    pub error: String,
}

/// The answer to `GET /v1/runs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunList {
    /// The runs, oldest first.
    pub runs: Vec<RunView>,
}

fn full_kind() -> String {
    "full".to_string()
}

/// One run as `GET /v1/runs` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    /// The summary id, 32 lowercase hex digits.
    pub id: RunId,
    /// The group of the token that uploaded it.
    pub group: String,
    /// `full` (a trace) or `light` (a light record: no syscalls); servers
    /// before summary format 3 send none: full.
    #[serde(default = "full_kind")]
    pub kind: String,
    /// The program fact.
    pub program: String,
    /// Start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Duration, ns.
    pub duration_ns: u64,
    /// How the program ended: `"running"`, `"detached"`, `{"code": N}` or
    /// `{"signal": N}` (`docs/summary-json.md`).
    pub exit: serde_json::Value,
    /// The traced program's ABI.
    pub arch: String,
    /// Processes seen.
    pub processes: u32,
    /// Threads seen.
    pub threads: u32,
    /// Syscalls seen.
    pub events: u64,
    /// Window index (0 for a whole run; 1, 2, ... for the windows of a
    /// stream).
    pub window: u32,
    /// The device's id, 32 lowercase hex digits; `None` when the summary did
    /// not carry one (format version 1).
    #[serde(default)]
    pub device: Option<DeviceId>,
    /// The stream (the traced run its windows share), 32 lowercase hex
    /// digits; `None` when not known.
    #[serde(default)]
    pub stream: Option<StreamId>,
    /// The window length, ns; 0 for a whole run.
    #[serde(default)]
    pub window_ns: u64,
    /// User-mode CPU time of the traced processes, ns; `None`: not measured.
    #[serde(default)]
    pub cpu_user_ns: Option<u64>,
    /// Kernel-mode CPU time of the traced processes, ns; `None`: not
    /// measured.
    #[serde(default)]
    pub cpu_system_ns: Option<u64>,
    /// Calls in flight when the summary was cut.
    #[serde(default)]
    pub in_flight: u32,
    /// Summaries the device's spool dropped before this one.
    pub spool_dropped: u32,
    /// Whether entries were folded to fit the size cap.
    pub truncated: bool,
    /// The run's facts, key to value.
    pub facts: serde_json::Value,
    /// When the service stored it, ns since the Unix epoch.
    pub received_unix_ns: u64,
}

/// The answer to `GET /v1/devices`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceList {
    /// The devices, most recently seen first.
    pub devices: Vec<DeviceView>,
}

/// One device as `GET /v1/devices` lists it: what its runs of one group
/// say about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceView {
    /// The device's id, 32 lowercase hex digits.
    pub device: DeviceId,
    /// The group its runs were uploaded to.
    pub group: String,
    /// When the service stored its first run, ns since the Unix epoch.
    pub first_seen_unix_ns: u64,
    /// When the service stored its latest run, ns since the Unix epoch.
    pub last_seen_unix_ns: u64,
    /// Start of its most recent run or window, ns since the Unix epoch.
    pub last_start_unix_ns: u64,
    /// The program of that run.
    pub last_program: String,
    /// The facts of that run (os, kernel, model, agent version, ...), in
    /// the shape of `GET /v1/runs`.
    pub facts: serde_json::Value,
    /// Whole runs stored (window index 0).
    pub runs: u64,
    /// Windows stored (window index 1 and up).
    pub windows: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_round_trips_and_rejected_may_be_absent() {
        let ack = Ack {
            accepted: vec![RunId([0xab; 16])],
            rejected: vec![Rejected {
                index: 1,
                id: None,
                reason: "truncated".into(),
            }],
        };
        let text = serde_json::to_string(&ack).unwrap();
        assert_eq!(serde_json::from_str::<Ack>(&text).unwrap(), ack);
        let bare: Ack = serde_json::from_str(r#"{"accepted": []}"#).unwrap();
        assert!(bare.rejected.is_empty());
        assert!(
            serde_json::from_str::<Ack>("{}").is_err(),
            "accepted is required"
        );
    }

    #[test]
    fn ids_are_the_same_hex_text_as_before_the_newtypes() {
        // Before, the bodies held the ids as Strings of 32 lowercase hex
        // digits: the JSON must not change.
        let ack = Ack {
            accepted: vec![RunId([0xab; 16])],
            rejected: vec![Rejected {
                index: 0,
                id: Some(RunId([0x01; 16])),
                reason: "r".into(),
            }],
        };
        let before = AckAsText {
            accepted: vec!["ab".repeat(16)],
            rejected: vec![RejectedAsText {
                index: 0,
                id: Some("01".repeat(16)),
                reason: "r".into(),
            }],
        };
        let text = serde_json::to_string(&ack).unwrap();
        assert_eq!(text, serde_json::to_string(&before).unwrap());
        assert_eq!(
            text,
            r#"{"accepted":["abababababababababababababababab"],"rejected":[{"index":0,"id":"01010101010101010101010101010101","reason":"r"}]}"#
        );
        let device = serde_json::to_value(Some(DeviceId([0xd1; 16]))).unwrap();
        assert_eq!(device, serde_json::json!("d1".repeat(16)));
        let stream: Option<StreamId> = None;
        assert_eq!(
            serde_json::to_value(stream).unwrap(),
            serde_json::Value::Null
        );
        // Upper case is read as the service reads ids in its URLs.
        let upper: RunId = serde_json::from_str(&format!("\"{}\"", "AB".repeat(16))).unwrap();
        assert_eq!(upper, RunId([0xab; 16]));
    }

    #[test]
    fn a_malformed_id_is_refused_naming_what_was_wrong() {
        for (json, why) in [
            (
                r#"{"accepted": ["abab"]}"#,
                "4 characters instead of 32 hex digits",
            ),
            (
                r#"{"accepted": ["zbabababababababababababababababab"]}"#,
                "34 characters",
            ),
            (
                r#"{"accepted": ["abababababababababababababababaz"]}"#,
                "not a hex digit at position 31",
            ),
            (r#"{"accepted": [17]}"#, "a run id"),
        ] {
            let err = serde_json::from_str::<Ack>(json).unwrap_err().to_string();
            assert!(err.contains(why), "{json}: {err}");
        }
    }

    /// `Ack` as it was, with ids as text.
    #[derive(Serialize)]
    struct AckAsText {
        accepted: Vec<String>,
        rejected: Vec<RejectedAsText>,
    }

    #[derive(Serialize)]
    struct RejectedAsText {
        index: usize,
        id: Option<String>,
        reason: String,
    }
}
