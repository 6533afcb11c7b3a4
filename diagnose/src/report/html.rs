//! One self-contained HTML page: the rules, and a plot (SVG) of each rule
//! attribute's values per class with the rule's thresholds.

use std::fmt::Write as _;

use crate::analysis::Diagnosis;
use crate::dataset::Column;
use crate::fmt::format_number;
use crate::rules::{Condition, Rule};

/// Escapes text for HTML and SVG.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Colours of the classes (good first).
const COLOURS: [&str; 6] = [
    "#1a9850", "#d73027", "#4575b4", "#fdae61", "#762a83", "#878787",
];

/// The thresholds a rule's tree uses on `attribute`.
fn thresholds(rule: &Rule, attribute: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for p in &rule.paths {
        for c in &p.conditions {
            if let Condition::Range {
                attribute: a,
                lower,
                upper,
            } = c
            {
                if *a == attribute {
                    out.extend(lower.iter().chain(upper.iter()).copied());
                }
            }
        }
    }
    out.sort_by(f64::total_cmp);
    out.dedup();
    out
}

/// A plot of one numeric attribute: each class's runs side by side, one
/// point per run, with the rule's thresholds as dashed lines.
fn numeric_svg(d: &Diagnosis, values: &[f64], lines: &[f64]) -> String {
    let (w, h, left, bottom, top) = (520.0, 240.0, 70.0, 30.0, 12.0);
    let data = &d.dataset;
    let k = data.classes.len().max(1);
    let all = values.iter().chain(lines.iter());
    let (mut lo, mut hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(*v), h.max(*v))
    });
    // No values, or all equal: give the axis some height.
    if !(lo.is_finite() && hi.is_finite()) {
        (lo, hi) = (0.0, 1.0);
    } else if hi <= lo {
        (lo, hi) = (lo - 1.0, hi + 1.0);
    }
    let pad = (hi - lo) * 0.05;
    let (lo, hi) = (lo - pad, hi + pad);
    let y = |v: f64| top + (h - top - bottom) * (1.0 - (v - lo) / (hi - lo));
    let panel = (w - left - 10.0) / k as f64;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">"#
    );
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="#444"/>"##,
        h - bottom
    );
    for v in [hi - pad, (lo + hi) / 2.0, lo + pad] {
        let _ = write!(
            s,
            r##"<text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#444">{}</text>"##,
            left - 4.0,
            y(v) + 4.0,
            esc(&format_number(v))
        );
    }
    for (c, name) in data.classes.iter().enumerate() {
        let x0 = left + panel * c as f64;
        let rows: Vec<f64> = values
            .iter()
            .zip(&data.labels)
            .filter(|(_, l)| **l as usize == c)
            .map(|(v, _)| *v)
            .collect();
        let colour = COLOURS[c % COLOURS.len()];
        for (i, v) in rows.iter().enumerate() {
            let x = x0 + 8.0 + (panel - 16.0) * (i as f64 + 0.5) / rows.len().max(1) as f64;
            let _ = write!(
                s,
                r#"<circle cx="{x:.1}" cy="{:.1}" r="3" fill="{colour}" fill-opacity="0.8"><title>{}</title></circle>"#,
                y(*v),
                esc(&format_number(*v))
            );
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" font-size="12" text-anchor="middle" fill="{colour}">{} ({} runs)</text>"#,
            x0 + panel / 2.0,
            h - 10.0,
            esc(name),
            rows.len()
        );
    }
    for t in lines {
        let _ = write!(
            s,
            r##"<line x1="{left}" y1="{:.1}" x2="{}" y2="{:.1}" stroke="#333" stroke-dasharray="5,4"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#333">{}</text>"##,
            y(*t),
            w - 10.0,
            y(*t),
            w - 12.0,
            y(*t) - 3.0,
            esc(&format_number(*t))
        );
    }
    s.push_str("</svg>");
    s
}

/// A plot of one categorical attribute: runs per level, one bar per class.
fn categorical_svg(d: &Diagnosis, codes: &[u32], levels: &[String]) -> String {
    let data = &d.dataset;
    let k = data.classes.len().max(1);
    let (w, h, bottom, top) = (520.0, 240.0, 40.0, 12.0);
    let mut counts = vec![vec![0usize; k]; levels.len()];
    for (code, l) in codes.iter().zip(&data.labels) {
        counts[*code as usize][*l as usize] += 1;
    }
    let max = counts.iter().flatten().copied().max().unwrap_or(1).max(1) as f64;
    let group = (w - 20.0) / levels.len().max(1) as f64;
    let bar = (group - 12.0) / k as f64;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">"#
    );
    for (li, level) in levels.iter().enumerate() {
        let x0 = 10.0 + group * li as f64 + 6.0;
        for (c, n) in counts[li].iter().enumerate() {
            let bh = (h - top - bottom) * *n as f64 / max;
            let colour = COLOURS[c % COLOURS.len()];
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{colour}"><title>{}: {n}</title></rect><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{n}</text>"#,
                x0 + bar * c as f64,
                h - bottom - bh,
                (bar - 2.0).max(1.0),
                esc(&data.classes[c]),
                x0 + bar * (c as f64 + 0.5),
                h - bottom - bh - 3.0
            );
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" font-size="12" text-anchor="middle">{}</text>"#,
            x0 + (group - 12.0) / 2.0,
            h - bottom + 16.0,
            esc(level)
        );
    }
    s.push_str("</svg>");
    s
}

/// The plot of one attribute of a rule.
#[derive(Debug, Clone)]
pub struct RulePlot {
    /// The attribute's name (`recvfrom.tcp.mean_ns`, a fact's key, ...).
    pub attribute: String,
    /// A standalone `<svg>` element, its text escaped, with no script and
    /// no style attribute (pages with a strict CSP can embed it).
    pub svg: String,
}

/// The plots of `rule` as the HTML report draws them: for each of its
/// attributes, the values per class (numeric: one point per run with the
/// rule's thresholds; categorical: runs per level). The web UI embeds them.
pub fn rule_plots(d: &Diagnosis, rule: &Rule) -> Vec<RulePlot> {
    rule.attributes
        .iter()
        .map(|&a| {
            let attr = &d.dataset.attributes[a];
            let svg = match &attr.column {
                Column::Numeric(values) => numeric_svg(d, values, &thresholds(rule, a)),
                Column::Categorical { codes, levels } => categorical_svg(d, codes, levels),
            };
            RulePlot {
                attribute: attr.name.clone(),
                svg,
            }
        })
        .collect()
}

/// A plot of one value per run (in the diagnosis' row order, e.g. the
/// duration), the runs of each class side by side, with dashed lines at
/// `lines` (e.g. the clusters' boundary).
pub fn class_values_svg(d: &Diagnosis, values: &[f64], lines: &[f64]) -> String {
    numeric_svg(d, values, lines)
}

/// One self-contained HTML page: the labels, and for each rule its text,
/// accuracy and a plot of each of its attributes' values per class.
pub fn html(d: &Diagnosis) -> String {
    let data = &d.dataset;
    let mut o = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Edge Agent diagnosis</title>\n\
         <style>body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}\
         h2{margin-top:2em;font-size:1.1em}code{background:#f3f3f3;padding:0 .2em}\
         .plots{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}figcaption{font-family:monospace}\
         table{border-collapse:collapse}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right}\
         td:first-child,th:first-child{text-align:left}</style></head><body>\n",
    );
    let _ = writeln!(o, "<h1>Diagnosis of {} runs</h1>", data.rows());
    let counts = data.class_counts();
    let _ = write!(o, "<p>Labels {}: ", esc(&d.labelling.method));
    let parts: Vec<String> = data
        .classes
        .iter()
        .enumerate()
        .map(|(c, n)| {
            format!(
                "<span style=\"color:{}\">{}</span> {} runs",
                COLOURS[c % COLOURS.len()],
                esc(n),
                counts[c]
            )
        })
        .collect();
    o.push_str(&parts.join(", "));
    if let Some(cl) = &d.labelling.clusters {
        let _ = write!(
            o,
            "; boundary {} {}",
            esc(&format_number(cl.boundary)),
            cl.unit
        );
    }
    let _ = writeln!(o, ". {} attributes.</p>", data.attributes.len());
    if d.left_out.total() > 0 {
        let _ = writeln!(
            o,
            "<p>Left out: {}.</p>",
            esc(&d.left_out.phrases().join("; "))
        );
    }
    if d.rules.is_empty() {
        o.push_str("<p>No rules: no attribute separates the classes.</p>\n");
    }
    for r in &d.rules {
        let _ = writeln!(
            o,
            "<h2>{}. <code>{}</code> &mdash; accuracy {:.3}</h2>\n<div class=\"plots\">",
            r.rank,
            esc(&r.text),
            r.accuracy
        );
        for plot in rule_plots(d, r) {
            let _ = writeln!(
                o,
                "<figure>{}<figcaption>{}</figcaption></figure>",
                plot.svg,
                esc(&plot.attribute)
            );
        }
        o.push_str("</div>\n");
    }
    time_gap(&mut o, d);
    if !d.outside.is_empty() {
        o.push_str("<h2>Outside the intersection</h2>\n<table><tr><th>syscall</th>");
        for c in &data.classes {
            let _ = write!(o, "<th>{} runs with it</th><th>mean num</th>", esc(c));
        }
        o.push_str("</tr>\n");
        for e in &d.outside {
            let _ = write!(o, "<tr><td>{}</td>", esc(&e.name));
            for pc in &e.per_class {
                let num = pc
                    .means
                    .iter()
                    .find(|(n, _)| *n == "num")
                    .map_or(0.0, |(_, v)| *v);
                let _ = write!(
                    o,
                    "<td>{}/{}</td><td>{}</td>",
                    pc.runs_with,
                    pc.runs,
                    esc(&format_number(num))
                );
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
    }
    o.push_str("</body></html>\n");
    o
}

/// Entries of the time ranking the page shows.
const TIME_GAP_SHOWN: usize = 15;

/// "Where the time went": a table of the entries the bad runs spend the
/// most extra time in, each with a bar of its share.
fn time_gap(o: &mut String, d: &Diagnosis) {
    let Some(tg) = &d.time_gap else {
        return;
    };
    if tg.entries.is_empty() {
        return;
    }
    let classes = &d.dataset.classes;
    let _ = writeln!(
        o,
        "<h2>Where the time went</h2>\n<p>Mean seconds per run spent in each syscall's calls (mean run: {} s {}, {} s {}); \
         share = the extra time over the difference in mean run duration.</p>",
        esc(&format_number(tg.good_duration_s)),
        esc(&classes[0]),
        esc(&format_number(tg.bad_duration_s)),
        esc(&classes[1])
    );
    let _ = writeln!(
        o,
        "<table><tr><th>syscall</th><th>{} s</th><th>{} s</th><th>extra s</th><th>share</th><th></th></tr>",
        esc(&classes[0]),
        esc(&classes[1])
    );
    for e in tg.entries.iter().take(TIME_GAP_SHOWN) {
        let share = e.share.unwrap_or(0.0);
        // A bar of the share, clamped to [0, 1] of 200 px.
        let width = (share.clamp(0.0, 1.0) * 200.0).round();
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td style=\"text-align:left\"><svg width=\"200\" height=\"10\"><rect width=\"{width}\" height=\"10\" fill=\"{}\"/></svg></td></tr>",
            esc(&e.syscall),
            esc(&format_number(e.good_mean_s)),
            esc(&format_number(e.bad_mean_s)),
            esc(&format_number(e.difference_s())),
            e.share.map_or("-".to_string(), |s| format!("{s:.3}")),
            COLOURS[1]
        );
    }
    o.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
