//! `watch`'s entry: the watcher ([`crate::watch`]) handed to the backend
//! `--backend` chooses, through the one seam ([`Tracer::watch`]). Apart
//! from both loops so that neither depends on the other.

use agent_core::Summary;

use crate::directives::Update;
use crate::tracer::Tracer;
use crate::watch::{new_watcher, WatchOptions};

/// Watches until a stop is requested (SIGINT/SIGTERM with
/// [`crate::signals::install`]); each traced process's summary goes to
/// `on_summary` when it ends (or, for those still running at the stop, when
/// the agent detaches from them).
///
/// Matching processes already running are traced from the first scan on,
/// except the agent itself and its ancestors.
pub fn watch(opts: &WatchOptions, on_summary: &mut dyn FnMut(Summary)) -> anyhow::Result<()> {
    watch_changing(opts, &mut || None, on_summary)
}

/// [`watch`], asking `changes` at each scan whether the text to match has
/// changed (`Some(new text)`; `None`: as before). It must answer at once:
/// the tracees wait while it runs.
pub fn watch_changing(
    opts: &WatchOptions,
    changes: &mut dyn FnMut() -> Option<String>,
    on_summary: &mut dyn FnMut(Summary),
) -> anyhow::Result<()> {
    watch_steered(
        opts,
        &mut || Update {
            pattern: changes(),
            device: None,
        },
        on_summary,
    )
}

/// [`watch`], asking `steer` at each scan what the service's directives
/// changed: the text to match, and the per-device directives (see
/// [`crate::directives::WatchSteering::apply_all`]). It must answer at
/// once: the tracees wait while it runs.
pub fn watch_steered(
    opts: &WatchOptions,
    changes: &mut dyn FnMut() -> Update,
    on_summary: &mut dyn FnMut(Summary),
) -> anyhow::Result<()> {
    let watcher = new_watcher(opts, changes, on_summary)?;
    Tracer::choose(opts.backend, None)?.watch(watcher, opts)
}
