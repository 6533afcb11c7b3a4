//! The device id (issue 14): made on first use in the state folder, the
//! same in every summary of `run`, `attach` and `watch` across agent runs,
//! new after `device-id --reset`, and a corrupt or unreadable file is an
//! error naming it, before anything is traced, never quietly replaced.

mod tracer_support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use agent_core::{DeviceId, Summary};
use tracer_support::*;

fn edge_agent(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(agent());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_timeout(&mut cmd, 60)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `edge-agent device-id [--reset] --device-id-file FILE`: the hex id.
fn device_id(file: &Path, reset: bool) -> DeviceId {
    let mut args = vec!["device-id", "--device-id-file", p(file)];
    if reset {
        args.push("--reset");
    }
    let out = edge_agent(&args, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    text.trim_end().parse().expect("32 hex digits")
}

fn summary_at(path: &Path) -> Summary {
    Summary::decode(&std::fs::read(path).unwrap()).unwrap()
}

fn run_summary(file: &Path, out: &Path) -> Summary {
    let o = edge_agent(
        &[
            "run",
            "--device-id-file",
            p(file),
            "--out",
            p(out),
            "--",
            "true",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    summary_at(out)
}

#[test]
fn every_summary_carries_one_stable_id_until_reset() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state/device-id");
    let id = device_id(&file, false);
    assert_ne!(id, [0; 16]);
    assert_eq!(device_id(&file, false), id, "stable across runs");

    let out = dir.path().join("run.summary");
    assert_eq!(run_summary(&file, &out).origin.device, id, "run");

    // attach
    let mut sleeper = Command::new("sleep").arg("5").spawn().unwrap();
    let out = dir.path().join("attach.summary");
    let o = edge_agent(
        &[
            "attach",
            "--window",
            "whole",
            &sleeper.id().to_string(),
            "--for",
            "0.3",
            "--device-id-file",
            p(&file),
            "--out",
            p(&out),
        ],
        &[],
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(summary_at(&out).origin.device, id, "attach");

    // watch
    let text = format!("edge-device-id-test-{}", std::process::id());
    let out_dir = dir.path().join("watch");
    let mut watch = Command::new(agent())
        .args(["watch", "--window", "whole", "--match", &text])
        .args(["--device-id-file", p(&file)])
        .arg("--out-dir")
        .arg(&out_dir)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let st = Command::new("sh")
        // `; :` keeps the shell (whose command line holds the text) from
        // exec'ing sleep.
        .args(["-c", "sleep 0.5; :", &text])
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(300));
    agent_linux::sys::kill(watch.id() as i32, libc::SIGTERM).unwrap();
    assert!(wait_timeout(&mut watch, 30).success());
    let files: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(summary_at(&files[0]).origin.device, id, "watch");

    // reset
    let new = device_id(&file, true);
    assert_ne!(new, id, "a new id after --reset");
    assert_eq!(device_id(&file, false), new);
    let out = dir.path().join("run2.summary");
    assert_eq!(run_summary(&file, &out).origin.device, new);
}

#[test]
fn the_default_file_is_in_the_state_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.summary");
    let o = edge_agent(
        &["run", "--out", p(&out), "--", "true"],
        &[("XDG_STATE_HOME", dir.path())],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let file = dir.path().join("edge-agent/device-id");
    assert!(file.is_file(), "made beside the default spool's folder");
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.trim_end(), hex::encode(summary_at(&out).origin.device));
    // The environment variable names the file as --device-id-file does.
    let other = dir.path().join("other-id");
    let o = edge_agent(
        &["run", "--out", p(&out), "--", "true"],
        &[
            ("XDG_STATE_HOME", dir.path()),
            ("EDGE_AGENT_DEVICE_ID_FILE", &other),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&other).unwrap();
    assert_eq!(text.trim_end(), hex::encode(summary_at(&out).origin.device));
}

#[test]
fn a_corrupt_or_unreadable_file_is_an_error_before_tracing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("device-id");
    std::fs::write(&file, "not an id\n").unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", p(&marker));
    for args in [
        vec![
            "run",
            "--device-id-file",
            p(&file),
            "--",
            "sh",
            "-c",
            &script,
        ],
        vec!["device-id", "--device-id-file", p(&file)],
    ] {
        let o = edge_agent(&args, &[]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(p(&file)) && err.contains("corrupt"), "{err}");
        assert!(err.contains("--reset"), "says the way out: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(!marker.exists(), "the program did not run");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "not an id\n",
        "never replaced"
    );
    // A path the agent cannot read (its folder is a file: even root gets
    // ENOTDIR), and a folder in the file's place.
    let unreadable = file.join("device-id");
    let o = edge_agent(&["device-id", "--device-id-file", p(&unreadable)], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(p(&unreadable)), "{err}");
    let o = edge_agent(&["device-id", "--device-id-file", p(dir.path())], &[]);
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    // --reset is the way out.
    let new = device_id(&file, true);
    assert_eq!(device_id(&file, false), new);
}
