//! The JSON report.

use serde_json::{json, Value};

use crate::rpca::analysis::{CategoryFinding, RpcaDiagnosis, SyscallFinding};

fn syscall_json(s: &SyscallFinding) -> Value {
    json!({
        "name": s.name,
        "cos_theta": s.cos_theta,
        "anomalous": s.anomalous,
        "devices": s.devices.iter().map(|d| json!({
            "device": d.device,
            "runs": d.runs,
            "device_runs": d.device_runs,
            "excess_s": d.excess_s,
        })).collect::<Vec<_>>(),
    })
}

fn category_json(c: &CategoryFinding) -> Value {
    let cat = &c.category;
    json!({
        "program": cat.program,
        "signature": cat.signature,
        "runs": cat.runs.len(),
        "run_ids": c.run_ids,
        "mean_duration_s": cat.mean_duration_s,
        "cv": cat.cv,
        "anomalous": c.anomalous,
        "too_few_runs": c.too_few_runs,
        "large_entry_s": c.large_entry_s,
        "pcp": c.pcp.map(|p| json!({
            "lambda": p.lambda,
            "rank": p.rank,
            "iterations": p.iterations,
            "residual": p.residual,
            "converged": p.converged,
        })),
        "syscalls": c.syscalls.iter().map(syscall_json).collect::<Vec<_>>(),
    })
}

/// The JSON report: `{"method": "rpca", "runs", "thresholds": {...},
/// "categories": [{"program", "signature", "runs", "cv", "anomalous",
/// "syscalls": [{"name", "cos_theta", "anomalous", "devices": [...]}]}],
/// "suspects": [{"syscall", "device", "categories", "runs", "excess_s"}]}`.
pub fn json(d: &RpcaDiagnosis) -> Value {
    json!({
        "method": "rpca",
        "runs": d.runs,
        "devices_from": d.device_source,
        "thresholds": {
            "cv": d.cv_threshold,
            "cos_theta": d.cos_threshold,
            "entry": d.entry_threshold,
            "min_runs": d.min_runs,
        },
        "categories": d.categories.iter().map(category_json).collect::<Vec<_>>(),
        "suspects": d.suspects.iter().map(|s| json!({
            "syscall": s.syscall,
            "device": s.device,
            "categories": s.categories,
            "runs": s.runs,
            "excess_s": s.excess_s,
        })).collect::<Vec<_>>(),
    })
}
