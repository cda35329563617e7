//! From a question to model inputs (Meta-RecipeQA appendix C): the context as a sequence of steps, each a
//! matrix of rows (tokens of the step's text, or the step's images), and one query sequence per candidate.
//!
//! - visual cloze: the candidate image replaces the placeholder in the question's image sequence;
//! - visual coherence: N_A query sequences, each the question's images with one element removed (the answer is
//!   the removed element that leaves a coherent sequence);
//! - visual ordering: each candidate order is a query sequence of images;
//! - textual cloze: the candidate title replaces the placeholder in the question's title sequence; the context is
//!   the steps' images when an image store is given, else their bodies (text only, as for RecipeQA without
//!   images).
//!
//! Beside the query sequences, each candidate's own item row (the choice of a cloze question, the image a
//! coherence candidate leaves out) for a scorer that compares with it ([`super::model::CandidateEmbedding`]);
//! an order has none.
//!
//! Visual tasks read the context steps' texts: `text:{recipe}#{step}` (title and body, as `stepwise embed`
//! stores them) when the context step id is a step index, else `str:` of the shown text. Images are
//! `image:{path}` (the question's provenance names each item's feature id; external files fall back to the
//! shown path). Titles of textual cloze are the provenance's `title:` ids, else `str:` of the title; bodies are
//! `str:` ids (a body alone is never a store item of its own, so the CLI encodes them on the fly).

use serde::Serialize;
use stepwise_core::taskset::PLACEHOLDER;
use stepwise_core::{Choice, ItemModality, Question, Task};
use stepwise_features::Vectors;
use stepwise_features::items::{image_id, str_id, text_id};

use crate::item_features::ItemMatrix;

/// Token-level vectors of text items (rows of one item: its tokens).
pub trait TokenRows: Sync {
    fn dim(&self) -> usize;
    /// Row-major `tokens × dim`, or `None` when the item has no tokens.
    fn rows(&self, id: &str) -> Option<Vec<f32>>;
    /// The vocabulary id of each token row (for masked-language-model pretraining); `None` when unknown.
    fn ids(&self, _id: &str) -> Option<Vec<i64>> {
        None
    }
    /// The number of vocabulary ids (`None` when the store has no ids).
    fn vocab_size(&self) -> Option<usize> {
        None
    }
}

impl TokenRows for stepwise_features::TokenVectors {
    fn dim(&self) -> usize {
        self.dim
    }

    fn rows(&self, id: &str) -> Option<Vec<f32>> {
        self.get(id).filter(|r| !r.is_empty())
    }

    fn ids(&self, id: &str) -> Option<Vec<i64>> {
        self.get_ids(id).map(<[i64]>::to_vec)
    }

    fn vocab_size(&self) -> Option<usize> {
        stepwise_features::TokenVectors::vocab_size(self)
    }
}

/// Where vectors come from.
#[derive(Clone, Copy, Default)]
pub struct FeatureSources<'a> {
    /// Text vectors (`text:`, `title:`, `str:` ids).
    pub text: Option<&'a Vectors>,
    /// Token-level text vectors (the same ids); used instead of `text` for context steps when present.
    pub tokens: Option<&'a dyn TokenRows>,
    /// Image vectors (`image:` ids).
    pub image: Option<&'a Vectors>,
    /// Strings encoded for this run (`str:` ids), looked up after `text`.
    pub strings: Option<&'a Vectors>,
}

impl FeatureSources<'_> {
    fn text_row(&self, id: &str) -> Option<&[f32]> {
        self.text.and_then(|v| v.get(id)).or_else(|| self.strings.and_then(|v| v.get(id)))
    }

    /// The rows of a text item: its tokens when token-level features are given and `tokens` is asked for,
    /// else its one vector.
    fn text_rows(&self, id: &str, tokens: bool) -> Option<ItemMatrix> {
        if tokens && let Some(t) = self.tokens {
            let data = t.rows(id)?;
            return Some(ItemMatrix { dim: t.dim(), data });
        }
        self.text_row(id).map(|r| ItemMatrix { dim: r.len(), data: r.to_vec() })
    }

    fn image_row(&self, id: &str) -> Option<&[f32]> {
        self.image.and_then(|v| v.get(id))
    }

    pub fn text_dim(&self, tokens: bool) -> Option<usize> {
        if tokens && let Some(t) = self.tokens {
            return Some(t.dim());
        }
        self.text.map(|v| v.dim).or(self.strings.map(|v| v.dim))
    }

    pub fn image_dim(&self) -> Option<usize> {
        self.image.map(|v| v.dim)
    }
}

/// What a context step is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextKind {
    /// The step's text: one vector, or its tokens.
    Text,
    /// The step's images.
    Images,
}

/// What the query sequences are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueryKind {
    Images,
    Titles,
}

/// How questions of a task become inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct InputSpec {
    pub task: Task,
    pub context: ContextKind,
    pub query: QueryKind,
    /// Context texts as token rows (the hierarchical encoder's first level), else one vector per step.
    pub tokens: bool,
    /// At most this many context steps (the last ones are dropped).
    pub max_context_steps: usize,
    /// At most this many rows per context step.
    pub max_rows_per_step: usize,
}

impl InputSpec {
    /// The spec for `task` given which stores exist: textual cloze reads images as context when an image store
    /// is given.
    pub fn for_task(task: Task, sources: &FeatureSources<'_>, tokens: bool) -> InputSpec {
        let (context, query) = match task {
            Task::TextualCloze if sources.image.is_some() => (ContextKind::Images, QueryKind::Titles),
            Task::TextualCloze => (ContextKind::Text, QueryKind::Titles),
            Task::VisualCloze | Task::VisualCoherence | Task::VisualOrdering => (ContextKind::Text, QueryKind::Images),
        };
        let tokens = tokens && context == ContextKind::Text && sources.tokens.is_some();
        InputSpec { task, context, query, tokens, max_context_steps: 25, max_rows_per_step: 32 }
    }

    /// Dimensions (context rows, query items) under `sources`, or why they are unavailable.
    pub fn dims(&self, sources: &FeatureSources<'_>) -> Result<(usize, usize), String> {
        let text = |tokens: bool| {
            sources
                .text_dim(tokens)
                .ok_or_else(|| "no text features given (a text store, or --text-encoder)".to_string())
        };
        let image = || sources.image_dim().ok_or_else(|| "no image features given".to_string());
        let c = match self.context {
            ContextKind::Text => text(self.tokens)?,
            ContextKind::Images => image()?,
        };
        let q = match self.query {
            QueryKind::Images => image()?,
            QueryKind::Titles => text(false)?,
        };
        Ok((c, q))
    }
}

/// One question as model input.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionInput {
    pub qid: String,
    /// The question's procedure (bootstrap unit of the evaluation).
    pub recipe_id: String,
    /// Per context step: its rows (`rows × context dim`).
    pub context: Vec<ItemMatrix>,
    /// Per candidate: its query sequence (`positions × query dim`).
    pub candidates: Vec<ItemMatrix>,
    /// Each candidate's own item, one row per candidate (cloze: the choice; coherence: the image the candidate
    /// leaves out); `None` where candidates are whole sequences (ordering).
    pub candidate_items: Option<ItemMatrix>,
    pub answer: usize,
}

/// Build the input of `q`; the error names the question and the missing item.
pub fn question_input(q: &Question, spec: &InputSpec, sources: &FeatureSources<'_>) -> Result<QuestionInput, String> {
    let task = q.task_kind().ok_or_else(|| format!("question {}: unknown task {:?}", q.qid, q.task))?;
    if task != spec.task {
        return Err(format!("question {}: task {task}, the model is for {}", q.qid, spec.task));
    }
    let prov = q.provenance();
    let missing = |what: &str| format!("question {}: no vector for {what}", q.qid);

    // Context.
    let mut context = Vec::new();
    for (k, step) in q.context.iter().take(spec.max_context_steps).enumerate() {
        let rows = match spec.context {
            ContextKind::Text => {
                let id = match step.id.as_u64() {
                    Some(i) if spec.task.item_modality() != ItemModality::Text => text_id(&q.recipe_id, i as usize),
                    // Textual cloze must not read the step titles (they are the answers): bodies only.
                    _ if spec.task.item_modality() == ItemModality::Text => str_id(step.body.as_deref().unwrap_or("")),
                    _ => str_id(&shown_text(step.title.as_deref(), step.body.as_deref())),
                };
                let mut m =
                    sources.text_rows(&id, spec.tokens).ok_or_else(|| missing(&format!("context step {k} ({id})")))?;
                truncate_rows(&mut m, spec.max_rows_per_step);
                m
            }
            ContextKind::Images => {
                let images = step.images.as_deref().unwrap_or(&[]);
                let mut data = Vec::new();
                let mut dim = sources.image_dim().unwrap_or(0);
                for path in images {
                    if let Some(r) = sources.image_row(&image_id(path)) {
                        dim = r.len();
                        data.extend_from_slice(r);
                    }
                }
                let mut m = ItemMatrix { dim, data };
                truncate_rows(&mut m, spec.max_rows_per_step);
                m
            }
        };
        // A step without any vector (no images) is left out rather than failing the question.
        if !rows.is_empty() {
            context.push(rows);
        }
    }
    if context.is_empty() {
        return Err(format!("question {}: no context step has a vector", q.qid));
    }

    let item = |c: &Choice| -> Result<String, String> {
        match c {
            Choice::Item(s) => Ok(s.clone()),
            Choice::Sequence(_) => Err(format!("question {}: a sequence choice in a {task} question", q.qid)),
        }
    };
    let query_row = |hint: Option<&str>, shown: &str| -> Result<Vec<f32>, String> {
        match spec.query {
            QueryKind::Images => {
                let id = hint.map_or_else(|| image_id(shown), str::to_string);
                sources.image_row(&id).map(<[f32]>::to_vec).ok_or_else(|| missing(&id))
            }
            QueryKind::Titles => {
                if let Some(r) = hint.and_then(|h| sources.text_row(h)) {
                    return Ok(r.to_vec());
                }
                let id = str_id(shown);
                sources.text_row(&id).map(<[f32]>::to_vec).ok_or_else(|| missing(&format!("{shown:?} ({id})")))
            }
        }
    };
    let sequence = |rows: Vec<Vec<f32>>| -> ItemMatrix {
        let dim = rows.first().map_or(0, Vec::len);
        ItemMatrix { dim, data: rows.concat() }
    };

    let (candidates, candidate_items): (Vec<ItemMatrix>, Option<ItemMatrix>) = match task {
        Task::TextualCloze | Task::VisualCloze => {
            let slot = q.placeholder_index().ok_or_else(|| format!("question {}: no {PLACEHOLDER}", q.qid))?;
            let mut shown: Vec<Option<Vec<f32>>> = Vec::with_capacity(q.question.len());
            for (i, s) in q.question.iter().enumerate() {
                shown.push(if i == slot { None } else { Some(query_row(prov.question_item(i), s)?) });
            }
            let mut out = Vec::new();
            let mut own = Vec::new();
            for (ci, c) in q.choice_list.iter().enumerate() {
                let cand = query_row(prov.choice_item(ci), &item(c)?)?;
                let rows: Vec<Vec<f32>> = shown.iter().map(|r| r.clone().unwrap_or_else(|| cand.clone())).collect();
                out.push(sequence(rows));
                own.push(cand);
            }
            (out, Some(sequence(own)))
        }
        Task::VisualCoherence => {
            let items: Vec<Vec<f32>> = q
                .choice_list
                .iter()
                .enumerate()
                .map(|(i, c)| query_row(prov.choice_item(i), &item(c)?))
                .collect::<Result<_, _>>()?;
            let out = (0..items.len())
                .map(|drop| {
                    sequence(items.iter().enumerate().filter(|(j, _)| *j != drop).map(|(_, r)| r.clone()).collect())
                })
                .collect();
            (out, Some(sequence(items)))
        }
        Task::VisualOrdering => {
            let mut out = Vec::new();
            for (ci, c) in q.choice_list.iter().enumerate() {
                let Choice::Sequence(seq) = c else {
                    return Err(format!("question {}: visual ordering choices must be sequences", q.qid));
                };
                let mut rows = Vec::new();
                for (k, s) in seq.iter().enumerate() {
                    rows.push(query_row(prov.ordering_item(ci, k), s)?);
                }
                out.push(sequence(rows));
            }
            (out, None)
        }
    };
    if candidates.len() < 2 {
        return Err(format!("question {}: fewer than two choices", q.qid));
    }
    if q.answer >= candidates.len() {
        return Err(format!("question {}: answer {} out of range", q.qid, q.answer));
    }
    Ok(QuestionInput {
        qid: q.qid.clone(),
        recipe_id: q.recipe_id.clone(),
        context,
        candidates,
        candidate_items,
        answer: q.answer,
    })
}

/// The texts of `questions` that are looked up by `str:` id and may need encoding on the fly (bodies of textual
/// cloze contexts, titles, the shown text of non-indexed context steps).
pub fn strings_needed<'q>(questions: impl Iterator<Item = &'q Question>) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    for q in questions {
        let textual = q.task_kind().map(Task::item_modality) == Some(ItemModality::Text);
        for step in &q.context {
            if textual {
                out.insert(step.body.clone().unwrap_or_default());
            } else if step.id.as_u64().is_none() {
                out.insert(shown_text(step.title.as_deref(), step.body.as_deref()));
            }
        }
        if textual {
            out.extend(q.question.iter().filter(|s| *s != PLACEHOLDER).cloned());
            for c in &q.choice_list {
                if let Choice::Item(s) = c {
                    out.insert(s.clone());
                }
            }
        }
    }
    out.into_iter().collect()
}

/// Title and body as one text (the layout of [`stepwise_core::Step::full_text`]).
fn shown_text(title: Option<&str>, body: Option<&str>) -> String {
    match (title, body) {
        (Some(t), Some(b)) => format!("{t}\n{b}"),
        (Some(t), None) => t.to_string(),
        (None, Some(b)) => b.to_string(),
        (None, None) => String::new(),
    }
}

fn truncate_rows(m: &mut ItemMatrix, max: usize) {
    if max > 0 && m.len() > max {
        m.data.truncate(max * m.dim);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stepwise_core::taskset::ContextStep;

    fn images() -> Vectors {
        Vectors::new(
            1,
            ["a", "b", "c", "d", "x", "y"].iter().map(|s| image_id(s)).collect(),
            vec![1.0, 2.0, 3.0, 4.0, 10.0, 20.0],
        )
    }

    fn texts() -> Vectors {
        Vectors::new(1, vec![text_id("p", 1), text_id("p", 2)], vec![0.5, 0.25])
    }

    fn context() -> Vec<ContextStep> {
        vec![
            ContextStep { id: json!(1), title: Some("T1".into()), body: Some("B1".into()), ..Default::default() },
            ContextStep { id: json!(2), title: Some("T2".into()), body: Some("B2".into()), ..Default::default() },
        ]
    }

    fn rows(m: &ItemMatrix) -> Vec<f32> {
        m.data.clone()
    }

    #[test]
    fn visual_cloze_puts_each_candidate_in_the_placeholder() {
        let q = Question {
            qid: "q".into(),
            recipe_id: "p".into(),
            task: "visual_cloze".into(),
            context: context(),
            question: vec!["a".into(), PLACEHOLDER.into(), "c".into()],
            choice_list: vec![Choice::Item("x".into()), Choice::Item("b".into())],
            answer: 1,
            ..Default::default()
        };
        let (im, tx) = (images(), texts());
        let src = FeatureSources { text: Some(&tx), image: Some(&im), ..Default::default() };
        let spec = InputSpec::for_task(Task::VisualCloze, &src, false);
        let inp = question_input(&q, &spec, &src).unwrap();
        assert_eq!(inp.context.iter().map(rows).collect::<Vec<_>>(), vec![vec![0.5], vec![0.25]]);
        assert_eq!(rows(&inp.candidates[0]), vec![1.0, 10.0, 3.0]);
        assert_eq!(rows(&inp.candidates[1]), vec![1.0, 2.0, 3.0]);
        // Each candidate's own item: the choice that fills the placeholder.
        assert_eq!(inp.candidate_items.as_ref().map(rows), Some(vec![10.0, 2.0]));
        assert_eq!(inp.answer, 1);
    }

    #[test]
    fn coherence_drops_one_element_per_candidate_and_ordering_follows_the_orders() {
        let (im, tx) = (images(), texts());
        let src = FeatureSources { text: Some(&tx), image: Some(&im), ..Default::default() };
        let q = Question {
            qid: "c".into(),
            recipe_id: "p".into(),
            task: "visual_coherence".into(),
            context: context(),
            choice_list: ["a", "y", "c"].iter().map(|s| Choice::Item(s.to_string())).collect(),
            answer: 1,
            ..Default::default()
        };
        let inp = question_input(&q, &InputSpec::for_task(Task::VisualCoherence, &src, false), &src).unwrap();
        let got: Vec<Vec<f32>> = inp.candidates.iter().map(rows).collect();
        assert_eq!(got, vec![vec![20.0, 3.0], vec![1.0, 3.0], vec![1.0, 20.0]]);
        // Candidate i's own item is the image it leaves out, item i.
        assert_eq!(inp.candidate_items.as_ref().map(rows), Some(vec![1.0, 20.0, 3.0]));

        let q = Question {
            qid: "o".into(),
            recipe_id: "p".into(),
            task: "visual_ordering".into(),
            context: context(),
            choice_list: vec![
                Choice::Sequence(vec!["b".into(), "a".into()]),
                Choice::Sequence(vec!["a".into(), "b".into()]),
            ],
            answer: 1,
            ..Default::default()
        };
        let inp = question_input(&q, &InputSpec::for_task(Task::VisualOrdering, &src, false), &src).unwrap();
        assert_eq!(inp.candidates.iter().map(rows).collect::<Vec<_>>(), vec![vec![2.0, 1.0], vec![1.0, 2.0]]);
        // An order is a whole sequence: no own item.
        assert_eq!(inp.candidate_items, None);
    }

    #[test]
    fn textual_cloze_reads_bodies_not_titles_and_names_missing_items() {
        let strings = Vectors::new(
            1,
            vec![str_id("B1"), str_id("B2"), str_id("T1"), str_id("T3"), str_id("T2")],
            vec![7.0, 8.0, 1.0, 3.0, 2.0],
        );
        let src = FeatureSources { strings: Some(&strings), ..Default::default() };
        let mut q = Question {
            qid: "t".into(),
            recipe_id: "p".into(),
            task: "textual_cloze".into(),
            context: context(),
            question: vec!["T1".into(), PLACEHOLDER.into()],
            choice_list: vec![Choice::Item("T2".into()), Choice::Item("T3".into())],
            answer: 0,
            ..Default::default()
        };
        let spec = InputSpec::for_task(Task::TextualCloze, &src, false);
        assert_eq!(spec.context, ContextKind::Text);
        let inp = question_input(&q, &spec, &src).unwrap();
        assert_eq!(inp.context.iter().map(rows).collect::<Vec<_>>(), vec![vec![7.0], vec![8.0]]);
        assert_eq!(rows(&inp.candidates[1]), vec![1.0, 3.0]);
        assert_eq!(inp.candidate_items.as_ref().map(rows), Some(vec![2.0, 3.0]));
        let needed = strings_needed(std::iter::once(&q));
        assert_eq!(needed, vec!["B1", "B2", "T1", "T2", "T3"]);
        q.choice_list[1] = Choice::Item("Unknown".into());
        let e = question_input(&q, &spec, &src).unwrap_err();
        assert!(e.contains("question t") && e.contains("Unknown"), "{e}");
    }
}
