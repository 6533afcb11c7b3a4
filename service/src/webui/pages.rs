//! The handlers of the web UI's pages: each finds the session (or sends
//! the browser to the login form), reads the group's data on a store
//! connection off the async threads, and renders its template.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{ConnectInfo, Form, FromRequest, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use minijinja::context;
use serde::{Deserialize, Serialize};

use super::diagnosis::{self, DiagnosisQuery};
use super::incidents;
use super::limits::{Budget, StopOnDrop, WebLimits};
use super::peers::{self, PeersQuery};
use super::plots::{time_series_svg, Series};
use super::reports;
use super::session::{same_origin, Session};
use super::templates::STYLE;
use super::WebUi;
use crate::directive::{Directive, DirectiveText, FromWords};
use crate::login_limit::Locked;
use crate::operators::{
    decoy_hash, new_secret, secret_hash, verify_password, Credential, CredentialKind,
};
use crate::store::{DeviceFilter, RunFilter, RunRow, Store, StoreError};
use crate::tokens::valid_group;
use agent_core::{DeviceId, RunId, Summary};
use diagnose::input::Cancel;
use summary_view::observe::time_text;

/// Runs the runs page lists when no `limit` is given, and the most it
/// lists.
const RUNS_PAGE: u64 = 100;
const RUNS_PAGE_MAX: u64 = 1000;
/// Devices the devices page lists.
const DEVICES_PAGE: u64 = 500;
/// Windows of one stream a run page plots.
const WINDOWS_MAX: u64 = 2000;
/// Syscalls drawn as their own series in the windows' plot.
const TOP_SYSCALLS: usize = 5;

/// A page that could not be shown: status and message, as HTML.
#[derive(Debug)]
pub(super) struct PageError {
    status: StatusCode,
    message: String,
    /// Seconds for a `Retry-After` header (a busy server's 503).
    retry_after: Option<u32>,
}

/// What a refused analysis' 503 asks the browser to wait.
const BUSY_RETRY_S: u32 = 10;

impl PageError {
    fn new(status: StatusCode, message: impl Into<String>) -> PageError {
        PageError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 503: as many analyses as allowed run already.
    fn busy(limits: &WebLimits) -> PageError {
        PageError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!(
                "busy: your group runs {} analysis(es) already, or the server {} (serve \
                 --web-analyses-per-group, --web-analyses); try again in {BUSY_RETRY_S} s",
                limits.analyses_per_group, limits.analyses
            ),
            retry_after: Some(BUSY_RETRY_S),
        }
    }
}

impl From<crate::server::ApiError> for PageError {
    fn from(e: crate::server::ApiError) -> PageError {
        PageError::new(e.status(), e.message())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = format!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Error</title>\
             <link rel=\"stylesheet\" href=\"/style.css\"></head><body><main><h1>{}</h1><p class=\"error\">{}</p>\
             <p><a href=\"/\">Back</a></p></main></body></html>",
            self.status,
            esc(&self.message)
        );
        let mut response = (self.status, Html(body)).into_response();
        if let Some(s) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(s));
        }
        response
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

type Page = Result<Response, PageError>;

fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl WebUi {
    /// Renders `name` inside the layout: `ctx` plus the session's group,
    /// its CSRF token (for the logout form) and the active tab.
    fn page(&self, name: &str, session: &Session, tab: &str, ctx: minijinja::Value) -> Page {
        let full = context! {
            group => session.group,
            csrf => self.sessions.csrf_token(session),
            logout => !session.from_proxy,
            tab => tab,
            ..ctx
        };
        let html = self
            .templates
            .render(name, full)
            .map_err(|e| PageError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
        Ok(Html(html).into_response())
    }

    /// Runs `f` on a store connection.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, PageError> {
        Ok(self.app.read(f).await?)
    }

    /// Runs one analysis of `page` for `group` on a store connection:
    /// refused (503) when the group or the server runs as many as allowed,
    /// and told to stop (its [`Budget`]'s flag) when this future is
    /// dropped, which the server does when the client disconnects.
    async fn analyse<T: Send + 'static>(
        &self,
        group: &str,
        page: &'static str,
        f: impl FnOnce(&mut dyn Store, &Budget) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, PageError> {
        let Some(permit) = self.gate.try_enter(group) else {
            self.app.metrics().count_web_refused();
            return Err(PageError::busy(&self.limits));
        };
        let cancel = Cancel::new();
        let _stop = StopOnDrop(cancel.clone());
        let metrics = self.app.metrics().clone();
        // The budget (and with it the permit) goes with the work: the
        // permit is free again when the thread ends, not when the client
        // leaves.
        let budget = Budget::new(self.limits, cancel, metrics, page, permit);
        self.read(move |store| f(store, &budget)).await
    }
}

/// The session, or else the handler answers with a redirect to the login
/// form.
macro_rules! session_or_login {
    ($web:expr, $headers:expr) => {
        match $web.sessions.session(&$web.app, &$headers).await {
            Some(s) => s,
            None => return Ok(Redirect::to("/login").into_response()),
        }
    };
}

pub(super) async fn home(State(web): State<Arc<WebUi>>, headers: HeaderMap) -> Page {
    let _session = session_or_login!(web, headers);
    Ok(Redirect::to("/devices").into_response())
}

pub(super) async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        STYLE,
    )
        .into_response()
}

fn render_login(web: &WebUi, status: StatusCode, error: Option<&str>) -> Page {
    let html = web
        .templates
        .render(
            "login.html",
            context! {
                error => error,
                open_server => web.sessions.open_server(),
                proxy_header => web.sessions.proxy_header.as_ref().map(|h| h.as_str().to_string()),
            },
        )
        .map_err(|e| PageError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    Ok((status, Html(html)).into_response())
}

pub(super) async fn login_form(State(web): State<Arc<WebUi>>) -> Page {
    render_login(&web, StatusCode::OK, None)
}

#[derive(Debug, Deserialize)]
pub(super) struct LoginForm {
    /// The operator's name (an open server: the group's).
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: String,
}

/// A login attempt's text as a log line may show it: at most 64
/// characters, quoted and escaped (never the password).
fn logged(name: &str) -> String {
    format!("{:?}", name.chars().take(64).collect::<String>())
}

pub(super) async fn login(State(web): State<Arc<WebUi>>, req: Request) -> Page {
    let address = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(|| "unknown".to_string(), |c| c.0.ip().to_string());
    let headers = req.headers().clone();
    // Login CSRF: a page elsewhere must not log a browser into our server.
    if !same_origin(&headers) {
        eprintln!("edge-service: login refused from {address}: cross-origin POST");
        return Err(PageError::new(
            StatusCode::FORBIDDEN,
            "cross-origin login refused: log in from this server's own login page",
        ));
    }
    let Form(form) = Form::<LoginForm>::from_request(req, &())
        .await
        .map_err(|e| PageError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let name = form.name.trim().to_string();
    let (operator, group) = if web.sessions.open_server() {
        if !valid_group(&name) {
            return render_login(
                &web,
                StatusCode::UNAUTHORIZED,
                Some("not a valid group name"),
            );
        }
        (String::new(), name)
    } else {
        let limiter = &web.sessions.limiter;
        if let Some(locked) = limiter.check(&address, &name, Instant::now()) {
            let what = match locked {
                Locked::Address(_) => "this address",
                Locked::Name(_) => "this name",
            };
            let secs = locked.remaining().as_secs().max(1);
            eprintln!(
                "edge-service: login refused for {} from {address}: {what} is locked out for {secs} s after failed logins",
                logged(&name)
            );
            let mut response = render_login(
                &web,
                StatusCode::TOO_MANY_REQUESTS,
                Some(&format!(
                    "too many failed logins from {what}: try again in {secs} s"
                )),
            )?;
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            return Ok(response);
        }
        let lookup = name.clone();
        let found = web.read(move |store| store.operator(&lookup)).await?;
        let password = form.password;
        let (hash, group) = match &found {
            Some(op) => (op.password_hash.clone(), Some(op.group.clone())),
            None => (decoy_hash().to_string(), None),
        };
        // Argon2 is slow on purpose: off the async threads.
        let matches = tokio::task::spawn_blocking(move || verify_password(&hash, &password))
            .await
            .unwrap_or(false);
        let Some(group) = group.filter(|_| matches) else {
            limiter.failed(&address, &name, Instant::now());
            eprintln!(
                "edge-service: failed login for {} from {address}",
                logged(&name)
            );
            return render_login(
                &web,
                StatusCode::UNAUTHORIZED,
                Some("unknown name or wrong password"),
            );
        };
        limiter.succeeded(&name);
        (name, group)
    };
    let secret = new_secret()
        .map_err(|e| PageError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let now = now_unix_ns();
    let ttl = u64::try_from(web.sessions.ttl.as_nanos()).unwrap_or(u64::MAX);
    let credential = Credential {
        hash: secret_hash(&secret),
        operator,
        group,
        kind: CredentialKind::Session,
        created_unix_ns: now,
        expires_unix_ns: Some(now.saturating_add(ttl)),
    };
    web.read(move |store| {
        store.prune_credentials(now)?;
        store.add_credential(&credential)
    })
    .await?;
    let mut response = Redirect::to("/devices").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, web.sessions.login_cookie(&secret));
    Ok(response)
}

#[derive(Debug, Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

pub(super) async fn logout(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Page {
    let session = session_or_login!(web, headers);
    if !web.sessions.csrf_ok(&session, &form.csrf) {
        return Err(PageError::new(StatusCode::FORBIDDEN, "bad CSRF token"));
    }
    // Revoked on the server: the old cookie opens nothing any more.
    if let Some(id) = session.id() {
        let hash = secret_hash(id);
        web.read(move |store| store.remove_credential(&hash))
            .await?;
    }
    let mut response = Redirect::to("/login").into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, web.sessions.logout_cookie());
    Ok(response)
}

/// A device as the devices page lists it.
#[derive(Debug, Serialize)]
struct DeviceView {
    device: String,
    last_seen: String,
    first_seen: String,
    last_program: String,
    runs: u64,
    windows: u64,
    facts: String,
}

/// A JSON object of facts as `key=value` pairs on one line.
fn facts_line(facts: &serde_json::Value) -> String {
    match facts.as_object() {
        Some(map) => map
            .iter()
            .filter(|(_, v)| !v.is_null() && v.as_str() != Some(""))
            .map(|(k, v)| match v.as_str() {
                Some(s) => format!("{k}={s}"),
                None => format!("{k}={v}"),
            })
            .collect::<Vec<_>>()
            .join("  "),
        None => String::new(),
    }
}

/// A directive as pages show it.
fn directive_view(d: &Directive) -> minijinja::Value {
    context! {
        match_text => d.match_text.clone().unwrap_or_default(),
        only => d.only.as_ref().map(|o| o.join(",")).unwrap_or_default(),
        window => d.window.clone().unwrap_or_default(),
        programs => d.programs.as_ref().map(|p| p.join(",")).unwrap_or_default(),
        empty => d.is_empty(),
    }
}

pub(super) async fn devices(State(web): State<Arc<WebUi>>, headers: HeaderMap) -> Page {
    let session = session_or_login!(web, headers);
    let group = session.group.clone();
    let (devices, directive) = web
        .read(move |store| {
            let devices = store.devices(&DeviceFilter {
                group: Some(group.clone()),
                limit: Some(DEVICES_PAGE),
            })?;
            let directive = store.directive(&group)?;
            Ok((devices, directive))
        })
        .await?;
    let rows: Vec<DeviceView> = devices
        .iter()
        .map(|d| DeviceView {
            device: d.device.to_string(),
            last_seen: time_text(d.last_seen_unix_ns),
            first_seen: time_text(d.first_seen_unix_ns),
            last_program: d.last_program.clone(),
            runs: d.runs,
            windows: d.windows,
            facts: facts_line(&d.facts),
        })
        .collect();
    let directive = directive.unwrap_or_else(|| Directive::empty(&session.group));
    web.page(
        "devices.html",
        &session,
        "devices",
        context! { devices => rows, directive => directive_view(&directive), limit => DEVICES_PAGE },
    )
}

/// The runs page's filters, as typed.
#[derive(Debug, Default, Deserialize, Serialize)]
pub(super) struct RunsQuery {
    #[serde(default)]
    program: String,
    #[serde(default)]
    device: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    #[serde(default)]
    limit: Option<u64>,
}

/// A run as the runs page lists it.
#[derive(Debug, Serialize)]
struct RunView {
    id: String,
    start: String,
    program: String,
    device: String,
    duration: String,
    exit: String,
    events: u64,
    window: u32,
}

fn run_view(r: &RunRow) -> RunView {
    RunView {
        id: r.id.to_string(),
        start: time_text(r.start_unix_ns),
        program: r.program.clone(),
        device: r
            .device
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        duration: format!("{:.3} s", r.duration_ns as f64 / 1e9),
        exit: summary_view::exit_text(r.exit),
        events: r.events,
        window: r.window,
    }
}

fn bad_request(message: String) -> PageError {
    PageError::new(StatusCode::BAD_REQUEST, message)
}

fn runs_filter(group: &str, q: &RunsQuery, now: u64) -> Result<RunFilter, PageError> {
    let time = |name: &str, text: &str| -> Result<Option<u64>, PageError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        diagnose::time::parse_time(text, now)
            .map(Some)
            .map_err(|e| bad_request(format!("{name}: {e}")))
    };
    let device = q.device.trim();
    let device =
        if device.is_empty() {
            None
        } else {
            Some(device.parse::<DeviceId>().map_err(|e| {
                bad_request(format!("device `{device}` is not 32 hex digits ({e})"))
            })?)
        };
    let limit = q.limit.unwrap_or(RUNS_PAGE);
    if limit == 0 || limit > RUNS_PAGE_MAX {
        return Err(bad_request(format!("limit must be 1..={RUNS_PAGE_MAX}")));
    }
    let program = q.program.trim();
    Ok(RunFilter {
        group: Some(group.to_string()),
        program: (!program.is_empty()).then(|| program.to_string()),
        since_unix_ns: time("since", &q.since)?,
        until_unix_ns: time("until", &q.until)?,
        device,
        stream: None,
        kind: None,
        whole_runs: false,
        limit: Some(limit),
        newest_first: true,
    })
}

pub(super) async fn runs(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    query: Result<Query<RunsQuery>, axum::extract::rejection::QueryRejection>,
) -> Page {
    let session = session_or_login!(web, headers);
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let filter = runs_filter(&session.group, &q, now_unix_ns())?;
    let limit = filter.limit;
    let rows = web.read(move |store| store.runs(&filter)).await?;
    let runs: Vec<RunView> = rows.iter().map(run_view).collect();
    web.page(
        "runs.html",
        &session,
        "runs",
        context! { runs => runs, q => q, limit => limit },
    )
}

/// One window's totals, for the run page's time series.
fn window_series(windows: &[Summary]) -> (Vec<String>, Vec<Series>, Vec<Series>) {
    let labels: Vec<String> = windows.iter().map(|w| w.run.window.to_string()).collect();
    let totals = |f: &dyn Fn(&Summary) -> f64| windows.iter().map(f).collect::<Vec<f64>>();
    let mut calls = vec![Series {
        name: "all calls".into(),
        values: totals(&|w| w.syscalls.iter().map(|s| s.count as f64).sum()),
    }];
    // The syscalls with the most calls over all windows get a line each.
    let mut by_name: Vec<(String, f64)> = Vec::new();
    for w in windows {
        for s in &w.syscalls {
            let name = summary_view::syscall_name(s);
            match by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += s.count as f64,
                None => by_name.push((name, s.count as f64)),
            }
        }
    }
    by_name.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (name, _) in by_name.into_iter().take(TOP_SYSCALLS) {
        calls.push(Series {
            values: totals(&|w| {
                w.syscalls
                    .iter()
                    .filter(|s| summary_view::syscall_name(s) == name)
                    .map(|s| s.count as f64)
                    .sum()
            }),
            name,
        });
    }
    let time = vec![
        Series {
            name: "in syscalls".into(),
            values: totals(&|w| w.syscalls.iter().map(|s| s.total_ns as f64 / 1e6).sum()),
        },
        Series {
            name: "CPU".into(),
            values: totals(&|w| {
                w.cpu
                    .map_or(f64::NAN, |c| (c.user_ns + c.system_ns) as f64 / 1e6)
            }),
        },
    ];
    (labels, calls, time)
}

pub(super) async fn run(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    Path(id_text): Path<String>,
) -> Page {
    let session = session_or_login!(web, headers);
    let id = id_text
        .parse::<RunId>()
        .map_err(|e| bad_request(format!("`{id_text}` is not a 32-hex-digit run id ({e})")))?;
    let group = session.group.clone();
    let found = web
        .read(move |store| {
            let Some(stored) = store.run(&id)? else {
                return Ok(None);
            };
            // Another group's run is not shown, nor its existence confirmed.
            if stored.group != group {
                return Ok(None);
            }
            let summary = Summary::decode(&stored.raw)
                .map_err(|e| StoreError::Failed(format!("stored run no longer decodes: {e}")))?;
            let windows = match summary.origin.stream.nonzero() {
                Some(stream) if summary.origin.window_ns > 0 => store.load(&RunFilter {
                    group: Some(group),
                    stream: Some(stream),
                    limit: Some(WINDOWS_MAX),
                    ..RunFilter::default()
                })?,
                _ => Vec::new(),
            };
            Ok(Some((summary, windows)))
        })
        .await?;
    let Some((summary, stored_windows)) = found else {
        return Err(PageError::new(
            StatusCode::NOT_FOUND,
            format!("no run {id_text}"),
        ));
    };
    let mut windows: Vec<Summary> = stored_windows
        .iter()
        .filter_map(|w| Summary::decode(&w.raw).ok())
        .collect();
    windows.sort_by_key(|w| w.run.window);
    let plots = if windows.len() > 1 {
        let (labels, calls, time) = window_series(&windows);
        vec![
            time_series_svg("calls per window", "calls", &labels, &calls),
            time_series_svg("time per window", "ms", &labels, &time),
        ]
    } else {
        Vec::new()
    };
    let window_links: Vec<(u32, String)> = windows
        .iter()
        .map(|w| (w.run.window, w.id.to_string()))
        .collect();
    web.page(
        "run.html",
        &session,
        "runs",
        context! {
            id => summary.id.to_string(),
            program => summary.facts.program.as_str(),
            table => summary_view::table(&summary),
            window => summary.run.window,
            window_ms => summary.origin.window_ns / 1_000_000,
            plots => plots,
            windows => window_links,
        },
    )
}

/// The programs of the group's devices, for the diagnosis form's list.
fn group_programs(store: &mut dyn Store, group: &str) -> Result<Vec<String>, StoreError> {
    let mut programs: Vec<String> = store
        .devices(&DeviceFilter {
            group: Some(group.to_string()),
            limit: Some(DEVICES_PAGE),
        })?
        .into_iter()
        .map(|d| d.last_program)
        .collect();
    programs.sort();
    programs.dedup();
    Ok(programs)
}

pub(super) async fn diagnosis(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    query: Result<Query<DiagnosisQuery>, axum::extract::rejection::QueryRejection>,
) -> Page {
    let session = session_or_login!(web, headers);
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let asked = !q.program.trim().is_empty();
    let group = session.group.clone();
    let now = now_unix_ns();
    let query = q.clone();
    let (programs, outcome) = if asked {
        web.analyse(&session.group, "diagnosis", move |store, budget| {
            let programs = group_programs(store, &group)?;
            let outcome = diagnosis::run(store, &group, &query, now, budget)?;
            Ok((programs, Some(outcome)))
        })
        .await?
    } else {
        web.read(move |store| Ok((group_programs(store, &group)?, None)))
            .await?
    };
    let (result, error) = match outcome {
        Some(Ok(view)) => (Some(view), None),
        Some(Err(message)) => (None, Some(message)),
        None => (None, None),
    };
    web.page(
        "diagnosis.html",
        &session,
        "diagnosis",
        context! { q => q, programs => programs, d => result, error => error },
    )
}

pub(super) async fn directives(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    Query(saved): Query<SavedQuery>,
) -> Page {
    let session = session_or_login!(web, headers);
    let group = session.group.clone();
    let directive = web
        .read(move |store| store.directive(&group))
        .await?
        .unwrap_or_else(|| Directive::empty(&session.group));
    web.page(
        "directives.html",
        &session,
        "directives",
        context! { directive => directive_view(&directive), saved => saved.saved.is_some() },
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct SavedQuery {
    saved: Option<String>,
}

/// The directive form: the new values, and whether this is the
/// confirmation (`apply`) or the first submit (`preview`).
#[derive(Debug, Deserialize)]
pub(super) struct DirectiveForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    match_text: String,
    #[serde(default)]
    only: String,
    #[serde(default)]
    window: String,
    #[serde(default)]
    programs: String,
}

fn non_empty(text: &str) -> Option<&str> {
    let t = text.trim();
    (!t.is_empty()).then_some(t)
}

pub(super) async fn edit_directive(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    Form(form): Form<DirectiveForm>,
) -> Page {
    let session = session_or_login!(web, headers);
    if !web.sessions.csrf_ok(&session, &form.csrf) {
        return Err(PageError::new(
            StatusCode::FORBIDDEN,
            "bad CSRF token: reload the directives page and try again",
        ));
    }
    let new = Directive::parse(
        &session.group,
        DirectiveText {
            match_text: non_empty(&form.match_text),
            only: non_empty(&form.only),
            window: non_empty(&form.window),
            programs: non_empty(&form.programs),
        },
    )
    .map_err(|e| bad_request(format!("{e:#}")))?;
    let group = session.group.clone();
    match form.action.as_str() {
        "preview" => {
            let old = web
                .read(move |store| store.directive(&group))
                .await?
                .unwrap_or_else(|| Directive::empty(&session.group));
            web.page(
                "confirm.html",
                &session,
                "directives",
                context! { old => directive_view(&old), new => directive_view(&new) },
            )
        }
        "apply" => {
            web.read(move |store| {
                if new.is_empty() {
                    store.clear_directive(&group).map(|_| ())
                } else {
                    store.set_directive(&new)
                }
            })
            .await?;
            Ok(Redirect::to("/directives?saved=1").into_response())
        }
        other => Err(bad_request(format!("unknown action `{other}`"))),
    }
}

pub(super) async fn peers(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    query: Result<Query<PeersQuery>, axum::extract::rejection::QueryRejection>,
) -> Page {
    let session = session_or_login!(web, headers);
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let group = session.group.clone();
    let now = now_unix_ns();
    let query = q.clone();
    let outcome = if q.asked() {
        Some(
            web.analyse(&session.group, "peers", move |store, budget| {
                peers::run(store, &group, &query, now, budget)
            })
            .await?,
        )
    } else {
        None
    };
    let (result, error) = match outcome {
        Some(Ok(view)) => (Some(view), None),
        Some(Err(message)) => (None, Some(message)),
        None => (None, None),
    };
    web.page(
        "peers.html",
        &session,
        "peers",
        context! { q => q, p => result, error => error },
    )
}

pub(super) async fn reports(State(web): State<Arc<WebUi>>, headers: HeaderMap) -> Page {
    let session = session_or_login!(web, headers);
    let group = session.group.clone();
    let rows = web.read(move |store| reports::list(store, &group)).await?;
    web.page(
        "reports.html",
        &session,
        "reports",
        context! { reports => rows },
    )
}

pub(super) async fn report(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    Path(id_text): Path<String>,
) -> Page {
    let session = session_or_login!(web, headers);
    let not_found = || PageError::new(StatusCode::NOT_FOUND, format!("no report {id_text}"));
    let id: i64 = id_text.parse().map_err(|_| not_found())?;
    let group = session.group.clone();
    let found = web
        .read(move |store| reports::one(store, &group, id))
        .await?;
    let view = found.ok_or_else(not_found)?;
    web.page("report.html", &session, "reports", context! { r => view })
}

/// The Incidents page's query: the page of closed incidents below this
/// id (none: the newest).
#[derive(Debug, Deserialize)]
pub(super) struct IncidentsQuery {
    #[serde(default)]
    before: Option<i64>,
}

pub(super) async fn incidents(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    query: Result<Query<IncidentsQuery>, axum::extract::rejection::QueryRejection>,
) -> Page {
    let session = session_or_login!(web, headers);
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let group = session.group.clone();
    let view = web
        .read(move |store| incidents::list(store, &group, q.before))
        .await?;
    web.page(
        "incidents.html",
        &session,
        "incidents",
        context! { i => view },
    )
}

pub(super) async fn incident(
    State(web): State<Arc<WebUi>>,
    headers: HeaderMap,
    Path(id_text): Path<String>,
) -> Page {
    let session = session_or_login!(web, headers);
    let id: i64 = id_text
        .parse()
        .map_err(|_| bad_request(format!("`{id_text}` is not an incident id (a number)")))?;
    let group = session.group.clone();
    let found = web
        .read(move |store| incidents::one(store, &group, id))
        .await?;
    let view =
        found.ok_or_else(|| PageError::new(StatusCode::NOT_FOUND, format!("no incident {id}")))?;
    web.page(
        "incident.html",
        &session,
        "incidents",
        context! { x => view },
    )
}
