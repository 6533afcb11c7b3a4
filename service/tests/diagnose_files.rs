//! `edge-service diagnose FILES...` on inputs that are not summaries: the
//! real binary, so a read that is not capped shows as a memory blow-up.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::bin;

/// Runs `edge-service ARGS` under a 2 GiB address-space limit (an uncapped
/// read of `/dev/zero` dies there instead of eating the machine) and kills
/// it after 60 s.
fn run_limited(args: &[&str]) -> Output {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2097152 && exec \"$@\"")
        .arg("sh")
        .arg(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn diagnose_reads_at_most_a_summary_and_a_byte_of_a_file() {
    let started = Instant::now();
    let out = run_limited(&["diagnose", "/dev/zero"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/dev/zero: larger than 2048 bytes: not a summary")
            && err.contains("--skip-bad"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn diagnose_names_each_bad_file_and_skips_them_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 0..8u64 {
        let events = if seed < 4 { 200 } else { 2000 };
        std::fs::write(
            dir.path().join(format!("run{seed}.summary")),
            fixtures::sample::encoded(seed, events, None),
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("empty.summary"), b"").unwrap();
    let folder = dir.path().to_str().unwrap();

    let out = run_limited(&["diagnose", folder]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("empty.summary: empty file (0 bytes): not a summary")
            && err.contains("use --skip-bad"),
        "{err}"
    );

    let out = run_limited(&["diagnose", folder, "--skip-bad"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("skipped") && err.contains("empty.summary: empty file (0 bytes)"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("rule"));
}
