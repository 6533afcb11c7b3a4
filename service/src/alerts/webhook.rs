//! One webhook receiver (`serve --alert-webhook URL`): a thread of its own
//! that takes incident events from its [`Queue`] in order and POSTs each as
//! JSON (`wire::alert::IncidentAlert`), one request at a time. An event is
//! retried (head of line: nothing after it goes first) with exponential
//! back-off on a connection error, a timeout, a 5xx or a 429, until it is
//! delivered or displaced by a full queue; any other answer but 2xx (a 4xx,
//! a 3xx: redirects are not followed) drops it. Each outcome is one stderr
//! line `edge-service: alert: ...`, naming the receiver by scheme, host
//! and port only (a webhook's path often holds its secret).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use ureq::http::{StatusCode, Uri};
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};
use ureq::Agent;
use wire::alert::{IncidentAlert, IncidentEvent};

use super::metrics::{AlertMetrics, DropReason};
use super::queue::{Pushed, Queue};

/// How the webhooks send.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    /// `--alert-webhook`: the receivers (http:// or https://); each gets
    /// every event, in order, from a queue and thread of its own.
    pub urls: Vec<String>,
    /// `--alert-webhook-timeout-ms`: the longest one request may take,
    /// connecting included.
    pub timeout: Duration,
    /// `--alert-webhook-ca`: PEM file of the CA(s) to trust for https
    /// receivers instead of Mozilla's roots.
    pub ca_file: Option<PathBuf>,
    /// Events waiting per receiver (besides the one being sent).
    pub queue: usize,
    /// The first retry's delay; each further retry doubles it.
    pub retry_first: Duration,
    /// The longest delay between retries.
    pub retry_max: Duration,
    /// `--public-url`: the web UI's address as operators reach it; each
    /// body's `url` is then the incident's page there
    /// (`URL/incidents/ID`), else `null`.
    pub public_url: Option<String>,
}

impl Default for WebhookOptions {
    fn default() -> WebhookOptions {
        WebhookOptions {
            urls: Vec::new(),
            timeout: Duration::from_secs(10),
            ca_file: None,
            queue: 1000,
            retry_first: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            public_url: None,
        }
    }
}

impl WebhookOptions {
    /// Refuses values that would make the sender useless.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.timeout.is_zero() {
            bail!("--alert-webhook-timeout-ms must be at least 1");
        }
        if self.queue == 0 {
            bail!("the alert queue must hold at least 1 event");
        }
        if self.retry_first.is_zero() || self.retry_max < self.retry_first {
            bail!("the alert retry delays must be positive, the longest at least the first");
        }
        for url in &self.urls {
            check_url(url)?;
        }
        if let Some(url) = &self.public_url {
            check_public_url(url)?;
        }
        Ok(())
    }

    /// The page of incident `id` in the web UI at `--public-url`, if given.
    pub fn incident_url(&self, id: i64) -> Option<String> {
        let base = self.public_url.as_deref()?.trim_end_matches('/');
        Some(format!("{base}/incidents/{id}"))
    }
}

/// Checks `--public-url`: http or https, a host, and no query or fragment
/// (an incident's path is appended to it).
pub fn check_public_url(url: &str) -> anyhow::Result<()> {
    let uri: Uri = url
        .parse()
        .with_context(|| format!("--public-url {url:?} is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        bail!("--public-url {url:?}: the URL must start with http:// or https://");
    }
    if uri.host().is_none_or(str::is_empty) {
        bail!("--public-url {url:?} has no host");
    }
    if url.contains(['?', '#']) {
        bail!("--public-url {url:?}: no query or fragment (the incident's path is appended)");
    }
    Ok(())
}

/// Checks a `--alert-webhook` URL: http or https, with a host.
pub fn check_url(url: &str) -> anyhow::Result<Uri> {
    let uri: Uri = url
        .parse()
        .with_context(|| format!("--alert-webhook {url:?} is not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => bail!("--alert-webhook {url:?}: the URL must start with http:// or https://"),
    }
    if uri.host().is_none_or(str::is_empty) {
        bail!("--alert-webhook {url:?} has no host");
    }
    Ok(uri)
}

/// The receiver as logged: scheme, host and port, never the path or query.
pub fn target_of(uri: &Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("http");
    let host = uri.host().unwrap_or("?");
    match uri.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    }
}

/// The delay before retry `retry` (1: the first): `first`, doubled each
/// time, at most `max`.
pub fn backoff(retry: u32, first: Duration, max: Duration) -> Duration {
    let doublings = retry.saturating_sub(1).min(31);
    first.saturating_mul(1 << doublings).min(max)
}

/// What an answer means for the event.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Delivered,
    Retry,
    Refused,
}

fn verdict(status: StatusCode) -> Verdict {
    if status.is_success() {
        Verdict::Delivered
    } else if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        Verdict::Retry
    } else {
        Verdict::Refused
    }
}

/// An event as queued: the alert (for the log lines) and its JSON body,
/// made once for every receiver.
#[derive(Debug)]
pub struct Outgoing {
    pub alert: IncidentAlert,
    pub body: Vec<u8>,
}

/// How an event is named in the log.
fn describe(alert: &IncidentAlert) -> String {
    let event = match alert.event {
        IncidentEvent::Opened => "opened",
        IncidentEvent::Closed => "closed",
    };
    format!(
        "incident {} {event} ({}/{}, device {}, {})",
        alert.id, alert.group, alert.program, alert.device, alert.cause
    )
}

fn log(message: &str) {
    eprintln!("edge-service: alert: {message}");
}

/// Reads the CA file of `--alert-webhook-ca`.
fn read_ca_file(path: &Path) -> anyhow::Result<Vec<Certificate<'static>>> {
    let pem = std::fs::read(path)
        .with_context(|| format!("--alert-webhook-ca {}: cannot read", path.display()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        let item =
            item.with_context(|| format!("--alert-webhook-ca {}: not a PEM file", path.display()))?;
        if let PemItem::Certificate(cert) = item {
            certs.push(cert);
        }
    }
    if certs.is_empty() {
        bail!(
            "--alert-webhook-ca {}: no certificate in the file",
            path.display()
        );
    }
    Ok(certs)
}

/// The HTTP client of one receiver: the workspace's rustls (ring), the
/// timeouts, no redirects, no proxy for a loopback receiver.
fn agent_for(uri: &Uri, opts: &WebhookOptions) -> anyhow::Result<Agent> {
    let roots = match &opts.ca_file {
        Some(path) => RootCerts::new_with_certs(&read_ca_file(path)?),
        None => RootCerts::WebPki,
    };
    let tls = TlsConfig::builder()
        .provider(TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .root_certs(roots)
        .build();
    let host = uri.host().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = bare == "localhost"
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let proxy = if loopback {
        None
    } else {
        ureq::Proxy::try_from_env()
    };
    let config = Agent::config_builder()
        .tls_config(tls)
        .proxy(proxy)
        .http_status_as_error(false)
        // The body must not follow a redirect to another host.
        .max_redirects(0)
        .timeout_global(Some(opts.timeout))
        .user_agent(format!("edge-service/{}", env!("CARGO_PKG_VERSION")))
        .build();
    Ok(Agent::new_with_config(config))
}

/// One receiver's queue; its thread stops when this is dropped.
#[derive(Debug)]
pub struct Webhook {
    queue: Arc<Queue<Arc<Outgoing>>>,
}

impl Webhook {
    /// Starts the thread sending to `url` (checked by [`check_url`]).
    pub fn start(
        url: &str,
        opts: &WebhookOptions,
        metrics: AlertMetrics,
    ) -> anyhow::Result<Webhook> {
        let uri = check_url(url)?;
        let sender = Sender {
            agent: agent_for(&uri, opts)?,
            url: url.to_string(),
            target: target_of(&uri),
            queue: Arc::new(Queue::new(opts.queue)),
            metrics,
            retry_first: opts.retry_first,
            retry_max: opts.retry_max,
        };
        let queue = Arc::clone(&sender.queue);
        std::thread::Builder::new()
            .name("alert-webhook".into())
            .spawn(move || sender.run())
            .context("cannot start the alert webhook's thread")?;
        Ok(Webhook { queue })
    }

    /// Queues `event` without waiting; a full queue drops its oldest.
    pub fn push(&self, event: Arc<Outgoing>, metrics: &AlertMetrics) {
        match self.queue.push(event) {
            Pushed::Queued => metrics.queued().inc(),
            // One out, one in: the queued count stays.
            Pushed::Displaced(_) => metrics.count_dropped(DropReason::QueueFull),
            Pushed::Closed(_) => {}
        }
    }

    /// Events waiting (not counting the one being sent).
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// The sending thread's state.
struct Sender {
    agent: Agent,
    url: String,
    target: String,
    queue: Arc<Queue<Arc<Outgoing>>>,
    metrics: AlertMetrics,
    retry_first: Duration,
    retry_max: Duration,
}

/// One attempt's result.
enum Attempt {
    Answered(StatusCode, Option<Duration>),
    Failed(String),
}

impl Sender {
    fn run(self) {
        while let Some(event) = self.queue.pop_wait() {
            self.metrics.queued().dec();
            self.log_drops();
            if !self.deliver(&event) {
                return;
            }
        }
    }

    fn log_drops(&self) {
        let dropped = self.queue.take_unlogged_drops();
        if dropped > 0 {
            log(&format!(
                "{dropped} event(s) for {} dropped: its queue of {} was full (the oldest waiting go first; edge_alerts_dropped_total{{reason=\"queue_full\"}})",
                self.target,
                self.queue.capacity()
            ));
        }
    }

    /// Sends `event` until it is delivered or refused; `false` if the
    /// queue was closed while waiting to retry.
    fn deliver(&self, event: &Outgoing) -> bool {
        let what = describe(&event.alert);
        let mut attempt = 1u32;
        loop {
            let (why, retry_after) = match self.attempt(&event.body) {
                Attempt::Answered(status, retry_after) => match verdict(status) {
                    Verdict::Delivered => {
                        self.metrics.count_sent();
                        log(&format!(
                            "{what} delivered to {}: {status} (attempt {attempt})",
                            self.target
                        ));
                        return true;
                    }
                    Verdict::Refused => {
                        self.metrics.count_dropped(DropReason::Refused);
                        log(&format!(
                            "{what} refused by {}: {status}; dropped (only connection errors, 5xx and 429 are retried)",
                            self.target
                        ));
                        return true;
                    }
                    Verdict::Retry => (format!("{status}"), retry_after),
                },
                Attempt::Failed(why) => (why, None),
            };
            self.metrics.count_failed();
            let delay = backoff(attempt, self.retry_first, self.retry_max)
                .max(retry_after.unwrap_or_default().min(self.retry_max));
            log(&format!(
                "{what} to {} failed: {why} (attempt {attempt}); retrying in {delay:?}",
                self.target
            ));
            if !self.queue.sleep(delay) {
                return false;
            }
            self.log_drops();
            attempt = attempt.saturating_add(1);
        }
    }

    fn attempt(&self, body: &[u8]) -> Attempt {
        let sent = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .send(body);
        match sent {
            Ok(mut response) => {
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                // Read (a bounded part of) the answer so the connection can
                // be reused; what it says does not matter.
                let _ = response
                    .body_mut()
                    .with_config()
                    .limit(64 * 1024)
                    .read_to_vec();
                Attempt::Answered(status, retry_after)
            }
            Err(e) => Attempt::Failed(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_makes_each_incidents_link_and_is_checked() {
        let opts = |url: &str| WebhookOptions {
            public_url: Some(url.into()),
            ..WebhookOptions::default()
        };
        assert_eq!(WebhookOptions::default().incident_url(3), None);
        for base in ["https://edge.example.com", "https://edge.example.com/"] {
            assert_eq!(
                opts(base).incident_url(12).as_deref(),
                Some("https://edge.example.com/incidents/12")
            );
        }
        assert_eq!(
            opts("http://10.0.0.1:8080/edge").incident_url(1).as_deref(),
            Some("http://10.0.0.1:8080/edge/incidents/1")
        );
        for bad in [
            "edge.example.com",
            "ftp://x/",
            "https://x/?a=1",
            "https://x/#f",
            "http://",
        ] {
            let e = opts(bad).check().unwrap_err().to_string();
            assert!(e.contains("--public-url"), "{bad}: {e}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let s = Duration::from_secs;
        let delays: Vec<_> = (1..=8).map(|n| backoff(n, s(1), s(60))).collect();
        assert_eq!(delays, [s(1), s(2), s(4), s(8), s(16), s(32), s(60), s(60)]);
        assert_eq!(backoff(u32::MAX, s(1), s(60)), s(60));
    }

    #[test]
    fn only_connection_errors_5xx_and_429_are_retried() {
        assert_eq!(verdict(StatusCode::OK), Verdict::Delivered);
        assert_eq!(verdict(StatusCode::ACCEPTED), Verdict::Delivered);
        assert_eq!(verdict(StatusCode::SERVICE_UNAVAILABLE), Verdict::Retry);
        assert_eq!(verdict(StatusCode::INTERNAL_SERVER_ERROR), Verdict::Retry);
        assert_eq!(verdict(StatusCode::TOO_MANY_REQUESTS), Verdict::Retry);
        assert_eq!(verdict(StatusCode::BAD_REQUEST), Verdict::Refused);
        assert_eq!(verdict(StatusCode::NOT_FOUND), Verdict::Refused);
        assert_eq!(verdict(StatusCode::MOVED_PERMANENTLY), Verdict::Refused);
    }

    #[test]
    fn urls_are_checked_and_logged_without_their_path() {
        let uri = check_url("https://hooks.example.com/services/T0/SECRET?x=1").unwrap();
        assert_eq!(target_of(&uri), "https://hooks.example.com");
        let uri = check_url("http://127.0.0.1:9093/alert").unwrap();
        assert_eq!(target_of(&uri), "http://127.0.0.1:9093");
        for bad in [
            "ftp://host/x",
            "hooks.example.com/x",
            "http://",
            "not a url",
        ] {
            assert!(check_url(bad).is_err(), "{bad} accepted");
        }
    }
}
