//! The command lines of `edge-service diagnose` and `edge-service peers`
//! (clap), and their conversion into the `diagnose` library's requests.
//! Values clap cannot check alone (times, seconds) are checked here, with
//! errors naming the option; the rest is the request's own check.

use std::path::PathBuf;

use agent_core::Source;
use anyhow::Context;
use diagnose::label::ClusterBy;
use diagnose::peers::median::MedianParams;
use diagnose::peers::request::{self as peers_request, PeersRequest};
use diagnose::request::{
    self as diagnose_request, DiagnoseRequest, Labels, RpcaSettings, RulesSettings,
};
use diagnose::time::{RangeTimes, Time};

/// How `edge-service diagnose` diagnoses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// Labels (given or clustered), then the rules of decision trees.
    Rules,
    /// No labels: CloudDiag's categories, CV and robust PCA.
    Rpca,
}

/// `edge-service diagnose`: which runs are slow, and rules saying why.
///
/// Runs come from the service's store (`--db`, the default) or from summary
/// files and folders. Labels are given (`--good DIR --bad DIR`,
/// `--label-fact KEY`) or found (`--cluster duration`, the default).
#[derive(clap::Args, Debug, Clone)]
pub struct DiagnoseArgs {
    /// Summary files (exactly `Summary::encode`'s bytes) or folders of them;
    /// without any, runs come from the store.
    #[arg(value_name = "PATH", conflicts_with_all = ["good", "bad"])]
    pub inputs: Vec<PathBuf>,
    /// The service's store: its SQLite file or a `postgres://` URL
    /// [default: $EDGE_SERVICE_DB or ./edge-service.db, when no files are given].
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// Only runs of this group.
    #[arg(long)]
    pub group: Option<String>,
    /// Only runs of this program (the `program` fact, e.g. `wget`).
    #[arg(long)]
    pub program: Option<String>,
    /// Only runs that started at or after TIME: Unix seconds
    /// (`1763700000`), Unix nanoseconds (`1763700000000000000ns`), or a time
    /// ago (`90s`, `30m`, `2h`, `7d`).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only runs that started before TIME (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Folder (or file) of good runs; needs --bad.
    #[arg(long, value_name = "DIR", requires = "bad", conflicts_with = "db")]
    pub good: Option<PathBuf>,
    /// Folder (or file) of bad runs; needs --good.
    #[arg(long, value_name = "DIR", requires = "good", conflicts_with = "db")]
    pub bad: Option<PathBuf>,
    /// Label each run by the value of this free fact (e.g. `outcome`); runs
    /// without it are left out.
    #[arg(long, value_name = "KEY", conflicts_with_all = ["good", "bad", "cluster"])]
    pub label_fact: Option<String>,
    /// Find labels by clustering runs into two performance clusters (the
    /// better one is `good`), or take them from each run's outcome
    /// (`outcome`: exited 0 is good, a non-zero exit or a signal bad; runs
    /// detached from or still running are left out) [default: duration].
    #[arg(long, value_enum, conflicts_with_all = ["good", "bad"])]
    pub cluster: Option<ClusterArg>,
    /// Keep runs whose trace began after the process started (the agent
    /// attached to it running): left out by default, since their first
    /// calls are missing. Runs of summaries older than format 3 (coverage
    /// unknown) are always kept.
    #[arg(long)]
    pub include_late: bool,
    /// Keep only the runs observed so: `kernel` (every syscall: ptrace,
    /// eBPF, and every summary older than format 4) or `in-process` (libc
    /// calls recorded inside the process). The two count different calls
    /// by construction and are never compared; by default the source of
    /// most runs is kept and the others are left out with a note.
    #[arg(long, value_enum, value_name = "SOURCE")]
    pub source: Option<SourceArg>,
    /// Syscall mapping (TOML) replacing the shipped default
    /// (`diagnose/default-map.toml`).
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// Most rules: trees built, each without the earlier root attributes.
    #[arg(long, default_value_t = RulesSettings::default().top)]
    pub top: usize,
    /// Fewest runs in a tree leaf.
    #[arg(long, default_value_t = RulesSettings::default().min_leaf)]
    pub min_leaf: usize,
    /// Deepest tree level a split may be made at (root = 0).
    #[arg(long, default_value_t = RulesSettings::default().max_depth)]
    pub max_depth: usize,
    /// Choose splits by C4.5's gain ratio instead of information gain.
    #[arg(long)]
    pub gain_ratio: bool,
    /// Leave out files that are not summaries (empty, corrupt, too large,
    /// unreadable), naming each on stderr, instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Merge the window summaries of each traced run (same device and
    /// stream id) into one run, summing exactly; without it, window
    /// summaries are left out with a note (the diagnosis compares whole
    /// runs).
    #[arg(long)]
    pub merge_windows: bool,
    /// How to diagnose: `rules` (labels, then decision-tree rules) or
    /// `rpca` (no labels: CloudDiag's categories and robust PCA; see
    /// docs/rpca.md).
    #[arg(long, value_enum, default_value_t = Method::Rules)]
    pub method: Method,
    /// rpca: a category is anomalous when the coefficient of variation of
    /// its run durations is above this (α).
    #[arg(long, default_value_t = RpcaSettings::default().cv_threshold, value_name = "ALPHA")]
    pub cv_threshold: f64,
    /// rpca: a syscall is anomalous when cos θ between its column of the
    /// matrix and of the low-rank part is below this.
    #[arg(long, default_value_t = RpcaSettings::default().cos_threshold, value_name = "COS")]
    pub cos_threshold: f64,
    /// rpca: an entry of the sparse part names its run's device when it is
    /// at least this times the category's median run duration.
    #[arg(long, default_value_t = RpcaSettings::default().entry_threshold, value_name = "X")]
    pub entry_threshold: f64,
    /// rpca: categories with fewer runs are not analysed.
    #[arg(long, default_value_t = RpcaSettings::default().min_runs, value_name = "N")]
    pub min_runs: usize,
    /// rpca: the weight λ of the sparse part [default: 1/√max(runs,
    /// syscalls) of each category].
    #[arg(long, value_name = "LAMBDA")]
    pub lambda: Option<f64>,
    /// rpca: the free fact naming a run's device; runs without it are
    /// named by their device id (summary format 2), else by their run id.
    #[arg(long, value_name = "KEY", default_value = "device")]
    pub device_fact: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as one self-contained HTML page with plots.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// What performance runs are clustered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterArg {
    /// Run duration (shorter is better).
    Duration,
    /// Bytes received over sockets per second (higher is better).
    Throughput,
    /// How the run ended, not clustered: exited 0 is good; a non-zero exit
    /// or a kill by a signal is bad; a run the agent detached from or one
    /// still running has no known outcome and is left out.
    Outcome,
}

/// How the runs a diagnosis keeps were observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceArg {
    /// Every syscall the kernel saw (ptrace, eBPF).
    Kernel,
    /// Calls made through libc's functions, recorded inside the process.
    InProcess,
}

impl From<SourceArg> for Source {
    fn from(a: SourceArg) -> Source {
        match a {
            SourceArg::Kernel => Source::Kernel,
            SourceArg::InProcess => Source::InProcess,
        }
    }
}

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
    /// The Hadoop semantic method: socket and file calls out of their
    /// training range, scored per pair of nodes.
    Semantic,
    /// The server its clients wait on: which server the clients' latest
    /// socket calls were to, window after window (packet loss).
    Wait,
    /// All six.
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
    /// median: a window counts only when the device is also above the
    /// window's median by more than this quantile of the training's
    /// relative deviations (times 1.25); 0 leaves it out.
    #[arg(long, value_name = "Q", default_value_t = MedianParams::default().spread)]
    pub spread: f64,
    /// median: on servers, this many windows over are enough in a stretch
    /// of N whose mean deviation passes the training's highest (a fault
    /// that comes and goes; `serve`'s live analysis uses 3); K as always
    /// when not given.
    #[arg(long, value_name = "K")]
    pub strong_k: Option<usize>,
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
    /// histogram and semantic: Khadke et al.'s rules exactly as the paper
    /// writes them (bare min..max ranges, stat/access and connect only,
    /// one slice flags), without this tool's departures (docs/peers.md).
    #[arg(long)]
    pub strict_paper: bool,
    /// One more fault-free range to train on too, `SINCE,UNTIL` (TIMEs as
    /// --train-since); repeatable: every control run, not only the last.
    #[arg(long, value_name = "SINCE,UNTIL", action = clap::ArgAction::Append)]
    pub also_train: Vec<String>,
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

/// The store used when none is named and no files are given.
fn default_db() -> PathBuf {
    std::env::var_os("EDGE_SERVICE_DB")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("edge-service.db"))
}

/// The store to read: the one named, else the default one when there are
/// no files to read.
fn store_of(db: &Option<PathBuf>, inputs: &[PathBuf]) -> Option<PathBuf> {
    match (db, inputs.is_empty()) {
        (Some(db), _) => Some(db.clone()),
        (None, true) => Some(default_db()),
        (None, false) => None,
    }
}

/// A TIME option's value; the error names the option.
fn time(text: &str, flag: &str) -> anyhow::Result<Time> {
    text.parse::<Time>().with_context(|| flag.to_string())
}

impl From<ClusterArg> for ClusterBy {
    fn from(c: ClusterArg) -> ClusterBy {
        match c {
            ClusterArg::Duration => ClusterBy::Duration,
            ClusterArg::Throughput => ClusterBy::Throughput,
            ClusterArg::Outcome => ClusterBy::Outcome,
        }
    }
}

impl From<Methods> for peers_request::Methods {
    fn from(m: Methods) -> peers_request::Methods {
        match m {
            Methods::Median => peers_request::Methods::Median,
            Methods::Histogram => peers_request::Methods::Histogram,
            Methods::Link => peers_request::Methods::Link,
            Methods::Errno => peers_request::Methods::Errno,
            Methods::Hang => peers_request::Methods::Hang,
            Methods::Semantic => peers_request::Methods::Semantic,
            Methods::Wait => peers_request::Methods::Wait,
            Methods::All => peers_request::Methods::All,
        }
    }
}

impl DiagnoseArgs {
    /// The diagnosis these arguments ask for.
    pub fn request(&self) -> anyhow::Result<DiagnoseRequest> {
        let labels = match (&self.good, &self.bad, &self.label_fact, self.cluster) {
            (Some(good), Some(bad), _, _) => Some(Labels::Given {
                good: good.clone(),
                bad: bad.clone(),
            }),
            (_, _, Some(key), _) => Some(Labels::Fact(key.clone())),
            (_, _, _, Some(by)) => Some(Labels::Cluster(by.into())),
            _ => None,
        };
        let given = matches!(labels, Some(Labels::Given { .. }));
        let method = match self.method {
            Method::Rules => diagnose_request::Method::Rules(RulesSettings {
                top: self.top,
                min_leaf: self.min_leaf,
                max_depth: self.max_depth,
                gain_ratio: self.gain_ratio,
            }),
            Method::Rpca => diagnose_request::Method::Rpca(RpcaSettings {
                cv_threshold: self.cv_threshold,
                cos_threshold: self.cos_threshold,
                entry_threshold: self.entry_threshold,
                min_runs: self.min_runs,
                lambda: self.lambda,
                device_fact: self.device_fact.clone(),
            }),
        };
        Ok(DiagnoseRequest {
            inputs: self.inputs.clone(),
            // Runs given good and bad are the only runs read.
            db: if given {
                None
            } else {
                store_of(&self.db, &self.inputs)
            },
            group: self.group.clone(),
            program: self.program.clone(),
            since: self
                .since
                .as_deref()
                .map(|t| time(t, "--since"))
                .transpose()?,
            until: self
                .until
                .as_deref()
                .map(|t| time(t, "--until"))
                .transpose()?,
            labels,
            include_late: self.include_late,
            source: self.source.map(Source::from),
            map: self.map.clone(),
            skip_bad: self.skip_bad,
            merge_windows: self.merge_windows,
            method,
        })
    }
}

impl PeersArgs {
    /// The peer diagnosis these arguments ask for.
    pub fn request(&self) -> anyhow::Result<PeersRequest> {
        let times = RangeTimes {
            train_since: time(&self.train_since, "--train-since")?,
            train_until: time(&self.train_until, "--train-until")?,
            since: time(&self.since, "--since")?,
            until: self
                .until
                .as_deref()
                .map(|t| time(t, "--until"))
                .transpose()?,
        };
        Ok(PeersRequest {
            inputs: self.inputs.clone(),
            db: store_of(&self.db, &self.inputs),
            group: self.group.clone(),
            program: self.program.clone(),
            times,
            methods: self.method.into(),
            k: self.k,
            n: self.n,
            spread: self.spread,
            strong_k: self.strong_k,
            errno_window: peers_request::seconds(self.errno_window, "--errno-window")?,
            hang_after: peers_request::seconds(self.hang_after, "--hang-after")?,
            slice: self.slice,
            strict_paper: self.strict_paper,
            more_training: self
                .also_train
                .iter()
                .map(|r| {
                    let (since, until) = r
                        .split_once(',')
                        .with_context(|| format!("--also-train {r:?}: give SINCE,UNTIL"))?;
                    Ok((time(since, "--also-train")?, time(until, "--also-train")?))
                })
                .collect::<anyhow::Result<_>>()?,
            skip_bad: self.skip_bad,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Diagnose {
        #[command(flatten)]
        args: DiagnoseArgs,
    }

    #[derive(Parser, Debug)]
    struct Peers {
        #[command(flatten)]
        args: PeersArgs,
    }

    fn diagnose(list: &[&str]) -> anyhow::Result<DiagnoseRequest> {
        Diagnose::try_parse_from(std::iter::once("diagnose").chain(list.iter().copied()))?
            .args
            .request()
    }

    fn peers(list: &[&str]) -> anyhow::Result<PeersRequest> {
        Peers::try_parse_from(std::iter::once("peers").chain(list.iter().copied()))?
            .args
            .request()
    }

    #[test]
    fn source_picks_the_runs_kept() {
        let r = diagnose(&["--db", "/x.db", "--source", "in-process"]).unwrap();
        assert_eq!(r.source, Some(agent_core::Source::InProcess));
        let r = diagnose(&["--db", "/x.db", "--source", "kernel"]).unwrap();
        assert_eq!(r.source, Some(agent_core::Source::Kernel));
        let err = diagnose(&["--db", "/x.db", "--source", "ebpf"]).unwrap_err();
        assert!(err.to_string().contains("--source"), "{err}");
    }

    #[test]
    fn diagnose_options_become_the_request() {
        let r = diagnose(&[
            "--db",
            "/x.db",
            "--cluster",
            "outcome",
            "--include-late",
            "--since",
            "1",
            "--top",
            "2",
        ])
        .unwrap();
        assert_eq!(r.db, Some(PathBuf::from("/x.db")));
        assert_eq!(r.labels, Some(Labels::Cluster(ClusterBy::Outcome)));
        assert!(r.include_late);
        assert_eq!(r.source, None);
        assert_eq!(r.since, Some(Time::Unix(1_000_000_000)));
        match r.method {
            diagnose_request::Method::Rules(s) => assert_eq!(s.top, 2),
            m => panic!("{m:?}"),
        }
        // Files alone: no store is read.
        let r = diagnose(&["runs/", "--method", "rpca", "--min-runs", "3"]).unwrap();
        assert_eq!(r.db, None);
        assert_eq!(r.inputs, [PathBuf::from("runs/")]);
        match r.method {
            diagnose_request::Method::Rpca(s) => assert_eq!(s.min_runs, 3),
            m => panic!("{m:?}"),
        }
        let r = diagnose(&["--good", "g", "--bad", "b"]).unwrap();
        assert_eq!(r.db, None, "given runs are the only runs read");
        assert!(matches!(r.labels, Some(Labels::Given { .. })));
        // Neither files nor --db: the default store.
        assert!(diagnose(&[]).unwrap().db.is_some());
        let err = diagnose(&["--since", "yesterday"]).unwrap_err();
        assert!(
            format!("{err:#}").starts_with("--since: time \"yesterday\""),
            "{err:#}"
        );
        // What clap refuses before any request is made.
        assert!(diagnose(&["--method", "pca"]).is_err());
        assert!(diagnose(&["--good", "g"]).is_err());
        assert!(diagnose(&["--label-fact", "k", "--cluster", "outcome"]).is_err());
        assert!(diagnose(&["--db", "x", "--good", "g", "--bad", "b"]).is_err());
    }

    #[test]
    fn peers_options_become_the_request() {
        let base = [
            "--group",
            "g",
            "--train-since",
            "10",
            "--train-until",
            "20",
            "--since",
            "20",
        ];
        let r = peers(&base).unwrap();
        assert_eq!(r.times.train_since, Time::Unix(10_000_000_000));
        assert_eq!(r.times.until, None);
        assert_eq!(r.errno_window, std::time::Duration::from_millis(1500));
        assert_eq!(r.hang_after, std::time::Duration::from_secs(30));
        assert_eq!(
            (r.k, r.n),
            (MedianParams::default().k, MedianParams::default().n)
        );
        assert!(r.db.is_some(), "the default store");
        let mut list = base.to_vec();
        list.extend(["--errno-window", "inf"]);
        let err = peers(&list).unwrap_err();
        assert!(
            err.to_string().starts_with("--errno-window must be"),
            "{err}"
        );
        let mut list = base.to_vec();
        list.extend(["--until", "soon"]);
        let err = peers(&list).unwrap_err();
        assert!(format!("{err:#}").starts_with("--until: time"), "{err:#}");
    }
}
