//! `edge-agent shim ...` and `device-id`: the shim folder's scripts and
//! directive, a shim's run (traced as `run` would, else untraced), the
//! device id.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_linux::device_id;
use agent_linux::{facts, relay, TraceOptions, Tracer, WaitPolicy};
use anyhow::Context;

use crate::args::*;
use crate::sink::Sink;
use crate::{collect_facts, parse_only, trace_and_save};

/// `shim install | remove | list | exec`.
pub(crate) fn shim(command: ShimCommand) -> anyhow::Result<ExitCode> {
    use agent_linux::shim::{self, ShimDirective};
    match command {
        ShimCommand::Install(a) => {
            let facts = collect_facts(&a.facts)?;
            if let Some(names) = &a.only {
                parse_only(names)?;
            }
            let directive = ShimDirective {
                match_text: a.pattern,
                only: a.only,
                facts,
                spool: a.spool,
                out_dir: a.out_dir,
            };
            let agent = std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .context("cannot tell where the edge-agent binary is")?;
            let dir = a.dir.path();
            for script in shim::install(&dir, &agent, &a.programs, &directive)? {
                println!("{}", script.display());
            }
            let dir = script_dir(&dir);
            eprintln!(
                "edge-agent: add this line to your shell profile (~/.profile) so the shims come first:\nexport PATH={}:\"$PATH\"",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        ShimCommand::Remove(a) => {
            for name in shim::remove(&a.dir.path(), &a.programs)? {
                println!("removed {name}");
            }
            Ok(ExitCode::SUCCESS)
        }
        ShimCommand::List(a) => {
            let dir = a.path();
            let path_var = std::env::var_os("PATH").unwrap_or_default();
            for name in shim::list(&dir)? {
                match shim::real_program(&dir, &name, &path_var) {
                    Some(real) => println!("{name}\t{}", real.display()),
                    None => println!("{name}\t(no real program on PATH)"),
                }
            }
            match ShimDirective::load(&dir) {
                Ok(d) => println!(
                    "match {:?}  only {}",
                    d.match_text,
                    d.only.map_or("all".to_string(), |o| o.join(","))
                ),
                Err(e) => println!("no directive: {e:#}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        ShimCommand::Exec(a) => Ok(shim_exec(a)),
    }
}

/// The shim folder as the scripts name it (absolute).
pub(crate) fn script_dir(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// `shim exec`: the command traced as `run` would trace it when its command
/// line matches the folder's directive, else (or when anything on the
/// agent's side fails before the program starts) the command itself. The
/// exit status is always the program's.
pub(crate) fn shim_exec(a: ShimExecArgs) -> ExitCode {
    use agent_linux::shim::{exec_plainly, ShimDirective};
    let untraced = |why: anyhow::Error| {
        eprintln!(
            "edge-agent shim: {why:#}; running {} untraced",
            a.name.to_string_lossy()
        );
        exec_plainly(&a.command, &a.name)
    };
    let directive = match ShimDirective::load(&a.dir) {
        Ok(d) => d,
        Err(e) => return untraced(e),
    };
    if !directive.matches(&a.name, a.command.get(1..).unwrap_or_default()) {
        return exec_plainly(&a.command, &a.name);
    }
    let prepared = (|| -> anyhow::Result<(TraceOptions, Sink)> {
        let only = directive.only.as_deref().map(parse_only).transpose()?;
        facts::build(&Default::default(), "", &directive.facts)?;
        let sink = Sink::open(None, directive.spool.clone(), directive.out_dir.clone())?;
        let opts = TraceOptions {
            command: a.command.clone(),
            only,
            facts: directive.facts.clone(),
            platform: None,
            wait: WaitPolicy::default(),
            window: None,
            device: DeviceIdFileArgs {
                device_id_file: None,
            }
            .load()?,
        };
        Ok((opts, sink))
    })();
    let (opts, sink) = match prepared {
        Ok(p) => p,
        Err(e) => return untraced(e),
    };
    let traced = |opts: &TraceOptions, sink: Sink| -> ExitCode {
        match trace_and_save(Tracer::Ptrace, opts, sink, false, true) {
            Ok(code) => code,
            Err(e) => untraced(e),
        }
    };
    if opts.only.is_some() {
        return match relay::run_in_tracer_process(|| traced(&opts, sink)) {
            Ok(code) => code,
            Err(e) => untraced(e),
        };
    }
    traced(&opts, sink)
}

/// `device-id [--reset]`: the id in hex, on stdout.
pub(crate) fn show_device_id(a: DeviceIdArgs) -> anyhow::Result<ExitCode> {
    let path = a.file.path();
    let id = if a.reset {
        device_id::reset(&path)?
    } else {
        device_id::load_or_create(&path)?
    };
    println!("{id}");
    Ok(ExitCode::SUCCESS)
}
