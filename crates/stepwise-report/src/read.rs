//! Reading the JSON files of a run folder with errors that name the file and the field (`tasks[2].hasty_student.value`).
//! Absent optional parts are `None`; present parts of the wrong type are errors.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stepwise_core::json::{kind, read_json};
use stepwise_core::{Error, Location, Result};

/// A parsed JSON file.
pub struct JsonFile {
    pub path: PathBuf,
    pub value: Value,
}

impl JsonFile {
    pub fn read(path: &Path) -> Result<Self> {
        Ok(JsonFile { path: path.to_path_buf(), value: read_json(path)? })
    }

    pub fn root(&self) -> Node<'_> {
        Node { v: &self.value, file: &self.path, at: String::new() }
    }
}

/// A value inside a JSON file, with its field path for errors.
#[derive(Clone)]
pub struct Node<'a> {
    pub v: &'a Value,
    file: &'a Path,
    at: String,
}

impl<'a> Node<'a> {
    fn child(&self, key: &str, v: &'a Value) -> Node<'a> {
        let at = if self.at.is_empty() { key.to_string() } else { format!("{}.{key}", self.at) };
        Node { v, file: self.file, at }
    }

    /// An error about this value.
    pub fn error(&self, message: impl Into<String>) -> Error {
        let field = if self.at.is_empty() { "(file)".to_string() } else { self.at.clone() };
        Error::field(self.file, Location::File, field, message)
    }

    fn expected(&self, what: &str) -> Error {
        self.error(format!("expected {what}, found {}", kind(self.v)))
    }

    /// The member `key` (absent or null = `None`); an error when this value is not an object.
    pub fn get(&self, key: &str) -> Result<Option<Node<'a>>> {
        match self.v {
            Value::Object(m) => Ok(m.get(key).filter(|v| !v.is_null()).map(|v| self.child(key, v))),
            _ => Err(self.expected("an object")),
        }
    }

    pub fn req(&self, key: &str) -> Result<Node<'a>> {
        self.get(key)?.ok_or_else(|| self.child(key, &Value::Null).error("missing"))
    }

    pub fn is_object(&self) -> bool {
        self.v.is_object()
    }

    pub fn has(&self, key: &str) -> bool {
        self.v.get(key).is_some_and(|v| !v.is_null())
    }

    pub fn f64(&self) -> Result<f64> {
        self.v.as_f64().ok_or_else(|| self.expected("a number"))
    }

    pub fn u64(&self) -> Result<u64> {
        self.v.as_u64().ok_or_else(|| self.expected("a non-negative integer"))
    }

    pub fn bool(&self) -> Result<bool> {
        self.v.as_bool().ok_or_else(|| self.expected("true or false"))
    }

    pub fn str(&self) -> Result<&'a str> {
        self.v.as_str().ok_or_else(|| self.expected("a string"))
    }

    /// The elements, each with its index in the field path.
    pub fn items(&self) -> Result<Vec<Node<'a>>> {
        match self.v {
            Value::Array(a) => Ok(a
                .iter()
                .enumerate()
                .map(|(i, v)| Node { v, file: self.file, at: format!("{}[{i}]", self.at) })
                .collect()),
            _ => Err(self.expected("an array")),
        }
    }

    /// The members in key order.
    pub fn entries(&self) -> Result<Vec<(&'a str, Node<'a>)>> {
        match self.v {
            Value::Object(m) => {
                let mut e: Vec<_> = m.iter().map(|(k, v)| (k.as_str(), self.child(k, v))).collect();
                e.sort_by(|a, b| a.0.cmp(b.0));
                Ok(e)
            }
            _ => Err(self.expected("an object")),
        }
    }

    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        self.get(key)?.map(|n| n.f64()).transpose()
    }

    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        self.get(key)?.map(|n| n.u64()).transpose()
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.get(key)?.map(|n| n.v.as_bool().ok_or_else(|| n.expected("true or false"))).transpose()
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>> {
        self.get(key)?.map(|n| n.str()).transpose()
    }

    pub fn req_f64(&self, key: &str) -> Result<f64> {
        self.req(key)?.f64()
    }

    pub fn req_u64(&self, key: &str) -> Result<u64> {
        self.req(key)?.u64()
    }

    pub fn req_str(&self, key: &str) -> Result<&'a str> {
        self.req(key)?.str()
    }

    /// An estimate `{"value": v, "ci": ...}` with the interval written either as `{"low", "high"}` or as
    /// `[low, high]` (both layouts occur in stepwise outputs); a bare number is an estimate without interval.
    pub fn estimate(&self) -> Result<Estimate> {
        if self.v.is_number() {
            return Ok(Estimate { value: self.f64()?, ci: None });
        }
        let value = self.req_f64("value")?;
        let ci = match self.get("ci")? {
            None => None,
            Some(c) if c.v.is_array() => Some(c.low_high()?),
            Some(c) => Some((c.req_f64("low")?, c.req_f64("high")?)),
        };
        Ok(Estimate { value, ci })
    }

    /// An interval written as `[low, high]`.
    pub fn low_high(&self) -> Result<(f64, f64)> {
        let items = self.items()?;
        if items.len() != 2 {
            return Err(self.error(format!("expected [low, high], found {} values", items.len())));
        }
        Ok((items[0].f64()?, items[1].f64()?))
    }

    pub fn opt_estimate(&self, key: &str) -> Result<Option<Estimate>> {
        self.get(key)?.map(|n| n.estimate()).transpose()
    }
}

/// A value with an optional confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub ci: Option<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> JsonFile {
        JsonFile { path: PathBuf::from("run/audit.json"), value: serde_json::from_str(text).unwrap() }
    }

    #[test]
    fn errors_name_the_file_and_the_field_path() {
        let f = file(r#"{"tasks": [{"hasty_student": {"value": "high"}}]}"#);
        let t = &f.root().req("tasks").unwrap().items().unwrap()[0];
        let e = t.req("hasty_student").unwrap().estimate().unwrap_err().to_string();
        assert!(e.contains("run/audit.json") && e.contains("tasks[0].hasty_student.value"), "{e}");
        let e = f.root().req("missing").err().unwrap().to_string();
        assert!(e.contains("missing"), "{e}");
    }

    #[test]
    fn both_interval_layouts_are_read() {
        let f = file(
            r#"{"a": {"value": 0.5, "ci": [0.4, 0.6]}, "b": {"value": 0.5, "ci": {"low": 0.4, "high": 0.6}}, "c": 0.3}"#,
        );
        let r = f.root();
        assert_eq!(r.req("a").unwrap().estimate().unwrap(), r.req("b").unwrap().estimate().unwrap());
        assert_eq!(r.opt_estimate("c").unwrap(), Some(Estimate { value: 0.3, ci: None }));
        assert_eq!(r.opt_estimate("d").unwrap(), None);
    }
}
