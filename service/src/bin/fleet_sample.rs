//! Fills a store with a synthetic fleet's window summaries
//! (`diagnose::peers::synth`) through the service's own write path (decode,
//! group, `Store::insert_runs` in batches), for `scripts/bench-peers`.
//! HTTP is left out: posting 360 000 summaries would time the server, not
//! the analysis.
//!
//! Usage: edge-service-fleet-sample --db FILE [--devices 100] [--windows 3600]
//!        [--disk-fault DEVICE:FROM_WINDOW] [--seed 1] [--links 0]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use diagnose::peers::synth::{Fault, FleetSpec};
use service::store::Location;

fn value<T: std::str::FromStr>(flag: &str, v: Option<String>) -> anyhow::Result<T> {
    v.with_context(|| format!("{flag} needs a value"))?
        .parse()
        .map_err(|_| anyhow::anyhow!("{flag}: not a number"))
}

fn run() -> anyhow::Result<()> {
    let mut db: Option<PathBuf> = None;
    let mut spec = FleetSpec::new(100, 3600);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--db" => db = Some(PathBuf::from(value::<String>("--db", args.next())?)),
            "--devices" => spec.devices = value("--devices", args.next())?,
            "--windows" => spec.windows = value("--windows", args.next())?,
            "--seed" => spec.seed = value("--seed", args.next())?,
            "--links" => spec.links = value("--links", args.next())?,
            "--disk-fault" => {
                let v: String = value("--disk-fault", args.next())?;
                let (d, from) = v
                    .split_once(':')
                    .context("--disk-fault takes DEVICE:FROM_WINDOW")?;
                spec.faults.push(Fault::Disk {
                    device: d.parse().context("--disk-fault DEVICE")?,
                    from: from.parse().context("--disk-fault FROM_WINDOW")?,
                    until: u64::MAX,
                    factor: 3.0,
                });
            }
            other => bail!("unknown argument {other}"),
        }
    }
    let db = db.context("--db FILE is required")?;
    let mut store = Location::parse(&db).opener(Duration::from_secs(30))()
        .with_context(|| format!("cannot open {}", db.display()))?;
    let mut buf = vec![0u8; agent_core::MAX_ENCODED_LEN];
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut stored = 0usize;
    let mut flush = |batch: &mut Vec<Vec<u8>>| -> anyhow::Result<()> {
        let items: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        let prepared = service::ingest::prepare(&items, None, spec.start_unix_ns)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if let Some(r) = prepared.rejected.first() {
            bail!("a synthetic summary was refused: {}", r.reason);
        }
        let runs: Vec<_> = prepared.runs.into_iter().map(|(_, r)| r).collect();
        store.insert_runs(&runs)?;
        stored += runs.len();
        batch.clear();
        Ok(())
    };
    for mut s in spec.summaries() {
        let bytes = s
            .encode(&mut buf)
            .map_err(|e| anyhow::anyhow!("a synthetic summary does not encode: {e:?}"))?;
        batch.push(bytes.to_vec());
        if batch.len() == 5000 {
            flush(&mut batch)?;
        }
    }
    flush(&mut batch)?;
    println!(
        "stored {stored} window summaries of {} devices × {} windows from {} (Unix s) in {}",
        spec.devices,
        spec.windows,
        spec.start_unix_ns / 1_000_000_000,
        db.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("edge-service-fleet-sample: {e:#}");
            ExitCode::from(2)
        }
    }
}
