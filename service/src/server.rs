//! The HTTP API (see `docs/service.md` and the ingest protocol in the
//! contracts): routes, authentication, and the mapping of every failure to
//! a status and a JSON `{"error": ...}` body.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_core::{DeviceId, ParseIdError, RunId};
use axum::body::Bytes;
use axum::extract::{
    ConnectInfo, DefaultBodyLimit, FromRequest, MatchedPath, Path, Query, Request, State,
};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::directive::Directive;
use crate::ingest::{self, Rejection};
use crate::metrics::Metrics;
use crate::operators::{looks_like_secret, secret_hash, Credential};
use crate::proactive::directives::DeviceDirective;
use crate::proactive::reports::Report;
use crate::quota::{Buckets, QuotaConfig};
use crate::store::{
    DeviceFilter, DeviceRow, Inserted, RunFilter, RunRow, Store, StoreError, StoreOpener,
};
use crate::tokens::TokenFile;
use crate::writer::{WriteError, Writer};
use agent_core::framing::{FramingError, Items, CONTENT_TYPE, MAX_BODY};

/// Seconds a client is told to wait after a 503.
pub const RETRY_AFTER_SECS: u32 = 5;
/// Runs `GET /v1/runs` returns when no `limit` is given.
pub const DEFAULT_RUNS_LIMIT: u64 = 1000;
/// Largest `limit` accepted by `GET /v1/runs` and `GET /v1/devices`.
pub const MAX_RUNS_LIMIT: u64 = 100_000;
/// Devices `GET /v1/devices` returns when no `limit` is given.
pub const DEFAULT_DEVICES_LIMIT: u64 = 1000;

/// Who may call the API.
#[derive(Clone, Debug)]
pub enum Auth {
    /// Devices: bearer tokens, each naming its group, that only upload
    /// summaries and read directives. Operators (fleet data, the web UI):
    /// credentials in the store ([`crate::operators`]).
    Tokens(Arc<TokenFile>),
    /// Anyone (loopback development only): a summary's group is its
    /// `group` fact or `default`; any group's data may be read.
    None,
}

/// What a refused device token is told on an operator's route.
pub const DEVICE_TOKEN_REFUSED: &str = "a device token may only upload summaries and read \
    directives; fleet data needs an operator's API token or web session (docs/service.md)";

/// The ingest quotas' buckets ([`crate::quota`]).
#[derive(Debug)]
struct Quotas {
    address: Buckets<IpAddr>,
    device: Buckets<DeviceId>,
}

/// What the handlers share.
pub struct App {
    auth: Auth,
    quotas: Quotas,
    writer: Writer,
    open_store: StoreOpener,
    /// Idle read connections, reused by the next reader.
    readers: Mutex<Vec<Box<dyn Store>>>,
    metrics: Metrics,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Opens `writers` write connections and starts a writer thread on
    /// each.
    pub fn new(
        open_store: StoreOpener,
        writers: usize,
        auth: Auth,
        quotas: QuotaConfig,
        metrics: Metrics,
    ) -> anyhow::Result<Arc<App>> {
        let stores = (0..writers.max(1))
            .map(|_| open_store())
            .collect::<Result<Vec<_>, _>>()?;
        let writer = Writer::start(stores, metrics.clone())?;
        start_housekeeping(open_store()?, &metrics)?;
        Ok(Arc::new(App {
            auth,
            quotas: Quotas {
                address: Buckets::new(quotas.address),
                device: Buckets::new(quotas.device),
            },
            writer,
            open_store,
            readers: Mutex::new(Vec::new()),
            metrics,
        }))
    }

    /// The metrics this app counts into.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Runs `f` on a read connection, off the async threads.
    pub(crate) async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let app = Arc::clone(self);
        let joined = tokio::task::spawn_blocking(move || {
            let pooled = app.readers.lock().ok().and_then(|mut idle| idle.pop());
            let mut store = match pooled {
                Some(s) => s,
                None => (app.open_store)()?,
            };
            let result = f(store.as_mut());
            if result.is_ok() {
                if let Ok(mut idle) = app.readers.lock() {
                    idle.push(store);
                }
            }
            result
        })
        .await;
        match joined {
            Ok(result) => result.map_err(ApiError::from),
            Err(e) => Err(ApiError::internal(format!("reader task failed: {e}"))),
        }
    }

    /// How callers are authenticated.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// The credential (session or API token) whose secret is `secret`, if
    /// it is stored and not expired.
    pub(crate) async fn credential(
        self: &Arc<Self>,
        secret: &str,
    ) -> Result<Option<Credential>, ApiError> {
        if !looks_like_secret(secret) {
            return Ok(None);
        }
        let hash = secret_hash(secret);
        let now = now_unix_ns();
        self.read(move |store| store.credential(&hash, now)).await
    }

    /// An operator's group (fleet data): an operator's API token as
    /// `Authorization: Bearer`, or the web UI's session cookie. A device
    /// token is refused (403): it ships in every app. `None` on an open
    /// server (any group).
    async fn authenticate_operator(
        self: &Arc<Self>,
        headers: &HeaderMap,
    ) -> Result<Option<String>, ApiError> {
        let Auth::Tokens(tokens) = &self.auth else {
            return Ok(None);
        };
        let secret = match headers.get(header::AUTHORIZATION) {
            Some(value) => {
                let token = value.to_str().ok().and_then(bearer_token).ok_or_else(|| {
                    ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "Authorization must be `Bearer <token>`",
                    )
                })?;
                if tokens.group_of(token).is_some() {
                    return Err(ApiError::new(StatusCode::FORBIDDEN, DEVICE_TOKEN_REFUSED));
                }
                token.to_string()
            }
            None => crate::webui::cookie::cookie_value(headers, crate::webui::cookie::COOKIE)
                .map(str::to_string)
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "missing Authorization: Bearer token (an operator's API token)",
                    )
                })?,
        };
        match self.credential(&secret).await? {
            Some(c) => Ok(Some(c.group)),
            None => Err(ApiError::new(StatusCode::UNAUTHORIZED, "unknown token")),
        }
    }

    /// A device's group (upload, directives): `Some` with tokens, `None`
    /// on an open server.
    fn authenticate_device(&self, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
        let Auth::Tokens(tokens) = &self.auth else {
            return Ok(None);
        };
        let value = headers.get(header::AUTHORIZATION).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing Authorization: Bearer token",
            )
        })?;
        let token = value.to_str().ok().and_then(bearer_token).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "Authorization must be `Bearer <token>`",
            )
        })?;
        tokens
            .group_of(token)
            .map(Some)
            .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "unknown token"))
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is
/// case-insensitive (RFC 9110, 11.1): `bearer` and `BEARER` are the same.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// How often the housekeeping thread runs.
const HOUSEKEEPING_EVERY: Duration = Duration::from_millis(250);

/// Runs the store's housekeeping on a thread of its own for the life of
/// the process.
fn start_housekeeping(mut store: Box<dyn Store>, metrics: &Metrics) -> std::io::Result<()> {
    let metrics = metrics.clone();
    std::thread::Builder::new()
        .name("store-housekeeping".into())
        .spawn(move || loop {
            std::thread::sleep(HOUSEKEEPING_EVERY);
            if let Err(e) = store.housekeeping() {
                metrics.count_housekeeping_failure();
                eprintln!("edge-service: store housekeeping: {e}");
            }
        })?;
    Ok(())
}

/// A refusal: status, message, and for 503 when to retry.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    retry_after: Option<u32>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The status it answers with.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// What went wrong, in words.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// 429 over an ingest quota, retried after `wait` (whole seconds, at
    /// least 1).
    fn over_quota(message: impl Into<String>, wait: Duration) -> ApiError {
        let secs = u32::try_from(wait.as_secs().saturating_add(1)).unwrap_or(u32::MAX);
        ApiError {
            retry_after: Some(secs),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, message)
        }
    }

    fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after: Some(RETRY_AFTER_SECS),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::Busy(_) => ApiError::unavailable(e.to_string()),
            StoreError::Failed(_) => ApiError::internal(e.to_string()),
        }
    }
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> ApiError {
        match e {
            WriteError::QueueFull => ApiError::unavailable("ingest queue full, retry later"),
            WriteError::Stopped => ApiError::unavailable("store writer stopped"),
            WriteError::Store(s) => s.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(wire::ErrorBody {
                error: self.message,
            }),
        )
            .into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// The API's routes.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/summaries", post(post_summaries))
        .route("/v1/directives", get(get_directive))
        .route("/v1/runs", get(get_runs))
        .route("/v1/runs/{id}", get(get_run))
        .route("/v1/devices", get(get_devices))
        .route("/v1/reports", get(get_reports))
        .route("/v1/reports/{id}", get(get_report))
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(get_metrics))
        .layer(middleware::from_fn_with_state(app.clone(), track))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

/// Counts every request in the metrics, by route pattern and status.
async fn track(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let started = Instant::now();
    let response = next.run(req).await;
    app.metrics
        .observe_request(&route, response.status().as_u16(), started.elapsed());
    response
}

fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn is_ingest_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(CONTENT_TYPE))
}

async fn post_summaries(
    State(app): State<Arc<App>>,
    req: Request,
) -> Result<Json<wire::Ack>, ApiError> {
    let token_group = app.authenticate_device(req.headers())?;
    // Upload tokens are public: every address has a quota of requests.
    if let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>() {
        if let Err(wait) = app.quotas.address.take(&peer.ip(), 1.0, Instant::now()) {
            app.metrics.count_quota_refused("address");
            return Err(ApiError::over_quota(
                format!("too many uploads from {}, retry later", peer.ip()),
                wait,
            ));
        }
    }
    if !is_ingest_content_type(req.headers()) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {CONTENT_TYPE}"),
        ));
    }
    let declared_len = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared_len.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    let body = Bytes::from_request(req, &()).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::new(rejection.status(), rejection.body_text())
        }
    })?;
    let items = Items::new(&body)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| match e {
            FramingError::TooManyItems => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
            }
            _ => ApiError::new(StatusCode::BAD_REQUEST, format!("{e}; nothing stored")),
        })?;
    let prepared = ingest::prepare(&items, token_group.as_deref(), now_unix_ns())
        .map_err(|e| ApiError::new(StatusCode::FORBIDDEN, e.to_string()))?;
    // And every device a quota of summaries (all of the batch or none).
    let mut per_device: Vec<(DeviceId, f64)> = Vec::new();
    for (_, run) in &prepared.runs {
        if let Some(device) = run.device {
            match per_device.iter_mut().find(|(d, _)| *d == device) {
                Some((_, n)) => *n += 1.0,
                None => per_device.push((device, 1.0)),
            }
        }
    }
    if let Err(wait) = app.quotas.device.take_all(&per_device, Instant::now()) {
        app.metrics.count_quota_refused("device");
        return Err(ApiError::over_quota(
            "too many summaries from this device, retry later; nothing stored",
            wait,
        ));
    }
    let mut rejected = prepared.rejected;
    let (indices, runs): (Vec<usize>, Vec<_>) = prepared.runs.into_iter().unzip();
    let ids: Vec<RunId> = runs.iter().map(|r| r.id).collect();
    let outcomes = app.writer.write(runs).await?;

    let mut accepted: Vec<RunId> = Vec::with_capacity(ids.len());
    let (mut stored, mut repeated) = (0, 0);
    for ((index, id), outcome) in indices.into_iter().zip(ids).zip(outcomes) {
        match outcome {
            Inserted::Stored | Inserted::Repeat => {
                if outcome == Inserted::Stored {
                    stored += 1;
                } else {
                    repeated += 1;
                }
                if !accepted.contains(&id) {
                    accepted.push(id);
                }
            }
            Inserted::IdTaken => rejected.push(Rejection {
                index,
                id: Some(id),
                reason: "summary id already stored for another group".into(),
                label: "id_taken",
            }),
        }
    }
    app.metrics.count_accepted(stored, repeated);
    rejected.sort_by_key(|r| r.index);
    for r in &rejected {
        app.metrics.count_rejected(r.label);
    }
    Ok(Json(wire::Ack {
        accepted,
        rejected: rejected
            .into_iter()
            .map(|r| wire::Rejected {
                index: r.index,
                id: r.id,
                reason: r.reason,
            })
            .collect(),
    }))
}

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body exceeds {MAX_BODY} bytes"),
    )
}

#[derive(Debug, Deserialize)]
struct GroupQuery {
    group: Option<String>,
}

#[derive(Debug, Deserialize)]
struct DirectiveQuery {
    group: Option<String>,
    device: Option<String>,
}

/// The group a read request is about: the token's; on an open server the
/// `group` parameter (`default` if absent). Asking a token for another
/// group's data is refused.
fn group_for_read(
    token_group: Option<String>,
    asked: Option<String>,
) -> Result<Option<String>, ApiError> {
    match (token_group, asked) {
        (Some(mine), Some(asked)) if asked != mine => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("token is for group `{mine}`, not `{asked}`"),
        )),
        (Some(mine), _) => Ok(Some(mine)),
        (None, asked) => Ok(asked),
    }
}

/// The group's directive, with `device_directives`: the per-device
/// directives of the `device` asked for that are neither expired nor
/// fulfilled (none without `device=`): the oldest
/// [`wire::directive::MAX_DEVICE_DIRECTIVES`] of them, as a device reads no
/// more (the others follow as these are fulfilled or expire).
async fn get_directive(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    query: Result<Query<DirectiveQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<wire::directive::Directives>, ApiError> {
    let token_group = app.authenticate_device(&headers)?;
    let Query(q) = query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let group =
        group_for_read(token_group, q.group)?.unwrap_or_else(|| ingest::DEFAULT_GROUP.to_string());
    let device = id_param("device", q.device)?;
    let now = now_unix_ns();
    let (directive, for_device) = app
        .read(move |store| {
            let directive = store
                .directive(&group)?
                .unwrap_or_else(|| Directive::empty(&group));
            let for_device = match device {
                Some(d) => store.device_directives(Some(&group), Some(&d))?,
                None => Vec::new(),
            };
            Ok((directive, for_device))
        })
        .await?;
    Ok(Json(wire::directive::Directives {
        directive,
        device_directives: for_device
            .iter()
            .filter(|d| d.is_active(now))
            .take(wire::directive::MAX_DEVICE_DIRECTIVES)
            .map(DeviceDirective::device_view)
            .collect(),
    }))
}

/// The detector's reports of the caller's group, newest first, without
/// their bodies.
async fn get_reports(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    query: Result<Query<GroupQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let token_group = app.authenticate_operator(&headers).await?;
    let Query(q) = query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let group = group_for_read(token_group, q.group)?;
    let reports = app
        .read(move |store| store.reports(group.as_deref()))
        .await?;
    Ok(Json(json!({
        "reports": reports.iter().map(Report::summary_view).collect::<Vec<_>>()
    })))
}

/// One report with its text, JSON and HTML bodies.
async fn get_report(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id_text): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let token_group = app.authenticate_operator(&headers).await?;
    let id: i64 = id_text.parse().ok().filter(|id| *id > 0).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{id_text}` is not a report id (a positive decimal number)"),
        )
    })?;
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, format!("no report {id_text}"));
    let report = app
        .read(move |store| store.report(id))
        .await?
        .ok_or_else(not_found)?;
    // Another group's report is not shown, nor is its existence confirmed.
    if token_group.is_some_and(|g| g != report.group) {
        return Err(not_found());
    }
    Ok(Json(report.full_view()))
}

#[derive(Debug, Deserialize)]
struct RunsQuery {
    group: Option<String>,
    program: Option<String>,
    since: Option<u64>,
    until: Option<u64>,
    device: Option<String>,
    stream: Option<String>,
    kind: Option<String>,
    limit: Option<u64>,
}

/// A `kind=` parameter: `full` or `light`.
fn kind_param(text: Option<String>) -> Result<Option<agent_core::Kind>, ApiError> {
    text.map(|t| match t.as_str() {
        "full" => Ok(agent_core::Kind::Full),
        "light" => Ok(agent_core::Kind::Light),
        _ => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("kind `{t}` is not `full` or `light`"),
        )),
    })
    .transpose()
}

/// A `limit` parameter: `default` when absent, else 1..=[`MAX_RUNS_LIMIT`].
fn checked_limit(limit: Option<u64>, default: u64) -> Result<u64, ApiError> {
    let limit = limit.unwrap_or(default);
    if limit == 0 || limit > MAX_RUNS_LIMIT {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("limit must be 1..={MAX_RUNS_LIMIT}"),
        ));
    }
    Ok(limit)
}

/// A `device=` or `stream=` parameter: 32 hex digits (any case).
fn id_param<Id: FromStr<Err = ParseIdError>>(
    name: &str,
    text: Option<String>,
) -> Result<Option<Id>, ApiError> {
    text.map(|t| {
        t.parse().map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("{name} `{t}` is not 32 hex digits ({e})"),
            )
        })
    })
    .transpose()
}

async fn get_runs(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    query: Result<Query<RunsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<wire::RunList>, ApiError> {
    let token_group = app.authenticate_operator(&headers).await?;
    let Query(q) = query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let limit = checked_limit(q.limit, DEFAULT_RUNS_LIMIT)?;
    let filter = RunFilter {
        group: group_for_read(token_group, q.group)?,
        program: q.program,
        since_unix_ns: q.since,
        until_unix_ns: q.until,
        device: id_param("device", q.device)?,
        stream: id_param("stream", q.stream)?,
        kind: kind_param(q.kind)?,
        whole_runs: false,
        limit: Some(limit),
        newest_first: false,
    };
    let runs = app.read(move |store| store.runs(&filter)).await?;
    Ok(Json(wire::RunList {
        runs: runs.iter().map(RunRow::view).collect(),
    }))
}

#[derive(Debug, Deserialize)]
struct DevicesQuery {
    group: Option<String>,
    limit: Option<u64>,
}

async fn get_devices(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    query: Result<Query<DevicesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<wire::DeviceList>, ApiError> {
    let token_group = app.authenticate_operator(&headers).await?;
    let Query(q) = query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let filter = DeviceFilter {
        group: group_for_read(token_group, q.group)?,
        limit: Some(checked_limit(q.limit, DEFAULT_DEVICES_LIMIT)?),
    };
    let devices = app.read(move |store| store.devices(&filter)).await?;
    Ok(Json(wire::DeviceList {
        devices: devices.iter().map(DeviceRow::view).collect(),
    }))
}

async fn get_run(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id_text): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let token_group = app.authenticate_operator(&headers).await?;
    let id = id_text.parse::<RunId>().map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{id_text}` is not a 32-hex-digit run id ({e})"),
        )
    })?;
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, format!("no run {id_text}"));
    let stored = app
        .read(move |store| store.run(&id))
        .await?
        .ok_or_else(not_found)?;
    // Another group's run is not shown, nor is its existence confirmed.
    if token_group.is_some_and(|g| g != stored.group) {
        return Err(not_found());
    }
    let summary = agent_core::Summary::decode(&stored.raw)
        .map_err(|e| ApiError::internal(format!("stored run {id_text} no longer decodes: {e}")))?;
    let mut view = summary_view::to_json(&summary);
    view["group"] = json!(stored.group);
    Ok(Json(view))
}

async fn get_metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(),
    )
}
