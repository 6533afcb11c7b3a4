//! Numbers as people read them, for every output of the diagnosis (rules,
//! dataset values, reports). A leaf: it imports nothing of the crate.

/// A number for people: integers as integers, others with six significant
/// digits, very small or large ones in scientific notation.
pub fn format_number(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    let a = x.abs();
    if (1e-3..1e9).contains(&a) {
        let decimals = (5 - a.log10().floor() as i32).max(0) as usize;
        let s = format!("{x:.decimals$}");
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        return s;
    }
    let s = format!("{x:.5e}");
    match s.split_once('e') {
        Some((m, e)) if m.contains('.') => {
            format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
        }
        _ => s,
    }
}

/// A duration for people: ns, µs, ms or s with three significant digits.
pub fn format_duration_ns(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a >= 1e9 {
        (ns / 1e9, "s")
    } else if a >= 1e6 {
        (ns / 1e6, "ms")
    } else if a >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    let decimals = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(format_number(23631.5), "23631.5");
        assert_eq!(format_number(2.125), "2.125");
        assert_eq!(format_number(10823.0), "10823");
        assert_eq!(format_number(0.0734523456), "0.0734523");
        assert_eq!(format_number(0.000351), "3.51e-4");
        assert_eq!(format_number(-1.5), "-1.5");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration_ns(512.0), "512 ns");
        assert_eq!(format_duration_ns(1_234_000.0), "1.23 ms");
        assert_eq!(format_duration_ns(45_600.0), "45.6 µs");
        assert_eq!(format_duration_ns(2.5e9), "2.50 s");
    }
}
