//! `diagnose` without the service binary, for development:
//! `cargo run -p diagnose --example standalone -- diagnose [--json] DIR...`
//! (summary files and folders; labels by clustering durations, the rules
//! method). The real command, with every option, is `edge-service diagnose`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_core::Summary;
use diagnose::input::{RunFilter, SummarySource};
use diagnose::request::DiagnoseRequest;

/// No store here: only files.
struct NoStore;

impl SummarySource for NoStore {
    fn load(&self, db: &Path, _: &RunFilter) -> anyhow::Result<Vec<Summary>> {
        anyhow::bail!(
            "this development tool reads no store ({}); give summary files",
            db.display()
        )
    }
}

const USAGE: &str = "usage: standalone diagnose [--json] DIR...";

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|a| a != "diagnose") {
        eprintln!("{USAGE}");
        return ExitCode::FAILURE;
    }
    let (mut json, mut inputs) = (false, Vec::new());
    for a in args {
        match a.to_str() {
            Some("--json") => json = true,
            Some(flag) if flag.starts_with('-') => {
                eprintln!("unknown option {flag}\n{USAGE}");
                return ExitCode::FAILURE;
            }
            _ => inputs.push(PathBuf::from(a)),
        }
    }
    let request = DiagnoseRequest {
        inputs,
        ..DiagnoseRequest::default()
    };
    match request.run(&NoStore, &mut |note| eprintln!("diagnose: {note}")) {
        Ok(report) if json => {
            println!("{:#}", report.json());
            ExitCode::SUCCESS
        }
        Ok(report) => {
            print!("{}", report.text());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
