//! Evaluating a set of predicted orders (or annotators' orders) against sequencing instances: matching by id,
//! validation, multi-reference scoring, averages with bootstrap intervals per group, and the report.
//!
//! Matching rules: instances can be restricted to one split; an instance of the selection without a prediction
//! is an error (the message says which splits the missing ones are in) unless `skip_missing` is set, in which
//! case it is left out and counted; predictions for instances outside the selected split are counted and
//! ignored; predictions with unknown ids are counted, and the file is refused when too few ids are known (see
//! [`crate::accuracy::check_overlap`]). A predicted order that is not a permutation of the instance's items is an
//! error naming the record.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;
use serde_json::json;
use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Error, Result};

use crate::accuracy::check_overlap;
use crate::agreement::{instance_alternative_kappa, instance_order_kappa};
use crate::bootstrap::{BootstrapConfig, Estimate, Unit, cluster_labels, mean_estimates, ratio_estimates};
use crate::markdown::{number, number_interval, percent_estimate};
use crate::multiref::best_reference_unchecked;
use crate::predictions::{AnnotationRecord, OrderRecord};
use crate::sequence_metrics::{Metric, OrderScore, PooledMetric, Scratch, check_permutation};

/// Options of [`evaluate_orders`].
#[derive(Debug, Clone, PartialEq)]
pub struct SequencingOptions {
    /// Evaluate only instances of this split.
    pub split: Option<String>,
    /// Leave out instances without a prediction instead of failing.
    pub skip_missing: bool,
    pub min_overlap: f64,
    pub bootstrap: BootstrapConfig,
    /// Resample whole procedures (all their instances together) instead of single instances: honest intervals
    /// when a procedure gives several windows.
    pub resample_procedures: bool,
    /// Also report groups of instances by their number of items: inclusive ranges `(low, high)` (R2VQ's event
    /// ordering reports N = 2, 3 ≤ N < 6 and 6 ≤ N < 11).
    pub length_buckets: Vec<(usize, usize)>,
}

/// Parse length buckets `2,3-5,6-10,11+` into inclusive ranges (`11+`: 11 and more).
pub fn parse_length_buckets(s: &str) -> std::result::Result<Vec<(usize, usize)>, String> {
    s.split(',')
        .map(|part| {
            let part = part.trim();
            let num = |x: &str| x.trim().parse::<usize>().map_err(|_| format!("{part:?}: {x:?} is not a count"));
            let (low, high) = if let Some(low) = part.strip_suffix('+') {
                (num(low)?, usize::MAX)
            } else if let Some((a, b)) = part.split_once('-') {
                (num(a)?, num(b)?)
            } else {
                (num(part)?, num(part)?)
            };
            if low > high {
                return Err(format!("{part:?}: the range is empty"));
            }
            Ok((low, high))
        })
        .collect()
}

/// The group name of a length bucket: `n=2`, `n=3-5`, `n=11+`.
fn bucket_name((low, high): (usize, usize)) -> String {
    match high {
        usize::MAX => format!("n={low}+"),
        h if h == low => format!("n={low}"),
        h => format!("n={low}-{h}"),
    }
}

impl Default for SequencingOptions {
    fn default() -> Self {
        SequencingOptions {
            split: None,
            skip_missing: false,
            min_overlap: crate::accuracy::DEFAULT_MIN_OVERLAP,
            bootstrap: BootstrapConfig::default(),
            resample_procedures: false,
            length_buckets: Vec::new(),
        }
    }
}

/// One scored instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceResult {
    pub id: String,
    pub procedure: String,
    pub split: String,
    pub modality: String,
    /// Number of references the instance has.
    pub references: usize,
    /// The reference the metrics are computed against (0 = authored order).
    pub reference: usize,
    pub score: OrderScore,
}

/// How predictions related to the instances.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SequencingCounts {
    /// Instances in the file.
    pub instances: usize,
    /// Instances of the selected split.
    pub selected: usize,
    pub predictions: usize,
    pub scored: usize,
    /// Selected instances without a prediction (only with `skip_missing`).
    pub missing: usize,
    /// Predictions for instances of other splits (ignored).
    pub outside_split: usize,
    /// Predictions with an id that is no instance (ignored).
    pub extra: usize,
    /// Scored instances with more than one reference.
    pub multi_reference: usize,
    /// Scored instances whose best reference is not the authored order.
    pub alternative_chosen: usize,
}

/// Averages over one group of instances.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupReport {
    /// `all`, `modality=text`, `split=test`, ...
    pub group: String,
    pub sequences: usize,
    /// Per-sequence averages (the sequencing paper's metrics), keyed by [`Metric::name`].
    pub metrics: BTreeMap<String, Estimate>,
    /// Pooled ("micro") ratios, keyed by [`PooledMetric::name`].
    pub pooled: BTreeMap<String, Estimate>,
}

/// The result of [`evaluate_orders`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SequencingReport {
    /// The evaluated split (all instances when `None`).
    pub split: Option<String>,
    /// Intervals resample procedures (else instances).
    pub resample_procedures: bool,
    pub counts: SequencingCounts,
    pub groups: Vec<GroupReport>,
    #[serde(skip)]
    pub instances: Vec<InstanceResult>,
}

impl SequencingReport {
    /// The results file (`kind` sequencing): counts, groups, the metrics' definitions and the reference rule.
    /// `models` names who made the predictions.
    pub fn results_json(&self, config: &BootstrapConfig, models: &[String]) -> serde_json::Value {
        let definitions: serde_json::Map<String, serde_json::Value> = Metric::ALL
            .iter()
            .map(|m| (m.name().to_string(), json!(m.formula())))
            .chain(PooledMetric::ALL.iter().map(|m| (m.name().to_string(), json!(m.formula()))))
            .collect();
        json!({
            "kind": "sequencing",
            "models": models,
            "bootstrap": config,
            "bootstrap_unit": if self.resample_procedures { "procedure" } else { "instance" },
            "split": self.split,
            "counts": self.counts,
            "groups": self.groups,
            "definitions": definitions,
            "multi_reference_rule": "per sequence, the one reference maximising (position accuracy, PMR, L_r, L_q, \
                                     tau) lexicographically (ties: released code's swap counts, then distance); \
                                     every metric against it. When the references are a sample of the valid \
                                     orders (the instance lists precedence constraints), the prediction repaired \
                                     to the constraints is one more candidate (reference index = the number of \
                                     references): a valid prediction is scored as valid",
        })
    }

    /// One JSON line per scored instance: its id, procedure, split, modality, length, references, the reference
    /// chosen and every metric.
    pub fn per_instance_lines(&self) -> Vec<serde_json::Value> {
        self.instances
            .iter()
            .map(|r| {
                let mut line = json!({
                    "id": r.id, "procedure": r.procedure, "split": r.split, "modality": r.modality, "n": r.score.n,
                    "references": r.references, "reference": r.reference,
                });
                for m in Metric::ALL {
                    line[m.name()] = json!(m.value(&r.score));
                }
                line
            })
            .collect()
    }
}

/// Match predictions to instances and score every matched instance against its best reference.
/// `source` names the predictions file in messages.
pub fn evaluate_orders(
    instances: &[SequencingInstance],
    predictions: &[OrderRecord],
    source: &Path,
    options: &SequencingOptions,
) -> Result<SequencingReport> {
    let by_id: HashMap<&str, &SequencingInstance> = instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let in_split = |inst: &SequencingInstance| options.split.as_deref().is_none_or(|s| s == inst.split);
    let mut counts = SequencingCounts {
        instances: instances.len(),
        selected: instances.iter().filter(|i| in_split(i)).count(),
        predictions: predictions.len(),
        ..Default::default()
    };
    if counts.selected == 0 {
        let splits: BTreeSet<&str> = instances.iter().map(|i| i.split.as_str()).collect();
        return Err(Error::usage(format!(
            "no instances in split {:?} (splits present: {})",
            options.split.as_deref().unwrap_or(""),
            splits.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    let mut examples = Vec::new();
    let mut pred_of: HashMap<&str, &OrderRecord> = HashMap::new();
    for p in predictions {
        match by_id.get(p.id.as_str()) {
            None => {
                counts.extra += 1;
                if examples.len() < 5 {
                    examples.push(p.id.clone());
                }
            }
            Some(inst) if !in_split(inst) => counts.outside_split += 1,
            Some(inst) => {
                check_permutation(&p.order, inst.items.len()).map_err(|e| {
                    Error::field(
                        source,
                        p.location.clone(),
                        "order",
                        format!("not an order of the {} items of instance {:?}: {e}", inst.items.len(), inst.id),
                    )
                })?;
                pred_of.insert(p.id.as_str(), p);
            }
        }
    }
    check_overlap(
        predictions.len(),
        predictions.len() - counts.extra,
        &examples,
        &source.display().to_string(),
        "the instances",
        options.min_overlap,
    )?;

    let selected: Vec<&SequencingInstance> = instances.iter().filter(|i| in_split(i)).collect();
    let missing: Vec<&SequencingInstance> =
        selected.iter().copied().filter(|i| !pred_of.contains_key(i.id.as_str())).collect();
    if !missing.is_empty() && !options.skip_missing {
        let splits: BTreeSet<&str> = missing.iter().map(|i| i.split.as_str()).collect();
        let ids: Vec<String> = missing.iter().take(5).map(|i| format!("{:?}", i.id)).collect();
        return Err(Error::bad_input(format!(
            "{}: {} of {} instances have no prediction (e.g. {}; they are in split(s) {}). Evaluate one split \
             with --split, or pass --skip-missing to leave them out",
            source.display(),
            missing.len(),
            selected.len(),
            ids.join(", "),
            splits.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    counts.missing = missing.len();

    let scored: Vec<(&SequencingInstance, &OrderRecord)> =
        selected.iter().filter_map(|i| pred_of.get(i.id.as_str()).map(|p| (*i, *p))).collect();
    let results: Vec<InstanceResult> = scored
        .par_iter()
        .map_init(Scratch::default, |scratch, (inst, pred)| {
            // Sampled references: the prediction repaired to the precedence constraints is a valid order too (the
            // prediction itself when it is valid), so a valid order outside the sample is not scored as wrong.
            let repaired = inst.constraints.is_some().then(|| inst.repair_order(&pred.order));
            let candidates = inst.references.iter().map(Vec::as_slice).chain(repaired.as_deref());
            let best = best_reference_unchecked(&pred.order, candidates, scratch)
                .expect("instances are read with at least one reference");
            InstanceResult {
                id: inst.id.clone(),
                procedure: inst.procedure.clone(),
                split: inst.split.clone(),
                modality: inst.modality.clone(),
                references: inst.references.len(),
                reference: best.index,
                score: best.score,
            }
        })
        .collect();
    counts.scored = results.len();
    counts.multi_reference = results.iter().filter(|r| r.references > 1).count();
    counts.alternative_chosen = results.iter().filter(|r| r.reference > 0).count();
    let groups = group_reports(&results, options);
    Ok(SequencingReport {
        split: options.split.clone(),
        resample_procedures: options.resample_procedures,
        counts,
        groups,
        instances: results,
    })
}

/// `all`, then one group per modality and per split when there are several.
fn group_reports(results: &[InstanceResult], options: &SequencingOptions) -> Vec<GroupReport> {
    let report = |group: &str, rows: Vec<&InstanceResult>| {
        let scores: Vec<&OrderScore> = rows.iter().map(|r| &r.score).collect();
        let procedures: Vec<usize> = if options.resample_procedures {
            cluster_labels(rows.iter().map(|r| r.procedure.as_str()))
        } else {
            Vec::new()
        };
        let unit = if options.resample_procedures { Unit::Clusters(&procedures) } else { Unit::Rows };
        summarize(group, &scores, unit, &options.bootstrap)
    };
    let mut groups = vec![report("all", results.iter().collect())];
    for (field, get) in [
        ("modality", (|r: &InstanceResult| r.modality.as_str()) as fn(&InstanceResult) -> &str),
        ("split", |r: &InstanceResult| r.split.as_str()),
    ] {
        let mut by: BTreeMap<&str, Vec<&InstanceResult>> = BTreeMap::new();
        for r in results {
            by.entry(get(r)).or_default().push(r);
        }
        if by.len() > 1 {
            for (value, rows) in by {
                groups.push(report(&format!("{field}={value}"), rows));
            }
        }
    }
    for &(low, high) in &options.length_buckets {
        let rows: Vec<&InstanceResult> =
            results.iter().filter(|r| (low..=high).contains(&(r.score.n as usize))).collect();
        if !rows.is_empty() {
            groups.push(report(&bucket_name((low, high)), rows));
        }
    }
    groups
}

/// Averages and pooled ratios of `scores`, each with a bootstrap interval (all metrics of a group share the same
/// resamples); `unit` says what is resampled.
pub fn summarize(group: &str, scores: &[&OrderScore], unit: Unit<'_>, config: &BootstrapConfig) -> GroupReport {
    let columns: Vec<Vec<f64>> = Metric::ALL.iter().map(|m| scores.iter().map(|s| m.value(s)).collect()).collect();
    let column_refs: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
    let means = mean_estimates(&column_refs, unit, config, &format!("sequencing/{group}"));
    let num: Vec<Vec<f64>> =
        PooledMetric::ALL.iter().map(|m| scores.iter().map(|s| m.numerator(s)).collect()).collect();
    let den: Vec<Vec<f64>> =
        PooledMetric::ALL.iter().map(|m| scores.iter().map(|s| m.denominator(s)).collect()).collect();
    let pairs: Vec<(&[f64], &[f64])> = num.iter().zip(&den).map(|(a, b)| (a.as_slice(), b.as_slice())).collect();
    let pooled = ratio_estimates(&pairs, unit, config, &format!("sequencing-pooled/{group}"));
    GroupReport {
        group: group.to_string(),
        sequences: scores.len(),
        metrics: Metric::ALL.iter().map(|m| m.name().to_string()).zip(means).collect(),
        pooled: PooledMetric::ALL.iter().map(|m| m.name().to_string()).zip(pooled).collect(),
    }
}

/// Markdown: one row per group with every metric and its interval; pooled metrics in a second table when asked.
pub fn markdown(report: &SequencingReport, config: &BootstrapConfig, pooled: bool) -> String {
    let level = format!("{:.0}% CI", config.confidence * 100.0);
    let unit = if report.resample_procedures { "procedures" } else { "sequences" };
    let mut out =
        format!("Values with their {level} (percentile bootstrap over {unit}, B = {}).\n\n", config.resamples);
    out.push_str("| group | sequences |");
    for m in Metric::ALL {
        out.push_str(&format!(" {}{} |", m.label(), if m.is_share() { " (%)" } else { "" }));
    }
    out.push_str("\n|---|---:|");
    out.push_str(&"---|".repeat(Metric::ALL.len()));
    out.push('\n');
    for g in &report.groups {
        out.push_str(&format!("| {} | {} |", g.group, g.sequences));
        for m in Metric::ALL {
            let e = g.metrics[m.name()];
            let cell = if m.is_share() {
                percent_estimate(&e)
            } else {
                format!("{} {}", number(e.value, 3), number_interval(e.ci, 3))
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    if pooled {
        out.push_str("\nPooled (micro) variants of the topological-sort paper (%):\n\n| group |");
        for m in PooledMetric::ALL {
            out.push_str(&format!(" {} |", m.label()));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(PooledMetric::ALL.len()));
        out.push('\n');
        for g in &report.groups {
            out.push_str(&format!("| {} |", g.group));
            for m in PooledMetric::ALL {
                let e = g.pooled[m.name()];
                out.push_str(&format!(" {} |", percent_estimate(&e)));
            }
            out.push('\n');
        }
    }
    let c = &report.counts;
    let mut notes = vec![match &report.split {
        Some(split) => {
            format!("{} of the {} `{split}` instances scored ({} in the file)", c.scored, c.selected, c.instances)
        }
        None => format!("{} of {} instances scored", c.scored, c.instances),
    }];
    if c.multi_reference > 0 {
        notes.push(format!(
            "{} instances have several references; {} were scored against an alternative order",
            c.multi_reference, c.alternative_chosen
        ));
    }
    if c.missing > 0 {
        notes.push(format!("{} instances without a prediction were left out (--skip-missing)", c.missing));
    }
    if c.outside_split > 0 {
        notes.push(format!("{} predictions for instances of other splits were ignored", c.outside_split));
    }
    if c.extra > 0 {
        notes.push(format!("{} predictions with unknown ids were ignored", c.extra));
    }
    out.push('\n');
    for n in notes {
        out.push_str(&format!("- {n}\n"));
    }
    out
}

/// Agreement among annotators, per instance and overall.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgreementReport {
    /// Instances with annotations.
    pub instances: usize,
    /// Instances with at least two annotators' orders (where order agreement is defined).
    pub order_instances: usize,
    /// Mean over instances of the mean pairwise κ (pair one-hot encoding).
    pub order_kappa: Estimate,
    /// Instances where at least two annotators gave alternatives with a matched pair.
    pub alternative_instances: usize,
    /// Mean over instances of the alternative-order κ.
    pub alternative_kappa: Estimate,
    pub per_instance: Vec<InstanceAgreement>,
}

impl AgreementReport {
    /// The results file (`kind` agreement).
    pub fn results_json(&self, config: &BootstrapConfig) -> serde_json::Value {
        json!({
            "kind": "agreement",
            "bootstrap": config,
            "instances": self.instances,
            "order_instances": self.order_instances,
            "order_kappa": self.order_kappa,
            "alternative_instances": self.alternative_instances,
            "alternative_kappa": self.alternative_kappa,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceAgreement {
    pub id: String,
    pub annotators: usize,
    pub order_kappa: Option<f64>,
    pub alternative_kappa: Option<f64>,
}

/// Agreement of annotators' orders of `instances` (gold = each instance's authored order). Every annotated id
/// must be an instance and every order a permutation of its items.
pub fn evaluate_agreement(
    instances: &[SequencingInstance],
    annotations: &[AnnotationRecord],
    source: &Path,
    config: &BootstrapConfig,
) -> Result<AgreementReport> {
    let by_id: HashMap<&str, &SequencingInstance> = instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut per: BTreeMap<&str, Vec<&AnnotationRecord>> = BTreeMap::new();
    for a in annotations {
        let loc = stepwise_core::Location::Line { line: a.line, column: None };
        let Some(inst) = by_id.get(a.id.as_str()) else {
            return Err(Error::field(source, loc, "id", format!("no instance has id {:?}", a.id)));
        };
        let n = inst.items.len();
        check_permutation(&a.order, n).map_err(|e| {
            Error::field(source, loc.clone(), "order", format!("not an order of the {n} items of {:?}: {e}", a.id))
        })?;
        for (i, alt) in a.alternatives.iter().enumerate() {
            check_permutation(alt, n).map_err(|e| {
                Error::field(
                    source,
                    loc.clone(),
                    format!("alternatives[{i}]"),
                    format!("not an order of the {n} items of {:?}: {e}", a.id),
                )
            })?;
        }
        per.entry(a.id.as_str()).or_default().push(a);
    }
    // Instances in file order, for a stable report.
    let per_instance: Vec<InstanceAgreement> = instances
        .iter()
        .filter_map(|inst| {
            let anns = per.get(inst.id.as_str())?;
            let orders: Vec<&[usize]> = anns.iter().map(|a| a.order.as_slice()).collect();
            let alts: Vec<&[Vec<usize>]> =
                anns.iter().filter(|a| !a.alternatives.is_empty()).map(|a| a.alternatives.as_slice()).collect();
            Some(InstanceAgreement {
                id: inst.id.clone(),
                annotators: anns.len(),
                order_kappa: instance_order_kappa(&orders),
                alternative_kappa: instance_alternative_kappa(&inst.references[0], &alts),
            })
        })
        .collect();
    let order: Vec<f64> = per_instance.iter().filter_map(|p| p.order_kappa).collect();
    let alt: Vec<f64> = per_instance.iter().filter_map(|p| p.alternative_kappa).collect();
    let order_kappa = mean_estimates(&[&order], Unit::Rows, config, "agreement/order")[0];
    let alternative_kappa = mean_estimates(&[&alt], Unit::Rows, config, "agreement/alternative")[0];
    Ok(AgreementReport {
        instances: per_instance.len(),
        order_instances: order.len(),
        order_kappa,
        alternative_instances: alt.len(),
        alternative_kappa,
        per_instance,
    })
}

/// Markdown summary of an agreement report.
pub fn agreement_markdown(report: &AgreementReport, config: &BootstrapConfig) -> String {
    let level = format!("{:.0}% CI", config.confidence * 100.0);
    let row = |name: &str, n: usize, e: &Estimate| {
        format!("| {name} | {n} | {} | {} |\n", number(e.value, 3), number_interval(e.ci, 3))
    };
    let mut out = format!("| agreement | instances | Cohen's κ | {level} |\n|---|---:|---:|---|\n");
    out.push_str(&row("order (pairwise one-hot)", report.order_instances, &report.order_kappa));
    out.push_str(&row("alternative orders (best match)", report.alternative_instances, &report.alternative_kappa));
    out.push_str(&format!("\n- {} annotated instances\n", report.instances));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::Location;
    use stepwise_core::sequencing::SequencingItem;

    fn instance(id: &str, split: &str, modality: &str, refs: Vec<Vec<usize>>) -> SequencingInstance {
        let n = refs[0].len();
        SequencingInstance {
            constraints: None,
            id: id.into(),
            procedure: "p".into(),
            split: split.into(),
            modality: modality.into(),
            items: (0..n).map(|step| SequencingItem { step, title: None, text: None, images: vec![] }).collect(),
            references: refs,
        }
    }

    fn pred(id: &str, order: Vec<usize>, line: usize) -> OrderRecord {
        OrderRecord { id: id.into(), order, location: Location::Line { line, column: None } }
    }

    fn opts() -> SequencingOptions {
        SequencingOptions {
            bootstrap: BootstrapConfig { resamples: 100, confidence: 0.95, seed: 0 },
            ..Default::default()
        }
    }

    /// Sampled references: a valid prediction outside the sample is still scored as valid, an invalid one against
    /// the best of the sample and its own repair, and the authored-only scoring ignores the constraints.
    #[test]
    fn a_valid_order_outside_the_sampled_references_is_scored_as_valid() {
        // Items 0 → 1 and 2 → 3 (6 valid orders); the sample keeps two of them.
        let mut inst = instance("a", "test", "text", vec![vec![0, 1, 2, 3], vec![2, 3, 0, 1]]);
        inst.constraints = Some(vec![[0, 1], [2, 3]]);
        let insts = vec![inst.clone()];
        let valid = evaluate_orders(&insts, &[pred("a", vec![0, 2, 1, 3], 1)], Path::new("p"), &opts()).unwrap();
        let r = &valid.instances[0];
        assert_eq!((Metric::Pmr.value(&r.score), r.reference), (1.0, 2), "its own repair, after the 2 references");
        // Without the constraints the same prediction matches neither sampled order.
        let unconstrained = vec![SequencingInstance { constraints: None, ..inst.clone() }];
        let r = &evaluate_orders(&unconstrained, &[pred("a", vec![0, 2, 1, 3], 1)], Path::new("p"), &opts())
            .unwrap()
            .instances[0];
        assert_eq!(Metric::Pmr.value(&r.score), 0.0);
        // Invalid (1 before 0): PMR 0; the repair [0, 1, 2, 3]... is the authored order here, chosen first.
        let invalid = evaluate_orders(&insts, &[pred("a", vec![1, 0, 2, 3], 1)], Path::new("p"), &opts()).unwrap();
        let r = &invalid.instances[0];
        assert_eq!((Metric::Pmr.value(&r.score), r.reference), (0.0, 0));
        assert_eq!(Metric::PositionAccuracy.value(&r.score), 0.5);
        // Authored only: the constraints do not apply.
        let single = vec![inst.authored_only()];
        let r =
            &evaluate_orders(&single, &[pred("a", vec![0, 2, 1, 3], 1)], Path::new("p"), &opts()).unwrap().instances[0];
        assert_eq!((Metric::Pmr.value(&r.score), r.reference), (0.0, 0));
    }

    #[test]
    fn length_buckets_parse_and_name_their_groups() {
        assert_eq!(parse_length_buckets("2,3-5,11+").unwrap(), vec![(2, 2), (3, 5), (11, usize::MAX)]);
        assert!(parse_length_buckets("5-3").is_err() && parse_length_buckets("x").is_err());
        assert_eq!([(2, 2), (3, 5), (11, usize::MAX)].map(bucket_name), ["n=2", "n=3-5", "n=11+"]);
    }

    /// Hand-computed: a is perfect (acc 1, PMR 1, dist 0, L_q 3, L_r 3, τ 1); b = reversed 3 items
    /// (acc 1/3, PMR 0, dist 4, L_q 1, L_r 1, τ −1). Means: acc 2/3, PMR 1/2, dist 2, L_q 2, L_r 2, τ 0.
    #[test]
    fn hand_computed_report() {
        let insts = vec![
            instance("a", "test", "text", vec![vec![2, 0, 1]]),
            instance("b", "test", "text", vec![vec![0, 1, 2]]),
        ];
        let preds = vec![pred("a", vec![2, 0, 1], 1), pred("b", vec![2, 1, 0], 2)];
        let r = evaluate_orders(&insts, &preds, Path::new("p.jsonl"), &opts()).unwrap();
        let all = &r.groups[0];
        let v = |m: Metric| all.metrics[m.name()].value;
        assert!((v(Metric::PositionAccuracy) - 2.0 / 3.0).abs() < 1e-15);
        assert_eq!(v(Metric::Pmr), 0.5);
        assert_eq!(v(Metric::Distance), 2.0);
        assert_eq!(v(Metric::Lq), 2.0);
        assert_eq!(v(Metric::Lr), 2.0);
        assert_eq!(v(Metric::KendallTau), 0.0);
        assert!((all.pooled[PooledMetric::PositionAccuracy.name()].value - 4.0 / 6.0).abs() < 1e-15);
        let md = markdown(&r, &opts().bootstrap, true);
        assert!(md.contains("| all | 2 | 66.7 ["), "{md}");
        assert!(md.contains("Rouge-S (pooled)"), "{md}");
    }

    #[test]
    fn multi_reference_picks_the_best() {
        let insts = vec![instance("a", "test", "text", vec![vec![0, 1, 2, 3], vec![1, 0, 2, 3]])];
        let r = evaluate_orders(&insts, &[pred("a", vec![1, 0, 2, 3], 1)], Path::new("p"), &opts()).unwrap();
        assert_eq!(r.instances[0].reference, 1);
        assert_eq!(r.groups[0].metrics["pmr"].value, 1.0);
        assert_eq!((r.counts.multi_reference, r.counts.alternative_chosen), (1, 1));
    }

    #[test]
    fn bad_orders_name_the_record() {
        let insts = vec![instance("a", "test", "text", vec![vec![0, 1, 2]])];
        let e = evaluate_orders(&insts, &[pred("a", vec![0, 1, 1], 7)], Path::new("p.jsonl"), &opts()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.jsonl:7: field `order`: not an order of the 3 items of instance \"a\": item 1 appears twice (entries 1 and 2)"
        );
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn splits_missing_and_extra() {
        let insts = vec![
            instance("a", "test", "text", vec![vec![0, 1]]),
            instance("b", "val", "image", vec![vec![0, 1]]),
            instance("c", "test", "image", vec![vec![1, 0]]),
        ];
        let preds = vec![pred("a", vec![0, 1], 1), pred("b", vec![1, 0], 2)];
        let e = evaluate_orders(&insts, &preds, Path::new("p"), &opts()).unwrap_err().to_string();
        assert!(e.contains("1 of 3 instances have no prediction") && e.contains("split(s) test"), "{e}");
        let o = SequencingOptions { split: Some("test".into()), skip_missing: true, ..opts() };
        let r = evaluate_orders(&insts, &preds, Path::new("p"), &o).unwrap();
        assert_eq!((r.counts.scored, r.counts.missing, r.counts.outside_split), (1, 1, 1));
        let o = SequencingOptions { split: Some("train".into()), ..opts() };
        assert!(evaluate_orders(&insts, &preds, Path::new("p"), &o).is_err());
        let unknown = vec![pred("x", vec![0, 1], 1), pred("y", vec![0, 1], 2)];
        let e = evaluate_orders(&insts, &unknown, Path::new("p"), &opts()).unwrap_err().to_string();
        assert!(e.contains("only 0 of 2 predictions"), "{e}");
    }

    #[test]
    fn procedure_resampling_gives_intervals() {
        let mut insts = Vec::new();
        let mut preds = Vec::new();
        for i in 0..40 {
            let mut inst = instance(&format!("i{i}"), "test", "text", vec![vec![0, 1, 2]]);
            inst.procedure = format!("p{}", i / 4);
            insts.push(inst);
            preds.push(pred(&format!("i{i}"), if i % 3 == 0 { vec![0, 1, 2] } else { vec![1, 0, 2] }, i + 1));
        }
        let rows = evaluate_orders(&insts, &preds, Path::new("p"), &opts()).unwrap();
        let procs = SequencingOptions { resample_procedures: true, ..opts() };
        let by_proc = evaluate_orders(&insts, &preds, Path::new("p"), &procs).unwrap();
        let (a, b) = (rows.groups[0].metrics["pmr"], by_proc.groups[0].metrics["pmr"]);
        assert_eq!(a.value, b.value);
        assert!(b.ci.is_some());
        assert_ne!(a.ci, b.ci);
        assert!(markdown(&by_proc, &opts().bootstrap, false).contains("bootstrap over procedures"));
    }

    #[test]
    fn groups_by_modality() {
        let insts =
            vec![instance("a", "test", "text", vec![vec![0, 1]]), instance("b", "test", "image", vec![vec![0, 1]])];
        let preds = vec![pred("a", vec![0, 1], 1), pred("b", vec![1, 0], 2)];
        let r = evaluate_orders(&insts, &preds, Path::new("p"), &opts()).unwrap();
        let names: Vec<&str> = r.groups.iter().map(|g| g.group.as_str()).collect();
        assert_eq!(names, ["all", "modality=image", "modality=text"]);
    }

    #[test]
    fn agreement_report() {
        let insts = vec![
            instance("a", "test", "text", vec![vec![0, 1, 2, 3]]),
            instance("b", "test", "text", vec![vec![0, 1, 2]]),
        ];
        let ann = |id: &str, who: &str, order: Vec<usize>, alts: Vec<Vec<usize>>, line| AnnotationRecord {
            id: id.into(),
            annotator: who.into(),
            order,
            alternatives: alts,
            line,
        };
        let anns = vec![
            ann("a", "w1", vec![0, 1, 2, 3], vec![vec![1, 0, 2, 3]], 1),
            ann("a", "w2", vec![0, 1, 3, 2], vec![vec![1, 0, 2, 3]], 2),
            ann("b", "w1", vec![0, 1, 2], vec![], 3),
        ];
        let cfg = opts().bootstrap;
        let r = evaluate_agreement(&insts, &anns, Path::new("a.jsonl"), &cfg).unwrap();
        assert_eq!((r.instances, r.order_instances, r.alternative_instances), (2, 1, 1));
        // Orders of a differ in one pair of 6: κ = τ = 1 − 2/6.
        assert!((r.order_kappa.value - (1.0 - 2.0 / 6.0)).abs() < 1e-12);
        assert!((r.alternative_kappa.value - 1.0).abs() < 1e-12);
        let bad = vec![ann("zz", "w", vec![0], vec![], 4)];
        let e = evaluate_agreement(&insts, &bad, Path::new("a.jsonl"), &cfg).unwrap_err().to_string();
        assert!(e.contains("a.jsonl:4: field `id`: no instance has id \"zz\""), "{e}");
    }
}
