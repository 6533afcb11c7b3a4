//! The whole unsupervised diagnosis of a set of runs: categories, their
//! dispersion, robust PCA of the anomalous ones, the anomalous syscalls and
//! the devices where they were slow, and the ranking across categories.

use std::collections::BTreeMap;

use agent_core::Summary;
use anyhow::bail;
use faer::Mat;
use rayon::prelude::*;

use super::categories::{self, Category, RunMethods};
use super::pcp::{self, PcpParams};
use crate::attributes;
use crate::mapping::Mapping;

/// How to diagnose.
#[derive(Debug, Clone)]
pub struct RpcaOptions {
    /// Syscall names merged before methods are made.
    pub mapping: Mapping,
    /// α: a category whose run durations have a coefficient of variation
    /// above this is anomalous.
    pub cv_threshold: f64,
    /// A syscall of an anomalous category is anomalous when cos θ between
    /// its column of `M` and of `L` is below this.
    pub cos_threshold: f64,
    /// An entry of `E` is large when it is at least this times the
    /// category's median run duration (positive: more time than `L`
    /// explains).
    pub entry_threshold: f64,
    /// Categories with fewer runs are not analysed (their dispersion and a
    /// low-rank fit say little).
    pub min_runs: usize,
    /// The robust PCA's parameters.
    pub pcp: PcpParams,
}

/// α's default (see `docs/rpca.md`): a category where a tenth of the runs
/// take twice as long as the others has a CV of 0.27, so a slowdown of
/// that size is looked at. α only chooses what is decomposed; what is
/// reported is decided by cos θ and the entries of E.
pub const DEFAULT_CV_THRESHOLD: f64 = 0.25;
/// cos θ's default threshold: a column whose departure from `L` is, like a
/// coefficient of variation, about 1/3 of its size or more
/// (cos θ = 1/√(1 + 0.33²) ≈ 0.95).
pub const DEFAULT_COS_THRESHOLD: f64 = 0.95;
/// Large entries of `E`: at least a tenth of the category's median run
/// duration. A run over-dispersed at α = 0.25 is a quarter or more slower
/// than typical; a tenth of a typical run in one syscall is a sizable part
/// of that, while the jitter of short calls (page faults in `mmap`,
/// `execve`: up to 7 % of a run in the demo) stays below it.
pub const DEFAULT_ENTRY_THRESHOLD: f64 = 0.1;
/// Fewest runs in an analysed category.
pub const DEFAULT_MIN_RUNS: usize = 5;

impl Default for RpcaOptions {
    fn default() -> Self {
        RpcaOptions {
            mapping: Mapping::default_map(),
            cv_threshold: DEFAULT_CV_THRESHOLD,
            cos_threshold: DEFAULT_COS_THRESHOLD,
            entry_threshold: DEFAULT_ENTRY_THRESHOLD,
            min_runs: DEFAULT_MIN_RUNS,
            pcp: PcpParams::default(),
        }
    }
}

/// Runs of one device with a large entry of `E` in one syscall's column.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceFinding {
    /// The device.
    pub device: String,
    /// The runs (ids, 32 hex digits) with a large entry.
    pub runs: Vec<String>,
    /// The device's runs in the category.
    pub device_runs: usize,
    /// The sum of those entries of `E`, seconds: time spent in the syscall
    /// beyond what the low-rank part explains.
    pub excess_s: f64,
}

/// One syscall of an analysed category.
#[derive(Debug, Clone, PartialEq)]
pub struct SyscallFinding {
    /// Method name (`read@tcp`).
    pub name: String,
    /// cos θ between its columns of `M` and `L` (1: fully explained by `L`).
    pub cos_theta: f64,
    /// Whether cos θ is below the threshold and its column of `E` holds a
    /// large entry: the syscall explains part of the slow runs.
    pub anomalous: bool,
    /// For a syscall below the cos θ threshold: the devices with large
    /// entries of `E`, most runs first (none: its departures from `L` are
    /// too small to matter, the noise of short calls).
    pub devices: Vec<DeviceFinding>,
}

/// How the robust PCA of a category went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcpOutcome {
    /// λ used.
    pub lambda: f64,
    /// Rank of `L`.
    pub rank: usize,
    /// Iterations made.
    pub iterations: usize,
    /// `‖M − L − E‖_F / ‖M‖_F`.
    pub residual: f64,
    /// Whether it reached the tolerance.
    pub converged: bool,
}

/// One category and what was found in it.
#[derive(Debug, Clone, PartialEq)]
pub struct CategoryFinding {
    /// The category.
    pub category: Category,
    /// Its runs' ids, in the category's order.
    pub run_ids: Vec<String>,
    /// Whether its CV is above α (with enough runs to say).
    pub anomalous: bool,
    /// Why it was not analysed, when its CV is above α but it has too few
    /// runs.
    pub too_few_runs: bool,
    /// The robust PCA, for an anomalous category.
    pub pcp: Option<PcpOutcome>,
    /// For an anomalous category: the seconds from which an entry of E is
    /// large (the entry threshold times the median run duration).
    pub large_entry_s: f64,
    /// For an anomalous category: every syscall, smallest cos θ first.
    pub syscalls: Vec<SyscallFinding>,
}

/// A (syscall, device) found anomalous in one or more categories.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspect {
    /// Method name.
    pub syscall: String,
    /// Device.
    pub device: String,
    /// Categories where it was found anomalous.
    pub categories: usize,
    /// Runs with a large entry, over those categories.
    pub runs: usize,
    /// Sum of those entries, seconds.
    pub excess_s: f64,
}

/// What the diagnosis found.
#[derive(Debug, Clone)]
pub struct RpcaDiagnosis {
    /// Runs diagnosed.
    pub runs: usize,
    /// Where each run's device name came from, in words.
    pub device_source: String,
    /// The thresholds used.
    pub cv_threshold: f64,
    /// cos θ threshold.
    pub cos_threshold: f64,
    /// Large-entry threshold.
    pub entry_threshold: f64,
    /// Fewest runs analysed.
    pub min_runs: usize,
    /// Every category, largest first.
    pub categories: Vec<CategoryFinding>,
    /// (syscall, device) pairs, most often anomalous first.
    pub suspects: Vec<Suspect>,
}

/// The run's methods (see [`categories`]).
fn run_methods(summary: &Summary, mapping: &Mapping) -> RunMethods {
    let profile = attributes::profile(summary, mapping, None);
    RunMethods {
        program: summary.facts.program.to_string(),
        seconds: categories::methods(&profile),
        duration_s: summary.run.duration_ns as f64 / 1e9,
    }
}

/// The median of `values` (which it sorts).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// cos θ between two columns (the paper's eq. 1): `|m·l| / (‖m‖ ‖l‖)`;
/// 1 for a column of zeros (nothing to explain), 0 when `l` is all zero
/// but `m` is not (nothing of it explained).
pub fn cos_theta(m: &[f64], l: &[f64]) -> f64 {
    let dot: f64 = m.iter().zip(l).map(|(a, b)| a * b).sum();
    let nm = m.iter().map(|a| a * a).sum::<f64>().sqrt();
    let nl = l.iter().map(|a| a * a).sum::<f64>().sqrt();
    if nm == 0.0 {
        1.0
    } else if nl == 0.0 {
        0.0
    } else {
        (dot.abs() / (nm * nl)).min(1.0)
    }
}

/// One column of a decomposed category matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnFinding {
    /// cos θ between the column of `M` and of `L`.
    pub cos_theta: f64,
    /// For a column below the cos θ threshold: its rows whose entry of `E`
    /// is large (and positive), with the entry, seconds.
    pub large_rows: Vec<(usize, f64)>,
}

/// What the robust PCA of one category's matrix found.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixFinding {
    /// How the robust PCA went.
    pub pcp: PcpOutcome,
    /// The seconds from which an entry of `E` is large.
    pub large_entry_s: f64,
    /// One per column, in column order.
    pub columns: Vec<ColumnFinding>,
}

/// The robust PCA of one category's matrix `m` (runs × syscalls, seconds),
/// whose runs' median duration is `median_duration_s`.
pub fn decompose(
    m: &Mat<f64>,
    median_duration_s: f64,
    options: &RpcaOptions,
) -> anyhow::Result<MatrixFinding> {
    let (rows, cols) = (m.nrows(), m.ncols());
    // The category's median run is its normal behaviour: what is
    // decomposed is M less each syscall's median seconds, and that offset
    // (rank one) is added back to L. Without it, L follows whatever has the
    // most energy, and in an over-dispersed category that is the slow runs
    // themselves as soon as they are more than a few (their columns are
    // then partly "explained" and slow runs are missed: without it, the
    // mixed-programs and synthetic cases of tests/rpca.rs fail).
    let offsets: Vec<f64> = (0..cols)
        .map(|c| median(&mut m.col_as_slice(c).to_vec()))
        .collect();
    let centred = Mat::from_fn(rows, cols, |r, c| m[(r, c)] - offsets[c]);
    let d = pcp::pcp(&centred, &options.pcp)?;
    // Seconds stay seconds: a syscall's weight is the time it takes, so the
    // scheduling noise of calls of microseconds cannot outweigh the calls
    // a slow run actually waits in. An entry of E matters when it is a
    // share of a typical run.
    let large = options.entry_threshold * median_duration_s;
    let columns = (0..cols)
        .map(|c| {
            let low: Vec<f64> = d
                .low_rank
                .col_as_slice(c)
                .iter()
                .map(|l| l + offsets[c])
                .collect();
            let cos_theta = cos_theta(m.col_as_slice(c), &low);
            let mut large_rows = Vec::new();
            if cos_theta < options.cos_threshold {
                for (r, e) in d.sparse.col_as_slice(c).iter().enumerate() {
                    // Only time beyond what L explains names a run: a run
                    // faster than its peers is not where they slow.
                    if *e >= large && *e > 0.0 {
                        large_rows.push((r, *e));
                    }
                }
            }
            ColumnFinding {
                cos_theta,
                large_rows,
            }
        })
        .collect();
    Ok(MatrixFinding {
        pcp: PcpOutcome {
            lambda: d.lambda,
            rank: d.rank,
            iterations: d.iterations,
            residual: d.residual,
            converged: d.converged,
        },
        large_entry_s: large,
        columns,
    })
}

/// Robust PCA of one anomalous category: its syscalls ranked by cos θ.
fn analyse_category(
    category: &Category,
    runs: &[RunMethods],
    run_ids: &[String],
    devices: &[String],
    options: &RpcaOptions,
) -> anyhow::Result<(PcpOutcome, f64, Vec<SyscallFinding>)> {
    let rows = category.runs.len();
    let cols = category.signature.len();
    // Every run of the category has exactly the signature's methods, so a
    // run's seconds in key order are its row.
    let mut m = Mat::<f64>::zeros(rows, cols);
    for (r, &run) in category.runs.iter().enumerate() {
        for (c, s) in runs[run].seconds.values().enumerate() {
            m[(r, c)] = *s;
        }
    }
    let mut durations: Vec<f64> = category.runs.iter().map(|&i| runs[i].duration_s).collect();
    let found = decompose(&m, median(&mut durations), options)?;
    let mut device_runs: BTreeMap<&str, usize> = BTreeMap::new();
    for &run in &category.runs {
        *device_runs.entry(devices[run].as_str()).or_default() += 1;
    }
    let mut syscalls: Vec<SyscallFinding> = found
        .columns
        .iter()
        .enumerate()
        .map(|(c, column)| {
            let mut by_device: BTreeMap<&str, DeviceFinding> = BTreeMap::new();
            for &(r, e) in &column.large_rows {
                let run = category.runs[r];
                let device = devices[run].as_str();
                let f = by_device.entry(device).or_insert_with(|| DeviceFinding {
                    device: device.to_string(),
                    runs: Vec::new(),
                    device_runs: device_runs[device],
                    excess_s: 0.0,
                });
                f.runs.push(run_ids[run].clone());
                f.excess_s += e;
            }
            let mut devices_found: Vec<DeviceFinding> = by_device.into_values().collect();
            devices_found.sort_by(|a, b| {
                b.runs
                    .len()
                    .cmp(&a.runs.len())
                    .then_with(|| b.excess_s.total_cmp(&a.excess_s))
                    .then_with(|| a.device.cmp(&b.device))
            });
            SyscallFinding {
                name: category.signature[c].clone(),
                cos_theta: column.cos_theta,
                anomalous: !devices_found.is_empty(),
                devices: devices_found,
            }
        })
        .collect();
    syscalls.sort_by(|a, b| {
        a.cos_theta
            .total_cmp(&b.cos_theta)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok((found.pcp, found.large_entry_s, syscalls))
}

/// Counts each (syscall, device) over the categories where it was found
/// anomalous; most categories first, then most runs, most excess seconds.
fn rank_suspects(categories: &[CategoryFinding]) -> Vec<Suspect> {
    let mut by_pair: BTreeMap<(&str, &str), Suspect> = BTreeMap::new();
    for c in categories {
        for s in c.syscalls.iter().filter(|s| s.anomalous) {
            for d in &s.devices {
                let e = by_pair
                    .entry((s.name.as_str(), d.device.as_str()))
                    .or_insert_with(|| Suspect {
                        syscall: s.name.clone(),
                        device: d.device.clone(),
                        categories: 0,
                        runs: 0,
                        excess_s: 0.0,
                    });
                e.categories += 1;
                e.runs += d.runs.len();
                e.excess_s += d.excess_s;
            }
        }
    }
    let mut out: Vec<Suspect> = by_pair.into_values().collect();
    out.sort_by(|a, b| {
        b.categories
            .cmp(&a.categories)
            .then_with(|| b.runs.cmp(&a.runs))
            .then_with(|| b.excess_s.total_cmp(&a.excess_s))
            .then_with(|| a.syscall.cmp(&b.syscall))
            .then_with(|| a.device.cmp(&b.device))
    });
    out
}

/// Diagnoses `summaries` without labels. `devices` names each run's device
/// (one per summary); `device_source` says where the names came from.
pub fn analyse(
    summaries: &[Summary],
    devices: &[String],
    device_source: &str,
    options: &RpcaOptions,
) -> anyhow::Result<RpcaDiagnosis> {
    if summaries.len() != devices.len() {
        bail!(
            "{} runs but {} device names",
            summaries.len(),
            devices.len()
        );
    }
    if !(options.cv_threshold.is_finite() && options.cv_threshold >= 0.0) {
        bail!("the CV threshold must be a number of at least 0");
    }
    if !(options.cos_threshold.is_finite() && (0.0..=1.0).contains(&options.cos_threshold)) {
        bail!("the cos θ threshold must be between 0 and 1");
    }
    if !(options.entry_threshold.is_finite() && options.entry_threshold >= 0.0) {
        bail!("the entry threshold must be a number of at least 0");
    }
    let runs: Vec<RunMethods> = summaries
        .par_iter()
        .map(|s| run_methods(s, &options.mapping))
        .collect();
    let run_ids: Vec<String> = summaries.iter().map(|s| s.id.to_string()).collect();
    let min_runs = options.min_runs.max(2);
    let categories = categories::categorise(&runs)
        .into_par_iter()
        .map(|category| {
            let over = category.cv > options.cv_threshold;
            let enough = category.runs.len() >= min_runs;
            let ids = category.runs.iter().map(|&i| run_ids[i].clone()).collect();
            let (pcp, large_entry_s, syscalls) = if over && enough {
                let (outcome, large, found) =
                    analyse_category(&category, &runs, &run_ids, devices, options)?;
                (Some(outcome), large, found)
            } else {
                (None, 0.0, Vec::new())
            };
            Ok(CategoryFinding {
                anomalous: over && enough,
                too_few_runs: over && !enough,
                category,
                run_ids: ids,
                pcp,
                large_entry_s,
                syscalls,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let suspects = rank_suspects(&categories);
    Ok(RpcaDiagnosis {
        runs: summaries.len(),
        device_source: device_source.to_string(),
        cv_threshold: options.cv_threshold,
        cos_threshold: options.cos_threshold,
        entry_threshold: options.entry_threshold,
        min_runs,
        categories,
        suspects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cos_theta_of_known_columns() {
        assert!((cos_theta(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-12);
        assert!(cos_theta(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-12);
        // The paper takes the magnitude of the product.
        assert!((cos_theta(&[1.0, 1.0], &[-1.0, -1.0]) - 1.0).abs() < 1e-12);
        assert_eq!(cos_theta(&[0.0, 0.0], &[1.0, 1.0]), 1.0);
        assert_eq!(cos_theta(&[1.0, 0.0], &[0.0, 0.0]), 0.0);
        let c = cos_theta(&[1.0, 1.0, 1.0, 5.0], &[1.0, 1.0, 1.0, 1.0]);
        assert!((c - 8.0 / (28f64.sqrt() * 2.0)).abs() < 1e-12, "{c}");
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }
}
