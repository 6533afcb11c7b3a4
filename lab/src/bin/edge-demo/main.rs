//! `edge-demo`: the research's case study end to end on this machine
//! (`scripts/demo`), or with `--proactive` the same found by the service's
//! detector with no operator. It drives `edge-agent` and `edge-service`
//! from outside, as a user would; see [`lab::demo`].

use clap::Parser;

mod args;

/// The TCP-memory case study end to end (needs root).
#[derive(Parser, Debug)]
#[command(name = "edge-demo", version, about)]
struct Cli {
    #[command(flatten)]
    demo: args::DemoArgs,
}

fn main() -> std::process::ExitCode {
    match lab::demo(Cli::parse().demo.into()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("edge-demo: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
