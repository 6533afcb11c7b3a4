//! Prints, per stored window of a SQLite store, the peer metrics' raw
//! calls as the peer methods see them (file reads, file writes: count and
//! mean, plus the file-read latency histogram): what a disk fault did to
//! each device window by window, without re-running the analysis.
//!
//!   cargo run --release -p service --example window_calls -- OUT/fleet.db > calls.tsv
//!
//! Columns: device, program, window start (ns), received (ns), then for
//! dread and dwrite: count, total ns; then dread's log2 histogram buckets.

use std::io::Write;

use agent_core::Summary;
use anyhow::Context;
use diagnose::peers::metrics::{Classifier, Group, FILE_READ, FILE_WRITE};

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .context("usage: window_calls STORE.db")?;
    let db =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {path}"))?;
    let mut statement = db.prepare(
        "SELECT coalesce(device, ''), program, start_unix_ns, received_unix_ns, raw FROM runs \
         WHERE window_index > 0 ORDER BY start_unix_ns, seq",
    )?;
    let classifier = Classifier::new();
    let mut summary = Summary::empty();
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let mut rows = statement.query([])?;
    while let Some(r) = rows.next()? {
        let raw: Vec<u8> = r.get(4)?;
        if Summary::decode_into(&raw, &mut summary).is_err() {
            continue;
        }
        let calls = classifier.window_calls(&summary);
        let read = calls.service[FILE_READ];
        let write = calls.service[FILE_WRITE];
        let hist = &calls.groups[Group::FileRead.index()].histogram;
        write!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            read.count,
            read.total_ns,
            write.count,
            write.total_ns
        )?;
        for c in hist {
            write!(out, "\t{c}")?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(())
}
