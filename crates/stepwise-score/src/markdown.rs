//! Number formatting shared by the Markdown reports.

use crate::bootstrap::{Estimate, Interval};

/// A share as a percentage with one decimal (`–` for NaN).
pub fn percent(x: f64) -> String {
    if x.is_nan() { "–".into() } else { format!("{:.1}", 100.0 * x) }
}

/// An interval of shares as `[lo, hi]` percentages (`–` when absent).
pub fn percent_interval(ci: Option<Interval>) -> String {
    match ci {
        Some(i) => format!("[{:.1}, {:.1}]", 100.0 * i.low, 100.0 * i.high),
        None => "–".into(),
    }
}

/// A share with its interval, `82.1 [78.0, 86.0]` (`82.1 –` without one).
pub fn percent_estimate(e: &Estimate) -> String {
    format!("{} {}", percent(e.value), percent_interval(e.ci))
}

/// A difference of shares as a signed percentage with one decimal (`+1.2`, `−3.4`).
pub fn signed_percent(x: f64) -> String {
    format!("{}{:.1}", if x >= 0.0 { "+" } else { "−" }, 100.0 * x.abs())
}

/// A difference of shares, signed, with its interval when it has one: `+5.1 [−1.1, +11.9]`, or `+5.1`.
pub fn signed_percent_interval(x: f64, ci: Option<(f64, f64)>) -> String {
    match ci {
        Some((lo, hi)) => format!("{} [{}, {}]", signed_percent(x), signed_percent(lo), signed_percent(hi)),
        None => signed_percent(x),
    }
}

/// A difference of plain numbers, signed, with `digits` decimals and its interval when it has one:
/// `+0.125 [−0.050, +0.300]`.
pub fn signed_number_interval(x: f64, ci: Option<(f64, f64)>, digits: usize) -> String {
    let s = |v: f64| format!("{}{:.digits$}", if v >= 0.0 { "+" } else { "−" }, v.abs());
    match ci {
        Some((lo, hi)) => format!("{} [{}, {}]", s(x), s(lo), s(hi)),
        None => s(x),
    }
}

/// A plain number with `digits` decimals (`–` for NaN).
pub fn number(x: f64, digits: usize) -> String {
    if x.is_nan() { "–".into() } else { format!("{x:.digits$}") }
}

/// An interval of plain numbers.
pub fn number_interval(ci: Option<Interval>, digits: usize) -> String {
    match ci {
        Some(i) => format!("[{:.digits$}, {:.digits$}]", i.low, i.high),
        None => "–".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(percent(0.6667), "66.7");
        assert_eq!(percent(f64::NAN), "–");
        assert_eq!(percent_interval(Some(Interval { low: 0.5, high: 0.75 })), "[50.0, 75.0]");
        let e = Estimate { value: 0.625, ci: Some(Interval { low: 0.5, high: 0.75 }) };
        assert_eq!(percent_estimate(&e), "62.5 [50.0, 75.0]");
        assert_eq!(signed_percent_interval(0.051, Some((-0.011, 0.119))), "+5.1 [−1.1, +11.9]");
        assert_eq!(signed_percent_interval(-0.02, None), "−2.0");
        assert_eq!(signed_number_interval(0.125, Some((-0.05, 0.3)), 3), "+0.125 [−0.050, +0.300]");
        assert_eq!(number(1.23456, 2), "1.23");
        assert_eq!(number_interval(None, 2), "–");
    }
}
