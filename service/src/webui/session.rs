//! Who is looking at the web UI: the operator of the session cookie (set
//! by the login form from an operator's name and password), or the group
//! of a trusted reverse proxy's header when `serve --web-proxy-header
//! NAME` is given; and the CSRF token every form that changes something
//! must carry.
//!
//! The cookie holds a random 256-bit session id, marked HttpOnly,
//! SameSite=Strict, and Secure when the server speaks TLS. The store keeps
//! only its SHA-256 with the operator, group and expiry, so several
//! instances on one database share sessions, and logout deletes it. A
//! device token never logs in: it ships in every app.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use ring::hmac;

use crate::login_limit::{LoginLimiter, LoginLimits};
use crate::operators::CredentialKind;
use crate::server::{App, Auth};
use crate::tokens::valid_group;
use crate::webui::cookie::{cookie_value, COOKIE};

/// How long a session lasts from its login (absolute).
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// How the web UI learns the operator (from `serve`'s options).
#[derive(Debug)]
pub struct SessionConfig {
    /// Whether the server is open (`--insecure-no-auth`: the login form
    /// asks for a group name only).
    open_server: bool,
    /// A header set by an authenticating reverse proxy naming the group;
    /// `None` (the default): no header is trusted.
    pub proxy_header: Option<HeaderName>,
    /// Whether cookies are marked Secure (the server speaks TLS).
    pub secure_cookie: bool,
    /// How long a session lasts.
    pub ttl: Duration,
    /// Failed logins per address and name.
    pub limiter: LoginLimiter,
    /// The key of the CSRF tokens, random per process.
    csrf_key: hmac::Key,
}

/// A logged-in viewer.
#[derive(Debug, Clone)]
pub struct Session {
    /// The group whose data every page shows.
    pub group: String,
    /// The operator's name (empty on an open server or behind the proxy).
    pub operator: String,
    /// The session id (or the proxy's group): what the CSRF token is
    /// derived from, so a session of another group never has the same one.
    secret: String,
    /// Whether the group came from the proxy header (no logout then).
    pub from_proxy: bool,
}

impl Session {
    /// The session id of the cookie (`None` behind the proxy).
    pub fn id(&self) -> Option<&str> {
        (!self.from_proxy).then_some(self.secret.as_str())
    }
}

impl SessionConfig {
    /// A configuration with a fresh random CSRF key.
    pub fn new(
        auth: &Auth,
        proxy_header: Option<HeaderName>,
        secure_cookie: bool,
        limits: LoginLimits,
    ) -> anyhow::Result<SessionConfig> {
        let rng = ring::rand::SystemRandom::new();
        let csrf_key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
            .map_err(|_| anyhow::anyhow!("cannot make the web UI's CSRF key: no randomness"))?;
        Ok(SessionConfig {
            open_server: matches!(auth, Auth::None),
            proxy_header,
            secure_cookie,
            ttl: DEFAULT_SESSION_TTL,
            limiter: LoginLimiter::new(limits),
            csrf_key,
        })
    }

    /// The group of a trusted proxy's header, if configured and sent.
    /// `Some(None)`: sent but not a valid group.
    fn proxy_session(&self, headers: &HeaderMap) -> Option<Option<Session>> {
        let name = self.proxy_header.as_ref()?;
        let group = headers.get(name).and_then(|v| v.to_str().ok())?.trim();
        Some(valid_group(group).then(|| Session {
            group: group.to_string(),
            operator: String::new(),
            secret: format!("proxy\u{0}{group}"),
            from_proxy: true,
        }))
    }

    /// The session of a request: the proxy's header first (when trusted),
    /// then the cookie's session in the store. `None`: not logged in (or
    /// the session expired or was logged out).
    pub async fn session(&self, app: &Arc<App>, headers: &HeaderMap) -> Option<Session> {
        if let Some(from_proxy) = self.proxy_session(headers) {
            return from_proxy;
        }
        let secret = cookie_value(headers, COOKIE)?.to_string();
        let credential = app.credential(&secret).await.ok()??;
        (credential.kind == CredentialKind::Session).then_some(Session {
            group: credential.group,
            operator: credential.operator,
            secret,
            from_proxy: false,
        })
    }

    /// Whether the login form asks for a group name instead of a password.
    pub fn open_server(&self) -> bool {
        self.open_server
    }

    /// The `Set-Cookie` value that logs in with session id `secret`.
    pub fn login_cookie(&self, secret: &str) -> HeaderValue {
        self.cookie(secret, Some(self.ttl.as_secs()))
    }

    /// The `Set-Cookie` value that logs out.
    pub fn logout_cookie(&self) -> HeaderValue {
        self.cookie("", Some(0))
    }

    fn cookie(&self, value: &str, max_age: Option<u64>) -> HeaderValue {
        let mut text = format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict");
        if self.secure_cookie {
            text.push_str("; Secure");
        }
        if let Some(age) = max_age {
            text.push_str(&format!("; Max-Age={age}"));
        }
        // Hex digits and fixed words only: always a valid header value.
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    /// The CSRF token of `session` (hex of an HMAC of its secret).
    pub fn csrf_token(&self, session: &Session) -> String {
        hex::encode(hmac::sign(&self.csrf_key, session.secret.as_bytes()).as_ref())
    }

    /// Whether `token` (from a form) is `session`'s CSRF token.
    pub fn csrf_ok(&self, session: &Session, token: &str) -> bool {
        hex::decode(token.trim())
            .is_ok_and(|tag| hmac::verify(&self.csrf_key, session.secret.as_bytes(), &tag).is_ok())
    }
}

/// Whether a POST comes from a page of this server: its `Origin` (else its
/// `Referer`) names the request's own `Host`. A browser sends `Origin` with
/// every form POST; a request with neither header is not a browser's
/// cross-site one (it carries no cookie of ours a page could abuse) and
/// passes. `Origin: null` (an opaque origin) does not.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let source = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER));
    let Some(source) = source else {
        return true;
    };
    let Ok(source) = source.to_str() else {
        return false;
    };
    // scheme://host[:port][/path...]
    let Some((_, rest)) = source.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.eq_ignore_ascii_case(host.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{TokenFile, Tokens};

    fn config(proxy: Option<&'static str>) -> SessionConfig {
        let tokens =
            Tokens::parse("phones phones-token-0123456789\nlaptops laptops-token-0123456789\n")
                .unwrap();
        SessionConfig::new(
            &Auth::Tokens(Arc::new(TokenFile::fixed(tokens))),
            proxy.map(HeaderName::from_static),
            true,
            LoginLimits::default(),
        )
        .unwrap()
    }

    fn session(group: &str, secret: &str) -> Session {
        Session {
            group: group.into(),
            operator: "ann".into(),
            secret: secret.into(),
            from_proxy: false,
        }
    }

    #[test]
    fn the_cookie_is_strict() {
        let c = config(None);
        let cookie = c.login_cookie(&"ab".repeat(32));
        let text = cookie.to_str().unwrap();
        assert!(
            text.contains("HttpOnly")
                && text.contains("SameSite=Strict")
                && text.contains("Secure")
                && text.contains("Max-Age=43200")
        );
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=b; {}", text.split(';').next().unwrap())).unwrap(),
        );
        assert_eq!(cookie_value(&h, COOKIE), Some("ab".repeat(32).as_str()));
    }

    #[test]
    fn csrf_tokens_belong_to_one_session() {
        let c = config(None);
        let (phones, laptops) = (session("phones", "s1"), session("laptops", "s2"));
        let token = c.csrf_token(&phones);
        assert!(c.csrf_ok(&phones, &token));
        assert!(!c.csrf_ok(&laptops, &token));
        assert!(!c.csrf_ok(&phones, ""));
        assert!(!c.csrf_ok(&phones, "not hex"));
    }

    #[test]
    fn the_proxy_header_is_trusted_only_when_configured() {
        let mut h = HeaderMap::new();
        h.insert("x-edge-group", HeaderValue::from_static("phones"));
        assert!(config(None).proxy_session(&h).is_none());
        let s = config(Some("x-edge-group"))
            .proxy_session(&h)
            .unwrap()
            .unwrap();
        assert_eq!(s.group, "phones");
        assert!(s.from_proxy);
        h.insert("x-edge-group", HeaderValue::from_static("bad group"));
        assert!(config(Some("x-edge-group"))
            .proxy_session(&h)
            .unwrap()
            .is_none());
    }

    #[test]
    fn only_same_origin_posts_pass() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_static(v));
            }
            h
        };
        let host = ("host", "edge.example:8443");
        assert!(same_origin(&headers(&[
            host,
            ("origin", "https://edge.example:8443")
        ])));
        assert!(same_origin(&headers(&[
            host,
            ("referer", "https://edge.example:8443/login")
        ])));
        assert!(same_origin(&headers(&[host])));
        assert!(!same_origin(&headers(&[
            host,
            ("origin", "https://evil.example")
        ])));
        assert!(!same_origin(&headers(&[host, ("origin", "null")])));
        assert!(!same_origin(&headers(&[
            host,
            ("referer", "https://edge.example:8443.evil.example/")
        ])));
        assert!(!same_origin(&headers(&[(
            "origin",
            "https://edge.example:8443"
        )])));
    }
}
