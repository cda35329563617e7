//! stepwise-features: encoders, the on-disk feature store, and nearest-neighbour search.
//!
//! - [`encoder`]: the [`Encoder`] trait every text and image encoder implements
//! - [`vectors`]: ids + row-major vectors, the in-memory view of features
//! - [`knn`]: exact top-k search (lower distance = closer), with per-query filters

pub mod encoder;
pub mod knn;
pub mod vectors;

pub use encoder::{Encoder, EncoderInfo, Item, Modality, Normalization};
pub use knn::{KnnOptions, Metric, Neighbor, knn};
pub use vectors::Vectors;

/// Errors of this crate: feature-store problems and encoder failures, plus core errors.
#[derive(Debug, thiserror::Error)]
pub enum FeatureError {
    #[error(transparent)]
    Core(#[from] stepwise_core::Error),
    /// A model folder or weight file is missing; the message says how to install it.
    #[error("{0}")]
    MissingModel(String),
    /// Existing features were made by another encoder or have another dimension.
    #[error("{0}")]
    Mismatch(String),
    /// An encoder failed (candle, tokenizer...).
    #[error("{0}")]
    Encoder(String),
}

impl FeatureError {
    /// CLI exit code: 2 for missing models and mismatches (the user can fix them), else as the core error.
    pub fn exit_code(&self) -> i32 {
        match self {
            FeatureError::Core(e) => e.exit_code(),
            FeatureError::MissingModel(_) | FeatureError::Mismatch(_) => 2,
            FeatureError::Encoder(_) => 1,
        }
    }
}
