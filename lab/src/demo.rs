//! `edge-demo`: the research's first case study (TCP memory
//! misconfiguration) end to end on this machine.
//!
//! An HTTP server runs in one network namespace; several client namespaces
//! are joined to it by veth pairs on a bridge, and some of them get
//! `net.ipv4.tcp_rmem` set far too small (the sysctl is per namespace). Each
//! client fetches the same file with `wget` several times, each fetch traced
//! by `edge-agent run --spool`; the spools are uploaded with `edge-agent
//! upload` to a local `edge-service serve`, and `edge-service diagnose`
//! clusters the runs by duration and prints the rules. The same runs are
//! then diagnosed without labels (`--method rpca`), each client being a
//! device.
//!
//! Everything stays inside namespaces this command creates (addresses
//! 10.213.0.0/24, never routed anywhere) and on loopback; the namespaces are
//! deleted when the demo ends, fails or panics, and stale ones of an
//! interrupted demo are deleted by the next.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use agent_core::Summary;
use anyhow::{bail, Context};
use diagnose::analysis::{self, Options};
use diagnose::input;
use diagnose::label::{self, ClusterBy};
use diagnose::report;
use diagnose::rpca::{self, RpcaOptions};

use crate::http::{FileServer, FILE_PATH, HTTP_PORT};
use crate::netns::{Namespaces, SERVER_IP};
use crate::options::DemoOptions;
use crate::procs::{find_agent, find_service, is_root, Service};

/// The ingest token of the demo's local service.
const TOKEN: &str = "edge-demo-token-0123456789abcdef";

/// One traced fetch.
#[derive(Debug)]
struct Fetch {
    client: usize,
    seconds: f64,
}

/// Runs `edge-demo`.
pub fn demo(args: DemoOptions) -> anyhow::Result<ExitCode> {
    if !is_root() {
        bail!(
            "edge-demo needs root: it creates network namespaces (ip netns) and sets \
             net.ipv4.tcp_rmem inside them. Run it as root (e.g. with sudo)."
        );
    }
    if args.bad == 0 || args.bad >= args.clients {
        bail!("--bad must be at least 1 and fewer than --clients");
    }
    for tool in ["ip", "wget", "sysctl"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .map_or(true, |s| !s.success())
        {
            bail!("edge-demo needs `{tool}` (Debian: apt-get install iproute2 wget procps)");
        }
    }
    let started = Instant::now();
    let agent = find_agent(args.agent.as_deref())?;
    // Found before the namespaces are made, so a missing binary costs
    // nothing; --no-service diagnoses in this process without it.
    let service = if args.no_service {
        PathBuf::new()
    } else {
        find_service(args.service.as_deref())?
    };
    let temp;
    let work = match &args.work {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            dir.clone()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("edge-demo-")
                .tempdir()
                .context("cannot create a temporary folder")?;
            temp.path().to_path_buf()
        }
    };

    Namespaces::remove_stale();
    println!(
        "Setting up: 1 server and {} client network namespaces ({} with net.ipv4.tcp_rmem = \"{}\", the others \"{}\")",
        args.clients, args.bad, args.bad_rmem, args.good_rmem
    );
    let ns = Namespaces::create(args.clients)?;
    // The last `bad` clients are misconfigured.
    let first_bad = (args.clients - args.bad) as usize;
    for c in 0..args.clients as usize {
        let rmem = if c >= first_bad {
            &args.bad_rmem
        } else {
            &args.good_rmem
        };
        ns.set_rmem(c, rmem)?;
    }
    let size = args.size_mib as usize * 1024 * 1024;
    let _server = FileServer::start(&ns.server, size)?;
    if args.proactive {
        return crate::proactive::run(&args, &agent, &service, &work, &ns, started);
    }
    let url = format!("http://{SERVER_IP}:{HTTP_PORT}{FILE_PATH}");

    let spools: Vec<PathBuf> = (1..=args.clients)
        .map(|i| work.join(format!("spool-c{i}")))
        .collect();
    // A --work folder may hold an earlier demo's spools and database: start
    // afresh, or its runs would be diagnosed with these.
    for s in &spools {
        if s.exists() {
            std::fs::remove_dir_all(s).with_context(|| format!("cannot empty {}", s.display()))?;
        }
        std::fs::create_dir_all(s).with_context(|| format!("cannot create {}", s.display()))?;
    }
    for name in ["demo.db", "demo.db-wal", "demo.db-shm", "demo.db-journal"] {
        let path = work.join(name);
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    println!(
        "Fetching {url} ({} MiB) {} times in each client, traced by {} run --spool",
        args.size_mib,
        args.runs,
        agent.display()
    );
    let mut fetches: Vec<Fetch> = Vec::new();
    // Interleaved (round by round) so that any drift of the machine's load
    // touches every client alike.
    for round in 1..=args.runs {
        let mut line = format!("  round {round}:");
        for (c, client_ns) in ns.clients.iter().enumerate() {
            let t0 = Instant::now();
            let out = Command::new("ip")
                .args(["netns", "exec", client_ns])
                .arg(&agent)
                .arg("run")
                .arg("--spool")
                .arg(&spools[c])
                .args(["--", "wget", "-q", "-O", "/dev/null", &url])
                .stdin(Stdio::null())
                .output()
                .with_context(|| format!("cannot run {}", agent.display()))?;
            if !out.status.success() {
                bail!(
                    "traced wget in client c{} failed ({}): {}",
                    c + 1,
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let seconds = t0.elapsed().as_secs_f64();
            line.push_str(&format!(" c{}={seconds:.2}s", c + 1));
            fetches.push(Fetch { client: c, seconds });
        }
        println!("{line}");
    }

    // Which run came from which client: the spool of each client.
    // The runs are kept for the diagnosis without labels: an upload
    // empties the spools.
    let mut client_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut spooled: Vec<(Summary, String)> = Vec::new();
    for (c, s) in spools.iter().enumerate() {
        for f in input::summary_files(s)? {
            let summary = input::read_summary(&f)?;
            client_of.insert(summary.id.to_string(), c);
            spooled.push((summary, format!("c{}", c + 1)));
        }
    }
    let expected = (args.clients * args.runs) as usize;
    if client_of.len() != expected {
        bail!(
            "expected {expected} summaries in the spools, found {}",
            client_of.len()
        );
    }

    let labels_by_id: BTreeMap<String, String>;
    if args.no_service {
        println!("\nDiagnosing the spooled summaries directly (--no-service)\n");
        let (runs, bad) = input::read_all(&spools)?;
        if let Some(b) = bad.first() {
            bail!("{b}");
        }
        let labelling = label::by_cluster(&runs, ClusterBy::Duration)?;
        let diagnosis = analysis::diagnose(&runs, labelling, &Options::default())?;
        print!("{}", report::text(&diagnosis));
        if let Some(path) = &args.html {
            std::fs::write(path, report::html(&diagnosis))
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        let json = report::json(&diagnosis);
        labels_by_id = run_labels(&json);
        print_clients(&args, &fetches, &client_of, &labels_by_id);
        if args.json {
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
    } else {
        let db = work.join("demo.db");
        let tokens = work.join("tokens");
        let token_file = work.join("token");
        std::fs::write(&tokens, format!("demo {TOKEN}\n"))?;
        std::fs::write(&token_file, format!("{TOKEN}\n"))?;
        // A free loopback port for the service.
        let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        println!("\nStarting {} serve on {addr}", service.display());
        let serve = Service::start(&service, addr, &db, &tokens, &[], &work.join("serve.log"))?;
        println!(
            "Uploading each client's spool with {} upload --now --once",
            agent.display()
        );
        for s in &spools {
            let out = Command::new(&agent)
                .arg("upload")
                .arg("--server")
                .arg(format!("http://{addr}"))
                .arg("--token-file")
                .arg(&token_file)
                .arg("--spool")
                .arg(s)
                .args(["--now", "--once", "--no-spread", "--ignore-power"])
                .stdin(Stdio::null())
                .output()
                .with_context(|| format!("cannot run {} upload", agent.display()))?;
            if !out.status.success() {
                bail!(
                    "upload of {} failed ({}): {}",
                    s.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        println!(
            "Diagnosing: {} diagnose --db {} --cluster duration\n",
            service.display(),
            db.display()
        );
        let mut diag = Command::new(&service);
        diag.arg("diagnose")
            .arg("--db")
            .arg(&db)
            .args(["--cluster", "duration", "--json"]);
        if let Some(path) = &args.html {
            diag.arg("--html").arg(path);
        }
        let out = diag.stdin(Stdio::null()).output()?;
        if !out.status.success() {
            bail!(
                "edge-service diagnose failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .context("edge-service diagnose --json printed something that is not JSON")?;
        // The readable report, from the same store.
        let text = Command::new(&service)
            .arg("diagnose")
            .arg("--db")
            .arg(&db)
            .args(["--cluster", "duration"])
            .stdin(Stdio::null())
            .output()?;
        print!("{}", String::from_utf8_lossy(&text.stdout));
        drop(serve);
        labels_by_id = run_labels(&json);
        print_clients(&args, &fetches, &client_of, &labels_by_id);
        if args.json {
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
    }
    print_rpca(spooled)?;
    if labels_by_id.len() != expected {
        bail!(
            "the diagnosis labelled {} runs, {expected} were made",
            labels_by_id.len()
        );
    }
    if let Some(dir) = &args.work {
        println!("Spools, database and logs kept in {}", dir.display());
    }
    drop(ns);
    println!("Demo finished in {:.1} s", started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// The same runs diagnosed without labels (`diagnose --method rpca`), each
/// run's device being its client (the spool it was written to, read before
/// the upload emptied it): the syscalls anomalous in the misconfigured
/// clients' runs.
fn print_rpca(spooled: Vec<(Summary, String)>) -> anyhow::Result<()> {
    let (runs, devices): (Vec<Summary>, Vec<String>) = spooled.into_iter().unzip();
    let d = rpca::analyse(
        &runs,
        &devices,
        "the clients (the spool each run was written to)",
        &RpcaOptions::default(),
    )?;
    println!("Without labels (edge-service diagnose --method rpca, clients as devices):\n");
    print!("{}", rpca::report::text(&d));
    println!();
    Ok(())
}

/// Run id -> label from a JSON report.
fn run_labels(json: &serde_json::Value) -> BTreeMap<String, String> {
    json["labels"]["runs"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Per client: its tcp_rmem, mean fetch time, and how its runs were labelled.
fn print_clients(
    args: &DemoOptions,
    fetches: &[Fetch],
    client_of: &BTreeMap<String, usize>,
    labels: &BTreeMap<String, String>,
) {
    let first_bad = (args.clients - args.bad) as usize;
    println!(
        "\nClients (the diagnosis did not see this table: no client or rmem fact is recorded):"
    );
    println!("  client  net.ipv4.tcp_rmem      mean fetch (traced)  runs labelled");
    for c in 0..args.clients as usize {
        let times: Vec<f64> = fetches
            .iter()
            .filter(|f| f.client == c)
            .map(|f| f.seconds)
            .collect();
        let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
        let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
        for (id, client) in client_of {
            if *client == c {
                *tally
                    .entry(labels.get(id).map_or("(none)", String::as_str))
                    .or_default() += 1;
            }
        }
        let tally: Vec<String> = tally.iter().map(|(l, n)| format!("{n} {l}")).collect();
        let rmem = if c >= first_bad {
            &args.bad_rmem
        } else {
            &args.good_rmem
        };
        println!(
            "  c{:<6} {:<22} {:>8.2} s           {}",
            c + 1,
            format!("\"{rmem}\""),
            mean,
            tally.join(", ")
        );
    }
    println!();
}
