//! `edge-agent`: trace a program's syscalls into a summary of at most 2 KiB
//! (`run`, `attach`, `watch`), look at summaries (`show`), send the
//! spooled ones to the service (`upload`), and show or replace the device
//! id every summary carries (`device-id`). See docs/edge-agent.md.

mod args;
mod shim_cmd;
mod sink;

use std::io::Write;
use std::process::ExitCode;

use agent_core::{Summary, SyscallId};
use agent_linux::{ebpf, facts, relay, signals, AttachOptions, TraceOptions, Tracer, WatchOptions};
use anyhow::{bail, Context};
use clap::Parser;

use args::*;
use shim_cmd::{shim, show_device_id};
use sink::{encode, Sink};

fn main() -> ExitCode {
    let cli = Cli::parse();
    exit_code(dispatch(cli.command))
}

/// A command's exit: its own code, or 1 after its error on one line.
fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("edge-agent: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(a) => run(a),
        Command::Attach(a) => attach(a),
        Command::Watch(a) => watch(a),
        Command::Show(a) => show(a),
        #[cfg(feature = "upload")]
        Command::Upload(a) => upload(a),
        Command::DeviceId(a) => show_device_id(a),
        Command::Shim(c) => shim(c),
    }
}

/// `edge-agent upload`: the session its arguments describe; the exit status
/// says its outcome (0 done, 1 incomplete).
#[cfg(feature = "upload")]
fn upload(args: device_args::UploadArgs) -> anyhow::Result<ExitCode> {
    let outcome = uploader::session::run(args.into_options()?)?;
    Ok(ExitCode::from(outcome.exit_status()))
}

fn collect_facts(args: &FactArgs) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(file) = &args.facts_file {
        out.extend(facts::read_facts_file(file)?);
    }
    for f in &args.facts {
        out.push(facts::parse_fact(f)?);
    }
    // Validate now: a bad fact is an error before anything runs.
    facts::build(&Default::default(), "", &out)?;
    Ok(out)
}

/// The `--only` names (repeated options and comma-separated lists alike),
/// checked by the rule the service's directives share
/// (`agent_core::validate_only_list`).
fn parse_only(names: &[String]) -> anyhow::Result<Vec<SyscallId>> {
    let list = names.join(",");
    agent_core::validate_only_list(&list).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(agent_core::only_list_ids(&list).collect())
}

/// With `--stats`: a summary's encoded size, per window.
fn print_size(summary: &Summary) {
    let mut copy = summary.clone();
    match encode(&mut copy) {
        Ok(bytes) => eprintln!(
            "edge-agent stats: window={} events={} encoded_bytes={}",
            summary.run.window,
            summary.run.events,
            bytes.len()
        ),
        Err(e) => eprintln!("edge-agent stats: window={}: {e:#}", summary.run.window),
    }
}

fn want_stats(flag: bool) -> bool {
    flag || std::env::var_os("EDGE_AGENT_STATS").is_some_and(|v| !v.is_empty() && v != "0")
}

fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let facts = collect_facts(&a.facts)?;
    let only = a.only.as_deref().map(parse_only).transpose()?;
    let device = a.device.load()?;
    let sink = Sink::open(a.output.out, a.output.spool, None)?;
    let stats = want_stats(a.stats);
    let opts = TraceOptions {
        command: a.command,
        only,
        facts,
        platform: None,
        wait: a.wait.policy(),
        window: a.window.run(),
        device,
    };
    let needs_ptrace = opts
        .only
        .as_ref()
        .map(|_| "--only needs ptrace's seccomp prefilter");
    if needs_ptrace.is_none() && !matches!(a.backend.choice(), ebpf::Choice::Ptrace) {
        // A stop asked while the BPF programs load (tens of ms; more in a
        // debug build) detaches as soon as the command runs, rather than
        // killing the agent with the default action.
        signals::install().context("cannot install signal handlers")?;
    }
    let command = opts.command.first().cloned().unwrap_or_default();
    let tracer = Tracer::choose_for_command(a.backend.choice(), needs_ptrace, &command)?;
    if opts.only.is_some() && matches!(tracer, Tracer::Ptrace) {
        // A seccomp-filtered program needs its tracer until it ends: the
        // tracer runs in a process of its own, out of reach of a `kill -9`
        // of the PID the user sees (relay.rs).
        return relay::run_in_tracer_process(|| {
            exit_code(trace_and_save(tracer, &opts, sink, stats, false))
        });
    }
    trace_and_save(tracer, &opts, sink, stats, false)
}

/// Traces the command on `tracer`, saves its summaries, and ends as the
/// program ended. With `plain_on_failure` (a shim), a tracer that cannot
/// start (ptrace refused, no seccomp) runs the command untraced instead of
/// failing.
fn trace_and_save(
    tracer: Tracer,
    opts: &TraceOptions,
    sink: Sink,
    stats: bool,
    plain_on_failure: bool,
) -> anyhow::Result<ExitCode> {
    signals::install().context("cannot install signal handlers")?;
    let mut traced = match tracer.start(opts) {
        Ok(t) => t,
        Err(e) if plain_on_failure => {
            eprintln!("edge-agent shim: {e:#}; running the program untraced");
            let name = opts.command.first().cloned().unwrap_or_default();
            return Ok(agent_linux::shim::exec_plainly(&opts.command, &name));
        }
        Err(e) => return Err(e),
    };
    let mut summary = traced.trace(&mut |mut w| save_run_summary(&sink, stats, &mut w, false))?;
    if stats {
        eprintln!("{}", traced.stats());
    }
    save_run_summary(&sink, stats, &mut summary, true);
    if signals::stop_requested().is_some() {
        if traced.is_serving() {
            eprintln!(
                "edge-agent: stopped recording; serving the program's --only syscalls until it ends (without a tracer they would fail)"
            );
        } else {
            eprintln!("edge-agent: detached; the program runs on");
        }
    }
    let status = traced.wait()?;
    Ok(relay::end_as(status))
}

/// Saves one of a run's summaries (`last`: the run's end, else a window).
/// The program's status always wins: a summary that cannot be saved is one
/// line on stderr, not the agent's exit status.
fn save_run_summary(sink: &Sink, stats: bool, summary: &mut Summary, last: bool) {
    if stats {
        print_size(summary);
    }
    if let Err(e) = sink.put(summary, last) {
        eprintln!("edge-agent: the summary was not saved: {e:#}");
    }
}

fn attach(a: AttachArgs) -> anyhow::Result<ExitCode> {
    let facts = collect_facts(&a.facts)?;
    let duration = match a.duration {
        Some(s) if !(s > 0.0 && s.is_finite()) => bail!("--for needs a positive number of seconds"),
        Some(s) => Some(std::time::Duration::from_secs_f64(s)),
        None => None,
    };
    let device = a.device.load()?;
    let sink = Sink::open(a.output.out, a.output.spool, None)?;
    signals::install().context("cannot install signal handlers")?;
    let stats = want_stats(a.stats);
    let opts = AttachOptions {
        pid: a.pid,
        facts,
        platform: None,
        duration,
        wait: a.wait.policy(),
        window: a.window.live(),
        device,
    };
    let mut failures = 0u32;
    let mut on_window = |mut w: Summary| {
        if stats {
            print_size(&w);
        }
        if let Err(e) = sink.put(&mut w, false) {
            failures += 1;
            eprintln!("edge-agent: window {} was not saved: {e:#}", w.run.window);
        }
    };
    // The target's own errors first: one line, with no backend chosen.
    agent_linux::trace::check_attach_target(opts.pid)?;
    let tracer = Tracer::choose(a.backend.choice(), None)?;
    let (mut summary, counted) = tracer.attach(&opts, &mut on_window)?;
    if stats {
        print_size(&summary);
        eprintln!("{counted}");
    }
    sink.put(&mut summary, true)?;
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn watch(a: WatchArgs) -> anyhow::Result<ExitCode> {
    let facts = collect_facts(&a.facts)?;
    let device = a.device.load()?;
    let sink = Sink::open(None, a.spool, a.out_dir)?;
    #[cfg(feature = "upload")]
    let mut changes = directive_changes(&a.directives, &a.pattern, &device)?;
    #[cfg(not(feature = "upload"))]
    let mut changes = agent_linux::directives::Update::default;
    signals::install().context("cannot install signal handlers")?;
    // Summaries are stored by a thread of their own, through a bounded
    // queue: a storm of runs sheds (and counts) what the store cannot keep
    // up with, rather than growing the agent (`store_queue`).
    let mut queue = agent_linux::store_queue::StoreQueue::start(move |s| {
        let path = sink.put(s, true)?;
        if s.kind == agent_core::Kind::Light {
            eprintln!(
                "edge-agent: {} (light record: {:?}, {} ms) -> {}",
                s.facts.program,
                s.run.exit,
                s.run.duration_ns / 1_000_000,
                path.display()
            );
        } else {
            eprintln!(
                "edge-agent: {} ({} syscalls) -> {}",
                s.facts.program,
                s.run.events,
                path.display()
            );
        }
        Ok(())
    })
    .context("cannot start the thread that stores summaries")?;
    let mut on_summary = |s: Summary| queue.put(s);
    let watched = agent_linux::watch_steered(
        &WatchOptions {
            pattern: a.pattern,
            facts,
            wait: a.wait.policy(),
            window: a.window.live(),
            device,
            light: a.light,
            backend: a.backend.choice(),
            discover: match a.discover {
                DiscoverName::Auto => agent_linux::Discover::Auto,
                DiscoverName::Connector => agent_linux::Discover::Connector,
                DiscoverName::Scan => agent_linux::Discover::Scan,
            },
            ..Default::default()
        },
        &mut changes,
        &mut on_summary,
    );
    let stored = queue.finish()?;
    watched?;
    Ok(if stored.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// With `--server`, the changes the service's directives make (the text
/// to match, the per-device directives; `agent_linux::steering`); without,
/// none.
#[cfg(feature = "upload")]
fn directive_changes(
    a: &DirectiveArgs,
    pattern: &str,
    device: &agent_linux::device_id::DeviceId,
) -> anyhow::Result<Box<dyn FnMut() -> agent_linux::directives::Update>> {
    let Some(server) = &a.server else {
        return Ok(Box::new(agent_linux::directives::Update::default));
    };
    let endpoint = uploader::session::server_endpoint(
        server,
        a.token_file.as_deref(),
        a.ca.clone(),
        &a.pins,
        std::time::Duration::from_secs(60),
    )?;
    let shims = match &a.shim_dir {
        Some(dir) => Some(agent_linux::steering::Shims {
            dir: shim_cmd::script_dir(dir),
            agent: std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .context("cannot tell where the edge-agent binary is")?,
        }),
        None => None,
    };
    agent_linux::steering::start(agent_linux::steering::Steering {
        client: uploader::transport::Client::new(endpoint)?,
        every: std::time::Duration::from_secs(a.directives_every),
        device: *device,
        pattern: pattern.to_string(),
        shims,
    })
}

fn show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    for (i, path) in a.files.iter().enumerate() {
        // Reads at most the summary cap (plus one byte to tell a bigger
        // file), whatever the path points to.
        let summary = summary_view::file::read_summary(path)?;
        if a.json {
            writeln!(out, "{}", summary_view::to_json(&summary))?;
        } else {
            if a.files.len() > 1 {
                if i > 0 {
                    writeln!(out)?;
                }
                writeln!(out, "== {}", path.display())?;
            }
            write!(out, "{}", summary_view::table(&summary))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
