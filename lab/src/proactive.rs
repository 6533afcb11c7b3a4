//! `edge-demo --proactive`: the research's proactive loop on the
//! demo's network namespaces. Every client is watched by an `edge-agent
//! watch --light` of its own (a device id each; light records only, no
//! ptrace), the spools are uploaded after each round as a device's
//! uploader would, and `edge-service serve --auto` does the rest by itself:
//! its detector finds the slow cluster among the light runs, directs full
//! tracing on a few clients of each cluster, and diagnoses their runs into
//! a stored report. The demo only fetches and watches; it issues no
//! command to the service, and reports the time from the first light run
//! to the stored report.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::http::{FILE_PATH, HTTP_PORT};
use crate::netns::{Namespaces, SERVER_IP};
use crate::options::DemoOptions;
use crate::procs::Service;

/// The ingest token of the demo's local service.
const TOKEN: &str = "edge-demo-token-0123456789abcdef";
/// Rounds of fetches at most before the demo gives up on a report.
const MAX_ROUNDS: u32 = 20;
/// The detector's settings: quick, for a demo of about a minute.
const AUTO: &[&str] = &[
    "--auto",
    "--auto-every",
    "1s",
    "--auto-stable",
    "2",
    "--auto-devices",
    "2",
    "--auto-runs",
    "2",
    "--auto-min-runs",
    "3",
    "--auto-window",
    "10m",
];

/// `GET path` on the local service with `token` (the devices' for
/// directives, the demo operator's API token for fleet data): the JSON
/// body.
fn api_get(addr: SocketAddr, path: &str, token: &str) -> anyhow::Result<Value> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .with_context(|| format!("cannot connect to the service at {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .with_context(|| format!("GET {path}: no HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or_default());
    }
    serde_json::from_str(body).with_context(|| format!("GET {path}: the body is not JSON"))
}

/// One watched client: its watcher, spool and device id.
struct Client {
    _watch: Service,
    spool: PathBuf,
    device: String,
    log: PathBuf,
    /// The directive it was given, once seen.
    directed: Option<String>,
    /// Whether a directive of it stood after the last round (its next
    /// fetch is traced fully).
    standing: bool,
    /// Fetch times, s, per round.
    seconds: Vec<f64>,
}

/// Waits until `log` holds `what` (the watcher's start line).
fn wait_for_line(log: &Path, what: &str, service: &mut Service) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(what) {
            return Ok(());
        }
        if let Ok(Some(status)) = service.0.try_wait() {
            bail!("edge-agent watch exited ({status}): {text}");
        }
        if Instant::now() > deadline {
            bail!("edge-agent watch did not start within 30 s: {text}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs the proactive loop; `ns` holds the clients (the last `args.bad`
/// misconfigured) and the file server already runs.
pub fn run(
    args: &DemoOptions,
    agent: &Path,
    service: &Path,
    work: &Path,
    ns: &Namespaces,
    started: Instant,
) -> anyhow::Result<ExitCode> {
    let db = work.join("proactive.db");
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let path = PathBuf::from(format!("{}{suffix}", db.display()));
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    let tokens = work.join("tokens");
    let token_file = work.join("token");
    std::fs::write(&tokens, format!("demo {TOKEN}\n"))?;
    std::fs::write(&token_file, format!("{TOKEN}\n"))?;
    let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let server_url = format!("http://{addr}");
    println!(
        "Starting {} serve --auto on {addr} (the detector looks every second)",
        service.display()
    );
    let serve_log = work.join("serve.log");
    let serve = Service::start(service, addr, &db, &tokens, AUTO, &serve_log)?;
    // Fleet data is an operator's: the device token only uploads.
    let operator = crate::procs::operator_token(service, &db, "demo")?;

    println!(
        "Watching every client with {} watch --light (one device id each, directives read every second)",
        agent.display()
    );
    let mut clients = Vec::new();
    for c in 1..=args.clients as usize {
        let spool = work.join(format!("light-c{c}"));
        if spool.exists() {
            std::fs::remove_dir_all(&spool)
                .with_context(|| format!("cannot empty {}", spool.display()))?;
        }
        std::fs::create_dir_all(&spool)?;
        let id_file = work.join(format!("device-c{c}"));
        let log = work.join(format!("watch-c{c}.log"));
        let child = Command::new(agent)
            .args(["watch", "--light", "--match", &marker(c), "--spool"])
            .arg(&spool)
            .arg("--device-id-file")
            .arg(&id_file)
            .args(["--server", &server_url, "--token-file"])
            .arg(&token_file)
            .args(["--directives-every", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("cannot start {} watch", agent.display()))?;
        let mut watch = Service(child);
        wait_for_line(&log, "watching for", &mut watch)?;
        let device = std::fs::read_to_string(&id_file)
            .with_context(|| format!("cannot read {}", id_file.display()))?
            .trim()
            .to_string();
        clients.push(Client {
            _watch: watch,
            spool,
            device,
            log,
            directed: None,
            standing: false,
            seconds: Vec::new(),
        });
    }

    let first_bad = (args.clients - args.bad) as usize;
    let url = format!("http://{SERVER_IP}:{HTTP_PORT}{FILE_PATH}");
    println!(
        "Fetching {url} ({} MiB) in each client, round after round, untraced; spools uploaded after each round\n",
        args.size_mib
    );
    let mut report: Option<Value> = None;
    for round in 1..=MAX_ROUNDS {
        let mut line = format!("  round {round:>2}:");
        for (c, client) in clients.iter_mut().enumerate() {
            let t0 = Instant::now();
            let out = Command::new("ip")
                .args(["netns", "exec", &ns.clients[c]])
                .args(["wget", "-q", "-O", "/dev/null"])
                .arg(format!("{url}?{}", marker(c + 1)))
                .stdin(Stdio::null())
                .output()
                .context("cannot run wget")?;
            if !out.status.success() {
                bail!(
                    "wget in client c{} failed ({}): {}",
                    c + 1,
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let secs = t0.elapsed().as_secs_f64();
            client.seconds.push(secs);
            let traced = if client.standing { "*" } else { "" };
            line.push_str(&format!(" c{}={secs:.2}s{traced}", c + 1));
        }
        println!("{line}");
        upload(agent, &server_url, &token_file, &clients)?;
        for (c, client) in clients.iter_mut().enumerate() {
            // What the device itself fetches.
            let d = api_get(
                addr,
                &format!("/v1/directives?device={}", client.device),
                TOKEN,
            )?;
            let first = d["device_directives"].as_array().and_then(|l| l.first());
            client.standing = first.is_some();
            if let (Some(first), None) = (first, &client.directed) {
                let id = first["id"].as_str().unwrap_or_default().to_string();
                println!(
                    "           the detector asks device {} (c{}) to trace its next {} run(s) of {} fully (directive {id}; * = fetched while it stands)",
                    short(&client.device),
                    c + 1,
                    first["runs"],
                    first["program"].as_str().unwrap_or("any program")
                );
                client.directed = Some(id);
            }
        }
        let listed = api_get(addr, "/v1/reports", &operator)?;
        if let Some(id) = listed["reports"][0]["id"].as_str() {
            report = Some(api_get(addr, &format!("/v1/reports/{id}"), &operator)?);
            break;
        }
    }
    let Some(report) = report else {
        bail!(
            "no report after {MAX_ROUNDS} rounds; the detector's log: {}",
            serve_log.display()
        );
    };
    let light = api_get(addr, "/v1/runs?kind=light&limit=1", &operator)?;
    let first_light = light["runs"][0]["start_unix_ns"].as_u64().unwrap_or(0);
    let created = report["created_unix_ns"].as_u64().unwrap_or(0);
    let loop_secs = created.saturating_sub(first_light) as f64 / 1e9;

    println!(
        "\nReport {} (trigger: {}, status: {}), stored by the detector:\n",
        report["id"].as_str().unwrap_or("?"),
        report["trigger"].as_str().unwrap_or("?"),
        report["status"].as_str().unwrap_or("?")
    );
    print!("{}", report["text"].as_str().unwrap_or_default());
    println!(
        "\nClients (the detector did not see this table: no client or rmem fact is recorded):"
    );
    println!("  client  net.ipv4.tcp_rmem      device    mean fetch  picked as  full runs");
    let devices = report["devices"].as_array().cloned().unwrap_or_default();
    let mut wrong = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        let bad = c >= first_bad;
        let picked = devices
            .iter()
            .find(|d| d["device"] == client.device.as_str());
        let cluster = picked.and_then(|d| d["cluster"].as_str()).unwrap_or("-");
        let runs = picked.map_or(0, |d| d["runs"].as_u64().unwrap_or(0));
        if (cluster == "slow" && !bad) || (cluster == "good" && bad) {
            wrong.push(format!("c{}", c + 1));
        }
        let mean = client.seconds.iter().sum::<f64>() / client.seconds.len().max(1) as f64;
        let rmem = if bad { &args.bad_rmem } else { &args.good_rmem };
        println!(
            "  c{:<6} {:<22} {}  {mean:>7.2} s  {cluster:<9}  {runs}",
            c + 1,
            format!("\"{rmem}\""),
            short(&client.device)
        );
    }
    println!(
        "\nProactive loop: {:.1} s from the first light run to the stored report, no operator command after serve --auto started",
        loop_secs
    );
    println!(
        "Logs: the detector's decisions in {}, the watchers' in {}",
        serve_log.display(),
        clients
            .first()
            .map(|c| c.log.display().to_string())
            .unwrap_or_default()
    );
    if report["status"] != "diagnosed" {
        bail!(
            "the investigation failed: {}",
            report["headline"].as_str().unwrap_or_default()
        );
    }
    if !wrong.is_empty() {
        bail!(
            "the detector picked {} from the wrong cluster",
            wrong.join(", ")
        );
    }
    let accuracy = report["json"]["rules"][0]["accuracy"]
        .as_f64()
        .unwrap_or(0.0);
    if accuracy < 1.0 {
        bail!("the report's first rule has accuracy {accuracy}, not 1.0");
    }
    drop(serve);
    println!("Demo finished in {:.1} s", started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// The first 8 hex digits of a device id, for the tables.
fn short(device: &str) -> &str {
    device.get(..8).unwrap_or(device)
}

/// The text in client `c`'s fetch command line its watcher matches.
fn marker(c: usize) -> String {
    format!("client={c:02}")
}

/// Uploads every client's spool once, as each device's uploader would.
fn upload(agent: &Path, server: &str, token_file: &Path, clients: &[Client]) -> anyhow::Result<()> {
    for client in clients {
        let out = Command::new(agent)
            .args(["upload", "--server", server, "--token-file"])
            .arg(token_file)
            .arg("--spool")
            .arg(&client.spool)
            .args(["--now", "--once", "--no-spread", "--ignore-power"])
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {} upload", agent.display()))?;
        if !out.status.success() {
            bail!(
                "upload of {} failed ({}): {}",
                client.spool.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}
