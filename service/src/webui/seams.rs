//! The pages whose analyses are built elsewhere: the peers' findings
//! (`edge-service peers`, issue 15) and the proactive loop's reports
//! (issue 18). Each page asks one function here; until those analyses
//! exist the functions say so, and the page shows "not available". To fill
//! one in, make it return [`Section::Findings`] from the store (the page
//! already renders their text, tables and SVG plots).

use serde::Serialize;

use crate::store::{Store, StoreError};

/// One finding as a page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// A one-line title.
    pub title: String,
    /// Lines of explanation.
    pub lines: Vec<String>,
    /// Standalone `<svg>` elements (escaped, no script, no style
    /// attribute), e.g. the per-metric time series.
    pub plots: Vec<String>,
}

/// What a page of findings has to show.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Section {
    /// The analysis is not part of this build: why, in words.
    NotAvailable { why: String },
    /// The findings of the group (possibly none).
    Findings { items: Vec<Finding> },
}

/// The peers analysis' findings for `group`, with the per-metric time
/// series when it has them.
pub fn peers_findings(_store: &mut dyn Store, _group: &str) -> Result<Section, StoreError> {
    Ok(Section::NotAvailable {
        why: "the peers analysis (`edge-service peers`) is not part of this build yet".into(),
    })
}

/// The proactive loop's reports for `group`.
pub fn proactive_reports(_store: &mut dyn Store, _group: &str) -> Result<Section, StoreError> {
    Ok(Section::NotAvailable {
        why: "the proactive loop's reports are not part of this build yet".into(),
    })
}
