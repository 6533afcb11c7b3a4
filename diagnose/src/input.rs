//! Reading summary files and folders, and filtering runs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use agent_core::{Summary, MAX_ENCODED_LEN};
use anyhow::{bail, Context};

use crate::cli::RunFilter;

/// Reads one summary file (exactly the bytes of `Summary::encode`).
pub fn read_summary(path: &Path) -> anyhow::Result<Summary> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read summary file {}", path.display()))?;
    // A summary is at most MAX_ENCODED_LEN bytes: do not read a big file
    // given by mistake.
    if meta.len() > MAX_ENCODED_LEN as u64 {
        bail!(
            "{} is not a summary: {} bytes, a summary has at most {MAX_ENCODED_LEN}",
            path.display(),
            meta.len()
        );
    }
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read summary file {}", path.display()))?;
    let summary = Summary::decode(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not a valid summary: {e}", path.display()))?;
    summary
        .facts
        .validate()
        .map_err(|e| anyhow::anyhow!("{} has invalid facts: {e}", path.display()))?;
    Ok(summary)
}

/// The summary files a path names: the file itself, or a folder's
/// `*.summary` files (not recursively: a spool's `rejected/` stays out), in
/// name order. Hidden files (a spool's writes in progress) are skipped.
pub fn summary_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(path).with_context(|| format!("cannot list {}", path.display()))?
    {
        let entry = entry.with_context(|| format!("cannot list {}", path.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(SUMMARY_SUFFIX) {
            continue;
        }
        let kind = entry
            .file_type()
            .with_context(|| format!("cannot read {}", entry.path().display()))?;
        if kind.is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// How summary files in a folder are named (as in a spool).
pub const SUMMARY_SUFFIX: &str = ".summary";

/// Reads every summary under `paths`.
pub fn read_all(paths: &[PathBuf]) -> anyhow::Result<Vec<Summary>> {
    let mut out = Vec::new();
    for p in paths {
        for f in summary_files(p)? {
            out.push(read_summary(&f)?);
        }
    }
    Ok(out)
}

/// Whether a run passes the filter (group is the free fact `group`).
pub fn passes(summary: &Summary, filter: &RunFilter) -> bool {
    if let Some(g) = &filter.group {
        if summary.facts.get("group") != Some(g.as_str()) {
            return false;
        }
    }
    if let Some(p) = &filter.program {
        if summary.facts.program.as_str() != p {
            return false;
        }
    }
    let start = summary.run.start_unix_ns;
    if filter.since_unix_ns.is_some_and(|s| start < s) {
        return false;
    }
    if filter.until_unix_ns.is_some_and(|u| start >= u) {
        return false;
    }
    true
}

/// Drops repeated summaries (same id), keeping the first; returns how many
/// were dropped.
pub fn dedup(summaries: &mut Vec<Summary>) -> usize {
    let mut seen = HashSet::new();
    let before = summaries.len();
    summaries.retain(|s| seen.insert(s.id));
    before - summaries.len()
}
