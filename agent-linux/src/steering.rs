//! `watch --server`: the service steering a running watch. A thread of its
//! own fetches the directives every few minutes with this device's id
//! (`directives::spawn_fetcher`), steers the shim folder when the device
//! opted in, and hands the parsed directives over; the watch loop takes the
//! changes between stops without waiting ([`start`]'s closure).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::directives::{self, Update, WatchSteering};

/// The shim folder the service's `programs` steer, and the agent binary
/// its scripts run.
#[derive(Debug, Clone)]
pub struct Shims {
    /// The folder (absolute).
    pub dir: PathBuf,
    /// The edge-agent binary (absolute).
    pub agent: PathBuf,
}

/// What steering needs.
pub struct Steering {
    /// The service's client (the uploader's, with its token and trust).
    pub client: uploader::transport::Client,
    /// Time between two fetches.
    pub every: Duration,
    /// This device's id (the per-device directives are its).
    pub device: agent_core::DeviceId,
    /// `--match`, which applies while the service sets no `match`.
    pub pattern: String,
    /// The shim folder, when the device opted in.
    pub shims: Option<Shims>,
}

/// The settings without the client (which holds a TLS stack, nothing to
/// print).
impl std::fmt::Debug for Steering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steering")
            .field("every", &self.every)
            .field("device", &self.device)
            .field("pattern", &self.pattern)
            .field("shims", &self.shims)
            .finish_non_exhaustive()
    }
}

/// Starts the fetcher thread; the returned closure gives the changes since
/// it was last called (only the latest directive counts; several may have
/// queued up). A shim folder others could write is refused now: the agent
/// writes it (as root, often) with each directive.
pub fn start(steering: Steering) -> anyhow::Result<Box<dyn FnMut() -> Update>> {
    let Steering {
        client,
        every,
        device,
        pattern,
        shims,
    } = steering;
    if let Some(shims) = &shims {
        crate::shim_folder::check_existing_part(&shims.dir)?;
    }
    // The shims are steered on the fetcher thread: writing a folder of
    // scripts is no work for the tracer thread.
    let steer_shims = move |json: &[u8]| {
        if let Some(Shims { dir, agent }) = &shims {
            match crate::shim::steer(dir, agent, json) {
                Ok(Some(what)) => eprintln!("edge-agent: shims in {}: {what}", dir.display()),
                Ok(None) => {}
                Err(e) => eprintln!("edge-agent: shims not steered: {e:#}"),
            }
        }
    };
    let fetched = directives::spawn_fetcher(client, every, Some(device), Box::new(steer_shims))
        .context("cannot start the directives thread")?;
    let mut steering = WatchSteering::new(&pattern);
    Ok(Box::new(move || {
        // They arrive parsed: nothing here is in proportion to a body.
        let mut change = Update::default();
        while let Ok(directive) = fetched.try_recv() {
            let update = steering.apply_parsed(directive);
            change.pattern = update.pattern.or(change.pattern);
            change.device = update.device.or(change.device);
        }
        change
    }))
}
