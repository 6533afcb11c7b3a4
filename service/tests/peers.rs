//! `edge-service peers` end to end: a synthetic fleet's window summaries
//! posted to a real `edge-service serve` (the normal ingest path), then the
//! real binary diagnosing the store and a folder of the same summaries.

mod common;

use std::process::{Command, Output};

use common::{bin, post_items, start};
use fixtures::synth::{Fault, FleetSpec};

fn spec() -> FleetSpec {
    FleetSpec {
        // The token's group (common::TOKEN).
        group: "phones".into(),
        faults: vec![Fault::Disk {
            device: 3,
            from: 50,
            until: 80,
            factor: 3.0,
        }],
        ..FleetSpec::new(4, 80)
    }
}

fn encoded(spec: &FleetSpec) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; agent_core::MAX_ENCODED_LEN];
    spec.summaries()
        .map(|mut s| s.encode(&mut buf).unwrap().to_vec())
        .collect()
}

fn peers(args: &[&str]) -> Output {
    Command::new(bin())
        .arg("peers")
        .args(args)
        .output()
        .unwrap()
}

/// The training (windows 0..40) and diagnosis (40..80) ranges as flags,
/// training in RFC 3339, diagnosis in Unix seconds.
fn range_args(spec: &FleetSpec) -> Vec<String> {
    let secs = |w: u64| (spec.window_start(w) / 1_000_000_000).to_string();
    // FleetSpec::new starts at 2025-11-21T04:40:00Z.
    assert_eq!(spec.window_start(0), 1_763_700_000_000_000_000);
    vec![
        "--train-since".into(),
        "2025-11-21T04:40:00Z".into(),
        "--train-until".into(),
        "2025-11-21T05:40:40+01:00".into(),
        "--since".into(),
        secs(40),
        "--until".into(),
        secs(80),
    ]
}

fn check_finding(spec: &FleetSpec, out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["devices"].as_array().unwrap().len(), 4, "{v}");
    let findings = v["findings"].as_array().unwrap();
    let metrics: Vec<&str> = findings
        .iter()
        .map(|f| f["metric"].as_str().unwrap())
        .collect();
    assert!(metrics.contains(&"dread"), "{v}");
    assert!(
        metrics.iter().all(|m| ["dread", "dwrite"].contains(m)),
        "{v}"
    );
    for f in findings {
        assert_eq!(f["device"], common::hex(&spec.device_id(3)), "{v}");
        assert_eq!(f["method"], "median");
        assert_eq!(f["cause"], "disk");
        assert_eq!(f["first_window_unix_ns"], spec.window_start(50));
        assert_eq!(f["last_window_unix_ns"], spec.window_start(79));
    }
}

#[test]
fn peers_finds_the_slow_disk_in_a_store_filled_by_ingest_and_in_files() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let spec = spec();
    let items = encoded(&spec);
    for chunk in items.chunks(100) {
        let (status, json) = post_items(&server.url, chunk);
        assert_eq!(status, 200, "{json}");
    }
    drop(server);
    let db = dir.path().join("service.db");
    let db = db.to_str().unwrap();
    let ranges = range_args(&spec);
    let ranges: Vec<&str> = ranges.iter().map(String::as_str).collect();

    let mut args = vec![
        "--db", db, "--group", "phones", "--method", "median", "--json",
    ];
    args.extend(&ranges);
    check_finding(&spec, &peers(&args));

    // The same windows as files.
    let folder = dir.path().join("spool");
    std::fs::create_dir(&folder).unwrap();
    for (i, item) in items.iter().enumerate() {
        std::fs::write(folder.join(format!("{i:05}.summary")), item).unwrap();
    }
    let folder = folder.to_str().unwrap();
    let mut args = vec![folder, "--group", "phones", "--method", "median", "--json"];
    args.extend(&ranges);
    check_finding(&spec, &peers(&args));

    // Another group has no windows: a clear error, not an empty report.
    let mut args = vec!["--db", db, "--group", "laptops"];
    args.extend(&ranges);
    let out = peers(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no window summaries of group \"laptops\""),
        "{err}"
    );
}

#[test]
fn peers_refuses_bad_times_and_empty_or_overlapping_ranges() {
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--train-since",
                "yesterday",
                "--train-until",
                "10",
                "--since",
                "20",
            ],
            "--train-since: time \"yesterday\" is not RFC 3339",
        ),
        (
            &[
                "--train-since",
                "10",
                "--train-until",
                "10",
                "--since",
                "20",
            ],
            "the training (--train-since .. --train-until) range is empty",
        ),
        (
            &[
                "--train-since",
                "10",
                "--train-until",
                "30",
                "--since",
                "20",
                "--until",
                "40",
            ],
            "the training range overlaps the diagnosis range",
        ),
        (
            &[
                "--train-since",
                "10",
                "--train-until",
                "20",
                "--since",
                "40",
                "--until",
                "30",
            ],
            "the diagnosis (--since .. --until) range is empty",
        ),
    ];
    for (times, want) in cases {
        let mut args = vec!["--db", "/nonexistent/db", "--group", "g"];
        args.extend(times);
        let out = peers(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "want {want:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
