//! Per-device directives: "trace the next N runs of program P matching
//! TEXT on this device, fully, until T". Set by the operator
//! (`edge-service directive device`) or by the detector; fetched by the
//! device with `GET /v1/directives?device=`; counted fulfilled at ingest
//! when `runs` full summaries from that device carry the fact
//! `directive=<id>`.

use agent_core::DeviceId;
use anyhow::bail;
use serde_json::{json, Value};

/// Most runs one directive may ask for (a directive is a short burst of
/// heavy tracing, not a way to trace a device for good).
pub const MAX_RUNS: u32 = 1000;

/// One per-device directive as stored (the row type lives with the store,
/// with the fact that ties a run to it).
pub use crate::store::{directive_of, DeviceDirective, DIRECTIVE_FACT};

impl DeviceDirective {
    /// Builds a directive from the operator's (or the detector's) words,
    /// validating each.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        group: &str,
        device: DeviceId,
        program: Option<&str>,
        match_text: Option<&str>,
        runs: u32,
        created_unix_ns: u64,
        expires_unix_ns: u64,
        issuer: &str,
    ) -> anyhow::Result<DeviceDirective> {
        if !crate::tokens::valid_group(group) {
            bail!(
                "group `{group}` cannot be named by any token: {}",
                crate::tokens::GROUP_RULE
            );
        }
        if device.is_zero() {
            bail!("--device must be a device id (32 hex digits, not all zero)");
        }
        for (name, text, max) in [
            ("--program", program, wire::directive::MAX_PROGRAM_NAME_LEN),
            ("--match", match_text, wire::directive::MAX_MATCH_LEN),
        ] {
            if let Some(t) = text {
                if t.is_empty() || t.chars().any(char::is_control) {
                    bail!("{name} must be non-empty text without control characters");
                }
                if t.len() > max {
                    bail!(
                        "{name} is {} bytes long; at most {max} (devices refuse a longer one)",
                        t.len()
                    );
                }
            }
        }
        if runs == 0 || runs > MAX_RUNS {
            bail!("--runs must be 1..={MAX_RUNS}");
        }
        if expires_unix_ns <= created_unix_ns {
            bail!("--expires must be in the future");
        }
        Ok(DeviceDirective {
            id: 0,
            group: group.to_string(),
            device,
            program: program.map(str::to_string),
            match_text: match_text.map(str::to_string),
            runs,
            expires_unix_ns,
            created_unix_ns,
            received: 0,
            issuer: issuer.to_string(),
        })
    }

    /// Whether the device should still act on it at `now`: not expired and
    /// not yet fulfilled.
    pub fn is_active(&self, now_unix_ns: u64) -> bool {
        now_unix_ns < self.expires_unix_ns && !self.is_fulfilled()
    }

    /// Whether every run asked for has been received.
    pub fn is_fulfilled(&self) -> bool {
        self.received >= self.runs
    }

    /// One entry of `device_directives` in `GET /v1/directives` (the
    /// contract between service and agent; `docs/service.md`).
    pub fn device_view(&self) -> wire::directive::DeviceDirective {
        wire::directive::DeviceDirective {
            id: self.id.to_string(),
            program: self.program.clone(),
            match_text: self.match_text.clone(),
            runs: self.runs,
            expires_unix_ns: self.expires_unix_ns,
        }
    }

    /// The operator's view (`directive device-list`): everything stored.
    pub fn full_view(&self) -> Value {
        json!({
            "id": self.id.to_string(),
            "group": self.group,
            "device": self.device.to_string(),
            "program": self.program,
            "match": self.match_text,
            "runs": self.runs,
            "received": self.received,
            "created_unix_ns": self.created_unix_ns,
            "expires_unix_ns": self.expires_unix_ns,
            "issuer": self.issuer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_and_reports_activity() {
        let d = DeviceDirective::new(
            "g",
            DeviceId([7; 16]),
            Some("wget"),
            None,
            2,
            10,
            20,
            "operator",
        )
        .unwrap();
        assert!(d.is_active(15));
        assert!(!d.is_active(20), "expired at its expiry");
        let done = DeviceDirective {
            received: 2,
            ..d.clone()
        };
        assert!(!done.is_active(15), "fulfilled");
        let view = serde_json::to_value(d.device_view()).unwrap();
        assert_eq!(view["program"], "wget");
        assert_eq!(view["match"], Value::Null);
        let err = |r: anyhow::Result<DeviceDirective>| format!("{:#}", r.unwrap_err());
        assert!(err(DeviceDirective::new(
            "g",
            DeviceId::ZERO,
            None,
            None,
            1,
            1,
            2,
            "o"
        ))
        .contains("device"));
        assert!(err(DeviceDirective::new(
            "g",
            DeviceId([1; 16]),
            None,
            None,
            0,
            1,
            2,
            "o"
        ))
        .contains("--runs"));
        assert!(err(DeviceDirective::new(
            "g",
            DeviceId([1; 16]),
            None,
            None,
            1,
            2,
            2,
            "o"
        ))
        .contains("future"));
        assert!(err(DeviceDirective::new(
            "a b",
            DeviceId([1; 16]),
            None,
            None,
            1,
            1,
            2,
            "o"
        ))
        .contains("group"));
        assert!(err(DeviceDirective::new(
            "g",
            DeviceId([1; 16]),
            Some(""),
            None,
            1,
            1,
            2,
            "o"
        ))
        .contains("--program"));
    }

    #[test]
    fn the_directive_fact_is_a_positive_decimal_id() {
        let mut facts = agent_core::Facts::new();
        assert_eq!(directive_of(&facts), None);
        facts.add(DIRECTIVE_FACT, "42").unwrap();
        assert_eq!(directive_of(&facts), Some(42));
        let mut bad = agent_core::Facts::new();
        bad.add(DIRECTIVE_FACT, "0x2a").unwrap();
        assert_eq!(directive_of(&bad), None);
    }
}
