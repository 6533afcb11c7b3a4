//! `edge-agent watch --light` (issue 18): every matching run becomes a
//! light record made from /proc alone (no ptrace: the runs are never
//! traced), with its start, duration, exit, I/O bytes and CPU time; and the
//! service's per-device directives (`device_directives`, fetched with
//! `?device=<id>`) make exactly their `runs` runs traced fully, with the
//! fact `directive=<id>`, until they expire; the other runs stay light.
//! Discovery by /proc scans (`--discover scan`) and, as root, by the
//! process-events connector, whose exit events give every run's exit.

mod tracer_support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_core::{Exit, Kind, Summary};
use tracer_support::*;

fn start_light_watch(marker: &str, dir: &Path, extra: &[&str]) -> (Killed, Lines) {
    let mut child = Command::new(agent())
        .args(["watch", "--light", "--match", marker, "--out-dir"])
        .arg(dir.join("out"))
        .arg("--device-id-file")
        .arg(dir.join("device-id"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Lines::collect(child.stderr.take().unwrap());
    lines.wait_for("watching for", 30);
    (Killed(child), lines)
}

/// Stops the agent with SIGTERM and returns the summaries it wrote.
fn stop(watch: Killed, lines: &Lines, dir: &Path) -> Vec<Summary> {
    stop_watch(watch, lines, &dir.join("out"))
}

fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Whether `pid` has ended and waits to be reaped.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s.rfind(')')?;
            s[after + 1..].split_whitespace().next().map(|st| st == "Z")
        })
        .unwrap_or(false)
}

/// `sh -c SCRIPT MARKER` (the marker is in its command line); not traced
/// 150 ms in (light monitoring never attaches). With `slow_reap`, reaped
/// 0.4 s after it ended, as a busy parent would: polling learns a
/// process's exit only while it is a zombie.
fn light_run(script: &str, marker: &str, slow_reap: bool) -> (u64, std::process::ExitStatus) {
    let started = unix_now_ns();
    let mut child = Command::new("sh")
        .args(["-c", script, marker])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(tracer_of(child.id()), Some(0), "light runs are not traced");
    if slow_reap {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !is_zombie(child.id()) {
            assert!(Instant::now() < deadline, "{script} never ended");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(400));
    }
    (started, wait_timeout(&mut child, 30))
}

/// What dd moves in each run: 160 blocks of 64 KiB, read and written.
const DD_BYTES: u64 = 160 * 65536;

#[test]
fn light_records_give_each_runs_exit_duration_and_bytes_without_tracing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("edge-light-{}", std::process::id());
    let (watch, lines) = start_light_watch(&marker, dir.path(), &["--discover", "scan"]);
    // Each run: a subshell where dd moves DD_BYTES, then sleeps 0.3 s (the
    // subshell is sampled holding dd's bytes, and the outer shell gets them
    // again when it reaps the subshell: counted once, not twice), then the
    // outer shell sleeps 0.4 s, then the run ends.
    let endings = [
        ("exit 0", Exit::Code(0)),
        ("exit 3", Exit::Code(3)),
        ("exit 42", Exit::Code(42)),
        ("kill -9 $$", Exit::Signal(libc::SIGKILL)),
    ];
    let mut started = Vec::new();
    for (ending, _) in endings {
        let script = format!(
            "(dd if=/dev/zero of=/dev/null bs=64k count=160 2>/dev/null; sleep 0.3); sleep 0.4; {ending}"
        );
        started.push(light_run(&script, &marker, true).0);
    }
    // Reaped at once: polling cannot know the exit, and says so.
    let prompt = light_run("sleep 0.4; exit 5", &marker, false);
    assert_eq!(prompt.1.code(), Some(5));
    std::thread::sleep(Duration::from_millis(400));
    let device = std::fs::read_to_string(dir.path().join("device-id")).unwrap();
    let records = stop(watch, &lines, dir.path());
    assert_eq!(
        records.len(),
        endings.len() + 1,
        "one light record per run: {}",
        lines.text()
    );
    let mut by_start = records.clone();
    by_start.sort_by_key(|s| s.run.start_unix_ns);
    for (i, r) in by_start.iter().enumerate() {
        assert_eq!(r.kind, Kind::Light, "{r:?}");
        assert_eq!(r.run.events, 0);
        assert!(r.syscalls.is_empty());
        assert_eq!(hex::encode(r.origin.device), device.trim());
        assert!(!r.facts.program.is_empty(), "{r:?}");
        assert!(
            r.run.processes >= 2,
            "the shell and its sleep: {}",
            r.run.processes
        );
        assert!(r.cpu.is_some());
        let secs = r.run.duration_ns as f64 / 1e9;
        let least = if i < endings.len() { 0.65 } else { 0.35 };
        assert!((least..2.5).contains(&secs), "run {i}: {secs} s");
        if i < endings.len() {
            // Started within a clock tick (10 ms) and a scan of the spawn.
            let start_gap = r.run.start_unix_ns as i64 - started[i] as i64;
            assert!(
                (-20_000_000..200_000_000).contains(&start_gap),
                "run {i} starts {start_gap} ns after its spawn"
            );
            assert_eq!(r.run.exit, endings[i].1, "run {i}: {}", lines.text());
            let io = r.io.expect("I/O bytes");
            assert!(
                io.read >= DD_BYTES && io.written >= DD_BYTES,
                "run {i}: {io:?} < dd's {DD_BYTES}"
            );
            assert!(
                io.read < DD_BYTES * 3 / 2 && io.written < DD_BYTES * 3 / 2,
                "run {i}: dd's bytes counted twice: {io:?}"
            );
        } else {
            assert!(
                matches!(r.run.exit, Exit::Detached | Exit::Code(5)),
                "not known, or right: never a wrong exit: {:?}",
                r.run.exit
            );
        }
    }
}

/// A process the /proc scan met before it exec'd into a matching command
/// line (here a shell that execs 0.5 s in; on a loaded machine, any
/// spawned child caught between fork and exec) is looked at again after
/// the exec, not skipped as already seen.
#[test]
fn a_run_met_by_a_scan_before_its_exec_is_watched_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("edge-light-exec-{}", std::process::id());
    let (watch, lines) = start_light_watch(&marker, dir.path(), &["--discover", "scan"]);
    // The marker is in the environment, not in the first command line.
    let mut child = Command::new("sh")
        .env("EDGE_MARKER", &marker)
        .args([
            "-c",
            "sleep 0.5; exec sh -c 'sleep 0.6; exit 7' \"$EDGE_MARKER\"",
        ])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_zombie(child.id()) {
        assert!(Instant::now() < deadline, "the run never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Reaped a little later, as `light_run` does: polling learns the exit
    // from the zombie.
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(child.wait().unwrap().code(), Some(7));
    let records = stop(watch, &lines, dir.path());
    assert_eq!(records.len(), 1, "one light record: {}", lines.text());
    assert_eq!(records[0].kind, Kind::Light);
    assert_eq!(records[0].run.exit, Exit::Code(7), "{}", lines.text());
}

/// `watch --light --discover connector --match MARKER` writing into
/// `dir`, once it watches; `None` (the test skipped, said under `test`'s
/// name) where the process-events connector cannot be had.
fn start_connector_light_watch(test: &str, marker: &str, dir: &Path) -> Option<(Killed, Lines)> {
    let mut child = Command::new(agent())
        .args([
            "watch",
            "--light",
            "--discover",
            "connector",
            "--match",
            marker,
        ])
        .arg("--out-dir")
        .arg(dir.join("out"))
        .arg("--device-id-file")
        .arg(dir.join("device-id"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Lines::collect(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !lines.text().contains("watching for") {
        if let Some(st) = child.try_wait().unwrap() {
            edge_tests::skip(
                test,
                &format!("no process-events connector here ({st}): {}", lines.text()),
            );
            return None;
        }
        assert!(Instant::now() < deadline, "{}", lines.text());
        std::thread::sleep(Duration::from_millis(20));
    }
    Some((Killed(child), lines))
}

/// A run's root that execs into its program (`ip netns exec NS wget`,
/// `env VAR=.. prog`) is a run of that program, even when the program ends
/// before the next sample: the exec event itself names it. Each run here
/// lives 30 ms after its exec (a sample every 100 ms would name `python3`
/// for most), then stays a zombie until reaped, so the exec event is taken
/// while the process can still be read, however loaded the machine. A root
/// that execs within a millisecond of its own exec (`env`) can be missed:
/// its marked command line may be gone when the agent reads it.
#[test]
fn with_the_connector_a_root_that_execs_names_the_program_it_became() {
    let test = "with_the_connector_a_root_that_execs_names_the_program_it_became";
    let dir = tempfile::tempdir().unwrap();
    let _ = agent();
    let marker = format!("edge-light-exec-{}", std::process::id());
    let Some((watch, lines)) = start_connector_light_watch(test, &marker, dir.path()) else {
        return;
    };
    const RUNS: usize = 6;
    for _ in 0..RUNS {
        // The root keeps its marked command line 50 ms before its exec:
        // an `env MARK sleep` root execs within a millisecond, and a fresh
        // check once read its command line after that exec (5 runs of 6).
        let mut run = Command::new("python3")
            .args([
                "-c",
                "import os, time; time.sleep(0.05); os.execvp('sleep', ['sleep', '0.03'])",
                &marker,
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(600));
        assert!(run.wait().unwrap().success());
    }
    std::thread::sleep(Duration::from_millis(300));
    let records = stop(watch, &lines, dir.path());
    assert_eq!(records.len(), RUNS, "{}", lines.text());
    let programs: Vec<&str> = records.iter().map(|r| r.facts.program.as_str()).collect();
    assert_eq!(programs, vec!["sleep"; RUNS], "{}", lines.text());
}

#[test]
fn with_the_connector_light_records_know_every_exit_even_when_reaped_at_once() {
    let test = "with_the_connector_light_records_know_every_exit_even_when_reaped_at_once";
    let dir = tempfile::tempdir().unwrap();
    let _ = agent();
    let marker = format!("edge-light-events-{}", std::process::id());
    let Some((watch, lines)) = start_connector_light_watch(test, &marker, dir.path()) else {
        return;
    };
    // Reaped at once by this test (no zombie for a scan to see), and one
    // shorter than a scan interval.
    let runs = [
        ("sleep 0.3; exit 0", Exit::Code(0), 0.3),
        ("sleep 0.3; exit 3", Exit::Code(3), 0.3),
        ("sleep 0.3; kill -9 $$", Exit::Signal(libc::SIGKILL), 0.3),
        ("sleep 0.05; exit 7", Exit::Code(7), 0.05),
    ];
    for (script, ..) in runs {
        let st = Command::new("sh")
            .args(["-c", script, &marker])
            .status()
            .unwrap();
        assert!(st.code().is_some() || st.signal_is_kill());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(400));
    let mut records = stop(watch, &lines, dir.path());
    assert_eq!(records.len(), runs.len(), "{}", lines.text());
    records.sort_by_key(|s| s.run.start_unix_ns);
    for (r, (script, exit, least)) in records.iter().zip(runs) {
        assert_eq!(r.kind, Kind::Light);
        assert_eq!(r.run.exit, exit, "{script}: {}", lines.text());
        let secs = r.run.duration_ns as f64 / 1e9;
        assert!((least..least + 1.5).contains(&secs), "{script}: {secs} s");
    }
}

trait KilledBy {
    fn signal_is_kill(&self) -> bool;
}

impl KilledBy for std::process::ExitStatus {
    fn signal_is_kill(&self) -> bool {
        use std::os::unix::process::ExitStatusExt;
        self.signal() == Some(libc::SIGKILL)
    }
}

/// A stand-in for the service's `GET /v1/directives`: one fixed body, and
/// the request heads it got.
struct Directives {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Directives {
    fn start(body: String) -> Directives {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let r = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                r.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Directives { port, requests }
    }
}

#[test]
fn a_device_directive_traces_exactly_its_runs_fully_and_an_expired_one_none() {
    let dir = tempfile::tempdir().unwrap();
    let _ = agent();
    let marker = format!("edge-light-directed-{}", std::process::id());
    let far = unix_now_ns() + 3600 * 1_000_000_000;
    // Listed before the live one, and matching the same runs: were expiry
    // or the program not honoured, they would take the runs.
    let service = Directives::start(format!(
        r#"{{"group": "g", "match": null, "only": null, "window": null, "device_directives": [
            {{"id": "0000000000000001", "program": null, "match": "{marker}", "runs": 5, "expires_unix_ns": 1}},
            {{"id": "0000000000000002", "program": "no-such-program", "match": null, "runs": 5, "expires_unix_ns": {far}}},
            {{"id": "00000000000000d1", "program": null, "match": "{marker}", "runs": 2, "expires_unix_ns": {far}, "later": "ignored"}}
        ]}}"#
    ));
    let token = dir.path().join("token");
    std::fs::write(&token, "tok-1\n").unwrap();
    let url = format!("http://127.0.0.1:{}", service.port);
    let mut watch = Command::new(agent())
        .args(["watch", "--light", "--match", &marker, "--out-dir"])
        .arg(dir.path().join("out"))
        .arg("--device-id-file")
        .arg(dir.path().join("device-id"))
        .args(["--server", &url, "--token-file"])
        .arg(&token)
        .args(["--directives-every", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Lines::collect(watch.stderr.take().unwrap());
    let watch = Killed(watch);
    lines.wait_for("per-device directives: 0000000000000001", 30);

    // Five runs, one after the other (each with syscalls after the agent
    // attaches, should it trace it): the fetches go on meanwhile, listing
    // d1 all along (the service has not seen its runs yet).
    for _ in 0..5 {
        let st = Command::new("sh")
            .args([
                "-c",
                "sleep 0.4; ls / > /dev/null; cat /proc/self/stat > /dev/null",
                &marker,
            ])
            .status()
            .unwrap();
        assert!(st.success());
    }
    std::thread::sleep(Duration::from_millis(400));
    let device = std::fs::read_to_string(dir.path().join("device-id")).unwrap();
    let summaries = stop(watch, &lines, dir.path());

    let (full, light): (Vec<&Summary>, Vec<&Summary>) =
        summaries.iter().partition(|s| s.kind == Kind::Full);
    assert_eq!(
        full.len(),
        2,
        "exactly the directive's runs: {}",
        lines.text()
    );
    assert_eq!(light.len(), 3, "the rest light: {}", lines.text());
    for s in &full {
        assert_eq!(s.facts.get("directive"), Some("00000000000000d1"), "{s:?}");
        assert!(s.run.events > 0, "traced");
        assert_eq!(s.origin.window_ns, 0, "one whole-run summary");
        assert_eq!(hex::encode(s.origin.device), device.trim());
    }
    for s in &light {
        assert_eq!(s.facts.get("directive"), None);
    }
    assert!(
        summaries
            .iter()
            .all(|s| s.facts.get("directive") != Some("0000000000000001")),
        "the expired directive took nothing"
    );
    let requests = service.requests.lock().unwrap().clone();
    assert!(requests.len() >= 2, "fetched again: {requests:?}");
    let wanted = format!("GET /v1/directives?device={} ", device.trim());
    assert!(
        requests.iter().all(|r| r.starts_with(&wanted)),
        "{wanted:?}: {requests:?}"
    );
}

#[test]
fn an_expired_directive_alone_leaves_every_run_light() {
    let dir = tempfile::tempdir().unwrap();
    let _ = agent();
    let marker = format!("edge-light-expired-{}", std::process::id());
    let expired = unix_now_ns() - 1_000_000_000;
    let service = Directives::start(format!(
        r#"{{"group": "g", "device_directives": [
            {{"id": "42", "program": null, "match": null, "runs": 3, "expires_unix_ns": {expired}}}
        ]}}"#
    ));
    let url = format!("http://127.0.0.1:{}", service.port);
    let (watch, lines) = start_light_watch(
        &marker,
        dir.path(),
        &["--server", &url, "--directives-every", "1"],
    );
    lines.wait_for("per-device directives: 42", 30);
    for _ in 0..2 {
        let st = Command::new("sh")
            .args(["-c", "sleep 0.4; ls / > /dev/null", &marker])
            .status()
            .unwrap();
        assert!(st.success());
    }
    std::thread::sleep(Duration::from_millis(400));
    let summaries = stop(watch, &lines, dir.path());
    assert_eq!(summaries.len(), 2, "{}", lines.text());
    assert!(
        summaries.iter().all(|s| s.kind == Kind::Light),
        "{}",
        lines.text()
    );
}
