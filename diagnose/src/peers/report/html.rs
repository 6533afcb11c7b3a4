//! One self-contained HTML page: the findings, and per metric of each peer
//! set an SVG time series of every device's mean service time, the median,
//! and for a flagged device its threshold (median + threshold) with its
//! flagged windows shaded.

use std::fmt::Write as _;

use super::text::utc;
use crate::fmt::format_duration_ns;
use crate::peers::{Method, PeerDiagnosis, Series};
use crate::report::esc;

/// Colour of a flagged device and its threshold.
const CULPRIT: &str = "#d73027";
/// Colour of the other devices.
const PEER: &str = "#9fb3c8";

/// One metric's time series as a standalone SVG (no script, no style
/// attribute, every text escaped): each device's mean service time per
/// window, the median dashed, a flagged device in red with its threshold
/// dotted and its flagged windows shaded. The web UI's Peers page draws it
/// too.
pub fn series_svg(d: &PeerDiagnosis, s: &Series) -> String {
    let culprits: Vec<(usize, &[u64])> = d
        .findings
        .iter()
        .filter(|f| f.method == Method::Median && f.metric == s.metric)
        .filter_map(|f| {
            s.devices
                .iter()
                .position(|x| *x == f.device)
                .map(|i| (i, f.windows.as_slice()))
        })
        .collect();
    series_plot(s, d.window_ns, &culprits)
}

/// [`series_svg`] from the series alone, for a plot drawn again from what
/// was stored of it (the web UI's incident page): `culprits` are the
/// flagged devices, each as its position in `s.devices` (and so in
/// `s.values` and `s.thresholds`) with its flagged window indices.
/// Positions outside the series are ignored, and non-finite values are
/// not drawn, so stored data of any shape draws without a panic.
pub fn series_plot(s: &Series, window_ns: u64, culprits: &[(usize, &[u64])]) -> String {
    let (w, h, left, right, bottom, top) = (760.0, 260.0, 80.0, 10.0, 30.0, 12.0);
    let culprits: Vec<(usize, &[u64])> = culprits
        .iter()
        .copied()
        .filter(|(i, _)| *i < s.values.len())
        .collect();
    let n = s.windows.len();
    let mut hi = f64::MIN;
    for v in s.values.iter().flatten().flatten() {
        hi = hi.max(*v);
    }
    for (i, _) in &culprits {
        if let Some(t) = s.thresholds.get(*i).copied().flatten() {
            for m in &s.median {
                hi = hi.max(m + t);
            }
        }
    }
    if !(hi.is_finite() && hi > 0.0) {
        hi = 1.0;
    }
    hi *= 1.05;
    let x = |i: usize| left + (w - left - right) * (i as f64 + 0.5) / n.max(1) as f64;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / hi);
    let step = (w - left - right) / n.max(1) as f64;
    let mut o = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">"#
    );
    for (_, windows) in &culprits {
        for win in windows.iter() {
            if let Ok(i) = s.windows.binary_search(win) {
                let _ = write!(
                    o,
                    r#"<rect x="{:.1}" y="{top}" width="{:.1}" height="{:.1}" fill="{CULPRIT}" fill-opacity="0.15"/>"#,
                    x(i) - step / 2.0,
                    step.max(1.0),
                    h - top - bottom
                );
            }
        }
    }
    let _ = write!(
        o,
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="#444"/><line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="#444"/>"##,
        h - bottom,
        h - bottom,
        w - right,
        h - bottom
    );
    for v in [0.0, hi / 2.0, hi / 1.05] {
        let _ = write!(
            o,
            r##"<text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#444">{}</text>"##,
            left - 4.0,
            y(v) + 4.0,
            esc(&format_duration_ns(v))
        );
    }
    if let (Some(first), Some(last)) = (s.windows.first(), s.windows.last()) {
        for (i, win, anchor) in [(0, first, "start"), (n - 1, last, "end")] {
            let _ = write!(
                o,
                r##"<text x="{:.1}" y="{}" font-size="11" text-anchor="{anchor}" fill="#444">{} UTC</text>"##,
                x(i),
                h - 10.0,
                utc(window_ns.saturating_mul(*win))
            );
        }
    }
    let polyline = |o: &mut String, points: &[(usize, f64)], colour: &str, extra: &str| {
        // Runs of consecutive windows with a value, each its own line.
        let mut run: Vec<String> = Vec::new();
        let mut prev: Option<usize> = None;
        let flush = |run: &mut Vec<String>, o: &mut String| {
            if run.len() > 1 {
                let _ = write!(
                    o,
                    r#"<polyline fill="none" stroke="{colour}" stroke-width="1.2" {extra} points="{}"/>"#,
                    run.join(" ")
                );
            }
            run.clear();
        };
        for (i, v) in points {
            // A value that is not a number (stored data) is a gap.
            if !v.is_finite() {
                flush(&mut run, o);
                prev = None;
                continue;
            }
            if prev.is_some_and(|p| p + 1 != *i) {
                flush(&mut run, o);
            }
            run.push(format!("{:.1},{:.1}", x(*i), y(*v)));
            prev = Some(*i);
        }
        flush(&mut run, o);
    };
    let culprit_positions: Vec<usize> = culprits.iter().map(|(i, _)| *i).collect();
    for (di, values) in s.values.iter().enumerate() {
        if culprit_positions.contains(&di) {
            continue;
        }
        let points: Vec<(usize, f64)> = values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i, v)))
            .collect();
        polyline(&mut o, &points, PEER, "");
    }
    let median: Vec<(usize, f64)> = s.median.iter().copied().enumerate().collect();
    polyline(&mut o, &median, "#000", r#"stroke-dasharray="5 3""#);
    for (di, _) in &culprits {
        let points: Vec<(usize, f64)> = s.values[*di]
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i, v)))
            .collect();
        polyline(&mut o, &points, CULPRIT, "");
        if let Some(t) = s.thresholds.get(*di).copied().flatten() {
            let limit: Vec<(usize, f64)> = s.median.iter().map(|m| m + t).enumerate().collect();
            polyline(&mut o, &limit, CULPRIT, r#"stroke-dasharray="2 3""#);
        }
    }
    o.push_str("</svg>");
    o
}

/// The report as one HTML page.
pub fn html(d: &PeerDiagnosis) -> String {
    let mut o = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Peer diagnosis</title>\
         <style>body{font-family:sans-serif;max-width:60em;margin:1em auto}\
         td,th{padding:2px 8px;text-align:left;white-space:nowrap}\
         td.ev{white-space:normal;color:#444;padding-bottom:8px}</style></head><body><h1>Peer diagnosis</h1>",
    );
    if d.findings.is_empty() {
        o.push_str("<p>No culprit: no device stands out from its peers.</p>");
    } else {
        o.push_str(
            "<table><tr><th>device</th><th>cause</th><th>method</th><th>metric</th>\
             <th>from (UTC)</th><th>to (UTC)</th><th>score</th></tr>",
        );
        for f in &d.findings {
            let _ = write!(
                o,
                "<tr class=\"f\"><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{:.2}</td></tr><tr><td colspan=\"7\" \
                 class=\"ev\">{}</td></tr>",
                d.devices[f.device].id,
                f.cause.name(),
                f.method.name(),
                esc(&f.metric),
                utc(f.first_window_unix_ns),
                utc(f.last_window_unix_ns),
                f.score,
                esc(&f.evidence)
            );
        }
        o.push_str("</table>");
    }
    for s in &d.series {
        let _ = write!(
            o,
            "<h2>{} — {}</h2><p>Mean service time per window of each of {} devices (grey; a \
             flagged device in red, its threshold dotted, its flagged windows shaded) and the \
             median (dashed).</p>{}",
            esc(&s.program),
            esc(&s.metric),
            s.devices.len(),
            series_svg(d, s)
        );
    }
    if !d.notes.is_empty() {
        o.push_str("<h2>Notes</h2><ul>");
        for n in &d.notes {
            let _ = write!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>");
    }
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series() -> Series {
        Series {
            program: "glusterfsd".into(),
            metric: "dread".into(),
            devices: vec![0, 1, 2],
            windows: vec![10, 11, 12],
            values: vec![
                vec![Some(1e6), Some(1.1e6), Some(0.9e6)],
                vec![Some(1e6), None, Some(1e6)],
                vec![Some(1e6), Some(4e6), Some(5e6)],
            ],
            median: vec![1e6, 1.05e6, 1e6],
            thresholds: vec![Some(0.5e6), Some(0.5e6), Some(0.5e6)],
        }
    }

    #[test]
    fn a_stored_series_draws_its_culprit_and_never_panics() {
        let s = series();
        let svg = series_plot(&s, 1_000_000_000, &[(2, &[11, 12])]);
        // Two flagged windows shaded, the culprit and its threshold in red.
        assert_eq!(svg.matches("<rect").count(), 2, "{svg}");
        assert_eq!(svg.matches(&format!("stroke=\"{CULPRIT}\"")).count(), 2);
        assert!(svg.contains("1970-01-01"), "{svg}");
        // Positions outside the series, ragged rows and NaN draw, without
        // a NaN coordinate.
        let ragged = Series {
            values: vec![vec![Some(f64::NAN), Some(1.0)], vec![]],
            median: vec![f64::NAN],
            thresholds: vec![],
            ..series()
        };
        let svg = series_plot(&ragged, 1, &[(7, &[1]), (1, &[10])]);
        assert!(svg.ends_with("</svg>") && !svg.contains("NaN"), "{svg}");
        let empty = Series {
            windows: vec![],
            values: vec![],
            median: vec![],
            ..series()
        };
        assert!(series_plot(&empty, 0, &[]).ends_with("</svg>"));
    }
}
