//! The reader's summary: the culprits first, then the devices and notes.

use std::fmt::Write as _;

use crate::fmt::format_duration_ns;
use crate::peers::{tally_text, PeerDiagnosis};

/// `YYYY-MM-DD HH:MM:SS` (UTC) of a Unix time in ns.
pub(crate) fn utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The report as text.
pub fn text(d: &PeerDiagnosis) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Peer diagnosis: {} device(s) in {} peer set(s), windows of {}",
        d.devices.len(),
        d.sets.len(),
        format_duration_ns(d.window_ns as f64)
    );
    for s in &d.sets {
        let _ = writeln!(
            o,
            "  {:?}{}: {} devices",
            s.program,
            s.source_suffix(),
            s.devices.len()
        );
    }
    let _ = writeln!(o, "  read: {}", tally_text(&d.tally));
    if d.findings.is_empty() {
        let _ = writeln!(o, "\nNo culprit: no device stands out from its peers.");
    } else {
        let _ = writeln!(o, "\nFindings (most over first):");
        for (n, f) in d.findings.iter().enumerate() {
            let dev = &d.devices[f.device];
            let _ = writeln!(
                o,
                "{}. device {} ({}): cause {} ({} method, {}), {} flagged, {} .. {} UTC, \
                 score {:.2}",
                n + 1,
                dev.id,
                dev.program(),
                f.cause.name(),
                f.method.name(),
                f.metric,
                match f.method {
                    crate::peers::Method::Median => format!("{} window(s)", f.windows.len()),
                    crate::peers::Method::Histogram
                    | crate::peers::Method::Link
                    | crate::peers::Method::Semantic => format!("{} slice(s)", f.windows.len()),
                    crate::peers::Method::Errno
                    | crate::peers::Method::Hang
                    | crate::peers::Method::Wait => format!("{} window(s)", f.windows.len()),
                },
                utc(f.first_window_unix_ns),
                utc(f.last_window_unix_ns),
                f.score
            );
            let _ = writeln!(o, "   {}", f.evidence);
        }
    }
    if !d.explained.is_empty() {
        let _ = writeln!(
            o,
            "\nExplained by a flagged server (symptoms, not culprits):"
        );
        for e in &d.explained {
            let f = &e.finding;
            let _ = writeln!(
                o,
                "  - device {} ({}): {} by {} ({}), explained by device {} ({}): {}",
                d.devices[f.device].id,
                d.devices[f.device].program(),
                f.cause.name(),
                f.method.name(),
                f.metric,
                d.devices[e.by].id,
                d.devices[e.by].program(),
                f.evidence
            );
        }
    }
    if !d.notes.is_empty() {
        let _ = writeln!(o, "\nNotes:");
        for n in &d.notes {
            let _ = writeln!(o, "  - {n}");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00");
        assert_eq!(super::utc(1_763_700_000_000_000_000), "2025-11-21 04:40:00");
        assert_eq!(super::utc(951_782_400_000_000_000), "2000-02-29 00:00:00");
    }
}
