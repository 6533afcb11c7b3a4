//! One self-contained HTML page: per anomalous category, a bar chart (SVG)
//! of every syscall's cos θ with the threshold, and a table of the
//! anomalous syscalls and the devices of their large entries in E.

use std::fmt::Write as _;

use crate::fmt::format_number;
use crate::report::esc;
use crate::rpca::analysis::{CategoryFinding, RpcaDiagnosis};

/// Most syscalls drawn per chart (smallest cos θ first).
const BARS: usize = 40;

/// cos θ per syscall as horizontal bars, anomalous ones in red, with the
/// threshold as a dashed line.
fn cos_svg(c: &CategoryFinding, threshold: f64) -> String {
    let shown: Vec<_> = c.syscalls.iter().take(BARS).collect();
    let (w, row, left, top) = (640.0, 16.0, 170.0, 18.0);
    let h = top + row * shown.len() as f64 + 8.0;
    let x = |v: f64| left + (w - left - 50.0) * v.clamp(0.0, 1.0);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">"#
    );
    for (i, sc) in shown.iter().enumerate() {
        let y = top + row * i as f64;
        let colour = if sc.anomalous { "#d73027" } else { "#4575b4" };
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" font-family="monospace">{}</text><rect x="{left}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}"><title>{}: {:.4}</title></rect><text x="{:.1}" y="{:.1}" font-size="10">{:.3}</text>"#,
            left - 4.0,
            y + 11.0,
            esc(&sc.name),
            y + 2.0,
            (x(sc.cos_theta) - left).max(0.5),
            row - 4.0,
            esc(&sc.name),
            sc.cos_theta,
            x(sc.cos_theta) + 3.0,
            y + 11.0,
            sc.cos_theta
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{0:.1}" y1="4" x2="{0:.1}" y2="{1:.1}" stroke="#333" stroke-dasharray="5,4"/><text x="{0:.1}" y="12" font-size="10" text-anchor="middle">{2}</text>"##,
        x(threshold),
        h - 4.0,
        threshold
    );
    s.push_str("</svg>");
    s
}

/// One self-contained HTML page (see the module).
pub fn html(d: &RpcaDiagnosis) -> String {
    let mut o = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Edge Agent diagnosis (robust PCA)</title>\n\
         <style>body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}\
         h2{margin-top:2em;font-size:1.1em}code{background:#f3f3f3;padding:0 .2em}\
         table{border-collapse:collapse}td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:left}\
         .bad{color:#d73027}</style></head><body>\n",
    );
    let anomalous = d.categories.iter().filter(|c| c.anomalous).count();
    let _ = writeln!(
        o,
        "<h1>Robust PCA diagnosis of {} runs</h1>\n<p>{} categories (program and syscall signature), {anomalous} anomalous (CV of run durations above {}). A syscall is anomalous when cos&nbsp;θ between its column of M and of the low-rank part L is below {}; devices: {}.</p>",
        d.runs,
        d.categories.len(),
        d.cv_threshold,
        d.cos_threshold,
        esc(&d.device_source)
    );
    o.push_str("<table><tr><th>#</th><th>program</th><th>syscalls</th><th>runs</th><th>mean s</th><th>CV</th><th></th></tr>\n");
    for (i, c) in d.categories.iter().enumerate() {
        let cat = &c.category;
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td{}>{}</td></tr>",
            i + 1,
            esc(&cat.program),
            cat.signature.len(),
            cat.runs.len(),
            esc(&format_number(cat.mean_duration_s)),
            cat.cv,
            if c.anomalous { " class=\"bad\"" } else { "" },
            if c.anomalous {
                "anomalous"
            } else if c.too_few_runs {
                "too few runs"
            } else {
                "normal"
            }
        );
    }
    o.push_str("</table>\n");
    for (i, c) in d.categories.iter().enumerate().filter(|(_, c)| c.anomalous) {
        let _ = writeln!(
            o,
            "<h2>{}. {} &mdash; {} runs, CV {:.3}</h2>",
            i + 1,
            esc(&c.category.program),
            c.category.runs.len(),
            c.category.cv
        );
        if let Some(p) = &c.pcp {
            let _ = writeln!(
                o,
                "<p>Robust PCA: rank {}, λ {}, {} iterations, residual {}{}.</p>",
                p.rank,
                esc(&format_number(p.lambda)),
                p.iterations,
                esc(&format_number(p.residual)),
                if p.converged { "" } else { " (not converged)" }
            );
        }
        o.push_str(&cos_svg(c, d.cos_threshold));
        o.push_str("\n<table><tr><th>syscall</th><th>cos θ</th><th>device</th><th>runs with a large entry</th><th>excess s</th></tr>\n");
        for s in c.syscalls.iter().filter(|s| s.anomalous) {
            if s.devices.is_empty() {
                let _ = writeln!(
                    o,
                    "<tr><td><code>{}</code></td><td>{:.3}</td><td colspan=\"3\">no single large entry</td></tr>",
                    esc(&s.name),
                    s.cos_theta
                );
            }
            for dev in &s.devices {
                let _ = writeln!(
                    o,
                    "<tr><td><code>{}</code></td><td>{:.3}</td><td>{}</td><td>{}/{}</td><td>{}</td></tr>",
                    esc(&s.name),
                    s.cos_theta,
                    esc(&dev.device),
                    dev.runs.len(),
                    dev.device_runs,
                    esc(&format_number(dev.excess_s))
                );
            }
        }
        o.push_str("</table>\n");
    }
    if !d.suspects.is_empty() {
        o.push_str("<h2>Suspects</h2>\n<table><tr><th>syscall</th><th>device</th><th>categories</th><th>runs</th><th>excess s</th></tr>\n");
        for s in &d.suspects {
            let _ = writeln!(
                o,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&s.syscall),
                esc(&s.device),
                s.categories,
                s.runs,
                esc(&format_number(s.excess_s))
            );
        }
        o.push_str("</table>\n");
    }
    o.push_str("</body></html>\n");
    o
}
