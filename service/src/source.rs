//! Lets `diagnose` read runs from the store (`--db`: an SQLite file or a
//! `postgres://` URL, as `serve` takes it).

use std::path::Path;

use anyhow::Context;
use diagnose::input::{RunFilter as DiagnoseFilter, SummarySource};

use crate::store::{Location, RunFilter, Store};

/// How much start time one query of [`StoreSource::for_each`] covers: a
/// fleet of 100 devices with 1 s windows has 30 000 windows in it, a few
/// tens of MB of raw summaries.
const CHUNK_NS: u64 = 300 * 1_000_000_000;

fn store_filter(filter: &DiagnoseFilter) -> RunFilter {
    RunFilter {
        group: filter.group.clone(),
        program: filter.program.clone(),
        since_unix_ns: filter.since_unix_ns,
        until_unix_ns: filter.until_unix_ns,
        device: None,
        stream: None,
        // Light records have no syscalls: nothing for a diagnosis or the
        // peer analysis to explain (the detector reads them itself).
        kind: Some(agent_core::Kind::Full),
        whole_runs: false,
        limit: None,
        newest_first: false,
    }
}

/// Reads summaries from the service's store.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreSource;

impl SummarySource for StoreSource {
    fn load(&self, db: &Path, filter: &DiagnoseFilter) -> anyhow::Result<Vec<agent_core::Summary>> {
        let location = Location::parse(db);
        let mut store = location.open_existing()?;
        let stored = store.load(&store_filter(filter))?;
        stored
            .iter()
            .map(|run| {
                agent_core::Summary::decode(&run.raw).map_err(|e| {
                    anyhow::anyhow!("a stored run in {location} no longer decodes: {e}")
                })
            })
            .collect()
    }

    /// Reads the range a chunk of start time at a time (when it is
    /// bounded), decoding each summary into one reused buffer, so memory
    /// holds one chunk's raw summaries, never the whole range.
    fn for_each(
        &self,
        db: &Path,
        filter: &DiagnoseFilter,
        each: &mut dyn FnMut(&agent_core::Summary),
    ) -> anyhow::Result<()> {
        let location = Location::parse(db);
        let mut store = location.open_existing()?;
        // The command reads all it is asked to: no budget, no cancel.
        for_each_stored(store.as_mut(), filter, &mut || Ok(()), each)
            .with_context(|| format!("reading {location}"))
    }

    /// The location as `serve` prints it: a password hidden.
    fn name(&self, db: &Path) -> String {
        Location::parse(db).to_string()
    }
}

/// [`StoreSource::for_each`] on a store already open (the web UI's Peers
/// page reads through its pooled connection): the range a chunk of start
/// time at a time. `before_chunk` is called before each query: its error
/// stops the reading there (the web UI's budget and cancel flag: a client
/// gone, too many windows read). Errors: `before_chunk`'s, the store's, or
/// a raw summary that no longer decodes.
pub fn for_each_stored(
    store: &mut dyn Store,
    filter: &DiagnoseFilter,
    before_chunk: &mut dyn FnMut() -> anyhow::Result<()>,
    each: &mut dyn FnMut(&agent_core::Summary),
) -> anyhow::Result<()> {
    let mut summary = agent_core::Summary::empty();
    let mut chunk = store_filter(filter);
    let mut decode_each = |store: &mut dyn Store, chunk: &RunFilter| -> anyhow::Result<()> {
        before_chunk()?;
        for run in store.load(chunk)? {
            agent_core::Summary::decode_into(&run.raw, &mut summary)
                .map_err(|e| anyhow::anyhow!("a stored run no longer decodes: {e}"))?;
            each(&summary);
        }
        Ok(())
    };
    let (Some(since), Some(until)) = (filter.since_unix_ns, filter.until_unix_ns) else {
        return decode_each(store, &chunk);
    };
    let mut from = since;
    while from < until {
        let to = from.saturating_add(CHUNK_NS).min(until);
        chunk.since_unix_ns = Some(from);
        chunk.until_unix_ns = Some(to);
        decode_each(store, &chunk)?;
        from = to;
    }
    Ok(())
}
