//! The demo's stand-in for "a user's model": Hasty Student answers (RecipeQA §4.2, no context) for a task set,
//! written as a predictions file that `stepwise eval` then scores like any other. Item vectors come from the
//! feature stores through each question's provenance (`meta.question_items` / `meta.choice_items`), else from
//! the `image:` id of an image path.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use stepwise_core::TaskSet;
use stepwise_core::output::write_file_atomic;
use stepwise_core::taskset::{Choice, Question, Task};
use stepwise_features::store::FeatureStore;
use stepwise_models::hasty;

/// Write `{"qid", "answer"}` lines for every question of `taskset`; returns the number of predictions.
pub fn write_predictions(taskset: &Path, stores: &[&Path], out: &Path) -> anyhow::Result<usize> {
    let ts = TaskSet::load(taskset)?;
    let stores: Vec<FeatureStore> = stores
        .iter()
        .map(|p| FeatureStore::open(p).with_context(|| format!("opening feature store {}", p.display())))
        .collect::<anyhow::Result<_>>()?;
    let vector = |id: &str| -> anyhow::Result<&[f32]> {
        stores
            .iter()
            .find_map(|s| s.get(id))
            .with_context(|| format!("no vector for item `{id}` in the feature stores"))
    };
    let mut lines = Vec::with_capacity(ts.questions.len());
    for q in &ts.questions {
        let answer = answer(q, &vector).with_context(|| format!("{}: question {}", taskset.display(), q.qid))?;
        lines.push((q.qid.clone(), answer));
    }
    write_file_atomic(out, |w| {
        for (qid, a) in &lines {
            writeln!(w, "{}", serde_json::json!({"answer": a, "model": "hasty student", "qid": qid}))?;
        }
        Ok(())
    })?;
    Ok(lines.len())
}

/// The ids of a question's items and of its choices (one id per choice, a sequence of ids for ordering).
fn item_ids(q: &Question) -> (Vec<Option<String>>, Vec<Vec<String>>) {
    let prov = q.provenance();
    let image = |s: &str| format!("image:{s}");
    let question = prov.question_items.unwrap_or_else(|| {
        q.question.iter().map(|s| (s != stepwise_core::taskset::PLACEHOLDER).then(|| image(s))).collect()
    });
    let choices = match prov.choice_items {
        Some(ids) if ids.iter().all(Option::is_some) && q.choice_list.iter().all(|c| matches!(c, Choice::Item(_))) => {
            ids.into_iter().map(|i| vec![i.expect("checked: all present")]).collect()
        }
        _ => q.choice_list.iter().map(|c| c.items().into_iter().map(image).collect()).collect(),
    };
    (question, choices)
}

fn answer<'a>(q: &Question, vector: &dyn Fn(&str) -> anyhow::Result<&'a [f32]>) -> anyhow::Result<usize> {
    let (question, choices) = item_ids(q);
    let single = |c: &Vec<String>| -> anyhow::Result<&'a [f32]> {
        match c.as_slice() {
            [id] => vector(id),
            _ => bail!("expected one item per choice"),
        }
    };
    Ok(match q.task_kind() {
        Some(Task::TextualCloze | Task::VisualCloze) => {
            let items: Vec<&[f32]> = question.iter().flatten().map(|id| vector(id)).collect::<anyhow::Result<_>>()?;
            let cs: Vec<&[f32]> = choices.iter().map(single).collect::<anyhow::Result<_>>()?;
            hasty::cloze(&items, &cs)
        }
        Some(Task::VisualCoherence) => {
            let cs: Vec<&[f32]> = choices.iter().map(single).collect::<anyhow::Result<_>>()?;
            hasty::coherence(&cs)
        }
        Some(Task::VisualOrdering) => {
            let seqs: Vec<Vec<&[f32]>> = choices
                .iter()
                .map(|c| c.iter().map(|id| vector(id)).collect::<anyhow::Result<_>>())
                .collect::<anyhow::Result<_>>()?;
            hasty::ordering(&seqs)
        }
        None => bail!("task `{}` is not one of RecipeQA's", q.task),
    })
}
