//! TLS with rustls (ring provider): the server's certificate chain and key
//! from PEM files, checked at start for what clients would refuse. The
//! handshakes are made by [`crate::conn`], each on its connection's task,
//! bounded by `--header-timeout-ms`.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
// What a certificate says about itself: one reading, shared with the
// uploader's explanations of refused certificates.
pub use cert_facts::{utc, CertFacts};

/// The server configuration for a PEM certificate chain and private key.
///
/// Refuses at start what every client would refuse at each handshake: a
/// CA certificate as the server's own, an expired certificate, a key that
/// is not the certificate's.
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read certificate file {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("certificate file {} is not valid PEM", cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!("certificate file {} holds no certificate", cert.display());
    }
    let facts = check_server_certificate(cert, &chain[0], chain.len(), unix_now())?;
    let key_der = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read a private key from {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                anyhow::anyhow!(
                    "--tls-key {} is not the private key of --tls-cert {} {}: their public keys \
                     differ; give the key made with that certificate (edge-service tls init and \
                     tls renew write server.pem and server.key together)",
                    key.display(),
                    cert.display(),
                    facts.label()
                )
            }
            other => anyhow::Error::new(other)
                .context("the certificate and private key do not form a usable pair"),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Seconds since 1970 now.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// What clients would refuse in the server's own certificate (the first
/// of `path`, of `count`), as an error naming the fix; a warning on stderr
/// when it expires within 30 days or is not valid yet.
pub fn check_server_certificate(
    path: &Path,
    der: &[u8],
    count: usize,
    now: i64,
) -> anyhow::Result<CertFacts> {
    let first = if count > 1 {
        "the first certificate (the server's own)"
    } else {
        "the certificate"
    };
    let Some(facts) = CertFacts::parse(der) else {
        anyhow::bail!(
            "--tls-cert {}: {first} is not a readable X.509 certificate",
            path.display()
        );
    };
    let host = if facts.names.is_empty() {
        "HOST".to_string()
    } else {
        facts.names.join(",")
    };
    if facts.is_ca {
        anyhow::bail!(
            "--tls-cert {}: {first} {} is a CA certificate (basicConstraints CA:TRUE), which \
             clients refuse as a server certificate (`openssl req -x509` makes such \
             certificates); make a CA and a server certificate it signs with: edge-service tls \
             init --dir DIR --name {host}, then serve with --tls-cert DIR/server.pem --tls-key \
             DIR/server.key",
            path.display(),
            facts.label()
        );
    }
    if facts.not_after < now {
        anyhow::bail!(
            "--tls-cert {}: {first} {} expired at {} (now {}), and clients refuse it; make a \
             new one from the same CA with: edge-service tls renew --dir DIR",
            path.display(),
            facts.label(),
            utc(facts.not_after),
            utc(now)
        );
    }
    if facts.not_before > now {
        eprintln!(
            "edge-service: warning: --tls-cert {}: {first} is not valid before {} (now {}): \
             clients refuse it until then; check this machine's clock",
            path.display(),
            utc(facts.not_before),
            utc(now)
        );
    } else if facts.not_after - now < 30 * 86_400 {
        eprintln!(
            "edge-service: warning: --tls-cert {}: {first} expires at {}; make a new one from \
             the same CA with: edge-service tls renew --dir DIR",
            path.display(),
            utc(facts.not_after)
        );
    }
    Ok(facts)
}
