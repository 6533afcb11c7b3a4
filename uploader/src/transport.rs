//! Speaks the ingest protocol (`POST /v1/summaries`, `GET /v1/directives`)
//! over ureq with explicit timeouts.

use std::collections::HashSet;
use std::net::IpAddr;
use std::time::Duration;

use agent_core::{DeviceId, RunId};
use anyhow::{bail, Context};
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{ConnectProxyConnector, Connector, TcpConnector};
use ureq::Agent;

use crate::tls::{client_config, TlsConnector, TrustOptions};

pub use agent_core::framing::CONTENT_TYPE;
/// Most items the service takes in one request.
pub const MAX_BATCH: usize = agent_core::framing::MAX_ITEMS;
/// Largest response body read (JSON acknowledgements, directives).
const MAX_RESPONSE: u64 = 1 << 20;

/// Every timeout of a request.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Name resolution.
    pub resolve: Duration,
    /// TCP connect and TLS handshake.
    pub connect: Duration,
    /// Sending the request head and body.
    pub send: Duration,
    /// Waiting for the response head after the body was sent.
    pub response: Duration,
    /// Reading the response body.
    pub body: Duration,
    /// The whole request, end to end.
    pub global: Duration,
}

impl Timeouts {
    /// Defaults suited to a slow mobile link; `response` is how long the
    /// service may take to store a batch.
    pub fn with_response(response: Duration) -> Timeouts {
        Timeouts {
            resolve: Duration::from_secs(15),
            connect: Duration::from_secs(20),
            send: Duration::from_secs(30),
            response,
            body: Duration::from_secs(30),
            global: Duration::from_secs(30) * 3 + response + Duration::from_secs(35),
        }
    }
}

/// How to reach the service.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Base URL, without a trailing slash.
    pub base: String,
    /// Bearer token, if any.
    pub token: Option<String>,
    /// TLS trust.
    pub trust: TrustOptions,
    /// Timeouts.
    pub timeouts: Timeouts,
}

/// A failed exchange, classified for the retry policy.
#[derive(Debug)]
pub enum SendError {
    /// Worth retrying later (network, timeouts, 5xx, 429); `retry_after`
    /// from the service when it said.
    Transient {
        /// What happened.
        message: String,
        /// The service's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// Retrying the same request cannot help (TLS verification, 401, 403,
    /// 413, 415, a malformed acknowledgement, ...).
    Permanent(String),
    /// 403: some summary of the batch claims another group than the
    /// token's. The whole request was refused; sent alone, the culprit is
    /// refused again and every other summary is stored.
    Forbidden(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Transient { message, .. }
            | SendError::Permanent(message)
            | SendError::Forbidden(message) => f.write_str(message),
        }
    }
}

/// The service's answer to a batch.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ack {
    /// Ids durably stored (including ones stored before).
    pub accepted: HashSet<RunId>,
    /// Items refused for good: (index in the batch, the service's reason).
    pub rejected: Vec<(usize, String)>,
}

/// A client for one service.
#[derive(Debug)]
pub struct Client {
    agent: Agent,
    endpoint: Endpoint,
}

/// Checks the URL: https anywhere, plain http only to a loopback address.
pub fn check_url(url: &str) -> anyhow::Result<String> {
    let uri: ureq::http::Uri = url
        .parse()
        .with_context(|| format!("--server {url:?} is not a URL"))?;
    let host = uri
        .host()
        .with_context(|| format!("--server {url:?} has no host"))?;
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") => {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let loopback =
                bare == "localhost" || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
            if !loopback {
                bail!(
                    "--server {url}: plain http:// is only allowed to a loopback address \
                     (127.0.0.1, ::1, localhost); use https:// for {host}"
                );
            }
        }
        _ => bail!("--server {url:?}: the URL must start with https:// (or http:// to loopback)"),
    }
    if uri.query().is_some() {
        bail!("--server {url:?}: give the base URL without a query");
    }
    Ok(url.trim_end_matches('/').to_string())
}

fn is_loopback_http(base: &str) -> bool {
    base.starts_with("http://")
}

impl Client {
    /// A client for `endpoint` (its URL already checked by [`check_url`]).
    pub fn new(endpoint: Endpoint) -> anyhow::Result<Client> {
        let base = check_url(&endpoint.base)?;
        let t = endpoint.timeouts;
        // A plain-http service is on loopback: never send it through a proxy.
        let proxy = if is_loopback_http(&base) {
            None
        } else {
            ureq::Proxy::try_from_env()
        };
        let config = Agent::config_builder()
            .http_status_as_error(false)
            // The token must not follow a redirect to another host.
            .max_redirects(0)
            .proxy(proxy)
            .timeout_global(Some(t.global))
            .timeout_per_call(Some(t.global))
            .timeout_resolve(Some(t.resolve))
            .timeout_connect(Some(t.connect))
            .timeout_send_request(Some(t.send))
            .timeout_await_100(Some(Duration::from_secs(1)))
            .timeout_send_body(Some(t.send))
            .timeout_recv_response(Some(t.response))
            .timeout_recv_body(Some(t.body))
            .user_agent(format!("edge-agent/{}", agent_core::AGENT_VERSION))
            .build();
        let tls = TlsConnector::new(client_config(&endpoint.trust)?);
        let connector =
            ().chain(ConnectProxyConnector::default())
                .chain(TcpConnector::default())
                .chain(tls);
        let agent = Agent::with_parts(config, connector, DefaultResolver::default());
        Ok(Client {
            agent,
            endpoint: Endpoint { base, ..endpoint },
        })
    }

    /// Sends one batch of encoded summaries.
    pub fn send_batch(&self, items: &[&[u8]]) -> Result<Ack, SendError> {
        let mut body = Vec::with_capacity(items.iter().map(|i| i.len() + 2).sum());
        agent_core::framing::write_body(&mut body, items.iter().copied());
        let url = format!("{}/v1/summaries", self.endpoint.base);
        let mut req = self.agent.post(&url).header("Content-Type", CONTENT_TYPE);
        if let Some(token) = &self.endpoint.token {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        let response = req.send(&body[..]).map_err(|e| transport_error(&url, e))?;
        let body = read_body(&url, response, MAX_RESPONSE)?;
        let ack = serde_json::from_slice::<wire::Ack>(&body).map_err(|e| {
            if e.is_data() {
                SendError::Permanent(format!("POST {url}: malformed acknowledgement: {e}"))
            } else {
                // A proxy or a half-written response: the next try may be whole.
                SendError::Transient {
                    message: format!("{url}: response is not JSON: {e}"),
                    retry_after: None,
                }
            }
        })?;
        check_ack(ack, items.len()).map_err(|e| {
            SendError::Permanent(format!("POST {url}: malformed acknowledgement: {e}"))
        })
    }

    /// Fetches the directives: the body as sent, read by the contract of
    /// `wire::directive::read` (a body it refuses is an error).
    pub fn fetch_directives(&self) -> Result<Vec<u8>, SendError> {
        self.fetch_directives_for(None)
    }

    /// Fetches the directives with this device's own (`?device=<id in
    /// hex>`: the service adds the per-device directives for it).
    pub fn fetch_directives_for(&self, device: Option<&DeviceId>) -> Result<Vec<u8>, SendError> {
        let mut url = format!("{}/v1/directives", self.endpoint.base);
        if let Some(device) = device {
            // A device id is written as hex digits only: nothing to escape.
            url.push_str(&format!("?device={device}"));
        }
        let mut req = self.agent.get(&url);
        if let Some(token) = &self.endpoint.token {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        let response = req.call().map_err(|e| transport_error(&url, e))?;
        // At most the cap is read: a larger body is refused whole, before
        // any of it is parsed or acted on (the previous directives stay).
        let cap = wire::directive::MAX_BODY_BYTES;
        let body = read_body(&url, response, cap as u64)?;
        wire::directive::read(&body).map_err(|why| {
            SendError::Permanent(format!(
                "GET {url}: directives refused, the previous ones stay in force: {why}"
            ))
        })?;
        Ok(body)
    }
}

fn transport_error(url: &str, err: ureq::Error) -> SendError {
    // A refused certificate: one line saying which, what is wrong and the
    // fix, instead of rustls' debug form.
    if let Some(why) = crate::cert_errors::from_ureq(&err) {
        return SendError::Permanent(format!("{url}: {why}"));
    }
    let message = format!("{url}: {err}");
    match err {
        // Certificate refused, bad name, bad pin: the next try will fail the
        // same way and needs an operator.
        ureq::Error::Rustls(_) | ureq::Error::Tls(_) => SendError::Permanent(message),
        ureq::Error::BadUri(_) | ureq::Error::RedirectFailed | ureq::Error::TooManyRedirects => {
            SendError::Permanent(message)
        }
        ureq::Error::Io(ref io) if is_certificate_error(io) => SendError::Permanent(message),
        _ => SendError::Transient {
            message,
            retry_after: None,
        },
    }
}

/// rustls reports a refused certificate through an io::Error wrapping its
/// own error when it happens inside a read or write.
fn is_certificate_error(io: &std::io::Error) -> bool {
    io.get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
        .is_some_and(|e| {
            matches!(
                e,
                rustls::Error::InvalidCertificate(_) | rustls::Error::General(_)
            )
        })
}

/// Reads a response's body, at most `limit` bytes of it (a longer body is
/// refused for good: the same service sends the same); an answer other
/// than 200 is an error with the service's reason.
fn read_body(
    url: &str,
    mut response: ureq::http::Response<ureq::Body>,
    limit: u64,
) -> Result<Vec<u8>, SendError> {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_retry_after);
    let body = response
        .body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => SendError::Permanent(format!(
                "{url}: the response is larger than {limit} bytes, the most read: refused \
                 (for directives, the previous ones stay in force)"
            )),
            e => SendError::Transient {
                message: format!("{url}: reading the response: {e}"),
                retry_after,
            },
        })?;
    if status != 200 {
        let detail = serde_json::from_slice::<wire::ErrorBody>(&body)
            .map(|b| b.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).chars().take(200).collect());
        let message = format!("{url}: HTTP {status}: {detail}");
        return Err(match status {
            408 | 429 | 500..=599 => SendError::Transient {
                message,
                retry_after,
            },
            401 => SendError::Permanent(format!("{message} (check --token-file)")),
            403 => SendError::Forbidden(message),
            _ => SendError::Permanent(message),
        });
    }
    Ok(body)
}

/// `Retry-After` in seconds (the HTTP-date form is rare for 503 from our
/// service and is ignored: the backoff applies instead).
fn parse_retry_after(text: &str) -> Option<Duration> {
    text.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Reads the service's acknowledgement (`wire::Ack`), strictly: every
/// accepted id is 32 hex digits (`wire` reads them so) and every rejected
/// index lies in the batch.
pub fn parse_ack(json: &[u8], items: usize) -> anyhow::Result<Ack> {
    check_ack(serde_json::from_slice(json)?, items)
}

/// [`parse_ack`] after the JSON is read.
fn check_ack(body: wire::Ack, items: usize) -> anyhow::Result<Ack> {
    let mut ack = Ack {
        accepted: body.accepted.into_iter().collect(),
        ..Ack::default()
    };
    for item in body.rejected {
        if item.index >= items {
            bail!(
                "rejected index {} is outside the batch of {items}",
                item.index
            );
        }
        ack.rejected.push((item.index, item.reason));
    }
    Ok(ack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_to_loopback() {
        assert!(check_url("http://127.0.0.1:8080").is_ok());
        assert!(check_url("http://[::1]:8080/").is_ok());
        assert!(check_url("http://localhost:1").is_ok());
        assert!(check_url("https://edge.example.com").is_ok());
        let err = check_url("http://10.0.0.1:8080").unwrap_err().to_string();
        assert!(err.contains("only allowed to a loopback"), "{err}");
        assert!(check_url("ftp://127.0.0.1").is_err());
        assert!(check_url("not a url").is_err());
        assert_eq!(
            check_url("https://a.example/").unwrap(),
            "https://a.example"
        );
    }

    #[test]
    fn ack_parsing_is_strict() {
        let id = RunId([0xab; 16]);
        let json = serde_json::json!({
            "accepted": [hex::encode(id)],
            "rejected": [{"index": 1, "id": null, "reason": "truncated"}]
        })
        .to_string();
        let json = json.as_bytes();
        let ack = parse_ack(json, 2).unwrap();
        assert!(ack.accepted.contains(&id));
        assert_eq!(ack.rejected, vec![(1, "truncated".to_string())]);
        assert!(parse_ack(json, 1).is_err(), "index outside the batch");
        assert!(parse_ack(br#"{"accepted": ["zz"]}"#, 1).is_err());
        assert!(parse_ack(b"{}", 1).is_err());
    }
}
