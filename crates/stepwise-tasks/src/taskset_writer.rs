//! Writing a task set while it is generated: questions arrive in chunks (in corpus order) and go straight to
//! `questions.json` and `questions.parquet`, so a large suite never holds a whole task set in memory.
//!
//! The files have the layout of [`stepwise_core::TaskSet::write_json`] (one canonical question per line) and
//! the columns of [`stepwise_core::TaskSet::write_parquet`] (row groups of [`ROW_GROUP`] rows, whatever the
//! chunks). Each file is written under a temporary name and renamed by [`TasksetWriter::finish`]; an unfinished
//! writer removes its files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rayon::prelude::*;
use serde_json::Value;
use stepwise_core::json::{write_canonical, write_str};
use stepwise_core::manifest::Manifest;
use stepwise_core::output::partial_name;
use stepwise_core::taskset::ContextStep;
use stepwise_core::taskset::{QUESTIONS_JSON, QUESTIONS_PARQUET};
use stepwise_core::{Choice, Error, IoResultExt, Question, Result};

use crate::generate::ProcedureQuestions;

/// One question, serialised (in parallel) for both files.
struct Row {
    json: Vec<u8>,
    qid: String,
    recipe_id: String,
    task: String,
    split: Option<String>,
    question_text: Option<String>,
    question: Vec<String>,
    question_modality: Vec<String>,
    context_modality: Vec<String>,
    choices: Vec<Vec<String>>,
    answer: i64,
    /// Shared by the questions of one procedure (serialised once).
    context: Arc<str>,
    extra: Option<String>,
}

impl Row {
    fn of(q: Question) -> Row {
        let context: Arc<str> = context_json(&q.context).into();
        Row::with_context(q, context)
    }

    /// A row whose context is `context` (the question's own `context` field is not read).
    fn with_context(q: Question, context: Arc<str>) -> Row {
        // Each extra field (the provenance) serialised once, for the JSON line and the Parquet `extra` column.
        let extra = ExtraJson::of(&q.extra);
        let mut json = Vec::with_capacity(context.len() + extra.text.len() + 1024);
        write_question(&mut json, &q, &context, &extra).expect("writing to a Vec cannot fail");
        let extra = (!q.extra.is_empty()).then_some(extra.text);
        let choices = q.choice_list.iter().map(|c| c.items().into_iter().map(str::to_string).collect()).collect();
        Row {
            json,
            qid: q.qid,
            recipe_id: q.recipe_id,
            task: q.task,
            split: q.split,
            question_text: q.question_text,
            question: q.question,
            question_modality: q.question_modality,
            context_modality: q.context_modality,
            choices,
            answer: q.answer as i64,
            context,
            extra,
        }
    }
}

/// A field value of the canonical question writer.
enum Val<'a> {
    Str(&'a str),
    Strs(&'a [String]),
    Raw(&'a str),
    Choices(&'a [Choice]),
    Uint(u64),
}

/// One question as canonical JSON — the bytes `write_canonical(&q.to_json())` gives (sorted keys at every level,
/// known fields winning over same-named unknown ones), written straight from the fields: a large suite writes
/// millions of questions and building a `Value` tree for each doubled the cost. `context` is the question's
/// context already serialised ([`context_json`]), `extra` its extra fields ([`ExtraJson::of`]).
fn write_question(w: &mut Vec<u8>, q: &Question, context: &str, extra: &ExtraJson<'_>) -> std::io::Result<()> {
    let mut fields: Vec<(&str, Val<'_>)> = vec![
        ("answer", Val::Uint(q.answer as u64)),
        ("choice_list", Val::Choices(&q.choice_list)),
        ("context", Val::Raw(context)),
        ("context_modality", Val::Strs(&q.context_modality)),
        ("qid", Val::Str(&q.qid)),
        ("question", Val::Strs(&q.question)),
        ("question_modality", Val::Strs(&q.question_modality)),
        ("recipe_id", Val::Str(&q.recipe_id)),
        ("task", Val::Str(&q.task)),
    ];
    if let Some(t) = &q.question_text {
        fields.push(("question_text", Val::Str(t)));
    }
    if let Some(s) = &q.split {
        fields.push(("split", Val::Str(s)));
    }
    let known: Vec<&str> = fields.iter().map(|f| f.0).collect();
    for (k, v) in extra.fields() {
        if !known.contains(&k) {
            fields.push((k, Val::Raw(v)));
        }
    }
    fields.sort_by(|a, b| a.0.cmp(b.0));
    w.push(b'{');
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            w.push(b',');
        }
        write_str(w, k)?;
        w.push(b':');
        match v {
            Val::Str(s) => write_str(w, s)?,
            Val::Strs(v) => write_strs(w, v)?,
            Val::Raw(s) => w.extend_from_slice(s.as_bytes()),
            Val::Uint(n) => serde_json::to_writer(&mut *w, n)?,
            Val::Choices(cs) => {
                w.push(b'[');
                for (j, c) in cs.iter().enumerate() {
                    if j > 0 {
                        w.push(b',');
                    }
                    match c {
                        Choice::Item(s) => write_str(w, s)?,
                        Choice::Sequence(v) => write_strs(w, v)?,
                    }
                }
                w.push(b']');
            }
        }
    }
    w.push(b'}');
    Ok(())
}

fn write_strs(w: &mut Vec<u8>, v: &[String]) -> std::io::Result<()> {
    w.push(b'[');
    for (i, s) in v.iter().enumerate() {
        if i > 0 {
            w.push(b',');
        }
        write_str(w, s)?;
    }
    w.push(b']');
    Ok(())
}

/// A question's extra fields as one canonical JSON object (keys sorted, as `BTreeMap` iterates them), with
/// where each field's key and value lie in it, so the question's JSON line reuses each value's bytes.
struct ExtraJson<'q> {
    text: String,
    /// Per field: the key and the value's byte range in `text`.
    spans: Vec<(&'q str, std::ops::Range<usize>)>,
}

impl<'q> ExtraJson<'q> {
    fn of(extra: &'q BTreeMap<String, Value>) -> ExtraJson<'q> {
        let mut w: Vec<u8> = Vec::with_capacity(1024);
        let mut spans = Vec::with_capacity(extra.len());
        w.push(b'{');
        for (i, (k, v)) in extra.iter().enumerate() {
            if i > 0 {
                w.push(b',');
            }
            write_str(&mut w, k).expect("writing to a Vec cannot fail");
            w.push(b':');
            let start = w.len();
            write_canonical(&mut w, v).expect("writing to a Vec cannot fail");
            spans.push((k.as_str(), start..w.len()));
        }
        w.push(b'}');
        ExtraJson { text: String::from_utf8(w).expect("serde_json writes UTF-8"), spans }
    }

    /// (key, serialised value) of every field, in key order.
    fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans.iter().map(|(k, r)| (*k, &self.text[r.clone()]))
    }
}

/// The canonical JSON of a question's context (as `Question::to_json` lays out each step).
fn context_json(context: &[ContextStep]) -> String {
    let mut w: Vec<u8> = Vec::with_capacity(256 * context.len() + 2);
    w.push(b'[');
    for (i, c) in context.iter().enumerate() {
        if i > 0 {
            w.push(b',');
        }
        if c.extra.is_empty() {
            // Sorted: body, id, images, title.
            let mut first = true;
            let mut key = |w: &mut Vec<u8>, k: &str| {
                if !first {
                    w.push(b',');
                }
                first = false;
                w.push(b'"');
                w.extend_from_slice(k.as_bytes());
                w.extend_from_slice(b"\":");
            };
            w.push(b'{');
            if let Some(b) = &c.body {
                key(&mut w, "body");
                write_str(&mut w, b).expect("writing to a Vec cannot fail");
            }
            key(&mut w, "id");
            write_canonical(&mut w, &c.id).expect("writing to a Vec cannot fail");
            if let Some(imgs) = &c.images {
                key(&mut w, "images");
                write_strs(&mut w, imgs).expect("writing to a Vec cannot fail");
            }
            if let Some(t) = &c.title {
                key(&mut w, "title");
                write_str(&mut w, t).expect("writing to a Vec cannot fail");
            }
            w.push(b'}');
        } else {
            // Unknown per-step fields (not made by the generators): the general path.
            let one = Question { context: vec![c.clone()], ..Default::default() };
            write_canonical(&mut w, &one.to_json()["context"][0]).expect("writing to a Vec cannot fail");
        }
    }
    w.push(b']');
    String::from_utf8(w).expect("serde_json writes UTF-8")
}

/// Rows per Parquet row group (bounds the writer's buffered pages).
const ROW_GROUP: usize = 16_384;
/// Rows per batch handed to the Parquet writer (a divisor of [`ROW_GROUP`]).
const PARQUET_BATCH: usize = 1024;

/// A task-set folder being written. Serialisation runs on the rayon pool; the files are written by a thread of
/// their own (Parquet encoding and compression are single-threaded), so writing one chunk overlaps generating
/// the next. At most two chunks are in flight.
pub struct TasksetWriter {
    dir: PathBuf,
    json_tmp: PathBuf,
    parquet_tmp: PathBuf,
    tx: Option<std::sync::mpsc::SyncSender<Vec<Row>>>,
    worker: Option<std::thread::JoinHandle<Result<()>>>,
    written: u64,
    finished: bool,
}

impl TasksetWriter {
    /// Start `dir/questions.json` and `dir/questions.parquet` (the folder is created).
    pub fn create(dir: &Path) -> Result<TasksetWriter> {
        std::fs::create_dir_all(dir).at(dir)?;
        let json_tmp = dir.join(partial_name(QUESTIONS_JSON));
        let parquet_tmp = dir.join(partial_name(QUESTIONS_PARQUET));
        let mut json = BufWriter::with_capacity(1 << 20, File::create(&json_tmp).at(&json_tmp)?);
        json.write_all(b"{\"data\":[\n").at(&json_tmp)?;
        let pf = BufWriter::with_capacity(1 << 20, File::create(&parquet_tmp).at(&parquet_tmp)?);
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .build();
        let parquet = ArrowWriter::try_new(pf, schema(), Some(props))
            .map_err(|e| Error::runtime(format!("{}: {e}", parquet_tmp.display())))?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Row>>(1);
        let (jt, pt) = (json_tmp.clone(), parquet_tmp.clone());
        let worker = std::thread::Builder::new()
            .name("taskset-writer".into())
            .spawn(move || write_files(rx, json, &jt, parquet, &pt))
            .map_err(|e| Error::runtime(format!("starting the writer thread: {e}")))?;
        Ok(TasksetWriter {
            dir: dir.to_path_buf(),
            json_tmp,
            parquet_tmp,
            tx: Some(tx),
            worker: Some(worker),
            written: 0,
            finished: false,
        })
    }

    /// Questions handed over so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Append questions (serialised in parallel, written in order).
    pub fn append(&mut self, questions: Vec<Question>) -> Result<()> {
        if questions.is_empty() {
            return Ok(());
        }
        self.send(questions.into_par_iter().map(Row::of).collect())
    }

    /// Append the questions of whole procedures, each procedure's shared context serialised once (the
    /// questions' own `context` fields are ignored). Same bytes as [`Self::append`] of the questions with their
    /// context filled in.
    pub fn append_grouped(&mut self, groups: Vec<ProcedureQuestions>) -> Result<()> {
        if groups.is_empty() {
            return Ok(());
        }
        let rows: Vec<Row> = groups
            .into_par_iter()
            .flat_map_iter(|g| {
                let context: Arc<str> = context_json(&g.context).into();
                g.questions.into_iter().map(move |q| Row::with_context(q, context.clone()))
            })
            .collect();
        self.send(rows)
    }

    fn send(&mut self, rows: Vec<Row>) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        self.written += rows.len() as u64;
        let tx = self.tx.as_ref().expect("open until finish");
        if tx.send(rows).is_err() {
            // The writer stopped on an error: report it.
            return Err(self.join().err().unwrap_or_else(|| Error::runtime("the task-set writer stopped")));
        }
        Ok(())
    }

    /// Stop taking questions: the writer thread finishes and syncs the files in the background (a suite overlaps
    /// that with generating the next task set); [`Self::finish`] waits for it. No `append` after this.
    pub fn close(&mut self) {
        self.tx = None;
    }

    fn join(&mut self) -> Result<()> {
        self.tx = None;
        match self.worker.take().map(|w| w.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::runtime(format!("{}: the writer thread panicked", self.dir.display()))),
            None => Ok(()),
        }
    }

    /// Close both files, move them into place and write `manifest.json`.
    pub fn finish(mut self, manifest: &Manifest) -> Result<()> {
        self.join()?;
        let (jd, pd) = (self.dir.join(QUESTIONS_JSON), self.dir.join(QUESTIONS_PARQUET));
        std::fs::rename(&self.json_tmp, &jd).at(&jd)?;
        std::fs::rename(&self.parquet_tmp, &pd).at(&pd)?;
        self.finished = true;
        manifest.write(&self.dir)
    }
}

/// The writer thread: rows in order to both files, then the JSON trailer, the Parquet footer and a sync.
fn write_files(
    rx: std::sync::mpsc::Receiver<Vec<Row>>,
    mut json: BufWriter<File>,
    json_tmp: &Path,
    mut parquet: ArrowWriter<BufWriter<File>>,
    parquet_tmp: &Path,
) -> Result<()> {
    let perr = |e: parquet::errors::ParquetError| Error::runtime(format!("{}: {e}", parquet_tmp.display()));
    let aerr = |e: arrow_schema::ArrowError| Error::runtime(format!("{}: {e}", parquet_tmp.display()));
    let mut written = 0u64;
    // Parquet's page boundaries depend on how rows are cut into batches, so rows go to it in batches of a fixed
    // size whatever chunks they arrive in: the file depends only on the sequence of questions (a merged sweep
    // equals a single run).
    let mut pending: Vec<Row> = Vec::new();
    for rows in rx {
        for r in &rows {
            if written > 0 {
                json.write_all(b",\n").at(json_tmp)?;
            }
            json.write_all(&r.json).at(json_tmp)?;
            written += 1;
        }
        pending.extend(rows);
        while pending.len() >= PARQUET_BATCH {
            let rest = pending.split_off(PARQUET_BATCH);
            parquet.write(&batch(&pending).map_err(aerr)?).map_err(perr)?;
            pending = rest;
        }
    }
    if !pending.is_empty() {
        parquet.write(&batch(&pending).map_err(aerr)?).map_err(perr)?;
    }
    json.write_all(if written > 0 { b"\n]}\n" } else { b"]}\n" }).at(json_tmp)?;
    let f = json.into_inner().map_err(|e| e.into_error()).at(json_tmp)?;
    f.sync_all().at(json_tmp)?;
    let inner = parquet.into_inner().map_err(perr)?;
    let f = inner.into_inner().map_err(|e| e.into_error()).at(parquet_tmp)?;
    f.sync_all().at(parquet_tmp)
}

impl Drop for TasksetWriter {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.join();
            let _ = std::fs::remove_file(&self.json_tmp);
            let _ = std::fs::remove_file(&self.parquet_tmp);
        }
    }
}

fn str_list() -> arrow_schema::DataType {
    arrow_schema::DataType::List(Arc::new(Field::new("item", arrow_schema::DataType::Utf8, true)))
}

/// The columns of `TaskSet::write_parquet`.
fn schema() -> Arc<Schema> {
    use arrow_schema::DataType::{Int64, List, Utf8};
    Arc::new(Schema::new(vec![
        Field::new("qid", Utf8, true),
        Field::new("recipe_id", Utf8, true),
        Field::new("task", Utf8, true),
        Field::new("split", Utf8, true),
        Field::new("question_text", Utf8, true),
        Field::new("question", str_list(), true),
        Field::new("question_modality", str_list(), true),
        Field::new("context_modality", str_list(), true),
        Field::new("choices", List(Arc::new(Field::new("item", str_list(), true))), true),
        Field::new("answer", Int64, true),
        Field::new("context", Utf8, true),
        Field::new("extra", Utf8, true),
    ]))
}

fn strs<'a>(rows: &'a [Row], f: impl Fn(&'a Row) -> Option<&'a str>) -> ArrayRef {
    Arc::new(rows.iter().map(f).collect::<StringArray>())
}

fn lists<'a>(rows: &'a [Row], f: impl Fn(&'a Row) -> &'a [String]) -> ArrayRef {
    let mut b = ListBuilder::new(StringBuilder::new());
    for r in rows {
        for s in f(r) {
            b.values().append_value(s);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

fn batch(rows: &[Row]) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let mut choices = ListBuilder::new(ListBuilder::new(StringBuilder::new()));
    for r in rows {
        for items in &r.choices {
            for s in items {
                choices.values().values().append_value(s);
            }
            choices.values().append(true);
        }
        choices.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        strs(rows, |r| Some(&r.qid)),
        strs(rows, |r| Some(&r.recipe_id)),
        strs(rows, |r| Some(&r.task)),
        strs(rows, |r| r.split.as_deref()),
        strs(rows, |r| r.question_text.as_deref()),
        lists(rows, |r| &r.question),
        lists(rows, |r| &r.question_modality),
        lists(rows, |r| &r.context_modality),
        Arc::new(choices.finish()),
        Arc::new(rows.iter().map(|r| Some(r.answer)).collect::<Int64Array>()),
        strs(rows, |r| Some(&*r.context)),
        strs(rows, |r| r.extra.as_deref()),
    ];
    RecordBatch::try_new(schema(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::TaskSet;

    fn q(i: usize) -> Question {
        Question {
            qid: format!("2000-{i}-0-1-2-3"),
            recipe_id: format!("r{i}"),
            task: "visual_cloze".into(),
            split: (i % 2 == 0).then(|| "train".to_string()),
            question: vec!["a.jpg".into(), "@placeholder".into()],
            question_modality: vec!["images".into()],
            question_text: Some("Choose".into()),
            choice_list: vec![Choice::Item("x.jpg".into()), Choice::Item("y.jpg".into())],
            answer: i % 2,
            extra: [("meta".to_string(), serde_json::json!({"b": 1, "a": [i]}))].into_iter().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn streamed_files_match_the_whole_set_writer() {
        let td = tempfile::tempdir().unwrap();
        let qs: Vec<Question> = (0..5).map(q).collect();
        let mut w = TasksetWriter::create(&td.path().join("s")).unwrap();
        w.append(qs[..2].to_vec()).unwrap();
        w.append(Vec::new()).unwrap();
        w.append(qs[2..].to_vec()).unwrap();
        w.finish(&Manifest::new("taskset")).unwrap();
        let ts = TaskSet { questions: qs.clone(), extra: Default::default() };
        ts.write_json(&td.path().join("whole.json")).unwrap();
        let a = std::fs::read(td.path().join("s").join(QUESTIONS_JSON)).unwrap();
        let b = std::fs::read(td.path().join("whole.json")).unwrap();
        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
        assert_eq!(TaskSet::load(&td.path().join("s")).unwrap().questions, qs);
        assert_eq!(stepwise_core::parquet::row_count(&td.path().join("s").join(QUESTIONS_PARQUET)).unwrap(), 5);
        // No temporary files left.
        let names: Vec<String> = std::fs::read_dir(td.path().join("s"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("partial")), "{names:?}");
    }

    #[test]
    fn the_files_do_not_depend_on_how_questions_are_chunked() {
        // Enough rows for several Parquet pages: page boundaries used to follow the chunks (a merged sweep's
        // Parquet differed from a single run's while its JSON was equal).
        let td = tempfile::tempdir().unwrap();
        let qs: Vec<Question> = (0..5000).map(q).collect();
        let write = |name: &str, cuts: &[usize]| {
            let mut w = TasksetWriter::create(&td.path().join(name)).unwrap();
            let mut start = 0;
            for &end in cuts.iter().chain([qs.len()].iter()) {
                w.append(qs[start..end].to_vec()).unwrap();
                start = end;
            }
            w.finish(&Manifest::new("taskset")).unwrap();
            stepwise_core::output::read_tree(&td.path().join(name)).unwrap()
        };
        let whole = write("whole", &[]);
        assert_eq!(whole, write("chunked", &[1, 700, 2048, 2049, 4999]));
        assert_eq!(whole, write("halves", &[2500]));
    }

    #[test]
    fn grouped_appends_give_the_same_files_as_questions_with_their_context() {
        let td = tempfile::tempdir().unwrap();
        let ctx = |n: usize| -> Vec<ContextStep> {
            (0..n)
                .map(|i| ContextStep {
                    id: serde_json::json!(i),
                    body: Some(format!("step \"{i}\"")),
                    title: Some(format!("T{i}")),
                    ..Default::default()
                })
                .collect()
        };
        let groups = vec![
            ProcedureQuestions { context: ctx(3), questions: (0..2).map(q).collect() },
            ProcedureQuestions { context: ctx(1), questions: vec![q(2)] },
            ProcedureQuestions { context: Vec::new(), questions: vec![q(3)] },
        ];
        let mut whole = Vec::new();
        for g in &groups {
            for mut x in g.questions.clone() {
                x.context = g.context.clone();
                whole.push(x);
            }
        }
        let mut w = TasksetWriter::create(&td.path().join("g")).unwrap();
        w.append_grouped(groups).unwrap();
        w.finish(&Manifest::new("taskset")).unwrap();
        let mut w = TasksetWriter::create(&td.path().join("q")).unwrap();
        w.append(whole.clone()).unwrap();
        w.finish(&Manifest::new("taskset")).unwrap();
        for f in [QUESTIONS_JSON, QUESTIONS_PARQUET] {
            let a = std::fs::read(td.path().join("g").join(f)).unwrap();
            let b = std::fs::read(td.path().join("q").join(f)).unwrap();
            assert!(a == b, "{f} differs");
        }
        assert_eq!(TaskSet::load(&td.path().join("g")).unwrap().questions, whole);
    }

    #[test]
    fn the_direct_writer_gives_the_canonical_bytes() {
        let mut qs: Vec<Question> = (0..3).map(q).collect();
        qs[0].context = vec![
            ContextStep {
                id: serde_json::json!(1),
                body: Some("b \"q\" é\n".into()),
                images: Some(vec!["i.jpg".into()]),
                ..Default::default()
            },
            ContextStep { id: serde_json::json!("x"), title: Some("T".into()), ..Default::default() },
            ContextStep {
                id: serde_json::json!(3),
                extra: [("videos".to_string(), serde_json::json!([]))].into_iter().collect(),
                ..Default::default()
            },
        ];
        qs[1].choice_list = vec![Choice::Sequence(vec!["a".into(), "b".into()]), Choice::Sequence(vec![])];
        qs[1].question_text = None;
        // An unknown field named like a known one loses to the known field, as in `to_json`.
        qs[2].extra.insert("qid".into(), serde_json::json!("shadow"));
        qs[2].extra.insert("zzz".into(), serde_json::json!({"b": [1, 2], "a": null}));
        for q in &qs {
            let mut mine = Vec::new();
            write_question(&mut mine, q, &context_json(&q.context), &ExtraJson::of(&q.extra)).unwrap();
            let want = stepwise_core::json::to_canonical_string(&q.to_json());
            assert_eq!(String::from_utf8(mine).unwrap(), want);
            assert_eq!(context_json(&q.context), stepwise_core::json::to_canonical_string(&q.to_json()["context"]));
        }
    }

    #[test]
    fn an_empty_set_is_valid_json_and_an_unfinished_writer_leaves_nothing() {
        let td = tempfile::tempdir().unwrap();
        let w = TasksetWriter::create(&td.path().join("e")).unwrap();
        w.finish(&Manifest::new("taskset")).unwrap();
        let text = std::fs::read_to_string(td.path().join("e").join(QUESTIONS_JSON)).unwrap();
        assert_eq!(text, "{\"data\":[\n]}\n");
        let mut w = TasksetWriter::create(&td.path().join("u")).unwrap();
        w.append(vec![q(1)]).unwrap();
        drop(w);
        assert_eq!(std::fs::read_dir(td.path().join("u")).unwrap().count(), 0);
    }
}
