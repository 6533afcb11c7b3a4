//! Directives: what the devices of a group should trace, set by the operator
//! and fetched by the uploader (`GET /v1/directives`).

use anyhow::bail;

/// What the devices of one group should trace: the type devices read
/// (`wire`), which the service stores as it is.
pub use wire::directive::GroupDirective as Directive;

/// The most programs one directive may name: each is a file on every
/// device (the cap every device reader holds a body to, `wire`).
pub use wire::directive::MAX_PROGRAMS;

// A program name the service accepts is one every device can shim.
const _: () = assert!(wire::directive::MAX_PROGRAM_NAME_LEN == agent_core::MAX_PROGRAM_NAME_LEN);

/// The operator's words for a directive (`None`: leave the device's own
/// setting alone), as `directive set` and the web UI's form take them.
#[derive(Clone, Copy, Debug, Default)]
pub struct DirectiveText<'a> {
    /// `--match`: text the command line contains.
    pub match_text: Option<&'a str>,
    /// `--only`: syscall names, comma-separated.
    pub only: Option<&'a str>,
    /// `--window`: `HH:MM-HH:MM`.
    pub window: Option<&'a str>,
    /// `--programs`: program names, comma-separated.
    pub programs: Option<&'a str>,
}

/// A directive from the operator's words (`directive set`, the web UI's
/// form), each validated by the devices' own rules: `Directive::parse`
/// with this trait in scope.
pub trait FromWords: Sized {
    /// Builds a directive from the operator's words, validating each.
    fn parse(group: &str, text: DirectiveText<'_>) -> anyhow::Result<Self>;
}

impl FromWords for Directive {
    fn parse(group: &str, text: DirectiveText<'_>) -> anyhow::Result<Directive> {
        let DirectiveText {
            match_text,
            only,
            window,
            programs,
        } = text;
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
            if m.len() > wire::directive::MAX_MATCH_LEN {
                bail!(
                    "--match is {} bytes long; at most {} (devices refuse a longer one)",
                    m.len(),
                    wire::directive::MAX_MATCH_LEN
                );
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
            programs: programs.map(parse_programs).transpose()?,
        })
    }
}

/// Parses `--programs`: comma-separated program names (blanks around a
/// name ignored, a repeated one kept once), each by the agent's own rule
/// for a shim's name ([`agent_core::valid_program_name`]), so that every
/// device can shim every name; at least one, at most [`MAX_PROGRAMS`].
pub fn parse_programs(list: &str) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for name in list.split(',').map(str::trim) {
        if name.is_empty() {
            // `md5sum,,curl` or a trailing comma: nothing named there.
            continue;
        }
        if !agent_core::valid_program_name(name) {
            bail!(
                "--programs: {name:?} is not a program name ({}); name programs as PATH finds them, e.g. md5sum,curl",
                agent_core::PROGRAM_NAME_RULE
            );
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    if names.is_empty() {
        bail!("--programs needs at least one program name (e.g. md5sum,curl)");
    }
    if names.len() > MAX_PROGRAMS {
        bail!(
            "--programs names {} programs; at most {MAX_PROGRAMS}",
            names.len()
        );
    }
    Ok(names)
}

/// Parses `HH:MM-HH:MM` into minutes since midnight (start, end); the window
/// may wrap past midnight (`22:00-06:00`). The rule is the devices' own
/// (`wire::window`), so every window the service stores, every device
/// reads.
pub fn parse_window(text: &str) -> anyhow::Result<(u16, u16)> {
    let w: wire::window::DailyWindow = text.parse().map_err(anyhow::Error::msg)?;
    Ok((w.start_min(), w.end_min()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Directive::parse` of a group's match, only and window words.
    fn parse(
        group: &str,
        match_text: Option<&str>,
        only: Option<&str>,
        window: Option<&str>,
    ) -> anyhow::Result<Directive> {
        Directive::parse(
            group,
            DirectiveText {
                match_text,
                only,
                window,
                programs: None,
            },
        )
    }

    fn with_programs(programs: &str) -> anyhow::Result<Directive> {
        Directive::parse(
            "g",
            DirectiveText {
                programs: Some(programs),
                ..DirectiveText::default()
            },
        )
    }

    #[test]
    fn parses_valid_directives() {
        let d = parse(
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
            serde_json::json!({"group": "g", "match": null, "only": null, "window": null, "programs": null})
        );
    }

    #[test]
    fn refuses_bad_directives() {
        let err = |r: anyhow::Result<Directive>| format!("{:#}", r.unwrap_err());
        assert!(err(parse("g", None, Some("read,notacall"), None))
            .contains("unknown syscall `notacall`"));
        assert!(err(parse("g", None, Some(" , "), None)).contains("at least one"));
        assert!(err(parse("g", None, None, Some("24:00-01:00"))).contains("bad start"));
        assert!(err(parse("g", None, None, Some("0100-0200")))
            .contains("bad start `0100`: expected HH:MM"));
        assert!(err(parse("g", None, None, Some("01:00"))).contains("must be HH:MM-HH:MM"));
        assert!(err(parse("g", None, None, Some("01:00-01:00"))).contains("empty"));
        assert!(err(parse("", None, None, None)).contains("group"));
        for bad_group in ["al pha", "a#b", "x\ty"] {
            assert!(
                err(parse(bad_group, None, None, None)).contains(crate::tokens::GROUP_RULE),
                "{bad_group:?}"
            );
        }
        for bad in ["<other>", "<unknown>", "read,<other>"] {
            assert!(
                err(parse("g", None, Some(bad), None)).contains("unknown syscall"),
                "{bad}"
            );
        }
        assert!(err(parse("g", None, Some(""), None)).contains("at least one"));
        let d = parse("g", None, Some("read,write,read"), None).unwrap();
        assert_eq!(d.only.unwrap(), ["read", "write"]);
    }

    #[test]
    fn programs_are_plain_names_listed_once() {
        let d = with_programs(" md5sum, curl,,md5sum ,g++ ").unwrap();
        assert_eq!(d.programs.as_deref().unwrap(), ["md5sum", "curl", "g++"]);
        assert!(!d.is_empty());
        // The JSON devices fetch (`edge-agent watch --shim-dir` reads it).
        assert_eq!(
            serde_json::to_value(&d).unwrap()["programs"],
            serde_json::json!(["md5sum", "curl", "g++"])
        );
        assert!(Directive::empty("g").is_empty());
    }

    #[test]
    fn refuses_programs_that_are_not_plain_names() {
        let err = |list: &str| format!("{:#}", with_programs(list).unwrap_err());
        for (list, bad) in [
            ("md5sum,/usr/bin/curl", "\"/usr/bin/curl\""),
            ("bin/curl", "\"bin/curl\""),
            ("md5 sum", "\"md5 sum\""),
            ("tab\there", "\"tab\\there\""),
            ("n\nl", "\"n\\nl\""),
            ("bell\u{7}", "\"bell\\u{7}\""),
            ("..", "\"..\""),
            (".profile", "\".profile\""),
            ("directive.json", "\"directive.json\""),
            ("rm;reboot", "\"rm;reboot\""),
        ] {
            let e = err(list);
            assert!(
                e.contains(&format!("--programs: {bad} is not a program name")),
                "{list:?}: {e}"
            );
            assert!(e.contains(agent_core::PROGRAM_NAME_RULE), "{e}");
        }
        let long = "x".repeat(agent_core::MAX_PROGRAM_NAME_LEN + 1);
        assert!(err(&format!("ok,{long}")).contains("is not a program name"));
        assert!(with_programs(&long[1..]).is_ok());
        for empty in ["", " , ", ","] {
            assert!(
                err(empty).contains("--programs needs at least one program name"),
                "{empty:?}"
            );
        }
        let many: Vec<String> = (0..=MAX_PROGRAMS).map(|i| format!("p{i}")).collect();
        assert!(err(&many.join(",")).contains(&format!(
            "names {} programs; at most {MAX_PROGRAMS}",
            MAX_PROGRAMS + 1
        )));
        assert!(with_programs(&many[1..].join(",")).is_ok());
    }
}
