//! Token-level features: per-token vectors of each item, stored next to the pooled vectors of a feature store
//! (`stepwise embed --tokens`), for models that read the tokens of a step (e.g. a hierarchical BiLSTM), and the
//! vocabulary id of every token, for models that predict masked tokens (masked-language-model pretraining).
//!
//! Files, inside the store folder (so the store's `meta.json`, ids and manifest cover them):
//! - `tokens.npy`: float16 `(total_tokens, dim)`, C order, NumPy-readable;
//! - `token_offsets.npy`: int64 `(count + 1,)`: the tokens of row i of `ids` are rows
//!   `offsets[i]..offsets[i + 1]` of `tokens.npy` (an item without any token has an empty range);
//! - `token_ids.npy`: int64 `(total_tokens,)`: the vocabulary id of each row of `tokens.npy`;
//! - `meta.json` → `tokens` ([`TokenMeta`]): the cap per item, dtype, total, dimension, what a token is for this
//!   encoder, the vocabulary the ids index ([`Vocabulary`]: what it is, its size, a hash of its entries), and
//!   hashes of `token_offsets.npy` and `token_ids.npy` checked on open.
//!
//! Stores written before token ids existed have no `token_ids.npy` and no `tokens.vocab`: they stay readable, with
//! [`TokenVectors::token_ids`] `None`; `stepwise embed --tokens` on such a store re-encodes its items to add them.
//!
//! Which encoders have token output, and what a token is for each, is in the registry
//! ([`crate::registry::EncoderEntry::tokens`]): the word vectors of the in-vocabulary words for `w2v` and
//! `glove-50d` (the same tokenisation as their pooled vector; ids: the word's row in the fitted w2v vocabulary,
//! the line of GloVe's `vocab.txt`), the last hidden state of each WordPiece token (no `[CLS]`/`[SEP]`; ids: the
//! WordPiece ids of `tokenizer.json`) for `minilm`. Only the first `max_tokens` tokens of an item are kept. Image
//! items have no tokens (image encoders have patch grids instead: [`crate::patches`]). Values beyond the float16
//! range make the item a failure.

use std::ops::Deref;
use std::path::Path;

use half::f16;
use serde::{Deserialize, Serialize};

use crate::encoder::Vocabulary;
use crate::rows::{ItemRows, RowSlice, bad, open_rows_file, write_rows_file};
use crate::store::FeatureStore;
use crate::{FeatureError, registry};

pub const TOKENS_FILE: &str = "tokens.npy";
pub const TOKEN_OFFSETS_FILE: &str = "token_offsets.npy";
pub const TOKEN_IDS_FILE: &str = "token_ids.npy";
/// Tokens kept per item unless `--max-tokens` says otherwise.
pub const DEFAULT_MAX_TOKENS: usize = 32;
/// The dtype of `tokens.npy` (and `patches.npy`), as recorded in `meta.json`.
pub const TOKEN_DTYPE: &str = "float16";
const REDO: &str = "re-run `stepwise embed --tokens --force`";

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
    /// The vocabulary `token_ids.npy` indexes (absent in stores written before token ids existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab: Option<Vocabulary>,
    /// BLAKE3 of `token_ids.npy`, checked on open (present with `vocab`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids_blake3: Option<String>,
}

/// What a token is for `encoder`, or a usage error naming the encoders with token output.
pub fn token_output(encoder: &str) -> Result<&'static str, FeatureError> {
    if let Some(t) = registry::find(encoder).and_then(|e| e.tokens) {
        return Ok(t);
    }
    let with: Vec<&str> = registry::list().iter().filter(|e| e.tokens.is_some()).map(|e| e.name).collect();
    Err(FeatureError::usage(format!(
        "encoder `{encoder}` has no per-token output; --tokens works with: {}",
        with.join(", ")
    )))
}

/// Per-token vectors of items (rows `offsets[i]..offsets[i+1]` of the token matrix belong to item i) and, when the
/// store has them, their vocabulary ids. Dereferences to [`ItemRows`] for the item-level accessors (`ids`,
/// `index_of`, `row_range`, `item_f16`, `get`, `dim`...).
#[derive(Debug)]
pub struct TokenVectors {
    rows: ItemRows,
    max_tokens: usize,
    vocab: Option<Vocabulary>,
}

impl Deref for TokenVectors {
    type Target = ItemRows;

    fn deref(&self) -> &ItemRows {
        &self.rows
    }
}

impl TokenVectors {
    /// The rows alone (for the embedding pipeline's reuse of a store's rows).
    pub(crate) fn into_rows(self) -> ItemRows {
        self.rows
    }

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
        let off_path = dir.join(TOKEN_OFFSETS_FILE);
        let off_bytes = read_checked(&off_path, &tm.offsets_blake3, dir)?;
        let raw = crate::npy::parse_i64_vector(&off_path, &off_bytes)?;
        let matrix = open_rows_file(&dir.join(TOKENS_FILE), &[tm.total, tm.dim], "tokens of shape", REDO)?;
        let rows = ItemRows::from_store(store, &off_path, &raw, tm.max_tokens, matrix, REDO)?;
        let (rows, vocab) = match (&tm.vocab, &tm.ids_blake3) {
            (Some(vocab), Some(hash)) => {
                let ids_path = dir.join(TOKEN_IDS_FILE);
                let ids = crate::npy::parse_i64_vector(&ids_path, &read_checked(&ids_path, hash, dir)?)?;
                (rows.with_row_ids(&ids_path, ids)?, Some(vocab.clone()))
            }
            _ => (rows, None),
        };
        Ok(Some(TokenVectors { rows, max_tokens: tm.max_tokens, vocab }))
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
        Ok(TokenVectors { rows: ItemRows::new(dim, max_tokens, ids, offsets, data)?, max_tokens, vocab: None })
    }

    /// Add the vocabulary id of every token row (in row order) and the vocabulary they index.
    pub fn with_token_ids(mut self, ids: Vec<i64>, vocab: Vocabulary) -> Result<TokenVectors, FeatureError> {
        self.rows = self.rows.with_row_ids(Path::new("(token ids)"), ids)?;
        self.vocab = Some(vocab);
        Ok(self)
    }

    /// The cap on tokens per item used when the store was written.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Token rows in all.
    pub fn total_tokens(&self) -> usize {
        self.rows.total_rows()
    }

    /// How many token vectors `id` has (`Some(0)` for a stored item without any, e.g. no in-vocabulary word);
    /// `None` for an id not in the store.
    pub fn token_count(&self, id: &str) -> Option<usize> {
        self.rows.row_count(id)
    }

    /// The vocabulary ids of item `i`'s tokens, in the order of [`ItemRows::item_f16`] (empty for an item without
    /// tokens); `None` when the store has no token ids (written before they existed: re-run `stepwise embed
    /// --tokens` to add them). Panics when `i >= len()`.
    pub fn token_ids(&self, i: usize) -> Option<&[i64]> {
        self.rows.item_row_ids(i)
    }

    /// The vocabulary ids of `id`'s tokens, like [`ItemRows::get`] for its vectors: `None` for an unknown id, an
    /// item without tokens, or a store without token ids.
    pub fn get_ids(&self, id: &str) -> Option<&[i64]> {
        self.token_ids(self.index_of(id)?).filter(|t| !t.is_empty())
    }

    /// The vocabulary the token ids index (`None` without token ids).
    pub fn vocabulary(&self) -> Option<&Vocabulary> {
        self.vocab.as_ref()
    }

    /// The vocabulary's size: every token id is in `0..vocab_size` (`None` without token ids).
    pub fn vocab_size(&self) -> Option<usize> {
        self.vocab.as_ref().map(|v| v.size)
    }
}

/// The bytes of a store file whose BLAKE3 `meta.json` records.
fn read_checked(path: &Path, blake3: &str, dir: &Path) -> Result<Vec<u8>, FeatureError> {
    let bytes = stepwise_core::paths::read_regular_file(path)?;
    if stepwise_core::hash::hash_bytes(&bytes) != blake3 {
        return Err(bad(format!(
            "{}: does not match {} (files from different runs?); {REDO}",
            path.display(),
            dir.join(crate::store::META_FILE).display()
        )));
    }
    Ok(bytes)
}

/// Write `tokens.npy`, `token_offsets.npy` and, with `ids` (one per token row, in row order), `token_ids.npy` into
/// `dir` from the token values of each item (in row order); returns the total token count and the BLAKE3 of the
/// offsets and ids files.
pub(crate) fn write_token_files(
    dir: &Path,
    dim: usize,
    items: &[RowSlice<'_>],
    ids: Option<&[i64]>,
) -> Result<(usize, String, Option<String>), FeatureError> {
    let mut offsets: Vec<i64> = Vec::with_capacity(items.len() + 1);
    let mut total = 0usize;
    offsets.push(0);
    for v in items {
        debug_assert_eq!(v.len() % dim, 0, "token rows of whole vectors");
        total += v.len() / dim;
        offsets.push(total as i64);
    }
    write_rows_file(&dir.join(TOKENS_FILE), &[total, dim], items)?;
    let hash_of = |path: &Path| -> Result<String, FeatureError> {
        Ok(stepwise_core::hash::hash_bytes(&stepwise_core::paths::read_regular_file(path)?))
    };
    let off_path = dir.join(TOKEN_OFFSETS_FILE);
    crate::npy::write_i64_vector(&off_path, &offsets)?;
    let ids_hash = match ids {
        None => None,
        Some(ids) => {
            assert_eq!(ids.len(), total, "one token id per token row");
            let ids_path = dir.join(TOKEN_IDS_FILE);
            crate::npy::write_i64_vector(&ids_path, ids)?;
            Some(hash_of(&ids_path)?)
        }
    };
    Ok((total, hash_of(&off_path)?, ids_hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &[f32]) -> Vec<f16> {
        v.iter().map(|&x| f16::from_f32(x)).collect()
    }

    #[test]
    fn in_memory_token_vectors_and_ids() {
        let ids: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let t = TokenVectors::new(2, 2, ids.clone(), vec![0, 2, 2, 3], h(&[1., 2., 3., 4., 5., 6.])).unwrap();
        assert_eq!((t.len(), t.total_tokens(), t.max_tokens(), t.dim), (3, 3, 2, 2));
        assert_eq!(t.get("a"), Some(vec![1., 2., 3., 4.]));
        assert_eq!((t.token_count("b"), t.get("b")), (Some(0), None));
        assert_eq!((t.token_ids(0), t.get_ids("a"), t.vocab_size()), (None, None, None), "no ids yet");
        let vocab = Vocabulary::new("test", &["x", "y", "z", "w"], &[]);
        let t = t.with_token_ids(vec![3, 0, 2], vocab.clone()).unwrap();
        assert_eq!(
            (t.token_ids(0), t.token_ids(1), t.token_ids(2)),
            (Some(&[3, 0][..]), Some(&[][..]), Some(&[2][..]))
        );
        assert_eq!((t.get_ids("a"), t.get_ids("b"), t.get_ids("zz")), (Some(&[3, 0][..]), None, None));
        assert_eq!((t.vocab_size(), t.vocabulary()), (Some(4), Some(&vocab)));
        assert!(TokenVectors::new(2, 1, ids, vec![0, 2, 2, 3], h(&[0.; 6])).is_err(), "over the cap");
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
