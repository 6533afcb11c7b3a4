//! `edge-service`: see `docs/service.md`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = service::cli::Cli::parse();
    match service::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("edge-service: {e:#}");
            ExitCode::from(2)
        }
    }
}
