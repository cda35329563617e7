//! The results table of the sequencing baselines, laid out like the sequencing paper's Table 2: one row per
//! method × features, the paper's metrics against the authored order (single reference) and against the best
//! of all valid orders (multi-reference), for one or more datasets. Metrics come from `stepwise_eval` (the
//! same code as `stepwise eval`), through [`score`] only. `stepwise baseline` and `stepwise seq-study` write it;
//! [`breakdown`] adds the paper's Table 4 (instances with one reference, several, all).

use std::collections::BTreeMap;
use std::path::Path;

use crate::bootstrap::BootstrapConfig;
use crate::predictions::OrderRecord;
use crate::sequence_metrics::Metric;
use crate::sequencing_eval::{SequencingOptions, evaluate_orders};
use serde::{Deserialize, Serialize};
use stepwise_core::sequencing::{OrderPrediction, SequencingInstance};

/// A value with its 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Value {
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<[f64; 2]>,
}

/// Metric name (`stepwise_eval` machine names) → value.
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

/// Single- and multi-reference scores of `predictions` (ids of `instances`; `split` None = all instances).
pub fn score(
    instances: &[SequencingInstance],
    predictions: &[OrderPrediction],
    split: Option<&str>,
    seed: u64,
) -> stepwise_core::Result<(usize, usize, Scores, Scores)> {
    let records = OrderRecord::from_predictions(predictions);
    let options = SequencingOptions {
        split: split.map(str::to_string),
        bootstrap: BootstrapConfig { seed, ..BootstrapConfig::default() },
        ..SequencingOptions::default()
    };
    let source = Path::new("(predictions)");
    let multi = evaluate_orders(instances, &records, source, &options)?;
    let authored: Vec<SequencingInstance> = instances
        .iter()
        .map(|i| SequencingInstance { references: vec![i.references[0].clone()], ..i.clone() })
        .collect();
    let single = evaluate_orders(&authored, &records, source, &options)?;
    let all = |r: &crate::sequencing_eval::SequencingReport| -> Scores {
        let g = r.groups.iter().find(|g| g.group == "all").expect("evaluate_orders always reports `all`");
        g.metrics
            .iter()
            .map(|(k, e)| (k.clone(), Value { value: e.value, ci: e.ci.map(|c| [c.low, c.high]) }))
            .collect()
    };
    Ok((multi.counts.scored, multi.counts.multi_reference, all(&single), all(&multi)))
}

/// The Table 4 rows of one method: its scores on the instances of `split` with one reference (`Single`),
/// several (`Multi.`) and all (`All`), in the `dataset` column; subsets without a scored instance are left out.
pub fn breakdown(
    instances: &[SequencingInstance],
    predictions: &[OrderPrediction],
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
        let sub: Vec<OrderPrediction> = predictions.iter().filter(|p| ids.contains(p.id.as_str())).cloned().collect();
        let (sequences, multi_reference, single, multi) = score(&insts, &sub, split, seed)?;
        rows.push(Row {
            dataset: subset.into(),
            method: method.into(),
            features: features.into(),
            sequences,
            multi_reference,
            single,
            multi,
        });
    }
    Ok(rows)
}

fn cell(m: Metric, v: Option<&Value>) -> String {
    match v {
        None => "–".into(),
        Some(v) if m.is_share() => format!("{:.1}", v.value * 100.0),
        Some(v) => format!("{:.3}", v.value),
    }
}

/// The Markdown table: Dataset | Method | Features | n | single-reference metrics | multi-reference metrics.
/// Multi-reference cells are `–` for a dataset without alternative orders (they would repeat the single ones).
pub fn markdown(results: &Results) -> String {
    let order = [Metric::PositionAccuracy, Metric::Pmr, Metric::KendallTau, Metric::Distance, Metric::Lq, Metric::Lr];
    let mut out = String::new();
    out.push_str("| Dataset | Method | Features | n |");
    for m in order {
        out.push_str(&format!(" {}{} |", m.label(), if m.is_share() { " %" } else { "" }));
    }
    for m in order {
        out.push_str(&format!(" multi {}{} |", m.label(), if m.is_share() { " %" } else { "" }));
    }
    out.push_str("\n|---|---|---|---:|");
    out.push_str(&"---:|".repeat(order.len() * 2));
    out.push('\n');
    for r in &results.rows {
        out.push_str(&format!("| {} | {} | {} | {} |", r.dataset, r.method, r.features, r.sequences));
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
         alternative orders). Means over sequences; 95% bootstrap intervals are in results.json.\n",
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
                single,
                multi,
            }],
            notes: vec![],
        });
        assert!(md.contains("| d | m | - | 2 | 66.7 | 50.0 |"), "{md}");
        assert!(md.contains("| 100.0 | 100.0 | 1.000 | 0.000 | 3.000 | 3.000 |"), "{md}");
    }
}
