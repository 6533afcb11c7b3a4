//! `edge-service serve`: binds, prints where it listens, serves until
//! SIGINT/SIGTERM, then finishes the requests in flight.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::metrics::Metrics;
use crate::server::{router, App, Auth};
use crate::store::{SqliteStore, Store, StoreError, StoreOpener};
use crate::tokens::Tokens;

/// What `serve` needs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub db: PathBuf,
    pub tokens: Option<PathBuf>,
    pub insecure_no_auth: bool,
    pub tls: Option<(PathBuf, PathBuf)>,
    pub busy_timeout: Duration,
}

/// Opens the server's connections to the SQLite file at `db`. Checkpoints
/// are left mostly to the server's housekeeping thread.
pub fn sqlite_opener(db: PathBuf, busy_timeout: Duration) -> StoreOpener {
    Arc::new(move || {
        SqliteStore::open(&db, busy_timeout)
            .and_then(|s| s.defer_checkpoints().map(|()| s))
            .map(|s| Box::new(s) as Box<dyn Store>)
            .map_err(|e| StoreError::Failed(format!("{e:#}")))
    })
}

/// Runs the server until a shutdown signal.
pub fn serve(opts: ServeOptions) -> anyhow::Result<()> {
    let auth = match (&opts.tokens, opts.insecure_no_auth) {
        (Some(path), false) => Auth::Tokens(Tokens::load(path)?),
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
    let app = App::new(
        sqlite_opener(opts.db.clone(), opts.busy_timeout),
        auth,
        Metrics::new(),
    )
    .with_context(|| format!("cannot open the store {}", opts.db.display()))?;
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
            opts.db.display()
        );
        let routes = router(app);
        match tls {
            Some(config) => {
                let listener = crate::tls::TlsListener::new(tcp, config)?;
                axum::serve(listener, routes)
                    .with_graceful_shutdown(shutdown_signal())
                    .await?;
            }
            None => {
                let listener = tcp.tap_io(|stream| {
                    let _ = stream.set_nodelay(true);
                });
                axum::serve(listener, routes)
                    .with_graceful_shutdown(shutdown_signal())
                    .await?;
            }
        }
        anyhow::Ok(())
    })?;
    eprintln!("edge-service stopped");
    Ok(())
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
