//! Lets `diagnose` read runs from the SQLite store.

use std::path::Path;
use std::time::Duration;

use diagnose::input::{RunFilter as DiagnoseFilter, SummarySource};

use crate::store::{RunFilter, SqliteStore, Store};

/// Reads summaries from an SQLite store file.
#[derive(Clone, Copy, Debug, Default)]
pub struct SqliteSource;

impl SummarySource for SqliteSource {
    fn load(&self, db: &Path, filter: &DiagnoseFilter) -> anyhow::Result<Vec<agent_core::Summary>> {
        if !db.exists() {
            anyhow::bail!("database {} does not exist", db.display());
        }
        let mut store = SqliteStore::open(db, Duration::from_secs(5))?;
        let filter = RunFilter {
            group: filter.group.clone(),
            program: filter.program.clone(),
            since_unix_ns: filter.since_unix_ns,
            until_unix_ns: filter.until_unix_ns,
            device: None,
            stream: None,
            limit: None,
        };
        let stored = store.load(&filter)?;
        stored
            .iter()
            .map(|run| {
                agent_core::Summary::decode(&run.raw).map_err(|e| {
                    anyhow::anyhow!("a stored run in {} no longer decodes: {e}", db.display())
                })
            })
            .collect()
    }
}
