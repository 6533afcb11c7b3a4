//! The server's connections: the accept loop, the connection cap, the
//! per-connection header, body and idle timeouts, and the bounded graceful
//! shutdown. axum handles the requests; this module decides which
//! connections live and for how long (see "Connections" in
//! `docs/service.md`).
//!
//! Each connection is in one phase at a time, and each phase but one has a
//! deadline:
//!
//! | phase | from | deadline |
//! | --- | --- | --- |
//! | handshake | accept (TLS) | `header_timeout` after accept |
//! | idle | accept (plain) or the end of a response | `idle_timeout` |
//! | head | the first byte of a request | `header_timeout` |
//! | body | the end of the request head | `body_timeout` |
//! | handling | the end of the body | none: the handler's work is bounded by the store |
//! | responding | the handler's answer | `idle_timeout` without write progress |
//!
//! A request is acknowledged only in its response, after the commit, so a
//! connection closed at any point loses nothing acknowledged.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, Response};
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::{sleep, sleep_until, timeout, Instant};
use tokio_rustls::TlsAcceptor;

use crate::metrics::Metrics;

/// How long connections may take, how many there may be, and how long a
/// shutdown may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From a request's first byte to the end of its head (and for a TLS
    /// handshake, from accept to its end).
    pub header_timeout: Duration,
    /// From the end of a request's head to the end of its body.
    pub body_timeout: Duration,
    /// A keep-alive connection waiting for its next request, or a response
    /// the client stopped reading.
    pub idle_timeout: Duration,
    /// Connections open at once; more are refused (an idle one is closed
    /// first to make room when there is one).
    pub max_connections: u32,
    /// After SIGTERM, how long requests in flight may take to finish.
    pub shutdown_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            max_connections: 1000,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// Connections being refused at once (each answered 503 on its own task,
/// for at most [`REFUSAL_TIME`]); beyond that they are just closed.
const REFUSAL_SLOTS: usize = 64;
/// How long a refused connection is kept to deliver its 503.
const REFUSAL_TIME: Duration = Duration::from_secs(1);
/// How long a new connection waits for the idle one closed in its favour.
const EVICTION_WAIT: Duration = Duration::from_millis(200);
/// Longest pause after failed accepts (out of file descriptors, ...).
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Handshake,
    Idle,
    Head,
    Body,
    Handling,
    Responding,
}

#[derive(Debug)]
struct Inner {
    phase: Phase,
    /// When the phase began (responding: the last write progress).
    since: Instant,
    /// Asked to close, if idle, to make room for a new connection.
    evict: bool,
}

/// One connection's phase, shared by its I/O, its service and its task.
#[derive(Debug)]
struct ConnState {
    inner: Mutex<Inner>,
    /// Wakes the connection's task to recompute its deadline.
    wake: Notify,
}

impl ConnState {
    fn new(phase: Phase) -> ConnState {
        ConnState {
            inner: Mutex::new(Inner {
                phase,
                since: Instant::now(),
                evict: false,
            }),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means a panic elsewhere; the state is plain
        // data and still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves to `to` (only from `from`, when given) and wakes the task.
    fn enter(&self, from: Option<Phase>, to: Phase) {
        let mut inner = self.lock();
        if from.is_none_or(|f| f == inner.phase) && inner.phase != to {
            inner.phase = to;
            inner.since = Instant::now();
            drop(inner);
            self.wake.notify_one();
        }
    }

    fn phase(&self) -> Phase {
        self.lock().phase
    }

    /// Bytes came in: an idle connection has begun a request.
    fn on_read(&self) {
        self.enter(Some(Phase::Idle), Phase::Head);
    }

    /// Bytes went out: a response is making progress.
    fn on_write(&self) {
        let mut inner = self.lock();
        if inner.phase == Phase::Responding {
            inner.since = Instant::now();
        }
    }

    /// The current deadline and what kind of timeout passing it is.
    fn deadline(&self, limits: &Limits) -> Option<(Instant, &'static str)> {
        let inner = self.lock();
        let (limit, kind) = match inner.phase {
            Phase::Handshake => (limits.header_timeout, "handshake"),
            Phase::Idle | Phase::Responding => (limits.idle_timeout, "idle"),
            Phase::Head => (limits.header_timeout, "header"),
            Phase::Body => (limits.body_timeout, "body"),
            Phase::Handling => return None,
        };
        Some((inner.since + limit, kind))
    }

    /// Whether the task should close an idle connection to make room.
    fn take_eviction(&self) -> bool {
        let mut inner = self.lock();
        let evict = inner.evict && inner.phase == Phase::Idle;
        inner.evict = false;
        evict
    }
}

/// The open connections, for closing idle ones when the cap is reached.
#[derive(Debug, Default)]
struct Registry {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
}

impl Registry {
    fn add(self: &Arc<Self>, state: Arc<ConnState>, metrics: Metrics) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, state);
        metrics.connection_opened();
        Registered {
            id,
            registry: Arc::clone(self),
            metrics,
        }
    }

    /// Asks the connection idle the longest to close; false if none is idle.
    fn evict_oldest_idle(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = open
            .values()
            .filter_map(|s| {
                let inner = s.lock();
                (inner.phase == Phase::Idle && !inner.evict).then_some((inner.since, s))
            })
            .min_by_key(|(since, _)| *since);
        match oldest {
            Some((_, state)) => {
                state.lock().evict = true;
                state.wake.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Removes a connection from the registry (and the open gauge) however its
/// task ends.
struct Registered {
    id: u64,
    registry: Arc<Registry>,
    metrics: Metrics,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.metrics.connection_closed();
    }
}

/// How a shutdown went.
#[derive(Clone, Copy, Debug)]
pub struct Drained {
    /// Connections open when the shutdown began.
    pub open_at_stop: u32,
    /// Connections still open when `shutdown_timeout` ran out (closed then).
    pub cut: u32,
    /// From the signal to the last connection closed (or the timeout).
    pub took: Duration,
}

/// Serves `router` on `tcp` (TLS when `tls` is given) until `shutdown`
/// completes; then stops accepting, lets requests in flight finish for at
/// most `limits.shutdown_timeout` and returns.
pub async fn serve(
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    limits: Limits,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) -> Drained {
    let permits = Arc::new(Semaphore::new(limits.max_connections as usize));
    let refusals = Arc::new(Semaphore::new(REFUSAL_SLOTS));
    let registry = Arc::new(Registry::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let refusal = refusal_response(limits.max_connections);
    let admit = Arc::new(Admit {
        permits: Arc::clone(&permits),
        refusals,
        registry,
        tls,
        router,
        limits,
        metrics: metrics.clone(),
        stop: stop_rx,
        refusal,
    });
    tokio::pin!(shutdown);
    let mut backoff = Duration::ZERO;
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = tcp.accept() => match accepted {
                Ok((stream, peer)) => {
                    backoff = Duration::ZERO;
                    admit.admit(stream, peer);
                }
                Err(e) => {
                    // EMFILE and the like: the process is out of something
                    // that closing connections gives back. Never exit; say
                    // so once per burst and retry after a growing pause.
                    metrics.count_accept_error();
                    if backoff.is_zero() {
                        eprintln!("edge-service: cannot accept a connection: {e}; retrying");
                    }
                    backoff = (backoff * 2).clamp(Duration::from_millis(10), MAX_ACCEPT_BACKOFF);
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = sleep(backoff) => {}
                    }
                }
            },
        }
    }
    // Stop accepting: the port is closed from here on.
    drop(tcp);
    let started = Instant::now();
    let open_at_stop = limits.max_connections - permits.available_permits() as u32;
    let _ = stop_tx.send(true);
    // Every connection holds a permit until its task ends.
    let all = timeout(
        limits.shutdown_timeout,
        permits.acquire_many(limits.max_connections),
    )
    .await;
    let cut = match all {
        Ok(_) => 0,
        Err(_) => limits.max_connections - permits.available_permits() as u32,
    };
    Drained {
        open_at_stop,
        cut,
        took: started.elapsed(),
    }
}

/// What admitting a connection needs.
struct Admit {
    permits: Arc<Semaphore>,
    refusals: Arc<Semaphore>,
    registry: Arc<Registry>,
    tls: Option<TlsAcceptor>,
    router: Router,
    limits: Limits,
    metrics: Metrics,
    stop: watch::Receiver<bool>,
    refusal: Arc<[u8]>,
}

impl Admit {
    /// Serves `stream` on a task of its own, or refuses it when the cap is
    /// reached and no idle connection can make room.
    fn admit(self: &Arc<Self>, stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        match Arc::clone(&self.permits).try_acquire_owned() {
            Ok(permit) => self.start(stream, peer, permit),
            Err(_) if self.registry.evict_oldest_idle() => {
                // Wait for the evicted connection's permit on a task of
                // its own: the accept loop goes on at once. There are at
                // most as many such waits as idle connections asked to go.
                self.metrics.count_evicted();
                let admit = Arc::clone(self);
                tokio::spawn(async move {
                    let permit = timeout(EVICTION_WAIT, Arc::clone(&admit.permits).acquire_owned())
                        .await
                        .ok()
                        .and_then(Result::ok);
                    match permit {
                        Some(permit) => admit.start(stream, peer, permit),
                        None => {
                            admit.metrics.count_refused();
                            admit.refuse(stream);
                        }
                    }
                });
            }
            Err(_) => {
                self.metrics.count_refused();
                self.refuse(stream);
            }
        }
    }

    /// Serves an admitted connection on a task of its own.
    fn start(&self, stream: TcpStream, peer: SocketAddr, permit: OwnedSemaphorePermit) {
        let first = if self.tls.is_some() {
            Phase::Handshake
        } else {
            Phase::Idle
        };
        let state = Arc::new(ConnState::new(first));
        let registered = self.registry.add(Arc::clone(&state), self.metrics.clone());
        let conn = Conn {
            state,
            peer,
            router: self.router.clone(),
            limits: self.limits,
            metrics: self.metrics.clone(),
            stop: self.stop.clone(),
        };
        let tls = self.tls.clone();
        tokio::spawn(async move {
            let _held = (permit, registered);
            match tls {
                None => conn.run(stream).await,
                Some(acceptor) => {
                    if let Some(stream) = conn.handshake(&acceptor, stream).await {
                        conn.state.enter(None, Phase::Idle);
                        conn.run(stream).await;
                    }
                }
            }
        });
    }

    /// Answers 503 + `Connection: close` and closes. A TLS client would
    /// read a plain-text answer as a broken handshake, so TLS connections
    /// are closed at once instead (a handshake costs more than the refusal
    /// saves).
    fn refuse(&self, mut stream: TcpStream) {
        if self.tls.is_some() {
            return;
        }
        let Ok(slot) = Arc::clone(&self.refusals).try_acquire_owned() else {
            return;
        };
        let answer = Arc::clone(&self.refusal);
        tokio::spawn(async move {
            let _slot: OwnedSemaphorePermit = slot;
            let _ = timeout(REFUSAL_TIME, async {
                stream.write_all(&answer).await?;
                stream.shutdown().await?;
                // Read what the client sent until it closes: closing with
                // unread bytes would reset the connection and could destroy
                // the answer before the client reads it.
                let mut sink = [0u8; 1024];
                let mut read = 0usize;
                while read < 64 * 1024 {
                    match stream.read(&mut sink).await? {
                        0 => break,
                        n => read += n,
                    }
                }
                io::Result::Ok(())
            })
            .await;
        });
    }
}

fn refusal_response(max: u32) -> Arc<[u8]> {
    let body = format!("{{\"error\":\"too many connections (at most {max}), retry later\"}}");
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        crate::server::RETRY_AFTER_SECS,
        body.len()
    )
    .into_bytes()
    .into()
}

/// One admitted connection.
struct Conn {
    state: Arc<ConnState>,
    /// The client's address (handlers read it as `ConnectInfo`: login
    /// limits and ingest quotas count per address).
    peer: SocketAddr,
    router: Router,
    limits: Limits,
    metrics: Metrics,
    stop: watch::Receiver<bool>,
}

impl Conn {
    /// The TLS handshake, bounded by `header_timeout` and the shutdown.
    async fn handshake(
        &self,
        acceptor: &TlsAcceptor,
        stream: TcpStream,
    ) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
        let mut stop = self.stop.clone();
        tokio::select! {
            done = timeout(self.limits.header_timeout, acceptor.accept(stream)) => match done {
                Ok(Ok(tls)) => Some(tls),
                Ok(Err(_)) => None,
                Err(_) => {
                    self.metrics.count_timeout("handshake");
                    None
                }
            },
            _ = stop.wait_for(|s| *s) => None,
        }
    }

    /// Serves HTTP/1.1 on `io` until the client closes, a deadline passes,
    /// the connection is evicted, or the shutdown closes it.
    async fn run<S>(&self, io: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = TokioIo::new(Watched {
            io,
            state: Arc::clone(&self.state),
        });
        let service = Service {
            router: self.router.clone(),
            state: Arc::clone(&self.state),
            peer: self.peer,
        };
        // No hyper timer: every timeout is this loop's.
        let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
        tokio::pin!(conn);
        let mut stop = self.stop.clone();
        let mut draining = false;
        loop {
            let deadline = self.state.deadline(&self.limits);
            let expiry = async {
                match deadline {
                    Some((at, _)) => sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // Errors are the client's (a reset, a malformed request,
                // which hyper has answered 400): nothing to do but close.
                _ = conn.as_mut() => return,
                () = expiry => {
                    // The phase may have changed since the deadline was
                    // taken: only a deadline still passed closes.
                    if let Some((at, kind)) = self.state.deadline(&self.limits) {
                        if at <= Instant::now() {
                            self.metrics.count_timeout(kind);
                            return;
                        }
                    }
                }
                () = self.state.wake.notified() => {
                    if self.state.take_eviction() {
                        return;
                    }
                }
                _ = stop.wait_for(|s| *s), if !draining => {
                    draining = true;
                    // Nothing of a request received yet (or only part of
                    // its head): close now. Otherwise hyper finishes the
                    // request in flight and then closes.
                    if matches!(self.state.phase(), Phase::Idle | Phase::Head) {
                        return;
                    }
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// The connection's I/O, telling its state about reads and writes.
struct Watched<S> {
    io: S,
    state: Arc<ConnState>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.on_read();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.state.on_write();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.state.on_write();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Hands each request to the router, marking the phases around it.
#[derive(Clone)]
struct Service {
    router: Router,
    state: Arc<ConnState>,
    peer: SocketAddr,
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<WatchedResponse>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<WatchedResponse>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, req: Request<Incoming>) -> Answer {
        use http_body::Body as _;
        let next = if req.body().is_end_stream() {
            Phase::Handling
        } else {
            Phase::Body
        };
        self.state.enter(None, next);
        let state = Arc::clone(&self.state);
        let mut req = req.map(|body| {
            Body::new(WatchedRequest {
                body,
                state: Arc::clone(&state),
            })
        });
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(self.peer));
        let mut router = self.router.clone();
        Box::pin(async move {
            let response = oneshot(&mut router, req).await?;
            state.enter(None, Phase::Responding);
            Ok(response.map(|body| WatchedResponse { body, state }))
        })
    }
}

/// Waits until `service` is ready, then calls it once.
async fn oneshot<S>(service: &mut S, req: Request<Body>) -> Result<S::Response, S::Error>
where
    S: tower_service::Service<Request<Body>>,
{
    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(req).await
}

/// A request body: its end (or its being dropped unread) ends the body
/// phase.
struct WatchedRequest {
    body: Incoming,
    state: Arc<ConnState>,
}

impl WatchedRequest {
    fn done(&self) {
        self.state.enter(Some(Phase::Body), Phase::Handling);
    }
}

impl http_body::Body for WatchedRequest {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(None | Some(Err(_))) => self.done(),
            Poll::Ready(Some(Ok(_))) if self.body.is_end_stream() => self.done(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for WatchedRequest {
    fn drop(&mut self) {
        self.done();
    }
}

/// A response body: its end makes the connection idle.
struct WatchedResponse {
    body: Body,
    state: Arc<ConnState>,
}

impl WatchedResponse {
    fn done(&self) {
        self.state.enter(Some(Phase::Responding), Phase::Idle);
    }
}

impl http_body::Body for WatchedResponse {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.done();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for WatchedResponse {
    fn drop(&mut self) {
        self.done();
    }
}

/// The soft limit on open files (`ulimit -n`), from `/proc/self/limits`.
pub fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}
