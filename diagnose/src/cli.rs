//! The `edge-service diagnose` command.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::Summary;
use anyhow::{bail, Context};

use crate::analysis::{self, Diagnosis, LabelBy, Options};
use crate::input::{self, RunFilter, SummarySource};
use crate::label::{ClusterBy, Labelling};
use crate::mapping::Mapping;
use crate::report;
use crate::rpca::{self, pcp::PcpParams, RpcaOptions};
use crate::selection;
use crate::tree::TreeParams;
use crate::windows;

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
    pub cluster: Option<ClusterBy>,
    /// Keep runs whose trace began after the process started (the agent
    /// attached to it running): left out by default, since their first
    /// calls are missing. Runs of summaries older than format 3 (coverage
    /// unknown) are always kept.
    #[arg(long)]
    pub include_late: bool,
    /// Syscall mapping (TOML) replacing the shipped default
    /// (`diagnose/default-map.toml`).
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// Most rules: trees built, each without the earlier root attributes.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Fewest runs in a tree leaf.
    #[arg(long, default_value_t = 1)]
    pub min_leaf: usize,
    /// Deepest tree level a split may be made at (root = 0).
    #[arg(long, default_value_t = 5)]
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
    #[arg(long, default_value_t = rpca::analysis::DEFAULT_CV_THRESHOLD, value_name = "ALPHA")]
    pub cv_threshold: f64,
    /// rpca: a syscall is anomalous when cos θ between its column of the
    /// matrix and of the low-rank part is below this.
    #[arg(long, default_value_t = rpca::analysis::DEFAULT_COS_THRESHOLD, value_name = "COS")]
    pub cos_threshold: f64,
    /// rpca: an entry of the sparse part names its run's device when it is
    /// at least this times the category's median run duration.
    #[arg(long, default_value_t = rpca::analysis::DEFAULT_ENTRY_THRESHOLD, value_name = "X")]
    pub entry_threshold: f64,
    /// rpca: categories with fewer runs are not analysed.
    #[arg(long, default_value_t = rpca::analysis::DEFAULT_MIN_RUNS, value_name = "N")]
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

/// The store used when none is named.
pub fn default_db() -> PathBuf {
    std::env::var_os("EDGE_SERVICE_DB")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("edge-service.db"))
}

fn filter_of(args: &DiagnoseArgs) -> anyhow::Result<RunFilter> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Ok(RunFilter {
        group: args.group.clone(),
        program: args.program.clone(),
        since_unix_ns: args
            .since
            .as_deref()
            .map(|s| crate::time::parse_time(s, now))
            .transpose()
            .context("--since")?,
        until_unix_ns: args
            .until
            .as_deref()
            .map(|s| crate::time::parse_time(s, now))
            .transpose()
            .context("--until")?,
    })
}

/// The summaries under `paths`. A file that is not a summary stops the
/// diagnosis, unless `skip_bad`: then each is named on stderr and left out.
fn read_files(paths: &[PathBuf], skip_bad: bool) -> anyhow::Result<Vec<Summary>> {
    let (runs, bad) = input::read_all(paths)?;
    if !skip_bad {
        if let Some(first) = bad.first() {
            let more = match bad.len() {
                1 => String::new(),
                n => format!(" ({} more bad files)", n - 1),
            };
            bail!("{first}{more}; use --skip-bad to leave out files that are not summaries");
        }
    }
    for b in &bad {
        eprintln!("diagnose: skipped {b}");
    }
    if !bad.is_empty() {
        eprintln!(
            "diagnose: skipped {} file(s) that are not summaries; {} read",
            bad.len(),
            runs.len()
        );
    }
    Ok(runs)
}

/// The runs of `--good` and `--bad`, labelled by folder.
fn load_given(
    args: &DiagnoseArgs,
    good: &Path,
    bad: &Path,
) -> anyhow::Result<(Vec<Summary>, Labelling)> {
    let filter = filter_of(args)?;
    let mut good_runs = read_files(&[good.to_path_buf()], args.skip_bad)?;
    let mut bad_runs = read_files(&[bad.to_path_buf()], args.skip_bad)?;
    good_runs.retain(|s| input::passes(s, &filter));
    bad_runs.retain(|s| input::passes(s, &filter));
    let good_runs = whole_runs(good_runs, args.merge_windows);
    let bad_runs = whole_runs(bad_runs, args.merge_windows);
    let mut labels = vec![0u32; good_runs.len()];
    labels.extend(std::iter::repeat_n(1u32, bad_runs.len()));
    let mut runs = good_runs;
    runs.extend(bad_runs);
    if runs.is_empty() {
        bail!(
            "no runs in {} or {} (folders are read for *.summary files)",
            good.display(),
            bad.display()
        );
    }
    // A run given as both good and bad is a mistake, not a duplicate.
    let mut ids: Vec<[u8; 16]> = runs.iter().map(|s| s.id.0).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        bail!("the same run (summary id) is given more than once under --good/--bad");
    }
    let labelling = Labelling {
        method: format!("given (--good {} --bad {})", good.display(), bad.display()),
        classes: vec!["good".into(), "bad".into()],
        labels,
        clusters: None,
    };
    Ok((runs, labelling))
}

/// Diagnoses the runs the arguments name, labelled as they say.
fn diagnose_args(
    args: &DiagnoseArgs,
    store: &dyn SummarySource,
    options: &Options,
) -> anyhow::Result<Diagnosis> {
    if let (Some(good), Some(bad)) = (&args.good, &args.bad) {
        let (runs, labelling) = load_given(args, good, bad)?;
        return analysis::diagnose(&runs, labelling, options);
    }
    let filter = filter_of(args)?;
    let runs = whole_runs(load_runs(args, store, &filter)?, args.merge_windows);
    if runs.is_empty() {
        bail!("no whole runs to diagnose: every summary found is a window (add --merge-windows)");
    }
    let by = match &args.label_fact {
        Some(key) => LabelBy::Fact(key.clone()),
        None => LabelBy::Cluster(args.cluster.unwrap_or(ClusterBy::Duration)),
    };
    analysis::diagnose_runs(runs, &by, options)
}

/// The whole runs among `summaries` (windows merged or left out, see
/// [`windows::whole_runs`]), saying on stderr what became of the windows.
fn whole_runs(summaries: Vec<Summary>, merge: bool) -> Vec<Summary> {
    let (runs, note) = windows::whole_runs(summaries, merge);
    if let Some(note) = note {
        eprintln!("diagnose: {note}");
    }
    runs
}

/// The runs of the store and the files the arguments name, without
/// repeats; none is an error.
fn load_runs(
    args: &DiagnoseArgs,
    store: &dyn SummarySource,
    filter: &RunFilter,
) -> anyhow::Result<Vec<Summary>> {
    let mut runs = Vec::new();
    let mut from = Vec::new();
    let db = match (&args.db, args.inputs.is_empty()) {
        (Some(db), _) => Some(db.clone()),
        (None, true) => Some(default_db()),
        (None, false) => None,
    };
    if let Some(db) = db {
        runs.extend(
            store
                .load(&db, filter)
                .with_context(|| format!("cannot read runs from store {}", store.name(&db)))?,
        );
        from.push(store.name(&db));
    }
    if !args.inputs.is_empty() {
        let mut files = read_files(&args.inputs, args.skip_bad)?;
        files.retain(|s| input::passes(s, filter));
        runs.extend(files);
        from.extend(args.inputs.iter().map(|p| p.display().to_string()));
    }
    input::dedup(&mut runs);
    if runs.is_empty() {
        bail!(
            "no runs found in {} (with the filters given; folders are read for *.summary files)",
            from.join(", ")
        );
    }
    Ok(runs)
}

/// Runs `edge-service diagnose`.
pub fn run(args: DiagnoseArgs, store: &dyn SummarySource) -> anyhow::Result<ExitCode> {
    let mapping = match &args.map {
        Some(path) => Mapping::from_file(path)?,
        None => Mapping::default_map(),
    };
    if args.method == Method::Rpca {
        return run_rpca(&args, mapping, store);
    }
    if args.top == 0 {
        bail!("--top must be at least 1");
    }
    let options = Options {
        mapping,
        skip_fact: args.label_fact.clone(),
        tree: TreeParams {
            min_leaf: args.min_leaf.max(1),
            max_depth: args.max_depth,
            gain_ratio: args.gain_ratio,
        },
        top: args.top,
        include_late: args.include_late,
    };
    let diagnosis = diagnose_args(&args, store, &options)?;
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

/// Each run's device: the value of its fact `key`, else its run id; and
/// where the names came from, in words.
pub fn devices_of(runs: &[Summary], key: &str) -> (Vec<String>, String) {
    let (mut by_fact, mut by_id, mut by_run) = (0, 0, 0);
    let names = runs
        .iter()
        .map(|s| match s.facts.get(key) {
            Some(v) if !v.is_empty() => {
                by_fact += 1;
                v.to_string()
            }
            _ if s.origin.device != [0; 16] => {
                by_id += 1;
                format!("device {}", hex::encode(&s.origin.device.0[..6]))
            }
            _ => {
                by_run += 1;
                format!("run {}", hex::encode(&s.id.0[..6]))
            }
        })
        .collect();
    let all = runs.len();
    if by_fact == all {
        return (names, format!("the `{key}` fact"));
    }
    if by_id == all {
        return (names, "the device id".to_string());
    }
    let mut parts = Vec::new();
    if by_fact > 0 {
        parts.push(format!("the `{key}` fact ({by_fact} runs)"));
    }
    if by_id > 0 {
        parts.push(format!("the device id ({by_id} runs)"));
    }
    if by_run > 0 {
        parts.push(format!(
            "the run id ({by_run} runs without a `{key}` fact or device id)"
        ));
    }
    (names, parts.join(", "))
}

/// `edge-service diagnose --method rpca`.
fn run_rpca(
    args: &DiagnoseArgs,
    mapping: Mapping,
    store: &dyn SummarySource,
) -> anyhow::Result<ExitCode> {
    if args.good.is_some() || args.label_fact.is_some() || args.cluster.is_some() {
        bail!("--method rpca uses no labels: leave out --good/--bad, --label-fact and --cluster");
    }
    if args.min_runs < 2 {
        bail!("--min-runs must be at least 2");
    }
    let filter = filter_of(args)?;
    let (mut runs, left_out) =
        selection::explained(load_runs(args, store, &filter)?, args.include_late);
    if left_out.total() > 0 {
        eprintln!("diagnose: left out {}", left_out.phrases().join("; "));
    }
    // Each window is a request of its own (as each run is) unless the
    // windows of a stream are merged into one.
    if args.merge_windows {
        runs = whole_runs(runs, true);
    }
    let (devices, source) = devices_of(&runs, &args.device_fact);
    let options = RpcaOptions {
        mapping,
        cv_threshold: args.cv_threshold,
        cos_threshold: args.cos_threshold,
        entry_threshold: args.entry_threshold,
        min_runs: args.min_runs,
        pcp: PcpParams {
            lambda: args.lambda,
            ..PcpParams::default()
        },
    };
    let diagnosis = rpca::analyse(&runs, &devices, &source, &options)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let text = serde_json::to_string_pretty(&rpca::report::json(&diagnosis))?;
        writeln!(out, "{text}")?;
    } else {
        write!(out, "{}", rpca::report::text(&diagnosis))?;
    }
    if let Some(path) = &args.html {
        std::fs::write(path, rpca::report::html(&diagnosis))
            .with_context(|| format!("cannot write {}", path.display()))?;
        if !args.json {
            writeln!(out, "\nHTML report: {}", path.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
