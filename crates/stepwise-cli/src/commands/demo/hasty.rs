//! The demo's stand-in for "a user's model": Hasty Student answers (`stepwise_models::hasty`, the audit's own) for
//! a task set, written as a predictions file that `stepwise eval` then scores like any other. Item vectors come
//! from the feature stores through each question's provenance, else from the item's own id (`image:` and the
//! image path, `str:` and the text's hash).

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use stepwise_core::TaskSet;
use stepwise_core::output::write_file_atomic;
use stepwise_features::store::FeatureStore;
use stepwise_models::hasty;
use stepwise_models::question_vectors::StoreResolver;

/// Write `{"qid", "answer"}` lines for every question of `taskset`; returns the number of predictions.
pub fn write_predictions(taskset: &Path, stores: &[&Path], out: &Path) -> anyhow::Result<usize> {
    let ts = TaskSet::load(taskset)?;
    let stores: Vec<FeatureStore> = stores
        .iter()
        .map(|p| FeatureStore::open(p).with_context(|| format!("opening feature store {}", p.display())))
        .collect::<anyhow::Result<_>>()?;
    let resolver = StoreResolver { stores: &stores };
    let mut lines = Vec::with_capacity(ts.questions.len());
    for q in &ts.questions {
        let task = q.task_kind().with_context(|| {
            format!("{}: question {}: task `{}` is not one of RecipeQA's", taskset.display(), q.qid, q.task)
        })?;
        // The error names the item and the question.
        let answer = hasty::choose(q, task, &resolver)
            .map_err(anyhow::Error::msg)
            .with_context(|| taskset.display().to_string())?;
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
