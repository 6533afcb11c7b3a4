//! Connection limits against a real `edge-service serve` on loopback:
//! slowloris (a head sent a line at a time), half-sent bodies, idle and
//! keep-alive connections are closed by their timeouts; the connection cap
//! refuses clearly and makes room by closing idle connections; SIGTERM
//! closes what has no request in flight, lets a request in flight finish
//! and gives up after --shutdown-timeout-ms. Every wait is bounded; the
//! bounds are several times the timeouts configured, for a busy machine.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

/// Longest a test waits for the server to close a connection whose
/// timeout is 1-1.5 s.
const CLOSE_BOUND: Duration = Duration::from_secs(10);

fn addr(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

fn connect(url: &str) -> TcpStream {
    let s = TcpStream::connect(addr(url)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads until the server closes (EOF or reset); how long that took, or
/// `None` if it was still open after `bound`. Returns what was read too.
fn wait_closed(stream: &mut TcpStream, bound: Duration) -> (Option<Duration>, String) {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = bound.saturating_sub(started.elapsed());
        if left.is_zero() {
            return (None, String::from_utf8_lossy(&got).into_owned());
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (None, String::from_utf8_lossy(&got).into_owned());
            }
            // A reset is a close too.
            Err(_) => break,
        }
    }
    (
        Some(started.elapsed()),
        String::from_utf8_lossy(&got).into_owned(),
    )
}

/// The value of one metric line (`name{labels}`), 0 if absent.
fn metric(url: &str, series: &str) -> f64 {
    try_metric(url, series).expect("GET /metrics answered 200")
}

/// [`metric`], or `None` when `/metrics` did not answer 200 (the server may
/// still count closed connections against its cap for a moment).
fn try_metric(url: &str, series: &str) -> Option<f64> {
    let (status, text) = get(url, "/metrics", None);
    if status != 200 {
        return None;
    }
    let text = text.as_str().unwrap_or_default().to_string();
    Some(
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0),
    )
}

/// Writes `line` every 200 ms on a clone of `stream` until writing fails.
fn trickle(stream: &TcpStream, line: &'static [u8]) -> std::thread::JoinHandle<()> {
    let mut w = stream.try_clone().unwrap();
    std::thread::spawn(move || {
        let started = Instant::now();
        while started.elapsed() < CLOSE_BOUND * 2 {
            if w.write_all(line).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })
}

#[test]
fn slowloris_half_bodies_and_idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[
            "--header-timeout-ms",
            "1000",
            "--body-timeout-ms",
            "1500",
            "--idle-timeout-ms",
            "1000",
        ],
    );

    // Connected, nothing sent.
    let mut idle = connect(&server.url);
    let (closed, _) = wait_closed(&mut idle, CLOSE_BOUND);
    assert!(closed.is_some(), "an idle connection stayed open");

    // Keep-alive after one answered request.
    let mut kept = connect(&server.url);
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (closed, got) = wait_closed(&mut kept, CLOSE_BOUND);
    assert!(
        got.starts_with("HTTP/1.1 200") && got.ends_with("ok"),
        "{got}"
    );
    assert!(closed.is_some(), "a keep-alive connection stayed open");

    // Slowloris: a head that never ends, one header line every 200 ms.
    let mut slow = connect(&server.url);
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let writer = trickle(&slow, b"X-Slow: loris\r\n");
    let (closed, got) = wait_closed(&mut slow, CLOSE_BOUND);
    assert!(closed.is_some(), "a slowloris head kept its connection");
    assert!(!got.contains("200"), "{got}");
    writer.join().unwrap();

    // A body sent a byte at a time that would take far too long.
    let mut half = connect(&server.url);
    half.write_all(
        format!(
            "POST /v1/summaries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: 100000\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let writer = trickle(&half, b"\x01");
    let (closed, _) = wait_closed(&mut half, CLOSE_BOUND);
    assert!(closed.is_some(), "a trickled body kept its connection");
    writer.join().unwrap();
    assert!(stored_ids(&server.db).is_empty());

    // Each was counted by kind, and the server still answers.
    let series = |kind: &str| format!("edge_service_connection_timeouts_total{{kind=\"{kind}\"}}");
    assert!(metric(&server.url, &series("idle")) >= 2.0);
    assert!(metric(&server.url, &series("header")) >= 1.0);
    assert!(metric(&server.url, &series("body")) >= 1.0);
    assert_eq!(get(&server.url, "/healthz", None).0, 200);
}

/// Opens a connection holding half a request head (not idle: it cannot be
/// closed to make room), once the server has seen it.
fn half_head(url: &str) -> TcpStream {
    let mut s = connect(url);
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    s
}

#[test]
fn the_connection_cap_refuses_clearly_and_makes_room_from_idle_ones() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[
            "--max-connections",
            "4",
            "--header-timeout-ms",
            "30000",
            "--idle-timeout-ms",
            "30000",
        ],
    );
    let busy: Vec<TcpStream> = (0..4).map(|_| half_head(&server.url)).collect();
    std::thread::sleep(Duration::from_millis(500));

    let mut fifth = connect(&server.url);
    fifth
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (closed, got) = wait_closed(&mut fifth, CLOSE_BOUND);
    assert!(
        closed.is_some(),
        "the refused connection stayed open: {got}"
    );
    assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    assert!(got.contains("connection: close") && got.contains("retry-after: 5"));
    assert!(got.contains("too many connections (at most 4)"), "{got}");
    drop(busy);

    // Idle connections at the cap: the one idle longest makes room.
    let deadline = Instant::now() + CLOSE_BOUND;
    while try_metric(&server.url, "edge_service_connections_open").is_none_or(|open| open > 1.0) {
        assert!(Instant::now() < deadline, "closed connections still open");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(metric(&server.url, "edge_service_connections_refused_total") >= 1.0);
    let idle: Vec<TcpStream> = (0..4).map(|_| connect(&server.url)).collect();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(get(&server.url, "/healthz", None).0, 200);
    assert!(metric(&server.url, "edge_service_connections_evicted_total") >= 1.0);
    drop(idle);
}

fn sigterm(server: &Server) {
    let pid = nix::unistd::Pid::from_raw(server.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
}

/// Waits for the server to exit; how long it took, or `None` after `bound`.
fn wait_exit(server: &mut Server, bound: Duration) -> Option<(Duration, bool)> {
    let started = Instant::now();
    while started.elapsed() < bound {
        if let Some(status) = server.child.try_wait().unwrap() {
            return Some((started.elapsed(), status.success()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn sigterm_closes_half_sent_requests_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), &[]);
    let _half = half_head(&server.url);
    let _idle = connect(&server.url);
    std::thread::sleep(Duration::from_millis(300));
    sigterm(&server);
    // Nothing is in flight: no reason to wait for the 10 s default bound.
    let (took, ok) = wait_exit(&mut server, Duration::from_secs(8))
        .expect("the server waited for a half-sent request");
    assert!(ok, "exit status after SIGTERM");
    eprintln!("exited {took:?} after SIGTERM");
}

fn post_head(url: &str, body_len: usize) -> TcpStream {
    let mut s = connect(url);
    s.write_all(
        format!(
            "POST /v1/summaries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {body_len}\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    s
}

#[test]
fn sigterm_lets_a_request_in_flight_finish_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path(), &[]);
    let item = fixtures::sample::encoded(90, 300, None);
    let body = common::body([item.as_slice()]);
    let mut conn = post_head(&server.url, body.len());
    conn.write_all(&body[..body.len() / 2]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    sigterm(&server);
    std::thread::sleep(Duration::from_millis(300));
    // Still serving the request begun before the signal.
    conn.write_all(&body[body.len() / 2..]).unwrap();
    let (closed, got) = wait_closed(&mut conn, CLOSE_BOUND);
    assert!(closed.is_some(), "{got}");
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains(&id_of(&item)), "{got}");
    let (_, ok) = wait_exit(&mut server, CLOSE_BOUND).expect("no exit after the request");
    assert!(ok);
    // Acknowledged, so stored.
    assert_eq!(stored_ids(&server.db), [id_of(&item)]);
}

#[test]
fn sigterm_gives_up_on_an_unfinished_request_after_the_shutdown_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(
        dir.path(),
        &[
            "--shutdown-timeout-ms",
            "1000",
            "--body-timeout-ms",
            "60000",
        ],
    );
    let mut conn = post_head(&server.url, 5000);
    conn.write_all(&[1u8; 100]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    sigterm(&server);
    let (took, ok) =
        wait_exit(&mut server, Duration::from_secs(8)).expect("the shutdown was not bounded");
    assert!(ok);
    assert!(took >= Duration::from_millis(900), "{took:?}");
    let (closed, got) = wait_closed(&mut conn, CLOSE_BOUND);
    assert!(closed.is_some() && !got.contains("200"), "{got}");
}
