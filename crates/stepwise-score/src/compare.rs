//! Two methods compared on the same items: `A − B` for every metric, with a paired bootstrap interval (both
//! methods on the same resampled sequences or questions), and whether the difference is outside noise.
//!
//! Each side is one predictions file or several (e.g. one per training seed); a side with several files is their
//! per-item mean, so the interval is over items of each item's mean over the files (what the test set leaves
//! open), and each file's own value is kept beside it (what training leaves open). Only items every file scored
//! are compared; the others are counted. Each file is matched and scored exactly as `stepwise eval` scores it
//! alone (same split, missing-prediction and overlap rules).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Error, Result};

use crate::accuracy::{Outcome, ResampleUnit};
use crate::bootstrap::{
    BootstrapConfig, Estimate, Unit, cluster_labels, mean, mean_estimates, noise_verdict, sample_sd,
};
use crate::choice_eval::{self, ChoiceEvalOptions, ChoiceSet};
use crate::markdown::{
    number, number_interval, percent, percent_estimate, signed_number_interval, signed_percent_interval,
};
use crate::predictions;
use crate::sequence_metrics::Metric;
use crate::sequencing_eval::{self, SequencingOptions};

/// One compared item, scored by one file.
struct Scored {
    /// The bootstrap cluster (procedure or recipe) when resampling clusters.
    cluster: String,
    /// The groups it is reported in (`all`, a set, a set's task, a modality).
    groups: Vec<String>,
    /// One value per metric.
    values: Vec<f64>,
}

/// What a file's items are scored with.
struct MetricDef {
    name: &'static str,
    label: &'static str,
    share: bool,
}

/// One line of the comparison: a metric of one group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedRow {
    pub group: String,
    pub metric: String,
    /// The metric's column label.
    pub label: String,
    /// A share (shown in percent) rather than a plain number.
    pub share: bool,
    /// Items compared (scored by every file of both sides).
    pub items: usize,
    pub a: Estimate,
    pub b: Estimate,
    /// `a − b`, with its paired interval.
    pub difference: Estimate,
    /// `outside noise` when the difference's interval excludes 0, `within noise` when it contains it,
    /// `no interval` without one.
    pub verdict: String,
    /// Each file's own value on the compared items, in the order given.
    pub a_files: Vec<f64>,
    pub b_files: Vec<f64>,
}

/// The result of [`compare_orders`] or [`compare_choices`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// `sequencing` or `multiple_choice`.
    pub kind: &'static str,
    pub a: Vec<PathBuf>,
    pub b: Vec<PathBuf>,
    /// What the bootstrap resamples: `instance`, `procedure`, `question` or `recipe`.
    pub unit: &'static str,
    /// Items scored by some file but not by all (left out of the comparison).
    pub unpaired: usize,
    pub rows: Vec<PairedRow>,
    #[serde(skip)]
    per_item: Vec<Value>,
}

/// Compare order predictions `a` and `b` (each one or more files) on sequencing instances, every metric of the
/// sequencing paper, overall and per modality when there are several.
pub fn compare_orders(
    instances: &[SequencingInstance],
    a: &[PathBuf],
    b: &[PathBuf],
    options: &SequencingOptions,
) -> Result<Comparison> {
    let metrics: Vec<MetricDef> =
        Metric::ALL.iter().map(|m| MetricDef { name: m.name(), label: m.label(), share: m.is_share() }).collect();
    let modalities: HashSet<&str> = instances.iter().map(|i| i.modality.as_str()).collect();
    let score = |file: &PathBuf| -> Result<Vec<(String, Scored)>> {
        let preds = predictions::read_order_predictions(file)?;
        let report = sequencing_eval::evaluate_orders(instances, &preds, file, options)?;
        Ok(report
            .instances
            .into_iter()
            .map(|r| {
                let mut groups = vec!["all".to_string()];
                if modalities.len() > 1 {
                    groups.push(format!("modality={}", r.modality));
                }
                let values = Metric::ALL.iter().map(|m| m.value(&r.score)).collect();
                (r.id, Scored { cluster: r.procedure, groups, values })
            })
            .collect())
    };
    let unit = if options.resample_procedures { "procedure" } else { "instance" };
    build("sequencing", a, b, &metrics, unit, &options.bootstrap, score)
}

/// Compare multiple-choice predictions `a` and `b` (each one or more files, or folders of per-set files) on task
/// sets: accuracy per set and per task (missing and invalid predictions count as wrong, as in `eval`).
pub fn compare_choices(
    sets: &[ChoiceSet],
    a: &[PathBuf],
    b: &[PathBuf],
    opts: &ChoiceEvalOptions,
) -> Result<Comparison> {
    let metrics = [MetricDef { name: "accuracy", label: "accuracy", share: true }];
    let opts = ChoiceEvalOptions { per_question: true, ..opts.clone() };
    let several_sets = sets.len() > 1;
    let score = |file: &PathBuf| -> Result<Vec<(String, Scored)>> {
        let evaluation = choice_eval::evaluate(sets, file, &opts)?;
        let tasks_of: HashMap<&str, HashSet<&str>> =
            evaluation.per_question.iter().fold(HashMap::new(), |mut m, (set, q)| {
                m.entry(set.as_str()).or_default().insert(q.task.as_str());
                m
            });
        Ok(evaluation
            .per_question
            .iter()
            .map(|(set, q)| {
                let mut groups = Vec::new();
                if several_sets {
                    groups.push(set.clone());
                }
                if tasks_of[set.as_str()].len() > 1 || !several_sets {
                    groups.push(if several_sets { format!("{set} / {}", q.task) } else { q.task.clone() });
                }
                let correct = f64::from(u8::from(q.outcome == Outcome::Correct));
                let cluster = format!("{set}\u{1f}{}", q.recipe_id);
                let id = if several_sets { format!("{set}\u{1f}{}", q.qid) } else { q.qid.clone() };
                (id, Scored { cluster, groups, values: vec![correct] })
            })
            .collect())
    };
    let unit = match opts.score.unit {
        ResampleUnit::Question => "question",
        ResampleUnit::Recipe => "recipe",
    };
    build("multiple_choice", a, b, &metrics, unit, &opts.score.bootstrap, score)
}

/// Score every file, pair the items all of them scored, and estimate each group's metrics on shared resamples.
fn build(
    kind: &'static str,
    a: &[PathBuf],
    b: &[PathBuf],
    metrics: &[MetricDef],
    unit: &'static str,
    config: &BootstrapConfig,
    score: impl Fn(&PathBuf) -> Result<Vec<(String, Scored)>>,
) -> Result<Comparison> {
    if a.is_empty() || b.is_empty() {
        return Err(Error::usage("a comparison needs predictions on both sides"));
    }
    let files: Vec<&PathBuf> = a.iter().chain(b).collect();
    let mut seen = HashSet::new();
    if let Some(dup) = files.iter().find(|f| !seen.insert(f.as_path())) {
        return Err(Error::usage(format!("{}: given twice; each predictions file belongs to one side", dup.display())));
    }
    let lists: Vec<Vec<(String, Scored)>> = files.iter().map(|f| score(f)).collect::<Result<_>>()?;
    // Each file's values by item; the items in the first file's order (task-set or instance order).
    let scored: Vec<HashMap<&str, &[f64]>> =
        lists.iter().map(|l| l.iter().map(|(id, s)| (id.as_str(), s.values.as_slice())).collect()).collect();
    let all_ids = scored.iter().flat_map(|m| m.keys()).collect::<HashSet<_>>().len();
    let paired: Vec<&(String, Scored)> =
        lists[0].iter().filter(|(id, _)| scored.iter().all(|m| m.contains_key(id.as_str()))).collect();
    if paired.is_empty() {
        return Err(Error::bad_input(format!(
            "{} and {}: no item is scored by every predictions file",
            a[0].display(),
            b[0].display()
        )));
    }
    let unpaired = all_ids - paired.len();

    let mut group_rows: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut group_order: Vec<&str> = Vec::new();
    for (i, (_, s)) in paired.iter().enumerate() {
        for g in &s.groups {
            let rows = group_rows.entry(g.as_str()).or_default();
            if rows.is_empty() {
                group_order.push(g.as_str());
            }
            rows.push(i);
        }
    }
    let (a_files, b_files) = (0..a.len(), a.len()..files.len());
    // Each side's value per metric and paired item: the mean over the side's files.
    let side_means = |side: std::ops::Range<usize>| -> Vec<Vec<f64>> {
        let n = side.len() as f64;
        (0..metrics.len())
            .map(|m| {
                paired.iter().map(|(id, _)| side.clone().map(|f| scored[f][id.as_str()][m]).sum::<f64>() / n).collect()
            })
            .collect()
    };
    let (mean_a, mean_b) = (side_means(a_files.clone()), side_means(b_files.clone()));
    let mut rows = Vec::new();
    let mut per_item = Vec::new();
    for (i, (id, s)) in paired.iter().copied().enumerate() {
        let mut line = json!({ "id": display_id(id), "groups": s.groups });
        for (m, def) in metrics.iter().enumerate() {
            line[def.name] = json!({ "a": mean_a[m][i], "b": mean_b[m][i] });
        }
        per_item.push(line);
    }
    for group in group_order {
        let idx = &group_rows[group];
        let clusters = cluster_labels(idx.iter().map(|&i| paired[i].1.cluster.as_str()));
        let resample = if matches!(unit, "procedure" | "recipe") { Unit::Clusters(&clusters) } else { Unit::Rows };
        for (m, def) in metrics.iter().enumerate() {
            let col = |means: &[Vec<f64>]| -> Vec<f64> { idx.iter().map(|&i| means[m][i]).collect() };
            let (ca, cb) = (col(&mean_a), col(&mean_b));
            let diff: Vec<f64> = ca.iter().zip(&cb).map(|(x, y)| x - y).collect();
            let est = mean_estimates(&[&ca, &cb, &diff], resample, config, &format!("compare/{group}/{}", def.name));
            let per_file = |side: std::ops::Range<usize>| -> Vec<f64> {
                side.map(|f| mean(&idx.iter().map(|&i| scored[f][paired[i].0.as_str()][m]).collect::<Vec<_>>()))
                    .collect()
            };
            rows.push(PairedRow {
                group: group.to_string(),
                metric: def.name.to_string(),
                label: def.label.to_string(),
                share: def.share,
                items: idx.len(),
                a: est[0],
                b: est[1],
                difference: est[2],
                verdict: est[2].ci.map_or("no interval", |c| noise_verdict(c.low, c.high)).to_string(),
                a_files: per_file(a_files.clone()),
                b_files: per_file(b_files.clone()),
            });
        }
    }
    Ok(Comparison { kind, a: a.to_vec(), b: b.to_vec(), unit, unpaired, rows, per_item })
}

/// A choice item's id without the set separator.
fn display_id(id: &str) -> String {
    id.replace('\u{1f}', "/")
}

impl Comparison {
    /// The results file (`kind` comparison).
    pub fn results_json(&self, config: &BootstrapConfig) -> Value {
        json!({
            "kind": "comparison",
            "scored": self.kind,
            "bootstrap": config,
            "bootstrap_unit": self.unit,
            "a": self.a,
            "b": self.b,
            "unpaired_items": self.unpaired,
            "rows": self.rows,
        })
    }

    /// The predictions files read, A's then B's.
    pub fn inputs(&self) -> impl Iterator<Item = &Path> {
        self.a.iter().chain(&self.b).map(PathBuf::as_path)
    }

    /// One line per compared item: its id, groups, and each side's value (mean over the side's files).
    pub fn per_item_lines(&self) -> Vec<Value> {
        self.per_item.clone()
    }

    /// Markdown: one row per group and metric with A, B and A − B (paired), then the files of each side.
    pub fn markdown(&self, config: &BootstrapConfig) -> String {
        let level = format!("{:.0}%", config.confidence * 100.0);
        let items = if self.kind == "sequencing" { "sequences" } else { "questions" };
        let unit = match self.unit {
            "procedure" => "procedures",
            "recipe" => "recipes",
            _ => items,
        };
        let several = self.a.len() > 1 || self.b.len() > 1;
        let mut out = format!(
            "A − B on the same {items}, each value with its {level} interval (percentile bootstrap over {unit}, \
             {} resamples; A, B and A − B on the same resamples). A difference is outside noise when its interval \
             excludes 0.{}\n\n",
            config.resamples,
            if several {
                " A side with several files (e.g. seeds) is their per-item mean; each file's own value follows."
            } else {
                ""
            }
        );
        out.push_str("| group | metric | n | A | B | A − B | verdict |\n|---|---|---:|---|---|---|---|\n");
        for r in &self.rows {
            let label = if r.share { format!("{} (%)", r.label) } else { r.label.clone() };
            let ci = r.difference.ci.map(|c| (c.low, c.high));
            let (value, diff) = if r.share {
                (percent_estimate as fn(&Estimate) -> String, signed_percent_interval(r.difference.value, ci))
            } else {
                (plain_estimate as fn(&Estimate) -> String, signed_number_interval(r.difference.value, ci, 3))
            };
            out.push_str(&format!(
                "| {} | {label} | {} | {} | {} | {diff} | {} |\n",
                r.group,
                r.items,
                value(&r.a),
                value(&r.b),
                r.verdict
            ));
        }
        out.push('\n');
        let headline = self.rows.iter().find(|r| r.metric == "pmr" || r.metric == "accuracy");
        for (side, files, values) in
            [("A", &self.a, headline.map(|r| &r.a_files)), ("B", &self.b, headline.map(|r| &r.b_files))]
        {
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            match (values, files.len() > 1) {
                (Some(v), true) => {
                    let each: Vec<String> = v.iter().map(|x| percent(*x)).collect();
                    let sd = sample_sd(v).map_or("–".into(), |s| format!("{:.1}", 100.0 * s));
                    out.push_str(&format!(
                        "- {side}: {} files ({}); {} of {}: {}; sd over files {sd}\n",
                        files.len(),
                        names.join(", "),
                        headline.map_or("", |r| r.label.as_str()),
                        headline.map_or("", |r| r.group.as_str()),
                        each.join(", ")
                    ));
                }
                _ => out.push_str(&format!("- {side}: {}\n", names.join(", "))),
            }
        }
        if self.unpaired > 0 {
            out.push_str(&format!("- {} {items} scored by some files but not by all were left out\n", self.unpaired));
        }
        out
    }
}

/// A plain number with its interval.
fn plain_estimate(e: &Estimate) -> String {
    format!("{} {}", number(e.value, 3), number_interval(e.ci, 3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::sequencing::SequencingItem;

    /// Instance `i` of `n`: three items in the authored order, procedure `p<i / 2>` (two instances each).
    fn instances(n: usize) -> Vec<SequencingInstance> {
        (0..n)
            .map(|i| SequencingInstance {
                id: format!("s{i}"),
                procedure: format!("p{}", i / 2),
                split: "test".into(),
                modality: "text".into(),
                items: (0..3).map(|step| SequencingItem { step, title: None, text: None, images: vec![] }).collect(),
                references: vec![vec![0, 1, 2]],
                constraints: None,
            })
            .collect()
    }

    /// A predictions file ordering instance `i` correctly when `right(i)`, else reversed.
    fn orders(dir: &Path, name: &str, n: usize, right: impl Fn(usize) -> bool) -> PathBuf {
        let path = dir.join(name);
        let lines: Vec<String> = (0..n)
            .map(|i| {
                let order = if right(i) { "[0,1,2]" } else { "[2,1,0]" };
                format!("{{\"id\":\"s{i}\",\"order\":{order}}}")
            })
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    }

    fn options() -> SequencingOptions {
        SequencingOptions {
            bootstrap: BootstrapConfig { resamples: 500, confidence: 0.95, seed: 3 },
            ..Default::default()
        }
    }

    fn pmr(c: &Comparison) -> &PairedRow {
        c.rows.iter().find(|r| r.group == "all" && r.metric == "pmr").unwrap()
    }

    #[test]
    fn the_difference_is_paired_and_its_verdict_follows_the_interval() {
        let td = tempfile::tempdir().unwrap();
        let n = 200;
        let insts = instances(n);
        // A is right on 150 sequences, B on the first 50 of those: A − B = 0.5, far outside noise.
        let a = orders(td.path(), "a.jsonl", n, |i| i < 150);
        let b = orders(td.path(), "b.jsonl", n, |i| i < 50);
        let c = compare_orders(&insts, std::slice::from_ref(&a), std::slice::from_ref(&b), &options()).unwrap();
        let r = pmr(&c);
        assert_eq!((r.items, r.a.value, r.b.value, r.difference.value), (n, 0.75, 0.25, 0.5));
        let ci = r.difference.ci.unwrap();
        assert!(ci.low > 0.4 && ci.high < 0.6 && ci.low <= 0.5 && 0.5 <= ci.high, "{ci:?}");
        assert_eq!(r.verdict, "outside noise");
        assert_eq!(c.rows.len(), Metric::ALL.len(), "one row per metric, one group");
        // Paired: every sequence B gets right A gets right too, so the difference's interval is narrower than
        // an unpaired one would be (A's and B's own intervals are each about as wide as the difference's).
        let width = |e: &Estimate| e.ci.map(|c| c.high - c.low).unwrap();
        assert!(width(&r.difference) < width(&r.a) + width(&r.b));

        // The same predictions on both sides differ by exactly 0, within noise.
        let a2 = orders(td.path(), "a2.jsonl", n, |i| i < 150);
        let same = compare_orders(&insts, std::slice::from_ref(&a), &[a2], &options()).unwrap();
        let r = pmr(&same);
        assert_eq!((r.difference.value, r.verdict.as_str()), (0.0, "within noise"));
        // And a file on both sides is refused: it cannot be both methods.
        let e = compare_orders(&insts, std::slice::from_ref(&a), std::slice::from_ref(&a), &options())
            .unwrap_err()
            .to_string();
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn several_files_per_side_are_averaged_per_item_and_each_file_is_kept() {
        let td = tempfile::tempdir().unwrap();
        let n = 40;
        let insts = instances(n);
        let a1 = orders(td.path(), "a1.jsonl", n, |i| i < 20);
        let a2 = orders(td.path(), "a2.jsonl", n, |i| i < 30);
        let b = orders(td.path(), "b.jsonl", n, |i| i >= 30);
        let c = compare_orders(&insts, &[a1, a2], &[b], &options()).unwrap();
        let r = pmr(&c);
        assert_eq!(r.a_files, vec![0.5, 0.75]);
        assert_eq!(r.b_files, vec![0.25]);
        assert_eq!(r.a.value, 0.625, "the mean of the files' values (every file scores the same items)");
        assert!((r.difference.value - 0.375).abs() < 1e-12);
        let md = c.markdown(&options().bootstrap);
        assert!(md.contains("- A: 2 files (") && md.contains("50.0, 75.0; sd over files 17.7"), "{md}");
        assert!(md.contains("| all | PMR (%) | 40 | 62.5 ["), "{md}");
        // One line per compared item, each side's mean.
        let lines = c.per_item_lines();
        assert_eq!(lines.len(), n);
        assert_eq!(lines[25]["pmr"], json!({ "a": 0.5, "b": 0.0 }));
    }

    #[test]
    fn only_items_every_file_scored_are_compared_and_the_rest_are_counted() {
        let td = tempfile::tempdir().unwrap();
        let insts = instances(10);
        let a = orders(td.path(), "a.jsonl", 10, |_| true);
        let b = orders(td.path(), "b.jsonl", 8, |_| false);
        // Without --skip-missing B's missing predictions are an error, as in `eval`.
        let e = compare_orders(&insts, std::slice::from_ref(&a), std::slice::from_ref(&b), &options())
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 of 10 instances have no prediction"), "{e}");
        let skip = SequencingOptions { skip_missing: true, ..options() };
        let c = compare_orders(&insts, &[a], &[b], &skip).unwrap();
        assert_eq!((pmr(&c).items, c.unpaired), (8, 2));
        assert!(c.markdown(&skip.bootstrap).contains("- 2 sequences scored by some files but not by all"));
    }

    #[test]
    fn resampling_procedures_widens_the_interval_of_correlated_sequences() {
        let td = tempfile::tempdir().unwrap();
        let n = 60;
        let insts = instances(n);
        // Both instances of a procedure agree, so procedures carry half the information sequences seem to.
        let a = orders(td.path(), "a.jsonl", n, |i| (i / 2) % 3 != 0);
        let b = orders(td.path(), "b.jsonl", n, |i| (i / 2) % 2 == 0);
        let by_seq = compare_orders(&insts, std::slice::from_ref(&a), std::slice::from_ref(&b), &options()).unwrap();
        let by_proc =
            compare_orders(&insts, &[a], &[b], &SequencingOptions { resample_procedures: true, ..options() }).unwrap();
        assert_eq!(by_proc.unit, "procedure");
        let width = |c: &Comparison| pmr(c).difference.ci.map(|c| c.high - c.low).unwrap();
        assert_eq!(pmr(&by_seq).difference.value, pmr(&by_proc).difference.value);
        assert!(width(&by_proc) > 1.2 * width(&by_seq), "{} vs {}", width(&by_proc), width(&by_seq));
    }
}
