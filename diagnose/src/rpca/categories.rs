//! CloudDiag's categories mapped onto runs: a request is a run, its call
//! tree is the program with its syscall signature, a method is a syscall on
//! one kind of fd, and the method's execution time is the seconds the run
//! spent in that syscall.
//!
//! Methods are named as the attributes of `edge-service diagnose` name
//! syscall entries (after the mapping): `read@tcp` for the calls of `read`
//! on TCP sockets, one such entry per fd kind that has its own suffix
//! (`file`, `socket`, `pipe`, `tcp`, `udp`, `unix`); the calls on no fd or
//! on another kind of fd count under the plain name (`select`, `read`). So
//! every call of a run counts under exactly one method.

use std::collections::BTreeMap;

use crate::attributes::RunProfile;

/// One run reduced to what a category needs.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMethods {
    /// The traced program (the `program` fact).
    pub program: String,
    /// Method -> seconds spent in it; only methods the run called.
    pub seconds: BTreeMap<String, f64>,
    /// The run's duration, seconds (the request's latency).
    pub duration_s: f64,
}

/// The methods of a run's profile and their seconds (see the module).
pub fn methods(profile: &RunProfile) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    // (calls, ns) of each plain name's suffixed entries, to find the rest.
    let mut suffixed: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (name, stats) in &profile.entries {
        if let Some((plain, _kind)) = name.split_once('@') {
            if stats.count > 0 {
                out.insert(name.clone(), stats.total_ns as f64 / 1e9);
            }
            let e = suffixed.entry(plain).or_default();
            e.0 = e.0.saturating_add(stats.count);
            e.1 = e.1.saturating_add(stats.total_ns);
        }
    }
    for (name, stats) in &profile.entries {
        if name.contains('@') {
            continue;
        }
        let (calls, ns) = suffixed.get(name.as_str()).copied().unwrap_or_default();
        if stats.count > calls {
            out.insert(name.clone(), stats.total_ns.saturating_sub(ns) as f64 / 1e9);
        }
    }
    out
}

/// Runs of one program with one syscall signature.
#[derive(Debug, Clone, PartialEq)]
pub struct Category {
    /// The program.
    pub program: String,
    /// The methods every run of the category called, in name order.
    pub signature: Vec<String>,
    /// The runs (indices into the runs given), in the order given.
    pub runs: Vec<usize>,
    /// Mean run duration, seconds.
    pub mean_duration_s: f64,
    /// Coefficient of variation of the run durations.
    pub cv: f64,
}

/// The coefficient of variation of `values`: standard deviation (over `n`,
/// the values being the whole category) divided by the mean; 0 when the
/// mean is 0 or there are no values.
pub fn coefficient_of_variation(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    var.sqrt() / mean.abs()
}

/// Groups runs by program and signature; the largest categories first (then
/// by program and signature, for a stable order).
pub fn categorise(runs: &[RunMethods]) -> Vec<Category> {
    let mut groups: BTreeMap<(&str, Vec<&str>), Vec<usize>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        let signature: Vec<&str> = r.seconds.keys().map(String::as_str).collect();
        groups
            .entry((r.program.as_str(), signature))
            .or_default()
            .push(i);
    }
    let mut out: Vec<Category> = groups
        .into_iter()
        .map(|((program, signature), members)| {
            let durations: Vec<f64> = members.iter().map(|&i| runs[i].duration_s).collect();
            Category {
                program: program.to_string(),
                signature: signature.into_iter().map(str::to_string).collect(),
                mean_duration_s: durations.iter().sum::<f64>() / durations.len() as f64,
                cv: coefficient_of_variation(&durations),
                runs: members,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.runs
            .len()
            .cmp(&a.runs.len())
            .then_with(|| a.program.cmp(&b.program))
            .then_with(|| a.signature.cmp(&b.signature))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attributes::EntryStats;

    fn stats(count: u64, total_ns: u64) -> EntryStats {
        EntryStats {
            count,
            total_ns,
            ..EntryStats::default()
        }
    }

    #[test]
    fn every_call_counts_under_one_method() {
        let mut p = RunProfile::default();
        // 10 reads: 6 on TCP, 4 on no/other fd; select only on no fd.
        p.entries.insert("read".into(), stats(10, 10_000));
        p.entries.insert("read@tcp".into(), stats(6, 9_000));
        p.entries.insert("select".into(), stats(3, 300));
        // All writes on files: no plain `write` method.
        p.entries.insert("write".into(), stats(2, 50));
        p.entries.insert("write@file".into(), stats(2, 50));
        let m = methods(&p);
        let names: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(names, ["read", "read@tcp", "select", "write@file"]);
        assert!((m["read"] - 1e-6).abs() < 1e-15);
        assert!((m["read@tcp"] - 9e-6).abs() < 1e-15);
    }

    #[test]
    fn cv_of_known_values() {
        assert_eq!(coefficient_of_variation(&[]), 0.0);
        assert_eq!(coefficient_of_variation(&[0.0, 0.0]), 0.0);
        assert_eq!(coefficient_of_variation(&[3.0, 3.0, 3.0]), 0.0);
        // Mean 2, standard deviation 1.
        assert!((coefficient_of_variation(&[1.0, 3.0]) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn categories_split_by_program_and_signature() {
        let run = |program: &str, names: &[&str], d: f64| RunMethods {
            program: program.into(),
            seconds: names.iter().map(|n| (n.to_string(), 1.0)).collect(),
            duration_s: d,
        };
        let runs = vec![
            run("wget", &["read@tcp", "write@file"], 1.0),
            run("curl", &["read@tcp", "write@file"], 1.0),
            run("wget", &["read@tcp", "write@file"], 3.0),
            run("wget", &["read@tcp"], 1.0),
        ];
        let c = categorise(&runs);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].program, "wget");
        assert_eq!(c[0].runs, [0, 2]);
        assert_eq!(c[0].signature, ["read@tcp", "write@file"]);
        assert!((c[0].cv - 0.5).abs() < 1e-12);
        assert!((c[0].mean_duration_s - 2.0).abs() < 1e-12);
        assert!(c[1..].iter().all(|c| c.runs.len() == 1 && c.cv == 0.0));
    }
}
