//! The built-in input formats (see [`crate::format`] for the trait and registry).
//!
//! - [`procedure_jsonl`]: stepwise's procedure JSONL (the interchange format of ../shared/data/procedures)
//! - [`recipeqa`]: RecipeQA's official question JSON; keeps the questions and rebuilds the recipes
//! - [`recipeqa_recipes`]: RecipeQA recipes as a JSON list of `{recipe_id, steps: [{id, title, body, images}]}`
//! - [`r2vq_conllu`]: R2VQ recipes in the SemEval-2022 Task 9 CoNLL-U-like layout (annotation, questions)
//! - [`r2vq_2021`]: the 2021 R2VQ release (recipe2video's `r2vq.jsonl`: text, offset annotation, questions)
//! - [`r2vq_inline`]: R2VQ train recipes with the annotation written into the step text (HIT-QMUL's derived files; ingest format `r2vq-inline`)
//! - [`r2vq_json`]: R2VQ question lists in JSON (`{q_id, question, doc_id}`)

pub mod procedure_jsonl;
pub mod r2vq_2021;
pub mod r2vq_conllu;
pub mod r2vq_inline;
pub mod r2vq_json;
pub mod recipeqa;
pub mod recipeqa_recipes;

use serde_json::Value;

/// `s` on one line: runs of whitespace (newlines included) as one space, none at the ends — what a line of the
/// SemEval layout can hold.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Sort key of a RecipeQA step id: numbers in numeric order, then anything else in text order.
pub(crate) fn step_key(id: &Value) -> (u8, u64, String) {
    match id {
        Value::Number(n) if n.as_u64().is_some() => (0, n.as_u64().unwrap_or_default(), String::new()),
        Value::String(s) => match s.parse::<u64>() {
            Ok(n) => (0, n, String::new()),
            Err(_) => (1, 0, s.clone()),
        },
        other => (2, 0, other.to_string()),
    }
}
