//! RecipeQA's official question files (`{"data": [question, ...]}`, e.g. `val.json` or ../shared's `val-dev.json`).
//!
//! The questions are kept verbatim as a task set. The recipes are rebuilt from them: a recipe's steps are the union
//! of the context steps shown across all its questions, in step-id order, each with the `title`, `body` (→ `text`)
//! and `images` that any question shows (the text modalities differ by task: textual cloze shows bodies and images,
//! the visual tasks bodies and titles). When two questions show different content for the same step, the first in
//! file order wins and the conflict is noted in the ingest report. The step id is kept as the step's `id` field.
//! A recipe's `split` (from its questions) is kept as the procedure's `split` field.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;
use stepwise_core::json::read_json;
use stepwise_core::taskset::ContextStep;
use stepwise_core::{Procedure, Result, Step, TaskSet};

use super::step_key;
use crate::format::{Format, Ingested, Origin, ReadOptions, Sniff, contains, skip_ws};

pub struct RecipeQaQuestions;

impl Format for RecipeQaQuestions {
    fn name(&self) -> &'static str {
        "recipeqa"
    }

    fn describe(&self) -> &'static str {
        "RecipeQA official question JSON ({\"data\": [{qid, recipe_id, task, context, choice_list, answer, ...}]}): \
         questions kept as a task set, recipes rebuilt from the question contexts"
    }

    fn sniff(&self, _path: &Path, head: &[u8]) -> Sniff {
        // Any question key will do: a long first context can push the others past the head.
        let h = skip_ws(head);
        let question_key = [&b"\"qid\""[..], b"\"choice_list\"", b"\"context_modality\"", b"\"question_modality\""]
            .iter()
            .any(|k| contains(h, k));
        if h.starts_with(b"{") && contains(h, b"\"data\"") && question_key { Sniff::Yes } else { Sniff::No }
    }

    fn read(&self, inputs: &[PathBuf], opts: &ReadOptions) -> Result<Ingested> {
        let mut out = Ingested::default();
        for path in inputs {
            let ts = TaskSet::from_json(&read_json(path)?, path)?;
            let rebuilt = rebuild_recipes(&ts, path, &opts.image_base(path));
            out.extend(rebuilt);
            out.tasksets.push((path.clone(), ts));
        }
        Ok(out)
    }
}

#[derive(Default)]
struct StepAcc {
    id: Value,
    title: Option<String>,
    body: Option<String>,
    images: Option<Vec<String>>,
}

struct RecipeAcc {
    first_question: usize,
    split: Option<String>,
    mixed_split: bool,
    steps: BTreeMap<(u8, u64, String), StepAcc>,
}

/// Rebuild the recipes of a task set (see the module docs).
pub fn rebuild_recipes(ts: &TaskSet, path: &Path, image_base: &Path) -> Ingested {
    let mut order: Vec<String> = Vec::new();
    let mut recipes: HashMap<String, RecipeAcc> = HashMap::new();
    let mut conflicts: BTreeMap<String, usize> = BTreeMap::new();
    for (qi, q) in ts.questions.iter().enumerate() {
        let acc = recipes.entry(q.recipe_id.clone()).or_insert_with(|| {
            order.push(q.recipe_id.clone());
            RecipeAcc { first_question: qi, split: q.split.clone(), mixed_split: false, steps: BTreeMap::new() }
        });
        if acc.split != q.split {
            acc.mixed_split = true;
        }
        for c in &q.context {
            let s =
                acc.steps.entry(step_key(&c.id)).or_insert_with(|| StepAcc { id: c.id.clone(), ..Default::default() });
            if merge_step(s, c) {
                *conflicts.entry(q.recipe_id.clone()).or_insert(0) += 1;
            }
        }
    }
    let mut out = Ingested::default();
    for id in order {
        let acc = recipes.remove(&id).expect("every ordered id has an accumulator");
        let mut p = Procedure {
            id: id.clone(),
            source: Some("RecipeQA".into()),
            lang: Some("en".into()),
            ..Default::default()
        };
        if let (Some(split), false) = (&acc.split, acc.mixed_split) {
            p.extra.insert("split".into(), Value::String(split.clone()));
        }
        for s in acc.steps.into_values() {
            let mut step =
                Step { title: s.title, text: s.body, images: s.images.unwrap_or_default(), ..Default::default() };
            step.extra.insert("id".into(), s.id);
            p.steps.push(step);
        }
        out.push(
            p,
            Origin {
                file: path.to_path_buf(),
                record: format!("data[{}]", acc.first_question),
                image_base: image_base.to_path_buf(),
            },
        );
    }
    for (rid, n) in conflicts {
        out.notes.push(format!(
            "{}: recipe {rid:?}: {n} context step(s) differ between questions; the first question's content was kept",
            path.display()
        ));
    }
    out
}

/// Fill the step's missing parts from `c`; true when `c` disagrees with what the step already has.
fn merge_step(s: &mut StepAcc, c: &ContextStep) -> bool {
    let mut conflict = false;
    fn take<T: Clone + PartialEq>(slot: &mut Option<T>, new: &Option<T>, conflict: &mut bool) {
        match (slot.as_ref(), new) {
            (None, Some(v)) => *slot = Some(v.clone()),
            (Some(a), Some(b)) if a != b => *conflict = true,
            _ => {}
        }
    }
    take(&mut s.title, &c.title, &mut conflict);
    take(&mut s.body, &c.body, &mut conflict);
    take(&mut s.images, &c.images, &mut conflict);
    conflict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        serde_json::json!({"data": [
            {"qid": "1000-1-0-1-2-3", "recipe_id": "r1", "task": "textual_cloze", "split": "val",
             "context": [{"id": 2, "body": "B2", "images": ["r1_2_0.jpg"]}, {"id": 1, "body": "B1", "images": []}],
             "context_modality": ["body", "images"], "question": ["T1", "@placeholder"], "question_modality": ["title"],
             "question_text": "q", "choice_list": ["T2", "x"], "answer": 0},
            {"qid": "2000-1-0-1-2-3", "recipe_id": "r1", "task": "visual_cloze", "split": "val",
             "context": [{"id": 1, "body": "B1", "title": "T1"}, {"id": 2, "body": "B2 changed", "title": "T2"},
                         {"id": 10, "body": "B10", "title": "T10"}],
             "context_modality": ["body", "title"], "question": ["a.jpg", "@placeholder"],
             "question_modality": ["images"], "question_text": "q", "choice_list": ["b.jpg", "c.jpg"], "answer": 1},
            {"qid": "3000-2-0-1-2-3", "recipe_id": "r2", "task": "visual_coherence", "split": "val",
             "context": [{"id": 1, "body": "x", "title": "y"}], "context_modality": ["body", "title"],
             "question": ["a.jpg"], "question_modality": ["images"], "choice_list": ["a.jpg"], "answer": 0}
        ]})
    }

    #[test]
    fn rebuilds_union_of_steps_in_id_order() {
        let ts = TaskSet::from_json(&sample(), Path::new("q.json")).unwrap();
        let got = rebuild_recipes(&ts, Path::new("q.json"), Path::new("/imgs"));
        assert_eq!(got.procedures.len(), 2);
        let r1 = &got.procedures[0];
        assert_eq!(r1.id, "r1");
        let ids: Vec<&Value> = r1.steps.iter().map(|s| &s.extra["id"]).collect();
        assert_eq!(ids, [&serde_json::json!(1), &serde_json::json!(2), &serde_json::json!(10)]);
        assert_eq!(r1.steps[1].title.as_deref(), Some("T2"));
        assert_eq!(r1.steps[1].text.as_deref(), Some("B2"), "the first question's body wins");
        assert_eq!(r1.steps[1].images, ["r1_2_0.jpg"]);
        assert_eq!(r1.steps[2].images, Vec::<String>::new());
        assert_eq!(r1.extra["split"], "val");
        assert_eq!(got.origins[1].record, "data[2]");
        assert_eq!(got.notes.len(), 1, "{:?}", got.notes);
    }
}
