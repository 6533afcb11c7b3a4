//! Prometheus metrics (`GET /metrics`, text format); the alerting's own
//! series are [`crate::alerts::AlertMetrics`], registered here.

use std::time::Duration;

use crate::alerts::AlertMetrics;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

/// The service's metrics; cheap to clone (shared counters).
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    request_seconds: HistogramVec,
    accepted: IntCounter,
    repeated: IntCounter,
    rejected: IntCounterVec,
    commit_seconds: Histogram,
    commit_runs: Histogram,
    commit_failures: IntCounter,
    housekeeping_failures: IntCounter,
    connections_open: IntGauge,
    connections_refused: IntCounter,
    connections_evicted: IntCounter,
    connection_timeouts: IntCounterVec,
    accept_errors: IntCounter,
    quota_refused: IntCounterVec,
    web_chunks: IntCounterVec,
    web_runs: IntCounterVec,
    web_running: IntGauge,
    web_refused: IntCounter,
    web_cancelled: IntCounter,
    alerts: AlertMetrics,
}

fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("static metric definition")
}

impl Metrics {
    /// Fresh metrics, all zero.
    pub fn new() -> Metrics {
        let requests = IntCounterVec::new(
            Opts::new(
                "edge_service_http_requests_total",
                "HTTP requests by route and status",
            ),
            &["route", "status"],
        )
        .expect("static metric definition");
        let request_seconds = HistogramVec::new(
            HistogramOpts::new(
                "edge_service_http_request_seconds",
                "HTTP request latency by route",
            )
            .buckets(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
            ]),
            &["route"],
        )
        .expect("static metric definition");
        let accepted = counter(
            "edge_service_summaries_accepted_total",
            "Summaries newly stored",
        );
        let repeated = counter(
            "edge_service_summaries_repeated_total",
            "Summaries acknowledged again (already stored)",
        );
        let rejected = IntCounterVec::new(
            Opts::new(
                "edge_service_summaries_rejected_total",
                "Summaries rejected, by reason",
            ),
            &["reason"],
        )
        .expect("static metric definition");
        let commit_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "edge_service_store_commit_seconds",
                "Store transaction latency (group commit)",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
            ]),
        )
        .expect("static metric definition");
        let commit_runs = Histogram::with_opts(
            HistogramOpts::new(
                "edge_service_store_commit_runs",
                "Runs written per store transaction",
            )
            .buckets(vec![
                1.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2000.0, 4096.0,
            ]),
        )
        .expect("static metric definition");
        let commit_failures = counter(
            "edge_service_store_commit_failures_total",
            "Store transactions that failed (nothing of them stored)",
        );
        let housekeeping_failures = counter(
            "edge_service_store_housekeeping_failures_total",
            "Store housekeeping runs (checkpoints) that failed",
        );
        let connections_open = IntGauge::new(
            "edge_service_connections_open",
            "Client connections open now",
        )
        .expect("static metric definition");
        let connections_refused = counter(
            "edge_service_connections_refused_total",
            "Connections refused because --max-connections were open (503, or closed for TLS)",
        );
        let connections_evicted = counter(
            "edge_service_connections_evicted_total",
            "Idle keep-alive connections closed to make room for a new one at --max-connections",
        );
        let connection_timeouts = IntCounterVec::new(
            Opts::new(
                "edge_service_connection_timeouts_total",
                "Connections closed by a timeout, by kind (handshake, header, body, idle)",
            ),
            &["kind"],
        )
        .expect("static metric definition");
        for kind in ["handshake", "header", "body", "idle"] {
            connection_timeouts.with_label_values(&[kind]);
        }
        let accept_errors = counter(
            "edge_service_accept_errors_total",
            "Failed accepts (out of file descriptors, ...); the server backs off and retries",
        );
        let quota_refused = IntCounterVec::new(
            Opts::new(
                "edge_service_ingest_quota_refused_total",
                "Uploads refused with 429 over an ingest quota, by reason (address, device)",
            ),
            &["reason"],
        )
        .expect("static metric definition");
        for reason in ["address", "device"] {
            quota_refused.with_label_values(&[reason]);
        }
        let web_chunks = IntCounterVec::new(
            Opts::new(
                "edge_service_web_chunks_read_total",
                "Store queries made by the web UI's analyses, by page (diagnosis, peers)",
            ),
            &["page"],
        )
        .expect("static metric definition");
        let web_runs = IntCounterVec::new(
            Opts::new(
                "edge_service_web_runs_read_total",
                "Runs and windows read by the web UI's analyses, by page (diagnosis, peers)",
            ),
            &["page"],
        )
        .expect("static metric definition");
        for page in ["diagnosis", "peers"] {
            web_chunks.with_label_values(&[page]);
            web_runs.with_label_values(&[page]);
        }
        let web_running = IntGauge::new(
            "edge_service_web_analyses_running",
            "Web UI analyses (diagnosis, peers) running now",
        )
        .expect("static metric definition");
        let web_refused = counter(
            "edge_service_web_analyses_refused_total",
            "Web UI analyses refused (503) because --web-analyses or --web-analyses-per-group were running",
        );
        let web_cancelled = counter(
            "edge_service_web_analyses_cancelled_total",
            "Web UI analyses stopped because their client went away",
        );
        let registry = Registry::new();
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(request_seconds.clone()),
            Box::new(accepted.clone()),
            Box::new(repeated.clone()),
            Box::new(rejected.clone()),
            Box::new(commit_seconds.clone()),
            Box::new(commit_runs.clone()),
            Box::new(commit_failures.clone()),
            Box::new(housekeeping_failures.clone()),
            Box::new(connections_open.clone()),
            Box::new(connections_refused.clone()),
            Box::new(connections_evicted.clone()),
            Box::new(connection_timeouts.clone()),
            Box::new(accept_errors.clone()),
            Box::new(quota_refused.clone()),
            Box::new(web_chunks.clone()),
            Box::new(web_runs.clone()),
            Box::new(web_running.clone()),
            Box::new(web_refused.clone()),
            Box::new(web_cancelled.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        let alerts = AlertMetrics::register(&registry);
        Metrics {
            registry,
            requests,
            request_seconds,
            accepted,
            repeated,
            rejected,
            commit_seconds,
            commit_runs,
            commit_failures,
            housekeeping_failures,
            connections_open,
            connections_refused,
            connections_evicted,
            connection_timeouts,
            accept_errors,
            quota_refused,
            web_chunks,
            web_runs,
            web_running,
            web_refused,
            web_cancelled,
            alerts,
        }
    }

    /// The alerting's series (open incidents, webhook outcomes).
    pub fn alerts(&self) -> &AlertMetrics {
        &self.alerts
    }

    /// An upload was refused over an ingest quota (`address`, `device`).
    pub fn count_quota_refused(&self, reason: &str) {
        self.quota_refused.with_label_values(&[reason]).inc();
    }

    /// A web UI analysis on `page` is about to make one store query.
    pub fn count_web_chunk(&self, page: &str) {
        self.web_chunks.with_label_values(&[page]).inc();
    }

    /// A web UI analysis on `page` read `n` runs (or windows).
    pub fn count_web_runs(&self, page: &str, n: u64) {
        self.web_runs.with_label_values(&[page]).inc_by(n);
    }

    /// A web UI analysis started (`true`) or ended (`false`).
    pub fn web_analysis_running(&self, running: bool) {
        if running {
            self.web_running.inc();
        } else {
            self.web_running.dec();
        }
    }

    /// A web UI analysis was refused: too many running.
    pub fn count_web_refused(&self) {
        self.web_refused.inc();
    }

    /// A web UI analysis stopped because its client went away.
    pub fn count_web_cancelled(&self) {
        self.web_cancelled.inc();
    }

    /// A connection was admitted.
    pub fn connection_opened(&self) {
        self.connections_open.inc();
    }

    /// An admitted connection closed.
    pub fn connection_closed(&self) {
        self.connections_open.dec();
    }

    /// A connection was refused at the cap.
    pub fn count_refused(&self) {
        self.connections_refused.inc();
    }

    /// An idle connection was closed to make room.
    pub fn count_evicted(&self) {
        self.connections_evicted.inc();
    }

    /// A connection was closed by a timeout of this kind.
    pub fn count_timeout(&self, kind: &str) {
        self.connection_timeouts.with_label_values(&[kind]).inc();
    }

    /// An accept failed.
    pub fn count_accept_error(&self) {
        self.accept_errors.inc();
    }

    /// Counts a failed housekeeping run.
    pub fn count_housekeeping_failure(&self) {
        self.housekeeping_failures.inc();
    }

    /// Counts one answered request.
    pub fn observe_request(&self, route: &str, status: u16, elapsed: Duration) {
        self.requests
            .with_label_values(&[route, &status.to_string()])
            .inc();
        self.request_seconds
            .with_label_values(&[route])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts stored and repeated summaries.
    pub fn count_accepted(&self, stored: u64, repeated: u64) {
        self.accepted.inc_by(stored);
        self.repeated.inc_by(repeated);
    }

    /// Counts one rejected summary.
    pub fn count_rejected(&self, reason: &str) {
        self.rejected.with_label_values(&[reason]).inc();
    }

    /// Records one store transaction.
    pub fn observe_commit(&self, elapsed: Duration, runs: usize, ok: bool) {
        self.commit_seconds.observe(elapsed.as_secs_f64());
        self.commit_runs.observe(runs as f64);
        if !ok {
            self.commit_failures.inc();
        }
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding to a Vec cannot fail for well-formed metrics.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
