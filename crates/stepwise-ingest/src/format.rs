//! The extension point for input formats: a [`Format`] reads files into procedures (and task sets), and the
//! [`Registry`] lists the formats the CLI offers, detects a file's format from its content, and finds one by name.
//!
//! Adding a format (R2VQ, WikiHow-style dumps, a lab's own JSON) is one type implementing [`Format`] plus one line
//! in [`Registry::builtin`]; `stepwise ingest --format <name>` and auto-detection pick it up without CLI changes.

use std::path::{Path, PathBuf};

use stepwise_core::{Error, Procedure, Result, TaskSet};

/// Where a procedure came from: for error messages (duplicate ids name both records) and image resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    /// The record inside the file: `12` (a line), `data[3]`, `recipes[7]`...
    pub record: String,
    /// The folder the procedure's image paths are relative to.
    pub image_base: PathBuf,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.record)
    }
}

/// What a format read from its inputs.
#[derive(Debug, Default)]
pub struct Ingested {
    /// Procedures in input order, image paths relative to their origin's `image_base`.
    pub procedures: Vec<Procedure>,
    /// One per procedure.
    pub origins: Vec<Origin>,
    /// Question sets that came with the inputs (RecipeQA), with the file each was read from.
    pub tasksets: Vec<(PathBuf, TaskSet)>,
    /// Things the user should know (conflicting duplicates resolved, fields ignored...), for the ingest report.
    pub notes: Vec<String>,
}

impl Ingested {
    pub fn push(&mut self, p: Procedure, origin: Origin) {
        self.procedures.push(p);
        self.origins.push(origin);
    }

    /// Append another reader's output.
    pub fn extend(&mut self, other: Ingested) {
        self.procedures.extend(other.procedures);
        self.origins.extend(other.origins);
        self.tasksets.extend(other.tasksets);
        self.notes.extend(other.notes);
    }
}

/// Options every reader receives.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Resolve image paths against this folder instead of each input file's folder.
    pub image_root: Option<PathBuf>,
}

impl ReadOptions {
    /// The folder image paths of `input` are relative to.
    pub fn image_base(&self, input: &Path) -> PathBuf {
        match &self.image_root {
            Some(r) => r.clone(),
            None => stepwise_core::paths::parent_dir(input),
        }
    }
}

/// How sure a format is that a file is its own, from the file's name and first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sniff {
    No,
    /// Plausible (e.g. by extension only).
    Maybe,
    /// The content matches the format's structure.
    Yes,
}

/// An input format.
pub trait Format: Send + Sync {
    /// The name used with `--format`.
    fn name(&self) -> &'static str;
    /// One line for `stepwise ingest --list-formats`.
    fn describe(&self) -> &'static str;
    /// Does this file look like this format? `head` is the first bytes of the file (up to 64 KiB).
    fn sniff(&self, path: &Path, head: &[u8]) -> Sniff;
    /// Read all inputs of this format. Errors name the file, record and field.
    fn read(&self, inputs: &[PathBuf], opts: &ReadOptions) -> Result<Ingested>;
}

/// The formats `stepwise ingest` knows.
pub struct Registry {
    formats: Vec<Box<dyn Format>>,
}

impl Registry {
    /// The built-in formats.
    pub fn builtin() -> Self {
        let mut r = Registry { formats: Vec::new() };
        r.register(Box::new(crate::readers::procedure_jsonl::ProcedureJsonl));
        r.register(Box::new(crate::readers::recipeqa::RecipeQaQuestions));
        r.register(Box::new(crate::readers::recipeqa_recipes::RecipeQaRecipes));
        r.register(Box::new(crate::readers::r2vq_conllu::R2vqConllu));
        r.register(Box::new(crate::readers::r2vq_inline::R2vqInline));
        r
    }

    /// Add a format (a later format with the same name replaces the earlier one).
    pub fn register(&mut self, format: Box<dyn Format>) {
        self.formats.retain(|f| f.name() != format.name());
        self.formats.push(format);
    }

    pub fn formats(&self) -> impl Iterator<Item = &dyn Format> {
        self.formats.iter().map(|f| f.as_ref())
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.formats.iter().map(|f| f.name()).collect()
    }

    /// The format called `name`; a usage error listing the known names otherwise.
    pub fn get(&self, name: &str) -> Result<&dyn Format> {
        self.formats()
            .find(|f| f.name() == name)
            .ok_or_else(|| Error::usage(format!("unknown format {name:?}; known formats: {}", self.names().join(", "))))
    }

    /// Detect the format of `path` from its content: the single format that says `Yes`, else the single one that
    /// says `Maybe`; a usage error (asking for `--format`) when none or several match.
    pub fn detect(&self, path: &Path) -> Result<&dyn Format> {
        let head = read_head(path, 64 * 1024)?;
        let mut best: Vec<(Sniff, &dyn Format)> =
            self.formats().map(|f| (f.sniff(path, &head), f)).filter(|(s, _)| *s > Sniff::No).collect();
        let top = best.iter().map(|(s, _)| *s).max();
        best.retain(|(s, _)| Some(*s) == top);
        match best.as_slice() {
            [(_, f)] => Ok(*f),
            [] => Err(Error::usage(format!(
                "{}: cannot detect the input format; pass --format (one of: {})",
                path.display(),
                self.names().join(", ")
            ))),
            several => Err(Error::usage(format!(
                "{}: the content matches several formats ({}); pass --format",
                path.display(),
                several.iter().map(|(_, f)| f.name()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

/// The first `max` bytes of a file.
pub fn read_head(path: &Path, max: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    use stepwise_core::IoResultExt;
    if path.is_dir() {
        return Err(Error::bad_input(format!("{}: is a folder; give the data file(s)", path.display())));
    }
    let f = std::fs::File::open(path).at(path)?;
    let mut head = Vec::with_capacity(max.min(1 << 16));
    f.take(max as u64).read_to_end(&mut head).at(path)?;
    Ok(head)
}

/// The bytes after a UTF-8 BOM and leading whitespace.
pub fn skip_ws(head: &[u8]) -> &[u8] {
    let h = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let start = h.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(h.len());
    &h[start..]
}

/// True when `needle` occurs in `hay` (a quoted JSON key in a file head, say).
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
