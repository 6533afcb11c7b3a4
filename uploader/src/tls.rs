//! TLS for the upload: rustls with the ring provider (it cross-compiles
//! with a plain C cross compiler), Mozilla's roots or a private CA, and
//! optional public-key pinning.
//!
//! ureq's own rustls connector cannot take a custom certificate verifier,
//! which pinning needs, so this module provides the TLS step of ureq's
//! connector chain itself; everything else (proxy, TCP, HTTP) stays ureq's.

use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use crate::cert_errors;
use anyhow::{bail, Context};
use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, StreamOwned};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
    TransportAdapter,
};

/// Where trust comes from.
#[derive(Debug, Clone, Default)]
pub struct TrustOptions {
    /// PEM file of the CA(s) to trust instead of Mozilla's roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// SHA-256 digests of the SubjectPublicKeyInfo the server's certificate
    /// must carry (any one of them); empty: no pinning.
    pub pins: Vec<[u8; 32]>,
}

/// Parses a `--pin-sha256` value: base64 of the SHA-256 of the DER
/// SubjectPublicKeyInfo (as HPKP and curl's `--pinnedpubkey sha256//` use).
pub fn parse_pin(text: &str) -> anyhow::Result<[u8; 32]> {
    let text = text.trim().trim_start_matches("sha256//");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .with_context(|| format!("pin {text:?} is not base64"))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| anyhow::anyhow!("pin {text:?} is {} bytes, a SHA-256 is 32", b.len()))
}

/// The pin of a certificate: SHA-256 of its SubjectPublicKeyInfo.
pub fn spki_sha256(cert_der: &[u8]) -> anyhow::Result<[u8; 32]> {
    let der = CertificateDer::from(cert_der);
    let cert = webpki::EndEntityCert::try_from(&der)
        .map_err(|e| anyhow::anyhow!("cannot parse certificate: {e}"))?;
    let spki = cert.subject_public_key_info();
    let digest = ring::digest::digest(&ring::digest::SHA256, spki.as_ref());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    Ok(out)
}

/// Builds the rustls client configuration.
pub fn client_config(trust: &TrustOptions) -> anyhow::Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    let mut explain_trust = cert_errors::Trust {
        ca_file: trust.ca_file.clone(),
        cas: Vec::new(),
    };
    match &trust.ca_file {
        Some(path) => {
            let certs = read_ca_file(path)?;
            explain_trust.cas = certs
                .iter()
                .filter_map(|c| cert_errors::CertFacts::parse(c))
                .collect();
            let (added, _ignored) = roots.add_parsable_certificates(certs);
            if added == 0 {
                bail!(
                    "--ca {}: no usable CA certificate in the file",
                    path.display()
                );
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .context("cannot build the certificate verifier")?;
    let verifier: Arc<dyn ServerCertVerifier> = Arc::new(Verifier {
        inner: webpki,
        pins: trust.pins.clone(),
        trust: explain_trust,
    });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .dangerous()
        // Not dangerous: full WebPKI verification, plus the pin check.
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn read_ca_file(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem =
        std::fs::read(path).with_context(|| format!("--ca {}: cannot read", path.display()))?;
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
    let certs =
        certs.with_context(|| format!("--ca {}: not a PEM certificate file", path.display()))?;
    if certs.is_empty() {
        bail!("--ca {}: no certificate in the file", path.display());
    }
    Ok(certs)
}

/// WebPKI verification first; then the leaf's public key must match a pin
/// (when pins are given). A refusal is explained in one line naming the
/// certificate, what is wrong and the fix ([`cert_errors`]).
#[derive(Debug)]
struct Verifier {
    inner: Arc<WebPkiServerVerifier>,
    pins: Vec<[u8; 32]>,
    trust: cert_errors::Trust,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .map_err(|e| {
                let host = server_name.to_str();
                cert_errors::into_rustls(cert_errors::explain(
                    &e,
                    end_entity,
                    &host,
                    &self.trust,
                    now,
                ))
            })?;
        if self.pins.is_empty() {
            return Ok(verified);
        }
        // Verified above, so it parses.
        let pin =
            spki_sha256(end_entity).map_err(|e| rustls::Error::General(format!("pinning: {e}")))?;
        if self.pins.contains(&pin) {
            Ok(verified)
        } else {
            Err(cert_errors::into_rustls(cert_errors::pin_mismatch(
                &pin, &self.pins, end_entity,
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The TLS step of the connector chain: wraps the TCP (or proxy tunnel)
/// transport in rustls for `https` URLs.
pub struct TlsConnector {
    config: Arc<ClientConfig>,
}

impl TlsConnector {
    /// A connector using this configuration.
    pub fn new(config: Arc<ClientConfig>) -> TlsConnector {
        TlsConnector { config }
    }
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector").finish_non_exhaustive()
    }
}

impl<In: Transport> Connector<In> for TlsConnector {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Err(ureq::Error::Tls("TLS connector has no transport to wrap"));
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details
            .uri
            .host()
            .ok_or(ureq::Error::Tls("URL has no host"))?;
        // `[::1]` → `::1` for an IP address name.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| ureq::Error::Tls("host is not a valid TLS server name"))?;
        let mut conn = ClientConnection::new(self.config.clone(), name)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(TlsTransport {
            buffers,
            stream: StreamOwned { conn, sock },
        })))
    }
}

/// A TLS connection as a ureq transport.
pub struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsTransport").finish_non_exhaustive()
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_parsing() {
        let pin = [7u8; 32];
        let text = base64::engine::general_purpose::STANDARD.encode(pin);
        assert_eq!(parse_pin(&text).unwrap(), pin);
        assert_eq!(parse_pin(&format!("sha256//{text}")).unwrap(), pin);
        assert!(parse_pin("not base64!").is_err());
        assert!(parse_pin("AAAA")
            .unwrap_err()
            .to_string()
            .contains("3 bytes"));
    }

    #[test]
    fn missing_ca_file_is_named() {
        let trust = TrustOptions {
            ca_file: Some("/nonexistent/ca.pem".into()),
            pins: vec![],
        };
        let err = client_config(&trust).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
    }
}
