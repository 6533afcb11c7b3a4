//! `diagnose` without the service binary, for development:
//! `cargo run -p diagnose --example standalone -- diagnose DIR...`. The real
//! command is `edge-service diagnose`.

use std::path::Path;
use std::process::ExitCode;

use agent_core::Summary;
use clap::Parser;
use diagnose::cli::DiagnoseArgs;
use diagnose::input::{RunFilter, SummarySource};

#[derive(Parser, Debug)]
enum Command {
    /// Diagnose summary files (no store).
    Diagnose(DiagnoseArgs),
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
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}
