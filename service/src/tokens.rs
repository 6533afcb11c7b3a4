//! Bearer tokens: each names the device group whose summaries it may send.
//!
//! File format: one `GROUP TOKEN` pair per line; `#` starts a comment; blank
//! lines are ignored. A group is a valid fact value (it is compared with the
//! summaries' free fact `group`); a token is at least 16 visible ASCII
//! characters and may appear only once. A group may have several tokens:
//! during a rotation the old and the new one are both valid.
//!
//! Device tokens ship inside every app, so they are public: they only
//! upload summaries and read directives (operators are
//! [`crate::operators`]). [`TokenFile`] re-reads the file without a
//! restart: on SIGHUP, and when its modification time or size changed
//! (looked at, at most, once per `ServeOptions::tokens_recheck`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};

/// Shortest token accepted, characters.
pub const MIN_TOKEN_LEN: usize = 16;

/// What a group name must be, in words (error messages quote it).
pub const GROUP_RULE: &str = "a group is 1-40 bytes without whitespace, `#` or control characters";

/// Whether `group` could be written in a tokens file: a valid fact value (it
/// is compared with the summaries' free fact `group`), non-empty, and one
/// word that no `#` cuts short. A directive for any other name could never
/// be fetched, because no token can name its group.
pub fn valid_group(group: &str) -> bool {
    !group.is_empty()
        && agent_core::facts::valid_value(group, agent_core::facts::FACT_VALUE_MAX)
        && !group.chars().any(|c| c.is_whitespace() || c == '#')
}

/// The tokens a server accepts.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    entries: Vec<(String, Vec<u8>)>,
}

impl Tokens {
    /// Reads a tokens file.
    pub fn load(path: &Path) -> anyhow::Result<Tokens> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read tokens file {}", path.display()))?;
        Tokens::parse(&text).with_context(|| format!("tokens file {}", path.display()))
    }

    /// Parses the text of a tokens file.
    pub fn parse(text: &str) -> anyhow::Result<Tokens> {
        let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line_no = n + 1;
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(group), Some(token), None) = (words.next(), words.next(), words.next())
            else {
                bail!("line {line_no}: expected `GROUP TOKEN`");
            };
            if !valid_group(group) {
                bail!("line {line_no}: group `{group}` is not valid: {GROUP_RULE}");
            }
            if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
                bail!(
                    "line {line_no}: token must be at least {MIN_TOKEN_LEN} visible ASCII characters"
                );
            }
            if entries.iter().any(|(_, t)| t == token.as_bytes()) {
                bail!("line {line_no}: token given twice");
            }
            entries.push((group.to_string(), token.as_bytes().to_vec()));
        }
        if entries.is_empty() {
            bail!("no `GROUP TOKEN` line");
        }
        Ok(Tokens { entries })
    }

    /// The group of `token`, if it is known. Every entry is compared in full
    /// so the time taken does not tell how much of a token matched.
    pub fn group_of(&self, token: &str) -> Option<&str> {
        let mut found = None;
        for (group, known) in &self.entries {
            if constant_time_eq(known, token.as_bytes()) {
                found = Some(group.as_str());
            }
        }
        found
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The tokens of a file, re-read when it changes; a new file that does not
/// parse keeps the old tokens (and says why on stderr).
#[derive(Debug)]
pub struct TokenFile {
    path: Option<PathBuf>,
    recheck: Duration,
    state: Mutex<FileState>,
}

#[derive(Debug)]
struct FileState {
    tokens: Tokens,
    /// Modification time and size of the file the tokens came from.
    stamp: Option<(SystemTime, u64)>,
    checked: Instant,
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl TokenFile {
    /// Reads `path` (an error when it does not parse: the server does not
    /// start without tokens).
    pub fn open(path: &Path, recheck: Duration) -> anyhow::Result<TokenFile> {
        let stamp = stamp(path);
        let tokens = Tokens::load(path)?;
        Ok(TokenFile {
            path: Some(path.to_path_buf()),
            recheck,
            state: Mutex::new(FileState {
                tokens,
                stamp,
                checked: Instant::now(),
            }),
        })
    }

    /// Fixed tokens, never re-read (tests).
    pub fn fixed(tokens: Tokens) -> TokenFile {
        TokenFile {
            path: None,
            recheck: Duration::MAX,
            state: Mutex::new(FileState {
                tokens,
                stamp: None,
                checked: Instant::now(),
            }),
        }
    }

    /// The group of `token`, after re-reading the file if it changed.
    pub fn group_of(&self, token: &str) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.checked.elapsed() >= self.recheck {
            self.reload_locked(&mut state, false);
        }
        state.tokens.group_of(token).map(str::to_string)
    }

    /// Re-reads the file now (SIGHUP), even if it looks unchanged.
    pub fn reload(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.reload_locked(&mut state, true);
    }

    fn reload_locked(&self, state: &mut FileState, always: bool) {
        state.checked = Instant::now();
        let Some(path) = &self.path else { return };
        let now = stamp(path);
        if !always && now == state.stamp {
            return;
        }
        // Stamped before reading: a write while we read is seen next time.
        state.stamp = now;
        match Tokens::load(path) {
            Ok(tokens) => {
                eprintln!(
                    "edge-service: tokens file {} re-read: {} token(s)",
                    path.display(),
                    tokens.len()
                );
                state.tokens = tokens;
            }
            Err(e) => eprintln!(
                "edge-service: keeping the previous {} token(s): {e:#}",
                state.tokens.len()
            ),
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_looks_up() {
        let t =
            Tokens::parse("# fleet\nphones  0123456789abcdef # eu\n\nlaptops fedcba9876543210\n")
                .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.group_of("0123456789abcdef"), Some("phones"));
        assert_eq!(t.group_of("fedcba9876543210"), Some("laptops"));
        assert_eq!(t.group_of("0123456789abcde"), None);
        assert_eq!(t.group_of(""), None);
    }

    #[test]
    fn refuses_bad_lines() {
        let err = |text: &str| format!("{:#}", Tokens::parse(text).unwrap_err());
        assert!(err("phones\n").contains("line 1: expected `GROUP TOKEN`"));
        assert!(err("a b c\n").contains("expected"));
        assert!(err("# only a comment\n").contains("no `GROUP TOKEN` line"));
        assert!(err("g short\n").contains("at least 16"));
        assert!(
            err("g 0123456789abcdef\nh 0123456789abcdef\n").contains("line 2: token given twice")
        );
        let long_group = "g".repeat(41);
        assert!(err(&format!("{long_group} 0123456789abcdef\n")).contains(GROUP_RULE));
    }

    #[test]
    fn group_rule() {
        for good in ["phones", "eu-west.1", "g", &"g".repeat(40)] {
            assert!(valid_group(good), "{good}");
        }
        for bad in ["", "al pha", "a\tb", "a#b", "a\u{7}", &"g".repeat(41)] {
            assert!(!valid_group(bad), "{bad:?}");
        }
    }
}
