//! The readable report.

use std::fmt::Write as _;

use crate::analysis::Diagnosis;
use crate::fmt::format_number;

/// The readable report.
pub fn text(d: &Diagnosis) -> String {
    let mut o = String::new();
    let data = &d.dataset;
    let counts = data.class_counts();
    let _ = writeln!(
        o,
        "Diagnosis of {} runs{}: labels {}",
        data.rows(),
        d.program
            .as_deref()
            .map(|p| format!(" of {p}"))
            .unwrap_or_default(),
        d.labelling.method
    );
    if d.programs.len() > 1 {
        let list: Vec<String> = d
            .programs
            .iter()
            .map(|(p, n)| format!("{} ({n})", if p.is_empty() { "?" } else { p }))
            .collect();
        let _ = writeln!(
            o,
            "  note: runs of {} programs: {}; --program picks one",
            d.programs.len(),
            list.join(", ")
        );
    }
    for (c, name) in data.classes.iter().enumerate() {
        let _ = write!(o, "  {name}: {} runs", counts[c]);
        if let Some(cl) = &d.labelling.clusters {
            let range = if c == 0 { cl.good } else { cl.bad };
            let _ = write!(
                o,
                ", {} to {} {}",
                format_number(range.0),
                format_number(range.1),
                cl.unit
            );
        }
        o.push('\n');
    }
    if let Some(cl) = &d.labelling.clusters {
        let _ = writeln!(
            o,
            "  cluster boundary: {} {}",
            format_number(cl.boundary),
            cl.unit
        );
    }
    let _ = writeln!(
        o,
        "Attributes: {} (from {} syscall entries and {} transitions made in every run, and the facts that differ)",
        data.attributes.len(),
        d.common.entries.len(),
        d.common.transitions.len()
    );
    o.push('\n');
    if d.rules.is_empty() {
        let _ = writeln!(
            o,
            "No rules: no attribute separates the classes better than always guessing the larger one."
        );
    } else {
        let _ = writeln!(
            o,
            "Rules (each from a tree built without the earlier rules' root attributes; accuracy = share of the {} runs classified correctly):",
            data.rows()
        );
        for r in &d.rules {
            let _ = writeln!(
                o,
                "{:>3}. {}    [accuracy {:.3}]",
                r.rank, r.text, r.accuracy
            );
        }
    }
    if !d.outside.is_empty() {
        o.push('\n');
        let _ = writeln!(
            o,
            "Outside the intersection (syscall entries not made in every run; runs that made it, mean count and seconds over those runs), most uneven first:"
        );
        for e in d.outside.iter().take(20) {
            let _ = write!(o, "  {:<24}", e.name);
            for (c, pc) in e.per_class.iter().enumerate() {
                let mean = |k: &str| {
                    pc.means
                        .iter()
                        .find(|(n, _)| *n == k)
                        .map_or(0.0, |(_, v)| *v)
                };
                if pc.runs_with == 0 {
                    let _ = write!(o, "  {}: 0/{} runs", data.classes[c], pc.runs);
                    continue;
                }
                let _ = write!(
                    o,
                    "  {}: {}/{} runs, num {}, time {} s",
                    data.classes[c],
                    pc.runs_with,
                    pc.runs,
                    format_number(mean("num")),
                    format_number(mean("time"))
                );
            }
            o.push('\n');
        }
        if d.outside.len() > 20 {
            let _ = writeln!(o, "  ... and {} more (see --json)", d.outside.len() - 20);
        }
    }
    o
}
