//! Benchmark of the unsupervised diagnosis (`--method rpca`) against the
//! issue's target: 10 000 runs × 500 syscall attributes in < 10 s. Times
//! the robust PCA of one anomalous category of that size (`decompose`: the
//! median offsets, principal component pursuit to the default tolerance,
//! cos θ and the large entries of E), and the whole path from summaries
//! (profiles, categories, CV, robust PCA, ranking) for 10 000 full
//! summaries (63 syscall entries each, the most a summary holds).
//!
//! Run with `scripts/bench-diagnose-rpca` (or `cargo bench -p diagnose
//! --bench rpca`). The data is synthetic, made here with a fixed seed; the
//! time to make it is not counted.

use std::time::{Duration, Instant};

use agent_core::summary::{RunRecord, Summary, SyscallSummary, MAX_SUMMARY_SYSCALLS};
use agent_core::{Arch, Exit, Facts, FdKind, Key, RunId, SyscallId};
use diagnose::rpca::analysis::decompose;
use diagnose::rpca::{self, RpcaOptions};
use faer::Mat;

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
}

/// Syscalls slowed in the slow runs, and the share of slow runs.
const SLOW_SYSCALLS: usize = 5;
const SLOW_SHARE: f64 = 0.03;

/// A category's matrix: each syscall's seconds are its base time (spread
/// over four orders of magnitude) times the run's load and size (two
/// factors: rank 2) with 10 % noise; in 3 % of the runs the first five
/// syscalls take 20 times as long. Also each run's duration, and which runs
/// are slow.
fn matrix(runs: usize, syscalls: usize, seed: u64) -> (Mat<f64>, Vec<f64>, Vec<bool>) {
    let mut rng = Rng(seed);
    // The slowed syscalls are among the longest (10 ms), so that 20 times
    // as long is a sizable share of a run (the entry threshold).
    let base: Vec<f64> = (0..syscalls)
        .map(|j| {
            let b = 1e-6 * 10f64.powf(4.0 * rng.unit());
            if j < SLOW_SYSCALLS {
                1e-2
            } else {
                b
            }
        })
        .collect();
    let size_weight: Vec<f64> = (0..syscalls).map(|_| rng.unit()).collect();
    let slow: Vec<bool> = (0..runs).map(|_| rng.unit() < SLOW_SHARE).collect();
    let factors: Vec<(f64, f64)> = (0..runs)
        .map(|_| (0.8 + 0.4 * rng.unit(), 0.5 + rng.unit()))
        .collect();
    let mut noise = Rng(seed ^ 0x9e37_79b9);
    let m = Mat::from_fn(runs, syscalls, |i, j| {
        let (load, size) = factors[i];
        let mut t = base[j] * load * (1.0 + size_weight[j] * size);
        t *= 1.0 + 0.1 * (noise.unit() - 0.5);
        if slow[i] && j < SLOW_SYSCALLS {
            t *= 20.0;
        }
        t
    });
    let durations = (0..runs)
        .map(|i| 1.3 * (0..syscalls).map(|j| m[(i, j)]).sum::<f64>())
        .collect();
    (m, durations, slow)
}

/// A full summary of one program: 63 syscall entries (the most a summary
/// holds besides its "other" entry), the same in every run; slow runs
/// spend 200 times as long in the first two (about 7 times the run).
fn summary(rng: &mut Rng, slow: bool) -> Summary {
    let mut syscalls = heapless::Vec::new();
    let keys: Vec<Key> = (2u16..)
        .map(SyscallId)
        .filter(|id| id.name().is_some())
        .take(MAX_SUMMARY_SYSCALLS - 1)
        .map(|id| Key {
            id,
            fd_kind: FdKind::File,
        })
        .collect();
    let mut total = 0u64;
    for (k, key) in keys.into_iter().enumerate() {
        let count = 100 + (rng.unit() * 20.0) as u64;
        let factor = if slow && k < 2 { 200.0 } else { 1.0 };
        let total_ns = (count as f64 * 10_000.0 * (1.0 + 0.2 * rng.unit()) * factor) as u64;
        total += total_ns;
        let _ = syscalls.push(SyscallSummary {
            key,
            count,
            total_ns,
            spread: None,
            failures: None,
            consecutive: None,
            result_sum: 0,
            param_sum: None,
        });
    }
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&rng.next().to_le_bytes());
    id[8..].copy_from_slice(&rng.next().to_le_bytes());
    let mut facts = Facts::new();
    facts.program = agent_core::facts::truncated("bench");
    Summary {
        id: RunId(id),
        run: RunRecord::new(0, total + total / 3, Exit::Code(0), Arch::X86_64),
        facts,
        truncated: false,
        syscalls,
        transitions: heapless::Vec::new(),
        ..Summary::empty()
    }
}

fn report(what: &str, took: Duration, target: Duration, detail: &str) {
    println!(
        "{what:<52} {:>8.3} s   target < {:>4.1} s   ({:.1}% of target)  {detail}",
        took.as_secs_f64(),
        target.as_secs_f64(),
        100.0 * took.as_secs_f64() / target.as_secs_f64()
    );
}

fn main() {
    println!(
        "diagnose rpca benchmark ({} threads; defaults: tolerance 1e-7, ρ 1.5, λ 1/√max(m, n))",
        rayon::current_num_threads()
    );
    let options = RpcaOptions::default();
    let (runs, syscalls) = (10_000, 500);
    let t = Instant::now();
    let (m, mut durations, slow) = matrix(runs, syscalls, 3);
    let made = t.elapsed();
    durations.sort_by(f64::total_cmp);
    let median = durations[runs / 2];
    let t = Instant::now();
    let found = decompose(&m, median, &options).expect("decomposition");
    let took = t.elapsed();
    // How well the planted slow runs were found in the slowed syscalls,
    // and how many other entries were named.
    let (mut hits, mut false_hits) = (0usize, 0usize);
    for (j, column) in found.columns.iter().enumerate() {
        for &(r, _) in &column.large_rows {
            if j < SLOW_SYSCALLS && slow[r] {
                hits += 1;
            } else {
                false_hits += 1;
            }
        }
    }
    let planted = SLOW_SYSCALLS * slow.iter().filter(|s| **s).count();
    let anomalous = found
        .columns
        .iter()
        .filter(|c| !c.large_rows.is_empty())
        .count();
    report(
        &format!("robust PCA of one category, {runs} runs x {syscalls} syscalls"),
        took,
        Duration::from_secs(10),
        &format!(
            "rank {}, {} iterations, converged {}; {anomalous} syscalls anomalous, {hits}/{planted} planted slow entries found, {false_hits} others (data made in {:.1} s, not counted)",
            found.pcp.rank,
            found.pcp.iterations,
            found.pcp.converged,
            made.as_secs_f64()
        ),
    );

    let mut rng = Rng(11);
    let summaries: Vec<Summary> = (0..runs)
        .map(|_| {
            let slow = rng.unit() < SLOW_SHARE;
            summary(&mut rng, slow)
        })
        .collect();
    let devices: Vec<String> = (0..runs).map(|i| format!("dev{}", i % 500)).collect();
    let t = Instant::now();
    let d = rpca::analyse(&summaries, &devices, "bench", &options).expect("diagnosis");
    let took = t.elapsed();
    let c = &d.categories[0];
    report(
        &format!("summaries to suspects, {runs} runs x 63 syscalls"),
        took,
        Duration::from_secs(10),
        &format!(
            "{} categories, CV {:.2}, {} anomalous syscalls, {} suspects",
            d.categories.len(),
            c.category.cv,
            c.syscalls.iter().filter(|s| s.anomalous).count(),
            d.suspects.len()
        ),
    );
}
