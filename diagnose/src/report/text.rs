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
    if d.left_out.total() > 0 {
        let _ = writeln!(o, "Left out: {}", d.left_out.phrases().join("; "));
    }
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
    time_gap(&mut o, d);
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

/// Entries of the time ranking the readable report shows.
const TIME_GAP_SHOWN: usize = 10;

/// "Where the time went": the entries the bad runs spend the most extra
/// time in.
fn time_gap(o: &mut String, d: &Diagnosis) {
    let Some(tg) = &d.time_gap else {
        return;
    };
    if tg.entries.is_empty() {
        return;
    }
    let classes = &d.dataset.classes;
    o.push('\n');
    let _ = writeln!(
        o,
        "Where the time went (mean seconds per run in each syscall's calls; mean run {} s {}, {} s {}; share = extra time / difference in mean duration):",
        format_number(tg.good_duration_s),
        classes[0],
        format_number(tg.bad_duration_s),
        classes[1]
    );
    let _ = writeln!(
        o,
        "  {:<24} {:>12} {:>12} {:>12} {:>8}",
        "syscall", classes[0], classes[1], "extra", "share"
    );
    for e in tg.entries.iter().take(TIME_GAP_SHOWN) {
        let _ = writeln!(
            o,
            "  {:<24} {:>12} {:>12} {:>12} {:>8}",
            e.syscall,
            format_number(e.good_mean_s),
            format_number(e.bad_mean_s),
            format_number(e.difference_s()),
            e.share.map_or("-".to_string(), |s| format!("{s:.3}"))
        );
    }
    if tg.entries.len() > TIME_GAP_SHOWN {
        let _ = writeln!(
            o,
            "  ... and {} more (see --json)",
            tg.entries.len() - TIME_GAP_SHOWN
        );
    }
}
