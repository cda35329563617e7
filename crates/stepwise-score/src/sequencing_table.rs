//! The results table of the sequencing baselines, laid out like the sequencing paper's Table 2: one row per
//! method × features, the paper's metrics against the authored order (single reference) and against the best
//! of all valid orders (multi-reference), for one or more datasets. Metrics come from `stepwise_score` (the
//! same code as `stepwise eval`), through [`score`] only. `stepwise baseline` and `stepwise seq-study` write it;
//! [`breakdown`] adds the paper's Table 4 (instances with one reference, several, all).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::bootstrap::BootstrapConfig;
use crate::markdown::signed_percent as signed_pct;
use crate::predictions::OrderRecord;
use crate::sequence_metrics::Metric;
use crate::sequencing_eval::{SequencingOptions, SequencingReport, evaluate_orders};
use serde::{Deserialize, Serialize};
use stepwise_core::sequencing::{OrderPrediction, SequencingInstance};

/// A value with its 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Value {
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<[f64; 2]>,
}

impl Value {
    /// The interval as the Markdown helpers take it.
    pub fn interval(&self) -> Option<crate::bootstrap::Interval> {
        self.ci.map(|[low, high]| crate::bootstrap::Interval { low, high })
    }
}

/// Metric name (`stepwise_score` machine names) → value.
pub type Scores = BTreeMap<String, Value>;

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub dataset: String,
    pub method: String,
    /// `text`, `image`, `multimodal`, or `-` for methods that read no features.
    pub features: String,
    pub sequences: usize,
    /// Scored sequences with more than one reference.
    pub multi_reference: usize,
    /// Training runs averaged into the values (one per seed, [`score_seeds`]); 1 for a single run; `None` in
    /// files written before rows recorded it. Merged tables can hold one method twice (a one-seed baseline beside
    /// a study's seed mean), told apart by this.
    #[serde(default)]
    pub seeds: Option<usize>,
    pub single: Scores,
    pub multi: Scores,
}

/// A results file (`results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub rows: Vec<Row>,
    /// Free-form notes (training summaries, evaluation protocol).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Results {
    /// The rows and notes of several results folders' `results.json`, in the order given.
    pub fn merge(dirs: &[PathBuf]) -> stepwise_core::Result<Results> {
        let mut all = Results { rows: Vec::new(), notes: Vec::new() };
        for dir in dirs {
            let file = dir.join("results.json");
            let v = stepwise_core::json::read_json(&file)?;
            let r: Results = serde_json::from_value(v).map_err(|e| {
                stepwise_core::Error::field(&file, stepwise_core::Location::File, "(results)", e.to_string())
            })?;
            all.rows.extend(r.rows);
            all.notes.extend(r.notes);
        }
        Ok(all)
    }

    /// `<stem>.json` and `<stem>.md` into `dir` (a results folder being written), atomically.
    pub fn write_files(&self, dir: &Path, stem: &str) -> stepwise_core::Result<()> {
        use stepwise_core::output::write_string_atomic;
        write_string_atomic(&dir.join(format!("{stem}.json")), &stepwise_core::json::to_pretty_sorted(self))?;
        write_string_atomic(&dir.join(format!("{stem}.md")), &markdown(self))
    }
}

/// Single- and multi-reference scores of `predictions` (ids of `instances`; `split` None = all instances).
pub fn score(
    instances: &[SequencingInstance],
    predictions: &[OrderPrediction],
    split: Option<&str>,
    seed: u64,
) -> stepwise_core::Result<(usize, usize, Scores, Scores)> {
    let (single, multi) = evaluate_both(instances, predictions, split, seed)?;
    let all = |r: &SequencingReport| -> Scores {
        let g = r.groups.iter().find(|g| g.group == "all").expect("evaluate_orders always reports `all`");
        g.metrics
            .iter()
            .map(|(k, e)| (k.clone(), Value { value: e.value, ci: e.ci.map(|c| [c.low, c.high]) }))
            .collect()
    };
    Ok((multi.counts.scored, multi.counts.multi_reference, all(&single), all(&multi)))
}

/// `predictions` scored against the authored order (single) and against the best valid order (multi).
fn evaluate_both(
    instances: &[SequencingInstance],
    predictions: &[OrderPrediction],
    split: Option<&str>,
    seed: u64,
) -> stepwise_core::Result<(SequencingReport, SequencingReport)> {
    let records = OrderRecord::from_predictions(predictions);
    let options = SequencingOptions {
        split: split.map(str::to_string),
        bootstrap: BootstrapConfig { seed, ..BootstrapConfig::default() },
        ..SequencingOptions::default()
    };
    let source = Path::new("(predictions)");
    let multi = evaluate_orders(instances, &records, source, &options)?;
    let authored: Vec<SequencingInstance> = instances.iter().map(SequencingInstance::authored_only).collect();
    let single = evaluate_orders(&authored, &records, source, &options)?;
    Ok((single, multi))
}

/// Each scored sequence's metric values (`[metric][sequence]`, [`Metric::ALL`] order, sequences in the
/// instances' order) against the best valid order (multi) and against the authored order (single).
fn per_sequence(
    instances: &[SequencingInstance],
    predictions: &[OrderPrediction],
    split: Option<&str>,
) -> stepwise_core::Result<PerSequence> {
    let (single, multi) = evaluate_both(instances, predictions, split, 0)?;
    let columns = |r: &SequencingReport| -> Vec<Vec<f64>> {
        Metric::ALL.iter().map(|m| r.instances.iter().map(|i| m.value(&i.score)).collect()).collect()
    };
    Ok(PerSequence {
        ids: multi.instances.iter().map(|i| i.id.clone()).collect(),
        single: columns(&single),
        multi: columns(&multi),
        multi_reference: multi.counts.multi_reference,
    })
}

/// Per-sequence metric values of one prediction set ([`per_sequence`]).
struct PerSequence {
    ids: Vec<String>,
    /// `[metric][sequence]` against the authored order.
    single: Vec<Vec<f64>>,
    /// `[metric][sequence]` against the best valid order.
    multi: Vec<Vec<f64>>,
    multi_reference: usize,
}

/// Each sequence's metric values averaged over the prediction sets of several seeds; `each` sees every seed's
/// own values first.
fn seed_means(
    instances: &[SequencingInstance],
    sets: &[Vec<OrderPrediction>],
    split: Option<&str>,
    mut each: impl FnMut(&PerSequence),
) -> stepwise_core::Result<PerSequence> {
    let mut sums: Option<PerSequence> = None;
    for preds in sets {
        let p = per_sequence(instances, preds, split)?;
        each(&p);
        match &mut sums {
            None => sums = Some(p),
            Some(acc) => {
                if acc.ids != p.ids {
                    return Err(stepwise_core::Error::bad_input(
                        "the seeds' predictions cover different sequences".to_string(),
                    ));
                }
                for (a, col) in acc.single.iter_mut().zip(&p.single).chain(acc.multi.iter_mut().zip(&p.multi)) {
                    a.iter_mut().zip(col).for_each(|(a, v)| *a += v);
                }
            }
        }
    }
    let mut means = sums.ok_or_else(|| stepwise_core::Error::bad_input("no seed to score".to_string()))?;
    let k = sets.len() as f64;
    means.single.iter_mut().chain(means.multi.iter_mut()).flatten().for_each(|v| *v /= k);
    Ok(means)
}

/// One method trained with several seeds: each seed's score (mean over sequences) per metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedSpread {
    /// The training seeds, in the order of the values.
    pub seeds: Vec<u64>,
    /// Against the authored order, keyed by metric name.
    pub single: BTreeMap<String, Vec<f64>>,
    /// Against the best valid order.
    pub multi: BTreeMap<String, Vec<f64>>,
}

impl SeedSpread {
    /// The sample standard deviation over seeds of a multi-reference metric (None with one seed).
    pub fn multi_sd(&self, metric: Metric) -> Option<f64> {
        crate::bootstrap::sample_sd(self.multi.get(metric.name())?)
    }
}

/// Score one method trained with each of `seeds` (`predictions[k]` from `seeds[k]`): each metric's value is the
/// mean over seeds and its interval a bootstrap over sequences of every sequence's mean over the seeds, so the
/// interval says how much the test sequences leave open and [`SeedSpread`] how much training varies. With one
/// seed this is [`score`].
pub fn score_seeds(
    instances: &[SequencingInstance],
    predictions: &[Vec<OrderPrediction>],
    seeds: &[u64],
    split: Option<&str>,
    seed: u64,
) -> stepwise_core::Result<(usize, usize, Scores, Scores, SeedSpread)> {
    assert_eq!(predictions.len(), seeds.len(), "one prediction set per seed");
    let mut spread = SeedSpread { seeds: seeds.to_vec(), single: BTreeMap::new(), multi: BTreeMap::new() };
    if predictions.len() == 1 {
        let (n, multi_ref, single, multi) = score(instances, &predictions[0], split, seed)?;
        let values = |s: &Scores| s.iter().map(|(k, v)| (k.clone(), vec![v.value])).collect();
        spread.single = values(&single);
        spread.multi = values(&multi);
        return Ok((n, multi_ref, single, multi, spread));
    }
    let PerSequence { ids, single, multi, multi_reference: multi_ref } =
        seed_means(instances, predictions, split, |p| {
            for (m, (s, x)) in Metric::ALL.iter().zip(p.single.iter().zip(&p.multi)) {
                spread.single.entry(m.name().to_string()).or_default().push(crate::bootstrap::mean(s));
                spread.multi.entry(m.name().to_string()).or_default().push(crate::bootstrap::mean(x));
            }
        })?;
    let config = BootstrapConfig { seed, ..BootstrapConfig::default() };
    let estimate = |columns: &[Vec<f64>], key: &str| -> Scores {
        let refs: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
        let est = crate::bootstrap::mean_estimates(&refs, crate::bootstrap::Unit::Rows, &config, key);
        Metric::ALL
            .iter()
            .zip(est)
            .map(|(m, e)| (m.name().to_string(), Value { value: e.value, ci: e.ci.map(|c| [c.low, c.high]) }))
            .collect()
    };
    Ok((
        ids.len(),
        multi_ref,
        estimate(&single, "sequencing-seeds/single"),
        estimate(&multi, "sequencing-seeds/multi"),
        spread,
    ))
}

/// The difference `a − b` in `metric` against the best valid order, sequence by sequence after averaging each
/// method over its seeds, with a bootstrap interval over sequences (paired: both methods on the same
/// resampled sequences). Outside noise when the interval excludes 0.
pub fn paired_difference(
    instances: &[SequencingInstance],
    a: &[Vec<OrderPrediction>],
    b: &[Vec<OrderPrediction>],
    metric: Metric,
    split: Option<&str>,
    seed: u64,
) -> stepwise_core::Result<Value> {
    let at = Metric::ALL.iter().position(|m| *m == metric).expect("every metric is in ALL");
    let a = seed_means(instances, a, split, |_| {})?;
    let b = seed_means(instances, b, split, |_| {})?;
    if a.ids != b.ids {
        return Err(stepwise_core::Error::bad_input(
            "the two methods' predictions cover different sequences".to_string(),
        ));
    }
    let (va, vb) = (&a.multi[at], &b.multi[at]);
    let diff: Vec<f64> = va.iter().zip(vb).map(|(x, y)| x - y).collect();
    let config = BootstrapConfig { seed, ..BootstrapConfig::default() };
    let e = crate::bootstrap::mean_estimate(&diff, crate::bootstrap::Unit::Rows, &config, "sequencing-seeds/paired");
    Ok(Value { value: e.value, ci: e.ci.map(|c| [c.low, c.high]) })
}

/// One line of the seeds table: a method's multi-reference PMR over its seeds, and its difference from a
/// reference method (the pairwise baseline on the same modality) on the same sequences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedRow {
    pub method: String,
    pub features: String,
    pub sequences: usize,
    /// Mean over seeds, with the interval over sequences of each sequence's seed-mean.
    pub pmr: Value,
    pub spread: SeedSpread,
    /// `(reference method, this − reference)` in multi-reference PMR, paired over sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versus: Option<(String, Value)>,
}

/// A method's line in both the results table and the seeds table, from its predictions under every seed:
/// values are means over the seeds ([`score_seeds`]); `versus` is the reference the seeds line compares with
/// (its name and its predictions under the same seeds), paired over sequences in multi-reference PMR.
#[allow(clippy::too_many_arguments)]
pub fn seeded_rows(
    dataset: &str,
    method: &str,
    features: &str,
    instances: &[SequencingInstance],
    runs: &[Vec<OrderPrediction>],
    seeds: &[u64],
    versus: Option<(String, &[Vec<OrderPrediction>])>,
    split: Option<&str>,
    seed: u64,
) -> stepwise_core::Result<(Row, SeedRow)> {
    let (n, multi_reference, single, multi, spread) = score_seeds(instances, runs, seeds, split, seed)?;
    let versus = match versus {
        Some((name, base)) => Some((name, paired_difference(instances, runs, base, Metric::Pmr, split, seed)?)),
        None => None,
    };
    let seeds_row = SeedRow {
        method: method.into(),
        features: features.into(),
        sequences: n,
        pmr: multi[Metric::Pmr.name()],
        spread,
        versus,
    };
    let row = Row {
        dataset: dataset.into(),
        method: method.into(),
        features: features.into(),
        sequences: n,
        multi_reference,
        seeds: Some(seeds.len()),
        single,
        multi,
    };
    Ok((row, seeds_row))
}

fn pct(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

/// The seeds table (Markdown): each method's multi-reference PMR with its interval over sequences, the spread
/// over seeds, each seed's value, and the paired difference from its reference with a verdict.
pub fn seeds_markdown(rows: &[SeedRow]) -> String {
    let mut out = String::from(
        "| Method | Features | n | seeds | multi PMR % [95% CI] | sd over seeds | per seed | Δ PMR vs reference [95% CI] |\n\
         |---|---|---:|---:|---|---:|---|---|\n",
    );
    for r in rows {
        let ci = r.pmr.ci.map_or(String::new(), |[lo, hi]| format!(" [{}, {}]", pct(lo), pct(hi)));
        let values = r.spread.multi.get(Metric::Pmr.name()).cloned().unwrap_or_default();
        let per_seed: Vec<String> = values.iter().map(|v| pct(*v)).collect();
        let sd = r.spread.multi_sd(Metric::Pmr).map_or("–".into(), pct);
        let versus = match &r.versus {
            None => "–".into(),
            Some((name, d)) => {
                let (ci, verdict) = match d.ci {
                    Some([lo, hi]) => {
                        (format!(" [{}, {}]", signed_pct(lo), signed_pct(hi)), crate::bootstrap::noise_verdict(lo, hi))
                    }
                    None => (String::new(), "no interval"),
                };
                format!("{}{ci} vs {name}: {verdict}", signed_pct(d.value))
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {}{ci} | {sd} | {} | {versus} |\n",
            r.method,
            r.features,
            r.sequences,
            values.len(),
            pct(r.pmr.value),
            per_seed.join(", ")
        ));
    }
    out.push_str(
        "\nmulti PMR = perfect match ratio against the best valid order, the mean over seeds; its interval is a \
         95% bootstrap over sequences of each sequence's mean over the seeds (what the test set leaves open), sd \
         the standard deviation of the seeds' own PMRs (what training leaves open). Δ: the paired difference from \
         the reference method on the same sequences (each side averaged over its seeds), outside noise when its \
         95% interval excludes 0.\n",
    );
    out
}

/// The Table 4 rows of one method trained with each of `seeds` (`runs[k]` from `seeds[k]`): its scores
/// ([`score_seeds`], so the `All` row is the results table's row) on the instances of `split` with one reference
/// (`Single`), several (`Multi.`) and all (`All`), in the `dataset` column; subsets without a scored instance are
/// left out.
pub fn breakdown(
    instances: &[SequencingInstance],
    runs: &[Vec<OrderPrediction>],
    seeds: &[u64],
    split: Option<&str>,
    seed: u64,
    method: &str,
    features: &str,
) -> stepwise_core::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (subset, keep) in [("Single", 1usize..=1), ("Multi.", 2..=usize::MAX), ("All", 1..=usize::MAX)] {
        let insts: Vec<SequencingInstance> =
            instances.iter().filter(|i| keep.contains(&i.references.len())).cloned().collect();
        if !insts.iter().any(|i| split.is_none_or(|s| i.split == s)) {
            continue;
        }
        let ids: std::collections::BTreeSet<&str> = insts.iter().map(|i| i.id.as_str()).collect();
        let subs: Vec<Vec<OrderPrediction>> =
            runs.iter().map(|preds| preds.iter().filter(|p| ids.contains(p.id.as_str())).cloned().collect()).collect();
        let (sequences, multi_reference, single, multi, _) = score_seeds(&insts, &subs, seeds, split, seed)?;
        rows.push(Row {
            dataset: subset.into(),
            method: method.into(),
            features: features.into(),
            sequences,
            multi_reference,
            seeds: Some(seeds.len()),
            single,
            multi,
        });
    }
    Ok(rows)
}

/// A share with its 95% interval (`48.4 [45.0, 51.6]`), a plain number without it (their intervals are in
/// results.json: with them every row would run to sixteen intervals).
fn cell(m: Metric, v: Option<&Value>) -> String {
    use crate::markdown::{percent, percent_interval};
    match v {
        None => "–".into(),
        Some(v) if m.is_share() => {
            let ci = v.interval();
            if ci.is_some() { format!("{} {}", percent(v.value), percent_interval(ci)) } else { percent(v.value) }
        }
        Some(v) => format!("{:.3}", v.value),
    }
}

/// The Markdown table: Dataset | Method | Features | n | seeds | single-reference metrics | multi-reference
/// metrics.
/// Multi-reference cells are `–` for a dataset without alternative orders (they would repeat the single ones).
pub fn markdown(results: &Results) -> String {
    let order = [Metric::PositionAccuracy, Metric::Pmr, Metric::KendallTau, Metric::Distance, Metric::Lq, Metric::Lr];
    let mut out = String::new();
    out.push_str("| Dataset | Method | Features | n | seeds |");
    for m in order {
        out.push_str(&format!(" {}{} |", m.label(), if m.is_share() { " %" } else { "" }));
    }
    for m in order {
        out.push_str(&format!(" multi {}{} |", m.label(), if m.is_share() { " %" } else { "" }));
    }
    out.push_str("\n|---|---|---|---:|---:|");
    out.push_str(&"---:|".repeat(order.len() * 2));
    out.push('\n');
    for r in &results.rows {
        let seeds = r.seeds.map_or("–".into(), |k| k.to_string());
        out.push_str(&format!("| {} | {} | {} | {} | {seeds} |", r.dataset, r.method, r.features, r.sequences));
        for m in order {
            out.push_str(&format!(" {} |", cell(m, r.single.get(m.name()))));
        }
        for m in order {
            let v = if r.multi_reference > 0 { r.multi.get(m.name()) } else { None };
            out.push_str(&format!(" {} |", cell(m, v)));
        }
        out.push('\n');
    }
    out.push_str(
        "\nAcc = position accuracy, PMR = perfect match ratio (both %), τ = Kendall's tau, Dist = summed position \
         distance (lower is better), L_q / L_r = longest common subsequence / substring (raw lengths). Single = \
         against the authored order; multi = against the best valid order (`–` when the dataset has no \
         alternative orders). Means over sequences, with 95% bootstrap intervals over sequences for Acc and PMR \
         (the other metrics' intervals are in results.json); seeds = training runs averaged into the row (each \
         sequence's values averaged over its seeds before the bootstrap).\n",
    );
    for n in &results.notes {
        out.push_str(&format!("\n- {n}"));
    }
    if !results.notes.is_empty() {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::sequencing::SequencingItem;

    fn inst(id: &str, refs: Vec<Vec<usize>>) -> SequencingInstance {
        SequencingInstance {
            constraints: None,
            id: id.into(),
            procedure: id.into(),
            split: "test".into(),
            modality: "text".into(),
            items: (0..3).map(|s| SequencingItem { step: s, title: None, text: None, images: vec![] }).collect(),
            references: refs,
        }
    }

    #[test]
    fn single_and_multi_reference_scores_differ_where_alternatives_exist() {
        let instances = vec![inst("a", vec![vec![0, 1, 2], vec![1, 0, 2]]), inst("b", vec![vec![2, 1, 0]])];
        let preds = vec![
            OrderPrediction { id: "a".into(), order: vec![1, 0, 2] },
            OrderPrediction { id: "b".into(), order: vec![2, 1, 0] },
        ];
        let (n, multi_ref, single, multi) = score(&instances, &preds, Some("test"), 0).unwrap();
        assert_eq!((n, multi_ref), (2, 1));
        assert_eq!(single["pmr"].value, 0.5);
        assert_eq!(multi["pmr"].value, 1.0);
        let md = markdown(&Results {
            rows: vec![Row {
                dataset: "d".into(),
                method: "m".into(),
                features: "-".into(),
                sequences: n,
                multi_reference: multi_ref,
                seeds: Some(1),
                single,
                multi,
            }],
            notes: vec![],
        });
        // Shares carry their interval; the row says it is one run.
        assert!(md.contains("| d | m | - | 2 | 1 | 66.7 [33.3, 100.0] | 50.0 [0.0, 100.0] | 0.667 |"), "{md}");
        assert!(md.contains("| 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] | 1.000 | 0.000 | 3.000 | 3.000 |"), "{md}");
    }

    #[test]
    fn results_folders_merge_in_order_and_write_back() {
        let td = tempfile::tempdir().unwrap();
        let row = |method: &str| Row {
            dataset: "d".into(),
            method: method.into(),
            features: "-".into(),
            sequences: 1,
            multi_reference: 0,
            seeds: Some(1),
            single: BTreeMap::new(),
            multi: BTreeMap::new(),
        };
        let (a, b) = (td.path().join("a"), td.path().join("b"));
        for (dir, method) in [(&a, "first"), (&b, "second")] {
            std::fs::create_dir_all(dir).unwrap();
            Results { rows: vec![row(method)], notes: vec![format!("note {method}")] }
                .write_files(dir, "results")
                .unwrap();
        }
        let merged = Results::merge(&[b.clone(), a.clone()]).unwrap();
        assert_eq!(merged.rows.iter().map(|r| r.method.as_str()).collect::<Vec<_>>(), ["second", "first"]);
        assert_eq!(merged.notes, ["note second", "note first"]);
        assert_eq!(
            std::fs::read_to_string(a.join("results.md")).unwrap(),
            markdown(&Results::merge(std::slice::from_ref(&a)).unwrap())
        );
        // A results file of another shape is refused, naming the file.
        std::fs::write(b.join("results.json"), "{\"rows\": 3}").unwrap();
        let e = Results::merge(&[a, b.clone()]).unwrap_err().to_string();
        assert!(e.contains(&b.join("results.json").display().to_string()), "{e}");
    }

    #[test]
    fn seeds_are_averaged_per_sequence_and_compared_in_pairs() {
        // 40 sequences: the reference method right on the first 10, method A on the first 30 with seed 1 and
        // the first 20 with seed 2; every sequence has its own procedure.
        let instances: Vec<SequencingInstance> =
            (0..40).map(|k| inst(&format!("i{k}"), vec![vec![0, 1, 2], vec![1, 0, 2]])).collect();
        let preds = |right: usize| -> Vec<OrderPrediction> {
            (0..40)
                .map(|k| OrderPrediction {
                    id: format!("i{k}"),
                    order: if k < right { vec![1, 0, 2] } else { vec![2, 1, 0] },
                })
                .collect()
        };
        let a = vec![preds(30), preds(20)];
        let base = vec![preds(10)];
        let (n, multi_ref, _, multi, spread) = score_seeds(&instances, &a, &[1, 2], Some("test"), 0).unwrap();
        assert_eq!((n, multi_ref), (40, 40));
        assert_eq!(spread.multi["pmr"], vec![0.75, 0.5]);
        assert!((multi["pmr"].value - 0.625).abs() < 1e-12);
        let [lo, hi] = multi["pmr"].ci.unwrap();
        assert!(lo < 0.625 && 0.625 < hi && hi - lo < 0.4, "{lo} {hi}");
        assert!((spread.multi_sd(Metric::Pmr).unwrap() - 0.25f64 / 2f64.sqrt()).abs() < 1e-12);
        // One seed: exactly what `score` says.
        let (_, _, _, one, _) = score_seeds(&instances, &base, &[7], Some("test"), 0).unwrap();
        assert_eq!(one, score(&instances, &base[0], Some("test"), 0).unwrap().3);
        // A − reference, sequence by sequence: (30 + 20)/2/40 − 10/40 = 0.375; its interval excludes 0.
        let d = paired_difference(&instances, &a, &base, Metric::Pmr, Some("test"), 0).unwrap();
        assert!((d.value - 0.375).abs() < 1e-12);
        assert!(d.ci.unwrap()[0] > 0.0, "{d:?}");
        let md = seeds_markdown(&[SeedRow {
            method: "A".into(),
            features: "text".into(),
            sequences: n,
            pmr: multi["pmr"],
            spread,
            versus: Some(("base".into(), d)),
        }]);
        assert!(md.contains("| A | text | 40 | 2 | 62.5 ["), "{md}");
        assert!(md.contains("| 17.7 | 75.0, 50.0 | +37.5 ["), "{md}");
        assert!(md.contains("vs base: outside noise |"), "{md}");
        // The results row and Table 4's `All` row are the same seed means; both say how many seeds they average.
        let (row, _) = seeded_rows("d", "A", "text", &instances, &a, &[1, 2], None, Some("test"), 0).unwrap();
        assert_eq!(row.seeds, Some(2));
        let table4 = breakdown(&instances, &a, &[1, 2], Some("test"), 0, "A", "text").unwrap();
        let all = table4.iter().find(|r| r.dataset == "All").unwrap();
        assert_eq!((&all.single, &all.multi, all.seeds), (&row.single, &row.multi, Some(2)));
        assert!(markdown(&Results { rows: vec![row], notes: vec![] }).contains("| d | A | text | 40 | 2 | "));
        // A results file written before rows recorded their seeds says nothing of them.
        let old: Row = serde_json::from_str(
            r#"{"dataset": "d", "method": "m", "features": "-", "sequences": 1, "multi_reference": 0,
                "single": {}, "multi": {}}"#,
        )
        .unwrap();
        assert_eq!(old.seeds, None);
        assert!(markdown(&Results { rows: vec![old], notes: vec![] }).contains("| d | m | - | 1 | – |"));
        // Predictions of different sequences cannot be averaged.
        let mut short = preds(5);
        short.pop();
        assert!(score_seeds(&instances, &[preds(5), short], &[1, 2], None, 0).is_err());
    }
}
