//! Percentile bootstrap confidence intervals, reproducible for a seed whatever the thread count.
//!
//! Method (Efron's percentile bootstrap): draw `resamples` samples of the same size with replacement, compute
//! the statistic on each, and report the `(1 − c)/2` and `(1 + c)/2` quantiles of those values (linear
//! interpolation between order statistics, numpy's default `"linear"` method) for confidence level `c`.
//!
//! Determinism: resample `b` draws from its own generator `rng_for(seed, "{key}/{b}")`, so the intervals do not
//! depend on thread count or scheduling; `key` names the quantity (e.g. `"suite/a/textual_cloze"`) so two
//! quantities in one run get independent resamples that do not change when other quantities are added.
//!
//! A statistic sees a resample as a weight vector (`weights[i]` = how many times row `i` was drawn), which makes
//! means, ratios of sums and cluster (grouped) resampling all cheap and exact. Resamples whose statistic is NaN
//! (e.g. a ratio with an empty denominator) are dropped before taking quantiles.
//!
//! Large inputs: drawing `n` rows with replacement is the same distribution as drawing multinomial counts over
//! the *distinct* rows (probabilities proportional to their multiplicities). [`mean_estimates`] and
//! [`ratio_estimates`] use that when rows repeat a lot (0/1 correctness, metrics of short sequences), which
//! costs O(distinct rows) per resample instead of O(n) — a million five-step sequences have at most a few
//! hundred distinct score rows.

use std::collections::HashMap;

use rand::Rng;
use rand_distr::{Binomial, Distribution};
use rayon::prelude::*;
use serde::Serialize;
use stepwise_core::rng::rng_for;

pub const DEFAULT_RESAMPLES: usize = 1000;
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

/// How many resamples, which confidence level and which seed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct BootstrapConfig {
    /// Number of resamples (`B`); 0 disables intervals.
    pub resamples: usize,
    /// Confidence level in (0, 1), e.g. 0.95.
    pub confidence: f64,
    pub seed: u64,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        BootstrapConfig { resamples: DEFAULT_RESAMPLES, confidence: DEFAULT_CONFIDENCE, seed: 0 }
    }
}

impl BootstrapConfig {
    /// Check the configuration (the CLI reports the message as a usage error).
    pub fn validate(&self) -> Result<(), String> {
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(format!("confidence level must be strictly between 0 and 1, got {}", self.confidence));
        }
        Ok(())
    }
}

/// What is resampled: single rows, or whole clusters of rows (e.g. all questions of one recipe), which gives
/// honest intervals when rows of a cluster are correlated.
#[derive(Debug, Clone, Copy)]
pub enum Unit<'a> {
    Rows,
    /// `cluster[i]` is the cluster of row `i`; any `usize` labels (they need not be dense).
    Clusters(&'a [usize]),
    /// Row `i` stands for `counts[i]` identical observations; a resample draws `Σ counts` observations
    /// (multinomial counts over the rows, so `weights[i]` can exceed one draw per row).
    Counts(&'a [u64]),
}

/// A confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// A point estimate and its confidence interval (`None` when intervals are disabled or there is no data).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub value: f64,
    pub ci: Option<Interval>,
}

/// A cluster label per row for [`Unit::Clusters`]: rows with the same key (procedure, recipe) share a label.
pub fn cluster_labels<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<usize> {
    let mut labels: HashMap<&str, usize> = HashMap::new();
    keys.into_iter()
        .map(|k| {
            let next = labels.len();
            *labels.entry(k).or_insert(next)
        })
        .collect()
}

/// How a difference's interval reads: "outside noise" when it excludes 0, else "within noise".
pub fn noise_verdict(low: f64, high: f64) -> &'static str {
    if low > 0.0 || high < 0.0 { "outside noise" } else { "within noise" }
}

/// Percentile intervals of `n_stats` statistics computed together on each resample of `n_rows` rows.
///
/// `stat(weights, out)` writes the statistics of one resample into `out` (length `n_stats`); it must be a pure
/// function of `weights`. Returns one interval per statistic (`None` if intervals are disabled, there are fewer
/// than two units to resample — rows, clusters or counted observations —, or every resample gave NaN). One unit
/// resamples to itself every time, and the zero-width interval that would give says nothing about another
/// sample.
pub fn percentile_intervals<F>(
    n_rows: usize,
    unit: Unit<'_>,
    config: &BootstrapConfig,
    key: &str,
    n_stats: usize,
    stat: F,
) -> Vec<Option<Interval>>
where
    F: Fn(&[u32], &mut [f64]) + Sync,
{
    if config.resamples == 0 || n_rows == 0 || n_stats == 0 {
        return vec![None; n_stats];
    }
    let clusters = match unit {
        Unit::Clusters(labels) => {
            assert_eq!(labels.len(), n_rows, "one cluster label per row");
            Some(cluster_members(labels))
        }
        _ => None,
    };
    let units = match (unit, &clusters) {
        (_, Some(members)) => members.len() as u64,
        (Unit::Counts(counts), _) => counts.iter().sum(),
        _ => n_rows as u64,
    };
    if units < 2 {
        return vec![None; n_stats];
    }
    let multinomial = match unit {
        Unit::Counts(counts) => {
            assert_eq!(counts.len(), n_rows, "one count per row");
            let total: u64 = counts.iter().sum();
            assert!(total <= u32::MAX as u64, "at most 2^32 − 1 observations");
            // rest[i] = Σ_{j ≥ i} counts[j]: row i's conditional probability given the draws left.
            let mut rest = vec![0u64; n_rows + 1];
            for i in (0..n_rows).rev() {
                rest[i] = rest[i + 1] + counts[i];
            }
            Some((counts, rest))
        }
        _ => None,
    };
    let draws: Vec<Vec<f64>> = (0..config.resamples)
        .into_par_iter()
        .map_init(
            || vec![0u32; n_rows],
            |weights, b| {
                weights.fill(0);
                let mut rng = rng_for(config.seed, &format!("{key}/{b}"));
                match (&clusters, &multinomial) {
                    (Some(members), _) => {
                        for _ in 0..members.len() {
                            for &row in &members[rng.random_range(0..members.len())] {
                                weights[row] += 1;
                            }
                        }
                    }
                    (None, Some((counts, rest))) => draw_multinomial(&mut rng, counts, rest, weights),
                    (None, None) => {
                        for _ in 0..n_rows {
                            weights[rng.random_range(0..n_rows)] += 1;
                        }
                    }
                }
                let mut out = vec![0.0; n_stats];
                stat(weights, &mut out);
                out
            },
        )
        .collect();
    let alpha = (1.0 - config.confidence) / 2.0;
    (0..n_stats)
        .map(|s| {
            let mut values: Vec<f64> = draws.iter().map(|d| d[s]).filter(|v| !v.is_nan()).collect();
            if values.is_empty() {
                return None;
            }
            values.sort_by(f64::total_cmp);
            Some(Interval { low: quantile_sorted(&values, alpha), high: quantile_sorted(&values, 1.0 - alpha) })
        })
        .collect()
}

/// Multinomial counts of `rest[0]` draws over rows with multiplicities `counts`, by sequential conditional
/// binomials: row `i` gets `Binomial(draws left, counts[i] / rest[i])`.
fn draw_multinomial(rng: &mut impl Rng, counts: &[u64], rest: &[u64], weights: &mut [u32]) {
    let mut left = rest[0];
    for (i, &c) in counts.iter().enumerate() {
        if left == 0 {
            break;
        }
        let drawn = if c == rest[i] {
            left
        } else if c == 0 {
            0
        } else {
            let p = c as f64 / rest[i] as f64;
            Binomial::new(left, p).expect("0 < p < 1").sample(rng)
        };
        weights[i] = drawn as u32;
        left -= drawn;
    }
}

/// Rows of each cluster, clusters in order of first appearance (so results do not depend on label values).
fn cluster_members(labels: &[usize]) -> Vec<Vec<usize>> {
    let mut index = HashMap::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (row, &label) in labels.iter().enumerate() {
        let c = *index.entry(label).or_insert_with(|| {
            members.push(Vec::new());
            members.len() - 1
        });
        members[c].push(row);
    }
    members
}

/// The `p` quantile of sorted, non-empty `values` with linear interpolation between order statistics.
pub fn quantile_sorted(values: &[f64], p: f64) -> f64 {
    let h = p.clamp(0.0, 1.0) * (values.len() - 1) as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(values.len() - 1);
    values[lo] + (h - lo as f64) * (values[hi] - values[lo])
}

/// Plain mean (NaN for no values).
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

/// Sample standard deviation (n − 1 in the denominator; None for fewer than two values).
pub fn sample_sd(values: &[f64]) -> Option<f64> {
    (values.len() > 1).then(|| {
        let m = mean(values);
        (values.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64).sqrt()
    })
}

fn weighted_mean(values: &[f64], weights: &[u32]) -> f64 {
    let mut sum = 0.0;
    let mut total = 0u64;
    for (v, &w) in values.iter().zip(weights) {
        if w != 0 {
            sum += w as f64 * v;
            total += w as u64;
        }
    }
    if total == 0 { f64::NAN } else { sum / total as f64 }
}

fn weighted_ratio(num: &[f64], den: &[f64], weights: &[u32]) -> f64 {
    let mut n = 0.0;
    let mut d = 0.0;
    for ((a, b), &w) in num.iter().zip(den).zip(weights) {
        if w != 0 {
            n += w as f64 * a;
            d += w as f64 * b;
        }
    }
    n / d
}

/// Rows (values across `columns`) that occur more than once, merged: the distinct rows in order of first
/// appearance as new columns, and their multiplicities. `None` when merging would not pay (few repeats).
fn merge_repeated_rows(columns: &[&[f64]], n: usize) -> Option<(Vec<Vec<f64>>, Vec<u64>)> {
    const MIN_ROWS: usize = 256;
    if n < MIN_ROWS || n > u32::MAX as usize {
        return None;
    }
    let limit = n / 8;
    let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut counts: Vec<u64> = Vec::new();
    let mut first_row: Vec<usize> = Vec::new();
    let mut key = Vec::with_capacity(columns.len());
    for row in 0..n {
        key.clear();
        key.extend(columns.iter().map(|c| c[row].to_bits()));
        match index.get(key.as_slice()) {
            Some(&k) => counts[k] += 1,
            None => {
                if counts.len() == limit {
                    return None;
                }
                index.insert(key.clone(), counts.len());
                counts.push(1);
                first_row.push(row);
            }
        }
    }
    let merged = columns.iter().map(|c| first_row.iter().map(|&r| c[r]).collect()).collect();
    Some((merged, counts))
}

/// The mean of each column with its percentile interval; all columns share the same resamples (so their
/// intervals are computed on identical row draws). Columns must have equal lengths.
pub fn mean_estimates(columns: &[&[f64]], unit: Unit<'_>, config: &BootstrapConfig, key: &str) -> Vec<Estimate> {
    let n = columns.first().map_or(0, |c| c.len());
    assert!(columns.iter().all(|c| c.len() == n), "columns of equal length");
    let merged = match unit {
        Unit::Rows if config.resamples > 0 => merge_repeated_rows(columns, n),
        _ => None,
    };
    let cis = match &merged {
        Some((distinct, counts)) => {
            let distinct: Vec<&[f64]> = distinct.iter().map(Vec::as_slice).collect();
            percentile_intervals(counts.len(), Unit::Counts(counts), config, key, columns.len(), |w, out| {
                for (o, col) in out.iter_mut().zip(&distinct) {
                    *o = weighted_mean(col, w);
                }
            })
        }
        None => percentile_intervals(n, unit, config, key, columns.len(), |w, out| {
            for (o, col) in out.iter_mut().zip(columns) {
                *o = weighted_mean(col, w);
            }
        }),
    };
    columns.iter().zip(cis).map(|(col, ci)| Estimate { value: mean(col), ci }).collect()
}

/// The mean of `values` with its percentile interval.
pub fn mean_estimate(values: &[f64], unit: Unit<'_>, config: &BootstrapConfig, key: &str) -> Estimate {
    mean_estimates(&[values], unit, config, key)[0]
}

/// Ratios of sums `Σ num / Σ den` (pooled, "micro" averages) with their intervals; pairs share resamples.
pub fn ratio_estimates(
    pairs: &[(&[f64], &[f64])],
    unit: Unit<'_>,
    config: &BootstrapConfig,
    key: &str,
) -> Vec<Estimate> {
    let n = pairs.first().map_or(0, |p| p.0.len());
    assert!(pairs.iter().all(|p| p.0.len() == n && p.1.len() == n), "columns of equal length");
    let flat: Vec<&[f64]> = pairs.iter().flat_map(|(a, b)| [*a, *b]).collect();
    let merged = match unit {
        Unit::Rows if config.resamples > 0 => merge_repeated_rows(&flat, n),
        _ => None,
    };
    let cis = match &merged {
        Some((distinct, counts)) => {
            percentile_intervals(counts.len(), Unit::Counts(counts), config, key, pairs.len(), |w, out| {
                for (s, o) in out.iter_mut().enumerate() {
                    *o = weighted_ratio(&distinct[2 * s], &distinct[2 * s + 1], w);
                }
            })
        }
        None => percentile_intervals(n, unit, config, key, pairs.len(), |w, out| {
            for (o, (num, den)) in out.iter_mut().zip(pairs) {
                *o = weighted_ratio(num, den, w);
            }
        }),
    };
    pairs
        .iter()
        .zip(cis)
        .map(|((num, den), ci)| Estimate { value: num.iter().sum::<f64>() / den.iter().sum::<f64>(), ci })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(resamples: usize, seed: u64) -> BootstrapConfig {
        BootstrapConfig { resamples, confidence: 0.95, seed }
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        // numpy.quantile([1,2,3,4], [0, .25, .5, .975, 1]) = 1, 1.75, 2.5, 3.925, 4
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert!((quantile_sorted(&v, 0.25) - 1.75).abs() < 1e-12);
        assert!((quantile_sorted(&v, 0.5) - 2.5).abs() < 1e-12);
        assert!((quantile_sorted(&v, 0.975) - 3.925).abs() < 1e-12);
        assert_eq!(quantile_sorted(&v, 1.0), 4.0);
        assert_eq!(quantile_sorted(&[7.0], 0.3), 7.0);
    }

    #[test]
    fn interval_brackets_the_mean_and_is_reproducible() {
        let values: Vec<f64> = (0..200).map(|i| if i % 3 == 0 { 1.0 } else { 0.0 }).collect();
        let a = mean_estimate(&values, Unit::Rows, &cfg(500, 7), "x");
        let b = mean_estimate(&values, Unit::Rows, &cfg(500, 7), "x");
        assert_eq!(a, b);
        let ci = a.ci.expect("interval");
        assert!(ci.low < a.value && a.value < ci.high, "{a:?}");
        // Normal approximation: half-width ≈ 1.96·sqrt(p(1−p)/n) ≈ 0.065; the bootstrap should be close.
        let half = (ci.high - ci.low) / 2.0;
        assert!((half - 0.065).abs() < 0.015, "half-width {half}");
        // Another seed or key gives other resamples (continuous data, so the quantiles differ too).
        let cont: Vec<f64> = (0..200).map(|i| ((i * 37) % 101) as f64 / 7.0).collect();
        let base = mean_estimate(&cont, Unit::Rows, &cfg(500, 7), "x");
        assert_ne!(mean_estimate(&cont, Unit::Rows, &cfg(500, 8), "x"), base);
        assert_ne!(mean_estimate(&cont, Unit::Rows, &cfg(500, 7), "y"), base);
    }

    #[test]
    fn same_result_for_any_thread_count() {
        let values: Vec<f64> = (0..97).map(|i| ((i * 37) % 11) as f64).collect();
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| mean_estimate(&values, Unit::Rows, &cfg(300, 1), "k"))
        };
        assert_eq!(run(1), run(3));
    }

    #[test]
    fn constant_data_gives_a_degenerate_interval() {
        let e = mean_estimate(&[0.5; 10], Unit::Rows, &cfg(100, 0), "c");
        assert_eq!(e.ci, Some(Interval { low: 0.5, high: 0.5 }));
    }

    #[test]
    fn disabled_or_empty_gives_no_interval() {
        assert_eq!(mean_estimate(&[1.0, 0.0], Unit::Rows, &cfg(0, 0), "z").ci, None);
        let e = mean_estimate(&[], Unit::Rows, &cfg(10, 0), "z");
        assert!(e.value.is_nan());
        assert_eq!(e.ci, None);
    }

    #[test]
    fn one_unit_to_resample_gives_no_interval() {
        let c = cfg(100, 0);
        // One row, one cluster of several rows, one counted observation: nothing to resample but itself.
        assert_eq!(mean_estimate(&[1.0], Unit::Rows, &c, "one").ci, None);
        let e = mean_estimate(&[1.0, 0.0, 1.0], Unit::Clusters(&[7, 7, 7]), &c, "one");
        assert_eq!((e.value, e.ci), (2.0 / 3.0, None));
        assert_eq!(percentile_intervals(1, Unit::Counts(&[1]), &c, "one", 1, |_, out| out[0] = 1.0), vec![None]);
        // Two clusters, or one row counted twice, do resample.
        assert!(mean_estimate(&[1.0, 0.0, 1.0], Unit::Clusters(&[7, 8, 7]), &c, "two").ci.is_some());
        assert!(percentile_intervals(1, Unit::Counts(&[2]), &c, "two", 1, |_, out| out[0] = 1.0)[0].is_some());
    }

    #[test]
    fn cluster_resampling_keeps_clusters_whole() {
        // Two clusters with constant values inside: every resample mean is a mix of whole clusters, so with
        // cluster sizes 1 and 3 the only possible resample means are 0, 0.25·... — check they are attainable
        // values of (k1·v1·1 + k2·v2·3)/(k1 + 3·k2) with k1 + k2 = 2.
        let values = [1.0, 0.0, 0.0, 0.0];
        let labels = [10, 20, 20, 20];
        let possible = [1.0, 1.0 / 4.0, 0.0]; // (1,1), (2,0), (0,2)
        let n_stats = 1;
        let seen = std::sync::Mutex::new(Vec::new());
        percentile_intervals(4, Unit::Clusters(&labels), &cfg(200, 3), "cl", n_stats, |w, out| {
            out[0] = weighted_mean(&values, w);
            seen.lock().unwrap().push(out[0]);
        });
        for v in seen.into_inner().unwrap() {
            assert!(possible.iter().any(|p| (p - v).abs() < 1e-12), "impossible cluster mean {v}");
        }
    }

    /// Merged repeated rows (multinomial draws) and plain row draws are the same bootstrap: their intervals
    /// agree up to Monte Carlo noise.
    #[test]
    fn merged_rows_match_plain_resampling() {
        let values: Vec<f64> = (0..3000).map(|i| [0.0, 1.0, 0.5][(i * 7 + i / 13) % 3]).collect();
        let c = cfg(4000, 11);
        let merged = mean_estimate(&values, Unit::Rows, &c, "m");
        assert!(merge_repeated_rows(&[&values], values.len()).is_some());
        let plain = percentile_intervals(values.len(), Unit::Rows, &c, "m", 1, |w, out| {
            out[0] = weighted_mean(&values, w);
        })[0]
            .unwrap();
        let m = merged.ci.unwrap();
        assert!((m.low - plain.low).abs() < 0.004 && (m.high - plain.high).abs() < 0.004, "{m:?} vs {plain:?}");
    }

    #[test]
    fn multinomial_counts_sum_to_the_draws() {
        let counts = [5u64, 0, 3, 12];
        let rest = [20u64, 15, 15, 12, 0];
        let mut rng = rng_for(0, "multinomial");
        for _ in 0..100 {
            let mut w = [0u32; 4];
            draw_multinomial(&mut rng, &counts, &rest, &mut w);
            assert_eq!(w.iter().sum::<u32>(), 20);
            assert_eq!(w[1], 0);
        }
    }

    #[test]
    fn ratio_of_sums() {
        let num = [1.0, 2.0, 3.0];
        let den = [2.0, 2.0, 4.0];
        let e = ratio_estimates(&[(&num, &den)], Unit::Rows, &cfg(50, 0), "r")[0];
        assert!((e.value - 0.75).abs() < 1e-15);
        let ci = e.ci.unwrap();
        assert!(ci.low <= 0.75 && 0.75 <= ci.high);
    }

    #[test]
    fn validate_rejects_bad_confidence() {
        assert!(BootstrapConfig { confidence: 1.0, ..Default::default() }.validate().is_err());
        assert!(BootstrapConfig::default().validate().is_ok());
    }
}
