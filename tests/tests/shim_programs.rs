//! Directives that name programs install shims (issue 22), through the
//! real binaries: the operator's `edge-service directive set --programs`,
//! served by `edge-service serve`, reaches `edge-agent watch --server URL
//! --shim-dir DIR` (the device's opt-in), which installs a shim for each
//! named program found on PATH; the program's next run is then traced
//! from its first syscall with the directive's `--only`, spooled, uploaded,
//! and stored by the service.

mod tracer_support;

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};

use agent_core::Summary;
use tracer_support::*;

const GROUP: &str = "shimmed";
const TOKEN: &str = "tok-shim-programs";

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `edge-service ARGS` on `db`; fails the test with its stderr.
fn service(db: &Path, args: &[&str]) -> String {
    let out = output_timeout(
        Command::new(edge_tests::binary("edge-service"))
            .args(args)
            .arg("--db")
            .arg(db),
        60,
    );
    assert!(
        out.status.success(),
        "edge-service {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The spool's summaries.
fn spooled(spool: &Path) -> Vec<Summary> {
    uploader::spool::Spool::open(spool)
        .unwrap()
        .pending()
        .unwrap()
        .pending
        .iter()
        .map(|p| Summary::decode(&p.bytes).unwrap())
        .collect()
}

#[test]
fn a_directive_naming_a_program_shims_it_on_a_device_that_opted_in() {
    let dir = tempfile::tempdir().unwrap();
    let (db, tokens, token) = (
        dir.path().join("service.db"),
        dir.path().join("tokens"),
        dir.path().join("token"),
    );
    std::fs::write(&tokens, format!("{GROUP} {TOKEN}\n")).unwrap();
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let addr = free_addr();
    let url = format!("http://{addr}");
    let _serve = lab::procs::Service::start(
        &edge_tests::binary("edge-service"),
        addr,
        &db,
        &tokens,
        &[],
        &dir.path().join("serve.log"),
    )
    .unwrap();
    // md5sum is on every PATH; the other name on none (reported, not fatal).
    let set = service(
        &db,
        &[
            "directive",
            "set",
            "--group",
            GROUP,
            "--only",
            "read,openat",
            "--programs",
            "md5sum,edge-no-such-program",
        ],
    );
    assert!(
        set.contains(r#""programs":["md5sum","edge-no-such-program"]"#),
        "{set}"
    );

    // The device: watching for something else (no `match` in the directive
    // replaces it), steering the shims of its opted-in folder.
    let shims = dir.path().join("shims");
    let mut watch = Command::new(agent())
        .args(["watch", "--match", "edge-shim-programs-never-run"])
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .arg("--device-id-file")
        .arg(dir.path().join("device-id"))
        .args(["--server", &url, "--token-file"])
        .arg(&token)
        .args(["--directives-every", "1", "--shim-dir"])
        .arg(&shims)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Lines::collect(watch.stderr.take().unwrap());
    let watch = Killed(watch);
    lines.wait_for("shim for md5sum installed", 60);
    lines.wait_for("no shim for edge-no-such-program", 10);
    let script = std::fs::read_to_string(shims.join("md5sum")).unwrap();
    assert!(
        script.contains(agent_linux::shim::MARKER),
        "not a shim: {script}"
    );
    assert!(!shims.join("edge-no-such-program").exists());
    drop(watch);

    // Typing `md5sum` with the folder first in PATH runs the shim: traced
    // from the first call, only the directive's syscalls, into the spool.
    let data = dir.path().join("data.bin");
    std::fs::write(&data, vec![7u8; 64 << 10]).unwrap();
    let spool = dir.path().join("spool");
    let path = format!(
        "{}:{}",
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let shimmed = output_timeout(
        Command::new("md5sum")
            .arg(&data)
            .env("PATH", &path)
            .env("EDGE_AGENT_SPOOL", &spool),
        60,
    );
    let plain = output_timeout(Command::new("md5sum").arg(&data), 60);
    assert!(
        shimmed.status.success(),
        "{}",
        String::from_utf8_lossy(&shimmed.stderr)
    );
    assert_eq!(shimmed.stdout, plain.stdout, "the real md5sum's output");
    let got = spooled(&spool);
    assert_eq!(got.len(), 1, "one summary for the one run");
    let s = &got[0];
    assert_eq!(s.facts.program, "md5sum");
    assert_eq!(s.coverage.began_late(), Some(false), "{:?}", s.coverage);
    let names: Vec<String> = s
        .syscalls
        .iter()
        .map(|c| c.key.id.name().unwrap_or("?").to_string())
        .collect();
    assert!(names.contains(&"read".to_string()), "{names:?}");
    assert!(
        names.iter().all(|n| n == "read" || n == "openat"),
        "only the directive's syscalls: {names:?}"
    );

    // Uploaded, the service stores it in the group.
    let up = output_timeout(
        Command::new(agent())
            .args([
                "upload",
                "--server",
                &url,
                "--once",
                "--now",
                "--ignore-power",
            ])
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .arg("--token-file")
            .arg(&token)
            .arg("--spool")
            .arg(&spool),
        60,
    );
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(std::time::Duration::from_secs(10)))
            // Straight to the service, whatever proxy the machine sets.
            .proxy(None)
            .build(),
    );
    let operator =
        lab::procs::operator_token(&edge_tests::binary("edge-service"), &db, GROUP).unwrap();
    let body = agent
        .get(&format!("{url}/v1/runs?program=md5sum"))
        .header("Authorization", format!("Bearer {operator}"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let runs = listed["runs"].as_array().expect("a list of runs");
    assert_eq!(runs.len(), 1, "{body}");
    assert_eq!(runs[0]["group"], GROUP);
    assert_eq!(
        runs[0]["id"],
        hex::encode(s.id),
        "the shimmed run's summary"
    );
}
