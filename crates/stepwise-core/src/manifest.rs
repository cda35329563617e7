//! `manifest.json`: what an output folder holds and how it was made.
//!
//! Determinism: a manifest holds no timestamps and no host-specific data, and the recorded command line leaves
//! out options that do not change results (output path, `--threads`, verbosity, `--force`), so the same inputs
//! and seed give a byte-identical manifest.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::hash::hash_file;
use crate::json::{read_json, to_pretty_sorted};
use crate::output::write_string_atomic;

/// Version of the on-disk layouts written by this build (corpus, task set, suite, features).
pub const SCHEMA_VERSION: u32 = 1;
pub const MANIFEST_FILE: &str = "manifest.json";

static COMMAND_LINE: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Set by the CLI with the canonical command line (see module docs), and again for each command a pipeline such
/// as `stepwise demo` runs in-process. Libraries read it when they build a manifest.
pub fn set_command_line(args: Vec<String>) {
    // A poisoned lock only means a panic elsewhere; the value is a plain Vec, still usable.
    *COMMAND_LINE.write().unwrap_or_else(|e| e.into_inner()) = args;
}

pub fn command_line() -> Vec<String> {
    COMMAND_LINE.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A fingerprint of one input file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputHash {
    /// The path as given on the command line.
    pub path: String,
    pub blake3: String,
    pub bytes: u64,
}

impl InputHash {
    pub fn of(path: &Path) -> Result<Self> {
        let (blake3, bytes) = hash_file(path)?;
        Ok(InputHash { path: path.to_string_lossy().into_owned(), blake3, bytes })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u32,
    /// `corpus`, `taskset`, `suite`, `features`, `sequencing`, `report`...
    pub kind: String,
    pub stepwise_version: String,
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(default)]
    pub inputs: Vec<InputHash>,
    /// Counts of what the folder holds (procedures, steps, images, questions...).
    #[serde(default)]
    pub counts: BTreeMap<String, u64>,
    /// Where step image paths are relative to: relative to the folder holding the manifest, or absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_root: Option<String>,
    /// Parameters and anything else the producer wants to record (knob settings, encoder, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, Value>,
}

impl Manifest {
    /// A manifest of `kind` carrying this build's version and the CLI's canonical command line.
    pub fn new(kind: &str) -> Self {
        Manifest {
            schema_version: SCHEMA_VERSION,
            kind: kind.to_string(),
            stepwise_version: env!("CARGO_PKG_VERSION").to_string(),
            command: command_line(),
            seed: None,
            inputs: Vec::new(),
            counts: BTreeMap::new(),
            image_root: None,
            params: BTreeMap::new(),
        }
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Record the fingerprint of each input file.
    pub fn add_inputs<P: AsRef<Path>>(&mut self, paths: &[P]) -> Result<()> {
        for p in paths {
            self.inputs.push(InputHash::of(p.as_ref())?);
        }
        Ok(())
    }

    pub fn count(&mut self, key: &str, n: u64) {
        self.counts.insert(key.to_string(), n);
    }

    pub fn param(&mut self, key: &str, value: impl Serialize) {
        self.params.insert(key.to_string(), serde_json::to_value(value).expect("parameters serialize"));
    }

    /// Write `manifest.json` into `dir` (pretty, sorted keys).
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_string_atomic(&dir.join(MANIFEST_FILE), &to_pretty_sorted(self))
    }

    /// Read `dir/manifest.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let v = read_json(&path)?;
        let m: Manifest = serde_json::from_value(v)
            .map_err(|e| Error::field(&path, crate::error::Location::File, "(manifest)", e.to_string()))?;
        if m.schema_version > SCHEMA_VERSION {
            return Err(Error::bad_input(format!(
                "{}: schema version {} is newer than this stepwise supports ({SCHEMA_VERSION}); upgrade stepwise",
                path.display(),
                m.schema_version
            )));
        }
        Ok(m)
    }
}
