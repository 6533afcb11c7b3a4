//! The web UI's own SVG: a run's windows as time series (one line per
//! series over the window index). The diagnosis' plots are the HTML
//! report's (`diagnose::report::rule_plots`). No script, no style
//! attribute: the pages' CSP allows neither.

use std::fmt::Write as _;

use diagnose::fmt::format_number;

/// Line colours, one per series.
const COLOURS: [&str; 6] = [
    "#4575b4", "#d73027", "#1a9850", "#fdae61", "#762a83", "#878787",
];

/// One named series of values, one per window.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub values: Vec<f64>,
}

/// Escapes text for SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A line chart of `series` over `x_labels` (one label per point), its y
/// axis in `unit`, titled `title`.
pub fn time_series_svg(title: &str, unit: &str, x_labels: &[String], series: &[Series]) -> String {
    let (w, h, left, right, top, bottom) = (620.0, 260.0, 70.0, 150.0, 24.0, 30.0);
    let n = x_labels.len();
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    let max = if max > 0.0 { max * 1.05 } else { 1.0 };
    let plot_w = w - left - right;
    let x = |i: usize| {
        left + plot_w
            * if n > 1 {
                i as f64 / (n - 1) as f64
            } else {
                0.5
            }
    };
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v / max);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" class="series">"#
    );
    let _ = write!(
        s,
        r##"<text x="{left}" y="14" font-size="13" fill="#222">{} ({})</text>"##,
        esc(title),
        esc(unit)
    );
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="#444"/><line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="#444"/>"##,
        h - bottom,
        h - bottom,
        left + plot_w,
        h - bottom
    );
    for v in [max, max / 2.0, 0.0] {
        let _ = write!(
            s,
            r##"<text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#444">{}</text>"##,
            left - 4.0,
            y(v) + 4.0,
            esc(&format_number(v))
        );
    }
    // At most about eight x labels, evenly spaced.
    let step = n.div_ceil(8).max(1);
    for (i, label) in x_labels.iter().enumerate().step_by(step) {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{}" font-size="11" text-anchor="middle" fill="#444">{}</text>"##,
            x(i),
            h - bottom + 14.0,
            esc(label)
        );
    }
    for (k, series_k) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let points: Vec<String> = series_k
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.5"/>"#,
            points.join(" ")
        );
        for (i, v) in series_k
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
        {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{colour}"><title>{} {}: {}</title></circle>"#,
                x(i),
                y(*v),
                esc(&series_k.name),
                esc(x_labels.get(i).map_or("", String::as_str)),
                esc(&format_number(*v))
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="12" fill="{colour}">{}</text>"#,
            left + plot_w + 10.0,
            top + 14.0 + 16.0 * k as f64,
            esc(&series_k.name)
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_one_line_per_series_with_escaped_names() {
        let svg = time_series_svg(
            "calls",
            "per window",
            &["1".into(), "2".into(), "3".into()],
            &[
                Series {
                    name: "read".into(),
                    values: vec![1.0, 4.0, 2.0],
                },
                Series {
                    name: "<other>".into(),
                    values: vec![0.0, f64::NAN, 3.0],
                },
            ],
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        // NaN points are left out: 3 + 2 circles.
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.contains("&lt;other&gt;") && !svg.contains("<other>"));
        assert!(!svg.contains("style="));
    }
}
