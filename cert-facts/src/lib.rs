//! What an X.509 certificate says about itself (subject, issuer, names,
//! validity, CA flag, key pin), for messages on both sides: the uploader's
//! explanation of a refused server certificate and the service's checks of
//! its own (`serve` at start, `tls init`/`renew`). A crate of its own so
//! that the service does not depend on the device's client for it.

use base64::Engine as _;

/// What a certificate says about itself, for the uploader's messages and the
/// service's (`edge-service serve`'s checks at start, `tls init`/`renew`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertFacts {
    /// The subject, as `CN=..., O=...`.
    pub subject: String,
    /// The issuer, same form.
    pub issuer: String,
    /// subjectAltName DNS names and IP addresses, in the certificate's order.
    pub names: Vec<String>,
    /// Validity, Unix seconds.
    pub not_before: i64,
    /// Validity, Unix seconds.
    pub not_after: i64,
    /// basicConstraints CA:TRUE.
    pub is_ca: bool,
    /// The DER SubjectPublicKeyInfo (what `--pin-sha256` hashes).
    pub spki: Vec<u8>,
}

impl CertFacts {
    /// Reads a DER certificate; `None` when it cannot be parsed (the
    /// message then says so instead of naming it).
    pub fn parse(der: &[u8]) -> Option<CertFacts> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let names = match cert.subject_alternative_name() {
            Ok(Some(san)) => san
                .value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                    x509_parser::extensions::GeneralName::IPAddress(ip) => ip_text(ip),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        Some(CertFacts {
            subject: name_text(&cert.subject().to_string()),
            issuer: name_text(&cert.issuer().to_string()),
            names,
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            is_ca: cert.is_ca(),
            spki: cert.public_key().raw.to_vec(),
        })
    }

    /// `(CN=localhost, issued by CN=Edge CA)` or `(CN=localhost, self-signed)`.
    pub fn label(&self) -> String {
        if self.subject == self.issuer {
            format!("({}, self-signed)", self.subject)
        } else {
            format!("({}, issued by {})", self.subject, self.issuer)
        }
    }

    /// The `--pin-sha256` value of the certificate's key: base64 of the
    /// SHA-256 of its DER SubjectPublicKeyInfo (as the uploader's `tls::spki_sha256`).
    pub fn pin(&self) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, &self.spki);
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    }
}

/// An empty distinguished name prints as nothing: say so.
fn name_text(name: &str) -> String {
    if name.is_empty() {
        "no subject name".into()
    } else {
        name.to_string()
    }
}

fn ip_text(bytes: &[u8]) -> Option<String> {
    match bytes.len() {
        4 => Some(std::net::Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?).to_string()),
        16 => Some(std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?).to_string()),
        _ => None,
    }
}

/// A Unix time as `2025-01-31 23:59:59 UTC`.
pub fn utc(secs: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(secs) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => format!("{secs} s after 1970"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(i64::MAX), format!("{} s after 1970", i64::MAX));
    }

    #[test]
    fn ip_names() {
        assert_eq!(ip_text(&[127, 0, 0, 1]).unwrap(), "127.0.0.1");
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        assert_eq!(ip_text(&v6).unwrap(), "::1");
        assert_eq!(ip_text(&[1, 2, 3]), None);
    }
}
