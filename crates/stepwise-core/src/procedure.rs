//! Procedures and steps, in the procedure-JSONL interchange format (../shared/data/README.md).
//!
//! The schema is extended compatibly: `annotations` (procedure and step level) are new optional keys, and any
//! unknown key is kept in `extra` so a file round-trips byte for byte through [`Procedure::from_json`] and
//! [`Procedure::to_json`] + [`crate::json::write_canonical`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Location, Result};
use crate::json::Obj;

/// One step of a procedure: optional title, optional text, zero or more images.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    pub title: Option<String>,
    /// Plain text; may contain `\n` between lines of one step.
    pub text: Option<String>,
    /// Image paths relative to the corpus's image root.
    pub images: Vec<String>,
    /// Labelled spans and links (R2VQ-style), or ground truth from the built-in world.
    pub annotations: Option<StepAnnotations>,
    /// Unknown keys, kept verbatim.
    pub extra: BTreeMap<String, Value>,
}

/// A procedure: metadata and ordered steps.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Procedure {
    /// Unique within a corpus, e.g. `gnome-recipes/R_Borscht_by_sylvia`.
    pub id: String,
    pub title: Option<String>,
    /// Where it comes from, e.g. `<owner>/<repo>@<commit>` or `stepwise-world@seed=7`.
    pub source: Option<String>,
    /// SPDX-style licence id.
    pub license: Option<String>,
    pub lang: Option<String>,
    pub category: Option<String>,
    pub steps: Vec<Step>,
    pub ingredients: Option<Vec<String>>,
    /// Photos not tied to a step (howtocook).
    pub gallery: Option<Vec<String>>,
    pub annotations: Option<ProcedureAnnotations>,
    /// Unknown keys, kept verbatim.
    pub extra: BTreeMap<String, Value>,
}

/// A labelled span of a step's text (an R2VQ entity or event mention, a tool, a habitat...).
///
/// Offsets are Unicode scalar (char) offsets into the step text, end exclusive. An *implicit* argument — one the
/// text leaves out, like the bowl in "Add the eggs." — has no offsets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Unique within the procedure, e.g. `s3.e2`.
    pub id: String,
    /// e.g. `EVENT`, `INGREDIENT`, `TOOL`, `HABITAT`, `CONTAINER`, `RESULT`.
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<usize>,
    /// The surface text (or, for implicit spans, the canonical name of what is meant).
    pub text: String,
    /// Free attributes (entity id, state, count, orientation...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, String>,
}

impl Span {
    /// True when the span is not written in the text (an implicit argument).
    pub fn is_implicit(&self) -> bool {
        self.start.is_none()
    }
}

/// A typed relation between two spans (argument-of, coreference, result-of...), possibly across steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub label: String,
    pub from: String,
    pub to: String,
}

/// Annotations of one step.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StepAnnotations {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<Span>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    /// Anything else (kept verbatim): e.g. the world's state after the step.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// The valid step orders of a procedure, when known (exactly, from the world's DAG, or from human annotation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidOrders {
    /// The number of valid orders (exact). Saturates at `u64::MAX`.
    pub count: u64,
    /// Valid orders as lists of step indices (0-based). All of them when `complete`, otherwise a sample.
    pub orders: Vec<Vec<usize>>,
    pub complete: bool,
}

/// Procedure-level annotations.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProcedureAnnotations {
    /// Step-order constraints: `[a, b]` means step a must come before step b (0-based step indices).
    /// The transitive reduction of the step DAG when it comes from the built-in world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_constraints: Option<Vec<[usize; 2]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_orders: Option<ValidOrders>,
    /// Domain ground truth (the world's action DAG, entity states, props...), schema owned by its producer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<Value>,
    /// Anything else (kept verbatim).
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

const PROCEDURE_KEYS: &[&str] =
    &["id", "title", "source", "license", "lang", "category", "steps", "ingredients", "gallery", "annotations"];
const STEP_KEYS: &[&str] = &["title", "text", "images", "annotations"];

impl Procedure {
    /// Read a procedure from a parsed JSON record; errors name `path`, `location` and the field.
    pub fn from_json(value: &Value, path: &Path, location: &Location) -> Result<Self> {
        let obj = Obj::new(value, path, location, "")?;
        let id = obj.req_str("id")?;
        if id.trim().is_empty() {
            return Err(obj.error("id", "must not be empty"));
        }
        let steps_json = obj.req_array("steps")?;
        let mut steps = Vec::with_capacity(steps_json.len());
        for (i, s) in steps_json.iter().enumerate() {
            let prefix = format!("steps[{i}].");
            let so = Obj::new(s, path, location, &prefix)?;
            let annotations = match so.get("annotations") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    serde_json::from_value::<StepAnnotations>(v.clone())
                        .map_err(|e| so.error("annotations", e.to_string()))?,
                ),
            };
            steps.push(Step {
                title: so.opt_str("title")?.map(str::to_string),
                text: so.opt_str("text")?.map(str::to_string),
                images: so.opt_str_array("images")?.unwrap_or_default(),
                annotations,
                extra: so.extra(STEP_KEYS),
            });
        }
        let annotations = match obj.get("annotations") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                serde_json::from_value::<ProcedureAnnotations>(v.clone())
                    .map_err(|e| obj.error("annotations", e.to_string()))?,
            ),
        };
        Ok(Procedure {
            id: id.to_string(),
            title: obj.opt_str("title")?.map(str::to_string),
            source: obj.opt_str("source")?.map(str::to_string),
            license: obj.opt_str("license")?.map(str::to_string),
            lang: obj.opt_str("lang")?.map(str::to_string),
            category: obj.opt_str("category")?.map(str::to_string),
            steps,
            ingredients: obj.opt_str_array("ingredients")?,
            gallery: obj.opt_str_array("gallery")?,
            annotations,
            extra: obj.extra(PROCEDURE_KEYS),
        })
    }

    /// The procedure as a JSON value in the interchange schema. The five metadata keys and each step's
    /// `title`/`text`/`images` are always written (null when absent); optional keys only when present.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        m.insert("id".into(), Value::String(self.id.clone()));
        m.insert("title".into(), opt_string(&self.title));
        m.insert("source".into(), opt_string(&self.source));
        m.insert("license".into(), opt_string(&self.license));
        m.insert("lang".into(), opt_string(&self.lang));
        m.insert("category".into(), opt_string(&self.category));
        m.insert("steps".into(), Value::Array(self.steps.iter().map(Step::to_json).collect()));
        if let Some(ing) = &self.ingredients {
            m.insert("ingredients".into(), strings(ing));
        }
        if let Some(g) = &self.gallery {
            m.insert("gallery".into(), strings(g));
        }
        if let Some(a) = &self.annotations {
            m.insert("annotations".into(), serde_json::to_value(a).expect("annotations serialize"));
        }
        Value::Object(m)
    }

    /// All image paths of the steps (not the gallery), in step order, with repeats.
    pub fn step_images(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().flat_map(|s| s.images.iter().map(String::as_str))
    }

    /// The number of steps that have at least one image.
    pub fn image_step_count(&self) -> usize {
        self.steps.iter().filter(|s| !s.images.is_empty()).count()
    }
}

impl Step {
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        m.insert("title".into(), opt_string(&self.title));
        m.insert("text".into(), opt_string(&self.text));
        m.insert("images".into(), strings(&self.images));
        if let Some(a) = &self.annotations {
            m.insert("annotations".into(), serde_json::to_value(a).expect("annotations serialize"));
        }
        Value::Object(m)
    }

    /// Title and text joined by a newline (whichever exist): the step's full text for encoders and statistics.
    pub fn full_text(&self) -> String {
        match (&self.title, &self.text) {
            (Some(t), Some(x)) => format!("{t}\n{x}"),
            (Some(t), None) => t.clone(),
            (None, Some(x)) => x.clone(),
            (None, None) => String::new(),
        }
    }
}

fn opt_string(s: &Option<String>) -> Value {
    s.as_ref().map_or(Value::Null, |s| Value::String(s.clone()))
}

fn strings(v: &[String]) -> Value {
    Value::Array(v.iter().map(|s| Value::String(s.clone())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::to_canonical_string;

    #[test]
    fn round_trip_keeps_unknown_keys_and_nulls() {
        let line = r#"{"category":null,"extra_key":{"z":1,"a":2},"id":"x/1","lang":"en","license":"MIT","source":"s","steps":[{"images":["a.jpg"],"note":3,"text":"Mix.","title":null}],"title":"T"}"#;
        let v: Value = serde_json::from_str(line).unwrap();
        let p = Procedure::from_json(&v, Path::new("f"), &Location::Line { line: 1, column: None }).unwrap();
        assert_eq!(p.steps[0].extra["note"], 3);
        assert_eq!(
            to_canonical_string(&p.to_json()),
            r#"{"category":null,"extra_key":{"a":2,"z":1},"id":"x/1","lang":"en","license":"MIT","source":"s","steps":[{"images":["a.jpg"],"note":3,"text":"Mix.","title":null}],"title":"T"}"#
        );
    }

    #[test]
    fn annotations_round_trip() {
        let mut p = Procedure { id: "w/1".into(), ..Default::default() };
        p.steps.push(Step {
            text: Some("Add the eggs.".into()),
            annotations: Some(StepAnnotations {
                spans: vec![Span {
                    id: "s0.c".into(),
                    label: "CONTAINER".into(),
                    start: None,
                    end: None,
                    text: "bowl".into(),
                    attrs: BTreeMap::new(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        });
        p.annotations = Some(ProcedureAnnotations { order_constraints: Some(vec![[0, 1]]), ..Default::default() });
        let v = p.to_json();
        let back = Procedure::from_json(&v, Path::new("f"), &Location::File).unwrap();
        assert_eq!(back, p);
        assert!(back.steps[0].annotations.as_ref().unwrap().spans[0].is_implicit());
    }

    #[test]
    fn missing_id_is_a_field_error() {
        let v = serde_json::json!({"steps": []});
        let e = Procedure::from_json(&v, Path::new("f.jsonl"), &Location::Line { line: 3, column: None }).unwrap_err();
        assert_eq!(e.to_string(), "f.jsonl:3: field `id`: missing");
    }
}
