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
}
