//! Embedding items into a feature store: incremental, resumable, deterministic.
//!
//! Every item is keyed by a content hash (BLAKE3 of the text; the image source's fingerprint for images). A run
//! 1. checks the request against the existing store and any unfinished run (another encoder, options or seed is
//!    an error: features of different encoders never mix);
//! 2. keys every item and reuses vectors whose key the store (or the unfinished run) already has, and earlier
//!    failures whose key is unchanged — a re-run with nothing new does no work and leaves the store untouched;
//! 3. encodes the rest in chunks (batches in parallel with rayon), appending each finished chunk to `.work/`
//!    so an interrupted run resumes where it stopped;
//! 4. writes the new store (vectors in item order, never thread order) into a temporary folder and swaps it in.
//!
//! Unreadable or corrupt images, and inputs the encoder rejects, go to `failures.jsonl` and the run goes on.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use stepwise_core::manifest::InputHash;
use stepwise_core::output::{OutputDir, write_file_atomic, write_string_atomic};
use stepwise_core::{Corpus, Error, IoResultExt, Manifest};

use crate::FeatureError;
use crate::encoder::{Encoder, Item, Modality};
use crate::image_source::{FsImageSource, ImageSource};
use crate::items::{ItemContent, ItemSpec, check_ids, corpus_items};
use crate::registry::{EncoderContext, EncoderKind, find};
use crate::store::{
    FAILURES_FILE, Failure, FeatureStore, IDS_FILE, KEYS_FILE, META_FILE, MODEL_DIR, STORE_FORMAT, StoreMeta,
    VECTORS_FILE, WORK_DIR, check_same_encoder,
};
use crate::work::{ChunkFailure, RUN_FILE, RunConfig, WorkDir};

/// What `keys` hash, recorded in `meta.json`.
const ITEM_KEYS: &str = "text items: BLAKE3 of the UTF-8 text; image items: the image source's fingerprint \
                         (BLAKE3 of the file's bytes for image files)";

/// How to run [`embed_items`].
#[derive(Debug, Clone)]
pub struct EmbedOptions {
    /// Registry name of the encoder.
    pub encoder: String,
    /// Models folder, seed and encoder options (its `state_dir` and `fit_texts` are set by the pipeline).
    pub ctx: EncoderContext,
    /// Replace the existing store instead of extending it (and discard an unfinished run).
    pub force: bool,
    /// Fingerprints of the input files, recorded in `meta.json` and the manifest.
    pub inputs: Vec<InputHash>,
    /// Items per checkpoint (a chunk in `.work/`).
    pub chunk_items: usize,
    /// Test hook simulating an interruption: stop (leaving `.work/`) once at least this many new items are encoded.
    pub stop_after: Option<usize>,
    /// Progress-bar label.
    pub label: String,
}

impl EmbedOptions {
    pub fn new(encoder: &str) -> Self {
        EmbedOptions {
            encoder: encoder.to_string(),
            ctx: EncoderContext::default(),
            force: false,
            inputs: Vec::new(),
            chunk_items: 2048,
            stop_after: None,
            label: "embedding".to_string(),
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmbedReport {
    /// Items asked for.
    pub items: usize,
    /// Rows in the store afterwards.
    pub stored: usize,
    /// Distinct inputs encoded by this run.
    pub encoded: usize,
    /// Distinct inputs whose vectors (or failures) were reused from the store or an unfinished run.
    pub reused: usize,
    /// Items listed in `failures.jsonl`.
    pub failed: usize,
    /// Nothing changed: the store was already up to date and was not rewritten.
    pub up_to_date: bool,
    /// Stopped early by [`EmbedOptions::stop_after`]; `.work/` holds the progress.
    pub interrupted: bool,
}

/// Embed the items of `corpus` for `opts.encoder` (text items for text encoders, image items for image
/// encoders, read from the corpus's image root unless `images` is given) into the store at `dir`.
pub fn embed_corpus(
    corpus: &Corpus,
    dir: &Path,
    images: Option<&dyn ImageSource>,
    extra: &[ItemSpec],
    opts: &EmbedOptions,
) -> Result<EmbedReport, FeatureError> {
    let entry = find(&opts.encoder).ok_or_else(|| unknown_encoder(&opts.encoder))?;
    let mut items = corpus_items(corpus, entry.modality);
    items.extend(extra.iter().cloned());
    let fs = FsImageSource::new(&corpus.image_root);
    embed_items(dir, &items, images.unwrap_or(&fs), opts)
}

/// Embed `items` into the store at `dir` (see module docs).
pub fn embed_items(
    dir: &Path,
    items: &[ItemSpec],
    images: &dyn ImageSource,
    opts: &EmbedOptions,
) -> Result<EmbedReport, FeatureError> {
    check_ids(items)?;
    let entry = find(&opts.encoder).ok_or_else(|| unknown_encoder(&opts.encoder))?;
    if let Some(it) = items.iter().find(|it| it.content.modality() != entry.modality) {
        return Err(usage(format!(
            "encoder `{}` reads {:?} inputs; item {:?} is {:?}",
            entry.name,
            entry.modality,
            it.id,
            it.content.modality()
        )));
    }
    let fitted = entry.kind == EncoderKind::Fitted;
    let work_path = dir.join(WORK_DIR);
    if dir.exists() && !opts.force && !dir.join(META_FILE).exists() && !work_path.join(RUN_FILE).exists() {
        let empty = std::fs::read_dir(dir).map(|mut d| d.next().is_none()).unwrap_or(false);
        if !empty {
            return Err(usage(format!(
                "{}: exists and is not a feature store; choose another folder, or pass --force to replace it",
                dir.display()
            )));
        }
    }
    if opts.force && work_path.exists() {
        std::fs::remove_dir_all(&work_path).at(&work_path)?;
    }
    let dir_existed = dir.exists();
    let mut work = WorkDir::open(&work_path)?;
    let work_existed = work.exists();
    let run = work.read_run()?;
    let requested = RunConfig {
        encoder: opts.encoder.clone(),
        options: opts.ctx.options.clone(),
        seed: opts.ctx.seed,
        replace: opts.force || run.as_ref().is_some_and(|r| r.replace),
        info: None,
    };
    if let Some(r) = &run {
        check_config(dir, "an unfinished run of", &r.encoder, &r.options, r.seed, &requested, fitted, true)?;
    }
    let store = if !requested.replace && dir.join(META_FILE).exists() { Some(FeatureStore::open(dir)?) } else { None };
    if let Some(s) = &store {
        let m = s.meta();
        check_config(dir, "features of", &m.encoder.name, &m.options, m.seed, &requested, fitted, false)?;
    }

    // Key every item (in parallel; order kept).
    let pb = stepwise_core::progress::bar(items.len() as u64, "hashing");
    let keys: Vec<Result<String, String>> = items
        .par_iter()
        .map(|it| {
            let k = match &it.content {
                ItemContent::Text(t) => Ok(stepwise_core::hash::hash_str(t)),
                ItemContent::Image(p) => images.fingerprint(p),
            };
            pb.inc(1);
            k
        })
        .collect();
    pb.finish_and_clear();

    // What is already known, by key.
    let store_rows: HashMap<String, usize> = match &store {
        Some(s) => s.keys()?.into_iter().enumerate().map(|(i, k)| (k, i)).rev().collect(),
        None => HashMap::new(),
    };
    let store_failures: HashMap<String, String> = match &store {
        Some(s) => s.failures()?.into_iter().filter_map(|f| f.key.map(|k| (k, f.reason))).collect(),
        None => HashMap::new(),
    };
    let mut pending: Vec<(String, &ItemContent)> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut reused = 0usize;
    for (it, key) in items.iter().zip(&keys) {
        let Ok(key) = key else { continue };
        if !seen.insert(key.as_str()) {
            continue;
        }
        let known = store_rows.contains_key(key)
            || store_failures.contains_key(key)
            || work.has_vector(key)
            || work.failures.contains_key(key);
        if known {
            reused += 1;
        } else {
            pending.push((key.clone(), &it.content));
        }
    }

    if pending.is_empty()
        && let Some(s) = &store
        && store_matches(s, items, &keys, &store_failures, &opts.inputs)?
    {
        // Still make sure the encoder has not changed since the store was written.
        let enc = build(entry.name, opts, s.meta().fitted.then(|| dir.join(MODEL_DIR)), None)?;
        check_same_encoder(dir, s.info(), enc.info())?;
        if work.exists() {
            std::fs::remove_dir_all(&work_path).at(&work_path)?;
        }
        let failed = s.failures()?.len();
        return Ok(EmbedReport {
            items: items.len(),
            stored: s.len(),
            encoded: 0,
            reused,
            failed,
            up_to_date: true,
            interrupted: false,
        });
    }

    // Build the encoder; a fitted one is fitted once and its state kept with the store.
    work.write_run(&RunConfig { info: run.as_ref().and_then(|r| r.info.clone()), ..requested.clone() })?;
    let state_dir = if !fitted {
        None
    } else if store.as_ref().is_some_and(|s| s.meta().fitted) {
        Some(dir.join(MODEL_DIR))
    } else {
        Some(work.model_dir())
    };
    let fit_texts = fitted.then(|| Arc::new(fit_texts(items)));
    let encoder = match build(entry.name, opts, state_dir.clone(), fit_texts) {
        Ok(e) => e,
        Err(e) => {
            // Nothing was encoded: leave no trace of this run (a missing model must not leave an "unfinished
            // run" behind that later commands would trip over).
            if !work_existed {
                let _ = std::fs::remove_dir_all(&work_path);
                if !dir_existed {
                    let _ = std::fs::remove_dir(dir);
                }
            }
            return Err(e);
        }
    };
    let info = encoder.info().clone();
    if let Some(s) = &store {
        check_same_encoder(dir, s.info(), &info)?;
    }
    if let Some(prev) = run.as_ref().and_then(|r| r.info.as_ref()) {
        check_same_encoder(&work_path, prev, &info)?;
    }
    if let Some(d) = work.dim()
        && d != info.dim
    {
        return Err(FeatureError::Mismatch(format!(
            "{}: unfinished run has dimension {d}, encoder `{}` now gives {}; pass --force to start over",
            work_path.display(),
            info.name,
            info.dim
        )));
    }
    work.write_run(&RunConfig { info: Some(info.clone()), ..requested.clone() })?;

    // Encode what is new, chunk by chunk.
    let encoded = encode_pending(&mut work, encoder.as_ref(), images, &pending, opts)?;
    if encoded < pending.len() {
        return Ok(EmbedReport { items: items.len(), encoded, reused, interrupted: true, ..Default::default() });
    }

    // Assemble the new store.
    let mut rows: Vec<(&str, &str)> = Vec::with_capacity(items.len());
    let mut failures: Vec<Failure> = Vec::new();
    for (it, key) in items.iter().zip(&keys) {
        match key {
            Err(reason) => failures.push(Failure { id: it.id.clone(), key: None, reason: reason.clone() }),
            Ok(k) => {
                if let Some(reason) = work.failures.get(k).or_else(|| store_failures.get(k))
                    && !work.has_vector(k)
                    && !store_rows.contains_key(k)
                {
                    failures.push(Failure { id: it.id.clone(), key: Some(k.clone()), reason: reason.clone() });
                    continue;
                }
                rows.push((&it.id, k));
            }
        }
    }
    let meta = StoreMeta {
        format: STORE_FORMAT,
        encoder: info,
        options: opts.ctx.options.clone(),
        seed: opts.ctx.seed,
        count: rows.len(),
        failures: failures.len(),
        fitted,
        ids_blake3: String::new(),
        inputs: opts.inputs.clone(),
        item_keys: ITEM_KEYS.to_string(),
    };
    write_store(dir, meta, &rows, &failures, &work, store.as_ref(), &store_rows, state_dir.as_deref())?;
    Ok(EmbedReport {
        items: items.len(),
        stored: rows.len(),
        encoded,
        reused,
        failed: failures.len(),
        up_to_date: false,
        interrupted: false,
    })
}

/// The texts a fitted encoder trains on: the steps' full texts (`text:` items; titles are part of them, extra
/// strings such as answer choices must not change the model). Item lists without steps train on every text.
fn fit_texts(items: &[ItemSpec]) -> Vec<String> {
    let texts = |only_steps: bool| -> Vec<String> {
        items
            .iter()
            .filter(|it| !only_steps || it.id.starts_with("text:"))
            .filter_map(|it| match &it.content {
                ItemContent::Text(t) => Some(t.clone()),
                ItemContent::Image(_) => None,
            })
            .collect()
    };
    let steps = texts(true);
    if steps.is_empty() { texts(false) } else { steps }
}

fn build(
    name: &str,
    opts: &EmbedOptions,
    state_dir: Option<PathBuf>,
    fit_texts: Option<Arc<Vec<String>>>,
) -> Result<Box<dyn Encoder>, FeatureError> {
    let mut ctx = opts.ctx.clone();
    ctx.state_dir = state_dir;
    ctx.fit_texts = fit_texts;
    crate::registry::build_encoder(name, &ctx)
}

/// True when the store already holds exactly these items with these keys and failures.
fn store_matches(
    store: &FeatureStore,
    items: &[ItemSpec],
    keys: &[Result<String, String>],
    store_failures: &HashMap<String, String>,
    inputs: &[InputHash],
) -> Result<bool, FeatureError> {
    if store.meta().inputs != inputs {
        return Ok(false);
    }
    let old_failures = store.failures()?;
    let old_keys = store.keys()?;
    let mut row = 0usize;
    let mut fail = 0usize;
    for (it, key) in items.iter().zip(keys) {
        let failed_before = match key {
            Err(_) => true,
            Ok(k) => store_failures.contains_key(k),
        };
        if failed_before {
            let Some(f) = old_failures.get(fail) else {
                return Ok(false);
            };
            if f.id != it.id || f.key.as_ref() != key.as_ref().ok() {
                return Ok(false);
            }
            if let Err(reason) = key
                && &f.reason != reason
            {
                return Ok(false);
            }
            fail += 1;
        } else {
            if row >= store.len() || store.ids()[row] != it.id || key.as_ref().ok() != Some(&old_keys[row]) {
                return Ok(false);
            }
            row += 1;
        }
    }
    Ok(row == store.len() && fail == old_failures.len())
}

/// Encode `pending` in chunks of `opts.chunk_items`, appending each to `work`. Returns how many were processed
/// (fewer than `pending.len()` only when `stop_after` interrupted the run).
fn encode_pending(
    work: &mut WorkDir,
    encoder: &dyn Encoder,
    images: &dyn ImageSource,
    pending: &[(String, &ItemContent)],
    opts: &EmbedOptions,
) -> Result<usize, FeatureError> {
    if pending.is_empty() {
        return Ok(0);
    }
    let dim = encoder.info().dim;
    let batch = encoder.batch_size().max(1);
    let pb = stepwise_core::progress::bar(pending.len() as u64, &opts.label);
    let mut done = 0usize;
    for chunk in pending.chunks(opts.chunk_items.max(1)) {
        let results: Vec<BatchOutput> = chunk
            .par_chunks(batch)
            .map(|b| {
                let out = encode_batch(encoder, images, b, dim);
                pb.inc(b.len() as u64);
                out
            })
            .collect();
        let mut keys = Vec::with_capacity(chunk.len());
        let mut data = Vec::with_capacity(chunk.len() * dim);
        let mut failures = Vec::new();
        let mut encoder_errors = Vec::new();
        for r in results {
            keys.extend(r.keys);
            data.extend(r.data);
            failures.extend(r.failures);
            encoder_errors.extend(r.encoder_errors);
        }
        if keys.is_empty() && !encoder_errors.is_empty() {
            // Nothing in a whole chunk could be encoded: the encoder is broken, not the inputs.
            return Err(FeatureError::Encoder(format!(
                "encoder `{}` failed on every input of a chunk; first error: {}",
                encoder.info().name,
                encoder_errors[0]
            )));
        }
        work.append_chunk(dim, keys, data, failures)?;
        done += chunk.len();
        if opts.stop_after.is_some_and(|n| done >= n) && done < pending.len() {
            pb.abandon();
            return Ok(done);
        }
    }
    pb.finish_and_clear();
    Ok(done)
}

struct BatchOutput {
    keys: Vec<String>,
    data: Vec<f32>,
    failures: Vec<ChunkFailure>,
    encoder_errors: Vec<String>,
}

/// Load and encode one batch. A batch the encoder rejects is retried item by item so one bad input cannot
/// sink the others.
fn encode_batch(
    encoder: &dyn Encoder,
    images: &dyn ImageSource,
    batch: &[(String, &ItemContent)],
    dim: usize,
) -> BatchOutput {
    let mut out = BatchOutput { keys: Vec::new(), data: Vec::new(), failures: Vec::new(), encoder_errors: Vec::new() };
    let mut keys: Vec<&str> = Vec::with_capacity(batch.len());
    let mut loaded: Vec<Loaded<'_>> = Vec::with_capacity(batch.len());
    for (key, content) in batch {
        match content {
            ItemContent::Text(t) => loaded.push(Loaded::Text(t)),
            ItemContent::Image(p) => match images.load(p) {
                Ok(img) => loaded.push(Loaded::Image(img)),
                Err(reason) => {
                    out.failures.push(ChunkFailure { key: key.clone(), reason });
                    continue;
                }
            },
        }
        keys.push(key);
    }
    let inputs: Vec<Item<'_>> = loaded.iter().map(Loaded::item).collect();
    match run_encoder(encoder, &inputs, dim) {
        Ok(v) => accept(&mut out, &keys, &v, dim),
        Err(e) if inputs.len() == 1 => reject(&mut out, keys[0], e),
        Err(_) => {
            for (key, input) in keys.iter().zip(&inputs) {
                match run_encoder(encoder, std::slice::from_ref(input), dim) {
                    Ok(v) => accept(&mut out, &[key], &v, dim),
                    Err(e) => reject(&mut out, key, e),
                }
            }
        }
    }
    out
}

/// Keep finite rows; a row with NaN or infinity is a failure.
fn accept(out: &mut BatchOutput, keys: &[&str], v: &[f32], dim: usize) {
    for (key, row) in keys.iter().zip(v.chunks_exact(dim)) {
        if row.iter().all(|x| x.is_finite()) {
            out.keys.push(key.to_string());
            out.data.extend_from_slice(row);
        } else {
            out.failures
                .push(ChunkFailure { key: key.to_string(), reason: "encoder produced non-finite values".into() });
        }
    }
}

fn reject(out: &mut BatchOutput, key: &str, error: String) {
    out.failures.push(ChunkFailure { key: key.to_string(), reason: format!("encoder: {error}") });
    out.encoder_errors.push(error);
}

fn run_encoder(encoder: &dyn Encoder, inputs: &[Item<'_>], dim: usize) -> Result<Vec<f32>, String> {
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let v = encoder.encode(inputs).map_err(|e| e.to_string())?;
    if v.len() != inputs.len() * dim {
        return Err(format!("returned {} floats for {} inputs of dimension {dim}", v.len(), inputs.len()));
    }
    Ok(v)
}

/// A decoded input.
enum Loaded<'a> {
    Text(&'a str),
    Image(image::RgbImage),
}

impl Loaded<'_> {
    fn item(&self) -> Item<'_> {
        match self {
            Loaded::Text(t) => Item::Text(t),
            Loaded::Image(img) => Item::Image(img),
        }
    }
}

/// Write the finished store into a temporary folder and swap it in place of `dir` (which removes `.work/`).
#[allow(clippy::too_many_arguments)]
fn write_store(
    dir: &Path,
    mut meta: StoreMeta,
    rows: &[(&str, &str)],
    failures: &[Failure],
    work: &WorkDir,
    store: Option<&FeatureStore>,
    store_rows: &HashMap<String, usize>,
    model_src: Option<&Path>,
) -> Result<(), FeatureError> {
    let out = OutputDir::create(dir, true)?;
    let dim = meta.encoder.dim;
    let vectors_path = out.path().join(VECTORS_FILE);
    let mut missing: Option<String> = None;
    write_file_atomic(&vectors_path, |w| {
        crate::npy::write_matrix_header(w, rows.len(), dim)?;
        for (_, key) in rows {
            let v = work.vector(key).or_else(|| store.and_then(|s| store_rows.get(*key).map(|&r| s.row(r))));
            match v {
                Some(v) => crate::npy::write_f32s(w, v)?,
                None => {
                    missing = Some(key.to_string());
                    return Err(std::io::Error::other("missing vector"));
                }
            }
        }
        Ok(())
    })
    .map_err(|e| match &missing {
        Some(k) => FeatureError::Core(Error::runtime(format!("internal error: no vector for key {k}"))),
        None => FeatureError::Core(e),
    })?;
    let mut ids_text = String::new();
    let mut keys_text = String::new();
    for (id, key) in rows {
        ids_text.push_str(id);
        ids_text.push('\n');
        keys_text.push_str(key);
        keys_text.push('\n');
    }
    write_string_atomic(&out.path().join(IDS_FILE), &ids_text)?;
    write_string_atomic(&out.path().join(KEYS_FILE), &keys_text)?;
    write_file_atomic(&out.path().join(FAILURES_FILE), |w| {
        for f in failures {
            let v = serde_json::to_value(f).map_err(std::io::Error::other)?;
            stepwise_core::json::write_canonical(w, &v)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })?;
    if let Some(src) = model_src {
        copy_dir(src, &out.path().join(MODEL_DIR))?;
    }
    meta.ids_blake3 = blake3::hash(ids_text.as_bytes()).to_hex().to_string();
    write_string_atomic(&out.path().join(META_FILE), &stepwise_core::json::to_pretty_sorted(&meta))?;
    let mut manifest = Manifest::new("features");
    if meta.fitted {
        manifest = manifest.with_seed(meta.seed);
    }
    manifest.inputs = meta.inputs.clone();
    manifest.count("items", rows.len() as u64);
    manifest.count("failures", failures.len() as u64);
    manifest.count("dim", dim as u64);
    manifest.param("encoder", &meta.encoder.name);
    manifest.param("encoder_version", &meta.encoder.version);
    if !meta.options.is_empty() {
        manifest.param("encoder_options", &meta.options);
    }
    manifest.write(out.path())?;
    out.commit()?;
    Ok(())
}

fn copy_dir(src: &Path, dst: &Path) -> Result<(), FeatureError> {
    std::fs::create_dir_all(dst).at(dst)?;
    for e in std::fs::read_dir(src).at(src)? {
        let e = e.at(src)?;
        let from = e.path();
        let to = dst.join(e.file_name());
        if from.is_dir() {
            copy_dir(&from, &to)?;
        } else {
            std::fs::copy(&from, &to).at(&from)?;
        }
    }
    Ok(())
}

/// An error unless the request matches what `dir` already holds (`what`: "features of" / "an unfinished run of").
#[allow(clippy::too_many_arguments)]
fn check_config(
    dir: &Path,
    what: &str,
    name: &str,
    options: &std::collections::BTreeMap<String, String>,
    seed: u64,
    req: &RunConfig,
    fitted: bool,
    unfinished: bool,
) -> Result<(), FeatureError> {
    let describe = |n: &str, o: &std::collections::BTreeMap<String, String>, s: u64| {
        let mut d = format!("`{n}`");
        if !o.is_empty() {
            let opts: Vec<String> = o.iter().map(|(k, v)| format!("{k}={v}")).collect();
            d.push_str(&format!(" ({})", opts.join(", ")));
        }
        if find(n).is_some_and(|e| e.kind == EncoderKind::Fitted) {
            d.push_str(&format!(" seed {s}"));
        }
        d
    };
    if name != req.encoder || options != &req.options || (fitted && seed != req.seed) {
        let fix = if unfinished {
            "re-run with the same encoder settings to resume it, or pass --force to discard it"
        } else {
            "write to another folder, or pass --force to replace them"
        };
        return Err(FeatureError::Mismatch(format!(
            "{}: holds {what} encoder {}, but encoder {} was requested; {fix}",
            dir.display(),
            describe(name, options, seed),
            describe(&req.encoder, &req.options, req.seed),
        )));
    }
    Ok(())
}

fn unknown_encoder(name: &str) -> FeatureError {
    let names: Vec<&str> = crate::registry::list().iter().map(|e| e.name).collect();
    usage(format!("unknown encoder `{name}` (available: {})", names.join(", ")))
}

fn usage(msg: String) -> FeatureError {
    FeatureError::Core(Error::usage(msg))
}

/// The modality an encoder reads, for callers choosing items.
pub fn encoder_modality(name: &str) -> Result<Modality, FeatureError> {
    find(name).map(|e| e.modality).ok_or_else(|| unknown_encoder(name))
}
