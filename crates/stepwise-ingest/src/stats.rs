//! Corpus statistics, the tables of the papers (RecipeQA table 2, Meta-RecipeQA's dataset table): procedures,
//! steps, images; per-step tokens and sentences (mean, std, min, max); steps per procedure; type–token ratio;
//! in-vocabulary rate; and for task sets, questions per task and the balance of answer positions.
//!
//! Definitions: tokens come from [`crate::text::tokenize`] (CJK characters count one each); "tokens per step" and
//! "sentences per step" are over step *texts*, titles are counted separately; types are distinct lowercase tokens
//! of the step texts; the in-vocabulary rate is over step titles and texts (as in the cleaning report); standard
//! deviations are population deviations (numpy's default).

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;
use serde::Serialize;
use stepwise_core::{Procedure, TaskSet};

use crate::clean::report::VocabRateReport;
use crate::counts::FastMap;
use crate::text::tokenize::{count_sentences, for_each_token, lowercase};
use crate::vocab::{VocabCounter, Vocabulary, ratio};

/// How to split the statistics into groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    /// The procedure's `split` field (RecipeQA recipes carry their questions' split); questions by their `split`.
    Split,
    /// The procedure's `category`; questions by their recipe's category.
    Category,
}

/// The group of procedures without the grouping field.
pub const NO_GROUP: &str = "(none)";

impl GroupBy {
    pub fn key(self, p: &Procedure) -> String {
        match self {
            GroupBy::Split => p.extra.get("split").and_then(|v| v.as_str()).unwrap_or(NO_GROUP).to_string(),
            GroupBy::Category => p.category.clone().unwrap_or_else(|| NO_GROUP.to_string()),
        }
    }
}

/// Mean, standard deviation (population), min and max of a count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    pub n: u64,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    n: u64,
    sum: f64,
    sumsq: f64,
    min: f64,
    max: f64,
}

impl Acc {
    fn add(&mut self, x: f64) {
        if self.n == 0 || x < self.min {
            self.min = x;
        }
        if self.n == 0 || x > self.max {
            self.max = x;
        }
        self.n += 1;
        self.sum += x;
        self.sumsq += x * x;
    }

    fn merge(&mut self, o: &Acc) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.sumsq += o.sumsq;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    fn summary(&self) -> Summary {
        if self.n == 0 {
            return Summary::default();
        }
        let n = self.n as f64;
        let mean = self.sum / n;
        let var = (self.sumsq / n - mean * mean).max(0.0);
        Summary { n: self.n, mean, std: var.sqrt(), min: self.min, max: self.max }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorpusStats {
    pub procedures: u64,
    pub steps: u64,
    pub steps_with_text: u64,
    pub steps_with_title: u64,
    pub steps_with_images: u64,
    /// Image references of steps, with repeats.
    pub step_images: u64,
    /// Distinct image paths of steps and galleries.
    pub unique_images: u64,
    pub gallery_images: u64,
    pub steps_per_procedure: Summary,
    /// Over steps with text.
    pub tokens_per_step: Summary,
    /// Over steps with a title.
    pub title_tokens_per_step: Summary,
    /// Over steps with text.
    pub sentences_per_step: Summary,
    pub images_per_step: Summary,
    pub tokens_per_procedure: Summary,
    /// Tokens of step texts.
    pub tokens: u64,
    /// Distinct lowercase tokens of step texts.
    pub types: u64,
    pub type_token_ratio: f64,
    pub in_vocab: Option<VocabRateReport>,
}

#[derive(Default)]
struct CorpusAcc {
    procedures: u64,
    steps: u64,
    steps_with_text: u64,
    steps_with_title: u64,
    steps_with_images: u64,
    step_images: u64,
    gallery_images: u64,
    steps_per_procedure: Acc,
    tokens_per_step: Acc,
    title_tokens_per_step: Acc,
    sentences_per_step: Acc,
    images_per_step: Acc,
    tokens_per_procedure: Acc,
    tokens: u64,
    types: FastMap<String, ()>,
    images: BTreeSet<String>,
    vocab: VocabCounter,
    buf: String,
}

impl CorpusAcc {
    fn add(&mut self, p: &Procedure, vocab: Option<&Vocabulary>) {
        self.procedures += 1;
        self.steps += p.steps.len() as u64;
        self.steps_per_procedure.add(p.steps.len() as f64);
        let mut proc_tokens = 0u64;
        for s in &p.steps {
            if let Some(t) = &s.text {
                self.steps_with_text += 1;
                let mut n = 0u64;
                let (types, buf) = (&mut self.types, &mut self.buf);
                for_each_token(t, |tok| {
                    n += 1;
                    let w = lowercase(tok.text, buf);
                    if !types.contains_key(w) {
                        types.insert(w.to_string(), ());
                    }
                });
                self.tokens += n;
                proc_tokens += n;
                self.tokens_per_step.add(n as f64);
                self.sentences_per_step.add(count_sentences(t) as f64);
            }
            if let Some(t) = &s.title {
                self.steps_with_title += 1;
                self.title_tokens_per_step.add(crate::text::tokenize::count_tokens(t) as f64);
            }
            if !s.images.is_empty() {
                self.steps_with_images += 1;
            }
            self.step_images += s.images.len() as u64;
            self.images_per_step.add(s.images.len() as f64);
            self.images.extend(s.images.iter().cloned());
        }
        if let Some(v) = vocab {
            self.vocab.add_steps(p, v, &mut self.buf);
        }
        if let Some(g) = &p.gallery {
            self.gallery_images += g.len() as u64;
            self.images.extend(g.iter().cloned());
        }
        self.tokens_per_procedure.add(proc_tokens as f64);
    }

    fn merge(mut self, mut o: CorpusAcc) -> CorpusAcc {
        self.procedures += o.procedures;
        self.steps += o.steps;
        self.steps_with_text += o.steps_with_text;
        self.steps_with_title += o.steps_with_title;
        self.steps_with_images += o.steps_with_images;
        self.step_images += o.step_images;
        self.gallery_images += o.gallery_images;
        self.steps_per_procedure.merge(&o.steps_per_procedure);
        self.tokens_per_step.merge(&o.tokens_per_step);
        self.title_tokens_per_step.merge(&o.title_tokens_per_step);
        self.sentences_per_step.merge(&o.sentences_per_step);
        self.images_per_step.merge(&o.images_per_step);
        self.tokens_per_procedure.merge(&o.tokens_per_procedure);
        self.tokens += o.tokens;
        if self.types.len() < o.types.len() {
            std::mem::swap(&mut self.types, &mut o.types);
        }
        self.types.extend(o.types);
        if self.images.len() < o.images.len() {
            std::mem::swap(&mut self.images, &mut o.images);
        }
        self.images.extend(o.images);
        self.vocab.merge(o.vocab);
        self
    }

    fn finish(self, with_vocab: bool) -> CorpusStats {
        CorpusStats {
            procedures: self.procedures,
            steps: self.steps,
            steps_with_text: self.steps_with_text,
            steps_with_title: self.steps_with_title,
            steps_with_images: self.steps_with_images,
            step_images: self.step_images,
            unique_images: self.images.len() as u64,
            gallery_images: self.gallery_images,
            steps_per_procedure: self.steps_per_procedure.summary(),
            tokens_per_step: self.tokens_per_step.summary(),
            title_tokens_per_step: self.title_tokens_per_step.summary(),
            sentences_per_step: self.sentences_per_step.summary(),
            images_per_step: self.images_per_step.summary(),
            tokens_per_procedure: self.tokens_per_procedure.summary(),
            tokens: self.tokens,
            types: self.types.len() as u64,
            type_token_ratio: ratio(self.types.len() as u64, self.tokens),
            in_vocab: with_vocab.then(|| self.vocab.finish().into()),
        }
    }
}

/// Statistics of procedures (in parallel; the result does not depend on the thread count).
pub fn procedure_stats<'a>(
    procedures: impl IntoParallelIterator<Item = &'a Procedure>,
    vocab: Option<&Vocabulary>,
) -> CorpusStats {
    procedures
        .into_par_iter()
        .fold(CorpusAcc::default, |mut acc, p| {
            acc.add(p, vocab);
            acc
        })
        .reduce(CorpusAcc::default, CorpusAcc::merge)
        .finish(vocab.is_some())
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskStats {
    pub questions: u64,
    pub choices_per_question: Summary,
    /// How often the answer is at each position (index = 0-based position).
    pub answer_positions: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSetStats {
    pub questions: u64,
    pub recipes: u64,
    pub tasks: BTreeMap<String, TaskStats>,
}

/// Questions per task, choices per question and answer-position counts.
pub fn taskset_stats<'a>(questions: impl IntoIterator<Item = &'a stepwise_core::Question>) -> TaskSetStats {
    let mut tasks: BTreeMap<String, (Acc, Vec<u64>)> = BTreeMap::new();
    let mut recipes = BTreeSet::new();
    let mut n = 0;
    for q in questions {
        n += 1;
        recipes.insert(q.recipe_id.as_str());
        let (acc, pos) = tasks.entry(q.task.clone()).or_default();
        acc.add(q.choice_list.len() as f64);
        if pos.len() <= q.answer {
            pos.resize(q.answer + 1, 0);
        }
        pos[q.answer] += 1;
    }
    TaskSetStats {
        questions: n,
        recipes: recipes.len() as u64,
        tasks: tasks
            .into_iter()
            .map(|(t, (acc, mut pos))| {
                let max_choices = acc.max as usize;
                if pos.len() < max_choices {
                    pos.resize(max_choices, 0);
                }
                (t, TaskStats { questions: acc.n, choices_per_question: acc.summary(), answer_positions: pos })
            })
            .collect(),
    }
}

/// The statistics `stepwise stats` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub group_by: Option<GroupBy>,
    pub all: CorpusStats,
    /// Per group, when grouped.
    pub groups: BTreeMap<String, CorpusStats>,
    pub taskset: Option<TaskSetStats>,
    pub taskset_groups: BTreeMap<String, TaskSetStats>,
}

/// Statistics of a corpus's procedures and (optionally) its task set, overall and per group.
pub fn corpus_stats(
    procedures: &[Procedure],
    taskset: Option<&TaskSet>,
    group_by: Option<GroupBy>,
    vocab: Option<&Vocabulary>,
) -> Stats {
    let all = procedure_stats(procedures, vocab);
    let mut groups = BTreeMap::new();
    let mut taskset_groups = BTreeMap::new();
    if let Some(g) = group_by {
        let mut members: BTreeMap<String, Vec<&Procedure>> = BTreeMap::new();
        for p in procedures {
            members.entry(g.key(p)).or_default().push(p);
        }
        for (k, ps) in members {
            groups.insert(k, procedure_stats(ps, vocab));
        }
        if let Some(ts) = taskset {
            let category: FastMap<&str, &str> =
                procedures.iter().map(|p| (p.id.as_str(), p.category.as_deref().unwrap_or(NO_GROUP))).collect();
            let mut qs: BTreeMap<String, Vec<&stepwise_core::Question>> = BTreeMap::new();
            for q in &ts.questions {
                let key = match g {
                    GroupBy::Split => q.split.clone().unwrap_or_else(|| NO_GROUP.to_string()),
                    GroupBy::Category => category.get(q.recipe_id.as_str()).unwrap_or(&NO_GROUP).to_string(),
                };
                qs.entry(key).or_default().push(q);
            }
            for (k, q) in qs {
                taskset_groups.insert(k, taskset_stats(q));
            }
        }
    }
    Stats { group_by, all, groups, taskset: taskset.map(|t| taskset_stats(&t.questions)), taskset_groups }
}

fn summary_cell(s: &Summary) -> String {
    if s.n == 0 {
        return "–".to_string();
    }
    format!("{:.2} ± {:.2} ({}–{})", s.mean, s.std, s.min, s.max)
}

impl Stats {
    /// Markdown tables: the corpus (one column per group) and the task set.
    pub fn to_markdown(&self) -> String {
        let mut cols: Vec<(&str, &CorpusStats)> = vec![("all", &self.all)];
        cols.extend(self.groups.iter().map(|(k, v)| (k.as_str(), v)));
        let mut s = String::from("## Corpus\n\n| statistic |");
        for (name, _) in &cols {
            s += &format!(" {name} |");
        }
        s += "\n|---|";
        s += &"---:|".repeat(cols.len());
        s.push('\n');
        let mut row = |label: &str, f: &dyn Fn(&CorpusStats) -> String| {
            s += &format!("| {label} |");
            for (_, c) in &cols {
                s += &format!(" {} |", f(c));
            }
            s.push('\n');
        };
        row("procedures", &|c| c.procedures.to_string());
        row("steps", &|c| c.steps.to_string());
        row("steps with text", &|c| c.steps_with_text.to_string());
        row("steps with a title", &|c| c.steps_with_title.to_string());
        row("steps with images", &|c| c.steps_with_images.to_string());
        row("step images", &|c| c.step_images.to_string());
        row("unique images", &|c| c.unique_images.to_string());
        if self.all.gallery_images > 0 {
            row("gallery images", &|c| c.gallery_images.to_string());
        }
        row("steps per procedure", &|c| summary_cell(&c.steps_per_procedure));
        row("tokens per step", &|c| summary_cell(&c.tokens_per_step));
        if self.all.steps_with_title > 0 {
            row("title tokens per step", &|c| summary_cell(&c.title_tokens_per_step));
        }
        row("sentences per step", &|c| summary_cell(&c.sentences_per_step));
        row("images per step", &|c| summary_cell(&c.images_per_step));
        row("tokens per procedure", &|c| summary_cell(&c.tokens_per_procedure));
        row("tokens", &|c| c.tokens.to_string());
        row("types", &|c| c.types.to_string());
        row("type–token ratio", &|c| format!("{:.4}", c.type_token_ratio));
        if self.all.in_vocab.is_some() {
            row("in-vocabulary rate", &|c| {
                c.in_vocab.as_ref().map_or("–".into(), |v| format!("{:.2}%", 100.0 * v.rate))
            });
            row("in-vocabulary rate (words)", &|c| {
                c.in_vocab.as_ref().map_or("–".into(), |v| format!("{:.2}%", 100.0 * v.word_rate))
            });
            row("in-vocabulary rate (whitespace tokens)", &|c| {
                c.in_vocab.as_ref().map_or("–".into(), |v| format!("{:.2}%", 100.0 * v.ws_rate))
            });
            row("in-vocabulary rate (types)", &|c| {
                c.in_vocab.as_ref().map_or("–".into(), |v| format!("{:.2}%", 100.0 * v.type_rate))
            });
        }
        if let Some(ts) = &self.taskset {
            s += &format!("\n## Task set ({} questions on {} recipes)\n\n", ts.questions, ts.recipes);
            s += &taskset_table(ts);
            for (k, g) in &self.taskset_groups {
                s += &format!("\n### {k}\n\n");
                s += &taskset_table(g);
            }
        }
        s
    }
}

fn taskset_table(ts: &TaskSetStats) -> String {
    let width = ts.tasks.values().map(|t| t.answer_positions.len()).max().unwrap_or(0);
    let mut s = String::from("| task | questions | choices |");
    for i in 0..width {
        s += &format!(" answer {i} |");
    }
    s += "\n|---|---:|---:|";
    s += &"---:|".repeat(width);
    s.push('\n');
    for (task, t) in &ts.tasks {
        s += &format!("| {task} | {} | {:.2} |", t.questions, t.choices_per_question.mean);
        for i in 0..width {
            let n = t.answer_positions.get(i).copied().unwrap_or(0);
            s += &format!(" {n} ({:.1}%) |", 100.0 * ratio(n, t.questions));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::{Choice, Question, Step};

    fn p(id: &str, split: &str, texts: &[&str], images: &[&[&str]]) -> Procedure {
        let mut p = Procedure { id: id.into(), category: Some(split.to_uppercase()), ..Default::default() };
        p.extra.insert("split".into(), serde_json::json!(split));
        for (i, t) in texts.iter().enumerate() {
            p.steps.push(Step {
                title: (i == 0).then(|| "Start here".to_string()),
                text: Some(t.to_string()),
                images: images.get(i).map(|v| v.iter().map(|s| s.to_string()).collect()).unwrap_or_default(),
                ..Default::default()
            });
        }
        p
    }

    fn corpus() -> Vec<Procedure> {
        vec![
            p("a", "train", &["Mix the flour. Add water.", "Bake it"], &[&["x.jpg", "y.jpg"], &["x.jpg"]]),
            p("b", "val", &["Stir well", "Serve it now", "Eat"], &[]),
        ]
    }

    #[test]
    fn counts_and_summaries() {
        let s = procedure_stats(&corpus(), None);
        assert_eq!((s.procedures, s.steps, s.steps_with_images, s.step_images, s.unique_images), (2, 5, 2, 3, 2));
        assert_eq!(s.tokens, 13);
        assert_eq!(s.tokens_per_step.n, 5);
        assert!((s.tokens_per_step.mean - 13.0 / 5.0).abs() < 1e-12);
        assert_eq!((s.tokens_per_step.min, s.tokens_per_step.max), (1.0, 5.0));
        // population std of [2, 3]
        assert!((s.steps_per_procedure.std - 0.5).abs() < 1e-12);
        assert_eq!(s.sentences_per_step.max, 2.0);
        assert_eq!(s.types, 12, "`it` occurs twice");
        assert_eq!(s.title_tokens_per_step.n, 2);
    }

    #[test]
    fn groups_and_vocab() {
        let v = Vocabulary::from_words(["mix", "the", "flour"]);
        let st = corpus_stats(&corpus(), None, Some(GroupBy::Split), Some(&v));
        assert_eq!(st.groups.keys().collect::<Vec<_>>(), ["train", "val"]);
        assert_eq!(st.groups["val"].procedures, 1);
        let iv = st.all.in_vocab.as_ref().unwrap();
        assert_eq!((iv.counts.in_vocab, iv.counts.tokens), (3, 13 + 4));
        let md = st.to_markdown();
        assert!(md.contains("| statistic | all | train | val |"), "{md}");
        assert!(md.contains("| steps per procedure | 2.50 ± 0.50 (2–3) | 2.00 ± 0.00 (2–2) |"), "{md}");
    }

    #[test]
    fn answer_positions() {
        let q = |task: &str, answer: usize| Question {
            qid: format!("{task}{answer}"),
            recipe_id: "a".into(),
            task: task.into(),
            choice_list: vec![Choice::Item("x".into()); 4],
            answer,
            ..Default::default()
        };
        let ts = TaskSet { questions: vec![q("t", 0), q("t", 0), q("u", 2)], ..Default::default() };
        let st = corpus_stats(&corpus(), Some(&ts), Some(GroupBy::Category), None);
        let t = &st.taskset.as_ref().unwrap().tasks;
        assert_eq!(t["t"].answer_positions, [2, 0, 0, 0]);
        assert_eq!(t["u"].answer_positions, [0, 0, 1, 0]);
        assert_eq!(st.taskset_groups.keys().collect::<Vec<_>>(), ["TRAIN"]);
        assert!(st.to_markdown().contains("| t | 2 | 4.00 | 2 (100.0%) | 0 (0.0%) |"));
    }
}
