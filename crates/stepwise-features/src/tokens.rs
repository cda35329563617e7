//! Token-level features: per-token vectors of each item, stored next to the pooled vectors of a feature store
//! (`stepwise embed --tokens`), for models that read the tokens of a step (e.g. a hierarchical BiLSTM).
//!
//! Files, inside the store folder (so the store's `meta.json`, ids and manifest cover them):
//! - `tokens.npy`: float16 `(total_tokens, dim)`, C order, NumPy-readable;
//! - `token_offsets.npy`: int64 `(count + 1,)`: the tokens of row i of `ids` are rows
//!   `offsets[i]..offsets[i + 1]` of `tokens.npy` (an item without any token has an empty range);
//! - `meta.json` → `tokens` ([`TokenMeta`]): the cap per item, dtype, total, dimension, what a token is for this
//!   encoder, and a hash of `token_offsets.npy` checked on open.
//!
//! Which encoders have token output, and what a token is for each, is in the registry
//! ([`crate::registry::EncoderEntry::tokens`]): the word vectors of the in-vocabulary words for `w2v` and
//! `glove-50d` (the same tokenisation as their pooled vector), the last hidden state of each WordPiece token
//! (no `[CLS]`/`[SEP]`) for `minilm`. Only the first `max_tokens` tokens of an item are kept. Image items have no
//! tokens (no image encoder has token output). Values beyond the float16 range make the item a failure.

use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;
use std::path::Path;

use half::f16;
use serde::{Deserialize, Serialize};
use stepwise_core::{Error, IoResultExt};

use crate::npy::MmapF16Matrix;
use crate::store::FeatureStore;
use crate::{FeatureError, registry};

pub const TOKENS_FILE: &str = "tokens.npy";
pub const TOKEN_OFFSETS_FILE: &str = "token_offsets.npy";
/// Tokens kept per item unless `--max-tokens` says otherwise.
pub const DEFAULT_MAX_TOKENS: usize = 32;
/// The dtype of `tokens.npy`, as recorded in `meta.json`.
pub const TOKEN_DTYPE: &str = "float16";

/// The `tokens` entry of a store's `meta.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenMeta {
    /// At most this many tokens per item (the first ones).
    pub max_tokens: usize,
    /// Element type of `tokens.npy` (`float16`).
    pub dtype: String,
    /// Rows of `tokens.npy`.
    pub total: usize,
    /// Columns of `tokens.npy`.
    pub dim: usize,
    /// What one token vector is, for this encoder.
    pub token: String,
    /// BLAKE3 of `token_offsets.npy`, checked on open (catches files from different runs).
    pub offsets_blake3: String,
}

/// What a token is for `encoder`, or a usage error naming the encoders with token output.
pub fn token_output(encoder: &str) -> Result<&'static str, FeatureError> {
    if let Some(t) = registry::find(encoder).and_then(|e| e.tokens) {
        return Ok(t);
    }
    let with: Vec<&str> = registry::list().iter().filter(|e| e.tokens.is_some()).map(|e| e.name).collect();
    Err(FeatureError::Core(Error::usage(format!(
        "encoder `{encoder}` has no per-token output; --tokens works with: {}",
        with.join(", ")
    ))))
}

/// Per-token vectors of items: rows `offsets[i]..offsets[i+1]` of the token matrix belong to item i.
#[derive(Debug)]
pub struct TokenVectors {
    /// Dimension of each token vector.
    pub dim: usize,
    ids: Vec<String>,
    index: HashMap<String, usize>,
    /// `ids.len() + 1` non-decreasing row offsets, starting at 0.
    offsets: Vec<usize>,
    data: TokenData,
    max_tokens: usize,
}

#[derive(Debug)]
enum TokenData {
    Mapped(MmapF16Matrix),
    Owned(Vec<f16>),
}

impl TokenVectors {
    /// Open the token output of the feature store in `store_dir`: `None` when the store has none (it was embedded
    /// without `--tokens`); an error when the store itself cannot be opened or its token files disagree.
    pub fn open(store_dir: &Path) -> Result<Option<TokenVectors>, FeatureError> {
        Self::from_store(&FeatureStore::open(store_dir)?)
    }

    /// The token output of an opened store (`None` when it has none).
    pub fn from_store(store: &FeatureStore) -> Result<Option<TokenVectors>, FeatureError> {
        let Some(tm) = &store.meta().tokens else {
            return Ok(None);
        };
        let dir = store.dir();
        let redo = "re-run `stepwise embed --tokens --force`";
        let off_path = dir.join(TOKEN_OFFSETS_FILE);
        let off_bytes = std::fs::read(&off_path).at(&off_path)?;
        if blake3::hash(&off_bytes).to_hex().as_str() != tm.offsets_blake3 {
            return Err(bad(format!(
                "{}: does not match {} (files from different runs?); {redo}",
                off_path.display(),
                dir.join(crate::store::META_FILE).display()
            )));
        }
        let raw = crate::npy::parse_i64_vector(&off_path, &off_bytes)?;
        let matrix = MmapF16Matrix::open(&dir.join(TOKENS_FILE))?;
        if matrix.rows != tm.total || matrix.cols != tm.dim {
            return Err(bad(format!(
                "{}: shape ({}, {}), but meta.json says {} tokens of dim {}; {redo}",
                dir.join(TOKENS_FILE).display(),
                matrix.rows,
                matrix.cols,
                tm.total,
                tm.dim
            )));
        }
        let offsets = check_offsets(&off_path, &raw, store.len(), tm.total, tm.max_tokens)?;
        Ok(Some(TokenVectors {
            dim: tm.dim,
            ids: store.ids().to_vec(),
            index: store.ids().iter().enumerate().map(|(i, id)| (id.clone(), i)).collect(),
            offsets,
            data: TokenData::Mapped(matrix),
            max_tokens: tm.max_tokens,
        }))
    }

    /// Token vectors held in memory (e.g. for tests): `offsets` as in `token_offsets.npy` (`ids.len() + 1`
    /// values from 0 to `data.len() / dim`), `data` row-major. An error when they disagree.
    pub fn new(
        dim: usize,
        max_tokens: usize,
        ids: Vec<String>,
        offsets: Vec<usize>,
        data: Vec<f16>,
    ) -> Result<TokenVectors, FeatureError> {
        if dim == 0 || !data.len().is_multiple_of(dim) {
            return Err(bad(format!("token vectors: {} values are not rows of dimension {dim}", data.len())));
        }
        let raw: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
        let offsets = check_offsets(Path::new("(token offsets)"), &raw, ids.len(), data.len() / dim, max_tokens)?;
        let mut index = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            if index.insert(id.clone(), i).is_some() {
                return Err(bad(format!("token vectors: duplicate id {id:?}")));
            }
        }
        Ok(TokenVectors { dim, ids, index, offsets, data: TokenData::Owned(data), max_tokens })
    }

    /// Items (rows of `ids`, with or without tokens).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Item ids, in store row order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The cap on tokens per item used when the store was written.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Token rows in all.
    pub fn total_tokens(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0)
    }

    /// Rows of the token matrix belonging to item `i`. Panics when `i >= len()`, like slice indexing.
    pub fn row_range(&self, i: usize) -> Range<usize> {
        self.offsets[i]..self.offsets[i + 1]
    }

    /// The whole token matrix, row-major float16 (memory-mapped when opened from a store).
    pub fn data_f16(&self) -> &[f16] {
        match &self.data {
            TokenData::Mapped(m) => m.data(),
            TokenData::Owned(v) => v,
        }
    }

    /// The token vectors of item `i` as stored (`count × dim` float16). Panics when `i >= len()`.
    pub fn item_f16(&self, i: usize) -> &[f16] {
        let r = self.row_range(i);
        &self.data_f16()[r.start * self.dim..r.end * self.dim]
    }

    /// The tokens of `id` as row-major `tokens × dim` f32; `None` for an unknown id or an item without tokens.
    pub fn get(&self, id: &str) -> Option<Vec<f32>> {
        let i = self.index_of(id)?;
        let v = self.item_f16(i);
        (!v.is_empty()).then(|| v.iter().map(|x| x.to_f32()).collect())
    }

    /// How many token vectors `id` has (`Some(0)` for a stored item without any, e.g. no in-vocabulary word);
    /// `None` for an id not in the store.
    pub fn token_count(&self, id: &str) -> Option<usize> {
        self.index_of(id).map(|i| self.row_range(i).len())
    }
}

/// Offsets as `usize`, checked: `items + 1` values, starting at 0, non-decreasing by at most `max_tokens`,
/// ending at `total`.
fn check_offsets(
    path: &Path,
    raw: &[i64],
    items: usize,
    total: usize,
    max_tokens: usize,
) -> Result<Vec<usize>, FeatureError> {
    let redo = "re-run `stepwise embed --tokens --force`";
    if raw.len() != items + 1 {
        return Err(bad(format!(
            "{}: {} offsets for {items} items (expected {}); {redo}",
            path.display(),
            raw.len(),
            items + 1
        )));
    }
    let mut out = Vec::with_capacity(raw.len());
    for (i, &o) in raw.iter().enumerate() {
        let prev = out.last().copied().unwrap_or(0);
        let ok = usize::try_from(o).ok().filter(|&o| if i == 0 { o == 0 } else { o >= prev && o - prev <= max_tokens });
        match ok {
            Some(o) => out.push(o),
            None => {
                return Err(bad(format!(
                    "{}: offset {i} is {o} after {prev} (offsets start at 0 and grow by 0..={max_tokens}); {redo}",
                    path.display()
                )));
            }
        }
    }
    if out.last() != Some(&total) {
        return Err(bad(format!(
            "{}: the last offset is {}, but there are {total} token rows; {redo}",
            path.display(),
            out.last().copied().unwrap_or(0)
        )));
    }
    Ok(out)
}

/// f32 token values as float16; `None` when one is non-finite or beyond the float16 range (it would become ±inf).
pub fn to_f16(values: &[f32]) -> Option<Vec<f16>> {
    let out: Vec<f16> = values.iter().map(|&x| f16::from_f32(x)).collect();
    out.iter().all(|x| x.is_finite()).then_some(out)
}

/// The token values of one item, as a work chunk (little-endian float16 bytes) or a store (values) holds them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TokenSlice<'a> {
    Bytes(&'a [u8]),
    Values(&'a [f16]),
}

impl TokenSlice<'_> {
    /// Number of float16 values.
    fn len(&self) -> usize {
        match self {
            TokenSlice::Bytes(b) => b.len() / 2,
            TokenSlice::Values(v) => v.len(),
        }
    }
}

/// Write `tokens.npy` and `token_offsets.npy` into `dir` from the token values of each item (in row order);
/// returns the total token count and the BLAKE3 of the offsets file.
pub(crate) fn write_token_files(
    dir: &Path,
    dim: usize,
    items: &[TokenSlice<'_>],
) -> Result<(usize, String), FeatureError> {
    let mut offsets: Vec<i64> = Vec::with_capacity(items.len() + 1);
    let mut total = 0usize;
    offsets.push(0);
    for v in items {
        debug_assert_eq!(v.len() % dim, 0, "token rows of whole vectors");
        total += v.len() / dim;
        offsets.push(total as i64);
    }
    stepwise_core::output::write_file_atomic(&dir.join(TOKENS_FILE), |w| {
        w.write_all(&crate::npy::header_bytes_for("<f2", &[total, dim]))?;
        for v in items {
            match v {
                TokenSlice::Bytes(b) => w.write_all(b)?,
                TokenSlice::Values(v) => crate::npy::write_f16s(w, v)?,
            }
        }
        Ok(())
    })?;
    let off_path = dir.join(TOKEN_OFFSETS_FILE);
    crate::npy::write_i64_vector(&off_path, &offsets)?;
    let hash = blake3::hash(&std::fs::read(&off_path).at(&off_path)?).to_hex().to_string();
    Ok((total, hash))
}

fn bad(msg: String) -> FeatureError {
    FeatureError::Core(Error::bad_input(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &[f32]) -> Vec<f16> {
        v.iter().map(|&x| f16::from_f32(x)).collect()
    }

    #[test]
    fn in_memory_token_vectors() {
        let ids: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let t = TokenVectors::new(2, 2, ids.clone(), vec![0, 2, 2, 3], h(&[1., 2., 3., 4., 5., 6.])).unwrap();
        assert_eq!((t.len(), t.total_tokens(), t.max_tokens()), (3, 3, 2));
        assert_eq!(t.get("a"), Some(vec![1., 2., 3., 4.]));
        assert_eq!(t.get("b"), None, "an item without tokens is None, never Some(empty)");
        assert_eq!(t.token_count("b"), Some(0));
        assert_eq!(t.get("c"), Some(vec![5., 6.]));
        assert_eq!((t.token_count("zz"), t.get("zz"), t.index_of("c")), (None, None, Some(2)));
        // Inconsistent parts are errors, not panics.
        assert!(TokenVectors::new(2, 2, ids.clone(), vec![0, 2, 2], h(&[0.; 6])).is_err());
        assert!(TokenVectors::new(2, 2, ids.clone(), vec![0, 2, 1, 3], h(&[0.; 6])).is_err());
        assert!(TokenVectors::new(2, 1, ids.clone(), vec![0, 2, 2, 3], h(&[0.; 6])).is_err(), "over the cap");
        assert!(TokenVectors::new(2, 2, ids, vec![0, 2, 2, 4], h(&[0.; 6])).is_err());
    }

    #[test]
    fn f16_conversion_rejects_overflow() {
        assert_eq!(to_f16(&[1.5, -2.0]).unwrap(), h(&[1.5, -2.0]));
        assert!(to_f16(&[70000.0]).is_none());
        assert!(to_f16(&[f32::NAN]).is_none());
    }

    #[test]
    fn unsupported_encoders_are_usage_errors() {
        for name in ["tfidf", "descriptor", "effnet-lite0", "nope"] {
            let e = token_output(name).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{name}");
            let msg = e.to_string();
            assert!(msg.contains(name) && msg.contains("w2v") && msg.contains("minilm"), "{msg}");
        }
        for name in ["w2v", "minilm", "glove-50d"] {
            assert!(token_output(name).is_ok(), "{name}");
        }
    }
}
