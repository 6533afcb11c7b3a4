//! The JSON report.

use serde_json::{json, Value};

use crate::analysis::Diagnosis;
use crate::rules::Rule;

fn rule_json(r: &Rule, d: &Diagnosis) -> Value {
    let data = &d.dataset;
    json!({
        "rank": r.rank,
        "text": r.text,
        "attributes": r.attributes.iter().map(|a| data.attributes[*a].name.clone()).collect::<Vec<_>>(),
        "accuracy": r.accuracy,
        "paths": r.paths.iter().map(|p| json!({
            "conditions": p.conditions.iter().map(|c| c.text(data)).collect::<Vec<_>>(),
            "class": data.classes[p.class as usize],
            "runs": p.runs,
        })).collect::<Vec<_>>(),
    })
}

/// The JSON report: `{"labels": {...}, "rules": [{"rank", "text",
/// "attributes", "accuracy", "paths"}], "outside_intersection": [...],
/// "time_gap": [{"syscall", "good_mean_s", "bad_mean_s", "share"}],
/// "left_out": {...}, ...}`.
pub fn json(d: &Diagnosis) -> Value {
    let data = &d.dataset;
    let counts = data.class_counts();
    let classes: serde_json::Map<String, Value> = data
        .classes
        .iter()
        .zip(&counts)
        .map(|(c, n)| (c.clone(), json!(n)))
        .collect();
    let runs: serde_json::Map<String, Value> = d
        .run_ids
        .iter()
        .zip(&data.labels)
        .map(|(id, l)| (id.clone(), json!(data.classes[*l as usize])))
        .collect();
    let clusters = d.labelling.clusters.as_ref().map(|c| {
        json!({
            "by": c.by.name(),
            "unit": c.unit,
            "good": [c.good.0, c.good.1],
            "bad": [c.bad.0, c.bad.1],
            "boundary": c.boundary,
        })
    });
    let outside: Vec<Value> = d
        .outside
        .iter()
        .map(|e| {
            let per: serde_json::Map<String, Value> = e
                .per_class
                .iter()
                .enumerate()
                .map(|(c, pc)| {
                    let means: serde_json::Map<String, Value> = pc
                        .means
                        .iter()
                        .map(|(k, v)| (k.to_string(), json!(v)))
                        .collect();
                    (
                        data.classes[c].clone(),
                        json!({"runs": pc.runs, "runs_with": pc.runs_with, "mean": means}),
                    )
                })
                .collect();
            json!({"name": e.name, "classes": per})
        })
        .collect();
    let time_gap: Vec<Value> = d
        .time_gap
        .iter()
        .flat_map(|tg| &tg.entries)
        .map(|e| {
            json!({
                "syscall": e.syscall,
                "good_mean_s": e.good_mean_s,
                "bad_mean_s": e.bad_mean_s,
                "share": e.share,
            })
        })
        .collect();
    let mean_duration = d
        .time_gap
        .as_ref()
        .map(|tg| json!({"good_s": tg.good_duration_s, "bad_s": tg.bad_duration_s}));
    let left_out = &d.left_out;
    json!({
        "runs": data.rows(),
        "left_out": {
            "light": left_out.light,
            "late": left_out.late,
            "unknown_outcome": left_out.unknown_outcome,
            "without_label_fact": left_out.without_label_fact,
            "other_source": left_out.other_source,
            "kept_source": left_out.kept_source.name(),
        },
        "programs": d.programs.iter().map(|(p, n)| json!({"program": p, "runs": n})).collect::<Vec<_>>(),
        "labels": {
            "method": d.labelling.method,
            "classes": classes,
            "clusters": clusters,
            "runs": runs,
        },
        "attributes": data.attributes.len(),
        "common": {"syscalls": d.common.entries, "transitions": d.common.transitions},
        "rules": d.rules.iter().map(|r| rule_json(r, d)).collect::<Vec<_>>(),
        "outside_intersection": outside,
        "mean_duration": mean_duration,
        "time_gap": time_gap,
    })
}
