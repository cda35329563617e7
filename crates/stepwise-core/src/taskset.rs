//! Task sets: multiple-choice questions of any task, with answers, in RecipeQA's official JSON layout
//! (`{"data": [question, ...]}`; fields `qid`, `recipe_id`, `task`, `split`, `context`, `context_modality`,
//! `question` (one entry `@placeholder` in cloze tasks), `question_modality`, `question_text`, `choice_list`,
//! 0-based `answer`). Unknown fields are kept verbatim, so external files round-trip.
//!
//! On disk, a task set is either a RecipeQA JSON file or a folder with `questions.json` (that layout),
//! `questions.parquet` and `manifest.json`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Location, Result};
use crate::json::{Obj, kind, read_json, write_canonical};
use crate::output::write_file_atomic;
use crate::parquet::{Column, write_table};

pub const QUESTIONS_JSON: &str = "questions.json";
pub const QUESTIONS_PARQUET: &str = "questions.parquet";
/// The cloze placeholder of RecipeQA.
pub const PLACEHOLDER: &str = "@placeholder";

/// The RecipeQA tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    TextualCloze,
    VisualCloze,
    VisualCoherence,
    VisualOrdering,
}

impl Task {
    pub const ALL: [Task; 4] = [Task::TextualCloze, Task::VisualCloze, Task::VisualCoherence, Task::VisualOrdering];

    pub fn as_str(self) -> &'static str {
        match self {
            Task::TextualCloze => "textual_cloze",
            Task::VisualCloze => "visual_cloze",
            Task::VisualCoherence => "visual_coherence",
            Task::VisualOrdering => "visual_ordering",
        }
    }

    pub fn parse(s: &str) -> Option<Task> {
        Task::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Every task's name, comma-separated (for messages that list the valid ones).
    pub fn names() -> String {
        Task::ALL.map(Task::as_str).join(", ")
    }

    /// What the task's questions and choices are made of: titles (textual cloze) or step images.
    pub fn item_modality(self) -> ItemModality {
        match self {
            Task::TextualCloze => ItemModality::Text,
            Task::VisualCloze | Task::VisualCoherence | Task::VisualOrdering => ItemModality::Image,
        }
    }

    /// What a question asks for: one missing item among candidates (cloze), the one item that does not belong
    /// among those shown (coherence), or the order of the shown items (ordering).
    pub fn shape(self) -> TaskShape {
        match self {
            Task::TextualCloze | Task::VisualCloze => TaskShape::Cloze,
            Task::VisualCoherence => TaskShape::OddOneOut,
            Task::VisualOrdering => TaskShape::Ordering,
        }
    }

    /// The `qid` prefix RecipeQA uses for the task (1000, 2000, 3000, 4000).
    pub fn qid_prefix(self) -> u32 {
        match self {
            Task::TextualCloze => 1000,
            Task::VisualCloze => 2000,
            Task::VisualCoherence => 3000,
            Task::VisualOrdering => 4000,
        }
    }
}

/// Whether an item is an image or a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ItemModality {
    Image,
    Text,
}

/// The structure of a RecipeQA question type ([`Task::shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskShape {
    /// A missing item chosen among candidates (textual and visual cloze).
    Cloze,
    /// The shown item that does not belong (visual coherence): its negative is an item put among the shown ones.
    OddOneOut,
    /// The correct order of the shown items (visual ordering): its negatives are wrong orders.
    Ordering,
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A choice: one item (a title, an image) or, for ordering, a sequence of items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Item(String),
    Sequence(Vec<String>),
}

impl Choice {
    /// The items of the choice (one for `Item`).
    pub fn items(&self) -> Vec<&str> {
        match self {
            Choice::Item(s) => vec![s.as_str()],
            Choice::Sequence(v) => v.iter().map(String::as_str).collect(),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Choice::Item(s) => Value::String(s.clone()),
            Choice::Sequence(v) => Value::Array(v.iter().map(|s| Value::String(s.clone())).collect()),
        }
    }
}

/// A context step of a question (`id`, and `title`, `body` or `images` depending on the context modality).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContextStep {
    pub id: Value,
    pub title: Option<String>,
    pub body: Option<String>,
    pub images: Option<Vec<String>>,
    pub extra: BTreeMap<String, Value>,
}

/// One multiple-choice question.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Question {
    pub qid: String,
    pub recipe_id: String,
    /// The task name as written (one of [`Task`] for RecipeQA files; kept verbatim).
    pub task: String,
    pub split: Option<String>,
    pub context: Vec<ContextStep>,
    pub context_modality: Vec<String>,
    pub question: Vec<String>,
    pub question_modality: Vec<String>,
    pub question_text: Option<String>,
    pub choice_list: Vec<Choice>,
    /// 0-based index into `choice_list`.
    pub answer: usize,
    /// Unknown fields, kept verbatim (stepwise's generators put their provenance under `meta`).
    pub extra: BTreeMap<String, Value>,
}

const QUESTION_KEYS: &[&str] = &[
    "qid",
    "recipe_id",
    "task",
    "split",
    "context",
    "context_modality",
    "question",
    "question_modality",
    "question_text",
    "choice_list",
    "answer",
];

impl Question {
    /// The task as an enum, when it is one of RecipeQA's.
    pub fn task_kind(&self) -> Option<Task> {
        Task::parse(&self.task)
    }

    /// Index of `@placeholder` in `question`, for cloze tasks.
    pub fn placeholder_index(&self) -> Option<usize> {
        self.question.iter().position(|q| q == PLACEHOLDER)
    }

    /// Read a question; errors name the file, the record (`data[i]`) and the field.
    pub fn from_json(value: &Value, path: &Path, location: &Location) -> Result<Self> {
        let o = Obj::new(value, path, location, "")?;
        let choices = o.req_array("choice_list")?;
        let mut choice_list = Vec::with_capacity(choices.len());
        for (i, c) in choices.iter().enumerate() {
            choice_list.push(match c {
                Value::String(s) => Choice::Item(s.clone()),
                Value::Array(items) => Choice::Sequence(
                    items
                        .iter()
                        .enumerate()
                        .map(|(j, v)| match v {
                            Value::String(s) => Ok(s.clone()),
                            other => Err(o.error(
                                &format!("choice_list[{i}][{j}]"),
                                format!("expected a string, found {}", kind(other)),
                            )),
                        })
                        .collect::<Result<Vec<_>>>()?,
                ),
                other => {
                    return Err(o.error(
                        &format!("choice_list[{i}]"),
                        format!("expected a string or an array of strings, found {}", kind(other)),
                    ));
                }
            });
        }
        if choice_list.is_empty() {
            return Err(o.error("choice_list", "must not be empty"));
        }
        let answer = o.req_u64("answer")? as usize;
        if answer >= choice_list.len() {
            return Err(o.error("answer", format!("{answer} is out of range for {} choices", choice_list.len())));
        }
        let context = match o.opt_array("context")? {
            None => Vec::new(),
            Some(steps) => steps
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let so = Obj::new(s, path, location, &format!("context[{i}]."))?;
                    Ok(ContextStep {
                        id: so.get("id").cloned().unwrap_or(Value::Null),
                        title: so.opt_str("title")?.map(str::to_string),
                        body: so.opt_str("body")?.map(str::to_string),
                        images: so.opt_str_array("images")?,
                        extra: so.extra(&["id", "title", "body", "images"]),
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let qid = match o.req("qid")? {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(o.error("qid", format!("expected a string, found {}", kind(other))));
            }
        };
        Ok(Question {
            qid,
            recipe_id: o.req_str("recipe_id")?.to_string(),
            task: o.req_str("task")?.to_string(),
            split: o.opt_str("split")?.map(str::to_string),
            context,
            context_modality: o.opt_str_array("context_modality")?.unwrap_or_default(),
            question: o.req_str_array("question")?,
            question_modality: o.opt_str_array("question_modality")?.unwrap_or_default(),
            question_text: o.opt_str("question_text")?.map(str::to_string),
            choice_list,
            answer,
            extra: o.extra(QUESTION_KEYS),
        })
    }

    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        let strs = |v: &[String]| Value::Array(v.iter().map(|s| Value::String(s.clone())).collect());
        m.insert("qid".into(), Value::String(self.qid.clone()));
        m.insert("recipe_id".into(), Value::String(self.recipe_id.clone()));
        m.insert("task".into(), Value::String(self.task.clone()));
        if let Some(s) = &self.split {
            m.insert("split".into(), Value::String(s.clone()));
        }
        let ctx = self
            .context
            .iter()
            .map(|c| {
                let mut cm = serde_json::Map::new();
                for (k, v) in &c.extra {
                    cm.insert(k.clone(), v.clone());
                }
                cm.insert("id".into(), c.id.clone());
                if let Some(t) = &c.title {
                    cm.insert("title".into(), Value::String(t.clone()));
                }
                if let Some(b) = &c.body {
                    cm.insert("body".into(), Value::String(b.clone()));
                }
                if let Some(i) = &c.images {
                    cm.insert("images".into(), strs(i));
                }
                Value::Object(cm)
            })
            .collect();
        m.insert("context".into(), Value::Array(ctx));
        m.insert("context_modality".into(), strs(&self.context_modality));
        m.insert("question".into(), strs(&self.question));
        m.insert("question_modality".into(), strs(&self.question_modality));
        if let Some(t) = &self.question_text {
            m.insert("question_text".into(), Value::String(t.clone()));
        }
        m.insert("choice_list".into(), Value::Array(self.choice_list.iter().map(Choice::to_json).collect()));
        m.insert("answer".into(), Value::from(self.answer as u64));
        Value::Object(m)
    }
}

/// A set of questions with unique qids, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskSet {
    pub questions: Vec<Question>,
    /// Top-level keys of the file other than `data`, kept verbatim.
    pub extra: BTreeMap<String, Value>,
}

impl TaskSet {
    /// Load a RecipeQA-layout JSON file, or a task-set folder (its `questions.json`).
    pub fn load(path: &Path) -> Result<Self> {
        let file: PathBuf = if path.is_dir() { path.join(QUESTIONS_JSON) } else { path.to_path_buf() };
        let v = read_json(&file)?;
        Self::from_json(&v, &file)
    }

    pub fn from_json(v: &Value, path: &Path) -> Result<Self> {
        let top = Obj::new(v, path, &Location::File, "")?;
        let data = top.req_array("data")?;
        if data.is_empty() {
            return Err(Error::Empty { path: path.to_path_buf(), what: "no questions in `data`".into() });
        }
        let mut questions = Vec::with_capacity(data.len());
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, q) in data.iter().enumerate() {
            let q = Question::from_json(q, path, &Location::Record(format!("data[{i}]")))?;
            if let Some(first) = seen.insert(q.qid.clone(), i) {
                return Err(Error::Duplicate {
                    id: q.qid,
                    first: format!("{}:data[{first}]", path.display()),
                    second: format!("{}:data[{i}]", path.display()),
                });
            }
            questions.push(q);
        }
        Ok(TaskSet { questions, extra: top.extra(&["data"]) })
    }

    /// Questions of one task, in file order (the order RecipeQA's official scorer uses).
    pub fn of_task<'a>(&'a self, task: &'a str) -> impl Iterator<Item = &'a Question> + 'a {
        self.questions.iter().filter(move |q| q.task == task)
    }

    /// Counts of questions per task name.
    pub fn counts_by_task(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for q in &self.questions {
            *m.entry(q.task.clone()).or_insert(0) += 1;
        }
        m
    }

    /// Write `{"data": [...]}` with one canonical question per line (diff-friendly), atomically.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        write_file_atomic(path, |w| {
            w.write_all(b"{")?;
            for (k, v) in &self.extra {
                serde_json::to_writer(&mut *w, k)?;
                w.write_all(b":")?;
                write_canonical(w, v)?;
                w.write_all(b",")?;
            }
            w.write_all(b"\"data\":[\n")?;
            for (i, q) in self.questions.iter().enumerate() {
                write_canonical(w, &q.to_json())?;
                w.write_all(if i + 1 < self.questions.len() { b",\n" } else { b"\n" })?;
            }
            w.write_all(b"]}\n")
        })
    }

    /// Write the Parquet copy: one row per question; `choices` as lists of items; context and unknown fields as
    /// canonical JSON strings.
    pub fn write_parquet(&self, path: &Path) -> Result<()> {
        let qs = &self.questions;
        let json = |v: Value| Some(crate::json::to_canonical_string(&v));
        write_table(
            path,
            &[
                ("qid", Column::Str(qs.iter().map(|q| Some(q.qid.clone())).collect())),
                ("recipe_id", Column::Str(qs.iter().map(|q| Some(q.recipe_id.clone())).collect())),
                ("task", Column::Str(qs.iter().map(|q| Some(q.task.clone())).collect())),
                ("split", Column::Str(qs.iter().map(|q| q.split.clone()).collect())),
                ("question_text", Column::Str(qs.iter().map(|q| q.question_text.clone()).collect())),
                ("question", Column::StrList(qs.iter().map(|q| Some(q.question.clone())).collect())),
                ("question_modality", Column::StrList(qs.iter().map(|q| Some(q.question_modality.clone())).collect())),
                ("context_modality", Column::StrList(qs.iter().map(|q| Some(q.context_modality.clone())).collect())),
                (
                    "choices",
                    Column::StrListList(
                        qs.iter()
                            .map(|q| {
                                Some(
                                    q.choice_list
                                        .iter()
                                        .map(|c| c.items().into_iter().map(str::to_string).collect())
                                        .collect(),
                                )
                            })
                            .collect(),
                    ),
                ),
                ("answer", Column::Int(qs.iter().map(|q| Some(q.answer as i64)).collect())),
                ("context", Column::Str(qs.iter().map(|q| json(q.to_json()["context"].clone())).collect())),
                (
                    "extra",
                    Column::Str(
                        qs.iter()
                            .map(|q| {
                                (!q.extra.is_empty()).then(|| {
                                    crate::json::to_canonical_string(
                                        &serde_json::to_value(&q.extra).expect("serialize"),
                                    )
                                })
                            })
                            .collect(),
                    ),
                ),
            ],
        )
    }
}

/// Task-set folders under a folder such as a suite (any depth; links back up are not followed), as (relative
/// path with `/`, questions file), sorted.
pub fn tasksets_under(root: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let resolved = std::fs::canonicalize(&dir).map_err(|e| Error::io(&dir, e))?;
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| Error::io(&dir, e))?.path();
            if !path.is_dir() || path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                continue;
            }
            // A link back to this folder or one above it is a loop: the walk would never end.
            if std::fs::canonicalize(&path).is_ok_and(|p| resolved.starts_with(p)) {
                continue;
            }
            if path.join(QUESTIONS_JSON).is_file() {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                out.push((rel, path.join(QUESTIONS_JSON)));
            } else {
                stack.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        serde_json::json!({"data": [
            {"qid": "1000-1-0-1-2-3", "recipe_id": "r", "task": "textual_cloze", "split": "val",
             "context": [{"id": 1, "body": "b", "images": ["r_1_0.jpg"]}], "context_modality": ["body", "images"],
             "question": ["a", "@placeholder", "c", "d"], "question_modality": ["title"],
             "question_text": "Choose", "choice_list": ["x", "b", "y", "z"], "answer": 1},
            {"qid": "4000-1-0-1-2-3", "recipe_id": "r", "task": "visual_ordering", "split": "val",
             "context": [], "context_modality": [], "question": ["q"], "question_modality": ["images"],
             "question_text": "Order", "choice_list": [["a", "b"], ["b", "a"]], "answer": 0, "meta": {"k": 1}}
        ]})
    }

    #[test]
    fn reads_and_round_trips() {
        let ts = TaskSet::from_json(&sample(), Path::new("q.json")).unwrap();
        assert_eq!(ts.questions[0].placeholder_index(), Some(1));
        assert_eq!(ts.questions[1].choice_list[0], Choice::Sequence(vec!["a".into(), "b".into()]));
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("q.json");
        ts.write_json(&f).unwrap();
        let back = TaskSet::load(&f).unwrap();
        assert_eq!(back, ts);
        ts.write_parquet(&td.path().join("q.parquet")).unwrap();
    }

    #[test]
    fn answer_out_of_range_names_the_record() {
        let mut v = sample();
        v["data"][1]["answer"] = serde_json::json!(5);
        let e = TaskSet::from_json(&v, Path::new("q.json")).unwrap_err().to_string();
        assert_eq!(e, "q.json:data[1]: field `answer`: 5 is out of range for 2 choices");
    }

    #[test]
    fn duplicate_qids_are_rejected() {
        let mut v = sample();
        v["data"][1]["qid"] = serde_json::json!("1000-1-0-1-2-3");
        assert!(matches!(TaskSet::from_json(&v, Path::new("q.json")), Err(Error::Duplicate { .. })));
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_in_a_suite_ends_the_walk_and_a_linked_task_set_still_counts() {
        let td = tempfile::tempdir().unwrap();
        let a = td.path().join("recipeqa/visual_cloze");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(a.join(QUESTIONS_JSON), "{}").unwrap();
        std::os::unix::fs::symlink(td.path(), td.path().join("recipeqa/up")).unwrap();
        std::os::unix::fs::symlink(td.path(), td.path().join("recipeqa/up2")).unwrap();
        std::fs::create_dir_all(td.path().join("knobs")).unwrap();
        std::os::unix::fs::symlink(&a, td.path().join("knobs/visual_cloze")).unwrap();
        let sets: Vec<String> = tasksets_under(td.path()).unwrap().into_iter().map(|(rel, _)| rel).collect();
        assert_eq!(sets, ["knobs/visual_cloze", "recipeqa/visual_cloze"]);
    }
}
