//! What people submitted, read back from the database: the answer format, validation of a submission, and the
//! per-person numbers the dashboard and the exports share (accuracy, agreement).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stepwise_score::agreement::{best_match_pairs, order_kappa};
use stepwise_score::sequence_metrics::check_permutation;

use crate::db::{AssignmentRow, DISCARDED, DONE, WorkerRow, task_spec};
use crate::study::{Modality, Study, StudyKind};

/// Most alternative orders one person may add to one instance.
pub const MAX_ALTERNATIVES: usize = 24;

/// "Which modality helped?" (asked after a multimodal item).
pub const HELPED: [&str; 4] = ["both", "text", "image", "neither"];

/// A submitted answer, stored as canonical JSON in `assignments.answer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// Ordering studies: item indices in the order the person chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<usize>>,
    /// Ordering studies: 1 (guess) … 5 (sure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<u8>,
    /// Ordering studies, multimodal items: which modality helped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helped: Option<String>,
    /// Alternative-order studies: further orders the procedure could also be done in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alternatives: Option<Vec<Vec<usize>>>,
}

impl Answer {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A submitted form's fields, before validation.
#[derive(Debug, Clone, Default)]
pub struct Submission<'a> {
    pub order: Option<&'a str>,
    pub confidence: Option<&'a str>,
    pub helped: Option<&'a str>,
    pub alternatives: Option<&'a str>,
}

/// Check a submission for an item of `instance` shown in `modality`, asked as `kind` (qualification items are
/// ordered in either kind of study); the error says what is wrong, for a 400.
pub fn validate(
    study: &Study,
    kind: StudyKind,
    instance: usize,
    modality: Modality,
    s: &Submission<'_>,
) -> Result<Answer, String> {
    let inst = &study.instances[instance];
    let n = inst.items.len();
    match kind {
        StudyKind::Ordering => {
            let text = s.order.ok_or("the order is missing")?;
            let order = parse_order(text, n)?;
            let confidence: u8 = s
                .confidence
                .ok_or("say how confident you are (1–5)")?
                .trim()
                .parse()
                .ok()
                .filter(|c| (1..=5).contains(c))
                .ok_or("confidence must be a number from 1 to 5")?;
            let helped = if modality == Modality::Multimodal {
                let h = s.helped.ok_or("say which modality helped")?.trim();
                if !HELPED.contains(&h) {
                    return Err(format!("which modality helped: {h:?} is not one of {}", HELPED.join(", ")));
                }
                Some(h.to_string())
            } else {
                None
            };
            Ok(Answer { order: Some(order), confidence: Some(confidence), helped, alternatives: None })
        }
        StudyKind::Alternatives => {
            let text = s.alternatives.unwrap_or("[]");
            let raw: Vec<Vec<serde_json::Value>> = serde_json::from_str(text)
                .map_err(|_| "alternatives must be a JSON list of orders (lists of item numbers)".to_string())?;
            if raw.len() > MAX_ALTERNATIVES {
                return Err(format!("at most {MAX_ALTERNATIVES} alternative orders per item"));
            }
            let gold = &inst.references[0];
            let mut alternatives: Vec<Vec<usize>> = Vec::with_capacity(raw.len());
            for (k, a) in raw.iter().enumerate() {
                let order: Vec<usize> = a
                    .iter()
                    .map(|v| v.as_u64().and_then(|x| usize::try_from(x).ok()))
                    .collect::<Option<_>>()
                    .ok_or(format!("alternative {}: entries must be item numbers", k + 1))?;
                check_permutation(&order, n).map_err(|e| format!("alternative {}: {e}", k + 1))?;
                if &order == gold {
                    return Err(format!("alternative {} is the original order", k + 1));
                }
                if alternatives.contains(&order) {
                    return Err(format!("alternative {} repeats an earlier one", k + 1));
                }
                alternatives.push(order);
            }
            Ok(Answer { order: None, confidence: None, helped: None, alternatives: Some(alternatives) })
        }
    }
}

/// "2,0,1" → a permutation of `0..n`.
pub fn parse_order(text: &str, n: usize) -> Result<Vec<usize>, String> {
    let order: Vec<usize> = text
        .split(',')
        .map(|t| t.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("the order {text:?} is not a comma-separated list of item numbers"))?;
    check_permutation(&order, n).map_err(|e| format!("the order {e}"))?;
    Ok(order)
}

/// One submitted judgement with what it was about.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub assignment: i64,
    /// Index of the task in the study's queue.
    pub task: usize,
    pub worker: i64,
    pub instance: usize,
    pub modality: Modality,
    pub qualification: bool,
    /// Counted (`done`) or withdrawn when its author was censored (`discarded`).
    pub counted: bool,
    pub submitted_ms: i64,
    pub answer: Answer,
}

/// Every submitted judgement, in submission order (time, then assignment id). Rows whose answer does not parse
/// are skipped (the server writes only valid ones).
pub fn judgements(study: &Study, assignments: &[AssignmentRow]) -> Vec<Judgement> {
    let mut out: Vec<Judgement> = assignments
        .iter()
        .filter(|a| a.status == DONE || (a.status == DISCARDED && a.answer.is_some()))
        .filter_map(|a| {
            let (instance, modality, qualification) = task_spec(study, a.task_id)?;
            let answer: Answer = serde_json::from_str(a.answer.as_deref()?).ok()?;
            Some(Judgement {
                assignment: a.id,
                task: usize::try_from(a.task_id - 1).ok()?,
                worker: a.worker_id,
                instance,
                modality,
                qualification,
                counted: a.status == DONE,
                submitted_ms: a.submitted_ms.unwrap_or(0),
                answer,
            })
        })
        .collect();
    out.sort_by_key(|j| (j.submitted_ms, j.assignment));
    out
}

/// Whether an ordering judgement put the items in a valid order (any reference).
pub fn exact(study: &Study, j: &Judgement) -> Option<bool> {
    Some(study.is_reference(j.instance, j.answer.order.as_ref()?))
}

/// Perfect-match ratio of the ordering judgements among `judgements` (`None` when there is none).
pub fn pmr(study: &Study, judgements: &[&Judgement]) -> Option<f64> {
    let e: Vec<bool> = judgements.iter().filter_map(|j| exact(study, j)).collect();
    (!e.is_empty()).then(|| e.iter().filter(|&&x| x).count() as f64 / e.len() as f64)
}

/// Per-person numbers for the dashboard and the exports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkerStats {
    pub worker: i64,
    pub label: String,
    pub status: String,
    pub qualification_score: Option<f64>,
    /// Counted study judgements.
    pub judgements: usize,
    /// Perfect-match ratio of counted study orders (ordering studies).
    pub accuracy: Option<f64>,
    /// Mean κ with the other people who judged the same items (order κ for ordering studies, best-matched
    /// alternative κ for alternative-order studies); `None` when no co-judged item gives a defined κ.
    pub agreement: Option<f64>,
    /// Items the agreement was averaged over.
    pub agreement_items: usize,
}

pub fn worker_stats(study: &Study, workers: &[WorkerRow], judgements: &[Judgement]) -> Vec<WorkerStats> {
    let counted: Vec<&Judgement> = judgements.iter().filter(|j| j.counted && !j.qualification).collect();
    // (instance, modality) → judgements on it
    let mut by_item: BTreeMap<(usize, Modality), Vec<&Judgement>> = BTreeMap::new();
    for j in &counted {
        by_item.entry((j.instance, j.modality)).or_default().push(j);
    }
    workers
        .iter()
        .map(|w| {
            let mine: Vec<&Judgement> = counted.iter().copied().filter(|j| j.worker == w.id).collect();
            let accuracy = pmr(study, &mine);
            let mut kappas = Vec::new();
            for j in &mine {
                let others = &by_item[&(j.instance, j.modality)];
                let values: Vec<f64> =
                    others.iter().filter(|o| o.worker != w.id).filter_map(|o| pair_agreement(study, j, o)).collect();
                if !values.is_empty() {
                    kappas.push(values.iter().sum::<f64>() / values.len() as f64);
                }
            }
            WorkerStats {
                worker: w.id,
                label: w.label.clone(),
                status: w.status.clone(),
                qualification_score: w.qualification_score,
                judgements: mine.len(),
                accuracy,
                agreement: (!kappas.is_empty()).then(|| kappas.iter().sum::<f64>() / kappas.len() as f64),
                agreement_items: kappas.len(),
            }
        })
        .collect()
}

/// κ between two people's judgements of one item (appendix B.3 of the sequencing paper, as stepwise-eval
/// computes it).
pub fn pair_agreement(study: &Study, a: &Judgement, b: &Judgement) -> Option<f64> {
    match (&a.answer.order, &b.answer.order, &a.answer.alternatives, &b.answer.alternatives) {
        (Some(x), Some(y), _, _) => order_kappa(x, y),
        (_, _, Some(x), Some(y)) => {
            let gold = &study.references(a.instance)[0];
            let m = best_match_pairs(gold, x, y);
            (!m.is_empty()).then(|| m.iter().map(|p| p.kappa).sum::<f64>() / m.len() as f64)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::StudyRules;

    fn study(kind: StudyKind) -> Study {
        let inst = crate::study::tests::instance("a", 3);
        Study {
            version: 1,
            rules: StudyRules { kind, ..StudyRules::default() },
            image_root: None,
            admin_password_hash: String::new(),
            tasks: vec![],
            instances: vec![inst],
        }
    }

    #[test]
    fn ordering_submissions_are_checked_field_by_field() {
        let s = study(StudyKind::Ordering);
        let ok = Submission { order: Some("2,1,0"), confidence: Some("4"), helped: Some("text"), alternatives: None };
        let a = validate(&s, s.rules.kind, 0, Modality::Multimodal, &ok).unwrap();
        assert_eq!(a.order, Some(vec![2, 1, 0]));
        assert_eq!(a.to_json(), r#"{"order":[2,1,0],"confidence":4,"helped":"text"}"#);
        let text_only =
            validate(&s, s.rules.kind, 0, Modality::Text, &Submission { helped: None, ..ok.clone() }).unwrap();
        assert_eq!(text_only.helped, None);
        for (bad, says) in [
            (Submission { order: Some("2,2,0"), ..ok.clone() }, "twice"),
            (Submission { order: Some("2,1"), ..ok.clone() }, "3 items"),
            (Submission { order: Some("a,b,c"), ..ok.clone() }, "comma-separated"),
            (Submission { confidence: Some("9"), ..ok.clone() }, "1 to 5"),
            (Submission { confidence: None, ..ok.clone() }, "confident"),
            (Submission { helped: Some("smell"), ..ok.clone() }, "not one of"),
        ] {
            let e = validate(&s, s.rules.kind, 0, Modality::Multimodal, &bad).unwrap_err();
            assert!(e.contains(says), "{e} should say {says}");
        }
    }

    #[test]
    fn alternatives_must_be_new_distinct_permutations() {
        let s = study(StudyKind::Alternatives);
        // The instance's gold order is [2, 1, 0].
        let sub = |t: &'static str| Submission { alternatives: Some(t), ..Submission::default() };
        let a = validate(&s, s.rules.kind, 0, Modality::Multimodal, &sub("[[1,2,0],[0,1,2]]")).unwrap();
        assert_eq!(a.alternatives, Some(vec![vec![1, 2, 0], vec![0, 1, 2]]));
        assert_eq!(validate(&s, s.rules.kind, 0, Modality::Multimodal, &sub("[]")).unwrap().alternatives, Some(vec![]));
        for (t, says) in [
            ("[[2,1,0]]", "original"),
            ("[[1,2,0],[1,2,0]]", "repeats"),
            ("[[1,2]]", "3 items"),
            ("[[1,2,-1]]", "item numbers"),
            ("{\"a\":1}", "JSON list"),
        ] {
            let e = validate(&s, s.rules.kind, 0, Modality::Multimodal, &sub(t)).unwrap_err();
            assert!(e.contains(says), "{t}: {e}");
        }
    }
}
