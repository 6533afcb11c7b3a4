//! Directives: what the devices of a group should trace, set by the operator
//! and fetched by the uploader (`GET /v1/directives`).

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

/// What the devices of one group should trace. `None` fields leave the
/// device's own setting alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Directive {
    /// The device group.
    pub group: String,
    /// Trace only programs whose command line contains this text.
    #[serde(rename = "match")]
    pub match_text: Option<String>,
    /// Trace only these syscalls (canonical names).
    pub only: Option<Vec<String>>,
    /// Upload only inside this daily window, `HH:MM-HH:MM` (device local time).
    pub window: Option<String>,
}

impl Directive {
    /// The directive of a group nobody configured: everything left to the
    /// device.
    pub fn empty(group: &str) -> Directive {
        Directive {
            group: group.to_string(),
            match_text: None,
            only: None,
            window: None,
        }
    }

    /// Builds a directive from the operator's words, validating each.
    pub fn parse(
        group: &str,
        match_text: Option<&str>,
        only: Option<&str>,
        window: Option<&str>,
    ) -> anyhow::Result<Directive> {
        if !crate::tokens::valid_group(group) {
            bail!(
                "group `{group}` cannot be named by any token: {}",
                crate::tokens::GROUP_RULE
            );
        }
        if let Some(m) = match_text {
            if m.is_empty() || m.chars().any(char::is_control) {
                bail!("--match must be non-empty text without control characters");
            }
        }
        // The agent's own rule (agent_core::validate_only_list): any set it
        // accepts starts on every device.
        let only = only
            .map(|list| -> anyhow::Result<Vec<String>> {
                agent_core::validate_only_list(list).map_err(|e| match e {
                    agent_core::OnlyListError::Unknown(name) => anyhow::anyhow!(
                        "--only: unknown syscall `{name}` (names are Linux syscall names as agent-core knows them, e.g. read,write,openat)"
                    ),
                    agent_core::OnlyListError::Empty => anyhow::anyhow!(
                        "--only needs at least one syscall name (an empty set would trace nothing)"
                    ),
                })?;
                let mut names: Vec<String> = Vec::new();
                for id in agent_core::only_list_ids(list) {
                    // A repeated name would be sent to every device as is.
                    let name = id.to_string();
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                Ok(names)
            })
            .transpose()?;
        if let Some(w) = window {
            parse_window(w)?;
        }
        Ok(Directive {
            group: group.to_string(),
            match_text: match_text.map(str::to_string),
            only,
            window: window.map(str::to_string),
        })
    }
}

/// Parses `HH:MM-HH:MM` into minutes since midnight (start, end); the window
/// may wrap past midnight (`22:00-06:00`).
pub fn parse_window(text: &str) -> anyhow::Result<(u16, u16)> {
    let (a, b) = text
        .split_once('-')
        .with_context(|| format!("window `{text}` must be HH:MM-HH:MM"))?;
    let start = parse_hhmm(a).with_context(|| format!("window `{text}`: bad start `{a}`"))?;
    let end = parse_hhmm(b).with_context(|| format!("window `{text}`: bad end `{b}`"))?;
    if start == end {
        bail!("window `{text}` is empty (start equals end)");
    }
    Ok((start, end))
}

fn parse_hhmm(text: &str) -> anyhow::Result<u16> {
    let (h, m) = text.split_once(':').context("expected HH:MM")?;
    if h.len() != 2 || m.len() != 2 {
        bail!("expected HH:MM");
    }
    let h: u16 = h.parse().context("hours are not a number")?;
    let m: u16 = m.parse().context("minutes are not a number")?;
    if h > 23 || m > 59 {
        bail!("time out of range");
    }
    Ok(h * 60 + m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_valid_directives() {
        let d = Directive::parse(
            "phones",
            Some("curl"),
            Some("read, write,openat"),
            Some("22:00-06:30"),
        )
        .unwrap();
        assert_eq!(
            d.only.as_deref(),
            Some(&["read".to_string(), "write".into(), "openat".into()][..])
        );
        assert_eq!(parse_window("22:00-06:30").unwrap(), (1320, 390));
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["match"], "curl");
        assert_eq!(
            serde_json::to_value(Directive::empty("g")).unwrap(),
            serde_json::json!({"group": "g", "match": null, "only": null, "window": null})
        );
    }

    #[test]
    fn refuses_bad_directives() {
        let err = |r: anyhow::Result<Directive>| format!("{:#}", r.unwrap_err());
        assert!(
            err(Directive::parse("g", None, Some("read,notacall"), None))
                .contains("unknown syscall `notacall`")
        );
        assert!(err(Directive::parse("g", None, Some(" , "), None)).contains("at least one"));
        assert!(err(Directive::parse("g", None, None, Some("24:00-01:00"))).contains("bad start"));
        assert!(err(Directive::parse("g", None, None, Some("0100-0200")))
            .contains("bad start `0100`: expected HH:MM"));
        assert!(
            err(Directive::parse("g", None, None, Some("01:00"))).contains("must be HH:MM-HH:MM")
        );
        assert!(err(Directive::parse("g", None, None, Some("01:00-01:00"))).contains("empty"));
        assert!(err(Directive::parse("", None, None, None)).contains("group"));
        for bad_group in ["al pha", "a#b", "x\ty"] {
            assert!(
                err(Directive::parse(bad_group, None, None, None))
                    .contains(crate::tokens::GROUP_RULE),
                "{bad_group:?}"
            );
        }
        for bad in ["<other>", "<unknown>", "read,<other>"] {
            assert!(
                err(Directive::parse("g", None, Some(bad), None)).contains("unknown syscall"),
                "{bad}"
            );
        }
        assert!(err(Directive::parse("g", None, Some(""), None)).contains("at least one"));
        let d = Directive::parse("g", None, Some("read,write,read"), None).unwrap();
        assert_eq!(d.only.unwrap(), ["read", "write"]);
    }
}
