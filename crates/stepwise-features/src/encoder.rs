//! The one trait every encoder implements. Adding an encoder is one file: implement [`Encoder`] and register
//! it in [`crate::registry`].

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
    fn encode_with_tokens(&self, batch: &[Item<'_>], max_tokens: usize) -> Result<TokenOutput, FeatureError> {
        let _ = (batch, max_tokens);
        Err(FeatureError::Encoder(format!("encoder `{}` has no per-token output", self.info().name)))
    }
}

/// What [`Encoder::encode_with_tokens`] returns for a batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenOutput {
    /// `batch.len() * dim` floats, row-major: what [`Encoder::encode`] returns.
    pub vectors: Vec<f32>,
    /// The number of token vectors of each input (`0..=max_tokens`).
    pub counts: Vec<usize>,
    /// `counts.iter().sum() * dim` floats, row-major: the tokens of input 0, then of input 1, ...
    pub tokens: Vec<f32>,
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
