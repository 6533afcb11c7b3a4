//! Fills a store for `scripts/bench-webui`: the demo's case study (36
//! `wget` runs, 12 of them slow, on 6 devices), one run cut into 30
//! windows, and other programs' runs on 50 devices up to `--runs` in all,
//! spread over the last week. Written through `Store::insert_runs` with
//! the rows ingest makes (`NewRun::from_summary`), 1000 a transaction: the
//! fast bulk path (ingest over HTTP would take minutes for 100 000).
//!
//! Prints the id of the windowed run (the bench opens its page).
//!
//! Usage: edge-service-webui-fixture --db PATH [--group phones] [--runs 100000]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use service::sample;
use service::store::{Location, NewRun};

const OTHER_PROGRAMS: &[&str] = &["curl", "git", "apt-get", "ssh", "rsync"];

fn run() -> anyhow::Result<()> {
    let (mut db, mut group, mut total) = (None, "phones".to_string(), 100_000u64);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--db" => db = Some(PathBuf::from(value)),
            "--group" => group = value,
            "--runs" => total = value.parse().context("--runs")?,
            _ => bail!("unknown option {flag}"),
        }
    }
    let Some(db) = db else {
        bail!("usage: edge-service-webui-fixture --db PATH [--group G] [--runs N]");
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let hour = 3_600_000_000_000u64;
    let mut summaries = Vec::new();
    for i in 0..36u64 {
        let mut device = [0u8; 16];
        device[0] = (i % 6) as u8 + 1;
        device[15] = 0xde;
        summaries.push(sample::demo_run(
            i,
            i % 3 == 2,
            device,
            now - hour + i * 60_000_000_000,
        ));
    }
    let windowed = sample::windowed_run(7, "wget", [1; 16], now - 2 * hour, 30);
    let windowed_id = summary_view::id_hex(&windowed[0].id);
    summaries.extend(windowed);
    let store_open = Location::parse(&db).opener(Duration::from_secs(30));
    let mut store = store_open()?;
    let mut write = |batch: &mut Vec<agent_core::Summary>| -> anyhow::Result<()> {
        let rows: Vec<NewRun> = batch
            .iter()
            .map(|s| NewRun::from_summary(s, sample::encode(s), &group, now))
            .collect();
        store.insert_runs(&rows)?;
        batch.clear();
        Ok(())
    };
    write(&mut summaries)?;
    let week = 7 * 24 * hour;
    let filler = total.saturating_sub(36 + 30);
    for i in 0..filler {
        let mut s = sample::summary(1_000_000 + i, 120, None);
        s.facts.program = agent_core::facts::truncated(OTHER_PROGRAMS[(i % 5) as usize]);
        s.run.start_unix_ns = now - 2 * hour - (i * 7_919 % week);
        s.origin.device = [0; 16];
        s.origin.device[0] = 0x80 | (i % 50) as u8;
        summaries.push(s);
        if summaries.len() == 1000 {
            write(&mut summaries)?;
        }
    }
    write(&mut summaries)?;
    println!("{windowed_id}");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("edge-service-webui-fixture: {e:#}");
            ExitCode::from(2)
        }
    }
}
