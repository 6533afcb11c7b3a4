//! Alerting on incidents (issue 35; `docs/peers.md`, "Online: alerting"):
//! what the live peer analysis calls when an incident opens or closes.
//!
//! The analysis holds one [`Alerts`] (made by `serve` from its
//! `--alert-webhook` options and the service's metrics) and calls
//!
//! - [`Alerts::incident`] with each `wire::alert::IncidentAlert` it emits,
//!   in the order it emits them: the `edge_incidents_open{group, cause,
//!   errno}` gauge follows (`opened` adds the incident, `closed` removes
//!   it) and every webhook gets the event queued. The call never waits on
//!   the network: it serializes the body and takes, per webhook, a lock
//!   that no I/O holds;
//! - [`Alerts::set_open`] with the incidents open in the store when it
//!   (re)starts, e.g. when this instance takes the analysis' lock: the
//!   gauges are set from them, nothing is sent.
//!
//! [`queue`] is the bounded FIFO (drop-oldest), [`webhook`] one receiver's
//! sending thread (retries, back-off, order), [`metrics`] the series.

pub mod metrics;
mod queue;
pub mod webhook;

use std::sync::Arc;

use wire::alert::{IncidentAlert, IncidentEvent};

pub use metrics::AlertMetrics;
pub use webhook::WebhookOptions;
use webhook::{Outgoing, Webhook};

/// The alerting handle; cheap to clone. The webhooks' threads stop when
/// the last clone is dropped (events still waiting are not sent).
#[derive(Clone, Debug)]
pub struct Alerts {
    metrics: AlertMetrics,
    webhooks: Arc<Vec<Webhook>>,
    /// What makes each body's `url` (`--public-url`).
    opts: Arc<WebhookOptions>,
}

impl Alerts {
    /// Starts one sending thread per webhook of `opts` (none: only the
    /// gauges), counting into `metrics` (the service's, so `/metrics`
    /// shows them: [`crate::metrics::Metrics::alerts`]).
    pub fn start(opts: &WebhookOptions, metrics: AlertMetrics) -> anyhow::Result<Alerts> {
        opts.check()?;
        let webhooks = opts
            .urls
            .iter()
            .map(|url| Webhook::start(url, opts, metrics.clone()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Alerts {
            metrics,
            webhooks: Arc::new(webhooks),
            opts: Arc::new(opts.clone()),
        })
    }

    /// An incident opened or closed: the gauges follow and each webhook
    /// gets the event queued, its `url` the incident's page under
    /// `--public-url` when given and not already set. Never waits on a
    /// receiver.
    pub fn incident(&self, alert: &IncidentAlert) {
        match alert.event {
            IncidentEvent::Opened => self.metrics.opened(alert),
            IncidentEvent::Closed => self.metrics.closed(alert),
        }
        if self.webhooks.is_empty() {
            return;
        }
        let linked;
        let alert = match self.opts.incident_url(alert.id) {
            Some(url) if alert.url.is_none() => {
                linked = IncidentAlert {
                    url: Some(url),
                    ..alert.clone()
                };
                &linked
            }
            _ => alert,
        };
        let body = match serde_json::to_vec(alert) {
            Ok(body) => body,
            // Only a non-finite deviation makes a body JSON cannot hold.
            Err(_) => {
                let mut finite = alert.clone();
                finite.deviation = 0.0;
                serde_json::to_vec(&finite).unwrap_or_default()
            }
        };
        let event = Arc::new(Outgoing {
            alert: alert.clone(),
            body,
        });
        for webhook in self.webhooks.iter() {
            webhook.push(Arc::clone(&event), &self.metrics);
        }
    }

    /// The incidents open now (e.g. read from the store at a restart): sets
    /// the gauges, sends nothing.
    pub fn set_open(&self, open: &[IncidentAlert]) {
        self.metrics.set_open(open);
    }

    /// Events waiting to be sent, every webhook together (not counting
    /// those being sent).
    pub fn waiting(&self) -> usize {
        self.webhooks.iter().map(Webhook::waiting).sum()
    }

    /// The series this counts into.
    pub fn metrics(&self) -> &AlertMetrics {
        &self.metrics
    }
}

/// The live analysis' incidents go to the gauges and the webhooks (from
/// the sink's own thread; [`Alerts::incident`] never waits either).
impl crate::online::sink::IncidentSink for Alerts {
    fn deliver(&mut self, alert: IncidentAlert) {
        self.incident(&alert);
    }

    fn open_now(&mut self, open: Vec<IncidentAlert>) {
        self.set_open(&open);
    }
}
