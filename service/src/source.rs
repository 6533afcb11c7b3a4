//! Lets `diagnose` read runs from the store (`--db`: an SQLite file or a
//! `postgres://` URL, as `serve` takes it).

use std::path::Path;

use diagnose::input::{RunFilter as DiagnoseFilter, SummarySource};

use crate::store::{Location, RunFilter};

/// Reads summaries from the service's store.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreSource;

impl SummarySource for StoreSource {
    fn load(&self, db: &Path, filter: &DiagnoseFilter) -> anyhow::Result<Vec<agent_core::Summary>> {
        let location = Location::parse(db);
        let mut store = location.open_existing()?;
        let filter = RunFilter {
            group: filter.group.clone(),
            program: filter.program.clone(),
            since_unix_ns: filter.since_unix_ns,
            until_unix_ns: filter.until_unix_ns,
            device: None,
            stream: None,
            limit: None,
            newest_first: false,
        };
        let stored = store.load(&filter)?;
        stored
            .iter()
            .map(|run| {
                agent_core::Summary::decode(&run.raw).map_err(|e| {
                    anyhow::anyhow!("a stored run in {location} no longer decodes: {e}")
                })
            })
            .collect()
    }
}
