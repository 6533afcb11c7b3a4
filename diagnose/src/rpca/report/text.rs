//! The readable report.

use std::fmt::Write as _;

use crate::fmt::format_number;
use crate::rpca::analysis::{CategoryFinding, RpcaDiagnosis, SyscallFinding};

/// Syscalls listed per anomalous category beyond the anomalous ones, for
/// context (the rest are in `--json`).
const NEXT_SHOWN: usize = 3;
/// Categories listed in full; the rest are counted.
const CATEGORIES_SHOWN: usize = 20;

/// "+1.23 s".
fn excess_seconds(s: f64) -> String {
    format!("+{} s", format_number(s))
}

fn syscall_line(o: &mut String, s: &SyscallFinding) {
    let _ = write!(o, "    {:<24} cos θ {:.3}", s.name, s.cos_theta);
    if !s.devices.is_empty() {
        let parts: Vec<String> = s
            .devices
            .iter()
            .map(|d| {
                format!(
                    "{} ({}/{} runs, {})",
                    d.device,
                    d.runs.len(),
                    d.device_runs,
                    excess_seconds(d.excess_s)
                )
            })
            .collect();
        let _ = write!(o, "   {}", parts.join(", "));
    }
    o.push('\n');
}

fn category_block(o: &mut String, n: usize, c: &CategoryFinding, d: &RpcaDiagnosis) {
    let cat = &c.category;
    let state = if c.anomalous {
        "ANOMALOUS"
    } else if c.too_few_runs {
        "over-dispersed, too few runs to analyse"
    } else {
        "normal"
    };
    let _ = writeln!(
        o,
        "{n}. {} ({} syscalls in its signature): {} runs, mean {} s, CV {:.3}: {state}",
        if cat.program.is_empty() {
            "?"
        } else {
            &cat.program
        },
        cat.signature.len(),
        cat.runs.len(),
        format_number(cat.mean_duration_s),
        cat.cv
    );
    let Some(p) = &c.pcp else {
        return;
    };
    let _ = writeln!(
        o,
        "   robust PCA: rank {} of {}, λ {}, {} iterations, residual {}{}",
        p.rank,
        cat.signature.len().min(cat.runs.len()),
        format_number(p.lambda),
        p.iterations,
        format_number(p.residual),
        if p.converged { "" } else { " (NOT converged)" }
    );
    let anomalous: Vec<&SyscallFinding> = c.syscalls.iter().filter(|s| s.anomalous).collect();
    if anomalous.is_empty() {
        let _ = writeln!(
            o,
            "   no anomalous syscall: none below cos θ {} takes {} s or more beyond L in a run",
            d.cos_threshold,
            format_number(c.large_entry_s)
        );
    } else {
        let _ = writeln!(
            o,
            "   anomalous syscalls, smallest cos θ first, with the devices of the runs whose entry of E is +{} s or more:",
            format_number(c.large_entry_s)
        );
        for s in &anomalous {
            syscall_line(o, s);
        }
    }
    let small: Vec<&str> = c
        .syscalls
        .iter()
        .filter(|s| !s.anomalous && s.cos_theta < d.cos_threshold)
        .map(|s| s.name.as_str())
        .collect();
    if !small.is_empty() {
        let _ = writeln!(
            o,
            "   below cos θ {} but never {} s beyond L (jitter of short calls): {}",
            d.cos_threshold,
            format_number(c.large_entry_s),
            small.join(", ")
        );
    }
    let next: Vec<&SyscallFinding> = c
        .syscalls
        .iter()
        .filter(|s| s.cos_theta >= d.cos_threshold)
        .take(NEXT_SHOWN)
        .collect();
    if !next.is_empty() {
        let list: Vec<String> = next
            .iter()
            .map(|s| format!("{} {:.3}", s.name, s.cos_theta))
            .collect();
        let _ = writeln!(o, "   next: {}", list.join(", "));
    }
}

/// The readable report.
pub fn text(d: &RpcaDiagnosis) -> String {
    let mut o = String::new();
    let anomalous = d.categories.iter().filter(|c| c.anomalous).count();
    let _ = writeln!(
        o,
        "Robust PCA diagnosis (CloudDiag, no labels) of {} runs: {} categories (program + syscall signature), {anomalous} anomalous (CV of run durations > {})",
        d.runs,
        d.categories.len(),
        d.cv_threshold
    );
    let _ = writeln!(
        o,
        "  devices: {}; a syscall is anomalous when cos θ < {} and its column of E holds an entry of at least {} times the median run duration",
        d.device_source, d.cos_threshold, d.entry_threshold
    );
    o.push('\n');
    for (i, c) in d.categories.iter().take(CATEGORIES_SHOWN).enumerate() {
        category_block(&mut o, i + 1, c, d);
    }
    if d.categories.len() > CATEGORIES_SHOWN {
        let rest = &d.categories[CATEGORIES_SHOWN..];
        let _ = writeln!(
            o,
            "... and {} more categories ({} runs, {} anomalous; see --json)",
            rest.len(),
            rest.iter().map(|c| c.category.runs.len()).sum::<usize>(),
            rest.iter().filter(|c| c.anomalous).count()
        );
    }
    let small = d
        .categories
        .iter()
        .filter(|c| c.category.runs.len() < d.min_runs)
        .count();
    if small > 0 {
        let _ = writeln!(
            o,
            "  ({small} categories have fewer than {} runs and are not analysed)",
            d.min_runs
        );
    }
    o.push('\n');
    if d.suspects.is_empty() {
        let _ = writeln!(o, "No anomalous syscall on any device.");
    } else {
        let _ = writeln!(
            o,
            "Suspects: (syscall, device) by the number of categories where found anomalous:"
        );
        for s in d.suspects.iter().take(20) {
            let _ = writeln!(
                o,
                "  {:>3}  {:<24} on {:<20} {} runs, {}",
                s.categories,
                s.syscall,
                s.device,
                s.runs,
                excess_seconds(s.excess_s)
            );
        }
        if d.suspects.len() > 20 {
            let _ = writeln!(o, "  ... and {} more (see --json)", d.suspects.len() - 20);
        }
    }
    o
}
