//! Writes an ingest request body for `scripts/bench-ingest`: `--items`
//! realistic summaries (made by agent-core's Collector from simulated
//! syscall events), framed as `POST /v1/summaries` expects, plus the byte
//! offset of each summary's 16-byte id so the load script can give every
//! request fresh ids.
//!
//! Usage: edge-service-bench-body --out BODY --offsets FILE [--items 50] [--events 3000] [--seed 1]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};

struct Options {
    out: PathBuf,
    offsets: PathBuf,
    items: u32,
    events: u32,
    seed: u64,
}

fn parse_args() -> anyhow::Result<Options> {
    let mut opts = Options {
        out: PathBuf::new(),
        offsets: PathBuf::new(),
        items: 50,
        events: 3000,
        seed: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--out" => opts.out = value.into(),
            "--offsets" => opts.offsets = value.into(),
            "--items" => opts.items = value.parse().context("--items")?,
            "--events" => opts.events = value.parse().context("--events")?,
            "--seed" => opts.seed = value.parse().context("--seed")?,
            _ => bail!("unknown option {flag}"),
        }
    }
    if opts.out.as_os_str().is_empty() || opts.offsets.as_os_str().is_empty() {
        bail!("usage: edge-service-bench-body --out BODY --offsets FILE [--items N] [--events N] [--seed N]");
    }
    if opts.items == 0 || opts.items as usize > agent_core::framing::MAX_ITEMS {
        bail!("--items must be 1..={}", agent_core::framing::MAX_ITEMS);
    }
    Ok(opts)
}

fn run() -> anyhow::Result<()> {
    let opts = parse_args()?;
    let mut body = Vec::new();
    let mut offsets = Vec::new();
    let mut sizes = Vec::new();
    for i in 0..opts.items {
        let item =
            service::sample::encoded(opts.seed * 1_000_003 + u64::from(i), opts.events, None);
        agent_core::framing::write_item(&mut body, &item);
        // The id follows the one-byte format version at the item's start.
        offsets.push(body.len() - item.len() + 1);
        sizes.push(item.len());
    }
    std::fs::write(&opts.out, &body)
        .with_context(|| format!("cannot write {}", opts.out.display()))?;
    let text: Vec<String> = offsets.iter().map(usize::to_string).collect();
    std::fs::write(&opts.offsets, text.join("\n") + "\n")
        .with_context(|| format!("cannot write {}", opts.offsets.display()))?;
    let mean = sizes.iter().sum::<usize>() / sizes.len();
    eprintln!(
        "{} summaries, {} bytes each on average ({}..{}), body {} bytes",
        opts.items,
        mean,
        sizes.iter().min().unwrap_or(&0),
        sizes.iter().max().unwrap_or(&0),
        body.len()
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("edge-service-bench-body: {e:#}");
            ExitCode::from(2)
        }
    }
}
