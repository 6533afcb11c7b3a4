//! `edge-service`: see `docs/service.md`. The command line lives here
//! alone (`args`, `analysis_args`); the `service` and `diagnose` libraries
//! take typed options and requests and return typed results.

mod analyses;
mod analysis_args;
mod args;
mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("edge-service: {e:#}");
            ExitCode::from(2)
        }
    }
}
