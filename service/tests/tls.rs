//! HTTPS with a certificate from a throwaway CA, as the uploader will use it.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

fn https_request(
    addr: &str,
    ca_der: rustls::pki_types::CertificateDer<'static>,
    request: &[u8],
) -> String {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca_der).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
    tls.write_all(request).unwrap();
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}

#[test]
fn serves_https_with_the_given_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();

    let server = start(
        dir.path(),
        &[
            "--tls-cert",
            cert_path.to_str().unwrap(),
            "--tls-key",
            key_path.to_str().unwrap(),
        ],
    );
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let addr = server.url.trim_start_matches("https://").to_string();

    let response = https_request(
        &addr,
        ca_cert.der().clone(),
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("ok"), "{response}");

    let item = fixtures::sample::encoded(1, 200, None);
    let body = common::body([item.as_slice()]);
    let head = format!(
        "POST /v1/summaries HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(&body);
    let response = https_request(&addr, ca_cert.der().clone(), &request);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(&id_of(&item)), "{response}");
    assert_eq!(stored_ids(&server.db), vec![id_of(&item)]);

    // A client that does not trust the CA is refused by the handshake.
    let other_key = KeyPair::generate().unwrap();
    let other_ca = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&other_key)
        .unwrap();
    let refused = std::panic::catch_unwind(|| {
        https_request(
            &addr,
            other_ca.der().clone(),
            b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
        )
    });
    assert!(refused.map_or(true, |r| r.is_empty()));

    // Plain HTTP to the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(&addr).unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    plain
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = Vec::new();
    let _ = plain.read_to_end(&mut buf);
    assert!(!String::from_utf8_lossy(&buf).contains("200"));
}
