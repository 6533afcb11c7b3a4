//! The caps of a directive body (`GET /v1/directives`): the service
//! refuses to store or send more, and every reader on the device (the
//! watch's fetcher, the shims' steering, the uploader) refuses a body
//! beyond them before acting on any of it, so a broken or hostile service
//! cannot make a device spend time or memory in proportion to what it
//! sends. [`check`] is the one check of a parsed body.

use serde_json::Value;

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

/// Checks a directive body's lists and texts against the caps; the error
/// names the field, its size and the cap. Only sizes are checked here
/// (types and contents are each reader's own rules).
pub fn check(body: &Value) -> Result<(), String> {
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
