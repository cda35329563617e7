//! The one trait every encoder implements. Adding an encoder is one file: implement [`Encoder`] and register
//! it in [`crate::registry`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::FeatureError;

/// What an encoder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    Text,
    Image,
}

/// One input to encode. Images arrive decoded (RGB8); each encoder does its own resizing and normalisation.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    Text(&'a str),
    Image(&'a image::RgbImage),
}

/// Normalisation applied to output vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Normalization {
    None,
    L2,
}

/// What a feature store records about the encoder that wrote it (`meta.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncoderInfo {
    /// Registry name, e.g. `w2v`, `tfidf`, `descriptor`, `minilm`, `effnet-lite0`.
    pub name: String,
    /// Changes whenever the encoder's output would change (code or weights).
    pub version: String,
    pub modality: Modality,
    pub dim: usize,
    pub normalization: Normalization,
    /// Human-readable preprocessing (tokenisation, resize/crop, mean/std...).
    pub preprocessing: String,
}

pub trait Encoder: Send + Sync {
    fn info(&self) -> &EncoderInfo;

    /// Encode a batch: returns `batch.len() * dim` floats, row-major, in batch order. An input of the wrong
    /// modality is an error.
    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError>;

    /// The preferred batch size (larger batches amortise per-call cost for neural encoders).
    fn batch_size(&self) -> usize {
        64
    }

    /// Encode a batch and also return per-token vectors (of the encoder's `dim`), at most `max_tokens` per input:
    /// the pooled vectors are exactly those of [`Encoder::encode`]. What a token is depends on the encoder (see
    /// [`crate::registry::EncoderEntry::tokens`]); encoders without token output (the default) return an error.
    /// Encoders with token output also return the vocabulary id of every token ([`TokenOutput::ids`]), indexing
    /// the vocabulary [`Encoder::vocabulary`] describes.
    fn encode_with_tokens(&self, batch: &[Item<'_>], max_tokens: usize) -> Result<TokenOutput, FeatureError> {
        let _ = (batch, max_tokens);
        Err(FeatureError::Encoder(format!("encoder `{}` has no per-token output", self.info().name)))
    }

    /// The vocabulary the token ids of [`Encoder::encode_with_tokens`] index (`None` for encoders without token
    /// output).
    fn vocabulary(&self) -> Option<Vocabulary> {
        None
    }

    /// Encode a batch of images and also return a `grid × grid` grid of patch vectors of each (see
    /// [`crate::patches`]), as the "tokens" of a [`TokenOutput`]: `grid²` rows of [`Encoder::patch_dim`] floats per
    /// input, row-major over the grid (grid row, then column), no ids. The pooled vectors are exactly those of
    /// [`Encoder::encode`]. Encoders without patch output (the default) return an error.
    fn encode_with_patches(&self, batch: &[Item<'_>], grid: usize) -> Result<TokenOutput, FeatureError> {
        let _ = (batch, grid);
        Err(FeatureError::Encoder(format!("encoder `{}` has no patch output", self.info().name)))
    }

    /// The width of one patch vector ([`Encoder::encode_with_patches`]): the encoder's `dim` unless it says
    /// otherwise (CLIP's patch tokens are wider than its projected embedding).
    fn patch_dim(&self) -> usize {
        self.info().dim
    }
}

/// What [`Encoder::encode_with_tokens`] (and, with patches as tokens, [`Encoder::encode_with_patches`]) returns
/// for a batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenOutput {
    /// `batch.len() * dim` floats, row-major: what [`Encoder::encode`] returns.
    pub vectors: Vec<f32>,
    /// The number of token vectors of each input (`0..=max_tokens`; `grid²` patches).
    pub counts: Vec<usize>,
    /// `counts.iter().sum() * dim` floats, row-major: the tokens of input 0, then of input 1, ...
    pub tokens: Vec<f32>,
    /// Token output: the vocabulary id of each token (`counts.iter().sum()` values, in the order of `tokens`).
    /// Empty for patches.
    pub ids: Vec<i64>,
}

/// The vocabulary that token ids index (`meta.json` → `tokens.vocab` of a feature store with token output).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vocabulary {
    /// What the ids are, e.g. "glove-6b-50d vocab.txt line (0-based)".
    pub name: String,
    /// Every id is in `0..size` (the rows of an output layer predicting them).
    pub size: usize,
    /// BLAKE3 of the vocabulary's entries in id order, each followed by `\n` (an empty entry for an id without
    /// entry): equal for two stores exactly when their ids mean the same tokens.
    pub blake3: String,
    /// Special tokens present in the vocabulary (e.g. MiniLM's `[MASK]`, `[UNK]`, `[PAD]`), by token.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub special: BTreeMap<String, i64>,
}

impl Vocabulary {
    /// The vocabulary of `entries` (entry i has id i); `special` names the special tokens among them.
    pub fn new<S: AsRef<str>>(name: impl Into<String>, entries: &[S], special: &[&str]) -> Vocabulary {
        let mut h = blake3::Hasher::new();
        let mut found = BTreeMap::new();
        for (i, e) in entries.iter().enumerate() {
            h.update(e.as_ref().as_bytes());
            h.update(b"\n");
            if special.contains(&e.as_ref()) {
                found.entry(e.as_ref().to_string()).or_insert(i as i64);
            }
        }
        Vocabulary { name: name.into(), size: entries.len(), blake3: h.finalize().to_hex().to_string(), special: found }
    }
}

/// L2-normalise each row of a row-major matrix in place (zero rows stay zero).
pub fn l2_normalize_rows(data: &mut [f32], dim: usize) {
    if dim == 0 {
        return;
    }
    for row in data.chunks_mut(dim) {
        let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            row.iter_mut().for_each(|x| *x /= n);
        }
    }
}
