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
