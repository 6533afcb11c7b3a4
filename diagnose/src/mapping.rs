//! The syscall mapping: names with the same meaning merged into one before
//! attributes are made (the research's "configuration file that maps such
//! system calls"). Read from TOML; the shipped default is
//! `diagnose/default-map.toml`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context};
use serde::Deserialize;

/// The shipped default mapping (select, pselect6, poll, ppoll merged).
pub const DEFAULT_MAP_TOML: &str = include_str!("../default-map.toml");

/// Syscall name -> the name its statistics are counted under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mapping {
    to_group: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    #[serde(default)]
    merge: BTreeMap<String, Vec<String>>,
}

/// Whether `name` may be used as (part of) an attribute name.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

impl Mapping {
    /// The shipped default.
    pub fn default_map() -> Mapping {
        // The shipped file is tested to parse (see the tests below).
        Mapping::from_toml(DEFAULT_MAP_TOML).unwrap_or_default()
    }

    /// Parses a mapping file's text.
    pub fn from_toml(text: &str) -> anyhow::Result<Mapping> {
        let file: MapFile = toml::from_str(text).context("syscall mapping is not valid")?;
        let mut to_group = BTreeMap::new();
        for (group, members) in file.merge {
            if !valid_name(&group) {
                bail!("syscall mapping: name {group:?} must be 1-64 characters of [a-z0-9_]");
            }
            if members.is_empty() {
                bail!("syscall mapping: {group:?} lists no syscalls");
            }
            for member in members {
                if !valid_name(&member) {
                    bail!(
                        "syscall mapping: {group:?} lists {member:?}, which is not a syscall name"
                    );
                }
                if let Some(previous) = to_group.insert(member.clone(), group.clone()) {
                    bail!(
                        "syscall mapping: {member:?} is listed under both {previous:?} and {group:?}"
                    );
                }
            }
        }
        Ok(Mapping { to_group })
    }

    /// Reads a mapping file.
    pub fn from_file(path: &Path) -> anyhow::Result<Mapping> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read syscall mapping {}", path.display()))?;
        Mapping::from_toml(&text).with_context(|| format!("in {}", path.display()))
    }

    /// The name `syscall`'s statistics are counted under.
    pub fn map<'a>(&'a self, syscall: &'a str) -> &'a str {
        self.to_group.get(syscall).map_or(syscall, String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_merges_select_family_and_keeps_reads_apart() {
        let m = Mapping::from_toml(DEFAULT_MAP_TOML).unwrap();
        for name in ["select", "pselect6", "poll", "ppoll"] {
            assert_eq!(m.map(name), "select");
        }
        for name in ["read", "recvfrom", "recvmsg", "write"] {
            assert_eq!(m.map(name), name);
        }
        assert_eq!(Mapping::default_map(), m);
    }

    #[test]
    fn custom_file_replaces_default() {
        let m =
            Mapping::from_toml("[merge]\nread = [\"read\", \"recvfrom\", \"recvmsg\"]\n").unwrap();
        assert_eq!(m.map("recvmsg"), "read");
        assert_eq!(m.map("poll"), "poll");
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        let err = Mapping::from_toml("[merge]\na = [\"x\"]\nb = [\"x\"]\n").unwrap_err();
        assert!(format!("{err:#}").contains("listed under both"), "{err:#}");
        let err = Mapping::from_toml("[merge]\n\"Bad Name\" = [\"x\"]\n").unwrap_err();
        assert!(format!("{err:#}").contains("[a-z0-9_]"), "{err:#}");
        let err = Mapping::from_toml("[merj]\n").unwrap_err();
        assert!(format!("{err:#}").contains("not valid"), "{err:#}");
        assert!(Mapping::from_toml("[merge]\nx = []\n").is_err());
    }
}
