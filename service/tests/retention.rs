//! Retention through the binary: `edge-service prune` and
//! `serve --retain`, on SQLite and on PostgreSQL.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use fixtures::sample;

fn items(seed: u64) -> Vec<Vec<u8>> {
    (seed..seed + 5)
        .map(|s| sample::encoded(s, 300, None))
        .collect()
}

fn runs(server: &Server) -> usize {
    let (status, json) = get(&server.url, "/v1/runs", Some(&server.op(TOKEN)));
    assert_eq!(status, 200);
    json["runs"].as_array().unwrap().len()
}

/// The store of a test: a fresh SQLite file in `dir`, or a fresh
/// PostgreSQL database (`None`: skipped).
fn db(dir: &std::path::Path, postgres: bool, test: &str) -> Option<PathBuf> {
    if postgres {
        pg::database(test).map(PathBuf::from)
    } else {
        Some(dir.join("service.db"))
    }
}

fn prune_command_prunes_what_was_received_before_the_age(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = db(dir.path(), postgres, "prune_command") else {
        return;
    };
    let server = start_on(dir.path(), &db, &[]);
    let (status, _) = post_items(&server.url, &items(500));
    assert_eq!(status, 200);
    let prune = |age: &str, keep_raw: bool| {
        let mut cmd = Command::new(bin());
        cmd.args(["prune", "--db"])
            .arg(&db)
            .args(["--older-than", age]);
        if keep_raw {
            cmd.arg("--keep-raw");
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Nothing is a day old.
    let (code, stdout, _) = prune("1d", false);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("pruned 0 run(s)"), "{stdout}");
    assert_eq!(runs(&server), 5);
    std::thread::sleep(Duration::from_millis(1100));
    // Keeping the raw summaries: the runs are still served.
    let (code, stdout, _) = prune("1s", true);
    assert_eq!(code, Some(0));
    assert!(
        stdout.starts_with("pruned 5 run(s) (their raw summaries kept)"),
        "{stdout}"
    );
    assert_eq!(runs(&server), 5);
    let (code, stdout, _) = prune("1s", false);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("pruned 5 run(s) and "), "{stdout}");
    assert_eq!(runs(&server), 0);
    // The server goes on storing.
    let (status, json) = post_items(&server.url, &items(600));
    assert_eq!(status, 200);
    assert_eq!(accepted(&json).len(), 5);
    // An age without a unit is refused, saying what is wrong.
    let (code, _, stderr) = prune("30", false);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("has no unit"), "{stderr}");
}

fn serve_retain_prunes_periodically(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = db(dir.path(), postgres, "serve_retain") else {
        return;
    };
    let server = start_on(
        dir.path(),
        &db,
        &["--retain", "1s", "--retain-every-ms", "200"],
    );
    let (status, _) = post_items(&server.url, &items(700));
    assert_eq!(status, 200);
    assert_eq!(runs(&server), 5);
    let deadline = Instant::now() + Duration::from_secs(15);
    while runs(&server) > 0 {
        assert!(Instant::now() < deadline, "--retain 1s pruned nothing");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn prune_command_sqlite() {
    prune_command_prunes_what_was_received_before_the_age(false);
}

#[test]
fn prune_command_postgres() {
    prune_command_prunes_what_was_received_before_the_age(true);
}

#[test]
fn serve_retain_sqlite() {
    serve_retain_prunes_periodically(false);
}

#[test]
fn serve_retain_postgres() {
    serve_retain_prunes_periodically(true);
}
