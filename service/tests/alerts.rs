//! Issue 35's alerting: the incident webhook (delivery, retry with
//! back-off, order, a hanging receiver, a full queue) against a real HTTP
//! receiver on loopback, and the series `/metrics` shows.

mod common;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use agent_core::DeviceId;
use service::alerts::{Alerts, WebhookOptions};
use service::metrics::Metrics;
use wire::alert::{IncidentAlert, IncidentCause, IncidentEvent};

/// What the receiver saw and will answer.
#[derive(Default)]
struct Seen {
    /// Every request's body, in arrival order, with the status answered
    /// (`None` while held).
    requests: Vec<(IncidentAlert, Option<u16>)>,
    /// Statuses for the next requests; then 200.
    plan: VecDeque<u16>,
    /// While set, requests are read but not answered.
    held: bool,
}

/// A webhook receiver: a real HTTP/1.1 server on loopback, one thread per
/// connection, `Connection: close`.
struct Receiver {
    url: String,
    seen: Arc<(Mutex<Seen>, Condvar)>,
}

impl Receiver {
    fn start(plan: &[u16], held: bool) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!(
            "http://{}/hooks/secret-path",
            listener.local_addr().unwrap()
        );
        let seen = Arc::new((
            Mutex::new(Seen {
                plan: plan.iter().copied().collect(),
                held,
                ..Seen::default()
            }),
            Condvar::new(),
        ));
        let shared = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = Arc::clone(&shared);
                std::thread::spawn(move || answer(stream, &seen));
            }
        });
        Receiver { url, seen }
    }

    fn release(&self) {
        self.seen.0.lock().unwrap().held = false;
        self.seen.1.notify_all();
    }

    fn with<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.0.lock().unwrap())
    }

    /// Waits (up to a generous bound, for a loaded machine) until `done`.
    fn wait_until(&self, what: &str, done: impl Fn(&Seen) -> bool) {
        let bound = Instant::now() + Duration::from_secs(60);
        let mut seen = self.seen.0.lock().unwrap();
        while !done(&seen) {
            assert!(
                Instant::now() < bound,
                "receiver never saw {what}; requests: {:?}",
                ids(&seen.requests)
            );
            seen = self
                .seen
                .1
                .wait_timeout(seen, Duration::from_millis(100))
                .unwrap()
                .0;
        }
    }

    /// The events answered 2xx, in order, each once.
    fn delivered(&self) -> Vec<(i64, IncidentEvent)> {
        self.with(|s| {
            let mut out: Vec<(i64, IncidentEvent)> = Vec::new();
            for (alert, status) in &s.requests {
                let key = (alert.id, alert.event);
                if status.is_some_and(|s| (200..300).contains(&s)) && out.last() != Some(&key) {
                    out.push(key);
                }
            }
            out
        })
    }
}

fn ids(requests: &[(IncidentAlert, Option<u16>)]) -> Vec<(i64, IncidentEvent, Option<u16>)> {
    requests.iter().map(|(a, s)| (a.id, a.event, *s)).collect()
}

/// Reads one request, records it, answers it per the plan (or holds it).
fn answer(stream: TcpStream, seen: &(Mutex<Seen>, Condvar)) {
    let mut reader = BufReader::new(stream);
    let mut length = 0usize;
    let mut line = String::new();
    let mut first = true;
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if first {
            assert!(line.starts_with("POST /hooks/secret-path "), "{line}");
            first = false;
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let alert: IncidentAlert = serde_json::from_slice(&body).expect("the body is an IncidentAlert");
    let (lock, changed) = seen;
    let mut state = lock.lock().unwrap();
    state.requests.push((alert, None));
    let index = state.requests.len() - 1;
    changed.notify_all();
    while state.held {
        state = changed.wait(state).unwrap();
    }
    let status = state.plan.pop_front().unwrap_or(200);
    state.requests[index].1 = Some(status);
    changed.notify_all();
    drop(state);
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
}

fn alert(id: i64, event: IncidentEvent, cause: IncidentCause) -> IncidentAlert {
    IncidentAlert {
        event,
        id,
        group: "fleet".into(),
        program: "glusterfsd".into(),
        device: DeviceId([id as u8; 16]),
        cause,
        metric: "read@file latency p90".into(),
        deviation: 4.5,
        first_window_unix_ns: 1_000,
        last_window_unix_ns: 2_000,
        opened_unix_ns: 3_000,
        closed_unix_ns: (event == IncidentEvent::Closed).then_some(4_000),
        url: None,
    }
}

fn opened(id: i64) -> IncidentAlert {
    alert(id, IncidentEvent::Opened, IncidentCause::Disk)
}

fn closed(id: i64) -> IncidentAlert {
    alert(id, IncidentEvent::Closed, IncidentCause::Disk)
}

/// Fast retries, so the tests do not idle; a request timeout long enough
/// that a loaded machine never times out an answered request (the hanging
/// receiver's test shortens it).
fn options(url: &str) -> WebhookOptions {
    WebhookOptions {
        urls: vec![url.to_string()],
        timeout: Duration::from_secs(10),
        retry_first: Duration::from_millis(5),
        retry_max: Duration::from_millis(40),
        ..WebhookOptions::default()
    }
}

/// The value of the series `name` whose labels include all of `labels`.
fn series(text: &str, name: &str, labels: &[&str]) -> Option<i64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            let (head, _) = l.rsplit_once(' ').unwrap_or((l, ""));
            let bare = head.split('{').next().unwrap_or("");
            bare == name && labels.iter().all(|want| head.contains(want))
        })
        .and_then(|l| l.rsplit_once(' ')?.1.parse().ok())
}

/// Waits (up to a generous bound) until the series reads `want`: the
/// sending thread counts just after the receiver answered.
fn wait_for_series(metrics: &Metrics, name: &str, labels: &[&str], want: i64) {
    let bound = Instant::now() + Duration::from_secs(60);
    loop {
        let text = metrics.render();
        if series(&text, name, labels) == Some(want) {
            return;
        }
        assert!(Instant::now() < bound, "{name} never {want}: {text}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_failing_receiver_gets_every_event_after_retries_in_the_order_sent() {
    let receiver = Receiver::start(&[503, 503, 503], false);
    let metrics = Metrics::new();
    let alerts = Alerts::start(&options(&receiver.url), metrics.alerts().clone()).unwrap();
    let sent = [opened(1), closed(1), opened(2), opened(3), closed(2)];
    for event in &sent {
        alerts.incident(event);
    }
    receiver.wait_until("every event delivered", |s| {
        s.requests.iter().filter(|(_, st)| *st == Some(200)).count() >= sent.len()
    });
    let expected: Vec<_> = sent.iter().map(|a| (a.id, a.event)).collect();
    assert_eq!(receiver.delivered(), expected);
    // The first event was tried 4 times (3 answered 503), every other once:
    // head-of-line retry, nothing went past it.
    let requests = receiver.with(|s| ids(&s.requests));
    let first_tries = requests
        .iter()
        .take_while(|(id, event, _)| (*id, *event) == (1, IncidentEvent::Opened))
        .count();
    assert_eq!(first_tries, 4, "{requests:?}");
    assert_eq!(requests.len(), sent.len() + 3, "{requests:?}");
    // The body is the wire type, as sent.
    assert_eq!(receiver.with(|s| s.requests[4].0.clone()), closed(1));
    wait_for_series(&metrics, "edge_alerts_sent_total", &[], 5);
    let text = metrics.render();
    assert_eq!(
        series(&text, "edge_alerts_failed_total", &[]),
        Some(3),
        "{text}"
    );
    // Incidents 2 and 3 opened, 1 and 2 closed: one open.
    assert_eq!(
        series(
            &text,
            "edge_incidents_open",
            &["group=\"fleet\"", "cause=\"disk\""]
        ),
        Some(1),
        "{text}"
    );
}

#[test]
fn a_refused_event_is_dropped_not_retried_and_the_next_goes() {
    let receiver = Receiver::start(&[400], false);
    let metrics = Metrics::new();
    let alerts = Alerts::start(&options(&receiver.url), metrics.alerts().clone()).unwrap();
    alerts.incident(&opened(1));
    alerts.incident(&opened(2));
    receiver.wait_until("the second event", |s| {
        s.requests.iter().any(|(a, st)| a.id == 2 && st.is_some())
    });
    let requests = receiver.with(|s| ids(&s.requests));
    assert_eq!(
        requests,
        [
            (1, IncidentEvent::Opened, Some(400)),
            (2, IncidentEvent::Opened, Some(200))
        ]
    );
    wait_for_series(&metrics, "edge_alerts_sent_total", &[], 1);
    let text = metrics.render();
    assert_eq!(
        series(&text, "edge_alerts_dropped_total", &["reason=\"refused\""]),
        Some(1),
        "{text}"
    );
    assert_eq!(
        series(&text, "edge_alerts_failed_total", &[]),
        Some(0),
        "{text}"
    );
}

/// Runs `f` on another thread and returns its result, failing (instead of
/// hanging the test) if it does not return.
fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not return"))
}

#[test]
fn a_hanging_receiver_never_blocks_the_caller_and_gets_later_events_once_it_recovers() {
    let receiver = Receiver::start(&[], true);
    let metrics = Metrics::new();
    let opts = WebhookOptions {
        timeout: Duration::from_millis(300),
        ..options(&receiver.url)
    };
    let alerts = Alerts::start(&opts, metrics.alerts().clone()).unwrap();
    alerts.incident(&opened(1));
    receiver.wait_until("the first request (held)", |s| !s.requests.is_empty());
    // The receiver holds the request; more events are queued at once.
    let caller = alerts.clone();
    returns("incident() while the receiver hangs", move || {
        for event in [closed(1), opened(2), closed(2)] {
            caller.incident(&event);
        }
    });
    assert!(receiver.with(|s| s.held && s.requests.iter().all(|(_, st)| st.is_none())));
    // The request timed out and event 1 was tried again, still first.
    receiver.wait_until("event 1 retried after a timeout", |s| s.requests.len() >= 2);
    assert!(receiver.with(|s| s
        .requests
        .iter()
        .all(|(a, _)| (a.id, a.event) == (1, IncidentEvent::Opened))));
    receiver.release();
    receiver.wait_until("every event delivered", |s| {
        s.requests
            .iter()
            .any(|(a, st)| (a.id, a.event) == (2, IncidentEvent::Closed) && *st == Some(200))
    });
    assert_eq!(
        receiver.delivered(),
        [
            (1, IncidentEvent::Opened),
            (1, IncidentEvent::Closed),
            (2, IncidentEvent::Opened),
            (2, IncidentEvent::Closed)
        ]
    );
    let text = metrics.render();
    assert!(
        series(&text, "edge_alerts_failed_total", &[]).unwrap() >= 1,
        "{text}"
    );
}

#[test]
fn a_full_queue_drops_its_oldest_waiting_events_and_counts_them() {
    let receiver = Receiver::start(&[], true);
    let metrics = Metrics::new();
    let opts = WebhookOptions {
        queue: 2,
        ..options(&receiver.url)
    };
    let alerts = Alerts::start(&opts, metrics.alerts().clone()).unwrap();
    alerts.incident(&opened(1));
    receiver.wait_until("the first request (held)", |s| !s.requests.is_empty());
    // Event 1 is being sent (not in the queue); 2..=6 into a queue of 2.
    for id in 2..=6 {
        alerts.incident(&opened(id));
    }
    let text = metrics.render();
    assert_eq!(
        series(
            &text,
            "edge_alerts_dropped_total",
            &["reason=\"queue_full\""]
        ),
        Some(3),
        "{text}"
    );
    assert_eq!(series(&text, "edge_alerts_queued", &[]), Some(2), "{text}");
    receiver.release();
    receiver.wait_until("the newest event delivered", |s| {
        s.requests
            .iter()
            .any(|(a, st)| a.id == 6 && *st == Some(200))
    });
    assert_eq!(
        receiver.delivered(),
        [
            (1, IncidentEvent::Opened),
            (5, IncidentEvent::Opened),
            (6, IncidentEvent::Opened)
        ]
    );
    assert_eq!(alerts.waiting(), 0);
}

#[test]
fn metrics_show_open_incidents_per_group_and_cause() {
    let metrics = Metrics::new();
    let alerts = Alerts::start(&WebhookOptions::default(), metrics.alerts().clone()).unwrap();
    let eio = IncidentCause::Errno { name: "EIO".into() };
    alerts.incident(&opened(1));
    alerts.incident(&alert(2, IncidentEvent::Opened, eio.clone()));
    alerts.incident(&alert(3, IncidentEvent::Opened, IncidentCause::Network));
    alerts.incident(&alert(3, IncidentEvent::Closed, IncidentCause::Network));
    let text = metrics.render();
    let open = |labels: &[&str]| series(&text, "edge_incidents_open", labels);
    assert_eq!(
        open(&["group=\"fleet\"", "cause=\"disk\""]),
        Some(1),
        "{text}"
    );
    assert_eq!(
        open(&["group=\"fleet\"", "cause=\"errno\"", "errno=\"EIO\""]),
        Some(1),
        "{text}"
    );
    assert_eq!(
        open(&["group=\"fleet\"", "cause=\"network\""]),
        Some(0),
        "{text}"
    );
    assert!(text.contains("# TYPE edge_incidents_open gauge"), "{text}");
}

/// The series are in the real server's `/metrics`, and a bad URL is
/// refused at start with a message naming it.
/// With `--public-url` each body links the incident's page in the web UI;
/// a `url` already set is kept.
#[test]
fn the_body_links_the_incidents_page_under_the_public_url() {
    let receiver = Receiver::start(&[], false);
    let metrics = Metrics::new();
    let opts = WebhookOptions {
        public_url: Some("https://edge.example.com/".into()),
        ..options(&receiver.url)
    };
    let alerts = Alerts::start(&opts, metrics.alerts().clone()).unwrap();
    alerts.incident(&opened(12));
    let elsewhere = IncidentAlert {
        url: Some("https://other.example.com/i/13".into()),
        ..opened(13)
    };
    alerts.incident(&elsewhere);
    receiver.wait_until("both events", |s| s.requests.len() >= 2);
    let urls: Vec<Option<String>> =
        receiver.with(|s| s.requests.iter().map(|(a, _)| a.url.clone()).collect());
    assert_eq!(
        urls,
        [
            Some("https://edge.example.com/incidents/12".to_string()),
            Some("https://other.example.com/i/13".to_string())
        ]
    );
}

#[test]
fn serve_exposes_the_alert_series_and_checks_its_webhook_url() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), &["--alert-webhook", "http://127.0.0.1:9/hook"]);
    let (status, text) = common::get(&server.url, "/metrics", None);
    assert_eq!(status, 200);
    let text = text.as_str().unwrap().to_string();
    assert_eq!(
        series(&text, "edge_alerts_sent_total", &[]),
        Some(0),
        "{text}"
    );
    assert_eq!(
        series(
            &text,
            "edge_alerts_dropped_total",
            &["reason=\"queue_full\""]
        ),
        Some(0),
        "{text}"
    );
    drop(server);
    let out = Command::new(common::bin())
        .args(["serve", "--insecure-no-auth", "--listen", "127.0.0.1:0"])
        .args(["--db", dir.path().join("other.db").to_str().unwrap()])
        .args(["--alert-webhook", "ftp://example.com/hook"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--alert-webhook") && stderr.contains("ftp://example.com/hook"),
        "{stderr}"
    );
    let out = Command::new(common::bin())
        .args(["serve", "--insecure-no-auth", "--listen", "127.0.0.1:0"])
        .args(["--db", dir.path().join("other.db").to_str().unwrap()])
        .args(["--public-url", "edge.example.com/ui"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The option's own check, not clap's.
    assert!(
        stderr.contains("--public-url \"edge.example.com/ui\" is not a URL"),
        "{stderr}"
    );
}

/// An https receiver: the service's own HTTPS server (a certificate of a
/// throwaway CA) answers the POST with a 4xx, which proves the TLS
/// handshake: with `--alert-webhook-ca` it is trusted (the event is
/// refused by HTTP, not retried); with Mozilla's roots it is not (retried).
#[test]
fn an_https_receiver_is_trusted_through_the_given_ca_only() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let (cert_path, key_path, ca_path) = (
        dir.path().join("cert.pem"),
        dir.path().join("key.pem"),
        dir.path().join("ca.pem"),
    );
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    std::fs::write(&ca_path, ca_cert.pem()).unwrap();
    let server = common::start(
        dir.path(),
        &[
            "--tls-cert",
            cert_path.to_str().unwrap(),
            "--tls-key",
            key_path.to_str().unwrap(),
        ],
    );
    let url = format!("{}/hooks/secret-path", server.url);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let trusted = Metrics::new();
    let opts = WebhookOptions {
        ca_file: Some(ca_path),
        ..options(&url)
    };
    let alerts = Alerts::start(&opts, trusted.alerts().clone()).unwrap();
    alerts.incident(&opened(1));
    wait_for_series(
        &trusted,
        "edge_alerts_dropped_total",
        &["reason=\"refused\""],
        1,
    );
    assert_eq!(
        series(&trusted.render(), "edge_alerts_failed_total", &[]),
        Some(0)
    );

    let untrusted = Metrics::new();
    let alerts = Alerts::start(&options(&url), untrusted.alerts().clone()).unwrap();
    alerts.incident(&opened(1));
    let bound = Instant::now() + Duration::from_secs(60);
    while series(&untrusted.render(), "edge_alerts_failed_total", &[]) == Some(0) {
        assert!(Instant::now() < bound, "an unknown CA was never refused");
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = untrusted.render();
    assert_eq!(
        series(&text, "edge_alerts_sent_total", &[]),
        Some(0),
        "{text}"
    );
    assert_eq!(
        series(&text, "edge_alerts_dropped_total", &["reason=\"refused\""]),
        Some(0),
        "{text}"
    );
}

/// `serve` end to end, no operator command: devices upload 1 s windows
/// timed from now; once the live analysis judges (its baseline learnt),
/// windows in which one device's disk is 3 times slower open an incident
/// (`/metrics` counts it open) and its clean windows after close it; the
/// webhook receiver gets the two events, in order, naming the device and
/// the cause.
#[test]
fn serve_opens_and_closes_an_incident_and_its_webhook_gets_both_in_order() {
    use fixtures::synth::{Fault, FleetSpec};
    use std::process::Stdio;

    const SECOND: u64 = 1_000_000_000;
    let receiver = Receiver::start(&[], false);
    let dir = tempfile::tempdir().unwrap();
    let tokens = common::write_tokens(dir.path());
    let mut child = Command::new(common::bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--quota-address-burst",
            "0",
        ])
        .args(["--db", dir.path().join("s.db").to_str().unwrap()])
        .args(["--tokens", tokens.to_str().unwrap()])
        .args([
            "--peers-online-tick",
            "1s",
            "--peers-online-baseline",
            "20s",
        ])
        .args([
            "--peers-online-close-after",
            "5s",
            "--peers-online-hang-after",
            "5s",
        ])
        .args(["--alert-webhook", &receiver.url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no listening line: {line:?}"))
        .to_string();
    // The log, line by line (and on to this test's stderr).
    let (log_tx, log) = mpsc::channel::<String>();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let _child = Kill(child);
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            eprintln!("{line}");
            let _ = log_tx.send(line);
        }
    });
    let wait_for_log = |what: &str| {
        let bound = Instant::now() + Duration::from_secs(60);
        loop {
            let left = bound.saturating_duration_since(Instant::now());
            match log.recv_timeout(left) {
                Ok(line) if line.contains(what) => return,
                Ok(_) => {}
                Err(_) => panic!("serve never logged {what:?}"),
            }
        }
    };

    // Five devices; windows from 14 s ago on (the analysis reads windows up
    // to a minute ahead of its clock and, at first, a baseline back).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut spec = FleetSpec::new(5, 75);
    spec.group = common::group_of(common::TOKEN).to_string();
    spec.start_unix_ns = (now - 14) * SECOND;
    spec.faults.push(Fault::Disk {
        device: 2,
        from: 55,
        until: 62,
        factor: 3.0,
    });
    let upload = |windows: std::ops::Range<u64>| {
        for w in windows {
            let items: Vec<Vec<u8>> = (0..spec.devices)
                .map(|d| {
                    let mut buf = [0u8; 4096];
                    spec.window(d, w).encode(&mut buf).unwrap().to_vec()
                })
                .collect();
            let (status, json) = common::post_items(&url, &items);
            assert_eq!(status, 200, "{json}");
        }
    };
    let open_disk = |url: &str| {
        let (status, text) = common::get(url, "/metrics", None);
        assert_eq!(status, 200);
        series(
            text.as_str().unwrap(),
            "edge_incidents_open",
            &["cause=\"disk\""],
        )
    };
    // 55 fault-free windows: the first tick learns a baseline of 20 from
    // them (the newest 35 stay judged), the next judges.
    upload(0..55);
    wait_for_log("judging each new window against it");
    upload(55..62);
    receiver.wait_until("the incident opened", |s| !s.requests.is_empty());
    assert_eq!(open_disk(&url), Some(1));
    upload(62..75);
    receiver.wait_until("the incident closed", |s| s.requests.len() >= 2);
    let got: Vec<_> = receiver.with(|s| {
        s.requests
            .iter()
            .map(|(a, _)| (a.id, a.event, a.device, a.cause.clone()))
            .collect()
    });
    let id = got[0].0;
    assert_eq!(
        got,
        vec![
            (
                id,
                IncidentEvent::Opened,
                spec.device_id(2),
                IncidentCause::Disk
            ),
            (
                id,
                IncidentEvent::Closed,
                spec.device_id(2),
                IncidentCause::Disk
            ),
        ]
    );
    let bound = Instant::now() + Duration::from_secs(60);
    while open_disk(&url) != Some(0) {
        assert!(Instant::now() < bound, "the gauge never went back to 0");
        std::thread::sleep(Duration::from_millis(50));
    }
}
