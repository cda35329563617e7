//! all-MiniLM-L6-v2 sentence embeddings (Reimers & Gurevych's sentence-transformers): a 6-layer BERT run on
//! stepwise's own kernels ([`super::bert`]), mean pooling over the tokens, L2 normalisation — exactly the
//! sentence-transformers pipeline (`Transformer` → `Pooling(mean)` → `Normalize`), truncating at 256 word pieces
//! like its `max_seq_length`.
//!
//! Texts are sorted by token count and run 32 at a time, packed without padding; the batch a text lands in depends
//! only on the input, and its values on nothing else, so outputs are byte-identical for any thread count.

use std::path::Path;

use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationParams};

use super::bert::{Bert, BertConfig};
use super::catalog::{self, MINILM};
use crate::FeatureError;
use crate::encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, TokenOutput, Vocabulary, l2_normalize_rows};

pub const NAME: &str = "minilm";
/// What a token vector is (`stepwise embed --tokens`).
pub const TOKENS: &str = "a WordPiece token of the text, in order ([CLS], [SEP] and padding excluded; the text \
                          truncated at 256 word pieces as for the pooled vector); vector = its last hidden state \
                          (before mean pooling and L2 normalisation)";
/// 2: own BERT kernels instead of candle-transformers (vectors within 1e-5 of version 1's, not bit-identical).
const CODE_VERSION: &str = "2";
/// sentence-transformers' `max_seq_length` for this model.
const MAX_TOKENS: usize = 256;
/// Texts per forward pass.
const BATCH: usize = 32;

/// Token ids of a text and, for each, whether it is a special token ([CLS], [SEP]).
pub type MarkedIds = (Vec<u32>, Vec<bool>);

pub struct MiniLm {
    model: Bert,
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
        let config: BertConfig = serde_json::from_str(&config_text).map_err(|e| bad("config.json", e.to_string()))?;
        let weights = dir.join("model.safetensors");
        let model = Bert::load(&weights, config)?;
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
            dim: model.config().hidden_size,
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
        let chunks: Vec<&[usize]> = order.chunks(BATCH).collect();
        // Enough batches for every thread: one batch per thread, each product on one core (faster than splitting
        // products); else the products split. The values are the same either way.
        let side_by_side = chunks.len() >= rayon::current_num_threads() && chunks.len() > 1;
        let run = |chunk: &&[usize]| {
            let seqs: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            self.model.hidden_states(&seqs, !side_by_side)
        };
        let hidden: Vec<Vec<f32>> = if side_by_side {
            chunks.par_iter().map(run).collect::<Result<_, _>>()?
        } else {
            chunks.iter().map(run).collect::<Result<_, _>>()?
        };
        for (chunk, hidden) in chunks.iter().zip(&hidden) {
            let mut at = 0;
            for &i in chunk.iter() {
                let len = ids[i].len();
                let states = &hidden[at * dim..(at + len) * dim];
                at += len;
                mean_pool(states, dim, &mut out[i * dim..(i + 1) * dim]);
                if let Some((special, max_tokens)) = tokens {
                    let marks = special.get(i).map(Vec::as_slice).unwrap_or(&[]);
                    let kept = (0..len).filter(|&p| !marks.get(p).copied().unwrap_or(false)).take(max_tokens);
                    for p in kept {
                        per_text[i].extend_from_slice(&states[p * dim..(p + 1) * dim]);
                        per_text_ids[i].push(ids[i][p] as i64);
                    }
                }
            }
        }
        l2_normalize_rows(&mut out, dim);
        let counts = per_text.iter().map(|t| t.len() / dim.max(1)).collect();
        Ok(TokenOutput { vectors: out, counts, tokens: per_text.concat(), ids: per_text_ids.concat() })
    }

    /// Floating-point operations of one text of `tokens` word pieces (see [`Bert::flops_per_text`]).
    pub fn flops_per_text(&self, tokens: usize) -> f64 {
        self.model.flops_per_text(tokens)
    }

    /// The BERT encoder itself (its layers' weights initialise a fine-tuned copy of the upper layers).
    pub fn bert(&self) -> &Bert {
        &self.model
    }

    /// For each text given as WordPiece ids without special tokens (as a token store keeps them): `[CLS] ids
    /// [SEP]` run through the first `layers` layers, `(len + 2) × dim` row-major. The frozen lower part of an
    /// encoder whose upper layers are fine-tuned; byte-identical for any thread count (each batch of texts runs
    /// its products on one thread, and a text's values do not depend on its batch).
    pub fn frozen_states(&self, texts: &[&[u32]], layers: usize) -> Result<Vec<Vec<f32>>, FeatureError> {
        let special = |t: &str| {
            self.tokenizer
                .token_to_id(t)
                .ok_or_else(|| FeatureError::Encoder(format!("{NAME}: the tokenizer has no {t} token")))
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
        let wrapped: Vec<Vec<u32>> = texts
            .iter()
            .map(|ids| std::iter::once(cls).chain(ids.iter().copied()).chain(std::iter::once(sep)).collect())
            .collect();
        let dim = self.info.dim;
        let batches: Vec<Vec<Vec<f32>>> = wrapped
            .par_chunks(BATCH)
            .map(|chunk| {
                let seqs: Vec<&[u32]> = chunk.iter().map(Vec::as_slice).collect();
                let states = self.model.hidden_states_through(&seqs, false, layers)?;
                let mut at = 0;
                Ok(seqs
                    .iter()
                    .map(|s| {
                        let rows = states[at * dim..(at + s.len()) * dim].to_vec();
                        at += s.len();
                        rows
                    })
                    .collect())
            })
            .collect::<Result<_, FeatureError>>()?;
        Ok(batches.concat())
    }

    /// Last hidden states of one text, `len × dim` (tests compare against candle-transformers' BERT).
    pub fn hidden_states(&self, ids: &[u32]) -> Result<Vec<f32>, FeatureError> {
        self.model.hidden_states(&[ids], false)
    }
}

/// `out` = the mean of the rows of `states` (zeros for none), not normalised.
fn mean_pool(states: &[f32], dim: usize, out: &mut [f32]) {
    let rows = states.len() / dim.max(1);
    out.fill(0.0);
    for row in states.chunks(dim) {
        out.iter_mut().zip(row).for_each(|(o, v)| *o += v);
    }
    let count = rows.max(1) as f32;
    out.iter_mut().for_each(|o| *o /= count);
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
    use candle_transformers::models::bert::{BertModel, Config};

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

    /// The hidden states of candle-transformers' BERT (what stepwise ran before its own kernels) for one text.
    fn candle_hidden(dir: &Path, ids: &[u32]) -> Vec<f32> {
        use candle_core::{DType, Device, Tensor};
        let cfg: Config = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
        let weights = dir.join("model.safetensors");
        // SAFETY: a test's own temporary file, not modified while mapped.
        let vb =
            unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu) }.unwrap();
        let model = BertModel::load(vb, &cfg).unwrap();
        let input = Tensor::new(ids, &Device::Cpu).unwrap().unsqueeze(0).unwrap();
        let types = input.zeros_like().unwrap();
        model.forward(&input, &types, None).unwrap().flatten_all().unwrap().to_vec1().unwrap()
    }

    #[test]
    fn hidden_states_match_candle_transformers_bert() {
        let td = tempfile::tempdir().unwrap();
        tiny_bert_dir(td.path());
        let m = MiniLm::from_dir(td.path()).unwrap();
        let long = vec!["preheat the oven"; 40].join(" ");
        let texts = ["serve", "preheat the oven and serve warm", "", long.as_str()];
        for (text, ids) in texts.iter().zip(m.tokenize(&texts).unwrap()) {
            let ours = m.hidden_states(&ids).unwrap();
            let want = candle_hidden(td.path(), &ids);
            assert_eq!(ours.len(), want.len());
            let diff = ours.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(diff < 1e-5, "{text:?}: {diff} from candle-transformers' BERT");
        }
    }

    /// Through every layer, a text's frozen states are the encoder's hidden states of `[CLS] text [SEP]`, for any
    /// batch and thread count; fewer layers give other values; more layers than the model has are an error.
    #[test]
    fn frozen_states_are_the_hidden_states_of_a_prefix_of_the_layers() {
        let td = tempfile::tempdir().unwrap();
        tiny_bert_dir(td.path());
        let m = MiniLm::from_dir(td.path()).unwrap();
        let texts: Vec<Vec<u32>> =
            (0..40).map(|i| (0..1 + i % 7).map(|j| 4 + ((i + j) % 7) as u32).collect()).collect();
        let refs: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
        let run = |threads: usize, layers: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| m.frozen_states(&refs, layers).unwrap())
        };
        let all = run(2, 2);
        assert_eq!(all, run(1, 2));
        for (ids, got) in texts.iter().zip(&all) {
            let wrapped: Vec<u32> = [2].into_iter().chain(ids.iter().copied()).chain([3]).collect();
            assert_eq!(got, &m.hidden_states(&wrapped).unwrap());
        }
        let one = run(2, 1);
        assert_eq!(one[0].len(), all[0].len());
        assert_ne!(one[0], all[0]);
        assert!(m.frozen_states(&refs, 3).unwrap_err().to_string().contains("3 layers asked for, the model has 2"));
    }

    #[test]
    fn embeddings_are_byte_identical_for_any_thread_count() {
        let td = tempfile::tempdir().unwrap();
        tiny_bert_dir(td.path());
        let m = MiniLm::from_dir(td.path()).unwrap();
        let words = ["whisk", "the", "eggs", "preheat", "oven", "serve", "warm"];
        let texts: Vec<String> = (0..150)
            .map(|i| (0..1 + i % 23).map(|j| words[(i * 7 + j * 3) % 7]).collect::<Vec<_>>().join(" "))
            .collect();
        let items: Vec<Item> = texts.iter().map(|t| Item::Text(t)).collect();
        let run = |threads| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| m.encode_with_tokens(&items, 8).unwrap())
        };
        let (one, two, three) = (run(1), run(2), run(3));
        assert_eq!(one.vectors, two.vectors);
        assert_eq!(one.vectors, three.vectors);
        assert_eq!(one.tokens, two.tokens);
        assert_eq!(one.tokens, three.tokens);
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
            let alone = m.hidden_states(&ids[i]).unwrap();
            let want = &alone[32..(1 + count) * 32];
            let got = &out.tokens[at..at + count * 32];
            let diff = want.iter().zip(got).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(diff < 1e-5, "text {i}: tokens differ from its hidden states by {diff}");
            at += count * 32;
        }
    }
}
