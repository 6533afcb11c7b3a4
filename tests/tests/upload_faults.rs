//! The uploader's fault matrix, end to end: the real `edge-service`
//! (plain HTTP on loopback) behind a fault-injecting, TLS-terminating proxy
//! whose certificates come from a throwaway CA made here. Every test ends
//! with each spooled summary stored exactly once at the service.

use std::collections::{HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use uploader::conditions::Unconditional;
use uploader::spool::Spool;
use uploader::testing::{random_id, sample_summary};

const GROUP: &str = "fleet";
const TOKEN: &str = "fleet-token-3f9a0c1d";

// ---------------------------------------------------------------- service

/// The real service, plain HTTP on a loopback port.
struct Service {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Service {
    fn start() -> Service {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::write(&tokens, format!("# test\n{GROUP} {TOKEN}\nother other-token-77\n")).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new(edge_tests::binary("edge-service"))
            .arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--db")
            .arg(dir.path().join("edge.db"))
            .arg("--tokens")
            .arg(&tokens)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start edge-service");
        let service = Service {
            child,
            addr,
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(30);
        while http_get(addr, "/healthz").is_err() {
            assert!(Instant::now() < until, "edge-service did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        service
    }

    /// Ids of the runs the service stored for the test group, in its order.
    fn stored_ids(&self) -> Vec<String> {
        let body = http_get(self.addr, &format!("/v1/runs?group={GROUP}&limit=100000")).unwrap();
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        json["runs"]
            .as_array()
            .expect("runs list")
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// Asserts the service holds each of `ids` exactly once, and nothing else.
    fn assert_stored_exactly_once(&self, ids: &[[u8; 16]]) {
        let stored = self.stored_ids();
        let unique: HashSet<&String> = stored.iter().collect();
        assert_eq!(unique.len(), stored.len(), "a summary is stored twice");
        let want: HashSet<String> = ids.iter().map(hex_id).collect();
        let got: HashSet<String> = stored.into_iter().collect();
        assert_eq!(got, want, "stored set differs from the spooled set");
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hex_id(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// A plain-HTTP GET with the test token; the body when the status is 200.
fn http_get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .build(),
    );
    agent
        .get(&format!("http://{addr}{path}"))
        .header("Authorization", format!("Bearer {TOKEN}"))
        .call()
        .map_err(|e| e.to_string())?
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())
}

// -------------------------------------------------------------------- PKI

/// A throwaway CA and a server certificate it signed.
struct Pki {
    ca_pem: String,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Pki {
            ca_pem: ca.pem(),
            ca,
        }
    }

    /// A server configuration presenting a certificate for `san`
    /// (an IP address or a DNS name) signed by this CA.
    fn server(&self, san: &str) -> Arc<ServerConfig> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![match san.parse() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(san.try_into().unwrap()),
        }];
        params.distinguished_name.push(DnType::CommonName, san);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let key = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        let config = ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        Arc::new(config)
    }

    fn write_ca(&self, dir: &Path) -> PathBuf {
        let path = dir.join(format!("ca-{}.pem", random_id()[0]));
        std::fs::write(&path, &self.ca_pem).unwrap();
        path
    }
}

// ------------------------------------------------------------------ proxy

/// What the proxy does to the next `POST /v1/summaries`.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Answer this status itself (with `Retry-After` seconds if given);
    /// nothing reaches the service.
    Status(u16, Option<u32>),
    /// Read half the body, then reset the connection.
    ResetMidBody,
    /// Forward to the service (which stores the batch), then hold the
    /// response this long before sending it.
    Slow(Duration),
}

#[derive(Debug, Default)]
struct ProxyState {
    faults: Mutex<VecDeque<Fault>>,
    /// `POST /v1/summaries` requests whose body arrived whole.
    posts: AtomicUsize,
    /// Summaries in those bodies.
    items_posted: AtomicUsize,
    /// Bytes through the TLS sockets of connections that carried a POST,
    /// both directions, handshake included.
    post_wire_bytes: AtomicU64,
}

/// A TLS-terminating proxy in front of the service.
struct Proxy {
    addr: SocketAddr,
    state: Arc<ProxyState>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    fn start(tls: Arc<ServerConfig>, backend: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(ProxyState::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(tcp) = tcp else { continue };
                let (tls, st) = (tls.clone(), st.clone());
                std::thread::spawn(move || {
                    let _ = handle_connection(tcp, tls, backend, &st);
                });
            }
        });
        Proxy { addr, state, stop }
    }

    fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    fn inject(&self, faults: &[Fault]) {
        self.state.faults.lock().unwrap().extend(faults.iter().cloned());
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Counts the bytes through a socket.
struct Counting {
    tcp: TcpStream,
    bytes: Arc<AtomicU64>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.tcp.read(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::SeqCst);
        Ok(n)
    }
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.tcp.write(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::SeqCst);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

type Tls = StreamOwned<ServerConnection, Counting>;

/// One request per connection: the proxy answers with `Connection: close`.
fn handle_connection(
    tcp: TcpStream,
    tls: Arc<ServerConfig>,
    backend: SocketAddr,
    state: &ProxyState,
) -> io::Result<()> {
    tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
    let bytes = Arc::new(AtomicU64::new(0));
    let conn = ServerConnection::new(tls).map_err(io::Error::other)?;
    let mut stream: Tls = StreamOwned::new(
        conn,
        Counting {
            tcp,
            bytes: bytes.clone(),
        },
    );
    let (head, mut body) = read_head(&mut stream)?;
    let is_post = head.starts_with("POST /v1/summaries ");
    let fault = if is_post {
        state.faults.lock().unwrap().pop_front()
    } else {
        None
    };
    let length = content_length(&head);
    if let Some(Fault::ResetMidBody) = fault {
        read_body(&mut stream, &mut body, length / 2)?;
        reset(&stream.sock.tcp);
        return Ok(());
    }
    read_body(&mut stream, &mut body, length)?;
    if is_post {
        state.posts.fetch_add(1, Ordering::SeqCst);
        state
            .items_posted
            .fetch_add(count_items(&body), Ordering::SeqCst);
    }
    let response = match fault {
        Some(Fault::Status(code, retry_after)) => {
            let extra = retry_after
                .map(|s| format!("Retry-After: {s}\r\n"))
                .unwrap_or_default();
            let body = format!("{{\"error\": \"injected {code}\"}}");
            format!(
                "HTTP/1.1 {code} Injected\r\nContent-Type: application/json\r\n{extra}\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
        Some(Fault::Slow(delay)) => {
            let response = forward(backend, &head, &body)?;
            std::thread::sleep(delay);
            response
        }
        Some(Fault::ResetMidBody) | None => forward(backend, &head, &body)?,
    };
    stream.write_all(&response)?;
    stream.conn.send_close_notify();
    stream.flush()?;
    if is_post {
        // Let the client's close_notify arrive, then count the connection.
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        state
            .post_wire_bytes
            .fetch_add(bytes.load(Ordering::SeqCst), Ordering::SeqCst);
    }
    Ok(())
}

fn read_head(stream: &mut Tls) -> io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
            return Ok((head, buf[end + 4..].to_vec()));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn content_length(head: &str) -> usize {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

fn read_body(stream: &mut Tls, body: &mut Vec<u8>, length: usize) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    while body.len() < length {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(())
}

/// Closes with a TCP reset (SO_LINGER 0) instead of a FIN.
fn reset(tcp: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket we own, with a correctly sized value.
    unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Items in a summaries body: LEB128 length, then that many bytes.
fn count_items(body: &[u8]) -> usize {
    let (mut at, mut items) = (0, 0);
    while at < body.len() {
        let (mut len, mut shift) = (0usize, 0);
        loop {
            let b = body[at];
            at += 1;
            len |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        at += len;
        items += 1;
    }
    items
}

/// Sends the request to the service on a fresh connection and returns its
/// whole response (both sides close after it).
fn forward(backend: SocketAddr, head: &str, body: &[u8]) -> io::Result<Vec<u8>> {
    let mut lines: Vec<&str> = head
        .trim_end_matches("\r\n")
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    lines.push("Connection: close");
    let mut out = TcpStream::connect(backend)?;
    out.write_all(format!("{}\r\n\r\n", lines.join("\r\n")).as_bytes())?;
    out.write_all(body)?;
    let mut response = Vec::new();
    out.read_to_end(&mut response)?;
    Ok(response)
}

// --------------------------------------------------------------- uploader

#[derive(Parser, Debug)]
struct UploadCmd {
    #[command(flatten)]
    args: uploader::cli::UploadArgs,
}

/// A device: a spool, a token file and the CA it trusts.
struct Device {
    dir: tempfile::TempDir,
    ca: PathBuf,
}

impl Device {
    fn new(pki: &Pki) -> Device {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        let ca = pki.write_ca(dir.path());
        Device { dir, ca }
    }

    fn spool_dir(&self) -> PathBuf {
        self.dir.path().join("spool")
    }

    /// Spools `n` small summaries; returns their ids.
    fn spool(&self, n: usize) -> Vec<[u8; 16]> {
        let spool = Spool::open(&self.spool_dir()).unwrap();
        (0..n)
            .map(|_| {
                let mut s = sample_summary(random_id(), "curl", Some(GROUP));
                spool.put(&mut s).unwrap();
                s.id
            })
            .collect()
    }

    fn spooled(&self) -> usize {
        Spool::open(&self.spool_dir())
            .unwrap()
            .pending()
            .unwrap()
            .pending
            .len()
    }

    /// `edge-agent upload --once ...` against `server`, with extra flags.
    fn upload(&self, server: &str, extra: &[&str]) -> ExitCode {
        let mut argv: Vec<String> = vec![
            "upload".into(),
            "--server".into(),
            server.into(),
            "--ca".into(),
            self.ca.display().to_string(),
            "--token-file".into(),
            self.dir.path().join("token").display().to_string(),
            "--spool".into(),
            self.spool_dir().display().to_string(),
            "--once".into(),
            "--now".into(),
            "--backoff-ms".into(),
            "20".into(),
        ];
        argv.extend(extra.iter().map(|s| s.to_string()));
        let cmd = UploadCmd::try_parse_from(argv).unwrap();
        uploader::cli::run_with(cmd.args, &Unconditional).unwrap()
    }
}

struct Setup {
    service: Service,
    pki: Pki,
    proxy: Proxy,
    device: Device,
}

fn setup() -> Setup {
    let service = Service::start();
    let pki = Pki::new("Edge Test CA");
    let proxy = Proxy::start(pki.server("127.0.0.1"), service.addr);
    let device = Device::new(&pki);
    Setup {
        service,
        pki,
        proxy,
        device,
    }
}

// ------------------------------------------------------------------ tests

#[test]
fn happy_path_sends_everything_once_and_stores_directives() {
    let s = setup();
    let ids = s.device.spool(7);
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    assert_eq!(s.device.spooled(), 0);
    s.service.assert_stored_exactly_once(&ids);
    assert_eq!(s.proxy.state.posts.load(Ordering::SeqCst), 1, "one batch");
    let directives = std::fs::read_to_string(s.device.spool_dir().join("directives.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&directives).unwrap();
    assert_eq!(json["group"], GROUP);
    // Nothing due: exit 0 without a POST.
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    assert_eq!(s.proxy.state.posts.load(Ordering::SeqCst), 1);
}

#[test]
fn service_down_then_up() {
    let s = setup();
    let ids = s.device.spool(5);
    let down = format!("https://127.0.0.1:{}", free_port());
    assert_eq!(s.device.upload(&down, &["--tries", "2"]), ExitCode::FAILURE);
    assert_eq!(s.device.spooled(), 5, "a failure leaves the spool as it was");
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    s.service.assert_stored_exactly_once(&ids);
    assert_eq!(s.device.spooled(), 0);
}

#[test]
fn internal_error_500_is_retried() {
    let s = setup();
    let ids = s.device.spool(4);
    s.proxy.inject(&[Fault::Status(500, None), Fault::Status(500, None)]);
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    assert_eq!(s.proxy.state.posts.load(Ordering::SeqCst), 3);
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn unavailable_503_honours_retry_after() {
    let s = setup();
    let ids = s.device.spool(3);
    s.proxy.inject(&[Fault::Status(503, Some(1))]);
    let started = Instant::now();
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    // The backoff alone would wait at most 20 ms.
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn persistent_failure_exits_nonzero_and_keeps_spool() {
    let s = setup();
    let ids = s.device.spool(3);
    s.proxy.inject(&[Fault::Status(500, None); 3]);
    assert_eq!(s.device.upload(&s.proxy.url(), &["--tries", "3"]), ExitCode::FAILURE);
    assert_eq!(s.device.spooled(), 3);
    assert!(s.service.stored_ids().is_empty());
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn connection_reset_mid_body_is_retried() {
    let s = setup();
    let ids = s.device.spool(20);
    s.proxy.inject(&[Fault::ResetMidBody]);
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    assert_eq!(s.proxy.state.posts.load(Ordering::SeqCst), 1, "one whole POST");
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn slow_response_times_out_and_retry_does_not_duplicate() {
    let s = setup();
    let ids = s.device.spool(6);
    s.proxy.inject(&[Fault::Slow(Duration::from_secs(3))]);
    assert_eq!(s.device.upload(&s.proxy.url(), &["--timeout", "1"]), ExitCode::SUCCESS);
    // Both POSTs reached the service: the first was stored, then repeated.
    assert_eq!(s.proxy.state.posts.load(Ordering::SeqCst), 2);
    assert_eq!(s.proxy.state.items_posted.load(Ordering::SeqCst), 12);
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn certificate_for_wrong_name_is_refused() {
    let s = setup();
    let ids = s.device.spool(3);
    let wrong = Proxy::start(s.pki.server("wrong.example"), s.service.addr);
    assert_eq!(s.device.upload(&wrong.url(), &[]), ExitCode::FAILURE);
    assert_eq!(wrong.state.posts.load(Ordering::SeqCst), 0, "nothing sent");
    assert_eq!(s.device.spooled(), 3, "nothing deleted");
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn certificate_from_another_ca_is_refused() {
    let s = setup();
    let ids = s.device.spool(3);
    let other = Pki::new("Someone Else's CA");
    let impostor = Proxy::start(other.server("127.0.0.1"), s.service.addr);
    assert_eq!(s.device.upload(&impostor.url(), &[]), ExitCode::FAILURE);
    assert_eq!(impostor.state.posts.load(Ordering::SeqCst), 0, "nothing sent");
    assert_eq!(s.device.spooled(), 3, "nothing deleted");
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn public_key_pinning() {
    let s = setup();
    let ids = s.device.spool(2);
    let wrong_pin = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    assert_eq!(
        s.device.upload(&s.proxy.url(), &["--pin-sha256", wrong_pin]),
        ExitCode::FAILURE
    );
    assert_eq!(s.device.spooled(), 2);
    let pin = server_pin(&s.proxy);
    assert_eq!(
        s.device.upload(&s.proxy.url(), &["--pin-sha256", wrong_pin, "--pin-sha256", &pin]),
        ExitCode::SUCCESS
    );
    s.service.assert_stored_exactly_once(&ids);
}

/// The pin of the certificate the proxy presents, from a TLS handshake.
fn server_pin(proxy: &Proxy) -> String {
    use base64::Engine as _;
    #[derive(Debug)]
    struct Capture(Mutex<Option<Vec<u8>>>);
    impl rustls::client::danger::ServerCertVerifier for Capture {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            *self.0.lock().unwrap() = Some(end_entity.to_vec());
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }
    let capture = Arc::new(Capture(Mutex::new(None)));
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(capture.clone())
    .with_no_client_auth();
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), "127.0.0.1".try_into().unwrap()).unwrap();
    let mut tcp = TcpStream::connect(proxy.addr).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).unwrap();
    }
    let der = capture.0.lock().unwrap().clone().unwrap();
    let pin = uploader::tls::spki_sha256(&der).unwrap();
    base64::engine::general_purpose::STANDARD.encode(pin)
}

#[test]
fn two_uploaders_at_once_send_each_summary_once() {
    let s = setup();
    let ids = s.device.spool(60);
    let device = &s.device;
    let url = s.proxy.url();
    let codes: Vec<ExitCode> = std::thread::scope(|scope| {
        let a = scope.spawn(|| device.upload(&url, &["--batch", "5"]));
        let b = scope.spawn(|| device.upload(&url, &["--batch", "5"]));
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    assert_eq!(codes, vec![ExitCode::SUCCESS, ExitCode::SUCCESS]);
    assert_eq!(
        s.proxy.state.items_posted.load(Ordering::SeqCst),
        60,
        "no summary was sent twice"
    );
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn summary_of_another_group_is_set_aside_others_stored() {
    let s = setup();
    let mut ids = s.device.spool(3);
    let spool = Spool::open(&s.device.spool_dir()).unwrap();
    let mut foreign = sample_summary(random_id(), "curl", Some("other"));
    spool.put(&mut foreign).unwrap();
    ids.extend(s.device.spool(2));
    // The service refuses the whole batch (403); the uploader isolates the
    // culprit and stores the rest.
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::FAILURE);
    s.service.assert_stored_exactly_once(&ids);
    assert_eq!(s.device.spooled(), 0);
    let rejected = s.device.spool_dir().join("rejected").join(format!("{}.summary", hex_id(&foreign.id)));
    assert!(rejected.exists(), "the foreign summary is kept in rejected/");
    // Next run: nothing left, exit 0.
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
}

#[test]
fn spool_disk_full_leaves_no_partial_file() {
    // A tiny tmpfs (needs root); elsewhere the spool's unit test injects the
    // failing write instead.
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=32k,nr_inodes=64", "edge-test", mnt.to_str().unwrap()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED spool_disk_full_leaves_no_partial_file: cannot mount a tmpfs (not root?)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let spool_dir = mnt.join("spool");
    let spool = Spool::open(&spool_dir).unwrap();
    let mut ids = Vec::new();
    let mut full = None;
    for _ in 0..200 {
        let mut summary = realistic_summary(random_id());
        match spool.put(&mut summary) {
            Ok(_) => ids.push(summary.id),
            Err(e) => {
                full = Some(e.to_string());
                break;
            }
        }
    }
    let full = full.expect("the tmpfs filled up");
    assert!(full.contains("No space left") || full.contains("space"), "{full}");
    // Every visible file is a whole summary; no temporary file is left.
    for entry in std::fs::read_dir(&spool_dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(!name.starts_with(".tmp-"), "temporary file left: {name}");
    }
    let listing = spool.pending().unwrap();
    assert!(listing.set_aside.is_empty(), "{:?}", listing.set_aside);
    assert_eq!(listing.pending.len(), ids.len());
    // And they all go up once.
    let service = Service::start();
    let pki = Pki::new("Edge Test CA");
    let proxy = Proxy::start(pki.server("127.0.0.1"), service.addr);
    let device = Device::new(&pki);
    std::os::unix::fs::symlink(&spool_dir, device.spool_dir()).unwrap();
    assert_eq!(device.upload(&proxy.url(), &[]), ExitCode::SUCCESS);
    service.assert_stored_exactly_once(&ids);
}

/// A summary of realistic size: many syscalls, failures, transitions.
fn realistic_summary(id: [u8; 16]) -> agent_core::Summary {
    use agent_core::{Arch, Collector, Exit, Facts, FdKind, RunRecord, SyscallEvent};
    let mut collector: Box<Collector> = Box::new(Collector::new(0));
    let mut t = 1_000u64;
    let mut seed = u64::from_le_bytes(id[..8].try_into().unwrap()) | 1;
    for i in 0..20_000u64 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let nr = [0u32, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 16, 17, 18, 19, 20, 21, 23, 28, 39, 41, 42, 44, 45, 202, 228, 232, 257, 262][(seed % 30) as usize];
        let dur = 200 + seed % 50_000;
        let ret = if seed % 17 == 0 { -11 } else { (seed % 4096) as i64 };
        collector.record(&SyscallEvent {
            tid: 100 + (i % 3) as u32,
            arch: Arch::X86_64,
            nr,
            args: [3, 0, 4096, 0, 0, 0],
            ret,
            entry_ns: t,
            exit_ns: t + dur,
            fd_kind: FdKind::ALL[(seed % 5) as usize],
        });
        t += dur + 100;
    }
    let mut facts = Facts::new();
    facts.program = agent_core::facts::truncated("firefox");
    facts.os_name = agent_core::facts::truncated("Debian GNU/Linux");
    facts.add("group", GROUP).unwrap();
    facts.add("net.adapter", "bridged").unwrap();
    collector.summarize(
        id,
        RunRecord {
            start_unix_ns: 1_763_700_000_000_000_000,
            duration_ns: t,
            exit: Exit::Code(0),
            arch: Arch::X86_64,
            processes: 1,
            threads: 3,
            events: 0,
            overflow: Default::default(),
            window: 0,
            spool_dropped: 0,
        },
        facts,
    )
}

/// Bytes on the wire per summary (TLS handshake, request and response
/// headers, acknowledgement included), batch of 1 and of 50. Printed for
/// `scripts/measure-upload`; asserts only what must hold.
#[test]
fn wire_bytes_per_summary() {
    let s = setup();
    let spool = Spool::open(&s.device.spool_dir()).unwrap();
    let mut encoded = 0usize;
    let mut put = |n: usize| {
        let mut ids = Vec::new();
        for _ in 0..n {
            let mut summary = realistic_summary(random_id());
            let path = spool.put(&mut summary).unwrap();
            encoded += std::fs::metadata(path).unwrap().len() as usize;
            ids.push(summary.id);
        }
        ids
    };
    let mut ids = put(1);
    assert_eq!(s.device.upload(&s.proxy.url(), &["--batch", "1"]), ExitCode::SUCCESS);
    let one = s.proxy.state.post_wire_bytes.swap(0, Ordering::SeqCst);
    let one_encoded = encoded;
    encoded = 0;
    ids.extend(put(50));
    assert_eq!(s.device.upload(&s.proxy.url(), &["--batch", "50"]), ExitCode::SUCCESS);
    let fifty = s.proxy.state.post_wire_bytes.load(Ordering::SeqCst);
    s.service.assert_stored_exactly_once(&ids);
    println!(
        "MEASURE batch=1: {one} wire bytes for 1 summary of {one_encoded} bytes \
         ({one} per summary, overhead {} bytes)",
        one as usize - one_encoded
    );
    println!(
        "MEASURE batch=50: {fifty} wire bytes for 50 summaries of {encoded} bytes \
         ({:.0} per summary, mean summary {:.0} bytes, overhead {:.0} bytes per summary)",
        fifty as f64 / 50.0,
        encoded as f64 / 50.0,
        (fifty as f64 - encoded as f64) / 50.0
    );
    assert!(one as usize > one_encoded, "the wire carries at least the summary");
    assert!((fifty as f64 / 50.0) < one as f64, "batching amortises the overhead");
}
