//! A refused server certificate as one line an operator can act on: which
//! certificate, what is wrong with it, and the command that fixes the
//! common cases.
//!
//! rustls (through webpki) says *what* failed; the names, dates and issuer
//! that make the message actionable come from the presented certificate
//! itself (x509-parser). The explanation travels inside rustls' own error
//! ([`into_rustls`]) up to the transport, which takes it out again
//! ([`from_ureq`]).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::{CertificateError, OtherError};

pub use cert_facts::{utc, CertFacts};

/// The command that makes a working private CA and server certificate.
const INIT: &str = "edge-service tls init --dir DIR --name";
/// The command that makes a new server certificate from the same CA.
const RENEW: &str = "edge-service tls renew --dir DIR";

/// The trust in force, to say what the server's certificate was checked
/// against.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// `--ca FILE`; `None`: Mozilla's roots.
    pub ca_file: Option<PathBuf>,
    /// The certificates of that file.
    pub cas: Vec<CertFacts>,
}

/// An explained refusal, carried inside rustls' error.
#[derive(Debug)]
pub struct Explained(pub String);

impl fmt::Display for Explained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Explained {}

/// Wraps an explanation as the certificate error the handshake fails with
/// (the server receives a `bad_certificate` alert).
pub fn into_rustls(message: String) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(Explained(
        message,
    )))))
}

/// Explains why the certificate `end_entity`, presented for `host`, was
/// refused with `err`; `now` is this device's clock.
pub fn explain(
    err: &rustls::Error,
    end_entity: &CertificateDer<'_>,
    host: &str,
    trust: &Trust,
    now: UnixTime,
) -> String {
    let facts = CertFacts::parse(end_entity);
    let cert = match &facts {
        Some(f) => format!("the server's certificate {}", f.label()),
        None => "the server's certificate (unreadable)".to_string(),
    };
    let now = now.as_secs() as i64;
    let rustls::Error::InvalidCertificate(problem) = err else {
        return format!("TLS: {cert} was refused: {err}");
    };
    match problem {
        _ if is_ca_used_as_end_entity(problem) => format!(
            "TLS: {cert} is a CA certificate (basicConstraints CA:TRUE), which TLS refuses as \
             a server certificate (`openssl req -x509` makes such certificates); make a CA and \
             a server certificate it signs with: {INIT} {host}, then serve with --tls-cert \
             DIR/server.pem --tls-key DIR/server.key and give devices --ca DIR/ca.pem"
        ),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            let names = facts.as_ref().map(|f| f.names.clone()).unwrap_or_default();
            let mut wanted = names.clone();
            wanted.push(host.to_string());
            let has = if names.is_empty() {
                "has no subjectAltName (TLS ignores the CN)".to_string()
            } else {
                format!("is for {}", names.join(", "))
            };
            format!(
                "TLS: {cert} {has}, not for {host} (the host in --server); connect to one of \
                 its names, or make a certificate that has {host} from the same CA with: \
                 {RENEW} --name {}",
                wanted.join(",")
            )
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            let not_after = match problem {
                CertificateError::ExpiredContext { not_after, .. } => {
                    Some(not_after.as_secs() as i64)
                }
                _ => facts.as_ref().map(|f| f.not_after),
            };
            let when = not_after.map_or_else(String::new, |t| format!(" at {}", utc(t)));
            format!(
                "TLS: {cert} expired{when} (this device's clock says {}); make a new one from \
                 the same CA with: {RENEW}, then restart edge-service serve",
                utc(now)
            )
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            let from = match problem {
                CertificateError::NotValidYetContext { not_before, .. } => {
                    Some(not_before.as_secs() as i64)
                }
                _ => facts.as_ref().map(|f| f.not_before),
            };
            let when = from.map_or_else(String::new, |t| format!(" before {}", utc(t)));
            format!(
                "TLS: {cert} is not valid{when}, and this device's clock says {}: set this \
                 device's clock (or the clock of the machine that made the certificate)",
                utc(now)
            )
        }
        CertificateError::UnknownIssuer => unknown_issuer(facts.as_ref(), host, trust),
        // webpki finds the issuer by name: a CA made again under the same
        // name comes out as a signature that does not verify.
        CertificateError::BadSignature
            if facts
                .as_ref()
                .is_some_and(|f| trust.cas.iter().any(|c| c.subject == f.issuer)) =>
        {
            unknown_issuer(facts.as_ref(), host, trust)
        }
        other => format!(
            "TLS: {cert} was refused: {}",
            rustls::Error::from(other.clone())
        ),
    }
}

/// webpki's `CaUsedAsEndEntity` has no rustls variant of its own: it comes
/// as `Other`. The text match is the last resort for a webpki that wraps it
/// differently.
fn is_ca_used_as_end_entity(problem: &CertificateError) -> bool {
    let CertificateError::Other(OtherError(inner)) = problem else {
        return false;
    };
    matches!(
        inner.downcast_ref::<webpki::Error>(),
        Some(webpki::Error::CaUsedAsEndEntity)
    ) || inner.to_string().contains("CaUsedAsEndEntity")
}

fn unknown_issuer(facts: Option<&CertFacts>, host: &str, trust: &Trust) -> String {
    let issuer = facts.map_or("an unknown CA", |f| f.issuer.as_str());
    // The issuer is the subject of the message: name it once.
    let cert = match facts {
        Some(f) => format!("the server's certificate ({})", f.subject),
        None => "the server's certificate (unreadable)".to_string(),
    };
    if facts.is_some_and(|f| f.subject == f.issuer) {
        return format!(
            "TLS: {cert} is self-signed, and a server certificate must be signed by a CA the \
             device trusts; make a CA and a server certificate it signs with: {INIT} {host}, \
             then give devices --ca DIR/ca.pem"
        );
    }
    let Some(file) = &trust.ca_file else {
        return format!(
            "TLS: {cert} is issued by {issuer}, which is not one of the public CAs this \
             uploader trusts (Mozilla's roots); for a private CA give devices its certificate \
             with --ca FILE (edge-service tls init makes one: DIR/ca.pem)"
        );
    };
    let file = file.display();
    let held: Vec<&str> = trust.cas.iter().map(|c| c.subject.as_str()).collect();
    if !trust.cas.is_empty() && trust.cas.iter().all(|c| !c.is_ca) {
        return format!(
            "TLS: {cert} is issued by {issuer}, but --ca {file} holds no CA certificate, only \
             {} (a server certificate?); give devices the CA certificate instead (DIR/ca.pem \
             of edge-service tls init, not server.pem)",
            held.join("; ")
        );
    }
    if trust.cas.iter().any(|c| c.subject == issuer) {
        return format!(
            "TLS: {cert} is issued by {issuer}, but not by the CA of that name in --ca {file} \
             (same name, another key: was the CA made again?); give devices the ca.pem that \
             signed the server certificate, or make a server certificate from the CA the \
             devices have with: {RENEW}"
        );
    }
    format!(
        "TLS: {cert} is issued by {issuer}, which is not the CA in --ca {file} ({}); give \
         devices the ca.pem that signed the server certificate (edge-service tls init writes it \
         beside server.pem), or make a server certificate from the CA the devices have with: \
         {RENEW}",
        held.join("; ")
    )
}

/// The server's key matched no `--pin-sha256`.
pub fn pin_mismatch(seen: &[u8; 32], pins: &[[u8; 32]], end_entity: &CertificateDer<'_>) -> String {
    let b64 = |p: &[u8; 32]| base64::engine::general_purpose::STANDARD.encode(p);
    let cert = match CertFacts::parse(end_entity) {
        Some(f) => f.label(),
        None => "(unreadable)".to_string(),
    };
    let given: Vec<String> = pins.iter().map(b64).collect();
    format!(
        "TLS: the server's certificate {cert} has a public key whose pin is {}, which matches \
         no --pin-sha256 (given: {}); if the server's key was changed on purpose, give devices \
         its pin: --pin-sha256 {}",
        b64(seen),
        given.join(", "),
        b64(seen)
    )
}

/// The one-line explanation of a refused certificate inside a ureq error
/// (rustls' error comes as `Error::Rustls`, or inside an `io::Error` when
/// the handshake ran within a read or write); `None` when the error is
/// about something else.
pub fn from_ureq(err: &ureq::Error) -> Option<String> {
    let rustls_err = match err {
        ureq::Error::Rustls(e) => e,
        ureq::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>()?,
        _ => return None,
    };
    let rustls::Error::InvalidCertificate(problem) = rustls_err else {
        return None;
    };
    if let CertificateError::Other(OtherError(inner)) = problem {
        if let Some(explained) = inner.downcast_ref::<Explained>() {
            return Some(explained.0.clone());
        }
    }
    // Not through our verifier (it explains every refusal): say at least
    // what rustls said, with the fix for the commonest case.
    Some(if is_ca_used_as_end_entity(problem) {
        format!(
            "TLS: the server's certificate is a CA certificate, which TLS refuses as a server \
             certificate; make a CA and a server certificate it signs with: {INIT} HOST"
        )
    } else {
        format!("TLS: the server's certificate was refused: {rustls_err}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_certificate_is_said_not_panicked() {
        let junk = CertificateDer::from(vec![0x30, 0x03, 0x01, 0x01]);
        let msg = explain(
            &rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
            &junk,
            "h",
            &Trust::default(),
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(0)),
        );
        assert!(msg.contains("(unreadable)"), "{msg}");
    }

    #[test]
    fn explained_error_comes_back_out_of_ureq() {
        let err = into_rustls("TLS: the reason".into());
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, err.clone());
        assert_eq!(
            from_ureq(&ureq::Error::Io(io)).as_deref(),
            Some("TLS: the reason")
        );
        assert_eq!(
            from_ureq(&ureq::Error::Rustls(err)).as_deref(),
            Some("TLS: the reason")
        );
        assert_eq!(from_ureq(&ureq::Error::ConnectionFailed), None);
    }
}
