//! Benchmark of the rule search (Algorithm 1: up to 10 trees) against the
//! issue's targets: 200 runs × 1 000 attributes in < 0.5 s, 100 000 runs ×
//! 1 000 attributes in < 60 s. Also times the whole path from summaries
//! (profiles, intersection, attributes, rules) for 200 and 5 000 full
//! summaries (about 450 attributes each: a summary holds at most 64 syscall
//! entries and 64 transitions).
//!
//! Run with `scripts/bench-diagnose` (or `cargo bench -p diagnose --bench
//! rules`; `-- --quick` skips the 100 000-run case). The data is synthetic,
//! made here with a fixed seed: a few attributes that tell good from bad
//! runs (overlapping, so the trees grow several levels), the rest noise,
//! half of it integer counts with many ties.

use std::time::{Duration, Instant};

use agent_core::summary::{
    Consecutive, Failures, RunRecord, Summary, SyscallSummary, Transition, MAX_SUMMARY_SYSCALLS,
    MAX_SUMMARY_TRANSITIONS,
};
use agent_core::{Arch, Exit, Facts, FdKind, Key, SyscallId};
use diagnose::analysis::{self, Options};
use diagnose::dataset::{Attribute, Column, Dataset};
use diagnose::label::Labelling;
use diagnose::rules::top_rules;
use diagnose::tree::TreeParams;

/// xorshift64*: a fixed-seed generator, so every run measures the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Roughly normal (sum of uniforms).
    fn normal(&mut self) -> f64 {
        (0..6).map(|_| self.unit()).sum::<f64>() - 3.0
    }
}

/// `runs` rows of `attributes` numeric attributes; 30 % of runs bad.
fn synthetic(runs: usize, attributes: usize, seed: u64) -> Dataset {
    let mut rng = Rng(seed);
    let labels: Vec<u32> = (0..runs).map(|_| u32::from(rng.unit() < 0.3)).collect();
    let informative = 5;
    let columns = (0..attributes)
        .map(|a| {
            let values: Vec<f64> = labels
                .iter()
                .map(|&l| {
                    if a < informative {
                        // Bad runs shifted by 1 to 3 standard deviations.
                        let shift = if l == 1 { 1.0 + a as f64 * 0.5 } else { 0.0 };
                        1000.0 + 100.0 * (rng.normal() + shift)
                    } else if a % 2 == 0 {
                        // A count: integers, many ties.
                        (rng.unit() * 200.0).floor()
                    } else {
                        rng.unit() * 1e6
                    }
                })
                .collect();
            Attribute {
                name: format!("a{a}"),
                column: Column::Numeric(values),
            }
        })
        .collect();
    Dataset::new(columns, labels, vec!["good".into(), "bad".into()]).expect("valid dataset")
}

/// A full summary: as many (syscall, fd kind) entries as it holds (16
/// syscalls, each on no fd and on a file, a socket and a pipe) and as many
/// transitions: the most attributes real summaries give (about 450). Bad
/// runs call `read` more often and get less per call.
fn synthetic_summary(rng: &mut Rng, bad: bool) -> Summary {
    let mut syscalls = heapless::Vec::new();
    let names: Vec<SyscallId> = (2u16..)
        .map(SyscallId)
        .filter(|id| id.name().is_some())
        .take(40)
        .collect();
    let mut keys: Vec<Key> = Vec::new();
    for id in &names {
        for fd_kind in [FdKind::None, FdKind::File, FdKind::Socket, FdKind::Pipe] {
            keys.push(Key { id: *id, fd_kind });
        }
    }
    keys.sort();
    // As many entries as a summary holds (the "other" entry's place left).
    for key in keys.into_iter().take(MAX_SUMMARY_SYSCALLS - 1) {
        let scale = if bad && key.id.0 == 2 { 8.0 } else { 1.0 };
        let count = ((1000.0 + 200.0 * rng.normal()) * scale).max(2.0) as u64;
        let errors = (rng.unit() * 10.0) as u64;
        let consecutive = count / 2 + (rng.unit() * 50.0) as u64;
        let _ = syscalls.push(SyscallSummary {
            key,
            count,
            total_ns: (count as f64 * (2000.0 + 500.0 * rng.normal())).max(1.0) as u64,
            spread: None,
            failures: (errors > 0).then(|| Failures {
                errors,
                errnos: heapless::Vec::new(),
                errno_other: errors,
                first_ns: 1,
                last_ns: 2,
            }),
            consecutive: Some(Consecutive {
                count: consecutive,
                gap_sum_ns: consecutive * (1000 + (rng.unit() * 500.0) as u64),
            }),
            result_sum: (count as f64 * 8192.0 / scale * (1.0 + 0.1 * rng.normal())) as i128,
            param_sum: key.id.size_arg().map(|_| count as u128 * 8192),
        });
    }
    let mut transitions = heapless::Vec::new();
    for i in 0..MAX_SUMMARY_TRANSITIONS as u16 {
        let _ = transitions.push(Transition {
            from: names[(i / 8) as usize],
            to: names[(i % 8) as usize],
            count: 100 + (rng.unit() * 100.0) as u64,
            gap_sum_ns: 100_000 + (rng.unit() * 100_000.0) as u64,
        });
    }
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&rng.next().to_le_bytes());
    id[8..].copy_from_slice(&rng.next().to_le_bytes());
    Summary {
        id: agent_core::RunId(id),
        run: RunRecord::new(
            0,
            if bad { 2_000_000_000 } else { 200_000_000 },
            Exit::Code(0),
            Arch::X86_64,
        ),
        facts: Facts::new(),
        truncated: false,
        syscalls,
        transitions,
        ..Summary::empty()
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time_rules(data: &Dataset, reps: usize) -> (Duration, usize, f64) {
    let params = TreeParams::default();
    let mut times = Vec::new();
    let mut last = (0, 0.0);
    for _ in 0..reps {
        let t = Instant::now();
        let rules = top_rules(data, &params, 10);
        times.push(t.elapsed());
        last = (rules.len(), rules.first().map_or(0.0, |r| r.accuracy));
    }
    (median(times), last.0, last.1)
}

fn report(what: &str, took: Duration, target: Duration, detail: &str) {
    println!(
        "{what:<52} {:>9.3} s   target < {:>5.1} s   ({:.1}% of target)  {detail}",
        took.as_secs_f64(),
        target.as_secs_f64(),
        100.0 * took.as_secs_f64() / target.as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--big N`: only the large case, with N runs (for profiling).
    let big_runs: Option<usize> = args
        .iter()
        .position(|a| a == "--big")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok());
    if let Some(runs) = big_runs {
        let big = synthetic(runs, 1000, 2);
        let (t, n, acc) = time_rules(&big, 1);
        println!(
            "rules, {runs} runs x 1000 attributes: {:.3} s, {n} rules, first accuracy {acc:.3}",
            t.as_secs_f64()
        );
        return;
    }
    println!(
        "diagnose rules benchmark ({} threads; Algorithm 1, top 10, min leaf 1, max depth 5)",
        rayon::current_num_threads()
    );

    let small = synthetic(200, 1000, 1);
    let (t, n, acc) = time_rules(&small, 11);
    report(
        "rules, 200 runs x 1000 attributes (median of 11)",
        t,
        Duration::from_millis(500),
        &format!("{n} rules, first accuracy {acc:.3}"),
    );

    let mut rng = Rng(7);
    for runs in [200usize, 5000] {
        let summaries: Vec<Summary> = (0..runs)
            .map(|i| synthetic_summary(&mut rng, i % 3 == 0))
            .collect();
        let labels: Vec<u32> = (0..runs).map(|i| u32::from(i % 3 == 0)).collect();
        let reps = if runs <= 200 { 5 } else { 1 };
        let mut times = Vec::new();
        let mut attrs = 0;
        for _ in 0..reps {
            let labelling = Labelling {
                method: "given".into(),
                classes: vec!["good".into(), "bad".into()],
                labels: labels.clone(),
                clusters: None,
            };
            let t = Instant::now();
            let d =
                analysis::diagnose(&summaries, labelling, &Options::default()).expect("diagnosis");
            times.push(t.elapsed());
            attrs = d.dataset.attributes.len();
        }
        let target = if runs <= 200 {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(60)
        };
        report(
            &format!("summaries to rules, {runs} runs ({attrs} attributes)"),
            median(times),
            target,
            "",
        );
    }

    if !quick {
        let t = Instant::now();
        let big = synthetic(100_000, 1000, 2);
        let made = t.elapsed();
        let (t, n, acc) = time_rules(&big, 1);
        report(
            "rules, 100000 runs x 1000 attributes",
            t,
            Duration::from_secs(60),
            &format!(
                "{n} rules, first accuracy {acc:.3} (data made in {:.1} s, not counted)",
                made.as_secs_f64()
            ),
        );
    }
}
