//! The paper's human tables from a study's judgements: which modality helped (its Table 8), confidence levels
//! (Table 9), order agreement κ per modality (appendix B.3.1) and time per HIT. Written by the export as
//! `tables.json` (read by `stepwise report`) and summarised in `summary.md`.
//!
//! Everything is over counted study judgements (qualification items and judgements withdrawn by censoring are
//! left out). A judgement is *correct* when its order equals one of the instance's references.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use stepwise_score::agreement::instance_order_kappa;
use stepwise_score::bootstrap::quantile_sorted;

use crate::db::AssignmentRow;
use crate::judgements::{HELPED, Judgement, pmr};
use crate::study::{Modality, Study};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudyTables {
    pub kind: String,
    pub modalities: Vec<ModalityTable>,
    /// Multimodal items: answers to "which modality helped" (Table 8).
    pub helped: Vec<LevelRow>,
    pub hits: HitTimes,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModalityTable {
    pub modality: Modality,
    pub judgements: usize,
    pub people: usize,
    /// Perfect-match ratio (any reference).
    pub pmr: Option<f64>,
    /// Instances with at least two judgements in this modality.
    pub kappa_instances: usize,
    /// Mean over those instances of the mean pairwise order κ.
    pub kappa: Option<f64>,
    pub mean_confidence: Option<f64>,
    /// Confidence levels 1–5 (Table 9).
    pub confidence: Vec<LevelRow>,
}

/// One answer level: how often it was given and how often those orders were correct.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelRow {
    pub level: String,
    pub count: usize,
    pub share: Option<f64>,
    pub pmr: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HitTimes {
    /// Study HITs with every item answered.
    pub completed: usize,
    /// From the HIT being handed out to its last answer, in minutes.
    pub median_minutes: Option<f64>,
    pub mean_minutes: Option<f64>,
    pub p90_minutes: Option<f64>,
}

pub fn study_tables(study: &Study, judgements: &[Judgement], assignments: &[AssignmentRow]) -> StudyTables {
    let counted: Vec<&Judgement> = judgements.iter().filter(|j| j.counted && !j.qualification).collect();
    let modalities = study
        .rules
        .modalities
        .iter()
        .map(|&m| {
            let of_m: Vec<&Judgement> = counted.iter().copied().filter(|j| j.modality == m).collect();
            let mut orders: BTreeMap<usize, Vec<&[usize]>> = BTreeMap::new();
            for j in &of_m {
                if let Some(o) = &j.answer.order {
                    orders.entry(j.instance).or_default().push(o);
                }
            }
            let kappas: Vec<f64> = orders.values().filter_map(|o| instance_order_kappa(o)).collect();
            let confidences: Vec<u8> = of_m.iter().filter_map(|j| j.answer.confidence).collect();
            let levels = (1..=5u8).map(|c| c.to_string()).collect::<Vec<_>>();
            ModalityTable {
                modality: m,
                judgements: of_m.len(),
                people: of_m.iter().map(|j| j.worker).collect::<BTreeSet<_>>().len(),
                pmr: pmr(study, &of_m),
                kappa_instances: kappas.len(),
                kappa: mean(&kappas),
                mean_confidence: mean(&confidences.iter().map(|&c| f64::from(c)).collect::<Vec<_>>()),
                confidence: level_rows(study, &of_m, &levels, |j| j.answer.confidence.map(|c| c.to_string())),
            }
        })
        .collect();
    let multimodal: Vec<&Judgement> = counted.iter().copied().filter(|j| j.modality == Modality::Multimodal).collect();
    let helped_levels: Vec<String> = HELPED.iter().map(|h| h.to_string()).collect();
    let helped = if multimodal.iter().any(|j| j.answer.helped.is_some()) {
        level_rows(study, &multimodal, &helped_levels, |j| j.answer.helped.clone())
    } else {
        Vec::new()
    };
    StudyTables { kind: study.rules.kind.as_str().into(), modalities, helped, hits: hit_times(study, assignments) }
}

fn level_rows(
    study: &Study,
    judgements: &[&Judgement],
    levels: &[String],
    level_of: impl Fn(&Judgement) -> Option<String>,
) -> Vec<LevelRow> {
    let answered: Vec<(&Judgement, String)> = judgements.iter().filter_map(|j| Some((*j, level_of(j)?))).collect();
    levels
        .iter()
        .map(|level| {
            let at: Vec<&Judgement> = answered.iter().filter(|(_, l)| l == level).map(|(j, _)| *j).collect();
            LevelRow {
                level: level.clone(),
                count: at.len(),
                share: (!answered.is_empty()).then(|| at.len() as f64 / answered.len() as f64),
                pmr: pmr(study, &at),
            }
        })
        .collect()
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn hit_times(study: &Study, assignments: &[AssignmentRow]) -> HitTimes {
    // hit → (handed out, last answer, all answered?, qualification?)
    let mut hits: BTreeMap<i64, (i64, i64, bool, bool)> = BTreeMap::new();
    for a in assignments {
        let qualification = crate::db::task_spec(study, a.task_id).is_some_and(|t| t.2);
        let e = hits.entry(a.hit_id).or_insert((a.created_ms, 0, true, qualification));
        e.0 = e.0.min(a.created_ms);
        // Every item answered and counted (a censored person's withdrawn HITs are left out).
        match a.submitted_ms {
            Some(t) if a.status == crate::db::DONE => e.1 = e.1.max(t),
            _ => e.2 = false,
        }
    }
    let mut minutes: Vec<f64> = hits
        .values()
        .filter(|(_, _, done, q)| *done && !q)
        .map(|(start, end, _, _)| (end - start).max(0) as f64 / 60_000.0)
        .collect();
    minutes.sort_by(f64::total_cmp);
    let quantile = |q: f64| (!minutes.is_empty()).then(|| quantile_sorted(&minutes, q));
    HitTimes {
        completed: minutes.len(),
        median_minutes: quantile(0.5),
        mean_minutes: mean(&minutes),
        p90_minutes: quantile(0.9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judgements::Answer;
    use crate::study::{StudyRules, TaskSpec};

    fn judgement(worker: i64, instance: usize, order: Vec<usize>, confidence: u8, helped: &str) -> Judgement {
        Judgement {
            assignment: worker * 100 + instance as i64,
            task: instance,
            worker,
            instance,
            modality: Modality::Multimodal,
            qualification: false,
            counted: true,
            submitted_ms: 0,
            answer: Answer {
                order: Some(order),
                confidence: Some(confidence),
                helped: Some(helped.into()),
                alternatives: None,
            },
        }
    }

    #[test]
    fn tables_count_levels_correctness_and_agreement_by_hand() {
        let inst = crate::study::tests::instance("a", 3); // gold [2, 1, 0]
        let study = Study {
            version: 1,
            rules: StudyRules { modalities: vec![Modality::Multimodal], ..StudyRules::default() },
            image_root: None,
            admin_password_hash: String::new(),
            tasks: vec![TaskSpec { instance: 0, modality: Modality::Multimodal, qualification: false }],
            instances: vec![inst],
        };
        let js = vec![
            judgement(1, 0, vec![2, 1, 0], 5, "both"),
            judgement(2, 0, vec![2, 1, 0], 4, "both"),
            judgement(3, 0, vec![0, 1, 2], 1, "image"),
        ];
        let t = study_tables(&study, &js, &[]);
        let m = &t.modalities[0];
        assert_eq!((m.judgements, m.people), (3, 3));
        assert!((m.pmr.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // κ pairs: (1,2) = 1, (1,3) = −1, (2,3) = −1 → mean −1/3 over one instance.
        assert_eq!(m.kappa_instances, 1);
        assert!((m.kappa.unwrap() + 1.0 / 3.0).abs() < 1e-12, "{:?}", m.kappa);
        assert!((m.mean_confidence.unwrap() - 10.0 / 3.0).abs() < 1e-12);
        let c5 = &m.confidence[4];
        assert_eq!((c5.level.as_str(), c5.count, c5.pmr), ("5", 1, Some(1.0)));
        assert_eq!(m.confidence[1].count, 0);
        assert_eq!(m.confidence[1].pmr, None);
        let both = &t.helped[0];
        assert_eq!((both.level.as_str(), both.count, both.pmr), ("both", 2, Some(1.0)));
        assert_eq!(t.helped[2].pmr, Some(0.0));
        assert_eq!(t.hits.completed, 0);
    }

    #[test]
    fn hit_times_count_only_finished_study_hits() {
        let study = Study {
            version: 1,
            rules: StudyRules::default(),
            image_root: None,
            admin_password_hash: String::new(),
            tasks: vec![
                TaskSpec { instance: 0, modality: Modality::Text, qualification: true },
                TaskSpec { instance: 1, modality: Modality::Text, qualification: false },
                TaskSpec { instance: 2, modality: Modality::Text, qualification: false },
            ],
            instances: vec![],
        };
        let row = |id: i64, hit: i64, task: i64, status: &str, created: i64, submitted: Option<i64>| AssignmentRow {
            id,
            hit_id: hit,
            hit_seq: hit,
            worker_id: 1,
            task_id: task,
            position: 0,
            status: status.into(),
            created_ms: created,
            submitted_ms: submitted,
            answer: None,
        };
        let rows = vec![
            row(1, 1, 1, "done", 0, Some(600_000)),      // qualification HIT: not counted
            row(2, 2, 2, "done", 60_000, Some(120_000)), // HIT 2: out at 1 min, last answer at 5 → 4 minutes
            row(3, 2, 3, "done", 60_000, Some(300_000)),
            row(4, 3, 2, "done", 0, Some(180_000)), // HIT 3: 3 minutes
            row(5, 4, 3, "open", 0, None),          // unfinished
        ];
        let h = hit_times(&study, &rows);
        assert_eq!(h.completed, 2);
        // Linear interpolation between order statistics (stepwise_score::bootstrap::quantile_sorted).
        assert_eq!(h.median_minutes, Some(3.5));
        assert_eq!(h.mean_minutes, Some(3.5));
        assert!((h.p90_minutes.unwrap() - 3.9).abs() < 1e-12);
    }
}
