//! Who is looking at the web UI: the group of the session cookie (set by
//! the login form from a group token), or of a trusted reverse proxy's
//! header when `serve --web-proxy-header NAME` is given; and the CSRF
//! token every form that changes something must carry.
//!
//! The cookie holds the token itself (hex-encoded, so that any visible
//! character of a token survives), marked HttpOnly, SameSite=Strict, and
//! Secure when the server speaks TLS: the same secret the devices hold, so
//! nothing else has to be kept or expired on the server.

use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use ring::hmac;

use crate::server::Auth;
use crate::tokens::valid_group;

/// The session cookie's name.
pub const COOKIE: &str = "edge_session";

/// How the web UI learns the group (from `serve`'s options).
#[derive(Debug)]
pub struct SessionConfig {
    /// The tokens (or an open server's "any group").
    pub auth: Auth,
    /// A header set by an authenticating reverse proxy naming the group;
    /// `None` (the default): no header is trusted.
    pub proxy_header: Option<HeaderName>,
    /// Whether cookies are marked Secure (the server speaks TLS).
    pub secure_cookie: bool,
    /// The key of the CSRF tokens, random per process.
    csrf_key: hmac::Key,
}

/// A logged-in viewer.
#[derive(Debug, Clone)]
pub struct Session {
    /// The group whose data every page shows.
    pub group: String,
    /// What the CSRF token is derived from (the token, or the proxy's
    /// group): a session of another group never has the same one.
    secret: String,
    /// Whether the group came from the proxy header (no logout then).
    pub from_proxy: bool,
}

impl SessionConfig {
    /// A configuration with a fresh random CSRF key.
    pub fn new(
        auth: Auth,
        proxy_header: Option<HeaderName>,
        secure_cookie: bool,
    ) -> anyhow::Result<SessionConfig> {
        let rng = ring::rand::SystemRandom::new();
        let csrf_key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
            .map_err(|_| anyhow::anyhow!("cannot make the web UI's CSRF key: no randomness"))?;
        Ok(SessionConfig {
            auth,
            proxy_header,
            secure_cookie,
            csrf_key,
        })
    }

    /// The session of a request: the proxy's header first (when trusted),
    /// then the cookie. `None`: not logged in (or a token no longer valid).
    pub fn session(&self, headers: &HeaderMap) -> Option<Session> {
        if let Some(name) = &self.proxy_header {
            if let Some(group) = headers.get(name).and_then(|v| v.to_str().ok()) {
                let group = group.trim();
                return valid_group(group).then(|| Session {
                    group: group.to_string(),
                    secret: format!("proxy\u{0}{group}"),
                    from_proxy: true,
                });
            }
        }
        let secret = cookie_value(headers, COOKIE)
            .and_then(|hex_text| hex::decode(hex_text).ok())
            .and_then(|bytes| String::from_utf8(bytes).ok())?;
        let group = self.group_of_secret(&secret)?;
        Some(Session {
            group,
            secret,
            from_proxy: false,
        })
    }

    /// The group a login secret opens: a token's group; on an open server
    /// (`--insecure-no-auth`, loopback only) the secret is the group name.
    pub fn group_of_secret(&self, secret: &str) -> Option<String> {
        match &self.auth {
            Auth::Tokens(tokens) => tokens.group_of(secret).map(str::to_string),
            Auth::None => valid_group(secret).then(|| secret.to_string()),
        }
    }

    /// Whether the login form asks for a group name instead of a token.
    pub fn open_server(&self) -> bool {
        matches!(self.auth, Auth::None)
    }

    /// The `Set-Cookie` value that logs in with `secret`.
    pub fn login_cookie(&self, secret: &str) -> HeaderValue {
        self.cookie(&hex::encode(secret.as_bytes()), None)
    }

    /// The `Set-Cookie` value that logs out.
    pub fn logout_cookie(&self) -> HeaderValue {
        self.cookie("", Some(0))
    }

    fn cookie(&self, value: &str, max_age: Option<u32>) -> HeaderValue {
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

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Tokens;

    fn config(proxy: Option<&'static str>) -> SessionConfig {
        let tokens =
            Tokens::parse("phones phones-token-0123456789\nlaptops laptops-token-0123456789\n")
                .unwrap();
        SessionConfig::new(
            Auth::Tokens(tokens),
            proxy.map(HeaderName::from_static),
            true,
        )
        .unwrap()
    }

    fn with_cookie(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn the_cookie_names_the_tokens_group() {
        let c = config(None);
        let cookie = c.login_cookie("laptops-token-0123456789");
        let text = cookie.to_str().unwrap();
        assert!(
            text.contains("HttpOnly")
                && text.contains("SameSite=Strict")
                && text.contains("Secure")
        );
        let pair = text.split(';').next().unwrap();
        let s = c.session(&with_cookie(&format!("a=b; {pair}"))).unwrap();
        assert_eq!(s.group, "laptops");
        // A made-up or garbled cookie is no session.
        assert!(c.session(&with_cookie("edge_session=00ff")).is_none());
        assert!(c.session(&with_cookie("edge_session=zz")).is_none());
        assert!(c.session(&HeaderMap::new()).is_none());
    }

    #[test]
    fn csrf_tokens_belong_to_one_session() {
        let c = config(None);
        let phones = c.session(&with_cookie(&format!(
            "edge_session={}",
            hex::encode("phones-token-0123456789")
        )));
        let laptops = c.session(&with_cookie(&format!(
            "edge_session={}",
            hex::encode("laptops-token-0123456789")
        )));
        let (phones, laptops) = (phones.unwrap(), laptops.unwrap());
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
        assert!(config(None).session(&h).is_none());
        let s = config(Some("x-edge-group")).session(&h).unwrap();
        assert_eq!(s.group, "phones");
        assert!(s.from_proxy);
        h.insert("x-edge-group", HeaderValue::from_static("bad group"));
        assert!(config(Some("x-edge-group")).session(&h).is_none());
    }
}
