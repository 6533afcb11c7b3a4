//! Reading summary files and folders, and filtering runs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use agent_core::{Summary, MAX_ENCODED_LEN};
use anyhow::Context;
use summary_view::file::{read_capped, FileError};

/// Which runs to read from the store.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Only runs of this group.
    pub group: Option<String>,
    /// Only runs of this program (the `program` fact).
    pub program: Option<String>,
    /// Only runs that started at or after this time, ns since the Unix epoch.
    pub since_unix_ns: Option<u64>,
    /// Only runs that started before this time, ns since the Unix epoch.
    pub until_unix_ns: Option<u64>,
}

/// A request to stop reading: set by whoever asked for the analysis (the
/// web UI, when its client went away), checked by a read loop between
/// parts of what it reads. Clones share one flag; a fresh one is never
/// set until [`Cancel::cancel`].
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Asks every holder of a clone to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Cancel::cancel`] was called on a clone.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once cancelled: for a loop's `?`.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// The error of a read stopped by [`Cancel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cancelled: the analysis was stopped before it finished")
    }
}

impl std::error::Error for Cancelled {}

/// Implemented by the service's storage; lets diagnose read the store without
/// depending on the service crate.
pub trait SummarySource {
    /// The summaries in store `db` that pass `filter`.
    fn load(&self, db: &Path, filter: &RunFilter) -> anyhow::Result<Vec<Summary>>;

    /// Hands every summary in store `db` that passes `filter` to `each`, in
    /// start order. A store that can should read them a part at a time
    /// (`edge-service peers` reads hundreds of thousands of windows); this
    /// default loads them all first.
    fn for_each(
        &self,
        db: &Path,
        filter: &RunFilter,
        each: &mut dyn FnMut(&Summary),
    ) -> anyhow::Result<()> {
        for s in self.load(db, filter)? {
            each(&s);
        }
        Ok(())
    }

    /// How messages name store `db`. A store whose name may hold a secret
    /// (a database URL's password) hides it here; this default shows the
    /// path.
    fn name(&self, db: &Path) -> String {
        db.display().to_string()
    }
}

/// A file that is not a summary, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFile {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it (the decoder's words for a corrupt summary).
    pub reason: String,
}

impl std::fmt::Display for BadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for BadFile {}

/// Reads one summary file (exactly the bytes of `Summary::encode`).
pub fn read_summary(path: &Path) -> Result<Summary, BadFile> {
    let bad = |reason: String| BadFile {
        path: path.to_path_buf(),
        reason,
    };
    // At most the cap plus one byte is read (summary_view::file).
    let bytes = read_capped(path, MAX_ENCODED_LEN).map_err(|e| match e {
        FileError::TooLarge { cap, .. } => bad(format!("larger than {cap} bytes: not a summary")),
        FileError::Io { err, .. } => bad(format!("cannot read it: {err}")),
        other => bad(other.to_string()),
    })?;
    if bytes.is_empty() {
        return Err(bad("empty file (0 bytes): not a summary".into()));
    }
    let summary = Summary::decode(&bytes)
        .map_err(|e| bad(format!("not a valid summary ({} bytes): {e}", bytes.len())))?;
    summary
        .facts
        .validate()
        .map_err(|e| bad(format!("invalid facts: {e}")))?;
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

/// Reads every summary under `paths`; the files that are not summaries are
/// returned apart, for the caller to refuse or skip. A path that cannot be
/// listed is an error.
pub fn read_all(paths: &[PathBuf]) -> anyhow::Result<(Vec<Summary>, Vec<BadFile>)> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for p in paths {
        for f in summary_files(p)? {
            match read_summary(&f) {
                Ok(s) => out.push(s),
                Err(b) => bad.push(b),
            }
        }
    }
    Ok((out, bad))
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
