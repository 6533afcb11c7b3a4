//! One diagnosis asked for, as `edge-service diagnose` asks it: which runs
//! to read (files, folders, a store, filters), how to label them, the
//! method and its settings; checked ([`DiagnoseRequest::check`]), run
//! ([`DiagnoseRequest::run`]) and answered with a typed [`Report`]. No
//! command line here: the binary turns its arguments into a request and the
//! report into output.

use std::path::{Path, PathBuf};

use agent_core::{Source, Summary};
use anyhow::{bail, Context};

use crate::analysis::{self, Diagnosis, LabelBy, Options};
use crate::input::{self, RunFilter, SummarySource};
use crate::label::{ClusterBy, Labelling};
use crate::mapping::Mapping;
use crate::rpca::{self, pcp::PcpParams, RpcaDiagnosis, RpcaOptions};
use crate::selection;
use crate::time::Time;
use crate::tree::TreeParams;
use crate::windows;

/// A diagnosis to run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DiagnoseRequest {
    /// Summary files (exactly `Summary::encode`'s bytes) or folders of them.
    pub inputs: Vec<PathBuf>,
    /// The store to read too (its SQLite file or a `postgres://` URL, as
    /// the [`SummarySource`] understands it); `None`: no store.
    pub db: Option<PathBuf>,
    /// Only runs of this group.
    pub group: Option<String>,
    /// Only runs of this program (the `program` fact).
    pub program: Option<String>,
    /// Only runs that started at or after this time.
    pub since: Option<Time>,
    /// Only runs that started before this time.
    pub until: Option<Time>,
    /// How runs are labelled; `None`: clustered by duration (rules), no
    /// labels (rpca).
    pub labels: Option<Labels>,
    /// Keep runs whose trace began after the process started.
    pub include_late: bool,
    /// Keep only the runs observed so (kernel or in-process); `None`: the
    /// source of most runs (the others are left out with a note).
    pub source: Option<Source>,
    /// A syscall mapping (TOML file) replacing the shipped default.
    pub map: Option<PathBuf>,
    /// Leave out files that are not summaries (each named in a note)
    /// instead of stopping at the first.
    pub skip_bad: bool,
    /// Merge the window summaries of each traced run into one run; without
    /// it, window summaries are left out with a note.
    pub merge_windows: bool,
    /// The method and its settings.
    pub method: Method,
}

/// How runs are labelled good or bad.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Labels {
    /// Given: the runs of one folder (or file) are good, of another bad;
    /// the only runs read.
    Given {
        /// Folder (or file) of good runs.
        good: PathBuf,
        /// Folder (or file) of bad runs.
        bad: PathBuf,
    },
    /// By the value of this free fact; runs without it are left out.
    Fact(String),
    /// By clustering runs on their performance, or by their outcome.
    Cluster(ClusterBy),
}

/// How to diagnose, with the method's settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Method {
    /// Labels (given or clustered), then the rules of decision trees.
    Rules(RulesSettings),
    /// No labels: CloudDiag's categories, CV and robust PCA.
    Rpca(RpcaSettings),
}

impl Default for Method {
    fn default() -> Method {
        Method::Rules(RulesSettings::default())
    }
}

/// The rules method's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RulesSettings {
    /// Most rules: trees built, each without the earlier root attributes.
    pub top: usize,
    /// Fewest runs in a tree leaf (0 counts as 1).
    pub min_leaf: usize,
    /// Deepest tree level a split may be made at (root = 0).
    pub max_depth: usize,
    /// Choose splits by C4.5's gain ratio instead of information gain.
    pub gain_ratio: bool,
}

impl Default for RulesSettings {
    fn default() -> RulesSettings {
        let tree = TreeParams::default();
        RulesSettings {
            top: Options::default().top,
            min_leaf: tree.min_leaf,
            max_depth: tree.max_depth,
            gain_ratio: tree.gain_ratio,
        }
    }
}

/// The rpca method's settings (see docs/rpca.md).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcaSettings {
    /// A category is anomalous when the CV of its run durations is above
    /// this (α).
    pub cv_threshold: f64,
    /// A syscall is anomalous when cos θ between its column of the matrix
    /// and of the low-rank part is below this.
    pub cos_threshold: f64,
    /// An entry of the sparse part names its run's device when it is at
    /// least this times the category's median run duration.
    pub entry_threshold: f64,
    /// Categories with fewer runs are not analysed (at least 2).
    pub min_runs: usize,
    /// The weight λ of the sparse part; `None`: 1/√max(runs, syscalls) of
    /// each category.
    pub lambda: Option<f64>,
    /// The free fact naming a run's device ([`devices_of`]).
    pub device_fact: String,
}

impl Default for RpcaSettings {
    fn default() -> RpcaSettings {
        RpcaSettings {
            cv_threshold: rpca::analysis::DEFAULT_CV_THRESHOLD,
            cos_threshold: rpca::analysis::DEFAULT_COS_THRESHOLD,
            entry_threshold: rpca::analysis::DEFAULT_ENTRY_THRESHOLD,
            min_runs: rpca::analysis::DEFAULT_MIN_RUNS,
            lambda: None,
            device_fact: "device".to_string(),
        }
    }
}

/// A request that cannot be run as it is. The words name the command
/// line's options, the one way people write requests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The rules method with no tree to build.
    #[error("--top must be at least 1")]
    NoRules,
    /// rpca cannot analyse categories of fewer than 2 runs.
    #[error("--min-runs must be at least 2")]
    TooFewRuns,
    /// rpca with labels.
    #[error("--method rpca uses no labels: leave out --good/--bad, --label-fact and --cluster")]
    RpcaWithLabels,
    /// Runs given good and bad, and other runs to read besides.
    #[error("the runs of --good/--bad are the only runs read: leave out --db and PATHs")]
    GivenWithOtherRuns,
    /// Neither files nor a store.
    #[error("nothing to read: name summary files or folders, or a store (--db)")]
    NothingToRead,
}

/// What a diagnosis found.
#[derive(Debug, Clone)]
pub enum Report {
    /// The rules method's diagnosis (boxed: it is four times the size of
    /// rpca's).
    Rules(Box<Diagnosis>),
    /// The rpca method's diagnosis.
    Rpca(RpcaDiagnosis),
}

impl Report {
    /// The report as text for people.
    pub fn text(&self) -> String {
        match self {
            Report::Rules(d) => crate::report::text(d),
            Report::Rpca(d) => rpca::report::text(d),
        }
    }

    /// The report as JSON (docs/diagnosis.md, docs/rpca.md).
    pub fn json(&self) -> serde_json::Value {
        match self {
            Report::Rules(d) => crate::report::json(d),
            Report::Rpca(d) => rpca::report::json(d),
        }
    }

    /// The report as one self-contained HTML page with plots.
    pub fn html(&self) -> String {
        match self {
            Report::Rules(d) => crate::report::html(d),
            Report::Rpca(d) => rpca::report::html(d),
        }
    }
}

impl DiagnoseRequest {
    /// Refuses a request that cannot be run (before anything is read).
    pub fn check(&self) -> Result<(), RequestError> {
        let given = matches!(self.labels, Some(Labels::Given { .. }));
        if given && (self.db.is_some() || !self.inputs.is_empty()) {
            return Err(RequestError::GivenWithOtherRuns);
        }
        if !given && self.db.is_none() && self.inputs.is_empty() {
            return Err(RequestError::NothingToRead);
        }
        match &self.method {
            Method::Rules(s) if s.top == 0 => Err(RequestError::NoRules),
            Method::Rules(_) => Ok(()),
            Method::Rpca(_) if self.labels.is_some() => Err(RequestError::RpcaWithLabels),
            Method::Rpca(s) if s.min_runs < 2 => Err(RequestError::TooFewRuns),
            Method::Rpca(_) => Ok(()),
        }
    }

    /// Runs the diagnosis on the runs of `store` (when [`Self::db`] names
    /// one) and of the files. `note` is told, as they happen, of files
    /// left out and runs set aside (a person should see them even when the
    /// diagnosis then fails).
    pub fn run(
        &self,
        store: &dyn SummarySource,
        note: &mut dyn FnMut(String),
    ) -> anyhow::Result<Report> {
        let mapping = match &self.map {
            Some(path) => Mapping::from_file(path)?,
            None => Mapping::default_map(),
        };
        self.check()?;
        let now = crate::time::now_unix_ns();
        let filter = RunFilter {
            group: self.group.clone(),
            program: self.program.clone(),
            since_unix_ns: self.since.map(|t| t.at(now)),
            until_unix_ns: self.until.map(|t| t.at(now)),
        };
        let reader = Reader {
            request: self,
            store,
            filter: &filter,
        };
        match &self.method {
            Method::Rules(settings) => reader
                .rules(settings, mapping, note)
                .map(|d| Report::Rules(Box::new(d))),
            Method::Rpca(settings) => reader.rpca(settings, mapping, note).map(Report::Rpca),
        }
    }
}

/// A request's runs being read and diagnosed.
struct Reader<'a> {
    request: &'a DiagnoseRequest,
    store: &'a dyn SummarySource,
    filter: &'a RunFilter,
}

impl Reader<'_> {
    /// The rules method.
    fn rules(
        &self,
        settings: &RulesSettings,
        mapping: Mapping,
        note: &mut dyn FnMut(String),
    ) -> anyhow::Result<Diagnosis> {
        let r = self.request;
        let options = Options {
            mapping,
            skip_fact: match &r.labels {
                Some(Labels::Fact(key)) => Some(key.clone()),
                _ => None,
            },
            tree: TreeParams {
                min_leaf: settings.min_leaf.max(1),
                max_depth: settings.max_depth,
                gain_ratio: settings.gain_ratio,
            },
            top: settings.top,
            include_late: r.include_late,
            source: r.source,
        };
        let by = match &r.labels {
            Some(Labels::Given { good, bad }) => {
                let (runs, labelling) = self.given(good, bad, note)?;
                return analysis::diagnose(&runs, labelling, &options);
            }
            Some(Labels::Fact(key)) => LabelBy::Fact(key.clone()),
            Some(Labels::Cluster(by)) => LabelBy::Cluster(*by),
            None => LabelBy::Cluster(ClusterBy::Duration),
        };
        let runs = whole_runs(self.runs(note)?, r.merge_windows, note);
        if runs.is_empty() {
            bail!(
                "no whole runs to diagnose: every summary found is a window (add --merge-windows)"
            );
        }
        analysis::diagnose_runs(runs, &by, &options)
    }

    /// The rpca method.
    fn rpca(
        &self,
        settings: &RpcaSettings,
        mapping: Mapping,
        note: &mut dyn FnMut(String),
    ) -> anyhow::Result<RpcaDiagnosis> {
        let r = self.request;
        let (mut runs, left_out) = selection::explained(self.runs(note)?, r.include_late, r.source);
        if left_out.total() > 0 {
            note(format!("left out {}", left_out.phrases().join("; ")));
        }
        // Each window is a request of its own (as each run is) unless the
        // windows of a stream are merged into one.
        if r.merge_windows {
            runs = whole_runs(runs, true, note);
        }
        let (devices, source) = devices_of(&runs, &settings.device_fact);
        let options = RpcaOptions {
            mapping,
            cv_threshold: settings.cv_threshold,
            cos_threshold: settings.cos_threshold,
            entry_threshold: settings.entry_threshold,
            min_runs: settings.min_runs,
            pcp: PcpParams {
                lambda: settings.lambda,
                ..PcpParams::default()
            },
        };
        rpca::analyse(&runs, &devices, &source, &options)
    }

    /// The runs of the good and bad folders, labelled by folder.
    fn given(
        &self,
        good: &Path,
        bad: &Path,
        note: &mut dyn FnMut(String),
    ) -> anyhow::Result<(Vec<Summary>, Labelling)> {
        let r = self.request;
        let read = |path: &Path, note: &mut dyn FnMut(String)| -> anyhow::Result<Vec<Summary>> {
            let mut runs = read_files(&[path.to_path_buf()], r.skip_bad, note)?;
            runs.retain(|s| input::passes(s, self.filter));
            Ok(whole_runs(runs, r.merge_windows, note))
        };
        let good_runs = read(good, note)?;
        let bad_runs = read(bad, note)?;
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
        let mut ids: Vec<agent_core::RunId> = runs.iter().map(|s| s.id).collect();
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

    /// The runs of the store and the files, without repeats; none is an
    /// error.
    fn runs(&self, note: &mut dyn FnMut(String)) -> anyhow::Result<Vec<Summary>> {
        let r = self.request;
        let mut runs = Vec::new();
        let mut from = Vec::new();
        if let Some(db) = &r.db {
            runs.extend(
                self.store.load(db, self.filter).with_context(|| {
                    format!("cannot read runs from store {}", self.store.name(db))
                })?,
            );
            from.push(self.store.name(db));
        }
        if !r.inputs.is_empty() {
            let mut files = read_files(&r.inputs, r.skip_bad, note)?;
            files.retain(|s| input::passes(s, self.filter));
            runs.extend(files);
            from.extend(r.inputs.iter().map(|p| p.display().to_string()));
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
}

/// The summaries under `paths`. A file that is not a summary stops the
/// diagnosis, unless `skip_bad`: then each is named in a note and left out.
fn read_files(
    paths: &[PathBuf],
    skip_bad: bool,
    note: &mut dyn FnMut(String),
) -> anyhow::Result<Vec<Summary>> {
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
        note(format!("skipped {b}"));
    }
    if !bad.is_empty() {
        note(format!(
            "skipped {} file(s) that are not summaries; {} read",
            bad.len(),
            runs.len()
        ));
    }
    Ok(runs)
}

/// The whole runs among `summaries` (windows merged or left out, see
/// [`windows::whole_runs`]), with a note of what became of the windows.
fn whole_runs(summaries: Vec<Summary>, merge: bool, note: &mut dyn FnMut(String)) -> Vec<Summary> {
    let (runs, said) = windows::whole_runs(summaries, merge);
    if let Some(said) = said {
        note(said.to_string());
    }
    runs
}

/// Each run's device: the value of its fact `key`, else its device id,
/// else its run id; and where the names came from, in words.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> DiagnoseRequest {
        DiagnoseRequest {
            inputs: vec![PathBuf::from("runs")],
            ..DiagnoseRequest::default()
        }
    }

    #[test]
    fn a_request_that_cannot_run_is_refused_by_name() {
        assert_eq!(files().check(), Ok(()));
        assert_eq!(
            DiagnoseRequest::default().check(),
            Err(RequestError::NothingToRead)
        );
        let given = Labels::Given {
            good: "g".into(),
            bad: "b".into(),
        };
        let only_given = DiagnoseRequest {
            labels: Some(given.clone()),
            ..DiagnoseRequest::default()
        };
        assert_eq!(only_given.check(), Ok(()));
        let given_and_files = DiagnoseRequest {
            labels: Some(given.clone()),
            ..files()
        };
        assert_eq!(
            given_and_files.check(),
            Err(RequestError::GivenWithOtherRuns)
        );
        let given_and_store = DiagnoseRequest {
            db: Some("x.db".into()),
            ..only_given
        };
        assert_eq!(
            given_and_store.check(),
            Err(RequestError::GivenWithOtherRuns)
        );
        let no_rules = DiagnoseRequest {
            method: Method::Rules(RulesSettings {
                top: 0,
                ..RulesSettings::default()
            }),
            ..files()
        };
        assert_eq!(no_rules.check(), Err(RequestError::NoRules));
        let rpca_labelled = DiagnoseRequest {
            labels: Some(Labels::Fact("outcome".into())),
            method: Method::Rpca(RpcaSettings::default()),
            ..files()
        };
        assert_eq!(rpca_labelled.check(), Err(RequestError::RpcaWithLabels));
        let rpca_one_run = DiagnoseRequest {
            method: Method::Rpca(RpcaSettings {
                min_runs: 1,
                ..RpcaSettings::default()
            }),
            ..files()
        };
        assert_eq!(rpca_one_run.check(), Err(RequestError::TooFewRuns));
    }

    #[test]
    fn defaults_are_the_analyses_defaults() {
        let rules = RulesSettings::default();
        assert_eq!((rules.top, rules.min_leaf, rules.max_depth), (10, 1, 5));
        assert!(!rules.gain_ratio);
        let rpca = RpcaSettings::default();
        assert_eq!(rpca.min_runs, rpca::analysis::DEFAULT_MIN_RUNS);
        assert_eq!(rpca.device_fact, "device");
    }
}
