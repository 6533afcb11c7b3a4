//! `diagnose` and `demo` without the service binary, for development:
//! `cargo run -p diagnose --example standalone -- diagnose DIR...` or
//! `... -- demo --no-service --agent target/debug/edge-agent`. The real
//! commands are `edge-service diagnose` and `edge-service demo`.

use std::path::Path;
use std::process::ExitCode;

use agent_core::Summary;
use clap::Parser;
use diagnose::cli::{DemoArgs, DiagnoseArgs, RunFilter, SummarySource};

#[derive(Parser, Debug)]
enum Command {
    /// Diagnose summary files (no store).
    Diagnose(DiagnoseArgs),
    /// The demo.
    Demo(DemoArgs),
}

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

fn main() -> ExitCode {
    let result = match Command::parse() {
        Command::Diagnose(args) => diagnose::cli::run(args, &NoStore),
        Command::Demo(args) => diagnose::cli::demo(args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}
