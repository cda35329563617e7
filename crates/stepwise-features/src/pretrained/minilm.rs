//! all-MiniLM-L6-v2 sentence embeddings (Reimers & Gurevych's sentence-transformers): a 6-layer BERT run by
//! candle-transformers, mean pooling over the attention mask, L2 normalisation — exactly the sentence-transformers
//! pipeline (`Transformer` → `Pooling(mean)` → `Normalize`), truncating at 256 word pieces like its
//! `max_seq_length`.
//!
//! Texts are sorted by token count and batched so padding stays small; the batch a text lands in depends only on
//! the input, never on threads, so outputs are reproducible.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use super::catalog::{self, MINILM};
use super::enc_err;
use crate::FeatureError;
use crate::encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, TokenOutput, Vocabulary, l2_normalize_rows};

pub const NAME: &str = "minilm";
/// What a token vector is (`stepwise embed --tokens`).
pub const TOKENS: &str = "a WordPiece token of the text, in order ([CLS], [SEP] and padding excluded; the text \
                          truncated at 256 word pieces as for the pooled vector); vector = its last hidden state \
                          (before mean pooling and L2 normalisation)";
const CODE_VERSION: &str = "1";
/// sentence-transformers' `max_seq_length` for this model.
const MAX_TOKENS: usize = 256;
/// Texts per forward pass.
const BATCH: usize = 32;

/// Token ids of a text and, for each, whether it is a special token ([CLS], [SEP]).
pub type MarkedIds = (Vec<u32>, Vec<bool>);

pub struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    info: EncoderInfo,
}

impl MiniLm {
    /// Load from the installed models folder (`<models>/all-minilm-l6-v2`).
    pub fn from_models_dir(models_dir: &Path) -> Result<Self, FeatureError> {
        Self::from_dir(&catalog::model_dir(models_dir, &MINILM)?)
    }

    /// Load from a folder holding `config.json`, `model.safetensors` and `tokenizer.json` (a Hugging Face BERT
    /// sentence-transformers folder).
    pub fn from_dir(dir: &Path) -> Result<Self, FeatureError> {
        let bad = |file: &str, e: String| {
            FeatureError::Core(stepwise_core::Error::bad_input(format!("{}: {e}", dir.join(file).display())))
        };
        let config_path = dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path).map_err(|e| bad("config.json", e.to_string()))?;
        let config: Config = serde_json::from_str(&config_text).map_err(|e| bad("config.json", e.to_string()))?;
        let weights = dir.join("model.safetensors");
        // SAFETY: the weight file is memory-mapped read-only; model folders are not modified while in use.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu) }
            .map_err(|e| bad("model.safetensors", e.to_string()))?;
        let model = BertModel::load(vb, &config).map_err(|e| bad("model.safetensors", e.to_string()))?;
        let mut tokenizer =
            Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| bad("tokenizer.json", e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| bad("tokenizer.json", e.to_string()))?;
        tokenizer.with_padding(None);
        let version = super::weights_version(CODE_VERSION, &[&weights, &dir.join("tokenizer.json")])?;
        let info = EncoderInfo {
            name: NAME.into(),
            version,
            modality: Modality::Text,
            dim: config.hidden_size,
            normalization: Normalization::L2,
            preprocessing: format!(
                "BERT WordPiece (lowercased, tokenizer.json), [CLS] text [SEP], truncated to {MAX_TOKENS} tokens; \
                 mean of last hidden states over real tokens; L2-normalised"
            ),
        };
        Ok(MiniLm { model, tokenizer, info })
    }

    /// Token ids of each text (with [CLS]/[SEP], truncated).
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, FeatureError> {
        Ok(self.tokenize_marked(texts)?.into_iter().map(|(ids, _)| ids).collect())
    }

    /// Token ids of each text (with [CLS]/[SEP], truncated), and which of them are special tokens.
    pub fn tokenize_marked(&self, texts: &[&str]) -> Result<Vec<MarkedIds>, FeatureError> {
        texts
            .iter()
            .map(|t| {
                self.tokenizer
                    .encode(*t, true)
                    .map(|e| (e.get_ids().to_vec(), e.get_special_tokens_mask().iter().map(|&m| m != 0).collect()))
                    .map_err(|e| FeatureError::Encoder(format!("tokenizer: {e}")))
            })
            .collect()
    }

    /// Embeddings of already tokenised texts: `ids.len() * 384` floats, L2-normalised, in input order.
    pub fn embed_ids(&self, ids: &[Vec<u32>]) -> Result<Vec<f32>, FeatureError> {
        Ok(self.embed_inner(ids, None)?.vectors)
    }

    /// Embeddings of tokenised texts (as [`MiniLm::embed_ids`]) and the last hidden states of the first
    /// `max_tokens` non-special tokens of each (`special[i][p]`: position p of text i is [CLS]/[SEP]).
    pub fn embed_ids_with_tokens(
        &self,
        ids: &[Vec<u32>],
        special: &[Vec<bool>],
        max_tokens: usize,
    ) -> Result<TokenOutput, FeatureError> {
        self.embed_inner(ids, Some((special, max_tokens)))
    }

    fn embed_inner(
        &self,
        ids: &[Vec<u32>],
        tokens: Option<(&[Vec<bool>], usize)>,
    ) -> Result<TokenOutput, FeatureError> {
        let dim = self.info.dim;
        let mut out = vec![0f32; ids.len() * dim];
        let mut per_text: Vec<Vec<f32>> = vec![Vec::new(); if tokens.is_some() { ids.len() } else { 0 }];
        let mut per_text_ids: Vec<Vec<i64>> = vec![Vec::new(); per_text.len()];
        // Longest first, ties by position: batches of similar length, chosen by the input alone.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| ids[b].len().cmp(&ids[a].len()).then(a.cmp(&b)));
        for chunk in order.chunks(BATCH) {
            let seqs: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            let (hidden, mask) = self.hidden_batch(&seqs)?;
            let pooled = mean_pool(&hidden, &mask)?;
            for (row, &i) in pooled.chunks(dim).zip(chunk) {
                out[i * dim..(i + 1) * dim].copy_from_slice(row);
            }
            if let Some((special, max_tokens)) = tokens {
                let e = enc_err("MiniLM hidden states");
                let (_, len, _) = hidden.dims3().map_err(&e)?;
                let all = hidden.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(e)?;
                for (b, &i) in chunk.iter().enumerate() {
                    let marks = special.get(i).map(Vec::as_slice).unwrap_or(&[]);
                    let kept = (0..ids[i].len()).filter(|&p| !marks.get(p).copied().unwrap_or(false)).take(max_tokens);
                    for p in kept {
                        let at = (b * len + p) * dim;
                        per_text[i].extend_from_slice(&all[at..at + dim]);
                        per_text_ids[i].push(ids[i][p] as i64);
                    }
                }
            }
        }
        l2_normalize_rows(&mut out, dim);
        let counts = per_text.iter().map(|t| t.len() / dim.max(1)).collect();
        Ok(TokenOutput { vectors: out, counts, tokens: per_text.concat(), ids: per_text_ids.concat() })
    }

    /// Mean-pooled last hidden states of one padded batch (not normalised).
    #[cfg(test)]
    fn forward_batch<'a>(&self, seqs: impl Iterator<Item = &'a [u32]>) -> Result<Vec<f32>, FeatureError> {
        let seqs: Vec<&[u32]> = seqs.collect();
        let (hidden, mask) = self.hidden_batch(&seqs)?;
        mean_pool(&hidden, &mask)
    }

    /// Last hidden states `(n, len, dim)` of one padded batch, and the attention mask `(n, len)`.
    fn hidden_batch(&self, seqs: &[&[u32]]) -> Result<(Tensor, Tensor), FeatureError> {
        let n = seqs.len();
        let len = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
        let mut input = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (i, s) in seqs.iter().enumerate() {
            input[i * len..i * len + s.len()].copy_from_slice(s);
            mask[i * len..i * len + s.len()].fill(1);
        }
        let dev = Device::Cpu;
        let e = enc_err("MiniLM forward");
        let input = Tensor::from_vec(input, (n, len), &dev).map_err(&e)?;
        let mask_t = Tensor::from_vec(mask, (n, len), &dev).map_err(&e)?;
        let types = input.zeros_like().map_err(&e)?;
        let hidden = self.model.forward(&input, &types, Some(&mask_t)).map_err(&e)?; // (n, len, dim)
        Ok((hidden, mask_t))
    }
}

/// The mean over the attention mask of the hidden states of a batch, row-major `(n, dim)`.
fn mean_pool(hidden: &Tensor, mask: &Tensor) -> Result<Vec<f32>, FeatureError> {
    let e = enc_err("MiniLM forward");
    let m = mask.to_dtype(DType::F32).map_err(&e)?.unsqueeze(2).map_err(&e)?;
    let summed = hidden.broadcast_mul(&m).and_then(|t| t.sum(1)).map_err(&e)?;
    let counts = m.sum(1).and_then(|c| c.clamp(1e-9f32, f32::MAX)).map_err(&e)?;
    let mean = summed.broadcast_div(&counts).map_err(&e)?;
    mean.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(e)
}

impl Encoder for MiniLm {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError> {
        let texts = batch
            .iter()
            .map(|it| match it {
                Item::Text(t) => Ok(*t),
                Item::Image(_) => Err(FeatureError::Encoder(format!("{NAME} encodes texts, not images"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ids = self.tokenize(&texts)?;
        self.embed_ids(&ids)
    }

    fn encode_with_tokens(&self, batch: &[Item<'_>], max_tokens: usize) -> Result<TokenOutput, FeatureError> {
        let texts = batch
            .iter()
            .map(|it| match it {
                Item::Text(t) => Ok(*t),
                Item::Image(_) => Err(FeatureError::Encoder(format!("{NAME} encodes texts, not images"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (ids, special): (Vec<Vec<u32>>, Vec<Vec<bool>>) = self.tokenize_marked(&texts)?.into_iter().unzip();
        self.embed_ids_with_tokens(&ids, &special, max_tokens)
    }

    fn vocabulary(&self) -> Option<Vocabulary> {
        let vocab = self.tokenizer.get_vocab(true);
        let size = vocab.values().max().map_or(0, |&m| m as usize + 1);
        let mut entries = vec![String::new(); size];
        for (token, id) in vocab {
            entries[id as usize] = token;
        }
        let name = "all-MiniLM-L6-v2: the WordPiece id (tokenizer.json)";
        Some(Vocabulary::new(name, &entries, &["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    }

    fn batch_size(&self) -> usize {
        256
    }
}

pub fn build(ctx: &crate::registry::EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    ctx.check_options(NAME, &[])?;
    Ok(Box::new(MiniLm::from_models_dir(&ctx.models_dir)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretrained::testutil::{random_weights, word_level_tokenizer_json};

    /// A 2-layer BERT with random weights in the real layout, and a word-level tokenizer.
    fn tiny_bert_dir(dir: &Path) {
        let config = serde_json::json!({
            "vocab_size": 16, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "max_position_embeddings": 300, "type_vocab_size": 2, "initializer_range": 0.02,
            "layer_norm_eps": 1e-12, "pad_token_id": 0, "model_type": "bert"
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let cfg: Config = serde_json::from_value(config).unwrap();
        random_weights(&dir.join("model.safetensors"), |vb| BertModel::load(vb, &cfg).map(|_| ()));
        let words = ["whisk", "the", "eggs", "preheat", "oven", "serve", "warm"];
        std::fs::write(dir.join("tokenizer.json"), word_level_tokenizer_json(&words, "[CLS]", "[SEP]")).unwrap();
    }

    #[test]
    fn padding_and_batching_do_not_change_embeddings() {
        let td = tempfile::tempdir().unwrap();
        tiny_bert_dir(td.path());
        let m = MiniLm::from_dir(td.path()).unwrap();
        assert_eq!(m.info().dim, 32);
        let long = vec!["whisk the eggs"; 120].join(" ");
        let texts = ["serve warm", "whisk the eggs", long.as_str(), "", "preheat the oven and serve"];
        let items: Vec<Item> = texts.iter().map(|t| Item::Text(t)).collect();
        let all = m.encode(&items).unwrap();
        assert_eq!(all.len(), 5 * 32);
        for (i, t) in texts.iter().enumerate() {
            let alone = m.encode(&[Item::Text(t)]).unwrap();
            let diff = alone.iter().zip(&all[i * 32..(i + 1) * 32]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(diff < 1e-5, "text {i}: batching changed the embedding by {diff}");
            let norm = alone.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "text {i}: norm {norm}");
        }
        // Truncation at 256 tokens: the 362-token text equals its first 254 words + [CLS]/[SEP].
        assert_eq!(m.tokenize(&[long.as_str()]).unwrap()[0].len(), MAX_TOKENS);
        assert!(m.encode(&[Item::Image(&image::RgbImage::new(2, 2))]).is_err());
    }

    #[test]
    fn mean_pooling_ignores_padding_positions() {
        // Pool a batch by hand from the hidden states of each text alone; compare with the padded batch.
        let td = tempfile::tempdir().unwrap();
        tiny_bert_dir(td.path());
        let m = MiniLm::from_dir(td.path()).unwrap();
        let ids = m.tokenize(&["serve", "preheat the oven and serve warm"]).unwrap();
        let batch = m.forward_batch(ids.iter().map(Vec::as_slice)).unwrap();
        let first_alone = m.forward_batch(std::iter::once(ids[0].as_slice())).unwrap();
        let diff = first_alone.iter().zip(&batch[..32]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(diff < 1e-5, "padding leaked into the mean: {diff}");
    }

    #[test]
    fn token_vectors_are_hidden_states_of_wordpieces_without_special_tokens() {
        let td = tempfile::tempdir().unwrap();
        tiny_bert_dir(td.path());
        let m = MiniLm::from_dir(td.path()).unwrap();
        let texts = ["serve warm", "preheat the oven and serve warm", "", "whisk"];
        let items: Vec<Item> = texts.iter().map(|t| Item::Text(t)).collect();
        let out = m.encode_with_tokens(&items, 4).unwrap();
        // The pooled vectors are bit-identical to encode()'s.
        assert_eq!(out.vectors, m.encode(&items).unwrap());
        // Words without [CLS]/[SEP] ("and" is [UNK] but a real token), capped at 4; the empty text has none.
        assert_eq!(out.counts, [2, 4, 0, 1]);
        assert_eq!(out.tokens.len(), 7 * 32);
        // Token ids: the word-level test vocabulary ([PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, then the words from 4).
        assert_eq!(out.ids, [9, 10, 7, 5, 8, 1, 4]);
        let vocab = m.vocabulary().unwrap();
        assert_eq!(vocab.size, 11);
        let special: Vec<(&str, i64)> = vocab.special.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(special, [("[CLS]", 2), ("[PAD]", 0), ("[SEP]", 3), ("[UNK]", 1)]);
        // Each text's tokens are its hidden states at positions 1.. when run alone.
        let ids = m.tokenize(&texts).unwrap();
        let mut at = 0;
        for (i, count) in out.counts.iter().enumerate() {
            let (hidden, _) = m.hidden_batch(&[ids[i].as_slice()]).unwrap();
            let alone = hidden.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let want = &alone[32..(1 + count) * 32];
            let got = &out.tokens[at..at + count * 32];
            let diff = want.iter().zip(got).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(diff < 1e-5, "text {i}: tokens differ from its hidden states by {diff}");
            at += count * 32;
        }
    }
}
