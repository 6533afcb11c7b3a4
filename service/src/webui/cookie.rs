//! The session cookie as the request carries it: its name and how it is
//! read from the `Cookie` headers. Apart from the sessions
//! ([`super::session`]) so that the API's authentication (`server.rs`),
//! which the sessions build on, reads it without importing them.

use axum::http::{header, HeaderMap};

/// The session cookie's name.
pub const COOKIE: &str = "edge_session";

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}
