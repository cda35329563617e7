//! Suites and task sets in the formats vision-language benchmarks are run and shared with:
//!
//! - [`hf`]: a Hugging Face dataset folder (Parquet per config and split, images as the `datasets` `Image`
//!   feature, a dataset card with the `configs` header, the knobs, counts, licences and citations);
//! - [`vlmevalkit`]: VLMEvalKit's multiple-choice TSV (base64 images, options in letter columns);
//! - [`lmms_eval`]: an lmms-eval task folder (a YAML per config and the `utils.py` it calls) over the Hugging Face
//!   folder.
//!
//! All three render a question the same way ([`render`]); a config is one (setting, task) of a suite, or one
//! task of a task set.

pub mod hf;
pub mod lmms_eval;
pub mod render;
pub mod vlmevalkit;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use stepwise_core::manifest::Manifest;
use stepwise_core::output::{FileWriter, write_file_atomic};
use stepwise_core::{Corpus, Error, Question, Result, TaskSet};

use render::Rendered;

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Hf,
    VlmEvalKit,
    LmmsEval,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Hf, Format::VlmEvalKit, Format::LmmsEval];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Hf => "hf",
            Format::VlmEvalKit => "vlmevalkit",
            Format::LmmsEval => "lmms-eval",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// One config: the questions of one task in one setting.
#[derive(Debug, Clone)]
pub struct Config {
    /// `<setting>-<task>` (suites), or the task name (a task set without a setting).
    pub name: String,
    pub setting: Option<String>,
    pub task: String,
    /// The task-set folder or file the questions come from.
    pub source: PathBuf,
    /// Questions by split name as the export writes it (`train`, `validation`, `test`), in file order.
    pub splits: BTreeMap<String, Vec<Question>>,
}

impl Config {
    pub fn len(&self) -> usize {
        self.splits.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What is exported: the configs, where images are read from, and what the card says about the source.
pub struct Source {
    /// The suite or task set given.
    pub path: PathBuf,
    /// `suite` or `taskset`.
    pub kind: &'static str,
    pub configs: Vec<Config>,
    /// The suite's or task set's manifest (knobs, settings, counts), when it has one.
    pub manifest: Option<Manifest>,
    /// The corpus the questions were made from (images, licences), when known.
    pub corpus: Option<Corpus>,
}

/// The split name written for a question's `split` (Hugging Face calls the dev split `validation`).
pub fn split_name(split: Option<&str>) -> String {
    match split {
        Some("val") | Some("dev") | Some("validation") => "validation".into(),
        Some("train") => "train".into(),
        Some("test") | None => "test".into(),
        Some(other) => other.to_string(),
    }
}

/// Load a suite folder, a task-set folder or a RecipeQA-layout JSON file. `keep_splits` (export split names)
/// limits the questions; `corpus` overrides the corpus named by the manifest.
pub fn load_source(path: &Path, corpus: Option<&Path>, keep_splits: Option<&[String]>) -> Result<Source> {
    let manifest = if path.is_dir() && path.join(stepwise_core::manifest::MANIFEST_FILE).is_file() {
        Some(Manifest::read(path)?)
    } else {
        None
    };
    let corpus = match corpus {
        Some(c) => Some(Corpus::load(c)?),
        None => Corpus::named_by_manifest(path)?,
    };
    let suite = manifest.as_ref().filter(|m| m.kind == "suite");
    let mut configs = Vec::new();
    let (kind, sets): (&'static str, Vec<(Option<String>, PathBuf)>) = match suite {
        Some(m) => {
            let strings = |key: &str| -> Result<Vec<String>> {
                m.params
                    .get(key)
                    .and_then(|v| v.as_array())
                    .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
                    .ok_or_else(|| Error::bad_input(format!("{}: suite manifest without params.{key}", path.display())))
            };
            let same_as = m.params.get("same_as").and_then(|v| v.as_object()).cloned().unwrap_or_default();
            let mut sets = Vec::new();
            for setting in strings("settings")? {
                for task in strings("tasks")? {
                    // A (setting, task) whose questions are another setting's has no folder (and no config).
                    if same_as.contains_key(&format!("{setting}/{task}")) {
                        continue;
                    }
                    sets.push((Some(setting.clone()), path.join(&setting).join(&task)));
                }
            }
            ("suite", sets)
        }
        None => {
            let setting = manifest.as_ref().and_then(|m| m.params.get("setting")).and_then(|v| v.as_str());
            ("taskset", vec![(setting.map(str::to_string), path.to_path_buf())])
        }
    };
    let name_ok = |s: &str, dash: bool| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || (dash && c == '-'))
    };
    for (setting, dir) in sets {
        if let Some(s) = setting.as_deref().filter(|s| !name_ok(s, true)) {
            return Err(Error::bad_input(format!(
                "{}: setting {s:?} cannot name an export (letters, digits, _ and - only)",
                dir.display()
            )));
        }
        let ts = match TaskSet::load(&dir) {
            Ok(ts) => ts,
            // A suite's (setting, task) that got no questions (a small corpus) has an empty task set: no config.
            Err(Error::Empty { .. }) if kind == "suite" => continue,
            Err(e) => return Err(e),
        };
        let mut by_task: BTreeMap<String, BTreeMap<String, Vec<Question>>> = BTreeMap::new();
        for q in ts.questions {
            // Names become file names, YAML keys and lmms-eval task names: letters, digits and `_` only.
            if !name_ok(&q.task, false) {
                return Err(Error::bad_input(format!(
                    "{}: question {}: task {:?} cannot name an export (letters, digits and _ only)",
                    dir.display(),
                    q.qid,
                    q.task
                )));
            }
            let split = split_name(q.split.as_deref());
            if !name_ok(&split, false) {
                return Err(Error::bad_input(format!(
                    "{}: question {}: split {:?} cannot name an export split (letters, digits and _ only)",
                    dir.display(),
                    q.qid,
                    q.split.as_deref().unwrap_or("")
                )));
            }
            if keep_splits.is_some_and(|k| !k.contains(&split)) {
                continue;
            }
            by_task.entry(q.task.clone()).or_default().entry(split).or_default().push(q);
        }
        for (task, splits) in by_task {
            let name = match &setting {
                Some(s) => format!("{s}-{task}"),
                None => task.clone(),
            };
            configs.push(Config { name, setting: setting.clone(), task, source: dir.clone(), splits });
        }
    }
    if configs.iter().all(Config::is_empty) {
        return Err(Error::bad_input(format!(
            "{}: no questions to export{}",
            path.display(),
            keep_splits.map_or(String::new(), |k| format!(" in split(s) {}", k.join(", ")))
        )));
    }
    configs.retain(|c| !c.is_empty());
    Ok(Source { path: path.to_path_buf(), kind, configs, manifest, corpus })
}

impl Source {
    /// Keep only the test split when the source has one (what the evaluation formats read by default).
    pub fn keep_test_split_if_any(&mut self) {
        if self.configs.iter().any(|c| c.splits.contains_key("test")) {
            for c in &mut self.configs {
                c.splits.retain(|s, _| s == "test");
            }
            self.configs.retain(|c| !c.is_empty());
        }
    }
}

/// A rendered question with its image files read.
pub struct Prepared {
    pub question: Question,
    pub rendered: Rendered,
    /// `(path as in the question, file bytes)` per image, in placeholder order.
    pub images: Vec<(String, Vec<u8>)>,
}

/// Render `q` and read its images from `image_root`. Errors name the task set, the question and the image.
pub fn prepare(q: &Question, source: &Path, image_root: Option<&Path>) -> Result<Prepared> {
    let rendered =
        render::render(q).map_err(|e| Error::bad_input(format!("{}: question {}: {e}", source.display(), q.qid)))?;
    let mut images = Vec::with_capacity(rendered.images.len());
    for rel in &rendered.images {
        let Some(root) = image_root else {
            return Err(Error::bad_input(format!(
                "{}: question {} needs image {rel:?} but the corpus is unknown; name it with --corpus",
                source.display(),
                q.qid
            )));
        };
        if !stepwise_core::paths::safe_relative(rel) {
            return Err(Error::bad_input(format!(
                "{}: question {}: image {rel:?} is not a relative path inside the corpus",
                source.display(),
                q.qid
            )));
        }
        let file = root.join(rel);
        let bytes = std::fs::read(&file).map_err(|e| {
            Error::bad_input(format!(
                "{}: question {}: image {rel:?} ({}): {e}",
                source.display(),
                q.qid,
                file.display()
            ))
        })?;
        if image_extension(&bytes).is_none() {
            return Err(Error::bad_input(format!(
                "{}: question {}: image {rel:?} ({}) is neither JPEG nor PNG",
                source.display(),
                q.qid,
                file.display()
            )));
        }
        images.push((rel.clone(), bytes));
    }
    Ok(Prepared { question: q.clone(), rendered, images })
}

/// The file extension of a JPEG or PNG file's bytes (by their signature), `None` for anything else.
pub fn image_extension(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("jpg")
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("png")
    } else {
        None
    }
}

/// Questions prepared (and images held in memory) at a time.
pub const CHUNK: usize = 64;

/// The questions of one output file, prepared [`CHUNK`] at a time (images are read per chunk).
pub(crate) struct Chunks<'a> {
    chunks: std::slice::Chunks<'a, Question>,
    source: &'a Path,
    image_root: Option<&'a Path>,
    error: Option<Error>,
    images: usize,
}

impl Chunks<'_> {
    /// The next chunk; a question that cannot be exported stops the file with an IO error while the question's
    /// own error is kept for [`write_chunked`] to return.
    pub(crate) fn next_chunk(&mut self) -> std::io::Result<Option<Vec<Prepared>>> {
        let Some(chunk) = self.chunks.next() else { return Ok(None) };
        // Every question of the chunk is prepared; the first failure in file order is reported (a parallel
        // `collect::<Result<_>>` would name whichever failed first in time).
        let prepared: Vec<Result<Prepared>> =
            chunk.par_iter().map(|q| prepare(q, self.source, self.image_root)).collect();
        match prepared.into_iter().collect::<Result<Vec<_>>>() {
            Ok(p) => {
                self.images += p.iter().map(|p| p.images.len()).sum::<usize>();
                Ok(Some(p))
            }
            Err(e) => {
                self.error = Some(e);
                Err(std::io::Error::other("a question could not be exported"))
            }
        }
    }
}

/// Write `questions` to `path` atomically: `body` gets the file and the prepared chunks. Returns the number of
/// images written. A question that cannot be exported (a missing image, a field that does not fit) is returned
/// as the bad input it is, and nothing is left behind.
pub(crate) fn write_chunked(
    path: &Path,
    source: &Path,
    questions: &[Question],
    image_root: Option<&Path>,
    body: impl FnOnce(&mut FileWriter, &mut Chunks) -> std::io::Result<()>,
) -> Result<usize> {
    let mut chunks = Chunks { chunks: questions.chunks(CHUNK), source, image_root, error: None, images: 0 };
    let written = write_file_atomic(path, |w| body(w, &mut chunks));
    if let Some(e) = chunks.error {
        return Err(e);
    }
    written.map(|()| chunks.images)
}

/// Counts of what an export wrote, per config and split.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ExportSummary {
    pub format: String,
    pub configs: BTreeMap<String, BTreeMap<String, usize>>,
    pub images: usize,
    pub files: Vec<String>,
}

impl ExportSummary {
    pub fn questions(&self) -> usize {
        self.configs.values().flat_map(|s| s.values()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_names_follow_hugging_face() {
        assert_eq!(split_name(Some("val")), "validation");
        assert_eq!(split_name(Some("train")), "train");
        assert_eq!(split_name(None), "test");
        assert_eq!(split_name(Some("held_out")), "held_out");
    }
}
