//! The proactive loop with apps as its devices (issue 32: "the proactive
//! loop's light mode can use this backend where the agent runs inside the
//! app"): six app processes, each its own device (its own spool and device
//! id), load `libagent_android.so` and run their "sync" operation through
//! `edge_agent_run_begin`/`run_end` (tests/tests/app_proactive/app_device.c);
//! two are ten times slower. A real `edge-service serve --auto` clusters
//! their light records, issues per-device directives by itself, the apps
//! fetch them (`edge_agent_fetch_directives`) and their next runs are
//! observed in full in-process, uploaded with `directive=<id>`, and the
//! service's report names the slow devices' runs bad — no operator command
//! after `serve --auto` starts.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GROUP: &str = "apps";
const TOKEN: &str = "apps-token-5d1e2f3a4b";
const DEVICES: usize = 6;
/// Devices 5 and 6 (indexes 4, 5) are the slow ones.
fn slow(device: usize) -> bool {
    device >= 4
}

struct Service {
    child: Child,
    url: String,
    operator: String,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_service(dir: &Path) -> Service {
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{GROUP} {TOKEN}\n")).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = dir.join("edge.db");
    let binary = edge_tests::binary("edge-service");
    let child = Command::new(&binary)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--db"])
        .arg(&db)
        .arg("--tokens")
        .arg(&tokens)
        // The service test's fast settings (service/tests/proactive.rs),
        // but a cluster stable for 5 ticks: the devices upload one after
        // another, and with 2 the detector acted once device 4's slow runs
        // were in, before device 5's (1.2 s of runs later), directing one
        // slow device only (seen in a fresh check).
        .args([
            "--auto",
            "--auto-every",
            "1s",
            "--auto-stable",
            "5",
            "--auto-devices",
            "2",
            "--auto-runs",
            "2",
            "--auto-min-runs",
            "3",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start edge-service");
    let url = format!("http://127.0.0.1:{port}");
    let mut service = Service {
        child,
        url,
        operator: String::new(),
    };
    wait_for("edge-service to answer", Duration::from_secs(30), || {
        ureq::get(&format!("{}/healthz", service.url))
            .call()
            .ok()
            .map(|_| ())
    });
    service.operator = lab::procs::operator_token(&binary, &db, GROUP).unwrap();
    service
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn compile_device_program(dir: &Path) -> PathBuf {
    let root = edge_tests::workspace_root();
    let exe = dir.join("app_device");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-O0", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("agent-android/include"))
        .arg(root.join("tests/tests/app_proactive/app_device.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-ldl")
        .status()
        .expect("run cc");
    assert!(status.success(), "compiling app_device.c failed");
    exe
}

/// Runs device `d`'s app: fetches its directives, `runs` runs of "sync",
/// uploads. Returns how many directives it had.
fn run_app(exe: &Path, library: &Path, work: &Path, url: &str, d: usize, runs: u32) -> u32 {
    let out = Command::new(exe)
        .arg(library)
        .arg(work.join(format!("device{d}/spool")))
        .arg(url)
        .arg(work.join("token"))
        .arg(runs.to_string())
        .arg(if slow(d) { "400" } else { "40" })
        .arg(work.join("data"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "device {d}: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("directives: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("device {d}: no directives line: {stdout}"))
}

fn device_hex(work: &Path, d: usize) -> String {
    std::fs::read_to_string(work.join(format!("device{d}/device-id")))
        .unwrap()
        .trim()
        .to_string()
}

fn get(service: &Service, path: &str) -> serde_json::Value {
    let body = ureq::get(&format!("{}{path}", service.url))
        .header("Authorization", &format!("Bearer {}", service.operator))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    serde_json::from_str(&body).unwrap()
}

#[test]
fn apps_take_part_in_the_proactive_loop() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let library = edge_tests::shared_library("libagent_android.so");
    let exe = compile_device_program(work);
    std::fs::write(work.join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(work.join("data"), vec![5u8; 8 * 4096]).unwrap();
    let service = start_service(work);

    // Light runs: three per device, each uploaded; nothing is directed yet.
    for d in 0..DEVICES {
        assert_eq!(run_app(&exe, &library, work, &service.url, d, 3), 0);
    }
    let light = get(&service, "/v1/runs?kind=light");
    assert_eq!(
        light["runs"].as_array().unwrap().len(),
        3 * DEVICES,
        "{light}"
    );

    // The detector directs two slow and two good devices by itself; each
    // app learns it at its next fetch.
    let directed: Vec<usize> =
        wait_for("the detector's directives", Duration::from_secs(60), || {
            let with: Vec<usize> = (0..DEVICES)
                .filter(|&d| run_app(&exe, &library, work, &service.url, d, 0) > 0)
                .collect();
            (with.len() == 4).then_some(with)
        });
    assert!(
        directed.contains(&4) && directed.contains(&5),
        "{directed:?}"
    );

    // Their next two runs are observed in full, in-process, and uploaded.
    for &d in &directed {
        assert_eq!(run_app(&exe, &library, work, &service.url, d, 2), 1);
    }
    let full = get(&service, "/v1/runs?kind=full");
    let full = full["runs"].as_array().unwrap().clone();
    assert_eq!(full.len(), 8, "{full:?}");

    let report = wait_for("the report", Duration::from_secs(60), || {
        let list = get(&service, "/v1/reports");
        let first = list["reports"].as_array()?.first()?.clone();
        Some(get(
            &service,
            &format!("/v1/reports/{}", first["id"].as_str().unwrap()),
        ))
    });
    assert_eq!(report["status"], "diagnosed", "{}", report["text"]);
    assert_eq!(report["trigger"], "slow");
    assert_eq!(report["program"], "sync");
    assert_eq!(report["json"]["runs"], 8, "{}", report["text"]);
    let mut used: Vec<String> = report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device"].as_str().unwrap().to_string())
        .collect();
    used.sort();
    let mut expected: Vec<String> = directed.iter().map(|&d| device_hex(work, d)).collect();
    expected.sort();
    assert_eq!(used, expected);
    // The slow devices' runs are the bad ones, and the first rule tells
    // them apart by what the in-process backend saw.
    let rules = report["json"]["rules"].as_array().unwrap();
    assert_eq!(rules[0]["accuracy"], 1.0, "{}", report["text"]);
    let labels = report["json"]["labels"]["runs"].as_object().unwrap();
    assert_eq!(labels.len(), 8);
    let bad: usize = labels.values().filter(|c| *c == "bad").count();
    assert_eq!(bad, 4, "{}", report["text"]);
    println!("{}", report["text"].as_str().unwrap_or(""));
}
