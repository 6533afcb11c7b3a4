//! `edge-service serve`: binds, prints where it listens, serves until
//! SIGINT/SIGTERM, then finishes the requests in flight (for at most
//! `--shutdown-timeout-ms`; the connections themselves are [`crate::conn`]'s).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::net::TcpListener;

use crate::alerts::Alerts;
use crate::conn::Limits;
use crate::login_limit::LoginLimits;
use crate::metrics::Metrics;
use crate::server::{router, App, Auth};
use crate::store::Location;
use crate::tokens::TokenFile;
use crate::webui::SessionConfig;

/// What `serve` needs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub db: Location,
    pub tokens: Option<PathBuf>,
    pub insecure_no_auth: bool,
    pub tls: Option<(PathBuf, PathBuf)>,
    pub busy_timeout: Duration,
    /// Connection timeouts, cap and shutdown bound.
    pub limits: Limits,
    /// `--retain`: prune old runs periodically.
    pub retain: Option<Retain>,
    /// `--auto`: run the anomaly detector with these thresholds.
    pub auto: Option<crate::proactive::detector::Thresholds>,
    /// `--peers-online`: run the live peer analysis with these options.
    pub online: Option<crate::online::OnlineOptions>,
    /// Where the live analysis' opened and closed incidents go besides the
    /// store and stderr (the alert webhook's queue).
    pub online_sink: Option<crate::online::sink::SinkQueue>,
    /// `--web-proxy-header`: the header naming the web UI's group.
    pub web_proxy_header: Option<String>,
    /// `--login-max-failures`, `--login-lockout-ms`.
    pub login_limits: LoginLimits,
    /// `--session-hours`: how long a web UI session lasts.
    pub session_ttl: Duration,
    /// How often a request may make the server look whether the tokens
    /// file changed.
    pub tokens_recheck: Duration,
    /// `--quota-*`: the ingest quotas.
    pub quotas: crate::quota::QuotaConfig,
    /// `--web-max-runs` and the other bounds of one web UI analysis.
    pub web_limits: crate::webui::WebLimits,
    /// `--alert-webhook` and its options (no URL: only the gauges).
    pub alerts: crate::alerts::WebhookOptions,
}

/// `serve --retain AGE [--keep-raw]`.
#[derive(Clone, Copy, Debug)]
pub struct Retain {
    pub older_than: Duration,
    pub keep_raw: bool,
    /// How often (hourly but in tests).
    pub every: Duration,
}

/// Runs the server until a shutdown signal.
pub fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    if let Some(auto) = &opts.auto {
        auto.check()?;
    }
    if let Some(online) = &opts.online {
        online.check()?;
    }
    let auth = match (&opts.tokens, opts.insecure_no_auth) {
        (Some(path), false) => Auth::Tokens(std::sync::Arc::new(TokenFile::open(
            path,
            opts.tokens_recheck,
        )?)),
        (Some(_), true) => bail!("--tokens and --insecure-no-auth exclude each other"),
        (None, true) if opts.listen.ip().is_loopback() => Auth::None,
        (None, true) => bail!(
            "--insecure-no-auth is only allowed on a loopback address, not {}",
            opts.listen
        ),
        (None, false) => bail!(
            "no --tokens FILE given (lines of `GROUP TOKEN`); for a local trial on loopback use --insecure-no-auth"
        ),
    };
    let tls = match &opts.tls {
        Some((cert, key)) => Some(crate::tls::server_config(cert, key)?),
        None => None,
    };
    check_limits(&opts.limits)?;
    opts.web_limits.check()?;
    let proxy_header = opts
        .web_proxy_header
        .as_deref()
        .map(|name| {
            axum::http::HeaderName::from_bytes(name.trim().as_bytes())
                .with_context(|| format!("--web-proxy-header `{name}` is not a valid header name"))
        })
        .transpose()?;
    for (name, value) in [
        ("--quota-address-burst", opts.quotas.address.burst),
        ("--quota-address-per-sec", opts.quotas.address.per_sec),
        ("--quota-device-burst", opts.quotas.device.burst),
        ("--quota-device-per-sec", opts.quotas.device.per_sec),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            bail!("{name} must be a number of at least 0 (0: no quota), not {value}");
        }
    }
    if opts.login_limits.max_failures == 0 {
        bail!("--login-max-failures must be at least 1");
    }
    let mut sessions = SessionConfig::new(&auth, proxy_header, tls.is_some(), opts.login_limits)?;
    sessions.ttl = opts.session_ttl;
    let reloadable = match &auth {
        Auth::Tokens(file) => Some(std::sync::Arc::clone(file)),
        Auth::None => None,
    };
    let metrics = Metrics::new();
    // The online analysis reports its incidents here: the gauges of
    // /metrics and the webhooks. Kept alive until the server stops.
    let alerts = Alerts::start(&opts.alerts, metrics.alerts().clone())?;
    for url in &opts.alerts.urls {
        if let Ok(uri) = crate::alerts::webhook::check_url(url) {
            eprintln!(
                "edge-service: alert: incident events go to {}",
                crate::alerts::webhook::target_of(&uri)
            );
        }
    }
    let app = App::new(
        opts.db.opener(opts.busy_timeout),
        opts.db.writers(),
        auth,
        opts.quotas,
        metrics,
    )
    .with_context(|| format!("cannot open the store {}", opts.db))?;
    if let Some(r) = opts.retain {
        crate::retention::start(
            opts.db.opener(opts.busy_timeout),
            r.older_than,
            r.keep_raw,
            r.every,
        )?;
    }
    if let Some(thresholds) = opts.auto.clone() {
        crate::proactive::task::start(opts.db.opener(opts.busy_timeout), thresholds)
            .context("cannot start the detector")?;
    }
    if let Some(online) = opts.online.clone() {
        // The incidents the store holds open count in the gauges from the
        // start (an earlier run, or another instance, opened them).
        let open_store = opts.db.opener(opts.busy_timeout);
        let open = open_store()
            .and_then(|mut store| store.open_incidents(None))
            .context("cannot read the open incidents")?;
        let open: Vec<_> = open
            .iter()
            .map(|row| row.alert(wire::alert::IncidentEvent::Opened))
            .collect();
        alerts.set_open(&open);
        // Opened and closed incidents go to the gauges and the webhooks
        // (a test may give its own sink instead).
        let sink = match opts.online_sink.clone() {
            Some(sink) => sink,
            None => crate::online::sink::SinkQueue::start(Box::new(alerts.clone()), 1024)
                .context("cannot start the incident sink")?,
        };
        crate::online::task::start(open_store, online, Some(sink))
            .context("cannot start the live peer analysis")?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let tcp = TcpListener::bind(opts.listen)
            .await
            .with_context(|| format!("cannot listen on {}", opts.listen))?;
        let local = tcp.local_addr()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        // Tests and scripts read this line to learn the port of `:0`.
        println!(
            "edge-service listening on {scheme}://{local} (db {})",
            opts.db
        );
        if let Some(file) = reloadable {
            reload_on_sighup(file);
        }
        let metrics = app.metrics().clone();
        let routes = router(app.clone()).merge(crate::webui::router(app, sessions, opts.web_limits)?);
        let tls = tls.map(tokio_rustls::TlsAcceptor::from);
        let drained =
            crate::conn::serve(tcp, tls, routes, opts.limits, metrics, shutdown_signal()).await;
        eprintln!(
            "edge-service: shutdown took {:.2} s: {} connection(s) open at the signal, {} closed unfinished at --shutdown-timeout-ms",
            drained.took.as_secs_f64(),
            drained.open_at_stop,
            drained.cut
        );
        anyhow::Ok(())
    })?;
    // Tasks still running (cut connections) are dropped with the runtime,
    // without waiting for them.
    runtime.shutdown_background();
    let unsent = alerts.waiting();
    if unsent > 0 {
        eprintln!("edge-service: alert: {unsent} incident event(s) not sent at shutdown");
    }
    drop(alerts);
    eprintln!("edge-service stopped");
    Ok(())
}

/// Refuses limits that would make the server useless, and warns when the
/// open-file limit is below the connection cap.
fn check_limits(limits: &Limits) -> anyhow::Result<()> {
    for (name, value) in [
        ("--header-timeout-ms", limits.header_timeout),
        ("--body-timeout-ms", limits.body_timeout),
        ("--idle-timeout-ms", limits.idle_timeout),
    ] {
        if value.is_zero() {
            bail!("{name} must be at least 1");
        }
    }
    if limits.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    // Besides the connections: the database, its WAL, readers, stdio.
    const SPARE_FILES: u64 = 64;
    if let Some(files) = crate::conn::open_files_limit() {
        if files < u64::from(limits.max_connections) + SPARE_FILES {
            eprintln!(
                "edge-service: warning: --max-connections {} but only {files} open files are allowed (ulimit -n); raise ulimit -n to at least {} or lower --max-connections (accepts failing for lack of file descriptors are retried)",
                limits.max_connections,
                u64::from(limits.max_connections) + SPARE_FILES
            );
        }
    }
    Ok(())
}

/// Re-reads the tokens file at each SIGHUP (token rotation without a
/// restart; a file that does not parse keeps the old tokens).
fn reload_on_sighup(file: std::sync::Arc<TokenFile>) {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(mut hangups) => {
            tokio::spawn(async move {
                while hangups.recv().await.is_some() {
                    let file = std::sync::Arc::clone(&file);
                    let _ = tokio::task::spawn_blocking(move || file.reload()).await;
                }
            });
        }
        Err(e) => eprintln!("edge-service: no SIGHUP reload of the tokens file: {e}"),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
