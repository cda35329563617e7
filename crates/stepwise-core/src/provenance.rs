//! The provenance stepwise's generators record under a question's `meta`, read in one place: the feature ids of
//! the question's items and choices, for ordering the order each choice shows, and the procedure steps shown and
//! answered. Questions from elsewhere (RecipeQA's own files) have none of it; every field is then absent, and a
//! malformed field reads as absent (readers fall back to what the question shows).

use serde_json::Value;

use crate::taskset::Question;

/// A question's recorded provenance ([`Question::provenance`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QuestionProvenance {
    /// `meta.question_items`: the feature id of each entry of `question` (`None` for the `@placeholder`).
    pub question_items: Option<Vec<Option<String>>>,
    /// `meta.choice_items`: the feature id of each choice (cloze, coherence).
    pub choice_items: Option<Vec<Option<String>>>,
    /// `meta.choice_orders`: for ordering, the positions in `question_items` each choice shows, in its order.
    pub choice_orders: Option<Vec<Vec<usize>>>,
    /// `meta.question_steps`: the procedure steps of the question items, when every entry is an integer.
    pub question_steps: Option<Vec<i64>>,
    /// `meta.answer_step`: the hidden (cloze) or replaced (coherence) step.
    pub answer_step: Option<i64>,
}

impl QuestionProvenance {
    /// Read the provenance under `meta` (all absent when there is none).
    pub fn of(q: &Question) -> QuestionProvenance {
        let Some(meta) = q.extra.get("meta") else {
            return QuestionProvenance::default();
        };
        let ids = |key: &str| -> Option<Vec<Option<String>>> {
            let v = meta.get(key)?.as_array()?;
            Some(v.iter().map(|x| x.as_str().map(str::to_string)).collect())
        };
        QuestionProvenance {
            question_items: ids("question_items"),
            choice_items: ids("choice_items"),
            choice_orders: meta.get("choice_orders").and_then(|o| serde_json::from_value(o.clone()).ok()),
            question_steps: meta
                .get("question_steps")
                .and_then(Value::as_array)
                .and_then(|s| s.iter().map(Value::as_i64).collect()),
            answer_step: meta.get("answer_step").and_then(Value::as_i64),
        }
    }

    /// The feature id of question entry `i`.
    pub fn question_item(&self, i: usize) -> Option<&str> {
        self.question_items.as_ref()?.get(i)?.as_deref()
    }

    /// The feature id of choice `i`.
    pub fn choice_item(&self, i: usize) -> Option<&str> {
        self.choice_items.as_ref()?.get(i)?.as_deref()
    }

    /// The feature id of the `k`-th item that ordering choice `choice` shows.
    pub fn ordering_item(&self, choice: usize, k: usize) -> Option<&str> {
        let j = *self.choice_orders.as_ref()?.get(choice)?.get(k)?;
        self.question_item(j)
    }
}

impl Question {
    /// The provenance stepwise recorded for this question (see [`QuestionProvenance`]).
    pub fn provenance(&self) -> QuestionProvenance {
        QuestionProvenance::of(self)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn with_meta(meta: Value) -> Question {
        Question { extra: BTreeMap::from([("meta".to_string(), meta)]), ..Default::default() }
    }

    #[test]
    fn reads_items_orders_and_steps() {
        let p = with_meta(json!({
            "question_items": ["image:a", null, "image:c"],
            "choice_items": ["image:x", "image:y"],
            "choice_orders": [[2, 0], [0, 2]],
            "question_steps": [1, 2, 3],
            "answer_step": 2,
        }))
        .provenance();
        assert_eq!(p.question_item(0), Some("image:a"));
        assert_eq!(p.question_item(1), None);
        assert_eq!(p.question_item(9), None);
        assert_eq!(p.choice_item(1), Some("image:y"));
        assert_eq!(p.ordering_item(0, 0), Some("image:c"));
        assert_eq!(p.ordering_item(1, 1), Some("image:c"));
        assert_eq!(p.ordering_item(2, 0), None);
        assert_eq!(p.question_steps, Some(vec![1, 2, 3]));
        assert_eq!(p.answer_step, Some(2));
    }

    #[test]
    fn absent_or_malformed_fields_read_as_absent() {
        assert_eq!(Question::default().provenance(), QuestionProvenance::default());
        let p = with_meta(json!({"question_items": "x", "choice_orders": [["a"]], "question_steps": [1, "2"]}))
            .provenance();
        assert_eq!(p, QuestionProvenance::default());
        // Present but empty is not absent: readers that fall back on absence keep the empty list.
        let p = with_meta(json!({"question_items": []})).provenance();
        assert_eq!(p.question_items, Some(vec![]));
    }
}
