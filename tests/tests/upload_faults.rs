//! The uploader's fault matrix, end to end: the real `edge-service`
//! (plain HTTP on loopback) behind a fault-injecting, TLS-terminating proxy
//! whose certificates come from a throwaway CA made here. Every test ends
//! with each spooled summary stored exactly once at the service.

mod upload_support;

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::RunId;
use fixtures::summaries::{random_id, sample_summary};
use rustls::pki_types::CertificateDer;
use upload_support::*;
use uploader::conditions::Unconditional;
use uploader::spool::Spool;

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
    assert_eq!(
        s.device.spooled(),
        5,
        "a failure leaves the spool as it was"
    );
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    s.service.assert_stored_exactly_once(&ids);
    assert_eq!(s.device.spooled(), 0);
}

#[test]
fn internal_error_500_is_retried() {
    let s = setup();
    let ids = s.device.spool(4);
    s.proxy
        .inject(&[Fault::Status(500, None), Fault::Status(500, None)]);
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
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn persistent_failure_exits_nonzero_and_keeps_spool() {
    let s = setup();
    let ids = s.device.spool(3);
    s.proxy.inject(&[Fault::Status(500, None); 3]);
    assert_eq!(
        s.device.upload(&s.proxy.url(), &["--tries", "3"]),
        ExitCode::FAILURE
    );
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
    assert_eq!(
        s.proxy.state.posts.load(Ordering::SeqCst),
        1,
        "one whole POST"
    );
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn slow_response_times_out_and_retry_does_not_duplicate() {
    let s = setup();
    let ids = s.device.spool(6);
    s.proxy.inject(&[Fault::Slow(Duration::from_secs(5))]);
    assert_eq!(
        s.device.upload(&s.proxy.url(), &["--timeout", "2"]),
        ExitCode::SUCCESS
    );
    // Every POST reached the service: the first was stored, then repeated
    // (more than once if the machine is slow enough to time out again).
    let posts = s.proxy.state.posts.load(Ordering::SeqCst);
    assert!(posts >= 2, "{posts}");
    assert_eq!(s.proxy.state.items_posted.load(Ordering::SeqCst), 6 * posts);
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
    assert_eq!(
        impostor.state.posts.load(Ordering::SeqCst),
        0,
        "nothing sent"
    );
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
        s.device
            .upload(&s.proxy.url(), &["--pin-sha256", wrong_pin]),
        ExitCode::FAILURE
    );
    assert_eq!(s.device.spooled(), 2);
    let pin = server_pin(&s.proxy);
    assert_eq!(
        s.device.upload(
            &s.proxy.url(),
            &["--pin-sha256", wrong_pin, "--pin-sha256", &pin]
        ),
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
    let rejected = s
        .device
        .spool_dir()
        .join("rejected")
        .join(format!("{}.summary", hex_id(&foreign.id)));
    assert!(
        rejected.exists(),
        "the foreign summary is kept in rejected/"
    );
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
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=32k,nr_inodes=64",
            "edge-test",
            mnt.to_str().unwrap(),
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        edge_tests::skip(
            "spool_disk_full_leaves_no_partial_file",
            "cannot mount a tmpfs (not root?)",
        );
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
    assert!(
        full.contains("No space left") || full.contains("space"),
        "{full}"
    );
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
fn realistic_summary(id: RunId) -> agent_core::Summary {
    use agent_core::{Arch, Collector, Exit, Facts, FdKind, RunRecord, SyscallEvent};
    let mut collector: Box<Collector> = Box::new(Collector::new(0));
    let mut t = 1_000u64;
    let mut seed = u64::from_le_bytes(id.0[..8].try_into().unwrap()) | 1;
    for i in 0..20_000u64 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let nr = [
            0u32, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 16, 17, 18, 19, 20, 21, 23, 28, 39, 41, 42,
            44, 45, 202, 228, 232, 257, 262,
        ][(seed % 30) as usize];
        let dur = 200 + seed % 50_000;
        let ret = if seed % 17 == 0 {
            -11
        } else {
            (seed % 4096) as i64
        };
        collector.record(&SyscallEvent {
            tid: 100 + (i % 3) as u32,
            arch: Arch::X86_64,
            nr,
            args: [3, 0, 4096, 0, 0, 0],
            ret,
            entry_ns: t,
            exit_ns: t + dur,
            fd_kind: FdKind::ALL[(seed % FdKind::COUNT as u64) as usize],
            peer: None,
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
            threads: 3,
            ..RunRecord::new(1_763_700_000_000_000_000, t, Exit::Code(0), Arch::X86_64)
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
    let put = |n: usize| {
        let mut ids = Vec::new();
        let mut encoded = 0usize;
        for _ in 0..n {
            let mut summary = realistic_summary(random_id());
            let path = spool.put(&mut summary).unwrap();
            encoded += std::fs::metadata(path).unwrap().len() as usize;
            ids.push(summary.id);
        }
        (ids, encoded)
    };
    let (mut ids, one_encoded) = put(1);
    assert_eq!(
        s.device.upload(&s.proxy.url(), &["--batch", "1"]),
        ExitCode::SUCCESS
    );
    let one = s.proxy.state.post_wire_bytes.swap(0, Ordering::SeqCst);
    let (more, encoded) = put(50);
    ids.extend(more);
    assert_eq!(
        s.device.upload(&s.proxy.url(), &["--batch", "50"]),
        ExitCode::SUCCESS
    );
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
    assert!(
        one as usize > one_encoded,
        "the wire carries at least the summary"
    );
    assert!(
        (fifty as f64 / 50.0) < one as f64,
        "batching amortises the overhead"
    );
}

/// `HH:MM-HH:MM` from local minutes since midnight (wrapping).
fn window(from_min: i64, to_min: i64) -> String {
    let f = |m: i64| {
        let m = m.rem_euclid(24 * 60);
        format!("{:02}:{:02}", m / 60, m % 60)
    };
    format!("{}-{}", f(from_min), f(to_min))
}

#[test]
fn window_holds_back_outside_and_sends_inside() {
    let s = setup();
    let ids = s.device.spool(4);
    let now_min = i64::from(uploader::window::local_secs_of_day() / 60);
    let later = window(now_min + 60, now_min + 120);
    let argv = |w: &str| vec!["--window".to_string(), w.to_string(), "--no-spread".into()];
    let upload = |w: &str| s.device.upload_windowed(&s.proxy.url(), &argv(w));
    assert_eq!(upload(&later), ExitCode::SUCCESS, "nothing due outside");
    assert_eq!(s.proxy.state.posts.load(Ordering::SeqCst), 0);
    assert_eq!(s.device.spooled(), 4);
    let open = window(now_min - 1, now_min + 3);
    assert_eq!(upload(&open), ExitCode::SUCCESS);
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn daemon_keeps_sending_as_summaries_arrive() {
    let s = setup();
    let mut ids = s.device.spool(3);
    let mut argv = s.device.argv(&s.proxy.url(), &["--now", "--interval", "1"]);
    argv.retain(|a| a != "--once");
    let options = upload_options(&argv);
    // The daemon never returns; the thread ends with the test process.
    std::thread::spawn(move || uploader::session::run_with(options, &Unconditional));
    let wait_for = |n: usize| {
        let until = Instant::now() + Duration::from_secs(30);
        while s.service.stored_ids().len() < n {
            assert!(Instant::now() < until, "daemon did not send {n} summaries");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for(3);
    ids.extend(s.device.spool(2));
    wait_for(5);
    s.service.assert_stored_exactly_once(&ids);
}

#[test]
fn unacknowledged_items_are_sent_again_and_rejected_ones_set_aside() {
    let s = setup();
    let ids = s.device.spool(5);
    s.proxy.inject(&[Fault::DropLastAck]);
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    // The second POST carried only the unacknowledged summary.
    assert_eq!(s.proxy.state.posts.load(Ordering::SeqCst), 2);
    assert_eq!(s.proxy.state.items_posted.load(Ordering::SeqCst), 6);
    s.service.assert_stored_exactly_once(&ids);

    let more = s.device.spool(3);
    s.proxy.inject(&[Fault::RejectLast]);
    assert_eq!(
        s.device.upload(&s.proxy.url(), &[]),
        ExitCode::FAILURE,
        "a rejection is reported"
    );
    assert_eq!(s.device.spooled(), 0);
    let rejected: Vec<_> = std::fs::read_dir(s.device.spool_dir().join("rejected"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        rejected.len(),
        2,
        "the summary and its reason: {rejected:?}"
    );
    assert!(rejected.iter().any(|n| n.ends_with(".summary.reason")));
    // Next run: nothing due.
    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    let mut all = ids;
    all.extend(more);
    s.service.assert_stored_exactly_once(&all);
}

/// The real binaries: `edge-agent run --spool` makes the summaries, two
/// `edge-agent upload --once` processes (two cron runs) send them at once.
#[test]
fn edge_agent_run_then_two_upload_processes() {
    let s = setup();
    let agent = edge_tests::binary("edge-agent");
    let spool_dir = s.device.spool_dir();
    for program in [
        &["/bin/true"][..],
        &["/bin/sh", "-c", "echo hi >/dev/null"],
        &["/bin/ls", "/"],
    ] {
        let status = Command::new(&agent)
            .arg("run")
            .arg("--spool")
            .arg(&spool_dir)
            .args(["--fact", &format!("group={GROUP}"), "--"])
            .args(program)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "edge-agent run {program:?}: {status}");
    }
    let ids: Vec<RunId> = Spool::open(&spool_dir)
        .unwrap()
        .pending()
        .unwrap()
        .pending
        .iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(ids.len(), 3);
    let argv = s.device.argv(&s.proxy.url(), &["--now", "--batch", "1"]);
    let spawn = || {
        Command::new(&agent)
            .args(&argv)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "edge-agent upload: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        s.proxy.state.items_posted.load(Ordering::SeqCst),
        3,
        "none sent twice"
    );
    s.service.assert_stored_exactly_once(&ids);
    assert!(spool_dir.join("directives.json").exists());
}
