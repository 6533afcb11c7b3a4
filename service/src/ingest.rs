//! Turning a request's items into runs to store and per-item rejections.

use agent_core::{DecodeError, RunId, Summary};

use crate::store::NewRun;

/// The free fact a summary may carry to say which group it belongs to.
pub const GROUP_FACT: &str = "group";
/// The group of summaries sent to a server without tokens when they carry
/// no `group` fact.
pub const DEFAULT_GROUP: &str = "default";

/// One item that will never be stored, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Its index in the request.
    pub index: usize,
    /// Its id, when it could be read.
    pub id: Option<RunId>,
    /// For the client: the decoder's message, or why the store refused it.
    pub reason: String,
    /// For the metrics: a short, fixed label.
    pub label: &'static str,
}

/// A request whose items decoded (or were rejected one by one).
#[derive(Debug)]
pub struct Prepared {
    /// The runs to store, with their item index.
    pub runs: Vec<(usize, NewRun)>,
    /// Items rejected by the decoder.
    pub rejected: Vec<Rejection>,
}

/// A summary claiming a group other than the token's: the whole request is
/// refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignGroup {
    pub index: usize,
    pub claimed: String,
    pub token_group: String,
}

impl std::fmt::Display for ForeignGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "item {}: summary claims group `{}` but the token is for group `{}`; nothing stored",
            self.index, self.claimed, self.token_group
        )
    }
}

/// Decodes every item. `token_group` is the authenticated group; `None` on a
/// server without tokens, where each summary's `group` fact (or
/// [`DEFAULT_GROUP`]) is its group.
pub fn prepare(
    items: &[&[u8]],
    token_group: Option<&str>,
    received_unix_ns: u64,
) -> Result<Prepared, ForeignGroup> {
    let mut runs = Vec::with_capacity(items.len());
    let mut rejected = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let summary = match Summary::decode(item) {
            Ok(s) => s,
            Err(e) => {
                rejected.push(Rejection {
                    index,
                    id: readable_id(item),
                    reason: e.to_string(),
                    label: decode_label(&e),
                });
                continue;
            }
        };
        let claimed = summary.facts.get(GROUP_FACT);
        let group = match (token_group, claimed) {
            (Some(mine), Some(claimed)) if claimed != mine => {
                return Err(ForeignGroup {
                    index,
                    claimed: claimed.to_string(),
                    token_group: mine.to_string(),
                })
            }
            (Some(mine), _) => mine,
            (None, Some(claimed)) => claimed,
            (None, None) => DEFAULT_GROUP,
        };
        runs.push((
            index,
            NewRun::from_summary(&summary, item.to_vec(), group, received_unix_ns),
        ));
    }
    Ok(Prepared { runs, rejected })
}

/// The id of an item the decoder refused, when its first bytes look like a
/// summary of a version this build reads (the version varint is one byte,
/// the id the next 16).
fn readable_id(item: &[u8]) -> Option<RunId> {
    let version = item.first().map(|v| u16::from(*v));
    let known = agent_core::OLDEST_FORMAT_VERSION..=agent_core::FORMAT_VERSION;
    if item.len() >= 17 && version.is_some_and(|v| known.contains(&v)) {
        <[u8; 16]>::try_from(&item[1..17]).ok().map(RunId)
    } else {
        None
    }
}

/// The metrics label of a decode error.
pub fn decode_label(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Empty => "empty",
        DecodeError::Truncated => "truncated",
        DecodeError::Oversized { .. } => "oversized",
        DecodeError::UnsupportedVersion { .. } => "unsupported_version",
        DecodeError::Malformed(_) => "malformed",
        DecodeError::TrailingBytes { .. } => "trailing_bytes",
        DecodeError::Inconsistent(_) => "inconsistent",
    }
}
