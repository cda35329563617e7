//! Reading what `stepwise eval` scores: multiple-choice predictions, order predictions, annotators' orders and
//! sequencing instances. Every error names the file, the record (line, or list index) and the field.
//!
//! Formats:
//! - multiple-choice JSONL: one `{"qid": "...", "answer": i}` per line (`qid` a string or number, `answer` an
//!   integer, or `null` for "no answer", which counts as missing);
//! - RecipeQA's official lists: a JSON object `{"textual_cloze": [i, ...], ...}` (one list per task, answers in
//!   the task's file order) or a bare JSON array for one task (`--task`);
//! - order JSONL: one `{"id": "...", "order": [item indices in predicted procedural order]}` per line;
//! - annotation JSONL: one `{"id": "...", "annotator": "...", "order": [...], "alternatives": [[...], ...]}`
//!   per line (`alternatives` optional);
//! - sequencing instances: JSONL of `stepwise_core::SequencingInstance`, or a folder holding `instances.jsonl`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use stepwise_core::json::{Obj, for_each_jsonl, kind, parse_json, parse_jsonl, read_text};
use stepwise_core::sequencing::{INSTANCES_JSONL, OrderPrediction, SequencingInstance};
use stepwise_core::{Error, Location, Result, TaskSet};

use crate::sequence_metrics::check_permutation;

/// One multiple-choice prediction with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoiceRecord {
    pub qid: String,
    /// The predicted 0-based choice index as written (may be out of range: scored as invalid); `None` = no answer.
    pub answer: Option<i64>,
    /// `file:line` or `file:task[index]`, for messages.
    pub origin: String,
}

/// How a multiple-choice predictions file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChoiceFormat {
    /// Decide from the content: a JSON array, or an object whose values are all arrays (or null), is the official
    /// layout; anything else is read as JSONL.
    #[default]
    Auto,
    Jsonl,
    Official,
}

impl ChoiceFormat {
    pub fn parse(s: &str) -> Option<ChoiceFormat> {
        match s {
            "auto" => Some(ChoiceFormat::Auto),
            "jsonl" => Some(ChoiceFormat::Jsonl),
            "official" => Some(ChoiceFormat::Official),
            _ => None,
        }
    }
}

/// Read multiple-choice predictions for `taskset`. Official lists are matched to the questions of each task in
/// file order (so they need the task set); `task` names the task of a bare array.
pub fn read_choice_predictions(
    path: &Path,
    format: ChoiceFormat,
    taskset: Option<&TaskSet>,
    task: Option<&str>,
) -> Result<Vec<ChoiceRecord>> {
    let text = read_text(path)?;
    let official = match format {
        ChoiceFormat::Jsonl => None,
        ChoiceFormat::Official => Some(parse_json(path, &text)?),
        ChoiceFormat::Auto => match parse_json(path, &text) {
            Ok(v) if looks_official(&v) => Some(v),
            _ => None,
        },
    };
    let records = match official {
        Some(v) => {
            let Some(ts) = taskset else {
                return Err(Error::usage(format!(
                    "{}: official per-task answer lists are matched to one task set in file order; give one \
                     task set, or JSONL predictions with qids",
                    path.display()
                )));
            };
            official_records(path, &v, ts, task)?
        }
        None => choice_jsonl_records(path, &text)?,
    };
    if records.is_empty() {
        return Err(Error::Empty { path: path.to_path_buf(), what: "no predictions".into() });
    }
    check_unique(records.iter().map(|r| (r.qid.as_str(), r.origin.as_str())))?;
    Ok(records)
}

/// The optional key of a prediction line naming the model that made it (`stepwise predict`, `baseline`,
/// `train-seq`, `study` write it); eval reports it so results say whose they are.
pub const MODEL_FIELD: &str = "model";

/// The distinct models named by the lines of a JSONL predictions file (sorted; empty when no line names one or
/// the file is not JSONL). Call after the file was read as predictions: lines that do not parse are skipped.
pub fn models_in(path: &Path) -> Result<Vec<String>> {
    let text = read_text(path)?;
    let mut models = std::collections::BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(line)
            && let Some(Value::String(m)) = o.get(MODEL_FIELD)
        {
            models.insert(m.clone());
        }
    }
    Ok(models.into_iter().collect())
}

fn looks_official(v: &Value) -> bool {
    match v {
        Value::Array(_) => true,
        Value::Object(m) => !m.is_empty() && m.values().all(|x| matches!(x, Value::Array(_) | Value::Null)),
        _ => false,
    }
}

fn choice_jsonl_records(path: &Path, text: &str) -> Result<Vec<ChoiceRecord>> {
    let mut out = Vec::new();
    for rec in parse_jsonl(path, text)? {
        let loc = Location::Line { line: rec.line, column: None };
        let o = Obj::new(&rec.value, path, &loc, "")?;
        if o.get("qid").is_none() && o.get("order").is_some() {
            return Err(o.error(
                "qid",
                "missing; this line has `order`, so the file looks like sequencing predictions ({id, order}): \
                 score them against the sequencing instances they order (`stepwise eval SEQ_DIR -p FILE`); a \
                 multiple-choice task set takes {qid, answer} lines",
            ));
        }
        let qid = match o.req("qid")? {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(o.error("qid", format!("expected a string or a number, found {}", kind(other))));
            }
        };
        let answer = answer_value(o.req("answer")?).map_err(|m| o.error("answer", m))?;
        out.push(ChoiceRecord { qid, answer, origin: format!("{}:{}", path.display(), rec.line) });
    }
    Ok(out)
}

/// An answer index: an integer (any sign; range is checked when scoring) or null.
fn answer_value(v: &Value) -> std::result::Result<Option<i64>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(Some(i)),
            None => Err(format!("expected an integer choice index, found {n}")),
        },
        other => Err(format!("expected an integer choice index or null, found {}", kind(other))),
    }
}

fn official_records(path: &Path, v: &Value, ts: &TaskSet, task: Option<&str>) -> Result<Vec<ChoiceRecord>> {
    let lists: Vec<(String, &Vec<Value>)> = match v {
        Value::Array(list) => {
            let Some(t) = task else {
                return Err(Error::usage(format!(
                    "{}: a bare list of answers needs --task to say which task it is for",
                    path.display()
                )));
            };
            vec![(t.to_string(), list)]
        }
        Value::Object(m) => m
            .iter()
            .filter(|(t, _)| task.is_none_or(|want| want == t.as_str()))
            .filter_map(|(t, list)| match list {
                Value::Array(a) => Some((t.clone(), a)),
                _ => None,
            })
            .collect(),
        other => {
            return Err(Error::field(
                path,
                Location::File,
                "(file)",
                format!("expected an object of per-task lists or an array, found {}", kind(other)),
            ));
        }
    };
    let mut out = Vec::new();
    for (t, list) in lists {
        let questions: Vec<_> = ts.of_task(&t).collect();
        if questions.len() != list.len() {
            return Err(Error::bad_input(format!(
                "{}: task `{t}`: the list has {} answers but the task set has {} {t} questions; official lists must \
                 give one answer per question, in file order",
                path.display(),
                list.len(),
                questions.len()
            )));
        }
        for (i, (q, a)) in questions.iter().zip(list).enumerate() {
            let answer = answer_value(a)
                .map_err(|m| Error::field(path, Location::Record(format!("{t}[{i}]")), "(answer)", m))?;
            out.push(ChoiceRecord { qid: q.qid.clone(), answer, origin: format!("{}:{t}[{i}]", path.display()) });
        }
    }
    Ok(out)
}

/// One predicted order with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRecord {
    pub id: String,
    pub order: Vec<usize>,
    /// The line in the predictions file (or a record path for predictions made in memory).
    pub location: Location,
}

impl OrderRecord {
    /// Predictions made in memory (e.g. by a baseline) are located by their position in the list.
    pub fn from_predictions(preds: &[stepwise_core::OrderPrediction]) -> Vec<OrderRecord> {
        preds
            .iter()
            .enumerate()
            .map(|(i, p)| OrderRecord {
                id: p.id.clone(),
                order: p.order.clone(),
                location: Location::Record(format!("predictions[{i}]")),
            })
            .collect()
    }
}

/// Write order predictions atomically, one `{"id", "order"}` line each (keys sorted, compact), with
/// `"model": model` on every line when given (so that files from several models can be concatenated and scored
/// by model).
pub fn write_order_predictions(path: &Path, predictions: &[OrderPrediction], model: Option<&str>) -> Result<()> {
    stepwise_core::output::write_file_atomic(path, |w| {
        for p in predictions {
            let mut line = serde_json::json!({"id": p.id, "order": p.order});
            if let Some(m) = model {
                line["model"] = Value::from(m);
            }
            stepwise_core::json::write_canonical(w, &line)?;
            std::io::Write::write_all(w, b"\n")?;
        }
        Ok(())
    })
}

/// Read order predictions (`{"id", "order"}` per line), streaming (large files are not held in memory as
/// JSON). Orders are checked to be lists of non-negative integers here; whether they are permutations of an
/// instance's items is checked when matching.
pub fn read_order_predictions(path: &Path) -> Result<Vec<OrderRecord>> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for_each_jsonl(path, |rec| {
        let loc = Location::Line { line: rec.line, column: None };
        let o = Obj::new(&rec.value, path, &loc, "")?;
        if o.get("order").is_none() && o.get("qid").is_some() && o.get("answer").is_some() {
            return Err(o.error(
                "order",
                "missing; this line has `qid` and `answer`, so the file looks like multiple-choice predictions: \
                 score them against the task set they answer (`stepwise eval TASKSET -p FILE`); sequencing \
                 instances take {id, order} lines",
            ));
        }
        let id = o.req_str("id")?.to_string();
        let order = index_list(&o, "order")?;
        if let Some(first) = seen.insert(id.clone(), rec.line) {
            return Err(duplicate_line(path, id, first, rec.line));
        }
        out.push(OrderRecord { id, order, location: loc });
        Ok(())
    })?;
    if out.is_empty() {
        return Err(Error::Empty { path: path.to_path_buf(), what: "no predictions".into() });
    }
    Ok(out)
}

fn duplicate_line(path: &Path, id: String, first: usize, second: usize) -> Error {
    Error::Duplicate {
        id,
        first: format!("{}:{first}", path.display()),
        second: format!("{}:{second}", path.display()),
    }
}

fn index_list(o: &Obj<'_>, key: &str) -> Result<Vec<usize>> {
    indices(o, key, o.req(key)?)
}

/// `value` as a list of item indices; errors name `field` (and `field[i]`) in `o`'s record.
fn indices(o: &Obj<'_>, field: &str, value: &Value) -> Result<Vec<usize>> {
    let Value::Array(list) = value else {
        return Err(o.error(field, format!("expected an array of item indices, found {}", kind(value))));
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| match v.as_u64() {
            Some(x) if usize::try_from(x).is_ok() => Ok(x as usize),
            _ => Err(o.error(&format!("{field}[{i}]"), format!("expected an item index (integer ≥ 0), found {v}"))),
        })
        .collect()
}

/// One annotator's orders for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationRecord {
    pub id: String,
    pub annotator: String,
    pub order: Vec<usize>,
    pub alternatives: Vec<Vec<usize>>,
    pub line: usize,
}

/// Read annotators' orders (`{"id", "annotator", "order", "alternatives"?}` per line); one line per
/// (instance, annotator).
pub fn read_annotations(path: &Path) -> Result<Vec<AnnotationRecord>> {
    let mut out = Vec::new();
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    for_each_jsonl(path, |rec| {
        let loc = Location::Line { line: rec.line, column: None };
        let o = Obj::new(&rec.value, path, &loc, "")?;
        let id = o.req_str("id")?.to_string();
        let annotator = match o.req("annotator")? {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(o.error("annotator", format!("expected a string or a number, found {}", kind(other))));
            }
        };
        let order = index_list(&o, "order")?;
        let mut alternatives = Vec::new();
        if let Some(alts) = o.opt_array("alternatives")? {
            for (i, a) in alts.iter().enumerate() {
                alternatives.push(indices(&o, &format!("alternatives[{i}]"), a)?);
            }
        }
        if let Some(first) = seen.insert((id.clone(), annotator.clone()), rec.line) {
            return Err(duplicate_line(path, format!("{id} / annotator {annotator}"), first, rec.line));
        }
        out.push(AnnotationRecord { id, annotator, order, alternatives, line: rec.line });
        Ok(())
    })?;
    if out.is_empty() {
        return Err(Error::Empty { path: path.to_path_buf(), what: "no annotations".into() });
    }
    Ok(out)
}

/// Where sequencing instances live: `path` itself (a JSONL file) or `path/instances.jsonl`.
pub fn instances_file(path: &Path) -> PathBuf {
    if path.is_dir() { path.join(INSTANCES_JSONL) } else { path.to_path_buf() }
}

/// Read sequencing instances (a JSONL file, or a folder with `instances.jsonl`), streaming, checking unique ids,
/// that every reference is a permutation of the instance's items, and that precedence constraints (when present)
/// name two different items and hold in every reference (so they are acyclic).
pub fn read_instances(path: &Path) -> Result<Vec<SequencingInstance>> {
    let file = instances_file(path);
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for_each_jsonl(&file, |rec| {
        let loc = Location::Line { line: rec.line, column: None };
        {
            // Field-by-field checks first for precise messages, then serde for the whole record.
            let o = Obj::new(&rec.value, &file, &loc, "")?;
            o.req_str("id")?;
            o.req_array("items")?;
            o.req_array("references")?;
        }
        let inst: SequencingInstance = serde_json::from_value(rec.value)
            .map_err(|e| Error::field(&file, loc.clone(), "(record)", e.to_string()))?;
        if inst.references.is_empty() {
            return Err(Error::field(&file, loc, "references", "must hold at least one order (the authored one)"));
        }
        for (r, order) in inst.references.iter().enumerate() {
            check_permutation(order, inst.items.len()).map_err(|e| {
                Error::field(
                    &file,
                    loc.clone(),
                    format!("references[{r}]"),
                    format!("not an order of the {} items: {e}", inst.items.len()),
                )
            })?;
        }
        let n = inst.items.len();
        if let Some((k, [a, b])) =
            inst.constraint_pairs().iter().enumerate().find(|(_, [a, b])| a >= &n || b >= &n || a == b)
        {
            return Err(Error::field(
                &file,
                loc,
                format!("constraints[{k}]"),
                format!("[{a}, {b}] is no pair of two different items of the {n}"),
            ));
        }
        if let Some(r) = inst.references.iter().position(|o| !inst.satisfies_constraints(o)) {
            return Err(Error::field(
                &file,
                loc,
                format!("references[{r}]"),
                "breaks the instance's precedence constraints (every reference must satisfy them)",
            ));
        }
        if let Some(first) = seen.insert(inst.id.clone(), rec.line) {
            return Err(duplicate_line(&file, inst.id, first, rec.line));
        }
        out.push(inst);
        Ok(())
    })?;
    if out.is_empty() {
        return Err(Error::Empty { path: file, what: "no sequencing instances".into() });
    }
    Ok(out)
}

/// Error on the first repeated id, naming both records.
pub(crate) fn check_unique<'a>(items: impl Iterator<Item = (&'a str, &'a str)>) -> Result<()> {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for (id, origin) in items {
        if let Some(first) = seen.insert(id, origin) {
            return Err(Error::Duplicate { id: id.to_string(), first: first.to_string(), second: origin.to_string() });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn taskset() -> TaskSet {
        let q = |qid: &str, task: &str| serde_json::json!({"qid": qid, "recipe_id": "r", "task": task, "question": ["a"], "choice_list": ["x", "y"], "answer": 0});
        let v = serde_json::json!({"data": [q("1", "textual_cloze"), q("2", "visual_cloze"), q("3", "textual_cloze")]});
        TaskSet::from_json(&v, Path::new("t.json")).unwrap()
    }

    #[test]
    fn jsonl_choices_with_errors_naming_line_and_field() {
        let td = tempfile::tempdir().unwrap();
        let p = write(td.path(), "p.jsonl", "{\"qid\": \"1\", \"answer\": 0}\n\n{\"qid\": 2, \"answer\": null}\n");
        let r = read_choice_predictions(&p, ChoiceFormat::Auto, None, None).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].qid, "2");
        assert_eq!(r[1].answer, None);
        assert!(r[1].origin.ends_with("p.jsonl:3"));

        let p = write(td.path(), "bad.jsonl", "{\"qid\": \"1\", \"answer\": 0}\n{\"qid\": \"2\", \"answer\": \"b\"}\n");
        let e = read_choice_predictions(&p, ChoiceFormat::Auto, None, None).unwrap_err().to_string();
        assert!(
            e.ends_with("bad.jsonl:2: field `answer`: expected an integer choice index or null, found a string"),
            "{e}"
        );

        let p = write(td.path(), "dup.jsonl", "{\"qid\": \"1\", \"answer\": 0}\n{\"qid\": \"1\", \"answer\": 1}\n");
        let e = read_choice_predictions(&p, ChoiceFormat::Auto, None, None).unwrap_err();
        assert!(e.to_string().contains("duplicate id \"1\""), "{e}");
        assert_eq!(e.exit_code(), 2);

        let p = write(td.path(), "float.jsonl", "{\"qid\": \"1\", \"answer\": 1.5}\n");
        assert!(read_choice_predictions(&p, ChoiceFormat::Auto, None, None).is_err());
    }

    #[test]
    fn single_line_jsonl_is_not_mistaken_for_official_lists() {
        let td = tempfile::tempdir().unwrap();
        let p = write(td.path(), "one.jsonl", "{\"qid\": \"1\", \"answer\": 1}\n");
        let r = read_choice_predictions(&p, ChoiceFormat::Auto, Some(&taskset()), None).unwrap();
        assert_eq!(r, vec![ChoiceRecord { qid: "1".into(), answer: Some(1), origin: format!("{}:1", p.display()) }]);
    }

    #[test]
    fn official_lists_match_file_order() {
        let td = tempfile::tempdir().unwrap();
        let ts = taskset();
        let p = write(td.path(), "o.json", r#"{"textual_cloze": [1, 0], "visual_cloze": [null]}"#);
        let r = read_choice_predictions(&p, ChoiceFormat::Auto, Some(&ts), None).unwrap();
        let got: Vec<_> = r.iter().map(|x| (x.qid.as_str(), x.answer)).collect();
        assert_eq!(got, vec![("1", Some(1)), ("3", Some(0)), ("2", None)]);

        let p = write(td.path(), "short.json", r#"{"textual_cloze": [1]}"#);
        let e = read_choice_predictions(&p, ChoiceFormat::Auto, Some(&ts), None).unwrap_err().to_string();
        assert!(e.contains("the list has 1 answers but the task set has 2 textual_cloze questions"), "{e}");

        let p = write(td.path(), "bare.json", "[0, 1]");
        assert!(read_choice_predictions(&p, ChoiceFormat::Auto, Some(&ts), None).is_err());
        let r = read_choice_predictions(&p, ChoiceFormat::Auto, Some(&ts), Some("textual_cloze")).unwrap();
        assert_eq!(r.len(), 2);

        let p = write(td.path(), "badval.json", r#"{"textual_cloze": [1, "x"]}"#);
        let e = read_choice_predictions(&p, ChoiceFormat::Auto, Some(&ts), None).unwrap_err().to_string();
        assert!(e.contains("textual_cloze[1]"), "{e}");
    }

    #[test]
    fn order_predictions() {
        let td = tempfile::tempdir().unwrap();
        let p = write(td.path(), "o.jsonl", "{\"id\": \"a\", \"order\": [2, 0, 1]}\n");
        assert_eq!(read_order_predictions(&p).unwrap()[0].order, vec![2, 0, 1]);
        let p = write(td.path(), "neg.jsonl", "{\"id\": \"a\", \"order\": [2, -1, 1]}\n");
        let e = read_order_predictions(&p).unwrap_err().to_string();
        assert!(e.contains("neg.jsonl:1: field `order[1]`"), "{e}");
        let p = write(td.path(), "empty.jsonl", "\n");
        assert!(read_order_predictions(&p).is_err());
    }

    #[test]
    fn annotations() {
        let td = tempfile::tempdir().unwrap();
        let p = write(
            td.path(),
            "a.jsonl",
            "{\"id\": \"a\", \"annotator\": \"w1\", \"order\": [0, 1], \"alternatives\": [[1, 0]]}\n\
             {\"id\": \"a\", \"annotator\": 2, \"order\": [1, 0]}\n",
        );
        let r = read_annotations(&p).unwrap();
        assert_eq!(r[0].alternatives, vec![vec![1, 0]]);
        assert_eq!(r[1].annotator, "2");
        let p = write(
            td.path(),
            "b.jsonl",
            "{\"id\": \"a\", \"annotator\": \"w\", \"order\": [0], \"alternatives\": [[0, \"x\"]]}\n",
        );
        let e = read_annotations(&p).unwrap_err().to_string();
        assert!(e.contains("field `alternatives[0][1]`"), "{e}");
    }

    #[test]
    fn instances_are_validated() {
        let td = tempfile::tempdir().unwrap();
        let line = |id: &str, refs: &str| {
            format!(
                "{{\"id\": \"{id}\", \"procedure\": \"p\", \"split\": \"test\", \"modality\": \"text\", \
                 \"items\": [{{\"step\": 0}}, {{\"step\": 1}}], \"references\": {refs}}}\n"
            )
        };
        let dir = td.path().join("seq");
        std::fs::create_dir(&dir).unwrap();
        write(&dir, INSTANCES_JSONL, &(line("a", "[[1, 0]]") + &line("b", "[[0, 1], [1, 0]]")));
        assert_eq!(read_instances(&dir).unwrap().len(), 2);
        let p = write(td.path(), "bad.jsonl", &line("a", "[[1, 1]]"));
        let e = read_instances(&p).unwrap_err().to_string();
        assert!(e.contains("bad.jsonl:1: field `references[0]`: not an order of the 2 items"), "{e}");
        let p = write(td.path(), "none.jsonl", &line("a", "[]"));
        assert!(read_instances(&p).is_err());
        // Precedence constraints: two different items, and every reference satisfies them.
        let constrained =
            |id: &str, refs: &str, cons: &str| line(id, refs).replace("}\n", &format!(", \"constraints\": {cons}}}\n"));
        let p = write(td.path(), "ok.jsonl", &constrained("a", "[[1, 0]]", "[[1, 0]]"));
        assert_eq!(read_instances(&p).unwrap()[0].constraints, Some(vec![[1, 0]]));
        for (cons, field) in
            [("[[0, 2]]", "constraints[0]"), ("[[1, 0], [0, 0]]", "constraints[1]"), ("[[0, 1]]", "references[0]")]
        {
            let p = write(td.path(), "c.jsonl", &constrained("a", "[[1, 0]]", cons));
            let e = read_instances(&p).unwrap_err().to_string();
            assert!(e.contains(&format!("c.jsonl:1: field `{field}`")), "{cons}: {e}");
        }
    }
}
