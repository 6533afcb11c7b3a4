//! From summaries to rows of named attributes.
//!
//! Names are fixed so scripts can rely on them (`docs/diagnosis.md`):
//! for every syscall entry `<sc>` (after the mapping; `<sc>@file`,
//! `<sc>@pipe`, `<sc>@tcp`, `<sc>@udp`, `<sc>@unix`, `<sc>@socket` (other
//! socket families) for calls on one kind of fd):
//! `num_<sc>` calls, `time_<sc>` seconds in the calls, `err_<sc>` failed
//! calls, `consec_<sc>` calls right after the same syscall on the same
//! thread, `gap_<sc>` mean seconds between such consecutive calls,
//! `result_<sc>` mean result of successful calls, `param_<sc>` mean requested
//! size (read/write family); `gap_<a>-><b>` the mean seconds between a call
//! of `a` and a call of `b` right after it; and every fact as a categorical
//! `fact.<key>` (fixed facts: `fact.os`, `fact.os_version`, `fact.kernel`,
//! `fact.device_model`, `fact.agent_version`, `fact.program`, `fact.arch`).

use std::collections::{BTreeMap, BTreeSet};

use agent_core::{FdKind, Summary, SyscallId};

use crate::dataset::{Attribute, Column};
use crate::mapping::Mapping;

/// The statistics of one syscall entry of one run, added up over the fd
/// kinds and mapped names it covers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EntryStats {
    /// Calls.
    pub count: u64,
    /// Time in the calls, ns.
    pub total_ns: u64,
    /// Failed calls.
    pub errors: u64,
    /// Calls right after the same syscall on the same thread.
    pub consecutive: u64,
    /// Sum of the gaps before those, ns.
    pub gap_sum_ns: u64,
    /// Sum of the results of successful calls.
    pub result_sum: i128,
    /// Sum of requested sizes of the calls that have one.
    pub param_sum: u128,
    /// Calls that have a requested size.
    pub param_calls: u64,
}

impl EntryStats {
    fn add(&mut self, s: &agent_core::SyscallSummary) {
        self.count = self.count.saturating_add(s.count);
        self.total_ns = self.total_ns.saturating_add(s.total_ns);
        self.errors = self.errors.saturating_add(s.errors());
        self.consecutive = self.consecutive.saturating_add(s.consecutive_count());
        self.gap_sum_ns = self
            .gap_sum_ns
            .saturating_add(s.consecutive.map_or(0, |c| c.gap_sum_ns));
        self.result_sum = self.result_sum.saturating_add(s.result_sum);
        if let Some(p) = s.param_sum {
            self.param_sum = self.param_sum.saturating_add(p);
            self.param_calls = self.param_calls.saturating_add(s.count);
        }
    }

    /// Mean gap before a consecutive call, seconds (0 when none).
    pub fn gap_mean_s(&self) -> f64 {
        if self.consecutive == 0 {
            0.0
        } else {
            self.gap_sum_ns as f64 / self.consecutive as f64 / 1e9
        }
    }

    /// Mean result of successful calls (0 when none succeeded).
    pub fn result_mean(&self) -> f64 {
        let ok = self.count.saturating_sub(self.errors);
        if ok == 0 {
            0.0
        } else {
            self.result_sum as f64 / ok as f64
        }
    }

    /// Mean requested size (`None` when no call has one).
    pub fn param_mean(&self) -> Option<f64> {
        (self.param_calls > 0).then(|| self.param_sum as f64 / self.param_calls as f64)
    }

    /// The entry's statistics as (attribute prefix, value) pairs, in the
    /// fixed order; `param` only when the calls have a requested size.
    pub fn values(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("num", self.count as f64),
            ("time", self.total_ns as f64 / 1e9),
            ("err", self.errors as f64),
            ("consec", self.consecutive as f64),
            ("gap", self.gap_mean_s()),
            ("result", self.result_mean()),
        ];
        if let Some(p) = self.param_mean() {
            v.push(("param", p));
        }
        v
    }
}

/// Count and gap sum of one transition of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TransitionStats {
    /// How many times.
    pub count: u64,
    /// Sum of the gaps, ns.
    pub gap_sum_ns: u64,
}

impl TransitionStats {
    /// Mean gap, seconds.
    pub fn gap_mean_s(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.gap_sum_ns as f64 / self.count as f64 / 1e9
        }
    }
}

/// One run, reduced to what attributes are made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunProfile {
    /// Entry name (`read`, `read@socket`) -> statistics.
    pub entries: BTreeMap<String, EntryStats>,
    /// `a->b` -> statistics.
    pub transitions: BTreeMap<String, TransitionStats>,
    /// `fact.<key>` -> value.
    pub facts: BTreeMap<String, String>,
}

/// The fd kinds with their own attributes (`@file`, `@socket`, `@pipe`,
/// `@tcp`, `@udp`, `@unix`).
fn kind_suffix(kind: FdKind) -> Option<&'static str> {
    match kind {
        FdKind::File | FdKind::Socket | FdKind::Pipe | FdKind::Tcp | FdKind::Udp | FdKind::Unix => {
            Some(kind.name())
        }
        FdKind::None | FdKind::Other => None,
    }
}

/// A syscall's name for attributes; `None` for the folded "other" entry and
/// the `<unknown>` entry, whose make-up differs from run to run. An unknown
/// number kept apart is one number in every run: named as strace names it
/// (`syscall_0x1f0`).
fn syscall_name(id: SyscallId, mapping: &Mapping) -> Option<String> {
    if id == SyscallId::OTHER || id == SyscallId::UNKNOWN {
        return None;
    }
    let name = match (id.name(), id.carried_raw()) {
        (Some(n), _) => n.to_string(),
        (None, Some(_)) => id.to_string(),
        // An id newer than this build: still comparable between runs.
        (None, None) => format!("sc{}", id.0),
    };
    Some(mapping.map(&name).to_string())
}

/// The names of the fixed facts, in attribute order.
pub const FIXED_FACTS: [&str; 7] = [
    "fact.os",
    "fact.os_version",
    "fact.kernel",
    "fact.device_model",
    "fact.agent_version",
    "fact.program",
    "fact.arch",
];

/// Reduces a summary to a profile. `skip_fact` (the label fact) is left out.
pub fn profile(summary: &Summary, mapping: &Mapping, skip_fact: Option<&str>) -> RunProfile {
    let mut p = RunProfile::default();
    for s in &summary.syscalls {
        let Some(name) = syscall_name(s.key.id, mapping) else {
            continue;
        };
        if let Some(suffix) = kind_suffix(s.key.fd_kind) {
            p.entries
                .entry(format!("{name}@{suffix}"))
                .or_default()
                .add(s);
        }
        p.entries.entry(name).or_default().add(s);
    }
    for t in &summary.transitions {
        let (Some(from), Some(to)) = (syscall_name(t.from, mapping), syscall_name(t.to, mapping))
        else {
            continue;
        };
        let e = p.transitions.entry(format!("{from}->{to}")).or_default();
        e.count = e.count.saturating_add(t.count);
        e.gap_sum_ns = e.gap_sum_ns.saturating_add(t.gap_sum_ns);
    }
    let f = &summary.facts;
    let fixed = [
        f.os_name.as_str(),
        f.os_version.as_str(),
        f.kernel.as_str(),
        f.device_model.as_str(),
        f.agent_version.as_str(),
        f.program.as_str(),
        summary.run.arch.name(),
    ];
    for (name, value) in FIXED_FACTS.iter().zip(fixed) {
        p.facts.insert(name.to_string(), value.to_string());
    }
    for fact in &f.extra {
        if Some(fact.key.as_str()) == skip_fact {
            continue;
        }
        let mut name = format!("fact.{}", fact.key);
        if FIXED_FACTS.contains(&name.as_str()) {
            // A free fact may not hide a fixed one.
            name = format!("fact.free.{}", fact.key);
        }
        p.facts.insert(name, fact.value.to_string());
    }
    p
}

/// The value of a fact a run lacks.
pub const UNSET: &str = "(unset)";

/// Builds the attribute columns from the runs' profiles, using only the
/// syscall entries and transitions in `common` (the intersection). Constant
/// columns are left out, and so is an `@kind` column equal in every run to
/// the column without the suffix (it would only repeat its rules).
pub fn columns(profiles: &[RunProfile], common: &Common) -> Vec<Attribute> {
    let mut out: Vec<Attribute> = Vec::new();
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    for entry in &common.entries {
        let stats: Vec<&EntryStats> = profiles.iter().map(|p| &p.entries[entry]).collect();
        // `param` only when every run has a requested size for the entry.
        let with_param = stats.iter().all(|s| s.param_calls > 0);
        let first = stats.first().map(|s| s.values()).unwrap_or_default();
        for (i, (prefix, _)) in first.iter().enumerate() {
            if *prefix == "param" && !with_param {
                continue;
            }
            let values: Vec<f64> = stats.iter().map(|s| s.values()[i].1).collect();
            let name = format!("{prefix}_{entry}");
            let column = Column::Numeric(values);
            if column.is_constant() {
                continue;
            }
            if let Some((plain, _)) = entry.split_once('@') {
                let plain_name = format!("{prefix}_{plain}");
                if let Some(&j) = by_name.get(&plain_name) {
                    if out[j].column == column {
                        continue;
                    }
                }
            }
            by_name.insert(name.clone(), out.len());
            out.push(Attribute { name, column });
        }
    }
    for t in &common.transitions {
        let values: Vec<f64> = profiles
            .iter()
            .map(|p| p.transitions[t].gap_mean_s())
            .collect();
        let column = Column::Numeric(values);
        if !column.is_constant() {
            out.push(Attribute {
                name: format!("gap_{t}"),
                column,
            });
        }
    }
    let fact_names: BTreeSet<&String> = profiles.iter().flat_map(|p| p.facts.keys()).collect();
    let mut ordered: Vec<&String> = FIXED_FACTS
        .iter()
        .filter_map(|f| fact_names.iter().find(|n| n.as_str() == *f).copied())
        .collect();
    ordered.extend(
        fact_names
            .iter()
            .filter(|n| !FIXED_FACTS.contains(&n.as_str())),
    );
    for name in ordered {
        let values: Vec<&str> = profiles
            .iter()
            .map(|p| p.facts.get(name).map_or(UNSET, String::as_str))
            .collect();
        let column = Column::categorical(&values);
        if !column.is_constant() {
            out.push(Attribute {
                name: name.clone(),
                column,
            });
        }
    }
    out
}

/// The syscall entries and transitions present in every run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Common {
    /// Entry names (`read`, `read@socket`).
    pub entries: Vec<String>,
    /// Transition names (`read->write`).
    pub transitions: Vec<String>,
}

#[cfg(test)]
mod tests {
    use agent_core::RunId;
    use agent_core::{Arch, Collector, Exit, Facts, FdKind, RunRecord, SyscallEvent};

    use super::*;

    /// An unknown number kept apart makes attributes named as strace names
    /// it; the `<unknown>` entry (further numbers) makes none.
    #[test]
    fn unknown_numbers_kept_apart_are_attributes() {
        let mut c: Box<Collector> = Box::new(Collector::new(0));
        for (i, nr) in [0x1f0u32, 0x1f0, 0x3ff, 0x3fe, 0x3fd, 0x3fc, 0x3fb, 0]
            .iter()
            .enumerate()
        {
            let at = 1_000 * i as u64;
            c.record(&SyscallEvent {
                tid: 1,
                arch: Arch::X86_64,
                nr: *nr,
                args: [0; 6],
                ret: if *nr == 0 { 0 } else { -38 },
                entry_ns: at,
                exit_ns: at + 10,
                fd_kind: FdKind::None,
                peer: None,
            });
        }
        let run = RunRecord::new(0, 1, Exit::Code(0), Arch::X86_64);
        let summary = c.summarize(RunId([0; 16]), run, Facts::new());
        let p = profile(&summary, &Mapping::default_map(), None);
        let names: Vec<&str> = p.entries.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "read",
                "syscall_0x1f0",
                "syscall_0x3fd",
                "syscall_0x3fe",
                "syscall_0x3ff"
            ]
        );
        assert_eq!(p.entries["syscall_0x1f0"].count, 2);
        assert!(p.transitions.contains_key("syscall_0x1f0->syscall_0x1f0"));
    }
}
