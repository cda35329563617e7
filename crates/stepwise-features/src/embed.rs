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
//!
//! With [`EmbedOptions::tokens`] (`--tokens`), every chunk also holds the per-token vectors of its inputs (float16)
//! and the store gets `tokens.npy` + `token_offsets.npy` ([`crate::tokens`]); reuse and resuming work the same way,
//! token vectors (and their vocabulary ids) travelling with their item's vector. The token setting (on/off, cap)
//! is part of the request: a store or unfinished run made with another setting is an error unless `--force` is
//! given. A store written before token ids existed is re-encoded by a `--tokens` run (its rows lack the ids).
//!
//! With [`EmbedOptions::patches`] (`--patches --grid G`), image encoders store a `G × G` patch grid of every
//! image the same way ([`crate::patches`]): chunks hold the patches as rows after the vectors, the store gets
//! `patches.npy`, and the grid is part of the request like the token setting.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use stepwise_core::manifest::InputHash;
use stepwise_core::output::{OutputDir, write_file_atomic, write_string_atomic};
use stepwise_core::shard::Shard;
use stepwise_core::{Corpus, Error, IoResultExt, Manifest};

use crate::encoder::{Encoder, Item, Modality, TokenOutput, Vocabulary};
use crate::image_source::{FsImageSource, ImageSource};
use crate::items::{ItemContent, ItemSpec, check_ids, corpus_items};
use crate::patches::{PATCH_ORDER, PatchMeta, patch_output};
use crate::registry::{EncoderContext, EncoderKind, find};
use crate::rows::{ItemRows, RowSlice};
use crate::store::{
    FAILURES_FILE, Failure, FeatureStore, IDS_FILE, KEYS_FILE, META_FILE, MODEL_DIR, STORE_FORMAT, ShardMeta,
    StoreMeta, VECTORS_FILE, WORK_DIR, check_same_encoder,
};
use crate::tokens::{TOKEN_DTYPE, TokenMeta};
use crate::work::{ChunkFailure, ChunkTokens, RUN_FILE, RunConfig, WorkDir};
use crate::{FeatureError, Vectors};

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
    /// Also store per-token vectors, at most this many per item (`--tokens --max-tokens N`; see
    /// [`crate::tokens`]). Only encoders with token output accept it.
    pub tokens: Option<usize>,
    /// Also store a `grid × grid` patch grid of every image (`--patches --grid G`; see [`crate::patches`]). Only
    /// image encoders with patch output accept it.
    pub patches: Option<usize>,
    /// Recorded in the store: the caller cut step texts to their first this many sentences (`--max-sentences`).
    pub max_sentences: Option<usize>,
    /// Embed only this contiguous part of the items (`--shard I/N`); a fitted encoder still fits on all of them, so
    /// every part has the same model. `stepwise features merge` joins the parts ([`crate::merge`]).
    pub shard: Option<Shard>,
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
            tokens: None,
            patches: None,
            max_sentences: None,
            shard: None,
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
    /// Token vectors in the store afterwards (`None` without token output).
    pub tokens: Option<usize>,
    /// Patch vectors in the store afterwards (`None` without patch output).
    pub patches: Option<usize>,
}

/// The per-item rows a run stores beside the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowKind {
    /// Token vectors with their vocabulary ids, at most this many per item.
    Tokens(usize),
    /// A patch grid of this side per image.
    Patches(usize),
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
    row_kind(entry.name, opts)?; // a usage error in the options comes before what the corpus lacks
    if items.is_empty() {
        let (what, instead) = match entry.modality {
            Modality::Image => ("step images (no step names an image file)", "a text encoder, e.g. `--encoder w2v`"),
            Modality::Text => ("step texts or titles", "an image encoder, e.g. `--encoder descriptor`"),
        };
        return Err(FeatureError::NoItems(format!(
            "{}: the corpus has no {what}, so `{}` has nothing to embed; embed it with {instead}",
            corpus.dir.display(),
            entry.name
        )));
    }
    items.extend(extra.iter().cloned());
    let fs = FsImageSource::new(&corpus.image_root);
    embed_items(dir, &items, images.unwrap_or(&fs), opts)
}

/// Encode the images `files` of `source` with `encoder` in memory, without a store (a one-off set such as an extra
/// distractor pool given as a folder): batches in parallel, rows in file order, ids `image:{file}`. Unreadable
/// images are left out; the second value counts them.
pub fn encode_images(
    files: &[String],
    source: &dyn ImageSource,
    encoder: &dyn Encoder,
    label: &str,
) -> Result<(Vectors, usize), FeatureError> {
    let dim = encoder.info().dim;
    let pb = stepwise_core::progress::bar(files.len() as u64, label);
    let batch = encoder.batch_size().max(1);
    let chunks: Vec<Result<Vec<Option<Vec<f32>>>, FeatureError>> = files
        .par_chunks(batch)
        .map(|chunk| {
            let imgs: Vec<Option<_>> = chunk.iter().map(|f| source.load(f).ok()).collect();
            let items: Vec<Item<'_>> = imgs.iter().flatten().map(Item::Image).collect();
            let out = encoder.encode(&items)?;
            let mut rows = out.chunks(dim).map(|r| r.to_vec());
            pb.inc(chunk.len() as u64);
            Ok(imgs.iter().map(|im| im.as_ref().and_then(|_| rows.next())).collect())
        })
        .collect();
    pb.finish_and_clear();
    let mut ids = Vec::new();
    let mut data = Vec::new();
    let mut failed = 0usize;
    for (chunk, rows) in files.chunks(batch).zip(chunks) {
        for (f, r) in chunk.iter().zip(rows?) {
            match r {
                Some(v) => {
                    ids.push(format!("image:{f}"));
                    data.extend(v);
                }
                None => failed += 1,
            }
        }
    }
    Ok((Vectors::new(dim, ids, data), failed))
}

/// Embed `items` into the store at `dir` (see module docs).
pub fn embed_items(
    dir: &Path,
    items: &[ItemSpec],
    images: &dyn ImageSource,
    opts: &EmbedOptions,
) -> Result<EmbedReport, FeatureError> {
    check_ids(items)?;
    let all_items = items;
    let (items, shard) = match opts.shard {
        None => (all_items, None),
        Some(shard) => {
            let mut ids = String::new();
            for it in all_items {
                ids.push_str(&it.id);
                ids.push('\n');
            }
            let items_blake3 = blake3::hash(ids.as_bytes()).to_hex().to_string();
            let meta = ShardMeta { shard, items: all_items.len(), items_blake3 };
            (&all_items[shard.range(all_items.len())], Some(meta))
        }
    };
    let entry = find(&opts.encoder).ok_or_else(|| unknown_encoder(&opts.encoder))?;
    if let Some(it) = items.iter().find(|it| it.content.modality() != entry.modality) {
        return Err(FeatureError::usage(format!(
            "encoder `{}` reads {:?} inputs; item {:?} is {:?}",
            entry.name,
            entry.modality,
            it.id,
            it.content.modality()
        )));
    }
    let row_kind = row_kind(entry.name, opts)?;
    let kind = row_kind.map(|(k, _)| k);
    let fitted = entry.kind == EncoderKind::Fitted;
    let work_path = dir.join(WORK_DIR);
    if dir.exists() && !opts.force && !dir.join(META_FILE).exists() && !work_path.join(RUN_FILE).exists() {
        // Empty, or holding only the `.work/` of a run killed before it wrote its run file: nothing to lose.
        let empty = std::fs::read_dir(dir).map(|d| d.flatten().all(|e| e.file_name() == WORK_DIR)).unwrap_or(false);
        if !empty {
            return Err(FeatureError::usage(format!(
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
        tokens: opts.tokens,
        patches: opts.patches,
        info: None,
    };
    if let Some(r) = &run {
        let held = Held { name: &r.encoder, options: &r.options, seed: r.seed, tokens: r.tokens, patches: r.patches };
        check_config(dir, "an unfinished run of", held, &requested, fitted, true)?;
    }
    let store = if !requested.replace && dir.join(META_FILE).exists() { Some(FeatureStore::open(dir)?) } else { None };
    if let Some(s) = &store {
        let m = s.meta();
        let tokens = m.tokens.as_ref().map(|t| t.max_tokens);
        let patches = m.patches.as_ref().map(|p| p.grid);
        let held = Held { name: &m.encoder.name, options: &m.options, seed: m.seed, tokens, patches };
        check_config(dir, "features of", held, &requested, fitted, false)?;
    }
    // The existing store's token vectors or patch grids, reused with its vectors (the settings are the same:
    // checked above). Token rows without ids (a store written before token ids existed) are not reusable: the
    // store's items are encoded again.
    let store_item_rows: Option<ItemRows> = match (&store, kind) {
        (Some(s), Some(RowKind::Tokens(_))) => s.tokens()?.map(|t| t.into_rows()).filter(ItemRows::has_row_ids),
        (Some(s), Some(RowKind::Patches(_))) => s.patches()?.map(|p| p.into_rows()),
        _ => None,
    };
    let store_reusable = kind.is_none() || store_item_rows.is_some();
    // A finished input of the unfinished run: its vector and, in a token run, its tokens and their ids (in a patch
    // run, its patches).
    let in_work = |work: &WorkDir, key: &str| {
        work.has_vector(key)
            && match kind {
                None => true,
                Some(RowKind::Tokens(_)) => work.token_ids(key).is_some() && work.token_bytes(key).is_some(),
                Some(RowKind::Patches(_)) => work.token_bytes(key).is_some(),
            }
    };

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
        Some(s) if store_reusable => s.keys()?.into_iter().enumerate().map(|(i, k)| (k, i)).rev().collect(),
        _ => HashMap::new(),
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
            || in_work(&work, key)
            || work.failures.contains_key(key);
        if known {
            reused += 1;
        } else {
            pending.push((key.clone(), &it.content));
        }
    }

    if pending.is_empty()
        && let Some(s) = &store
        && s.meta().max_sentences == opts.max_sentences
        && s.meta().shard == shard
        && store_matches(s, items, &keys, &store_failures, &opts.inputs)?
    {
        // Still make sure the encoder has not changed since the store was written.
        let enc = build(entry.name, opts, s.meta().fitted.then(|| dir.join(MODEL_DIR)), None)?;
        check_same_encoder(dir, s.info(), enc.info())?;
        if work.exists() {
            std::fs::remove_dir_all(&work_path).at(&work_path)?;
        }
        let failed = s.failures()?.len();
        // A shard may hold no vectors (more shards than items, or only unreadable ones): a valid part, judged
        // when the parts are merged.
        if s.is_empty() && shard.is_none() {
            return Err(all_failed(dir, &s.failures()?));
        }
        return Ok(EmbedReport {
            items: items.len(),
            stored: s.len(),
            encoded: 0,
            reused,
            failed,
            up_to_date: true,
            interrupted: false,
            tokens: s.meta().tokens.as_ref().map(|t| t.total),
            patches: s.meta().patches.as_ref().map(|p| s.len() * p.grid * p.grid),
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
    let fit_texts = fitted.then(|| Arc::new(fit_texts(all_items)));
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
    let encoded = encode_pending(&mut work, encoder.as_ref(), images, &pending, opts, kind)?;
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
                    && !in_work(&work, k)
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
        tokens: None,
        patches: None,
        max_sentences: opts.max_sentences,
        shard: shard.clone(),
    };
    let sources = Sources {
        work: &work,
        store: store.as_ref(),
        store_rows: &store_rows,
        store_item_rows: store_item_rows.as_ref(),
    };
    let row_output = row_kind.map(|(kind, what)| RowOutput {
        kind,
        what,
        dim: row_dim(encoder.as_ref(), kind),
        vocab: encoder.vocabulary(),
    });
    let total_rows = write_store(dir, meta, &rows, &failures, &sources, row_output, state_dir.as_deref(), None)?;
    if rows.is_empty() && shard.is_none() {
        // The store is written (its failure list is what the user needs) but is no result: say why.
        return Err(all_failed(dir, &failures));
    }
    Ok(EmbedReport {
        items: items.len(),
        stored: rows.len(),
        encoded,
        reused,
        failed: failures.len(),
        up_to_date: false,
        interrupted: false,
        tokens: total_rows.filter(|_| matches!(kind, Some(RowKind::Tokens(_)))),
        patches: total_rows.filter(|_| matches!(kind, Some(RowKind::Patches(_)))),
    })
}

/// What the run stores beside the vectors, and what one of those rows is; a usage error for options the encoder
/// cannot serve.
fn row_kind(encoder: &str, opts: &EmbedOptions) -> Result<Option<(RowKind, &'static str)>, FeatureError> {
    Ok(match (opts.tokens, opts.patches) {
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(FeatureError::usage(
                "--tokens (text encoders) and --patches (image encoders) cannot be combined",
            ));
        }
        (Some(0), None) => return Err(FeatureError::usage("--max-tokens must be at least 1")),
        (Some(cap), None) => Some((RowKind::Tokens(cap), crate::tokens::token_output(encoder)?)),
        (None, Some(grid)) => Some((RowKind::Patches(grid), patch_output(encoder, grid)?)),
    })
}

/// The error of a run whose every input failed: how many, the first reason, and where the list is.
fn all_failed(dir: &Path, failures: &[Failure]) -> FeatureError {
    let first = failures.first().map_or_else(String::new, |f| format!(" (first: {}: {})", f.id, f.reason));
    FeatureError::NoItems(format!(
        "{}: all {} inputs failed to encode, so the store holds no vectors{first}; every failure is listed in {}",
        dir.display(),
        failures.len(),
        dir.join(FAILURES_FILE).display()
    ))
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
    kind: Option<RowKind>,
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
                let out = encode_batch(encoder, images, b, dim, kind);
                pb.inc(b.len() as u64);
                out
            })
            .collect();
        let mut keys = Vec::with_capacity(chunk.len());
        let mut data = Vec::with_capacity(chunk.len() * dim);
        let mut failures = Vec::new();
        let mut encoder_errors = Vec::new();
        let mut tokens = kind.map(|k| ChunkTokens {
            dim: row_dim(encoder, k),
            ids: matches!(k, RowKind::Tokens(_)).then(Vec::new),
            ..Default::default()
        });
        for r in results {
            keys.extend(r.keys);
            data.extend(r.data);
            failures.extend(r.failures);
            encoder_errors.extend(r.encoder_errors);
            if let Some(t) = &mut tokens {
                t.counts.extend(r.token_counts);
                t.data.extend(r.token_data);
                if let Some(ids) = &mut t.ids {
                    ids.extend(r.token_ids);
                }
            }
        }
        if keys.is_empty() && !encoder_errors.is_empty() {
            // Nothing in a whole chunk could be encoded: the encoder is broken, not the inputs.
            return Err(FeatureError::Encoder(format!(
                "encoder `{}` failed on every input of a chunk; first error: {}",
                encoder.info().name,
                encoder_errors[0]
            )));
        }
        work.append_chunk(dim, keys, data, failures, tokens)?;
        done += chunk.len();
        if opts.stop_after.is_some_and(|n| done >= n) && done < pending.len() {
            pb.abandon();
            return Ok(done);
        }
    }
    pb.finish_and_clear();
    Ok(done)
}

#[derive(Default)]
struct BatchOutput {
    keys: Vec<String>,
    data: Vec<f32>,
    failures: Vec<ChunkFailure>,
    encoder_errors: Vec<String>,
    /// Token or patch run: the row count of each key, their float16 values and (tokens) their vocabulary ids.
    token_counts: Vec<usize>,
    token_data: Vec<half::f16>,
    token_ids: Vec<i64>,
}

/// The width of the rows of `kind`: token vectors are the encoder's `dim` wide, patches its `patch_dim`.
fn row_dim(encoder: &dyn Encoder, kind: RowKind) -> usize {
    match kind {
        RowKind::Tokens(_) => encoder.info().dim,
        RowKind::Patches(_) => encoder.patch_dim(),
    }
}

/// Load and encode one batch (with token vectors or patch grids as `kind` says). A batch the encoder rejects is
/// retried item by item so one bad input cannot sink the others.
fn encode_batch(
    encoder: &dyn Encoder,
    images: &dyn ImageSource,
    batch: &[(String, &ItemContent)],
    dim: usize,
    kind: Option<RowKind>,
) -> BatchOutput {
    let mut out = BatchOutput::default();
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
    let row_width = kind.map_or(0, |k| row_dim(encoder, k));
    match run_encoder(encoder, &inputs, dim, kind) {
        Ok(v) => accept(&mut out, &keys, &v, dim, row_width),
        Err(e) if inputs.len() == 1 => reject(&mut out, keys[0], e),
        Err(_) => {
            for (key, input) in keys.iter().zip(&inputs) {
                match run_encoder(encoder, std::slice::from_ref(input), dim, kind) {
                    Ok(v) => accept(&mut out, &[key], &v, dim, row_width),
                    Err(e) => reject(&mut out, key, e),
                }
            }
        }
    }
    out
}

/// Keep finite rows; a row with NaN or infinity, or token (patch) values beyond float16, is a failure.
fn accept(out: &mut BatchOutput, keys: &[&str], v: &TokenOutput, dim: usize, row_width: usize) {
    let mut at = 0usize;
    for (i, (key, row)) in keys.iter().zip(v.vectors.chunks_exact(dim)).enumerate() {
        // Token or patch runs: the rows of input i as float16 and their ids (`counts` is empty otherwise).
        let tokens = v.counts.get(i).map(|&n| {
            let t = &v.tokens[at * row_width..(at + n) * row_width];
            let ids = v.ids.get(at..at + n).unwrap_or(&[]);
            at += n;
            (n, crate::rows::to_f16(t), ids)
        });
        let reason = if !row.iter().all(|x| x.is_finite()) {
            Some("encoder produced non-finite values")
        } else if matches!(tokens, Some((_, None, _))) {
            Some("encoder produced token or patch values that are non-finite or beyond the float16 range")
        } else {
            None
        };
        if let Some(reason) = reason {
            out.failures.push(ChunkFailure { key: key.to_string(), reason: reason.into() });
            continue;
        }
        out.keys.push(key.to_string());
        out.data.extend_from_slice(row);
        if let Some((n, Some(values), ids)) = tokens {
            out.token_counts.push(n);
            out.token_data.extend(values);
            out.token_ids.extend_from_slice(ids);
        }
    }
}

fn reject(out: &mut BatchOutput, key: &str, error: String) {
    out.failures.push(ChunkFailure { key: key.to_string(), reason: format!("encoder: {error}") });
    out.encoder_errors.push(error);
}

/// Encode `inputs` (with at most `cap` token vectors and their ids, or a `grid²` patch grid, each, as `kind` says),
/// checking the output's shape.
fn run_encoder(
    encoder: &dyn Encoder,
    inputs: &[Item<'_>],
    dim: usize,
    kind: Option<RowKind>,
) -> Result<TokenOutput, String> {
    if inputs.is_empty() {
        return Ok(TokenOutput::default());
    }
    let out = match kind {
        None => TokenOutput { vectors: encoder.encode(inputs).map_err(|e| e.to_string())?, ..Default::default() },
        Some(kind) => {
            let (out, expected) = match kind {
                RowKind::Tokens(cap) => (encoder.encode_with_tokens(inputs, cap), format!("at most {cap}")),
                RowKind::Patches(g) => (encoder.encode_with_patches(inputs, g), format!("exactly {}", g * g)),
            };
            let out = out.map_err(|e| e.to_string())?;
            let n: usize = out.counts.iter().sum();
            let counts_ok = out.counts.iter().all(|&c| match kind {
                RowKind::Tokens(cap) => c <= cap,
                RowKind::Patches(g) => c == g * g,
            });
            let ids = if matches!(kind, RowKind::Tokens(_)) { n } else { 0 };
            let width = row_dim(encoder, kind);
            if out.counts.len() != inputs.len() || !counts_ok || out.tokens.len() != n * width || out.ids.len() != ids {
                return Err(format!(
                    "returned {} row counts ({expected} each expected), {} values and {} ids for {} inputs of row \
                     width {width}",
                    out.counts.len(),
                    out.tokens.len(),
                    out.ids.len(),
                    inputs.len()
                ));
            }
            out
        }
    };
    if out.vectors.len() != inputs.len() * dim {
        return Err(format!("returned {} floats for {} inputs of dimension {dim}", out.vectors.len(), inputs.len()));
    }
    Ok(out)
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

/// Where the rows of a new store come from: the unfinished run's chunks, else the existing store (by key).
struct Sources<'a> {
    work: &'a WorkDir,
    store: Option<&'a FeatureStore>,
    store_rows: &'a HashMap<String, usize>,
    /// The store's token vectors or patch grids (in a run that stores them).
    store_item_rows: Option<&'a ItemRows>,
}

/// Where each row of a new store comes from, by its number and key (`rows[row]` of [`write_store`]).
pub(crate) trait RowSource {
    fn vector(&self, row: usize, key: &str) -> Option<&[f32]>;
    /// The token vectors (patch grid) of the row.
    fn rows(&self, row: usize, key: &str) -> Option<RowSlice<'_>>;
    /// The vocabulary ids of the row's tokens.
    fn token_ids(&self, row: usize, key: &str) -> Option<Vec<i64>>;
}

impl RowSource for Sources<'_> {
    fn vector(&self, _row: usize, key: &str) -> Option<&[f32]> {
        self.work.vector(key).or_else(|| self.store.and_then(|s| self.store_rows.get(key).map(|&r| s.row(r))))
    }

    fn rows(&self, _row: usize, key: &str) -> Option<RowSlice<'_>> {
        match self.work.token_bytes(key) {
            Some(b) => Some(RowSlice::Bytes(b)),
            None => {
                let (t, &row) = self.store_item_rows.zip(self.store_rows.get(key))?;
                Some(RowSlice::Values(t.item_f16(row)))
            }
        }
    }

    fn token_ids(&self, _row: usize, key: &str) -> Option<Vec<i64>> {
        if self.work.token_bytes(key).is_some() {
            return self.work.token_ids(key);
        }
        let (t, &row) = self.store_item_rows.zip(self.store_rows.get(key))?;
        t.item_row_ids(row).map(<[i64]>::to_vec)
    }
}

/// What a store holds beside its vectors: token vectors or patch grids.
pub(crate) struct RowOutput<'a> {
    pub(crate) kind: RowKind,
    /// What one row is (recorded in `meta.json`).
    pub(crate) what: &'a str,
    /// Width of a row.
    pub(crate) dim: usize,
    /// Token runs: the vocabulary the ids index.
    pub(crate) vocab: Option<Vocabulary>,
}

/// Write the finished store into a temporary folder and swap it in place of `dir` (which removes `.work/`);
/// with `row_output`, also the token or patch files. The manifest records `command` when given (a merge records
/// the command of its parts), else this process's command line. Returns the number of token or patch vectors written.
#[allow(clippy::too_many_arguments)] // the parts of one store; a struct would only rename them
pub(crate) fn write_store(
    dir: &Path,
    mut meta: StoreMeta,
    rows: &[(&str, &str)],
    failures: &[Failure],
    src: &dyn RowSource,
    row_output: Option<RowOutput<'_>>,
    model_src: Option<&Path>,
    command: Option<Vec<String>>,
) -> Result<Option<usize>, FeatureError> {
    let internal =
        |what: &str, key: &str| FeatureError::Core(Error::runtime(format!("internal error: no {what} for key {key}")));
    let out = OutputDir::create(dir, true)?;
    let dim = meta.encoder.dim;
    let vectors_path = out.path().join(VECTORS_FILE);
    let mut missing: Option<String> = None;
    write_file_atomic(&vectors_path, |w| {
        crate::npy::write_matrix_header(w, rows.len(), dim)?;
        for (row, (_, key)) in rows.iter().enumerate() {
            match src.vector(row, key) {
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
        Some(k) => internal("vector", k),
        None => FeatureError::Core(e),
    })?;
    let mut total_rows = None;
    if let Some(ro) = row_output {
        let per_row = rows
            .iter()
            .enumerate()
            .map(|(row, (_, key))| src.rows(row, key).ok_or_else(|| internal("token or patch vectors", key)))
            .collect::<Result<Vec<_>, _>>()?;
        match ro.kind {
            RowKind::Tokens(max_tokens) => {
                let vocab = ro.vocab.ok_or_else(|| internal("vocabulary", &meta.encoder.name))?;
                let mut ids = Vec::new();
                for (row, (_, key)) in rows.iter().enumerate() {
                    ids.extend(src.token_ids(row, key).ok_or_else(|| internal("token ids", key))?);
                }
                let (total, offsets_blake3, ids_blake3) =
                    crate::tokens::write_token_files(out.path(), ro.dim, &per_row, Some(&ids))?;
                meta.tokens = Some(TokenMeta {
                    max_tokens,
                    dtype: TOKEN_DTYPE.to_string(),
                    total,
                    dim: ro.dim,
                    token: ro.what.to_string(),
                    offsets_blake3,
                    vocab: Some(vocab),
                    ids_blake3,
                });
                total_rows = Some(total);
            }
            RowKind::Patches(grid) => {
                crate::patches::write_patch_file(out.path(), grid, ro.dim, &per_row)?;
                meta.patches = Some(PatchMeta {
                    grid,
                    dim: ro.dim,
                    dtype: TOKEN_DTYPE.to_string(),
                    patch: ro.what.to_string(),
                    order: PATCH_ORDER.to_string(),
                });
                total_rows = Some(rows.len() * grid * grid);
            }
        }
    }
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
    if let Some(c) = command {
        manifest.command = c;
    }
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
    if let Some(t) = &meta.tokens {
        manifest.count("tokens", t.total as u64);
        manifest.param("max_tokens", t.max_tokens);
    }
    if let Some(p) = &meta.patches {
        manifest.count("patches", (rows.len() * p.grid * p.grid) as u64);
        manifest.param("grid", p.grid);
    }
    if let Some(n) = meta.max_sentences {
        manifest.param("max_sentences", n);
    }
    if let Some(s) = &meta.shard {
        manifest.param("shard", s.shard);
    }
    manifest.write(out.path())?;
    out.commit()?;
    Ok(total_rows)
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

/// The settings a store or an unfinished run holds.
#[derive(Clone, Copy)]
struct Held<'a> {
    name: &'a str,
    options: &'a std::collections::BTreeMap<String, String>,
    seed: u64,
    tokens: Option<usize>,
    patches: Option<usize>,
}

/// An error unless the request matches what `dir` already holds (`what`: "features of" / "an unfinished run of").
fn check_config(
    dir: &Path,
    what: &str,
    held: Held<'_>,
    req: &RunConfig,
    fitted: bool,
    unfinished: bool,
) -> Result<(), FeatureError> {
    let show_tokens = held.tokens.is_some() || req.tokens.is_some();
    let show_patches = held.patches.is_some() || req.patches.is_some();
    let describe = |h: Held<'_>| {
        let mut d = format!("`{}`", h.name);
        if !h.options.is_empty() {
            let opts: Vec<String> = h.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            d.push_str(&format!(" ({})", opts.join(", ")));
        }
        if find(h.name).is_some_and(|e| e.kind == EncoderKind::Fitted) {
            d.push_str(&format!(" seed {}", h.seed));
        }
        if show_tokens {
            match h.tokens {
                Some(n) => d.push_str(&format!(" with token output (--tokens --max-tokens {n})")),
                None => d.push_str(" without token output"),
            }
        }
        if show_patches {
            match h.patches {
                Some(g) => d.push_str(&format!(" with patch grids (--patches --grid {g})")),
                None => d.push_str(" without patch grids"),
            }
        }
        d
    };
    if held.name != req.encoder
        || held.options != &req.options
        || (fitted && held.seed != req.seed)
        || held.tokens != req.tokens
        || held.patches != req.patches
    {
        let fix = if unfinished {
            "re-run with the same encoder settings to resume it, or pass --force to discard it"
        } else {
            "write to another folder, or pass --force to replace them"
        };
        let requested = Held {
            name: &req.encoder,
            options: &req.options,
            seed: req.seed,
            tokens: req.tokens,
            patches: req.patches,
        };
        return Err(FeatureError::Mismatch(format!(
            "{}: holds {what} encoder {}, but encoder {} was requested; {fix}",
            dir.display(),
            describe(held),
            describe(requested),
        )));
    }
    Ok(())
}

fn unknown_encoder(name: &str) -> FeatureError {
    let names: Vec<&str> = crate::registry::list().iter().map(|e| e.name).collect();
    FeatureError::usage(format!("unknown encoder `{name}` (available: {})", names.join(", ")))
}

/// The modality an encoder reads, for callers choosing items.
pub fn encoder_modality(name: &str) -> Result<Modality, FeatureError> {
    find(name).map(|e| e.modality).ok_or_else(|| unknown_encoder(name))
}
