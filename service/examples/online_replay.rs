//! Replays a SQLite store's windows through the live analysis as they were
//! received (each window enters at its `received_unix_ns`, a tick every
//! `TICK_S` seconds of that clock) and prints every incident change and
//! every line the analysis says: how a fleet run's incidents came about,
//! without the fleet (e.g. `scripts/fleet-eval --online`'s `OUT/fleet.db`).
//!
//!   cargo run --release -p service --example online_replay -- OUT/fleet.db \
//!       [baseline_s close_after_s hang_after_s] [--alerts FILE]
//!
//! `--alerts FILE` also writes each opened and closed incident as the
//! fleet's webhook receiver logs it (`{"received_unix_ns", "body"}` per
//! line, received at the tick), so `scripts/lib/fleet/online_score.py
//! --alerts FILE` scores the replay as it scores the run: a rule changed
//! in the analysis is measured against the run's phases without the fleet.
//! `STRONG_K=K` sets `--peers-online-strong-k` (4 turns the burst rule off).

use std::io::Write;
use std::time::Duration;

use agent_core::Summary;
use anyhow::Context;
use service::online::analysis::Online;
use service::online::incidents::Event;
use service::online::OnlineOptions;
use wire::alert::IncidentEvent;

const TICK_S: u64 = 1;

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut alerts = match args.iter().position(|a| a == "--alerts") {
        Some(i) => {
            let file = args.get(i + 1).context("--alerts needs a file")?.clone();
            args.drain(i..i + 2);
            Some(std::io::BufWriter::new(
                std::fs::File::create(&file).with_context(|| format!("creating {file}"))?,
            ))
        }
        None => None,
    };
    let path = args.first().context(
        "usage: online_replay STORE.db [baseline_s close_after_s hang_after_s] [--alerts FILE]",
    )?;
    let secs = |i: usize, default: u64| -> anyhow::Result<Duration> {
        Ok(Duration::from_secs(match args.get(i) {
            Some(a) => a.parse().with_context(|| format!("argument {i}: {a}"))?,
            None => default,
        }))
    };
    let options = OnlineOptions {
        tick: Duration::from_secs(TICK_S),
        baseline: secs(1, 300)?,
        close_after: secs(2, 5)?,
        hang_after: secs(3, 30)?,
        strong_k: match std::env::var("STRONG_K") {
            Ok(k) => k.parse().context("STRONG_K")?,
            Err(_) => OnlineOptions::default().strong_k,
        },
        ..OnlineOptions::default()
    };
    options.check()?;
    let db =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {path}"))?;
    let mut statement = db.prepare(
        "SELECT group_name, received_unix_ns, raw FROM runs \
         WHERE window_index > 0 ORDER BY received_unix_ns, seq",
    )?;
    let rows = statement
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Vec<u8>>(2)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first) = rows.first().map(|r| r.1 as u64) else {
        println!("no windows in {path}");
        return Ok(());
    };
    let tick_ns = TICK_S * 1_000_000_000;
    let mut online = Online::new(options);
    let mut now = first - first % tick_ns + tick_ns;
    let mut summary = Summary::empty();
    let mut next = 0;
    // Incident ids as the store would number them.
    let mut ids = 0i64;
    while next < rows.len() {
        while next < rows.len() && rows[next].1 as u64 <= now {
            let (group, _, raw) = &rows[next];
            next += 1;
            if Summary::decode_into(raw, &mut summary).is_ok() {
                online.add(group, Box::new(summary.clone()));
            }
        }
        let tick = online.tick(now);
        for line in tick.lines {
            println!("{} {line}", now / 1_000_000_000);
        }
        for mut c in tick.changes {
            let event = match c.event {
                Event::Opened => {
                    ids += 1;
                    c.incident.id = ids;
                    online.set_id(&c.incident.group, &c.key, ids);
                    Some(IncidentEvent::Opened)
                }
                Event::Closed => Some(IncidentEvent::Closed),
                Event::Updated => None,
            };
            if let (Some(out), Some(event)) = (alerts.as_mut(), event) {
                let line = serde_json::json!({
                    "received_unix_ns": now,
                    "body": c.incident.alert(event),
                });
                writeln!(out, "{line}")?;
            }
            println!(
                "{} {:?} {} {} {} windows {}..{}",
                now / 1_000_000_000,
                c.event,
                c.incident.device,
                c.incident.cause,
                c.incident.metric,
                c.incident.first_window_unix_ns / 1_000_000_000,
                c.incident.last_window_unix_ns / 1_000_000_000,
            );
        }
        now += tick_ns;
    }
    if let Some(mut out) = alerts {
        out.flush()?;
    }
    Ok(())
}
