//! The whole diagnosis of a set of labelled runs: the runs it explains,
//! profiles, intersection, attributes, the rules of Algorithm 1 and where
//! the time went.

use agent_core::{Source, Summary};
use anyhow::bail;

use crate::attributes::{self, Common};
use crate::dataset::Dataset;
use crate::intersection::{self, OutsideEntry};
use crate::label::{self, ClusterBy, Labelling};
use crate::mapping::Mapping;
use crate::rules::{self, Rule};
use crate::selection::{self, LeftOut};
use crate::time_gap::{self, TimeGaps};
use crate::tree::{self, TreeParams};

/// What the diagnosis found.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// How the runs were labelled.
    pub labelling: Labelling,
    /// Run ids (32 hex digits), in row order.
    pub run_ids: Vec<String>,
    /// The traced program, when every run traced the same one.
    pub program: Option<String>,
    /// Runs per traced program, most first (more than one program usually
    /// calls for `--program`).
    pub programs: Vec<(String, usize)>,
    /// The runs as attribute rows.
    pub dataset: Dataset,
    /// Syscall entries and transitions made in every run.
    pub common: Common,
    /// The top rules, best first.
    pub rules: Vec<Rule>,
    /// Syscall entries not made in every run, most unevenly spread first.
    pub outside: Vec<OutsideEntry>,
    /// Where the time went: syscall entries by the extra time the bad runs
    /// spend in them (`None` unless there are exactly two classes).
    pub time_gap: Option<TimeGaps>,
    /// Runs given but not explained, by reason.
    pub left_out: LeftOut,
}

/// How to diagnose.
#[derive(Debug, Clone)]
pub struct Options {
    /// Syscall names merged before attributes are made.
    pub mapping: Mapping,
    /// A fact left out of the attributes (the one labels come from).
    pub skip_fact: Option<String>,
    /// Tree parameters.
    pub tree: TreeParams,
    /// Most rules (trees) to build.
    pub top: usize,
    /// Keep runs whose trace began after the process started (left out by
    /// default: their first calls are missing).
    pub include_late: bool,
    /// Keep the runs observed so (the others are left out); `None`: the
    /// source of most runs ([`selection`]).
    pub source: Option<Source>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mapping: Mapping::default_map(),
            skip_fact: None,
            tree: TreeParams::default(),
            top: 10,
            include_late: false,
            source: None,
        }
    }
}

/// How [`diagnose_runs`] labels the runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelBy {
    /// By clustering duration or throughput, or by outcome.
    Cluster(ClusterBy),
    /// By the value of this free fact (it is then no attribute).
    Fact(String),
}

/// Diagnoses the runs among `summaries` that can be explained
/// ([`selection::explained`]), labelled as `by` says: the one call for a
/// caller that has runs but no labels yet (the service's detector, the
/// command). Runs left out (light records, late traces, runs of the
/// minority source, unknown outcome, no label fact) are counted in
/// [`Diagnosis::left_out`].
pub fn diagnose_runs(
    summaries: Vec<Summary>,
    by: &LabelBy,
    options: &Options,
) -> anyhow::Result<Diagnosis> {
    let given = summaries.len();
    let (mut runs, mut left_out) =
        selection::explained(summaries, options.include_late, options.source);
    if runs.is_empty() {
        bail!(
            "none of the {given} run(s) can be explained: left out {}",
            left_out.phrases().join(", ")
        );
    }
    let mut options = options.clone();
    let (labelling, keep) = match by {
        LabelBy::Cluster(ClusterBy::Outcome) => {
            let (labelling, keep, unknown) = label::by_outcome(&runs)?;
            left_out.add(unknown);
            (labelling, Some(keep))
        }
        LabelBy::Cluster(by) => (label::by_cluster(&runs, *by)?, None),
        LabelBy::Fact(key) => {
            let (labelling, keep) = label::by_fact(&runs, key)?;
            left_out.without_label_fact += keep.iter().filter(|k| !**k).count();
            options.skip_fact = Some(key.clone());
            (labelling, Some(keep))
        }
    };
    if let Some(keep) = keep {
        let mut keep = keep.into_iter();
        runs.retain(|_| keep.next().unwrap_or(false));
    }
    let mut diagnosis = diagnose(&runs, labelling, &options)?;
    diagnosis.left_out.add(left_out);
    Ok(diagnosis)
}

/// Diagnoses `summaries`, labelled by `labelling` (one label per summary).
/// Light records, late traces unless `options.include_late`, and runs of
/// another source than the majority's are left out with their labels
/// ([`selection`]) and counted in [`Diagnosis::left_out`].
pub fn diagnose(
    summaries: &[Summary],
    labelling: Labelling,
    options: &Options,
) -> anyhow::Result<Diagnosis> {
    if summaries.len() != labelling.labels.len() {
        bail!(
            "{} runs but {} labels",
            summaries.len(),
            labelling.labels.len()
        );
    }
    let mut left_out = LeftOut::default();
    let mut labelling = labelling;
    let mut labels = Vec::with_capacity(summaries.len());
    let mut kept: Vec<&Summary> = Vec::with_capacity(summaries.len());
    let reasons = selection::reasons_left_out(summaries, options.include_late, options.source);
    for ((s, l), reason) in summaries.iter().zip(&labelling.labels).zip(reasons) {
        match reason {
            Some(reason) => left_out.count(reason),
            None => {
                kept.push(s);
                labels.push(*l);
            }
        }
    }
    labelling.labels = labels;
    let summaries = kept;
    if summaries.is_empty() {
        bail!(
            "no run left to explain: left out {}",
            left_out.phrases().join(", ")
        );
    }
    if summaries.len() > tree::MAX_ROWS {
        bail!(
            "{} runs: at most {} can be diagnosed at once (narrow the filters)",
            summaries.len(),
            tree::MAX_ROWS
        );
    }
    let k = labelling.classes.len();
    if labelling.labels.iter().any(|l| *l as usize >= k) {
        bail!("a run's label names no class (labels and classes do not match)");
    }
    let mut present = vec![0usize; k];
    for l in &labelling.labels {
        present[*l as usize] += 1;
    }
    if present.iter().filter(|&&n| n > 0).count() < 2 {
        let only = present.iter().position(|&n| n > 0).unwrap_or(0);
        let note = match left_out.total() {
            0 => String::new(),
            _ => format!(" (left out {})", left_out.phrases().join(", ")),
        };
        bail!(
            "every run has the same label ({}): rules need good and bad runs{note}",
            labelling.classes.get(only).map_or("none", String::as_str)
        );
    }
    let profiles: Vec<_> = summaries
        .iter()
        .map(|s| attributes::profile(s, &options.mapping, options.skip_fact.as_deref()))
        .collect();
    let durations_s: Vec<f64> = summaries
        .iter()
        .map(|s| s.run.duration_ns as f64 / 1e9)
        .collect();
    let floors_ns: Vec<u64> = summaries
        .iter()
        .map(|s| time_gap::tracer_floor_ns(s))
        .collect();
    let time_gap = time_gap::rank(&profiles, &durations_s, &floors_ns, &labelling.labels, k);
    let (common, outside) = intersection::intersect(&profiles, &labelling.labels, k);
    let columns = attributes::columns(&profiles, &common);
    let dataset = Dataset::new(columns, labelling.labels.clone(), labelling.classes.clone())?;
    let rules = rules::top_rules(&dataset, &options.tree, options.top);
    let program = summaries.first().map(|s| s.facts.program.to_string());
    let program = program
        .filter(|p| !p.is_empty() && summaries.iter().all(|s| s.facts.program.as_str() == p));
    let mut programs: Vec<(String, usize)> = Vec::new();
    for s in &summaries {
        let p = s.facts.program.as_str();
        match programs.iter_mut().find(|(name, _)| name == p) {
            Some((_, n)) => *n += 1,
            None => programs.push((p.to_string(), 1)),
        }
    }
    programs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(Diagnosis {
        labelling,
        programs,
        run_ids: summaries.iter().map(|s| s.id.to_string()).collect(),
        program,
        dataset,
        common,
        rules,
        outside,
        time_gap,
        left_out,
    })
}
