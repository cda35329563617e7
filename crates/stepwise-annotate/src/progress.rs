//! Where a study stands: judgements per modality, each person's numbers, the items still wanting judgements.
//! Shared by the dashboard and the exports.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::db::{AssignmentRow, OPEN, WorkerRow};
use crate::judgements::{Judgement, WorkerStats, judgements, worker_stats};
use crate::study::{Modality, Study};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModalityProgress {
    pub modality: Modality,
    /// Study items shown in this modality.
    pub items: usize,
    /// Items with every wanted judgement.
    pub complete: usize,
    /// Counted judgements.
    pub judgements: usize,
    /// Judgements wanted in all.
    pub wanted: usize,
    /// Assignments handed out and not yet answered.
    pub open: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpenItem {
    pub instance: usize,
    pub modality: Modality,
    pub judgements: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub modalities: Vec<ModalityProgress>,
    pub workers: Vec<WorkerStats>,
    pub open_items: Vec<OpenItem>,
    pub judgements: Vec<Judgement>,
}

impl Progress {
    pub fn of(study: &Study, workers: &[WorkerRow], assignments: &[AssignmentRow]) -> Progress {
        let judgements = judgements(study, assignments);
        let mut counted: BTreeMap<usize, usize> = BTreeMap::new(); // task index → counted judgements
        for j in judgements.iter().filter(|j| j.counted) {
            *counted.entry(j.task).or_default() += 1;
        }
        let mut open: BTreeMap<usize, usize> = BTreeMap::new();
        for a in assignments.iter().filter(|a| a.status == OPEN) {
            if let Ok(i) = usize::try_from(a.task_id - 1) {
                *open.entry(i).or_default() += 1;
            }
        }
        let wanted = study.rules.judgements;
        let mut modalities: BTreeMap<Modality, ModalityProgress> = BTreeMap::new();
        let mut open_items = Vec::new();
        for (i, t) in study.tasks.iter().enumerate().filter(|(_, t)| !t.qualification) {
            let got = counted.get(&i).copied().unwrap_or(0);
            let m = modalities.entry(t.modality).or_insert(ModalityProgress {
                modality: t.modality,
                items: 0,
                complete: 0,
                judgements: 0,
                wanted: 0,
                open: 0,
            });
            m.items += 1;
            m.complete += usize::from(got >= wanted);
            m.judgements += got;
            m.wanted += wanted;
            m.open += open.get(&i).copied().unwrap_or(0);
            if got < wanted {
                open_items.push(OpenItem { instance: t.instance, modality: t.modality, judgements: got });
            }
        }
        Progress {
            modalities: modalities.into_values().collect(),
            workers: worker_stats(study, workers, &judgements),
            open_items,
            judgements,
        }
    }
}
