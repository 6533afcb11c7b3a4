//! The body of `GET /v1/directives`: [`Directives`], which the service
//! writes, and [`read`], the one reader every part of the device uses (the
//! watch's fetcher, the shims' steering, the uploader's window), with the
//! caps below. The service refuses to store or send more than the caps,
//! and [`read`] refuses a body beyond them before acting on any of it, so
//! a broken or hostile service cannot make a device spend time or memory
//! in proportion to what it sends.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::window::DailyWindow;

/// The most bytes of a directive body a device reads; a longer body is
/// refused whole (the previous directive stays in force). Everything the
/// other caps allow fits in it several times over.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Longest `match` text (of the directive or of a per-device one): a
/// command line is at most a few pages.
pub const MAX_MATCH_LEN: usize = 4096;

/// Most syscall names in `only`.
pub const MAX_ONLY: usize = 512;

/// Longest syscall name in `only`.
pub const MAX_SYSCALL_NAME_LEN: usize = 64;

/// Most program names in `programs`: each is a file on every device.
pub const MAX_PROGRAMS: usize = 64;

/// Longest program name (in `programs`, and a per-device directive's
/// `program`): a file name (`agent_core::MAX_PROGRAM_NAME_LEN`).
pub const MAX_PROGRAM_NAME_LEN: usize = 255;

/// Longest `window` text (`HH:MM-HH:MM`).
pub const MAX_WINDOW_LEN: usize = 11;

/// Most entries of `device_directives` one body carries.
pub const MAX_DEVICE_DIRECTIVES: usize = 16;

/// Longest per-device directive id (the `directive` fact's value).
pub const MAX_DIRECTIVE_ID_LEN: usize = 40;

/// Most runs one per-device directive may ask for.
pub const MAX_DIRECTED_RUNS: u64 = 10_000;

/// What the devices of one group should trace, as the service stores it
/// and sends it: a `None` field leaves the device's own setting alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDirective {
    /// The device group.
    pub group: String,
    /// Trace only programs whose command line contains this text.
    #[serde(rename = "match")]
    pub match_text: Option<String>,
    /// Trace only these syscalls (canonical names).
    pub only: Option<Vec<String>>,
    /// Upload only inside this daily window, `HH:MM-HH:MM` ([`DailyWindow`],
    /// device local time).
    pub window: Option<String>,
    /// Programs to shim, on devices that opted in (`edge-agent watch
    /// --shim-dir DIR`): each gets a shim in DIR, so its runs are traced
    /// from their first syscall.
    pub programs: Option<Vec<String>>,
}

impl GroupDirective {
    /// The directive of a group nobody configured: everything left to the
    /// device.
    pub fn empty(group: &str) -> GroupDirective {
        GroupDirective {
            group: group.to_string(),
            ..GroupDirective::default()
        }
    }

    /// Whether the directive leaves everything to the device (storing it
    /// is the same as clearing it).
    pub fn is_empty(&self) -> bool {
        self.match_text.is_none()
            && self.only.is_none()
            && self.window.is_none()
            && self.programs.is_none()
    }
}

/// The body of `GET /v1/directives`: the group's directive, and the
/// per-device directives of the device asked for (`?device=`; empty when
/// none was named). `docs/service.md` describes each field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Directives {
    /// The group's directive (its fields at the body's top level).
    #[serde(flatten)]
    pub directive: GroupDirective,
    /// The per-device directives.
    #[serde(default)]
    pub device_directives: Vec<DeviceDirective>,
}

/// "Trace the next `runs` runs of `program` whose command line contains
/// `match` fully, until `expires_unix_ns`", as a device receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceDirective {
    /// Its id: 1 to [`MAX_DIRECTIVE_ID_LEN`] ASCII letters and digits (the
    /// `directive` fact's value on the runs it asked for).
    pub id: String,
    /// Only runs of this program; `None`: any.
    pub program: Option<String>,
    /// Only runs whose command line contains this text; `None`: any.
    #[serde(rename = "match")]
    pub match_text: Option<String>,
    /// Full runs asked for, 1 to [`MAX_DIRECTED_RUNS`].
    pub runs: u32,
    /// When it lapses, ns since the Unix epoch.
    pub expires_unix_ns: u64,
}

/// A directive body as a device reads it: every field checked against the
/// contract; `device` holds the per-device entries that are valid and
/// `skipped` says why each other one was left out (one bad entry does not
/// cost the others).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// `match`: 1 to [`MAX_MATCH_LEN`] bytes without control characters.
    pub match_text: Option<String>,
    /// `only`: names (the reader that applies them checks them as syscalls).
    pub only: Option<Vec<String>>,
    /// `window`, as sent: the uploader parses it ([`Received::daily_window`]),
    /// and a window it cannot read costs only the window.
    pub window: Option<String>,
    /// `programs`: names.
    pub programs: Option<Vec<String>>,
    /// The valid per-device directives.
    pub device: Vec<DeviceDirective>,
    /// Why entries of `device_directives` were left out, one line each
    /// (`device_directives[2]: no `runs``).
    pub skipped: Vec<String>,
}

impl Received {
    /// The upload window, when one was sent: parsed, or why not.
    pub fn daily_window(&self) -> Option<Result<DailyWindow, String>> {
        self.window.as_deref().map(str::parse)
    }
}

/// Reads a `GET /v1/directives` body. Untrusted: a body over
/// [`MAX_BODY_BYTES`], one that is not a JSON object, a list or text over
/// its cap, or a field of the wrong type is refused whole, with an error
/// naming it; a bad per-device entry is skipped and named in
/// [`Received::skipped`]. Unknown fields are ignored (a newer service).
pub fn read(body: &[u8]) -> Result<Received, String> {
    if body.len() > MAX_BODY_BYTES {
        return Err(format!(
            "the body is {} bytes; at most {MAX_BODY_BYTES} are read",
            body.len()
        ));
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let object = value.as_object().ok_or("not a JSON object")?;
    check(&value)?;
    let match_text = optional_text(object, "match", MAX_MATCH_LEN)?;
    let window = match object.get("window") {
        None | Some(Value::Null) => None,
        Some(Value::String(w)) => Some(w.clone()),
        Some(_) => return Err("`window` is neither text nor null".into()),
    };
    let mut device = Vec::new();
    let mut skipped = Vec::new();
    match object.get("device_directives") {
        None | Some(Value::Null) => {}
        Some(Value::Array(entries)) => {
            for (i, entry) in entries.iter().enumerate() {
                match device_directive(entry) {
                    Ok(d) => device.push(d),
                    Err(why) => skipped.push(format!("device_directives[{i}]: {why}")),
                }
            }
        }
        Some(_) => return Err("`device_directives` is neither a list nor null".into()),
    }
    Ok(Received {
        match_text,
        only: optional_names(object, "only")?,
        window,
        programs: optional_names(object, "programs")?,
        device,
        skipped,
    })
}

/// A text field: absent or null is `None`; else 1 to `max` bytes without
/// control characters.
fn optional_text(
    object: &serde_json::Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Option<String>, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            if s.is_empty() || s.len() > max || s.chars().any(char::is_control) {
                return Err(format!(
                    "`{field}` must be 1 to {max} bytes without control characters"
                ));
            }
            Ok(Some(s.clone()))
        }
        Some(_) => Err(format!("`{field}` is neither text nor null")),
    }
}

/// A list of names: absent or null is `None`.
fn optional_names(
    object: &serde_json::Map<String, Value>,
    field: &str,
) -> Result<Option<Vec<String>>, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(names)) => names
            .iter()
            .map(|n| n.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| format!("`{field}` holds something other than names")),
        Some(_) => Err(format!("`{field}` is neither a list nor null")),
    }
}

/// One entry of `device_directives`.
fn device_directive(value: &Value) -> Result<DeviceDirective, String> {
    let object = value.as_object().ok_or("not a JSON object")?;
    let id = match object.get("id") {
        Some(Value::String(s)) => s.clone(),
        // A service that sends a number means the same id.
        Some(Value::Number(n)) if n.is_u64() => n.to_string(),
        Some(_) => return Err("`id` is neither text nor a whole number".into()),
        None => return Err("no `id`".into()),
    };
    if id.is_empty()
        || id.len() > MAX_DIRECTIVE_ID_LEN
        || !id.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(format!(
            "`id` must be 1 to {MAX_DIRECTIVE_ID_LEN} ASCII letters and digits"
        ));
    }
    let number = |field: &str| -> Result<u64, String> {
        object
            .get(field)
            .ok_or_else(|| format!("no `{field}`"))?
            .as_u64()
            .ok_or_else(|| format!("`{field}` is not a whole number >= 0"))
    };
    let runs = number("runs")?;
    if !(1..=MAX_DIRECTED_RUNS).contains(&runs) {
        return Err(format!("`runs` must be 1 to {MAX_DIRECTED_RUNS}"));
    }
    Ok(DeviceDirective {
        program: optional_text(object, "program", MAX_PROGRAM_NAME_LEN)?,
        match_text: optional_text(object, "match", MAX_MATCH_LEN)?,
        runs: runs as u32,
        expires_unix_ns: number("expires_unix_ns")?,
        id,
    })
}

/// Checks a directive body's lists and texts against the caps; the error
/// names the field, its size and the cap. Only sizes are checked here;
/// [`read`] checks types and contents after it.
fn check(body: &Value) -> Result<(), String> {
    let Some(o) = body.as_object() else {
        return Ok(());
    };
    text(o.get("match"), "match", MAX_MATCH_LEN)?;
    text(o.get("window"), "window", MAX_WINDOW_LEN)?;
    list(o.get("only"), "only", MAX_ONLY, MAX_SYSCALL_NAME_LEN)?;
    list(
        o.get("programs"),
        "programs",
        MAX_PROGRAMS,
        MAX_PROGRAM_NAME_LEN,
    )?;
    if let Some(Value::Array(entries)) = o.get("device_directives") {
        if entries.len() > MAX_DEVICE_DIRECTIVES {
            return Err(format!(
                "`device_directives` has {} entries; at most {MAX_DEVICE_DIRECTIVES}",
                entries.len()
            ));
        }
        for (i, e) in entries.iter().enumerate() {
            let Some(e) = e.as_object() else { continue };
            let name = |f: &str| format!("device_directives[{i}].{f}");
            text(e.get("id"), &name("id"), MAX_DIRECTIVE_ID_LEN)?;
            text(e.get("program"), &name("program"), MAX_PROGRAM_NAME_LEN)?;
            text(e.get("match"), &name("match"), MAX_MATCH_LEN)?;
        }
    }
    Ok(())
}

/// A text field no longer than `max` bytes (other types pass: not a size).
fn text(value: Option<&Value>, field: &str, max: usize) -> Result<(), String> {
    match value {
        Some(Value::String(s)) if s.len() > max => Err(format!(
            "`{field}` is {} bytes long; at most {max}",
            s.len()
        )),
        _ => Ok(()),
    }
}

/// A list of at most `max` entries, each text at most `max_len` bytes.
fn list(value: Option<&Value>, field: &str, max: usize, max_len: usize) -> Result<(), String> {
    let Some(Value::Array(items)) = value else {
        return Ok(());
    };
    if items.len() > max {
        return Err(format!(
            "`{field}` has {} entries; at most {max}",
            items.len()
        ));
    }
    for (i, item) in items.iter().enumerate() {
        text(Some(item), &format!("{field}[{i}]"), max_len)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_list_and_text_is_held_to_its_cap() {
        assert_eq!(check(&json!({"group": "g", "match": "x"})), Ok(()));
        let programs: Vec<String> = (0..=MAX_PROGRAMS).map(|i| format!("p{i}")).collect();
        let err = check(&json!({ "programs": programs })).unwrap_err();
        assert!(
            err.contains("`programs` has 65 entries; at most 64"),
            "{err}"
        );
        let long = "x".repeat(MAX_MATCH_LEN + 1);
        assert!(check(&json!({ "match": long }))
            .unwrap_err()
            .contains("`match` is 4097 bytes"));
        let entries = vec![json!({"id": "1"}); MAX_DEVICE_DIRECTIVES + 1];
        assert!(check(&json!({ "device_directives": entries }))
            .unwrap_err()
            .contains("at most 16"));
        let err = check(&json!({"device_directives": [{"id": "1", "match": long}]})).unwrap_err();
        assert!(err.contains("device_directives[0].match"), "{err}");
        let only = vec!["y".repeat(MAX_SYSCALL_NAME_LEN + 1)];
        assert!(check(&json!({ "only": only }))
            .unwrap_err()
            .contains("only[0]"));
    }
}

#[cfg(test)]
mod contract {
    use super::*;

    #[test]
    fn what_the_service_writes_every_device_reads_back() {
        let sent = Directives {
            directive: GroupDirective {
                group: "phones".into(),
                match_text: Some("api.example.com".into()),
                only: Some(vec!["read".into(), "connect".into()]),
                window: Some("22:00-06:30".into()),
                programs: Some(vec!["curl".into()]),
            },
            device_directives: vec![DeviceDirective {
                id: "17".into(),
                program: Some("wget".into()),
                match_text: None,
                runs: 3,
                expires_unix_ns: 1_700_000_000_000_000_000,
            }],
        };
        let body = serde_json::to_vec(&sent).unwrap();
        let got = read(&body).unwrap();
        assert_eq!(got.match_text, sent.directive.match_text);
        assert_eq!(got.only, sent.directive.only);
        assert_eq!(got.programs, sent.directive.programs);
        assert_eq!(got.device, sent.device_directives);
        assert!(got.skipped.is_empty());
        let window = got.daily_window().unwrap().unwrap();
        assert_eq!((window.start_min(), window.end_min()), (1320, 390));
        // A group's empty directive: everything null, nothing to read.
        let empty = serde_json::to_vec(&Directives::default()).unwrap();
        assert_eq!(read(&empty).unwrap(), Received::default());
        // Wrong types are refused whole, naming the field.
        for (bad, field) in [
            (r#"{"window": 7}"#, "`window`"),
            (r#"{"programs": "curl"}"#, "`programs`"),
            (r#"{"only": [1]}"#, "`only`"),
            (r#"{"match": ""}"#, "`match`"),
        ] {
            let err = read(bad.as_bytes()).unwrap_err();
            assert!(err.contains(field), "{bad}: {err}");
        }
    }
}
