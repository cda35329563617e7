//! The encoder registry: every encoder `stepwise embed --encoder NAME` knows, with how to build it.
//!
//! Adding an encoder is one file implementing [`crate::Encoder`] plus one entry in [`ENCODERS`] (its `build`
//! function receives the [`EncoderContext`]). Three kinds exist:
//! - [`EncoderKind::Builtin`]: no weights, nothing to fit (the classical image descriptor);
//! - [`EncoderKind::Fitted`]: trained on the corpus being embedded (word2vec, TF-IDF). `build` loads the fitted
//!   state from [`EncoderContext::state_dir`] when it holds one, otherwise fits on [`EncoderContext::fit_texts`]
//!   and saves the state there, so a feature store can re-create the exact same encoder later;
//! - [`EncoderKind::Pretrained`]: weights from the local models folder ([`EncoderContext::models_dir`]); a missing
//!   folder is [`FeatureError::MissingModel`] saying how to install it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use crate::encoder::{Encoder, Modality};
use crate::patches::PatchSpec;
use crate::{FeatureError, builtin, pretrained};

/// How an encoder gets its parameters (see module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderKind {
    Builtin,
    Fitted,
    Pretrained,
}

/// Everything an encoder's `build` function may need.
#[derive(Debug, Clone)]
pub struct EncoderContext {
    /// The pretrained models folder (`--models`, default `models`).
    pub models_dir: PathBuf,
    /// Seed of encoders that train (word2vec); ignored by the others.
    pub seed: u64,
    /// Encoder options (`--encoder-opt key=value`), e.g. `dim=100` for word2vec. Each encoder accepts its own keys
    /// ([`EncoderContext::check_options`]); unknown keys are a usage error.
    pub options: BTreeMap<String, String>,
    /// Where a fitted encoder keeps its state (a feature store's `model/` folder). Loaded from when it holds a
    /// model, written to after fitting.
    pub state_dir: Option<PathBuf>,
    /// The texts a fitted encoder trains on when `state_dir` holds no model (the corpus's step texts).
    pub fit_texts: Option<Arc<Vec<String>>>,
}

impl Default for EncoderContext {
    fn default() -> Self {
        EncoderContext {
            models_dir: PathBuf::from(DEFAULT_MODELS_DIR),
            seed: 0,
            options: BTreeMap::new(),
            state_dir: None,
            fit_texts: None,
        }
    }
}

/// The default pretrained models folder (relative to the working directory), filled by `scripts/fetch-models.sh`.
pub const DEFAULT_MODELS_DIR: &str = "models";
/// The environment variable that overrides [`DEFAULT_MODELS_DIR`] wherever `--models` exists.
pub const MODELS_ENV: &str = "STEPWISE_MODELS";

impl EncoderContext {
    /// A usage error unless every option key is in `allowed`.
    pub fn check_options(&self, encoder: &str, allowed: &[&str]) -> Result<(), FeatureError> {
        for key in self.options.keys() {
            if !allowed.contains(&key.as_str()) {
                let accepted = if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") };
                return Err(FeatureError::usage(format!(
                    "encoder `{encoder}` has no option `{key}` (accepted: {accepted})"
                )));
            }
        }
        Ok(())
    }

    /// Option `key` parsed as `T`, or `default` when absent; a value that does not parse is a usage error.
    pub fn option<T: FromStr>(&self, encoder: &str, key: &str, default: T) -> Result<T, FeatureError> {
        match self.options.get(key) {
            None => Ok(default),
            Some(v) => v.parse::<T>().map_err(|_| {
                FeatureError::usage(format!(
                    "encoder `{encoder}`: option `{key}={v}` is not a valid {}",
                    std::any::type_name::<T>()
                ))
            }),
        }
    }
}

/// One registered encoder.
pub struct EncoderEntry {
    /// The name used on the command line and recorded in `meta.json`.
    pub name: &'static str,
    pub modality: Modality,
    pub kind: EncoderKind,
    /// One line for `stepwise models list` / `stepwise embed --help`.
    pub description: &'static str,
    /// What one token vector is, for encoders with per-token output (`stepwise embed --tokens`, see
    /// [`crate::tokens`]); `None` for the others.
    pub tokens: Option<&'static str>,
    /// What a patch is and the native grid, for image encoders with patch grids (`stepwise embed --patches`, see
    /// [`crate::patches`]); `None` for the others.
    pub patches: Option<PatchSpec>,
    pub build: fn(&EncoderContext) -> Result<Box<dyn Encoder>, FeatureError>,
}

impl std::fmt::Debug for EncoderEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncoderEntry").field("name", &self.name).field("kind", &self.kind).finish()
    }
}

/// Every encoder, in the order `list()` shows them. Built-in encoders first (they need no download).
pub static ENCODERS: &[EncoderEntry] = &[
    EncoderEntry {
        name: builtin::word2vec::NAME,
        modality: Modality::Text,
        kind: EncoderKind::Fitted,
        description: "word2vec skip-gram with negative sampling trained on the corpus's step texts (--seed); step \
                      vector = mean of word vectors, L2-normalised (options: dim (100), window (5), negative (5), \
                      epochs (auto), min_count (2), sample, lr)",
        tokens: Some(builtin::word2vec::TOKENS),
        patches: None,
        build: builtin::word2vec::build,
    },
    EncoderEntry {
        name: builtin::tfidf::NAME,
        modality: Modality::Text,
        kind: EncoderKind::Fitted,
        description: "TF-IDF over the corpus's vocabulary as scikit-learn's TfidfVectorizer (smooth idf), \
                      L2-normalised (options: max_features (2048), min_df, sublinear_tf)",
        tokens: None,
        patches: None,
        build: builtin::tfidf::build,
    },
    EncoderEntry {
        name: builtin::descriptor::NAME,
        modality: Modality::Image,
        kind: EncoderKind::Builtin,
        description: "classical image descriptor: CIELAB colour histogram + gradient-orientation histograms + tiny \
                      8x8 image, L2-normalised (no weights)",
        tokens: None,
        patches: Some(builtin::descriptor::PATCHES),
        build: builtin::descriptor::build,
    },
    // Pretrained encoders (weights from the models folder: `scripts/fetch-models.sh`).
    EncoderEntry {
        name: pretrained::minilm::NAME,
        modality: Modality::Text,
        kind: EncoderKind::Pretrained,
        description: "all-MiniLM-L6-v2 sentence embedding (BERT, mean pooling, L2-normalised, 384-d)",
        tokens: Some(pretrained::minilm::TOKENS),
        patches: None,
        build: pretrained::minilm::build,
    },
    EncoderEntry {
        name: pretrained::glove::NAME,
        modality: Modality::Text,
        kind: EncoderKind::Pretrained,
        description: "mean GloVe 6B 50-d word vector of the text's in-vocabulary words, L2-normalised (option: \
                      normalize)",
        tokens: Some(pretrained::glove::TOKENS),
        patches: None,
        build: pretrained::glove::build,
    },
    EncoderEntry {
        name: "effnet-lite0",
        modality: Modality::Image,
        kind: EncoderKind::Pretrained,
        description: "EfficientNet-Lite0 ImageNet CNN, globally pooled 1280-d feature (224x224 input)",
        tokens: None,
        patches: Some(pretrained::efficientnet_lite::LITE0_PATCHES),
        build: pretrained::efficientnet_lite::build_lite0,
    },
    EncoderEntry {
        name: "effnet-lite0-logits",
        modality: Modality::Image,
        kind: EncoderKind::Pretrained,
        description: "EfficientNet-Lite0 ImageNet logits (1000-d)",
        tokens: None,
        patches: None,
        build: pretrained::efficientnet_lite::build_lite0_logits,
    },
    EncoderEntry {
        name: "effnet-lite2",
        modality: Modality::Image,
        kind: EncoderKind::Pretrained,
        description: "EfficientNet-Lite2 ImageNet CNN, globally pooled 1280-d feature (260x260 input)",
        tokens: None,
        patches: Some(pretrained::efficientnet_lite::LITE2_PATCHES),
        build: pretrained::efficientnet_lite::build_lite2,
    },
    EncoderEntry {
        name: "effnet-lite2-logits",
        modality: Modality::Image,
        kind: EncoderKind::Pretrained,
        description: "EfficientNet-Lite2 ImageNet logits (1000-d)",
        tokens: None,
        patches: None,
        build: pretrained::efficientnet_lite::build_lite2_logits,
    },
    EncoderEntry {
        name: pretrained::clip::IMAGE_NAME,
        modality: Modality::Image,
        kind: EncoderKind::Pretrained,
        description: "CLIP ViT-B/32 image tower, projected and L2-normalised (weights: a Hugging Face folder you \
                      provide in models/clip-vit-b32)",
        tokens: None,
        patches: Some(pretrained::clip::PATCHES),
        build: pretrained::clip::build_image,
    },
    EncoderEntry {
        name: pretrained::clip::TEXT_NAME,
        modality: Modality::Text,
        kind: EncoderKind::Pretrained,
        description: "CLIP ViT-B/32 text tower, projected and L2-normalised (same space as clip-image)",
        tokens: None,
        patches: None,
        build: pretrained::clip::build_text,
    },
];

/// All registered encoders.
pub fn list() -> &'static [EncoderEntry] {
    ENCODERS
}

/// The entry called `name`.
pub fn find(name: &str) -> Option<&'static EncoderEntry> {
    ENCODERS.iter().find(|e| e.name == name)
}

/// Build the encoder called `name`; an unknown name is a usage error listing the known ones.
pub fn build_encoder(name: &str, ctx: &EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    let entry = find(name).ok_or_else(|| {
        let names: Vec<&str> = ENCODERS.iter().map(|e| e.name).collect();
        FeatureError::usage(format!("unknown encoder `{name}` (available: {})", names.join(", ")))
    })?;
    (entry.build)(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_findable() {
        let mut names: Vec<&str> = list().iter().map(|e| e.name).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "duplicate encoder names");
        for e in list() {
            assert_eq!(find(e.name).map(|f| f.name), Some(e.name));
        }
    }

    #[test]
    fn unknown_encoder_is_a_usage_error_listing_names() {
        let err = build_encoder("nope", &EncoderContext::default()).err().expect("must fail");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("descriptor"), "{err}");
    }

    #[test]
    fn unknown_option_is_rejected() {
        let mut ctx = EncoderContext::default();
        ctx.options.insert("bogus".into(), "1".into());
        let err = build_encoder(builtin::descriptor::NAME, &ctx).err().expect("must fail");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn option_parse_errors_name_key_and_value() {
        let mut ctx = EncoderContext::default();
        ctx.options.insert("dim".into(), "ten".into());
        let err = ctx.option::<usize>("w2v", "dim", 100).expect_err("must fail");
        assert!(err.to_string().contains("dim=ten"), "{err}");
        assert_eq!(ctx.option::<usize>("w2v", "window", 5).ok(), Some(5));
    }
}
