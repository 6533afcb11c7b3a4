//! The whole diagnosis of a set of labelled runs: profiles, intersection,
//! attributes, and the rules of Algorithm 1.

use agent_core::Summary;
use anyhow::bail;

use crate::attributes::{self, Common};
use crate::dataset::Dataset;
use crate::intersection::{self, OutsideEntry};
use crate::label::Labelling;
use crate::mapping::Mapping;
use crate::rules::{self, Rule};
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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mapping: Mapping::default_map(),
            skip_fact: None,
            tree: TreeParams::default(),
            top: 10,
        }
    }
}

/// Diagnoses `summaries`, labelled by `labelling` (one label per summary).
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
    if summaries.len() > tree::MAX_ROWS {
        bail!(
            "{} runs: at most {} can be diagnosed at once (narrow the filters)",
            summaries.len(),
            tree::MAX_ROWS
        );
    }
    let k = labelling.classes.len();
    let mut present = vec![0usize; k];
    for l in &labelling.labels {
        present[*l as usize] += 1;
    }
    if present.iter().filter(|&&n| n > 0).count() < 2 {
        bail!(
            "every run has the same label ({}): rules need good and bad runs",
            labelling.classes.first().map_or("none", String::as_str)
        );
    }
    let profiles: Vec<_> = summaries
        .iter()
        .map(|s| attributes::profile(s, &options.mapping, options.skip_fact.as_deref()))
        .collect();
    let (common, outside) = intersection::intersect(&profiles, &labelling.labels, k);
    let columns = attributes::columns(&profiles, &common);
    let dataset = Dataset::new(columns, labelling.labels.clone(), labelling.classes.clone())?;
    let rules = rules::top_rules(&dataset, &options.tree, options.top);
    let program = summaries.first().map(|s| s.facts.program.to_string());
    let program = program
        .filter(|p| !p.is_empty() && summaries.iter().all(|s| s.facts.program.as_str() == p));
    let mut programs: Vec<(String, usize)> = Vec::new();
    for s in summaries {
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
        run_ids: summaries.iter().map(|s| hex::encode(s.id)).collect(),
        program,
        dataset,
        common,
        rules,
        outside,
    })
}
