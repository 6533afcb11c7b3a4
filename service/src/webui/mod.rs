//! The operator's web UI at `/` (see `docs/webui.md`): server-rendered
//! HTML pages (minijinja templates, [`pages`]) over the same store as the
//! API, for operators only. Every page is scoped to the logged-in group
//! ([`session`]); forms that change something carry a CSRF token. No
//! script and no outside asset: every response carries a strict
//! Content-Security-Policy, and the plots are inline SVG ([`plots`], and
//! the diagnosis report's own, [`diagnosis`]; the peers analysis' own,
//! [`peers`]). What one analysis may read and how many run at once:
//! [`limits`]. The proactive loop's reports are listed by [`reports`], the
//! live peer analysis' incidents by [`incidents`].

pub mod cookie;
pub mod diagnosis;
pub mod incidents;
pub mod limits;
mod pages;
pub mod peers;
pub mod plots;
pub mod reports;
pub mod session;
mod templates;

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use crate::server::App;
pub use limits::WebLimits;
pub use session::SessionConfig;

/// The policy of every web UI response: nothing but this server's own
/// stylesheet, images inline (SVG in the page), no script at all, no
/// framing, forms posting only here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'none'; \
    object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// What the pages share.
#[derive(Debug)]
pub struct WebUi {
    app: Arc<App>,
    sessions: SessionConfig,
    templates: templates::Templates,
    limits: WebLimits,
    /// The Diagnosis and Peers analyses running now.
    gate: limits::Gate,
}

/// The web UI's routes (merged with the API's by `serve`).
pub fn router(app: Arc<App>, sessions: SessionConfig, limits: WebLimits) -> anyhow::Result<Router> {
    limits.check()?;
    let web = Arc::new(WebUi {
        app,
        sessions,
        templates: templates::Templates::new()?,
        gate: limits::Gate::new(&limits),
        limits,
    });
    Ok(Router::new()
        .route("/", get(pages::home))
        .route("/login", get(pages::login_form).post(pages::login))
        .route("/logout", post(pages::logout))
        .route("/devices", get(pages::devices))
        .route("/runs", get(pages::runs))
        .route("/runs/{id}", get(pages::run))
        .route("/diagnosis", get(pages::diagnosis))
        .route(
            "/directives",
            get(pages::directives).post(pages::edit_directive),
        )
        .route("/peers", get(pages::peers))
        .route("/incidents", get(pages::incidents))
        .route("/incidents/{id}", get(pages::incident))
        .route("/reports", get(pages::reports))
        .route("/reports/{id}", get(pages::report))
        .route("/style.css", get(pages::style))
        .layer(middleware::from_fn(security_headers))
        .with_state(web))
}

/// Adds the CSP and its companions to every web UI response.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        // same-origin, not no-referrer: under no-referrer a browser sends
        // `Origin: null` with the login form's POST, which the login
        // CSRF check must refuse.
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Pages show one group's data: no shared cache may keep them.
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
