//! CLIP (Radford et al. 2021) image and text towers through candle-transformers, from a local Hugging Face
//! folder (`models/clip-vit-b32/`: `config.json`, `model.safetensors`, `tokenizer.json`, optionally
//! `preprocessor_config.json`) — e.g. a copy of `openai/clip-vit-base-patch32`. Outputs are the projected
//! embeddings (512-d for ViT-B/32), L2-normalised, so image and text vectors share one space.
//!
//! No CLIP weights are installable here (no PyPI package ships them), so this encoder is tested only for
//! loading and shapes, with random weights in a small configuration; real weights are up to the user.
//!
//! Text: tokens are truncated to the model's 77 positions; the embedding is the final hidden state at the
//! end-of-text token (the last token of each sequence), as in OpenAI's and Hugging Face's implementations.
//! Image: the shorter side is resized to 224 (bicubic) and centre-cropped, values scaled to 0..1 and normalised
//! with CLIP's mean/std (or those of `preprocessor_config.json`).
//!
//! Patch grids (`stepwise embed --patches`, image tower): the last encoder layer's patch tokens (Hugging Face's
//! `last_hidden_state[:, 1:]`: no class token, before the post-layernorm and the projection; 768-d for ViT-B/32),
//! a 7×7 grid for ViT-B/32 at 224, average-pooled to the grid ([`crate::patches::pool_grid`]).

use std::path::Path;

use candle_core::{DType, Device, IndexOp, Module, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::clip::text_model::{Activation, ClipTextConfig, ClipTextTransformer};
use candle_transformers::models::clip::vision_model::{ClipVisionConfig, ClipVisionTransformer};
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationParams};

use super::catalog::{self, CLIP_VIT_B32};
use super::enc_err;
use super::preprocess::ImagePrep;
use crate::FeatureError;
use crate::encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, TokenOutput, l2_normalize_rows};
use crate::patches::PatchSpec;

pub const IMAGE_NAME: &str = "clip-image";
/// Patch grids of `clip-image` (registry entry): ViT-B/32's 7×7 patch tokens.
pub const PATCHES: PatchSpec = PatchSpec {
    patch: "the last encoder layer's patch tokens (last_hidden_state without the class token, before the \
            post-layernorm and projection: the vision width, 768 for ViT-B/32), average-pooled to the grid \
            (adaptive_avg_pool2d bins over the patch grid)",
    max_grid: 7,
};
pub const TEXT_NAME: &str = "clip-text";
const CODE_VERSION: &str = "1";
const TEXT_BATCH: usize = 32;
const IMAGE_BATCH: usize = 16;

/// CLIP's default image normalisation (on 0..1 values).
const CLIP_MEAN: [f32; 3] = [0.481_454_66, 0.457_827_5, 0.408_210_7];
const CLIP_STD: [f32; 3] = [0.268_629_54, 0.261_302_6, 0.275_777_1];

/// The parts of a Hugging Face `CLIPConfig` we read; absent fields take ViT-B/32's values.
#[derive(Debug, Deserialize)]
struct HfConfig {
    #[serde(default)]
    text_config: HfText,
    #[serde(default)]
    vision_config: HfVision,
    projection_dim: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
struct HfText {
    vocab_size: Option<usize>,
    hidden_size: Option<usize>,
    intermediate_size: Option<usize>,
    max_position_embeddings: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    hidden_act: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct HfVision {
    hidden_size: Option<usize>,
    intermediate_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    image_size: Option<usize>,
    patch_size: Option<usize>,
    num_channels: Option<usize>,
    hidden_act: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct HfPreprocessor {
    image_mean: Option<[f32; 3]>,
    image_std: Option<[f32; 3]>,
}

/// The configuration read from a CLIP folder.
#[derive(Debug, Clone)]
pub struct ClipSetup {
    pub text: ClipTextConfig,
    pub vision: ClipVisionConfig,
    pub projection_dim: usize,
    pub prep: ImagePrep,
}

impl ClipSetup {
    /// Read `config.json` (and `preprocessor_config.json` when present) of a Hugging Face CLIP folder.
    pub fn read(dir: &Path) -> Result<Self, FeatureError> {
        let path = dir.join("config.json");
        let bad = |m: String| FeatureError::Core(stepwise_core::Error::bad_input(format!("{}: {m}", path.display())));
        let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
        let hf: HfConfig = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        for act in [&hf.text_config.hidden_act, &hf.vision_config.hidden_act].into_iter().flatten() {
            if act != "quick_gelu" {
                return Err(bad(format!("hidden_act {act:?} is not supported (only quick_gelu, as in OpenAI CLIP)")));
            }
        }
        let (t, v) = (ClipTextConfig::vit_base_patch32(), ClipVisionConfig::vit_base_patch32());
        let projection_dim = hf.projection_dim.unwrap_or(t.projection_dim);
        let text = ClipTextConfig {
            vocab_size: hf.text_config.vocab_size.unwrap_or(t.vocab_size),
            embed_dim: hf.text_config.hidden_size.unwrap_or(t.embed_dim),
            activation: Activation::QuickGelu,
            intermediate_size: hf.text_config.intermediate_size.unwrap_or(t.intermediate_size),
            max_position_embeddings: hf.text_config.max_position_embeddings.unwrap_or(t.max_position_embeddings),
            pad_with: None,
            num_hidden_layers: hf.text_config.num_hidden_layers.unwrap_or(t.num_hidden_layers),
            num_attention_heads: hf.text_config.num_attention_heads.unwrap_or(t.num_attention_heads),
            projection_dim,
        };
        let vision = ClipVisionConfig {
            embed_dim: hf.vision_config.hidden_size.unwrap_or(v.embed_dim),
            activation: Activation::QuickGelu,
            intermediate_size: hf.vision_config.intermediate_size.unwrap_or(v.intermediate_size),
            num_hidden_layers: hf.vision_config.num_hidden_layers.unwrap_or(v.num_hidden_layers),
            num_attention_heads: hf.vision_config.num_attention_heads.unwrap_or(v.num_attention_heads),
            projection_dim,
            num_channels: hf.vision_config.num_channels.unwrap_or(v.num_channels),
            image_size: hf.vision_config.image_size.unwrap_or(v.image_size),
            patch_size: hf.vision_config.patch_size.unwrap_or(v.patch_size),
        };
        if vision.num_channels != 3 || vision.patch_size == 0 || !vision.image_size.is_multiple_of(vision.patch_size) {
            return Err(bad("vision_config: need 3 channels and an image_size divisible by patch_size".into()));
        }
        for (what, dim, heads) in [
            ("text", text.embed_dim, text.num_attention_heads),
            ("vision", vision.embed_dim, vision.num_attention_heads),
        ] {
            if heads == 0 || !dim.is_multiple_of(heads) {
                return Err(bad(format!("{what}_config: hidden_size {dim} is not divisible by {heads} heads")));
            }
        }
        let pre_path = dir.join("preprocessor_config.json");
        let pre: HfPreprocessor = match std::fs::read_to_string(&pre_path) {
            Ok(s) => serde_json::from_str(&s).map_err(|e| {
                FeatureError::Core(stepwise_core::Error::bad_input(format!("{}: {e}", pre_path.display())))
            })?,
            Err(_) => HfPreprocessor::default(),
        };
        let (mean, std) = (pre.image_mean.unwrap_or(CLIP_MEAN), pre.image_std.unwrap_or(CLIP_STD));
        let prep = ImagePrep {
            size: vision.image_size as u32,
            crop_fraction: 1.0,
            mean: mean.map(|m| m * 255.0),
            std: std.map(|s| s * 255.0),
        };
        Ok(ClipSetup { text, vision, projection_dim, prep })
    }
}

fn load_vb(dir: &Path) -> Result<VarBuilder<'static>, FeatureError> {
    let weights = dir.join("model.safetensors");
    // SAFETY: read-only memory map of a model file that is not modified while in use.
    unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu) }
        .map_err(|e| FeatureError::Core(stepwise_core::Error::bad_input(format!("{}: {e}", weights.display()))))
}

fn bad_weights(dir: &Path, e: candle_core::Error) -> FeatureError {
    FeatureError::Core(stepwise_core::Error::bad_input(format!(
        "{}: not CLIP weights matching config.json: {e}",
        dir.join("model.safetensors").display()
    )))
}

/// The CLIP image tower + visual projection.
pub struct ClipImage {
    tower: ClipVisionTransformer,
    projection: candle_nn::Linear,
    prep: ImagePrep,
    info: EncoderInfo,
    /// Side of the patch-token grid (image size / patch size).
    patch_grid: usize,
    /// Width of the patch tokens (the vision tower's hidden size).
    width: usize,
}

impl ClipImage {
    pub fn from_models_dir(models_dir: &Path) -> Result<Self, FeatureError> {
        Self::from_dir(&catalog::model_dir(models_dir, &CLIP_VIT_B32)?)
    }

    pub fn from_dir(dir: &Path) -> Result<Self, FeatureError> {
        let setup = ClipSetup::read(dir)?;
        let vb = load_vb(dir)?;
        // candle-transformers draws a random class embedding when the weights lack it: outputs would change from
        // one load to the next.
        if !vb.contains_tensor("vision_model.embeddings.class_embedding") {
            let e = candle_core::Error::Msg("no tensor vision_model.embeddings.class_embedding".into());
            return Err(bad_weights(dir, e));
        }
        let tower =
            ClipVisionTransformer::new(vb.pp("vision_model"), &setup.vision).map_err(|e| bad_weights(dir, e))?;
        let projection =
            candle_nn::linear_no_bias(setup.vision.embed_dim, setup.projection_dim, vb.pp("visual_projection"))
                .map_err(|e| bad_weights(dir, e))?;
        let version =
            super::weights_version(CODE_VERSION, &[&dir.join("model.safetensors"), &dir.join("config.json")])?;
        let info = EncoderInfo {
            name: IMAGE_NAME.into(),
            version,
            modality: Modality::Image,
            dim: setup.projection_dim,
            normalization: Normalization::L2,
            preprocessing: format!("{}; projected CLS embedding, L2-normalised", setup.prep.describe()),
        };
        let patch_grid = setup.vision.image_size / setup.vision.patch_size;
        Ok(ClipImage { tower, projection, prep: setup.prep, info, patch_grid, width: setup.vision.embed_dim })
    }

    /// The preprocessed pixels of a batch of images, `(n, 3, s, s)`.
    fn pixels(&self, chunk: &[Item<'_>]) -> Result<Tensor, FeatureError> {
        let s = self.prep.size as usize;
        let mut pixels = Vec::with_capacity(chunk.len() * 3 * s * s);
        for it in chunk {
            match it {
                Item::Image(img) => pixels.extend(self.prep.to_chw(img)?),
                Item::Text(_) => {
                    return Err(FeatureError::Encoder(format!("{IMAGE_NAME} encodes images, not texts")));
                }
            }
        }
        Tensor::from_vec(pixels, (chunk.len(), 3, s, s), &Device::Cpu).map_err(enc_err("CLIP image forward"))
    }
}

impl Encoder for ClipImage {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError> {
        let mut out = Vec::with_capacity(batch.len() * self.info.dim);
        for chunk in batch.chunks(IMAGE_BATCH) {
            let x = self.pixels(chunk)?;
            let e = enc_err("CLIP image forward");
            let y = self.tower.forward(&x).and_then(|h| self.projection.forward(&h)).map_err(&e)?;
            out.extend(y.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(e)?);
        }
        l2_normalize_rows(&mut out, self.info.dim);
        Ok(out)
    }

    fn encode_with_patches(&self, batch: &[Item<'_>], grid: usize) -> Result<TokenOutput, FeatureError> {
        let (n, width) = (self.patch_grid, self.width);
        if grid == 0 || grid > n {
            return Err(FeatureError::Encoder(format!("{IMAGE_NAME}: a grid of 1 to {n} (the patch-token grid)")));
        }
        let mut out = TokenOutput::default();
        for chunk in batch.chunks(IMAGE_BATCH) {
            let x = self.pixels(chunk)?;
            let e = enc_err("CLIP image forward");
            // Every layer's output, then the post-layernormed class token (what `forward` returns).
            let states = self.tower.output_hidden_states(&x).map_err(&e)?;
            let [.., last, pooled] = states.as_slice() else {
                return Err(FeatureError::Encoder(format!("{IMAGE_NAME}: the vision tower has no layer")));
            };
            let y = self.projection.forward(pooled).map_err(&e)?;
            out.vectors.extend(y.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(&e)?);
            let tokens = last.narrow(1, 1, n * n).and_then(|t| t.flatten_all()).and_then(|t| t.to_vec1::<f32>());
            for image in tokens.map_err(e)?.chunks(n * n * width) {
                out.tokens.extend(crate::patches::pool_grid(image, n, n, width, grid));
                out.counts.push(grid * grid);
            }
        }
        l2_normalize_rows(&mut out.vectors, self.info.dim);
        Ok(out)
    }

    fn patch_dim(&self) -> usize {
        self.width
    }

    fn batch_size(&self) -> usize {
        IMAGE_BATCH
    }
}

/// The CLIP text tower + text projection.
pub struct ClipText {
    tower: ClipTextTransformer,
    projection: candle_nn::Linear,
    tokenizer: Tokenizer,
    info: EncoderInfo,
}

impl ClipText {
    pub fn from_models_dir(models_dir: &Path) -> Result<Self, FeatureError> {
        Self::from_dir(&catalog::model_dir(models_dir, &CLIP_VIT_B32)?)
    }

    pub fn from_dir(dir: &Path) -> Result<Self, FeatureError> {
        let setup = ClipSetup::read(dir)?;
        let vb = load_vb(dir)?;
        let tower = ClipTextTransformer::new(vb.pp("text_model"), &setup.text).map_err(|e| bad_weights(dir, e))?;
        let projection =
            candle_nn::linear_no_bias(setup.text.embed_dim, setup.projection_dim, vb.pp("text_projection"))
                .map_err(|e| bad_weights(dir, e))?;
        let tok_path = dir.join("tokenizer.json");
        let bad_tok =
            |e: String| FeatureError::Core(stepwise_core::Error::bad_input(format!("{}: {e}", tok_path.display())));
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| bad_tok(e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: setup.text.max_position_embeddings,
                ..Default::default()
            }))
            .map_err(|e| bad_tok(e.to_string()))?;
        tokenizer.with_padding(None);
        let version = super::weights_version(
            CODE_VERSION,
            &[&dir.join("model.safetensors"), &dir.join("config.json"), &tok_path],
        )?;
        let info = EncoderInfo {
            name: TEXT_NAME.into(),
            version,
            modality: Modality::Text,
            dim: setup.projection_dim,
            normalization: Normalization::L2,
            preprocessing: format!(
                "CLIP BPE (tokenizer.json) with start/end tokens, truncated to {} tokens; projected final state of \
                 the end-of-text token, L2-normalised",
                setup.text.max_position_embeddings
            ),
        };
        Ok(ClipText { tower, projection, tokenizer, info })
    }

    fn embed_ids(&self, ids: &[Vec<u32>]) -> Result<Vec<f32>, FeatureError> {
        let dim = self.info.dim;
        let mut out = vec![0f32; ids.len() * dim];
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| ids[b].len().cmp(&ids[a].len()).then(a.cmp(&b)));
        let e = enc_err("CLIP text forward");
        for chunk in order.chunks(TEXT_BATCH) {
            let len = chunk.iter().map(|&i| ids[i].len()).max().unwrap_or(1).max(1);
            // Padding goes after the end-of-text token; the causal mask keeps it from affecting earlier positions.
            let mut input = vec![0u32; chunk.len() * len];
            for (row, &i) in chunk.iter().enumerate() {
                input[row * len..row * len + ids[i].len()].copy_from_slice(&ids[i]);
            }
            let x = Tensor::from_vec(input, (chunk.len(), len), &Device::Cpu).map_err(&e)?;
            let hidden = self.tower.forward_with_mask(&x, usize::MAX).map_err(&e)?;
            let rows = chunk
                .iter()
                .enumerate()
                .map(|(row, &i)| hidden.i((row, ids[i].len().max(1) - 1)))
                .collect::<candle_core::Result<Vec<_>>>()
                .map_err(&e)?;
            let eot = Tensor::stack(&rows, 0).map_err(&e)?;
            let y = self.projection.forward(&eot).and_then(|t| t.to_vec2::<f32>()).map_err(&e)?;
            for (v, &i) in y.iter().zip(chunk) {
                out[i * dim..(i + 1) * dim].copy_from_slice(v);
            }
        }
        l2_normalize_rows(&mut out, dim);
        Ok(out)
    }
}

impl Encoder for ClipText {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError> {
        let ids = batch
            .iter()
            .map(|it| match it {
                Item::Text(t) => self
                    .tokenizer
                    .encode(*t, true)
                    .map(|e| e.get_ids().to_vec())
                    .map_err(|e| FeatureError::Encoder(format!("CLIP tokenizer: {e}"))),
                Item::Image(_) => Err(FeatureError::Encoder(format!("{TEXT_NAME} encodes texts, not images"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.embed_ids(&ids)
    }

    fn batch_size(&self) -> usize {
        128
    }
}

pub fn build_image(ctx: &crate::registry::EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    ctx.check_options(IMAGE_NAME, &[])?;
    Ok(Box::new(ClipImage::from_models_dir(&ctx.models_dir)?))
}

pub fn build_text(ctx: &crate::registry::EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    ctx.check_options(TEXT_NAME, &[])?;
    Ok(Box::new(ClipText::from_models_dir(&ctx.models_dir)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretrained::testutil::{random_weights, word_level_tokenizer_json};

    /// A small CLIP folder with random weights (the real layout and names, small sizes).
    fn tiny_clip_dir(dir: &Path) {
        let config = serde_json::json!({
            "projection_dim": 16,
            "text_config": {"vocab_size": 12, "hidden_size": 32, "intermediate_size": 64,
                            "max_position_embeddings": 10, "num_hidden_layers": 2, "num_attention_heads": 4,
                            "hidden_act": "quick_gelu"},
            "vision_config": {"hidden_size": 24, "intermediate_size": 48, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "image_size": 32, "patch_size": 8}
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let setup = ClipSetup::read(dir).unwrap();
        random_weights(&dir.join("model.safetensors"), |vb| {
            ClipTextTransformer::new(vb.pp("text_model"), &setup.text)?;
            // candle draws a random class embedding when the weights lack one: create it, as real weights have it.
            vb.pp("vision_model.embeddings").get_with_hints(24, "class_embedding", candle_nn::Init::Const(0.1))?;
            ClipVisionTransformer::new(vb.pp("vision_model"), &setup.vision)?;
            candle_nn::linear_no_bias(32, 16, vb.pp("text_projection"))?;
            candle_nn::linear_no_bias(24, 16, vb.pp("visual_projection"))?;
            Ok(())
        });
        let words = ["a", "photo", "of", "pancakes", "whisk", "the", "eggs"];
        std::fs::write(
            dir.join("tokenizer.json"),
            word_level_tokenizer_json(&words, "<|startoftext|>", "<|endoftext|>"),
        )
        .unwrap();
    }

    #[test]
    fn random_weight_folder_loads_and_encodes_both_towers() {
        let td = tempfile::tempdir().unwrap();
        tiny_clip_dir(td.path());
        let models = td.path().join("models");
        std::fs::create_dir_all(models.join("clip-vit-b32")).unwrap();
        for f in ["config.json", "model.safetensors", "tokenizer.json"] {
            std::fs::copy(td.path().join(f), models.join("clip-vit-b32").join(f)).unwrap();
        }
        let ctx = crate::registry::EncoderContext { models_dir: models.clone(), ..Default::default() };
        let text = build_text(&ctx).unwrap();
        let image = build_image(&ctx).unwrap();
        assert_eq!((text.info().dim, image.info().dim), (16, 16));

        let texts = ["a photo of pancakes", "whisk the eggs", "eggs", "a b c d e f g h i j k l m n o p q"];
        let items: Vec<Item> = texts.iter().map(|t| Item::Text(t)).collect();
        let v = text.encode(&items).unwrap();
        assert_eq!(v.len(), 4 * 16);
        for row in v.chunks(16) {
            let n: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((n - 1.0).abs() < 1e-4, "norm {n}");
        }
        // Padding must not change a text's embedding: alone vs in a batch with longer texts.
        let alone = text.encode(&[Item::Text("eggs")]).unwrap();
        let diff = alone.iter().zip(&v[32..48]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(diff < 1e-5, "batching changed the embedding by {diff}");
        assert_ne!(&v[..16], &v[16..32]);

        let img = image::RgbImage::from_fn(50, 40, |x, y| image::Rgb([(x * 5) as u8, (y * 6) as u8, 128]));
        let img2 = image::RgbImage::from_pixel(20, 64, image::Rgb([30, 200, 10]));
        let w = image.encode(&[Item::Image(&img), Item::Image(&img2)]).unwrap();
        assert_eq!(w.len(), 32);
        assert!(w.iter().all(|x| x.is_finite()));
        assert_ne!(&w[..16], &w[16..]);
        assert!(image.encode(&[Item::Text("x")]).is_err());
        assert!(text.encode(&[Item::Image(&img)]).is_err());

        // Patch grids: the pooled vectors are encode()'s; a grid of 4 (32 / 8) is the 16 patch tokens of the last
        // layer as they are; smaller grids average them.
        let items = [Item::Image(&img), Item::Image(&img2)];
        let p4 = image.encode_with_patches(&items, 4).unwrap();
        assert_eq!((p4.vectors == w, p4.counts.clone(), image.patch_dim()), (true, vec![16, 16], 24));
        assert_eq!(p4.tokens.len(), 2 * 16 * 24);
        let tower = ClipImage::from_dir(&models.join("clip-vit-b32")).unwrap();
        assert_eq!(tower.encode(&items).unwrap(), w, "loading twice gives the same encoder");
        let x = tower.pixels(&items).unwrap();
        let states = tower.tower.output_hidden_states(&x).unwrap();
        let last = states[states.len() - 2].to_vec3::<f32>().unwrap();
        assert_eq!(&p4.tokens[..24], &last[0][1][..], "patch (0, 0) of image 0 is token 1");
        assert_eq!(&p4.tokens[16 * 24 + 15 * 24..], &last[1][16][..], "patch (3, 3) of image 1 is token 16");
        let p1 = image.encode_with_patches(&items, 1).unwrap();
        let mean: f32 = (1..17).map(|t| last[1][t][5]).sum::<f32>() / 16.0;
        assert!((p1.tokens[24 + 5] - mean).abs() < 1e-5, "{} vs {mean}", p1.tokens[24 + 5]);
        assert!(image.encode_with_patches(&items, 5).is_err(), "beyond the 4x4 token grid");
    }

    #[test]
    fn wrong_shapes_and_missing_folder_are_clear_errors() {
        let td = tempfile::tempdir().unwrap();
        tiny_clip_dir(td.path());
        // Claim a larger text width than the weights have.
        let config = serde_json::json!({"projection_dim": 16, "text_config": {"vocab_size": 12, "hidden_size": 64,
            "intermediate_size": 64, "max_position_embeddings": 10, "num_hidden_layers": 2, "num_attention_heads": 4},
            "vision_config": {"hidden_size": 24, "intermediate_size": 48, "num_hidden_layers": 2,
            "num_attention_heads": 4, "image_size": 32, "patch_size": 8}});
        std::fs::write(td.path().join("config.json"), config.to_string()).unwrap();
        let e = ClipText::from_dir(td.path()).err().expect("must fail");
        assert!(e.to_string().contains("not CLIP weights matching config.json"), "{e}");
        assert_eq!(e.exit_code(), 2);

        let ctx = crate::registry::EncoderContext { models_dir: td.path().join("nothing"), ..Default::default() };
        let e = build_image(&ctx).err().expect("must fail");
        assert!(matches!(e, FeatureError::MissingModel(_)), "{e}");
        assert!(e.to_string().contains("clip-vit-b32"), "{e}");
    }
}
