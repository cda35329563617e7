//! JSON and JSONL reading with precise error locations, and canonical (sorted-key) writing.
//!
//! Readers never panic on malformed input: invalid UTF-8 is reported with its byte offset, syntax errors with
//! `file:line:column`, and field errors through [`Obj`], which names the record and the field path.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, IoResultExt, Location, Result};

/// The largest file read whole as text (JSON documents, CoNLL-U): bigger ones are refused before reading, so a
/// hostile or mistaken input cannot exhaust memory (parsed JSON takes several times its text).
pub const MAX_TEXT_FILE: u64 = 1 << 30;
/// The longest line of a line-per-record file (a JSONL record — a procedure, a prediction — or a word-list
/// entry) is kilobytes; reading stops past this.
pub const MAX_LINE: usize = 64 << 20;

/// Read a whole file as UTF-8 text; invalid UTF-8 is an error with the byte offset and line. Files over
/// [`MAX_TEXT_FILE`] are refused.
pub fn read_text(path: &Path) -> Result<String> {
    read_text_within(path, MAX_TEXT_FILE)
}

fn read_text_within(path: &Path, max: u64) -> Result<String> {
    let bytes = crate::paths::read_file_within(
        path,
        max,
        "stepwise reads as one document; split it (JSONL: one record per line)",
    )?;
    text_from_bytes(path, bytes)
}

pub(crate) fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n => format!("{n} bytes"),
    }
}

/// Check that `bytes` read from `path` are UTF-8 (a leading BOM is dropped).
pub fn text_from_bytes(path: &Path, bytes: Vec<u8>) -> Result<String> {
    match String::from_utf8(bytes) {
        Ok(mut s) => {
            if s.starts_with('\u{feff}') {
                s.drain(..3);
            }
            Ok(s)
        }
        Err(e) => {
            let offset = e.utf8_error().valid_up_to();
            let line = 1 + e.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count();
            Err(Error::Utf8 { path: path.to_path_buf(), offset, line })
        }
    }
}

/// Parse a whole JSON document; a syntax error names `file:line:column`.
pub fn parse_json(path: &Path, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| syntax_error(path, 0, &e))
}

/// Read and parse a JSON file.
pub fn read_json(path: &Path) -> Result<Value> {
    let text = read_text(path)?;
    parse_json(path, &text)
}

/// One parsed line of a JSONL file: its 1-based line number and value.
#[derive(Debug)]
pub struct JsonlRecord {
    pub line: usize,
    pub value: Value,
}

/// Parse every non-blank line of a JSONL text. The first syntax error stops parsing and names its line and column.
pub fn parse_jsonl(path: &Path, text: &str) -> Result<Vec<JsonlRecord>> {
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| syntax_error(path, i, &e))?;
        out.push(JsonlRecord { line: i + 1, value });
    }
    Ok(out)
}

/// Read and parse a JSONL file (streamed: lines over [`MAX_LINE`] are refused).
pub fn read_jsonl(path: &Path) -> Result<Vec<JsonlRecord>> {
    let mut out = Vec::new();
    for_each_jsonl(path, |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}

/// Stream the non-blank lines of a JSONL file to `f`, one parsed record at a time, so memory holds one line and
/// not the whole file (large corpora). Errors as [`read_jsonl`]: invalid UTF-8 names its byte offset and line,
/// a syntax error `file:line:column`; the first error from `f` stops reading.
pub fn for_each_jsonl(path: &Path, f: impl FnMut(JsonlRecord) -> Result<()>) -> Result<()> {
    for_each_jsonl_within(path, MAX_LINE, f)
}

fn for_each_jsonl_within(path: &Path, max_line: usize, mut f: impl FnMut(JsonlRecord) -> Result<()>) -> Result<()> {
    for_each_line_within(path, max_line, "one JSONL record per line; is this JSONL?", |line_no, line| {
        if line.trim().is_empty() {
            return Ok(());
        }
        let value: Value = serde_json::from_str(line).map_err(|e| syntax_error(path, line_no - 1, &e))?;
        f(JsonlRecord { line: line_no, value })
    })
}

/// Stream the lines of a text file to `f` with their 1-based numbers, without the line break (`\n` or `\r\n`)
/// or a leading BOM. Memory holds one line: a line longer than `max_line` bytes is refused after reading at most
/// one byte past the bound, the message ending with `hint` (what a line should be); invalid UTF-8 names its byte
/// offset and line. The first error from `f` stops reading.
pub fn for_each_line_within(
    path: &Path,
    max_line: usize,
    hint: &str,
    mut f: impl FnMut(usize, &str) -> Result<()>,
) -> Result<()> {
    use std::io::{BufRead, Read};
    let file = std::fs::File::open(path).at(path)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut buf = Vec::new();
    let (mut offset, mut line_no) = (0usize, 0usize);
    loop {
        buf.clear();
        let n = (&mut reader).take(max_line as u64 + 1).read_until(b'\n', &mut buf).at(path)?;
        if n == 0 {
            return Ok(());
        }
        line_no += 1;
        if n > max_line {
            return Err(Error::bad_input(format!(
                "{}:{line_no}: the line is longer than {} ({hint})",
                path.display(),
                human_bytes(max_line as u64)
            )));
        }
        let mut line = std::str::from_utf8(&buf).map_err(|e| Error::Utf8 {
            path: path.to_path_buf(),
            offset: offset + e.valid_up_to(),
            line: line_no,
        })?;
        if line_no == 1 {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        offset += n;
        let line = line.strip_suffix('\n').unwrap_or(line);
        f(line_no, line.strip_suffix('\r').unwrap_or(line))?;
    }
}

fn syntax_error(path: &Path, line_offset: usize, e: &serde_json::Error) -> Error {
    let what = match e.classify() {
        serde_json::error::Category::Eof => "unexpected end of input",
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Data => "unexpected JSON value",
        serde_json::error::Category::Io => "read error",
    };
    // serde_json's message ends with " at line L column C"; we print our own location instead.
    let msg = e.to_string();
    let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
    Error::Syntax {
        path: path.to_path_buf(),
        location: Location::Line { line: line_offset + e.line().max(1), column: Some(e.column()) },
        message: format!("{what}: {msg}"),
    }
}

/// Write `s` as a JSON string, the bytes `serde_json::to_writer` writes: a string without a quote, a backslash or
/// a control character (nearly every one stepwise writes) is copied whole after one branch-free scan; any other
/// goes through serde_json's escaper (a byte at a time).
pub fn write_str<W: Write + ?Sized>(w: &mut W, s: &str) -> std::io::Result<()> {
    let plain = !s.bytes().fold(false, |needs, b| needs | (b < 0x20) | (b == b'"') | (b == b'\\'));
    if plain {
        w.write_all(b"\"")?;
        w.write_all(s.as_bytes())?;
        w.write_all(b"\"")
    } else {
        serde_json::to_writer(w, s).map_err(std::io::Error::other)
    }
}

/// Write `value` as compact JSON with object keys sorted (recursively), the canonical form of stepwise files.
/// Strings are written as UTF-8 (no `\u` escapes for non-ASCII), like Python's `json.dumps(ensure_ascii=False,
/// sort_keys=True, separators=(",", ":"))`.
pub fn write_canonical<W: Write + ?Sized>(w: &mut W, value: &Value) -> std::io::Result<()> {
    match value {
        Value::Object(map) => {
            // serde_json's map iterates in key order unless a crate in the build turns on its `preserve_order`
            // feature; sort only then (a sort and a lookup per key cost more than the writing in large suites).
            let mut entries: Vec<(&String, &Value)> = Vec::new();
            if !map.keys().is_sorted() {
                entries = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            w.write_all(b"{")?;
            let mut write_entry = |i: usize, k: &String, v: &Value| -> std::io::Result<()> {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write_str(w, k)?;
                w.write_all(b":")?;
                write_canonical(w, v)
            };
            if entries.is_empty() {
                for (i, (k, v)) in map.iter().enumerate() {
                    write_entry(i, k, v)?;
                }
            } else {
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    write_entry(i, k, v)?;
                }
            }
            w.write_all(b"}")
        }
        Value::Array(items) => {
            w.write_all(b"[")?;
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write_canonical(w, v)?;
            }
            w.write_all(b"]")
        }
        Value::String(s) => write_str(w, s),
        other => serde_json::to_writer(&mut *w, other).map_err(std::io::Error::other),
    }
}

/// Write `rows` as canonical JSON lines (sorted keys, one per line), atomically.
pub fn write_jsonl_atomic<'a>(path: &Path, rows: impl IntoIterator<Item = &'a Value>) -> Result<()> {
    crate::output::write_file_atomic(path, |w| {
        for r in rows {
            write_canonical(w, r)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// [`write_canonical`] into a `String`.
pub fn to_canonical_string(value: &Value) -> String {
    let mut buf = Vec::new();
    write_canonical(&mut buf, value).expect("writing to a Vec cannot fail");
    String::from_utf8(buf).expect("serde_json writes UTF-8")
}

/// Serialize any `Serialize` value to pretty JSON with sorted keys (for manifests and reports people read).
pub fn to_pretty_sorted<T: serde::Serialize>(value: &T) -> String {
    let v = serde_json::to_value(value).expect("stepwise types serialize to JSON");
    let sorted = sort_keys(v);
    let mut s = serde_json::to_string_pretty(&sorted).expect("JSON value serializes");
    s.push('\n');
    s
}

/// Return `value` with every object's keys in sorted order (independent of serde_json's map feature flags).
pub fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<String, Value> = map.into_iter().map(|(k, v)| (k, sort_keys(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

/// A JSON object being read field by field, with errors that name the file, the record and the field path.
///
/// ```
/// # use stepwise_core::json::Obj;
/// # use stepwise_core::Location;
/// let v = serde_json::json!({"id": "a", "steps": []});
/// let path = std::path::Path::new("x.jsonl");
/// let obj = Obj::new(&v, path, &Location::Line { line: 1, column: None }, "").unwrap();
/// assert_eq!(obj.req_str("id").unwrap(), "a");
/// assert!(obj.req_str("title").is_err());
/// ```
pub struct Obj<'a> {
    pub map: &'a serde_json::Map<String, Value>,
    pub path: &'a Path,
    pub location: &'a Location,
    /// Field path prefix, e.g. `steps[3].`; empty at the top level.
    pub prefix: String,
}

impl<'a> Obj<'a> {
    /// View `value` as an object; `prefix` is the field path of `value` itself ("" at the top level).
    pub fn new(value: &'a Value, path: &'a Path, location: &'a Location, prefix: &str) -> Result<Self> {
        match value {
            Value::Object(map) => Ok(Obj { map, path, location, prefix: prefix.to_string() }),
            other => Err(Error::field(
                path,
                location.clone(),
                if prefix.is_empty() { "(record)".to_string() } else { prefix.trim_end_matches('.').to_string() },
                format!("expected an object, found {}", kind(other)),
            )),
        }
    }

    /// The full field path of `key`.
    pub fn field_name(&self, key: &str) -> String {
        format!("{}{}", self.prefix, key)
    }

    /// An error about `key` in this object.
    pub fn error(&self, key: &str, message: impl Into<String>) -> Error {
        Error::field(self.path, self.location.clone(), self.field_name(key), message)
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    pub fn req(&self, key: &str) -> Result<&'a Value> {
        self.map.get(key).ok_or_else(|| self.error(key, "missing"))
    }

    pub fn req_str(&self, key: &str) -> Result<&'a str> {
        match self.req(key)? {
            Value::String(s) => Ok(s),
            other => Err(self.error(key, format!("expected a string, found {}", kind(other)))),
        }
    }

    /// A string that may be absent or null.
    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.error(key, format!("expected a string or null, found {}", kind(other)))),
        }
    }

    pub fn req_u64(&self, key: &str) -> Result<u64> {
        match self.req(key)? {
            Value::Number(n) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or_default()),
            other => Err(self.error(key, format!("expected a non-negative integer, found {}", kind(other)))),
        }
    }

    pub fn req_array(&self, key: &str) -> Result<&'a Vec<Value>> {
        match self.req(key)? {
            Value::Array(a) => Ok(a),
            other => Err(self.error(key, format!("expected an array, found {}", kind(other)))),
        }
    }

    /// An array that may be absent (None) — null is an error, since absent and null would round-trip differently.
    pub fn opt_array(&self, key: &str) -> Result<Option<&'a Vec<Value>>> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(other) => Err(self.error(key, format!("expected an array, found {}", kind(other)))),
        }
    }

    /// An array of strings (required).
    pub fn req_str_array(&self, key: &str) -> Result<Vec<String>> {
        let arr = self.req_array(key)?;
        self.strings(key, arr)
    }

    /// An array of strings that may be absent.
    pub fn opt_str_array(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.opt_array(key)? {
            None => Ok(None),
            Some(arr) => self.strings(key, arr).map(Some),
        }
    }

    fn strings(&self, key: &str, arr: &[Value]) -> Result<Vec<String>> {
        arr.iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(Error::field(
                    self.path,
                    self.location.clone(),
                    format!("{}{}[{}]", self.prefix, key, i),
                    format!("expected a string, found {}", kind(other)),
                )),
            })
            .collect()
    }

    /// The fields of this object not in `known`, kept so unknown keys survive a round trip.
    pub fn extra(&self, known: &[&str]) -> BTreeMap<String, Value> {
        self.map.iter().filter(|(k, _)| !known.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

/// A short name of a JSON value's type for error messages.
/// The first field (dotted path, keys in sorted order) where two JSON values differ, `Some("")` when they differ at
/// the top, `None` when they are equal: for errors that say which setting two outputs disagree on.
pub fn first_difference(a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut names: Vec<&String> = x.keys().chain(y.keys()).collect();
            names.sort();
            names.dedup();
            names.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(u), Some(v)) => {
                    first_difference(u, v).map(|d| if d.is_empty() { k.clone() } else { format!("{k}.{d}") })
                }
                _ => Some(k.clone()),
            })
        }
        _ if a == b => None,
        _ => Some(String::new()),
    }
}

pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_error_names_line_and_column() {
        let text = "{\"a\":1}\n{\"a\":\n";
        let err = parse_jsonl(Path::new("f.jsonl"), text).err().expect("must fail");
        let msg = err.to_string();
        assert!(msg.starts_with("f.jsonl:2:"), "{msg}");
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn a_line_past_the_bound_is_refused_after_reading_only_the_bound() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("long.jsonl");
        let long = format!("{{\"a\":1}}\n{{\"a\":\"{}\"}}\n", "x".repeat(5000));
        std::fs::write(&f, long).unwrap();
        let mut seen = 0;
        let e = for_each_jsonl_within(&f, 1000, |_| {
            seen += 1;
            Ok(())
        })
        .unwrap_err();
        assert_eq!(seen, 1);
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: the line is longer than 1000 bytes (one JSONL record per line; is this JSONL?)",
                f.display()
            )
        );
        assert_eq!(e.exit_code(), 2);
        // At the bound itself (newline included) a line is read.
        std::fs::write(&f, format!("{{\"a\":\"{}\"}}\n", "x".repeat(1000 - 10))).unwrap();
        for_each_jsonl_within(&f, 1000, |_| Ok(())).unwrap();
    }

    #[test]
    fn a_document_past_the_bound_is_refused_before_reading() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("big.json");
        std::fs::write(&f, vec![b' '; 3 << 20]).unwrap();
        let e = read_text_within(&f, 2 << 20).unwrap_err();
        assert!(e.to_string().contains("more than the 2 MiB stepwise reads as one document"), "{e}");
        assert_eq!(read_text_within(&f, 3 << 20).unwrap().len(), 3 << 20);
    }

    #[test]
    fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("deep.json");
        let depth = 1_000_000;
        std::fs::write(&f, format!("{}{}", "[".repeat(depth), "]".repeat(depth))).unwrap();
        let e = read_json(&f).unwrap_err();
        assert!(e.to_string().contains("recursion limit exceeded") && e.to_string().contains("deep.json:1:"), "{e}");
        std::fs::write(&f, format!("{}\n", "{\"a\":".repeat(depth))).unwrap();
        let e = read_jsonl(&f).unwrap_err();
        assert!(e.to_string().contains("recursion limit exceeded"), "{e}");
    }

    #[test]
    fn utf8_error_names_offset() {
        let err = text_from_bytes(Path::new("f"), vec![b'a', b'\n', b'b', 0xff, b'c']).expect_err("must fail");
        match err {
            Error::Utf8 { offset, line, .. } => {
                assert_eq!(offset, 3);
                assert_eq!(line, 2);
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn streamed_jsonl_matches_whole_file_reading() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("f.jsonl");
        std::fs::write(&f, "\u{feff}{\"a\":1}\r\n\n{\"a\":2}").unwrap();
        let mut lines = Vec::new();
        for_each_jsonl(&f, |r| {
            lines.push((r.line, r.value["a"].as_i64()));
            Ok(())
        })
        .unwrap();
        assert_eq!(lines, [(1, Some(1)), (3, Some(2))]);
        std::fs::write(&f, b"{\"a\":1}\n{\"a\":\"\xff\"}\n").unwrap();
        let e = for_each_jsonl(&f, |_| Ok(())).unwrap_err();
        assert!(matches!(e, Error::Utf8 { offset: 14, line: 2, .. }), "{e}");
        std::fs::write(&f, "{\"a\":1}\n{\"a\":\n").unwrap();
        let e = for_each_jsonl(&f, |_| Ok(())).unwrap_err().to_string();
        assert!(e.contains("f.jsonl:2:"), "{e}");
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        // Every ASCII byte (controls, quote, backslash, DEL) alone and inside text, and non-ASCII text.
        let mut cases: Vec<String> = (0u8..128).map(|b| (b as char).to_string()).collect();
        cases.extend((0u8..128).map(|b| format!("image {} / step {}.jpg", b as char, b)));
        cases.extend(
            ["", "plain", "é ü 漢字 🙂", "tab\there", "quote \"x\"", "back\\slash", "\u{7f}\u{80}\u{2028}"]
                .map(String::from),
        );
        for s in &cases {
            let mut mine = Vec::new();
            write_str(&mut mine, s).unwrap();
            assert_eq!(mine, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn canonical_sorts_keys_and_keeps_unicode() {
        let v = serde_json::json!({"b": 1, "a": {"d": "é", "c": [null, true]}});
        assert_eq!(to_canonical_string(&v), r#"{"a":{"c":[null,true],"d":"é"},"b":1}"#);
    }

    #[test]
    fn field_errors_name_the_path() {
        let v = serde_json::json!({"steps": [{"images": [1]}]});
        let loc = Location::Line { line: 7, column: None };
        let p = Path::new("x.jsonl");
        let obj = Obj::new(&v, p, &loc, "").unwrap();
        let steps = obj.req_array("steps").unwrap();
        let step = Obj::new(&steps[0], p, &loc, "steps[0].").unwrap();
        let err = step.req_str_array("images").err().unwrap().to_string();
        assert_eq!(err, "x.jsonl:7: field `steps[0].images[0]`: expected a string, found a number");
    }

    #[test]
    fn first_difference_names_the_field() {
        let a = serde_json::json!({"encoder": {"name": "w2v", "dim": 100}, "seed": 1});
        assert_eq!(first_difference(&a, &a), None);
        let seed = serde_json::json!({"encoder": {"name": "w2v", "dim": 100}, "seed": 2});
        assert_eq!(first_difference(&a, &seed).as_deref(), Some("seed"));
        let dim = serde_json::json!({"encoder": {"name": "w2v", "dim": 50}, "seed": 1});
        assert_eq!(first_difference(&a, &dim).as_deref(), Some("encoder.dim"));
        let missing = serde_json::json!({"encoder": {"name": "w2v", "dim": 100}});
        assert_eq!(first_difference(&a, &missing).as_deref(), Some("seed"));
    }
}
