//! The on-disk feature store: one folder per (corpus, encoder), read by memory-mapping.
//!
//! Layout (written by [`crate::embed`], read here):
//! - `vectors.npy`: float32 `(count, dim)`, row-major, NumPy-readable; row i belongs to line i of `ids`;
//! - `ids`: one item id per line (see [`crate::items`] for the id convention);
//! - `keys`: the content hash of each row's input, one per line (BLAKE3 of the text, or the image source's
//!   fingerprint — BLAKE3 of the file's bytes for image files); re-runs reuse rows whose key is unchanged;
//! - `meta.json`: the encoder ([`EncoderInfo`]: name, version, dimension, normalisation, preprocessing), its
//!   options and seed, row count, input file hashes, and a hash of `ids` checked on open;
//! - `failures.jsonl`: items that could not be encoded (unreadable or corrupt images), with the reason;
//! - `model/`: the fitted state of corpus-trained encoders (word2vec, TF-IDF), used by [`FeatureStore::encoder`];
//! - `tokens.npy`, `token_offsets.npy`, `token_ids.npy`: only for `stepwise embed --tokens` — per-token float16
//!   vectors of each row and their vocabulary ids, described by `meta.json` → `tokens` (see [`crate::tokens`],
//!   read with [`crate::TokenVectors`]);
//! - `patches.npy`: only for `stepwise embed --patches` — a float16 patch grid of each image row, described by
//!   `meta.json` → `patches` (see [`crate::patches`], read with [`crate::PatchGrids`]);
//! - `manifest.json`: the usual stepwise manifest;
//! - `.work/`: only while a run is unfinished (resumable chunks; see [`crate::embed`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use stepwise_core::Error;
use stepwise_core::manifest::InputHash;
use stepwise_core::shard::Shard;

use crate::encoder::{Encoder, EncoderInfo, Item};
use crate::npy::MmapMatrix;
use crate::patches::{PatchGrids, PatchMeta};
use crate::registry::{EncoderContext, build_encoder};
use crate::tokens::{TokenMeta, TokenVectors};
use crate::{FeatureError, Vectors, items};

pub const META_FILE: &str = "meta.json";
pub const VECTORS_FILE: &str = "vectors.npy";
pub const IDS_FILE: &str = "ids";
pub const KEYS_FILE: &str = "keys";
pub const FAILURES_FILE: &str = "failures.jsonl";
pub const MODEL_DIR: &str = "model";
pub const WORK_DIR: &str = ".work";
/// Version of the store layout written by this build.
pub const STORE_FORMAT: u32 = 1;

/// `meta.json` of a feature store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreMeta {
    pub format: u32,
    pub encoder: EncoderInfo,
    /// The `--encoder-opt` options the encoder was built with.
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// The seed (meaningful for encoders that train).
    pub seed: u64,
    /// Rows in `vectors.npy` and lines in `ids`.
    pub count: usize,
    /// Lines in `failures.jsonl`.
    pub failures: usize,
    /// True when `model/` holds a fitted encoder state.
    pub fitted: bool,
    /// BLAKE3 of the `ids` file, checked on open (catches files from different runs).
    pub ids_blake3: String,
    /// Fingerprints of the input files (the corpus JSONL, extra string files).
    #[serde(default)]
    pub inputs: Vec<InputHash>,
    /// What `keys` hashes.
    pub item_keys: String,
    /// The token output (`--tokens`), absent when the store has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenMeta>,
    /// The patch grids (`--patches`), absent when the store has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<PatchMeta>,
    /// Step texts were cut to their first this many sentences before encoding (`--max-sentences`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sentences: Option<usize>,
    /// The store holds one shard of a larger item list (`stepwise embed --shard I/N`); `stepwise features merge`
    /// joins the parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardMeta>,
}

/// Which part of which item list a shard store holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardMeta {
    pub shard: Shard,
    /// Items in the whole (unsharded) list.
    pub items: usize,
    /// BLAKE3 of the ids of the whole item list, one per line: the parts of one list agree on it.
    pub items_blake3: String,
}

/// One item that could not be encoded (a line of `failures.jsonl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub id: String,
    /// The content key, when the input could be read at all (a re-run skips the item while the key is unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub reason: String,
}

/// A feature store opened for reading. Vectors stay on disk (memory-mapped); ids are in memory.
#[derive(Debug)]
pub struct FeatureStore {
    dir: PathBuf,
    meta: StoreMeta,
    ids: Vec<String>,
    index: HashMap<String, usize>,
    matrix: MmapMatrix,
}

impl FeatureStore {
    /// Open the store in `dir`, checking that its files agree with each other.
    pub fn open(dir: &Path) -> Result<FeatureStore, FeatureError> {
        let meta_path = dir.join(META_FILE);
        if !meta_path.exists() {
            let hint = if dir.join(WORK_DIR).is_dir() {
                "it holds an unfinished `stepwise embed` run: re-run the same command to finish it"
            } else {
                "create one with `stepwise embed CORPUS --encoder E -o FEATURES`"
            };
            return Err(bad(format!("{}: not a feature store (no {META_FILE}); {hint}", dir.display())));
        }
        let meta = read_meta(&meta_path)?;
        let ids_path = dir.join(IDS_FILE);
        let ids_bytes = stepwise_core::paths::read_regular_file(&ids_path)?;
        let ids_hash = blake3::hash(&ids_bytes).to_hex().to_string();
        if ids_hash != meta.ids_blake3 {
            return Err(bad(format!(
                "{}: does not match {META_FILE} (files from different runs?); re-run `stepwise embed --force`",
                ids_path.display()
            )));
        }
        let ids = split_lines(&ids_path, ids_bytes)?;
        let vec_path = dir.join(VECTORS_FILE);
        let matrix = MmapMatrix::open(&vec_path)?;
        if ids.len() != meta.count || matrix.rows != meta.count || matrix.cols != meta.encoder.dim {
            return Err(bad(format!(
                "{}: inconsistent store: {META_FILE} says {} rows of dim {}, {VECTORS_FILE} has shape ({}, {}), \
                 {IDS_FILE} has {} lines; re-run `stepwise embed --force`",
                dir.display(),
                meta.count,
                meta.encoder.dim,
                matrix.rows,
                matrix.cols,
                ids.len()
            )));
        }
        let mut index = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            if index.insert(id.clone(), i).is_some() {
                return Err(bad(format!("{}:{}: duplicate id {id:?}", ids_path.display(), i + 1)));
            }
        }
        Ok(FeatureStore { dir: dir.to_path_buf(), meta, ids, index, matrix })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The encoder that wrote the store.
    pub fn info(&self) -> &EncoderInfo {
        &self.meta.encoder
    }

    pub fn meta(&self) -> &StoreMeta {
        &self.meta
    }

    pub fn dim(&self) -> usize {
        self.meta.encoder.dim
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Item ids, in row order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Row `i`, read through the memory map. Panics when `i >= len()`, like slice indexing.
    pub fn row(&self, i: usize) -> &[f32] {
        self.matrix.row(i)
    }

    /// The row of `id`, if the store has it.
    pub fn get(&self, id: &str) -> Option<&[f32]> {
        self.index_of(id).map(|i| self.row(i))
    }

    /// All rows as one row-major slice, memory-mapped (no copy): feed it to [`crate::knn::knn`] directly.
    pub fn data(&self) -> &[f32] {
        self.matrix.data()
    }

    /// Copy every row into memory.
    pub fn load(&self) -> Result<Vectors, FeatureError> {
        Ok(Vectors::new(self.dim(), self.ids.clone(), self.data().to_vec()))
    }

    /// Copy the rows of the given ids (in that order); unknown ids are skipped, so check `len()` if you need all.
    pub fn load_ids<S: AsRef<str>>(&self, ids: &[S]) -> Vectors {
        let rows: Vec<usize> = ids.iter().filter_map(|id| self.index_of(id.as_ref())).collect();
        self.load_rows(&rows)
    }

    /// Copy the given rows (in that order).
    pub fn load_rows(&self, rows: &[usize]) -> Vectors {
        let mut data = Vec::with_capacity(rows.len() * self.dim());
        let mut ids = Vec::with_capacity(rows.len());
        for &r in rows {
            data.extend_from_slice(self.row(r));
            ids.push(self.ids[r].clone());
        }
        Vectors::new(self.dim(), ids, data)
    }

    /// The per-token vectors of the rows (`None` when the store was embedded without `--tokens`).
    pub fn tokens(&self) -> Result<Option<TokenVectors>, FeatureError> {
        TokenVectors::from_store(self)
    }

    /// The patch grids of the rows (`None` when the store was embedded without `--patches`).
    pub fn patches(&self) -> Result<Option<PatchGrids>, FeatureError> {
        PatchGrids::from_store(self)
    }

    /// The items that could not be encoded.
    pub fn failures(&self) -> Result<Vec<Failure>, FeatureError> {
        read_failures(&self.dir.join(FAILURES_FILE))
    }

    /// The content key of each row (same order as [`FeatureStore::ids`]).
    pub fn keys(&self) -> Result<Vec<String>, FeatureError> {
        let p = self.dir.join(KEYS_FILE);
        let keys = split_lines(&p, stepwise_core::paths::read_regular_file(&p)?)?;
        if keys.len() != self.len() {
            return Err(bad(format!("{}: {} lines, expected {}", p.display(), keys.len(), self.len())));
        }
        Ok(keys)
    }

    /// Re-create the encoder that wrote this store (with its options, seed and, for fitted encoders, the model
    /// saved in `model/`), to encode new inputs consistently — e.g. RecipeQA answer choices. `ctx` supplies the
    /// models folder; its options, seed and state are replaced by the store's. Errors when the encoder's code or
    /// weights changed since (its [`EncoderInfo`] differs).
    pub fn encoder(&self, ctx: &EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
        let mut c = ctx.clone();
        c.options = self.meta.options.clone();
        c.seed = self.meta.seed;
        c.state_dir = self.meta.fitted.then(|| self.dir.join(MODEL_DIR));
        c.fit_texts = None;
        let enc = build_encoder(&self.meta.encoder.name, &c)?;
        check_same_encoder(&self.dir, &self.meta.encoder, enc.info())?;
        Ok(enc)
    }

    /// Encode arbitrary strings with this store's encoder: rows with ids `str:{blake3 of the text}` (see
    /// [`items::str_id`]), in input order (duplicates kept).
    pub fn encode_strings<S: AsRef<str>>(&self, ctx: &EncoderContext, texts: &[S]) -> Result<Vectors, FeatureError> {
        let enc = self.encoder(ctx)?;
        encode_strings(enc.as_ref(), texts)
    }
}

/// Encode strings with `enc` in batches of its preferred size: ids `str:{blake3}`.
pub fn encode_strings<S: AsRef<str>>(enc: &dyn Encoder, texts: &[S]) -> Result<Vectors, FeatureError> {
    let dim = enc.info().dim;
    let mut data = Vec::with_capacity(texts.len() * dim);
    for batch in texts.chunks(enc.batch_size().max(1)) {
        let inputs: Vec<Item<'_>> = batch.iter().map(|t| Item::Text(t.as_ref())).collect();
        let out = enc.encode(&inputs)?;
        if out.len() != batch.len() * dim {
            return Err(FeatureError::Encoder(format!(
                "encoder `{}` returned {} floats for {} inputs of dim {dim}",
                enc.info().name,
                out.len(),
                batch.len()
            )));
        }
        data.extend_from_slice(&out);
    }
    let ids = texts.iter().map(|t| items::str_id(t.as_ref())).collect();
    Ok(Vectors::new(dim, ids, data))
}

/// An error unless `built` (the encoder as built now) equals `stored` (what wrote the store).
pub(crate) fn check_same_encoder(dir: &Path, stored: &EncoderInfo, built: &EncoderInfo) -> Result<(), FeatureError> {
    if stored == built {
        return Ok(());
    }
    let mut diffs = Vec::new();
    if stored.name != built.name {
        diffs.push(format!("name {} → {}", stored.name, built.name));
    }
    if stored.version != built.version {
        diffs.push(format!("version {} → {}", stored.version, built.version));
    }
    if stored.dim != built.dim {
        diffs.push(format!("dimension {} → {}", stored.dim, built.dim));
    }
    if stored.normalization != built.normalization {
        diffs.push(format!("normalisation {:?} → {:?}", stored.normalization, built.normalization));
    }
    if stored.preprocessing != built.preprocessing {
        diffs.push(format!("preprocessing {:?} → {:?}", stored.preprocessing, built.preprocessing));
    }
    if stored.modality != built.modality {
        diffs.push(format!("modality {:?} → {:?}", stored.modality, built.modality));
    }
    Err(FeatureError::Mismatch(format!(
        "{}: the features were written by encoder `{}` as it was then; it differs now ({}); re-embed with --force",
        dir.display(),
        stored.name,
        diffs.join("; ")
    )))
}

pub(crate) fn read_meta(path: &Path) -> Result<StoreMeta, FeatureError> {
    let v = stepwise_core::json::read_json(path)?;
    let meta: StoreMeta = serde_json::from_value(v)
        .map_err(|e| Error::field(path, stepwise_core::Location::File, "(meta)", e.to_string()))?;
    if meta.format > STORE_FORMAT {
        return Err(bad(format!(
            "{}: store format {} is newer than this stepwise supports ({STORE_FORMAT}); upgrade stepwise",
            path.display(),
            meta.format
        )));
    }
    Ok(meta)
}

/// Read `failures.jsonl` (absent file = no failures).
pub fn read_failures(path: &Path) -> Result<Vec<Failure>, FeatureError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for r in stepwise_core::json::read_jsonl(path)? {
        let f: Failure = serde_json::from_value(r.value).map_err(|e| {
            Error::field(path, stepwise_core::Location::Line { line: r.line, column: None }, "(failure)", e.to_string())
        })?;
        out.push(f);
    }
    Ok(out)
}

/// Split a file of `\n`-terminated UTF-8 lines.
pub(crate) fn split_lines(path: &Path, bytes: Vec<u8>) -> Result<Vec<String>, FeatureError> {
    let text = stepwise_core::json::text_from_bytes(path, bytes)?;
    let body = text.strip_suffix('\n').unwrap_or(&text);
    if body.is_empty() {
        return Ok(Vec::new());
    }
    Ok(body.split('\n').map(str::to_string).collect())
}

fn bad(msg: String) -> FeatureError {
    FeatureError::Core(Error::bad_input(msg))
}
