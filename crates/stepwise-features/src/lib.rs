//! stepwise-features: encoders, the on-disk feature store, and nearest-neighbour search.
//!
//! - [`encoder`]: the [`Encoder`] trait every text and image encoder implements
//! - [`registry`]: every encoder by name, and how to build it ([`registry::build_encoder`])
//! - [`builtin`]: encoders without downloaded weights (word2vec, TF-IDF, classical image descriptor)
//! - [`pretrained`]: encoders from the local models folder (MiniLM, EfficientNet-Lite, GloVe, CLIP)
//! - [`items`]: item ids (`text:`, `title:`, `image:`, `str:`) and the items of a corpus
//! - [`image_source`]: where images come from (files, or any source rendering them on demand)
//! - [`embed`]: incremental, resumable embedding of items into a feature store
//! - [`work`]: the resumable state of an unfinished embedding run
//! - [`merge`]: joining the shard stores of `stepwise embed --shard I/N` into one store
//! - [`store`]: the on-disk feature store, read through a memory map
//! - [`stores`]: the stores a command reads, loaded on demand and found by item kind; the extra distractor pool
//! - [`tokens`]: per-token vectors of items and their vocabulary ids (`--tokens`), stored beside the pooled vectors
//! - [`patches`]: grids of patch vectors of image items (`--patches`), stored float16 beside the pooled vectors
//! - [`rows`]: per-item float16 row sets, the storage shared by token vectors and patch grids
//! - [`npy`]: NumPy `.npy` reading (whole or memory-mapped) and writing
//! - [`vectors`]: ids + row-major vectors, the in-memory view of features
//! - [`knn`]: exact top-k search (lower distance = closer), with per-query filters
//! - [`ann`]: approximate search (HNSW, via usearch), with recall measured against exact search
//! - [`bench`]: the `stepwise bench features` measurements

pub mod ann;
pub mod bench;
pub mod builtin;
pub mod embed;
pub mod encoder;
pub mod image_source;
pub mod items;
pub mod knn;
pub mod merge;
pub mod npy;
pub mod patches;
pub mod pretrained;
pub mod registry;
pub mod rows;
pub mod store;
pub mod stores;
pub mod tokens;
pub mod vectors;
pub mod work;

pub use encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, TokenOutput, Vocabulary};
/// The `image` crate the encoders and image sources use (so callers name the same `RgbImage`).
pub use image;
pub use knn::{KnnOptions, Metric, Neighbor, knn};
pub use patches::PatchGrids;
pub use registry::{EncoderContext, build_encoder};
pub use rows::ItemRows;
pub use store::FeatureStore;
pub use tokens::TokenVectors;
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
    /// A run produced no vector at all: nothing to embed, or every input failed (the message says which).
    #[error("{0}")]
    NoItems(String),
}

impl FeatureError {
    /// A usage error (exit code 2): an option or input the user can fix.
    pub fn usage(message: impl Into<String>) -> Self {
        FeatureError::Core(stepwise_core::Error::usage(message))
    }

    /// CLI exit code: 2 for missing models, mismatches and empty results (the user can fix them), else as the core
    /// error.
    pub fn exit_code(&self) -> i32 {
        match self {
            FeatureError::Core(e) => e.exit_code(),
            FeatureError::MissingModel(_) | FeatureError::Mismatch(_) | FeatureError::NoItems(_) => 2,
            FeatureError::Encoder(_) => 1,
        }
    }
}
