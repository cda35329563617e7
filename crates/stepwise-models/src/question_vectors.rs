//! The vectors of a multiple-choice question's items, as the Hasty Student, the audit's probes and the model
//! study read them: each item found from the question's provenance (stepwise task sets name each item's feature
//! id), by image file name, or by the text itself (`str:` ids of a feature store, or strings encoded for the
//! audit).

use std::collections::HashMap;

use stepwise_core::taskset::PLACEHOLDER;
use stepwise_core::{Choice, Question, Task};
use stepwise_features::Vectors;
use stepwise_features::items::str_id;
use stepwise_features::store::FeatureStore;

pub use stepwise_core::ItemModality;

/// Looks up item vectors; `None` when the item has no vector.
pub trait ItemResolver: Sync {
    /// `hint`: the feature id recorded in the question's provenance, if any; `shown`: the string the question
    /// shows (an image file name or a text).
    fn resolve(&self, hint: Option<&str>, shown: &str, modality: ItemModality) -> Option<&[f32]>;
}

/// Resolution through feature stores loaded in memory.
pub struct FeatureResolver<'a> {
    /// Image vectors (`image:` ids).
    pub images: Option<&'a Vectors>,
    /// Text vectors (`title:`, `text:`, `str:` ids).
    pub texts: Option<&'a Vectors>,
    /// Strings encoded for this audit (`str:` ids), looked up after `texts`.
    pub encoded: Option<&'a Vectors>,
    /// Image file name → row in `images`, for names that are unique (external RecipeQA files name images by
    /// file name only).
    by_basename: HashMap<String, Option<usize>>,
}

impl<'a> FeatureResolver<'a> {
    pub fn new(images: Option<&'a Vectors>, texts: Option<&'a Vectors>, encoded: Option<&'a Vectors>) -> Self {
        let mut by_basename: HashMap<String, Option<usize>> = HashMap::new();
        if let Some(v) = images {
            for (i, id) in v.ids.iter().enumerate() {
                if let Some(path) = id.strip_prefix("image:") {
                    let base = path.rsplit('/').next().unwrap_or(path).to_string();
                    by_basename.entry(base).and_modify(|e| *e = None).or_insert(Some(i));
                }
            }
        }
        FeatureResolver { images, texts, encoded, by_basename }
    }
}

impl ItemResolver for FeatureResolver<'_> {
    fn resolve(&self, hint: Option<&str>, shown: &str, modality: ItemModality) -> Option<&[f32]> {
        match modality {
            ItemModality::Image => {
                let v = self.images?;
                if let Some(r) = hint.and_then(|h| v.get(h)) {
                    return Some(r);
                }
                if let Some(r) = v.get(&format!("image:{shown}")) {
                    return Some(r);
                }
                let base = shown.rsplit('/').next().unwrap_or(shown);
                self.by_basename.get(base).copied().flatten().map(|i| v.row(i))
            }
            ItemModality::Text => {
                if let (Some(h), Some(v)) = (hint, self.texts)
                    && let Some(r) = v.get(h)
                {
                    return Some(r);
                }
                let id = str_id(shown);
                self.texts.and_then(|v| v.get(&id)).or_else(|| self.encoded.and_then(|v| v.get(&id)))
            }
        }
    }
}

/// Resolution through opened (memory-mapped) feature stores, the first store holding an id winning: the
/// provenance's feature id when the question records one (not retried under another id when no store holds it),
/// else the item's own id (`image:<path>`, or the `str:` id of a text).
pub struct StoreResolver<'a> {
    pub stores: &'a [FeatureStore],
}

impl ItemResolver for StoreResolver<'_> {
    fn resolve(&self, hint: Option<&str>, shown: &str, modality: ItemModality) -> Option<&[f32]> {
        let get = |id: &str| self.stores.iter().find_map(|s| s.get(id));
        match (hint, modality) {
            (Some(h), _) => get(h),
            (None, ItemModality::Image) => get(&format!("image:{shown}")),
            (None, ItemModality::Text) => get(&str_id(shown)),
        }
    }
}

/// The vectors of one question's items.
pub enum QuestionVectors<'r> {
    Cloze { question: Vec<&'r [f32]>, choices: Vec<&'r [f32]> },
    Coherence { items: Vec<&'r [f32]> },
    Ordering { choices: Vec<Vec<&'r [f32]>> },
}

/// Resolve every item of `q`; the error names the first item without a vector.
pub fn question_vectors<'r>(q: &Question, task: Task, r: &'r dyn ItemResolver) -> Result<QuestionVectors<'r>, String> {
    let prov = q.provenance();
    let modality = task.item_modality();
    let get = |hint: Option<&str>, shown: &str| -> Result<&'r [f32], String> {
        r.resolve(hint, shown, modality).ok_or_else(|| {
            let what = hint.unwrap_or(shown);
            format!("no vector for {what:?} (question {})", q.qid)
        })
    };
    let item = |c: &Choice| -> Result<String, String> {
        match c {
            Choice::Item(s) => Ok(s.clone()),
            Choice::Sequence(_) => Err(format!("question {}: a sequence choice in a {task} question", q.qid)),
        }
    };
    match task {
        Task::TextualCloze | Task::VisualCloze => {
            let mut question = Vec::new();
            for (i, s) in q.question.iter().enumerate() {
                if s != PLACEHOLDER {
                    question.push(get(prov.question_item(i), s)?);
                }
            }
            let choices = q
                .choice_list
                .iter()
                .enumerate()
                .map(|(i, c)| get(prov.choice_item(i), &item(c)?))
                .collect::<Result<_, _>>()?;
            Ok(QuestionVectors::Cloze { question, choices })
        }
        Task::VisualCoherence => {
            let items = q
                .choice_list
                .iter()
                .enumerate()
                .map(|(i, c)| get(prov.choice_item(i), &item(c)?))
                .collect::<Result<_, _>>()?;
            Ok(QuestionVectors::Coherence { items })
        }
        Task::VisualOrdering => {
            let mut choices = Vec::new();
            for (ci, c) in q.choice_list.iter().enumerate() {
                let Choice::Sequence(seq) = c else {
                    return Err(format!("question {}: visual ordering choices must be sequences", q.qid));
                };
                let mut vs = Vec::new();
                for (k, s) in seq.iter().enumerate() {
                    vs.push(get(prov.ordering_item(ci, k), s)?);
                }
                choices.push(vs);
            }
            Ok(QuestionVectors::Ordering { choices })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_resolve_by_hint_path_or_unique_basename() {
        let v = Vectors::new(
            1,
            vec!["image:a/x.jpg".into(), "image:b/y.jpg".into(), "image:c/y.jpg".into()],
            vec![1.0, 2.0, 3.0],
        );
        let r = FeatureResolver::new(Some(&v), None, None);
        assert_eq!(r.resolve(Some("image:b/y.jpg"), "whatever", ItemModality::Image), Some(&[2.0][..]));
        assert_eq!(r.resolve(None, "a/x.jpg", ItemModality::Image), Some(&[1.0][..]));
        assert_eq!(r.resolve(None, "x.jpg", ItemModality::Image), Some(&[1.0][..]));
        // Ambiguous basename: no guess.
        assert_eq!(r.resolve(None, "y.jpg", ItemModality::Image), None);
    }

    #[test]
    fn texts_resolve_by_hint_or_string_hash() {
        let t = Vectors::new(1, vec!["title:p#1".into()], vec![5.0]);
        let e = Vectors::new(1, vec![str_id("Mix")], vec![7.0]);
        let r = FeatureResolver::new(None, Some(&t), Some(&e));
        assert_eq!(r.resolve(Some("title:p#1"), "Mix", ItemModality::Text), Some(&[5.0][..]));
        assert_eq!(r.resolve(None, "Mix", ItemModality::Text), Some(&[7.0][..]));
        assert_eq!(r.resolve(None, "Bake", ItemModality::Text), None);
    }
}
