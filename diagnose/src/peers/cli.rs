//! The `edge-service peers` command: reads the training and diagnosis
//! windows (store or files), judges the fleet, prints the report.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};

use super::errno::ErrnoParams;
use super::fleet::{Fleet, Range};
use super::hang::HangParams;
use super::histogram::HistogramParams;
use super::link::LinkParams;
use super::median::MedianParams;
use super::{analyse, report, tally_text, Options};
use crate::cli::default_db;
use crate::input::{self, RunFilter, SummarySource};

/// Which peer methods to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Methods {
    /// The PVFS method: mean service time against the median of the peers.
    Median,
    /// The Hadoop method: latency histograms against training ranges.
    Histogram,
    /// Slow network links: bytes per socket call on a host's links
    /// against the fleet's other links.
    Link,
    /// Propagated errors: a server's unexpected errno seen at a client.
    Errno,
    /// Crashes and hangs: client calls failing with a connection error or
    /// stuck in flight, blamed on the server that went quiet.
    Hang,
    /// All five.
    All,
}

/// `edge-service peers`: which device among its peers is the culprit.
///
/// Window summaries of many devices (one device = one peer; devices
/// tracing the same program are compared) from the store (`--db`, the
/// default) or from files and folders. The training range must be
/// fault-free; it gives each device its thresholds. See docs/peers.md.
#[derive(clap::Args, Debug, Clone)]
pub struct PeersArgs {
    /// Summary files or folders of them; without any, windows come from
    /// the store.
    #[arg(value_name = "PATH")]
    pub inputs: Vec<PathBuf>,
    /// The service's store: its SQLite file or a `postgres://` URL
    /// [default: $EDGE_SERVICE_DB or ./edge-service.db, when no files are given].
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// The devices' group.
    #[arg(long)]
    pub group: String,
    /// Only windows of this program (the `program` fact).
    #[arg(long)]
    pub program: Option<String>,
    /// Start of the fault-free training range. TIME is RFC 3339
    /// (`2026-11-23T15:00:00Z`), Unix seconds (`1763700000`), Unix
    /// nanoseconds (`1763700000000000000ns`) or a time ago (`90s`, `30m`,
    /// `2h`); a window belongs to the range its start is in.
    #[arg(long, value_name = "TIME")]
    pub train_since: String,
    /// End (exclusive) of the training range.
    #[arg(long, value_name = "TIME")]
    pub train_until: String,
    /// Start of the range to diagnose (must not overlap training).
    #[arg(long, value_name = "TIME")]
    pub since: String,
    /// End (exclusive) of the range to diagnose [default: now].
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Which method(s) to run.
    #[arg(long, value_enum, default_value_t = Methods::All)]
    pub method: Methods,
    /// median: a device is flagged when over its threshold in at least K
    /// ...
    #[arg(long, value_name = "K", default_value_t = MedianParams::default().k)]
    pub k: usize,
    /// ... of N consecutive judged windows.
    #[arg(long, value_name = "N", default_value_t = MedianParams::default().n)]
    pub n: usize,
    /// errno: a client's errno matches a server's within this many
    /// seconds either side.
    #[arg(long, value_name = "SECS", default_value_t = 1.5)]
    pub errno_window: f64,
    /// hang: a client call in flight this many seconds is a hang.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub hang_after: f64,
    /// histogram: windows per slice (a slice's histograms and total times
    /// are compared).
    #[arg(long, value_name = "WINDOWS", default_value_t = 10)]
    pub slice: u64,
    /// Leave out files that are not summaries, naming each on stderr,
    /// instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as one self-contained HTML page with plots.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// The training and diagnosis ranges the arguments give.
fn ranges(args: &PeersArgs, now: u64) -> anyhow::Result<(Range, Range)> {
    crate::time::parse_ranges(
        &args.train_since,
        &args.train_until,
        &args.since,
        args.until.as_deref(),
        now,
    )
}

/// Reads the windows of both ranges into a fleet.
fn load(
    args: &PeersArgs,
    store: &dyn SummarySource,
    training: Range,
    diagnosis: Range,
) -> anyhow::Result<Fleet> {
    let mut fleet = Fleet::new(training, diagnosis, args.slice);
    let db = match (&args.db, args.inputs.is_empty()) {
        (Some(db), _) => Some(db.clone()),
        (None, true) => Some(default_db()),
        (None, false) => None,
    };
    let filter = |r: Range| RunFilter {
        group: Some(args.group.clone()),
        program: args.program.clone(),
        since_unix_ns: Some(r.since),
        until_unix_ns: Some(r.until),
    };
    if let Some(db) = &db {
        for r in [training, diagnosis] {
            store
                .for_each(db, &filter(r), &mut |s| fleet.add(s))
                .with_context(|| format!("cannot read windows from store {}", store.name(db)))?;
        }
    }
    let no_times = RunFilter {
        group: Some(args.group.clone()),
        program: args.program.clone(),
        ..RunFilter::default()
    };
    let mut bad = 0usize;
    for path in &args.inputs {
        for file in input::summary_files(path)? {
            match input::read_summary(&file) {
                Ok(s) => {
                    if input::passes(&s, &no_times) {
                        fleet.add(&s);
                    }
                }
                Err(b) if args.skip_bad => {
                    eprintln!("peers: skipped {b}");
                    bad += 1;
                }
                Err(b) => {
                    bail!("{b}; use --skip-bad to leave out files that are not summaries")
                }
            }
        }
    }
    if bad > 0 {
        eprintln!("peers: skipped {bad} file(s) that are not summaries");
    }
    if fleet.devices.is_empty() {
        let mut from: Vec<String> = db.iter().map(|d| d.display().to_string()).collect();
        from.extend(args.inputs.iter().map(|p| p.display().to_string()));
        bail!(
            "no window summaries of group {:?}{} with a device id in the ranges, in {} ({})",
            args.group,
            args.program
                .as_ref()
                .map(|p| format!(" and program {p:?}"))
                .unwrap_or_default(),
            from.join(", "),
            tally_text(&fleet.tally)
        );
    }
    Ok(fleet)
}

/// `secs` (a flag's value) in ns; an error naming `flag` when it is not a
/// finite number of seconds from 0 to a year.
fn seconds_ns(secs: f64, flag: &str) -> anyhow::Result<u64> {
    const YEAR: f64 = 365.0 * 86_400.0;
    if !secs.is_finite() || !(0.0..=YEAR).contains(&secs) {
        bail!("{flag} must be a number of seconds from 0 to {YEAR} (got {secs})");
    }
    Ok((secs * 1e9).round() as u64)
}

/// Runs `edge-service peers`.
pub fn run(args: PeersArgs, store: &dyn SummarySource) -> anyhow::Result<ExitCode> {
    if args.k == 0 || args.n == 0 || args.k > args.n {
        bail!("--k and --n must be at least 1, with --k at most --n");
    }
    if args.slice == 0 {
        bail!("--slice must be at least 1 window");
    }
    let errno_window_ns = seconds_ns(args.errno_window, "--errno-window")?;
    let hang_after_ns = seconds_ns(args.hang_after, "--hang-after")?;
    if hang_after_ns == 0 {
        bail!("--hang-after must be more than 0 seconds");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let (training, diagnosis) = ranges(&args, now)?;
    let fleet = load(&args, store, training, diagnosis)?;
    let options = Options {
        median: matches!(args.method, Methods::Median | Methods::All),
        histogram: matches!(args.method, Methods::Histogram | Methods::All),
        link: matches!(args.method, Methods::Link | Methods::All),
        errno: matches!(args.method, Methods::Errno | Methods::All),
        hang: matches!(args.method, Methods::Hang | Methods::All),
        median_params: MedianParams {
            k: args.k,
            n: args.n,
            ..MedianParams::default()
        },
        histogram_params: HistogramParams::default(),
        link_params: LinkParams::default(),
        errno_params: ErrnoParams {
            window_ns: errno_window_ns,
        },
        hang_params: HangParams {
            hang_after_ns,
            ..HangParams::default()
        },
    };
    let diagnosis = analyse(&fleet, &options)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let text = serde_json::to_string_pretty(&report::json(&diagnosis))?;
        writeln!(out, "{text}")?;
    } else {
        write!(out, "{}", report::text(&diagnosis))?;
    }
    if let Some(path) = &args.html {
        std::fs::write(path, report::html(&diagnosis))
            .with_context(|| format!("cannot write {}", path.display()))?;
        if !args.json {
            writeln!(out, "\nHTML report: {}", path.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
