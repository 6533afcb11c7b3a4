//! The service's directives (`GET /v1/directives`) as `watch` applies
//! them: read again every few minutes by a thread of their own, so a slow
//! or unreachable service never holds up the tracer (whose tracees wait at
//! each stop), and turned into changes of the text `watch` matches.
//!
//! A directive has four fields (docs/service.md): `group`, `match`, `only`
//! and `window`. What `watch` does with each:
//! - `match`: while set, it replaces `--match` (the operator steers the
//!   fleet); when the service sets it back to null, `--match` applies
//!   again. Processes traced already stay traced until they end.
//! - `only`: not applied. It selects syscalls through a seccomp filter,
//!   which only a program started by the agent can get (`run --only`);
//!   `watch` attaches to running processes. Said once on stderr.
//! - `window`: the uploader's (when to send); `upload` reads it itself.
//! - `device_directives` (fetched with `?device=<id>`): the per-device
//!   directives, "trace the next N runs of P matching TEXT fully until T",
//!   which `watch` counts and applies (`light/directed.rs`). An entry that
//!   is not valid is skipped with a warning naming it; the others apply.
//!   Unknown fields are ignored.
//!
//! A fetch that fails keeps the last settings (a warning on stderr). So
//! does a body beyond the caps of `wire::directive` (more than
//! `MAX_BODY_BYTES`, a list longer than its cap: refused whole, never
//! truncated). The fetch, the parse and the shims' steering all happen on
//! the fetcher thread; the tracer thread only takes the parsed result.

use std::time::Duration;

use crate::light::DeviceDirective;

/// A directive as `watch` reads it: `wire`'s one reader's result (`only`,
/// `window` and `programs` are not watch's to apply).
pub use wire::directive::Received as Directive;

/// Parses a `GET /v1/directives` body by the contract of
/// `wire::directive::read` (untrusted: a body over the caps, a field of the
/// wrong type or a bad `match` text is an error naming it).
pub fn parse(json: &[u8]) -> Result<Directive, String> {
    wire::directive::read(json)
}

/// [`parse`], with what is wrong said on stderr: `None` for a body
/// refused whole (the previous directive stays in force), a line per
/// per-device entry skipped.
pub fn parse_reported(json: &[u8]) -> Option<Directive> {
    match parse(json) {
        Ok(directive) => {
            for why in &directive.skipped {
                eprintln!("edge-agent: ignoring a per-device directive: {why}");
            }
            Some(directive)
        }
        Err(why) => {
            eprintln!(
                "edge-agent: ignoring the service's directives (the previous ones stay in force): {why}"
            );
            None
        }
    }
}

/// What a fetch changes for `watch`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Update {
    /// The new text to match, when it changed.
    pub pattern: Option<String>,
    /// The per-device directives now (`None`: the body was refused, keep
    /// the last ones).
    pub device: Option<Vec<DeviceDirective>>,
}

/// What the directives fetched so far mean for `watch`.
#[derive(Debug)]
pub struct WatchSteering {
    /// `--match`, which applies while the service sets no `match`.
    given: String,
    /// The text `watch` matches now.
    current: String,
    /// `only` was reported as not applied (said once, not every fetch).
    told_only: bool,
}

impl WatchSteering {
    /// Steering that starts from `--match`.
    pub fn new(given: &str) -> WatchSteering {
        WatchSteering {
            given: given.to_string(),
            current: given.to_string(),
            told_only: false,
        }
    }

    /// The text `watch` matches now.
    pub fn current(&self) -> &str {
        &self.current
    }

    /// Takes a fetched body; returns the new text to match when it changed.
    /// A body that is not a valid directive changes nothing (a warning).
    pub fn apply(&mut self, json: &[u8]) -> Option<String> {
        self.apply_all(json).pattern
    }

    /// Takes a fetched body: the new text to match when it changed, and the
    /// per-device directives. A body that is not a valid directive changes
    /// nothing (a warning); a bad per-device entry is skipped (a warning).
    pub fn apply_all(&mut self, json: &[u8]) -> Update {
        match parse_reported(json) {
            Some(directive) => self.apply_parsed(directive),
            None => Update::default(),
        }
    }

    /// Takes a directive parsed already (by the fetcher thread: cheap, for
    /// the tracer thread): the new text to match when it changed, and the
    /// per-device directives.
    pub fn apply_parsed(&mut self, directive: Directive) -> Update {
        Update {
            pattern: self.take_match(&directive),
            device: Some(directive.device),
        }
    }

    fn take_match(&mut self, directive: &Directive) -> Option<String> {
        if directive.only.is_some() && !self.told_only {
            eprintln!(
                "edge-agent: the directive's `only` is not applied by watch (a seccomp filter can only be given to a program the agent starts: run --only)"
            );
            self.told_only = true;
        }
        let wanted = directive
            .match_text
            .clone()
            .unwrap_or_else(|| self.given.clone());
        if wanted == self.current {
            return None;
        }
        self.current = wanted.clone();
        Some(wanted)
    }
}

/// What the fetcher thread does with each body before parsing it (the
/// shims' steering).
#[cfg(feature = "upload")]
pub type BodyHook = Box<dyn FnMut(&[u8]) + Send>;

/// Fetches the directives every `every` on a thread of its own (the first
/// fetch at once), with this device's (`device`). On
/// that thread, each body (at most `wire::directive::MAX_BODY_BYTES`, read
/// by the client) is handed to `each_body` (the shims' steering), then
/// parsed; the directives that parse arrive on the returned channel, so the
/// tracer thread, whose tracees wait at each stop, never reads or parses a
/// body. The thread blocks SIGINT, SIGTERM and SIGALRM, which are the
/// tracer loop's (a signal the thread took would not interrupt the loop's
/// waitpid), and ends when the receiver is dropped.
#[cfg(feature = "upload")]
pub fn spawn_fetcher(
    client: uploader::transport::Client,
    every: Duration,
    device: Option<agent_core::DeviceId>,
    mut each_body: BodyHook,
) -> std::io::Result<std::sync::mpsc::Receiver<Directive>> {
    let (tx, rx) = std::sync::mpsc::channel();
    crate::signals::spawn_quiet_thread("directives", move || loop {
        match client.fetch_directives_for(device.as_ref()) {
            Ok(json) => {
                each_body(&json);
                if let Some(directive) = parse_reported(&json) {
                    if tx.send(directive).is_err() {
                        return;
                    }
                }
            }
            Err(e) => eprintln!("edge-agent: directives not updated: {e}"),
        }
        std::thread::sleep(every);
    })
    .map(|_| rx)
}

/// Most time between two directive fetches accepted on the command line.
pub const MAX_EVERY: Duration = Duration::from_secs(24 * 3600);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_and_checked() {
        let d = parse(br#"{"group":"g","match":"nginx","only":["read"],"window":null}"#).unwrap();
        assert_eq!(d.match_text.as_deref(), Some("nginx"));
        assert_eq!(d.only, Some(vec!["read".to_string()]));
        assert_eq!(parse(br#"{"group":"g"}"#).unwrap(), Directive::default());
        assert!(parse(br#"{"device_directives": {}}"#).is_err());
        for bad in [
            &br#"[]"#[..],
            br#"{"match": 3}"#,
            br#"{"match": ""}"#,
            br#"{"match": "a\nb"}"#,
            br#"{"only": "read"}"#,
            br#"{"only": [1]}"#,
            b"not json",
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        let long = format!(
            r#"{{"match": "{}"}}"#,
            "x".repeat(wire::directive::MAX_MATCH_LEN + 1)
        );
        assert!(parse(long.as_bytes()).is_err());
    }

    #[test]
    fn bodies_over_the_caps_are_refused_whole_and_the_last_directive_stays() {
        let mut s = WatchSteering::new("given");
        assert_eq!(s.apply(br#"{"match": "first"}"#), Some("first".into()));
        // The issue's body: 90 000 programs, 990 KB.
        let programs: Vec<String> = (0..90_000).map(|i| format!("pr{i:06}")).collect();
        let huge = serde_json::json!({"match": "second", "programs": programs}).to_string();
        assert!(huge.len() > 900_000);
        let err = parse(huge.as_bytes()).unwrap_err();
        assert!(err.contains("at most 262144 are read"), "{err}");
        assert_eq!(s.apply(huge.as_bytes()), None);
        assert_eq!(s.current(), "first", "the earlier directive stays");
        // Small bodies with a list over its cap.
        let programs: Vec<String> = (0..=wire::directive::MAX_PROGRAMS)
            .map(|i| format!("p{i}"))
            .collect();
        let many = serde_json::json!({"match": "second", "programs": programs}).to_string();
        assert!(parse(many.as_bytes())
            .unwrap_err()
            .contains("`programs` has 65 entries"));
        let entries = vec![
            serde_json::json!({"id": "1", "runs": 1, "expires_unix_ns": 9});
            wire::directive::MAX_DEVICE_DIRECTIVES + 1
        ];
        let many = serde_json::json!({ "device_directives": entries }).to_string();
        assert!(parse(many.as_bytes())
            .unwrap_err()
            .contains("`device_directives` has 17"));
        let long = "x".repeat(wire::directive::MAX_PROGRAM_NAME_LEN + 1);
        let one = serde_json::json!({"device_directives": [
            {"id": "1", "program": long, "runs": 1, "expires_unix_ns": 9}
        ]})
        .to_string();
        assert!(parse(one.as_bytes()).is_err());
        assert_eq!(s.apply(many.as_bytes()), None);
        assert_eq!(s.current(), "first");
    }

    #[test]
    fn match_steers_and_falls_back_to_the_command_line() {
        let mut s = WatchSteering::new("given");
        assert_eq!(s.apply(br#"{"match": null}"#), None, "no change");
        assert_eq!(s.apply(br#"{"match": "nginx"}"#), Some("nginx".into()));
        assert_eq!(s.apply(br#"{"match": "nginx"}"#), None, "same again");
        assert_eq!(s.current(), "nginx");
        assert_eq!(s.apply(b"garbage"), None, "a bad body keeps the setting");
        assert_eq!(s.current(), "nginx");
        assert_eq!(s.apply(br#"{"match": null}"#), Some("given".into()));
        assert_eq!(s.current(), "given");
    }

    #[test]
    fn device_directives_are_read_and_bad_entries_skipped_by_name() {
        let d = parse(
            br#"{"group": "g", "match": null, "future": 1, "device_directives": [
                {"id": "00ff00ff00ff00ff", "program": "wget", "match": "host", "runs": 5,
                 "expires_unix_ns": 123, "extra": true},
                {"id": 42, "program": null, "runs": 1, "expires_unix_ns": 9},
                {"id": "a b", "runs": 1, "expires_unix_ns": 9},
                {"id": "x", "runs": 0, "expires_unix_ns": 9},
                {"id": "y", "runs": 1},
                {"id": "z", "runs": 1, "expires_unix_ns": -4},
                {"id": "w", "program": "", "runs": 1, "expires_unix_ns": 9},
                "nonsense"
            ]}"#,
        )
        .unwrap();
        assert_eq!(
            d.device,
            vec![
                DeviceDirective {
                    id: "00ff00ff00ff00ff".into(),
                    program: Some("wget".into()),
                    match_text: Some("host".into()),
                    runs: 5,
                    expires_unix_ns: 123,
                },
                DeviceDirective {
                    id: "42".into(),
                    program: None,
                    match_text: None,
                    runs: 1,
                    expires_unix_ns: 9,
                },
            ]
        );
        let skipped = d.skipped.join("\n");
        for (i, why) in [
            (2, "`id` must be"),
            (3, "`runs` must be 1"),
            (4, "no `expires_unix_ns`"),
            (5, "`expires_unix_ns` is not a whole number"),
            (6, "`program` must be 1"),
            (7, "not a JSON object"),
        ] {
            assert!(
                skipped.contains(&format!("device_directives[{i}]: {why}")),
                "{i} {why}: {skipped}"
            );
        }
        let mut s = WatchSteering::new("given");
        let u = s
            .apply_all(br#"{"device_directives": [{"id": "1", "runs": 2, "expires_unix_ns": 5}]}"#);
        assert_eq!(u.pattern, None);
        assert_eq!(u.device.map(|d| d.len()), Some(1));
        assert_eq!(
            s.apply_all(b"[]").device,
            None,
            "a refused body keeps the last"
        );
    }
}
