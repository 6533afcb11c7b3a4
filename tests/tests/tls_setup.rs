//! TLS as an operator sets it up, with the real binaries: `edge-service tls
//! init` makes a CA and a server certificate, `edge-service serve` uses
//! them, `edge-agent upload --ca` trusts them; `tls renew` rotates the
//! server certificate and devices keep working. And each certificate
//! mistake is one line naming the certificate, what is wrong and the fix,
//! as a person sees it on stderr.

mod tracer_support;
mod upload_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fixtures::summaries::{random_id, sample_summary};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tracer_support::output_timeout;
use upload_support::{Proxy, GROUP, TOKEN};
use uploader::spool::Spool;

/// Every command of these tests finishes well within this.
const LIMIT_SECS: u64 = 120;

fn service_bin() -> PathBuf {
    edge_tests::binary("edge-service")
}

fn agent_bin() -> PathBuf {
    edge_tests::binary("edge-agent")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `edge-service ARGS`, bounded in time.
fn service(args: &[&str]) -> Output {
    output_timeout(Command::new(service_bin()).args(args), LIMIT_SECS)
}

/// The value printed after `--pin-sha256 ` on a line of its own.
fn printed_pin(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("--pin-sha256 "))
        .unwrap_or_else(|| panic!("no pin printed in:\n{stdout}"))
        .to_string()
}

// ------------------------------------------------------------------ serve

/// `edge-service serve` over HTTPS on a free loopback port.
struct Serve {
    child: Child,
    addr: SocketAddr,
    /// An API token of an operator of the test group (fleet data).
    operator: String,
}

impl Serve {
    fn start(work: &Path, cert: &Path, key: &Path) -> Serve {
        let tokens = work.join("tokens");
        std::fs::write(&tokens, format!("{GROUP} {TOKEN}\n")).unwrap();
        let mut child = Command::new(service_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(work.join("edge.db"))
            .arg("--tokens")
            .arg(&tokens)
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start edge-service");
        // The first stdout line says where it listens; keep draining after.
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(first)) = lines.next() {
                let _ = tx.send(first);
            }
            for _ in lines {}
        });
        let line = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("edge-service serve did not say where it listens");
            }
        };
        let addr = line
            .strip_prefix("edge-service listening on https://")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        let operator =
            lab::procs::operator_token(&service_bin(), &work.join("edge.db"), GROUP).unwrap();
        Serve {
            child,
            addr,
            operator,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the service stored for the test group, asked over HTTPS trusting
/// only `ca`.
fn stored_runs(serve: &Serve, ca: &Path) -> usize {
    let (addr, operator) = (serve.addr, &serve.operator);
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(
        tls,
        "GET /v1/runs?group={GROUP}&limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: Bearer {operator}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    // The server may close without close_notify: keep what arrived.
    let _ = tls.read_to_end(&mut response);
    let response = text(&response);
    let (head, body) = response.split_once("\r\n\r\n").expect("HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    json["runs"].as_array().expect("runs").len()
}

// ----------------------------------------------------------------- device

/// A device: a token file and a spool; uploads with the real `edge-agent`.
struct Device {
    dir: tempfile::TempDir,
}

impl Device {
    fn new() -> Device {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        Device { dir }
    }

    fn spool_dir(&self) -> PathBuf {
        self.dir.path().join("spool")
    }

    fn spool(&self, n: usize) {
        let spool = Spool::open(&self.spool_dir()).unwrap();
        for _ in 0..n {
            spool
                .put(&mut sample_summary(random_id(), "curl", Some(GROUP)))
                .unwrap();
        }
    }

    fn spooled(&self) -> usize {
        Spool::open(&self.spool_dir())
            .unwrap()
            .pending()
            .unwrap()
            .pending
            .len()
    }

    /// `edge-agent upload --once --now ... --server URL EXTRA...`.
    fn upload(&self, url: &str, extra: &[&str]) -> Output {
        let mut cmd = Command::new(agent_bin());
        cmd.args([
            "upload",
            "--server",
            url,
            "--once",
            "--now",
            "--ignore-power",
        ])
        .arg("--token-file")
        .arg(self.dir.path().join("token"))
        .arg("--spool")
        .arg(self.spool_dir())
        .args(["--backoff-ms", "20"])
        .args(extra)
        // Straight to the loopback server.
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy");
        output_timeout(&mut cmd, LIMIT_SECS)
    }

    /// Uploads expecting a refusal; returns the message after the URL on
    /// the last stderr line, checking nothing was sent.
    fn refused(&self, url: &str, extra: &[&str]) -> String {
        let before = self.spooled();
        let out = self.upload(url, extra);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(self.spooled(), before, "nothing deleted");
        let line = stderr.lines().last().unwrap_or_default().to_string();
        // The line as a person sees it (`--nocapture` shows it).
        eprintln!("seen: {line}");
        let prefix = format!("upload: sent 0, {before} left in the spool: {url}/v1/summaries: ");
        line.strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("{line:?} does not start with {prefix:?}"))
            .to_string()
    }
}

// -------------------------------------------------------- the happy path

#[test]
fn tls_init_serve_upload_renew_upload() {
    let work = tempfile::tempdir().unwrap();
    let tls = work.path().join("tls");
    let tls_s = tls.to_str().unwrap();
    let (ca, cert, key, ca_key) = (
        tls.join("ca.pem"),
        tls.join("server.pem"),
        tls.join("server.key"),
        tls.join("ca.key"),
    );
    let init = service(&[
        "tls",
        "init",
        "--dir",
        tls_s,
        "--name",
        "localhost,127.0.0.1",
        "--days",
        "30",
    ]);
    let stdout = text(&init.stdout);
    assert!(init.status.success(), "{}", text(&init.stderr));
    let pin = printed_pin(&stdout);
    assert!(
        stdout.contains(&format!(
            "edge-service serve --tls-cert {} --tls-key {}",
            cert.display(),
            key.display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("--ca {}", ca.display())),
        "{stdout}"
    );
    for k in [&ca_key, &key] {
        let mode = std::fs::metadata(k).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", k.display());
    }

    // Serve, upload with the CA and the printed pin, by both names.
    let device = Device::new();
    let mut serve = Serve::start(work.path(), &cert, &key);
    device.spool(3);
    let url = format!("https://127.0.0.1:{}", serve.port());
    let out = device.upload(&url, &["--ca", ca.to_str().unwrap(), "--pin-sha256", &pin]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    device.spool(1);
    let by_name = format!("https://localhost:{}", serve.port());
    let out = device.upload(&by_name, &["--ca", ca.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stored_runs(&serve, &ca), 4);

    // A second init would replace the CA the devices trust: refused.
    let ca_before = std::fs::read(&ca).unwrap();
    let again = service(&["tls", "init", "--dir", tls_s, "--name", "localhost"]);
    assert_eq!(again.status.code(), Some(2));
    let err = text(&again.stderr);
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&ca).unwrap(), ca_before);

    // Rotate: a new server certificate from the same CA, same key.
    let cert_before = std::fs::read(&cert).unwrap();
    let renew = service(&["tls", "renew", "--dir", tls_s, "--days", "60"]);
    assert!(renew.status.success(), "{}", text(&renew.stderr));
    assert_eq!(printed_pin(&text(&renew.stdout)), pin, "the key is kept");
    assert_ne!(std::fs::read(&cert).unwrap(), cert_before);
    assert_eq!(std::fs::read(&ca).unwrap(), ca_before, "the CA is kept");
    drop(serve);
    serve = Serve::start(work.path(), &cert, &key);
    device.spool(2);
    let url = format!("https://127.0.0.1:{}", serve.port());
    let out = device.upload(&url, &["--ca", ca.to_str().unwrap(), "--pin-sha256", &pin]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stored_runs(&serve, &ca), 6);

    // Rotate the key too: the old pin is refused, naming the new one.
    let renew = service(&["tls", "renew", "--dir", tls_s, "--new-key"]);
    assert!(renew.status.success(), "{}", text(&renew.stderr));
    let new_pin = printed_pin(&text(&renew.stdout));
    assert_ne!(new_pin, pin);
    drop(serve);
    let serve = Serve::start(work.path(), &cert, &key);
    device.spool(1);
    let url = format!("https://127.0.0.1:{}", serve.port());
    let why = device.refused(&url, &["--ca", ca.to_str().unwrap(), "--pin-sha256", &pin]);
    assert!(
        why.contains(&format!(
            "pin is {new_pin}, which matches no --pin-sha256 (given: {pin})"
        )),
        "{why}"
    );
    let out = device.upload(
        &url,
        &["--ca", ca.to_str().unwrap(), "--pin-sha256", &new_pin],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stored_runs(&serve, &ca), 7);
    assert_eq!(device.spooled(), 0);
}

// ------------------------------------------------ certificate mistakes

/// A certificate made by the test, with its key.
struct Made {
    pem: String,
    der: CertificateDer<'static>,
    key: KeyPair,
}

impl Made {
    fn write(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join(format!("{name}.pem"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&cert, &self.pem).unwrap();
        std::fs::write(&key, self.key.serialize_pem()).unwrap();
        (cert, key)
    }

    /// A TLS server configuration presenting it (rustls does not judge
    /// its own certificate: the client must).
    fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let key = PrivateKeyDer::try_from(self.key.serialize_der()).unwrap();
        Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![self.der.clone()], key)
            .unwrap(),
        )
    }
}

fn params(cn: &str, sans: &[&str]) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*s).try_into().unwrap()),
        })
        .collect();
    p
}

/// What `openssl req -x509 -newkey ec -subj /CN=localhost -addext
/// subjectAltName=DNS:localhost,IP:127.0.0.1` makes: a self-signed CA
/// certificate (openssl's default config adds basicConstraints CA:TRUE).
fn openssl_like() -> Made {
    let mut p = params("localhost", &["localhost", "127.0.0.1"]);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Made {
        pem: cert.pem(),
        der: cert.der().clone(),
        key,
    }
}

fn make_ca(cn: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = params(cn, &[]);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

fn signed(ca: &CertifiedIssuer<'static, KeyPair>, p: CertificateParams) -> Made {
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, ca).unwrap();
    Made {
        pem: cert.pem(),
        der: cert.der().clone(),
        key,
    }
}

/// A TLS server presenting `made`; the handshake fails before anything is
/// forwarded, so the backend is never reached.
fn presenting(made: &Made) -> Proxy {
    Proxy::start(made.server_config(), "127.0.0.1:9".parse().unwrap())
}

fn write_ca(dir: &Path, ca: &CertifiedIssuer<'static, KeyPair>) -> PathBuf {
    let path = dir.join("ca.pem");
    std::fs::write(&path, ca.pem()).unwrap();
    path
}

#[test]
fn ca_certificate_as_server_certificate() {
    let device = Device::new();
    device.spool(2);
    let made = openssl_like();
    let (cert, key) = made.write(device.dir.path(), "openssl");
    let server = presenting(&made);
    let why = device.refused(&server.url(), &["--ca", cert.to_str().unwrap()]);
    assert_eq!(
        why,
        "TLS: the server's certificate (CN=localhost, self-signed) is a CA certificate \
         (basicConstraints CA:TRUE), which TLS refuses as a server certificate (`openssl req \
         -x509` makes such certificates); make a CA and a server certificate it signs with: \
         edge-service tls init --dir DIR --name 127.0.0.1, then serve with --tls-cert \
         DIR/server.pem --tls-key DIR/server.key and give devices --ca DIR/ca.pem"
    );

    // The service refuses to start with it at all.
    let db = device.dir.path().join("x.db");
    let out = service(&[
        "serve",
        "--insecure-no-auth",
        "--listen",
        "127.0.0.1:0",
        "--db",
        db.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim_end(),
        format!(
            "edge-service: --tls-cert {}: the certificate (CN=localhost, self-signed) is a CA \
             certificate (basicConstraints CA:TRUE), which clients refuse as a server \
             certificate (`openssl req -x509` makes such certificates); make a CA and a server \
             certificate it signs with: edge-service tls init --dir DIR --name \
             localhost,127.0.0.1, then serve with --tls-cert DIR/server.pem --tls-key \
             DIR/server.key",
            cert.display()
        )
    );
    eprintln!("seen: {}", text(&out.stderr).trim_end());
}

#[test]
fn certificate_for_another_name() {
    let device = Device::new();
    device.spool(1);
    let ca = make_ca("Edge Test CA");
    let ca_file = write_ca(device.dir.path(), &ca);
    let made = signed(&ca, params("edge.example", &["edge.example", "10.1.2.3"]));
    let server = presenting(&made);
    let why = device.refused(&server.url(), &["--ca", ca_file.to_str().unwrap()]);
    assert_eq!(
        why,
        "TLS: the server's certificate (CN=edge.example, issued by CN=Edge Test CA) is for \
         edge.example, 10.1.2.3, not for 127.0.0.1 (the host in --server); connect to one of \
         its names, or make a certificate that has 127.0.0.1 from the same CA with: \
         edge-service tls renew --dir DIR --name edge.example,10.1.2.3,127.0.0.1"
    );
}

#[test]
fn expired_certificate() {
    let device = Device::new();
    device.spool(1);
    let ca = make_ca("Edge Test CA");
    let ca_file = write_ca(device.dir.path(), &ca);
    let mut p = params("127.0.0.1", &["127.0.0.1"]);
    p.not_before = rcgen::date_time_ymd(2020, 1, 1);
    p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let made = signed(&ca, p);
    let server = presenting(&made);
    let why = device.refused(&server.url(), &["--ca", ca_file.to_str().unwrap()]);
    let (head, tail) = why.split_once("this device's clock says ").expect(&why);
    assert_eq!(
        head,
        "TLS: the server's certificate (CN=127.0.0.1, issued by CN=Edge Test CA) expired at \
         2021-01-01 00:00:00 UTC ("
    );
    assert!(
        tail.ends_with(
            " UTC); make a new one from the same CA with: edge-service tls renew --dir DIR, \
             then restart edge-service serve"
        ),
        "{why}"
    );

    // The service refuses to start with it.
    let (cert, key) = made.write(device.dir.path(), "expired");
    let db = device.dir.path().join("x.db");
    let out = service(&[
        "serve",
        "--insecure-no-auth",
        "--listen",
        "127.0.0.1:0",
        "--db",
        db.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "edge-service: --tls-cert {}: the certificate (CN=127.0.0.1, issued by CN=Edge Test \
             CA) expired at 2021-01-01 00:00:00 UTC (now ",
            cert.display()
        )) && err.trim_end().ends_with(
            "), and clients refuse it; make a new one from the same CA with: edge-service tls \
             renew --dir DIR"
        ),
        "{err}"
    );
    eprintln!("seen: {}", err.trim_end());
}

#[test]
fn certificate_from_an_unknown_issuer() {
    let device = Device::new();
    device.spool(1);
    let theirs = make_ca("Someone Else CA");
    let ours = make_ca("Edge Test CA");
    let ca_file = write_ca(device.dir.path(), &ours);
    let ca_s = ca_file.to_str().unwrap();
    let made = signed(&theirs, params("127.0.0.1", &["127.0.0.1"]));
    let server = presenting(&made);
    let why = device.refused(&server.url(), &["--ca", ca_s]);
    assert_eq!(
        why,
        format!(
            "TLS: the server's certificate (CN=127.0.0.1) is issued by CN=Someone Else CA, \
             which is not the CA in --ca {ca_s} (CN=Edge Test CA); give devices the ca.pem that \
             signed the server certificate (edge-service tls init writes it beside server.pem), \
             or make a server certificate from the CA the devices have with: edge-service tls \
             renew --dir DIR"
        )
    );

    // A CA made again under the same name (tls init --force).
    let again = make_ca("Someone Else CA");
    let again_file = device.dir.path().join("again.pem");
    std::fs::write(&again_file, again.pem()).unwrap();
    let again_s = again_file.to_str().unwrap();
    let why = device.refused(&server.url(), &["--ca", again_s]);
    assert_eq!(
        why,
        format!(
            "TLS: the server's certificate (CN=127.0.0.1) is issued by CN=Someone Else CA, but \
             not by the CA of that name in --ca {again_s} (same name, another key: was the CA \
             made again?); give devices the ca.pem that signed the server certificate, or make \
             a server certificate from the CA the devices have with: edge-service tls renew \
             --dir DIR"
        )
    );

    // The server certificate given as --ca instead of the CA.
    let (leaf, _) = made.write(device.dir.path(), "leaf");
    let leaf_s = leaf.to_str().unwrap();
    let why = device.refused(&server.url(), &["--ca", leaf_s]);
    assert_eq!(
        why,
        format!(
            "TLS: the server's certificate (CN=127.0.0.1) is issued by CN=Someone Else CA, but \
             --ca {leaf_s} holds no CA certificate, only CN=127.0.0.1 (a server certificate?); \
             give devices the CA certificate instead (DIR/ca.pem of edge-service tls init, not \
             server.pem)"
        )
    );

    // No --ca: Mozilla's roots.
    let why = device.refused(&server.url(), &[]);
    assert_eq!(
        why,
        "TLS: the server's certificate (CN=127.0.0.1) is issued by CN=Someone Else CA, which \
         is not one of the public CAs this uploader trusts (Mozilla's roots); for a private CA \
         give devices its certificate with --ca FILE (edge-service tls init makes one: \
         DIR/ca.pem)"
    );
}

#[test]
fn self_signed_server_certificate() {
    let device = Device::new();
    device.spool(1);
    let ours = make_ca("Edge Test CA");
    let ca_file = write_ca(device.dir.path(), &ours);
    let key = KeyPair::generate().unwrap();
    let cert = params("127.0.0.1", &["127.0.0.1"])
        .self_signed(&key)
        .unwrap();
    let made = Made {
        pem: cert.pem(),
        der: cert.der().clone(),
        key,
    };
    let server = presenting(&made);
    let why = device.refused(&server.url(), &["--ca", ca_file.to_str().unwrap()]);
    assert_eq!(
        why,
        "TLS: the server's certificate (CN=127.0.0.1) is self-signed, and a server certificate \
         must be signed by a CA the device trusts; make a CA and a server certificate it signs \
         with: edge-service tls init --dir DIR --name 127.0.0.1, then give devices --ca \
         DIR/ca.pem"
    );
}

#[test]
fn pin_mismatch_names_the_pin_seen() {
    let device = Device::new();
    device.spool(1);
    let ca = make_ca("Edge Test CA");
    let ca_file = write_ca(device.dir.path(), &ca);
    let made = signed(&ca, params("127.0.0.1", &["127.0.0.1"]));
    let seen = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .encode(uploader::tls::spki_sha256(&made.der).unwrap())
    };
    let server = presenting(&made);
    let wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let why = device.refused(
        &server.url(),
        &["--ca", ca_file.to_str().unwrap(), "--pin-sha256", wrong],
    );
    assert_eq!(
        why,
        format!(
            "TLS: the server's certificate (CN=127.0.0.1, issued by CN=Edge Test CA) has a \
             public key whose pin is {seen}, which matches no --pin-sha256 (given: {wrong}); if \
             the server's key was changed on purpose, give devices its pin: --pin-sha256 {seen}"
        )
    );
}

#[test]
fn service_refuses_a_key_that_is_not_the_certificates() {
    let work = tempfile::tempdir().unwrap();
    let ca = make_ca("Edge Test CA");
    let made = signed(&ca, params("127.0.0.1", &["127.0.0.1"]));
    let other = signed(&ca, params("127.0.0.1", &["127.0.0.1"]));
    let (cert, _) = made.write(work.path(), "server");
    let (_, wrong_key) = other.write(work.path(), "other");
    let db = work.path().join("x.db");
    let out = service(&[
        "serve",
        "--insecure-no-auth",
        "--listen",
        "127.0.0.1:0",
        "--db",
        db.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        wrong_key.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim_end(),
        format!(
            "edge-service: --tls-key {} is not the private key of --tls-cert {} \
             (CN=127.0.0.1, issued by CN=Edge Test CA): their public keys differ; give the key \
             made with that certificate (edge-service tls init and tls renew write server.pem \
             and server.key together)",
            wrong_key.display(),
            cert.display()
        )
    );
    eprintln!("seen: {}", text(&out.stderr).trim_end());
}
