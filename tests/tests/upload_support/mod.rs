//! Shared harness of the `upload_*` tests: the real `edge-service` (plain
//! HTTP on loopback), a throwaway CA (rcgen), a fault-injecting
//! TLS-terminating proxy in front of the service, and a device (spool,
//! token, CA) running the uploader in-process.
// Each test binary uses a different part of the harness.
#![allow(dead_code)]

use std::collections::{HashSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::RunId;
use fixtures::summaries::{random_id, sample_summary};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use uploader::conditions::Unconditional;
use uploader::spool::Spool;

pub const GROUP: &str = "fleet";
pub const TOKEN: &str = "fleet-token-3f9a0c1d";

// ---------------------------------------------------------------- service

/// The real service, plain HTTP on a loopback port.
pub struct Service {
    pub child: Child,
    pub addr: SocketAddr,
    /// An API token of an operator of the test group (fleet data is not
    /// the device token's).
    pub operator: String,
    pub _dir: tempfile::TempDir,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Service {
    pub fn start() -> Service {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::write(
            &tokens,
            format!("# test\n{GROUP} {TOKEN}\nother other-token-0123456789\n"),
        )
        .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let db = dir.path().join("edge.db");
        let child = Command::new(edge_tests::binary("edge-service"))
            .arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--db")
            .arg(&db)
            .arg("--tokens")
            .arg(&tokens)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start edge-service");
        let mut service = Service {
            child,
            addr,
            operator: String::new(),
            _dir: dir,
        };
        let until = Instant::now() + Duration::from_secs(30);
        while http_get(addr, "/healthz", TOKEN).is_err() {
            assert!(Instant::now() < until, "edge-service did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        service.operator =
            lab::procs::operator_token(&edge_tests::binary("edge-service"), &db, GROUP).unwrap();
        service
    }

    /// Ids of the runs the service stored for the test group, in its order.
    pub fn stored_ids(&self) -> Vec<String> {
        let body = http_get(
            self.addr,
            &format!("/v1/runs?group={GROUP}&limit=100000"),
            &self.operator,
        )
        .unwrap();
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        json["runs"]
            .as_array()
            .expect("runs list")
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// Asserts the service holds each of `ids` exactly once, and nothing else.
    pub fn assert_stored_exactly_once(&self, ids: &[RunId]) {
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

pub fn hex_id(id: &RunId) -> String {
    id.to_string()
}

/// A plain-HTTP GET with `token`; the body when the status is 200.
pub fn http_get(addr: SocketAddr, path: &str, token: &str) -> Result<String, String> {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            // Straight to the service, whatever proxy a test sets.
            .proxy(None)
            .build(),
    );
    agent
        .get(&format!("http://{addr}{path}"))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .map_err(|e| e.to_string())?
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())
}

// -------------------------------------------------------------------- PKI

/// A throwaway CA and a server certificate it signed.
pub struct Pki {
    pub ca_pem: String,
    pub ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
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
    pub fn server(&self, san: &str) -> Arc<ServerConfig> {
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
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
        Arc::new(config)
    }

    pub fn write_ca(&self, dir: &Path) -> PathBuf {
        let path = dir.join(format!("ca-{}.pem", random_id().0[0]));
        std::fs::write(&path, &self.ca_pem).unwrap();
        path
    }
}

// ------------------------------------------------------------------ proxy

/// What the proxy does to the next `POST /v1/summaries`.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Answer this status itself (with `Retry-After` seconds if given);
    /// nothing reaches the service.
    Status(u16, Option<u32>),
    /// Read half the body, then reset the connection.
    ResetMidBody,
    /// Forward to the service (which stores the batch), then hold the
    /// response this long before sending it.
    Slow(Duration),
    /// Forward, then drop the last id from the response's `accepted` list.
    DropLastAck,
    /// Forward, then report the last accepted id as rejected instead.
    RejectLast,
}

#[derive(Debug, Default)]
pub struct ProxyState {
    pub faults: Mutex<VecDeque<Fault>>,
    /// `POST /v1/summaries` requests whose body arrived whole.
    pub posts: AtomicUsize,
    /// Summaries in those bodies.
    pub items_posted: AtomicUsize,
    /// Bytes through the TLS sockets of connections that carried a POST,
    /// both directions, handshake included.
    pub post_wire_bytes: AtomicU64,
}

/// A TLS-terminating proxy in front of the service.
pub struct Proxy {
    pub addr: SocketAddr,
    pub state: Arc<ProxyState>,
    pub stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(tls: Arc<ServerConfig>, backend: SocketAddr) -> Proxy {
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

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    pub fn inject(&self, faults: &[Fault]) {
        self.state
            .faults
            .lock()
            .unwrap()
            .extend(faults.iter().cloned());
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Counts the bytes through a socket.
pub struct Counting {
    pub tcp: TcpStream,
    pub bytes: Arc<AtomicU64>,
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

pub type Tls = StreamOwned<ServerConnection, Counting>;

/// One request per connection: the proxy answers with `Connection: close`.
pub fn handle_connection(
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
        Some(fault @ (Fault::DropLastAck | Fault::RejectLast)) => {
            let response = forward(backend, &head, &body)?;
            rewrite_ack(&response, matches!(fault, Fault::RejectLast))
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

pub fn read_head(stream: &mut Tls) -> io::Result<(String, Vec<u8>)> {
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

pub fn content_length(head: &str) -> usize {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

pub fn read_body(stream: &mut Tls, body: &mut Vec<u8>, length: usize) -> io::Result<()> {
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
pub fn reset(tcp: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = nix::sys::socket::setsockopt(tcp, nix::sys::socket::sockopt::Linger, &linger);
}

/// Items in a summaries body: LEB128 length, then that many bytes.
pub fn count_items(body: &[u8]) -> usize {
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
pub fn forward(backend: SocketAddr, head: &str, body: &[u8]) -> io::Result<Vec<u8>> {
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

/// The session options of `argv` (`upload --server ...`), read by the
/// grammar of `edge-agent upload` (device-args) as the binary reads them.
pub fn upload_options(argv: &[String]) -> uploader::session::UploadOptions {
    assert_eq!(argv[0], "upload");
    device_args::parse_upload(&argv[1..]).unwrap()
}

/// A device: a spool, a token file and the CA it trusts.
pub struct Device {
    pub dir: tempfile::TempDir,
    pub ca: PathBuf,
}

impl Device {
    pub fn new(pki: &Pki) -> Device {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        let ca = pki.write_ca(dir.path());
        Device { dir, ca }
    }

    pub fn spool_dir(&self) -> PathBuf {
        self.dir.path().join("spool")
    }

    /// Spools `n` small summaries; returns their ids.
    pub fn spool(&self, n: usize) -> Vec<RunId> {
        let spool = Spool::open(&self.spool_dir()).unwrap();
        (0..n)
            .map(|_| {
                let mut s = sample_summary(random_id(), "curl", Some(GROUP));
                spool.put(&mut s).unwrap();
                s.id
            })
            .collect()
    }

    pub fn spooled(&self) -> usize {
        Spool::open(&self.spool_dir())
            .unwrap()
            .pending()
            .unwrap()
            .pending
            .len()
    }

    /// The argv of `edge-agent upload --once ...` against `server`.
    pub fn argv(&self, server: &str, extra: &[&str]) -> Vec<String> {
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
            "--backoff-ms".into(),
            "20".into(),
        ];
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    }

    /// `edge-agent upload --once --now ...` against `server`.
    pub fn upload(&self, server: &str, extra: &[&str]) -> ExitCode {
        let mut all = vec!["--now"];
        all.extend_from_slice(extra);
        self.run(self.argv(server, &all))
    }

    /// `edge-agent upload --once ...` against `server`, without `--now`.
    pub fn upload_windowed(&self, server: &str, extra: &[String]) -> ExitCode {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        self.run(self.argv(server, &extra))
    }

    pub fn run(&self, argv: Vec<String>) -> ExitCode {
        ExitCode::from(
            uploader::session::run_with(upload_options(&argv), &Unconditional)
                .unwrap()
                .exit_status(),
        )
    }
}

pub struct Setup {
    pub service: Service,
    pub pki: Pki,
    pub proxy: Proxy,
    pub device: Device,
}

pub fn setup() -> Setup {
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

/// Takes the last id out of a 200 acknowledgement's `accepted`; with
/// `reject`, lists it in `rejected` instead.
pub fn rewrite_ack(response: &[u8], reject: bool) -> Vec<u8> {
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response head");
    let head = String::from_utf8_lossy(&response[..end]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut json: serde_json::Value = serde_json::from_slice(&response[end + 4..]).unwrap();
    let accepted = json["accepted"].as_array_mut().unwrap();
    let last = accepted.pop().expect("an accepted id");
    if reject {
        let index = accepted.len();
        json["rejected"] =
            serde_json::json!([{"index": index, "id": last, "reason": "injected rejection"}]);
    }
    let body = serde_json::to_vec(&json).unwrap();
    let head: Vec<&str> = head
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("content-length:"))
        .collect();
    let mut out = format!(
        "{}\r\nContent-Length: {}\r\n\r\n",
        head.join("\r\n"),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}
