//! Which steps of which procedure a question shows and which step is its answer: from a stepwise question's
//! `meta` provenance, or for external RecipeQA files from the qid pattern `<task*1000>-<recipe>-<s1>-…-<sn>`
//! (step positions of the question items) with the answer slot given by the `@placeholder` (cloze) or the answer
//! index (coherence, whose question lists the choices).

use stepwise_core::{Question, Task, TaskShape};

/// Where a question's step provenance came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProvenanceSource {
    Meta,
    Qid,
    Unavailable,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    pub procedure: String,
    /// Steps of the question items, in question order (None when unavailable).
    pub steps: Option<Vec<i64>>,
    /// The answer's step: the hidden step (cloze) or the replaced step (coherence); None for ordering.
    pub answer_step: Option<i64>,
    pub source: ProvenanceSource,
}

impl Provenance {
    /// The steps whose content the question reveals: every item for cloze (the hidden one is among the choices)
    /// and ordering; for coherence every item but the replaced one.
    pub fn revealed_steps(&self, task: Option<Task>) -> Vec<i64> {
        let Some(steps) = &self.steps else {
            return Vec::new();
        };
        match (task.map(Task::shape), self.answer_step) {
            (Some(TaskShape::OddOneOut), Some(a)) => steps.iter().copied().filter(|&s| s != a).collect(),
            _ => steps.clone(),
        }
    }
}

pub fn provenance(q: &Question) -> Provenance {
    let procedure = q.recipe_id.clone();
    let recorded = q.provenance();
    if let Some(steps) = recorded.question_steps {
        let answer_step = recorded.answer_step;
        return Provenance { procedure, steps: Some(steps), answer_step, source: ProvenanceSource::Meta };
    }
    if let Some(steps) = qid_steps(&q.qid) {
        let slot = match q.task_kind().map(Task::shape) {
            Some(TaskShape::Cloze) => q.placeholder_index(),
            Some(TaskShape::OddOneOut) => Some(q.answer),
            Some(TaskShape::Ordering) | None => None,
        };
        let answer_step = slot.and_then(|s| steps.get(s).copied());
        return Provenance { procedure, steps: Some(steps), answer_step, source: ProvenanceSource::Qid };
    }
    Provenance { procedure, steps: None, answer_step: None, source: ProvenanceSource::Unavailable }
}

/// The step positions of a RecipeQA qid `<task>-<recipe>-<s1>-…`, when it has that shape.
pub fn qid_steps(qid: &str) -> Option<Vec<i64>> {
    let parts: Vec<&str> = qid.split('-').collect();
    if parts.len() < 4 || !parts[0].ends_with("000") {
        return None;
    }
    parts[2..].iter().map(|p| p.parse::<i64>().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::taskset::PLACEHOLDER;

    #[test]
    fn qids_give_steps_and_the_answer_slot() {
        let q = Question {
            qid: "2000-9890-0-1-3-5".into(),
            recipe_id: "r".into(),
            task: "visual_cloze".into(),
            question: vec!["a".into(), PLACEHOLDER.into(), "c".into(), "d".into()],
            ..Default::default()
        };
        let p = provenance(&q);
        assert_eq!(p.steps, Some(vec![0, 1, 3, 5]));
        assert_eq!(p.answer_step, Some(1));
        assert_eq!(p.source, ProvenanceSource::Qid);
        assert_eq!(qid_steps("abc"), None);
        assert_eq!(qid_steps("1000-5-x-1"), None);
    }

    #[test]
    fn meta_wins_over_the_qid() {
        let mut q =
            Question { qid: "3000-1-0-1-2-3".into(), task: "visual_coherence".into(), answer: 2, ..Default::default() };
        q.extra.insert("meta".into(), serde_json::json!({"question_steps": [4, 5, 6, 7], "answer_step": 6}));
        let p = provenance(&q);
        assert_eq!(p.source, ProvenanceSource::Meta);
        assert_eq!(p.revealed_steps(Some(Task::VisualCoherence)), vec![4, 5, 7]);
    }
}
