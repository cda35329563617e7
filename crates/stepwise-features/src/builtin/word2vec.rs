//! word2vec skip-gram with negative sampling (SGNS), trained on the corpus's own step texts — the text features
//! of the Meta-RecipeQA setup. A step's vector is the mean of its words' vectors, L2-normalised (the zero vector
//! when no word is in the vocabulary).
//!
//! Training follows Mikolov et al.'s reference `word2vec.c` (skip-gram, reduced random window, frequent-word
//! subsampling, unigram^0.75 negatives, linear learning-rate decay, clipped sigmoid), made deterministic: all
//! randomness comes from `rng_for(seed, "w2v/...")`, so the vectors are byte-identical for any thread count.
//!
//! Epochs: by default as many passes as give about [`AUTO_EPOCH_TOKENS`] training tokens (5 to 100): a small
//! corpus trained for a handful of epochs leaves all word vectors pointing one way. Scaling: up to
//! [`PARALLEL_THRESHOLD`] tokens per epoch, training is sequential SGD (a corpus the size of the demo world's
//! trains in seconds). Larger corpora are cut into blocks of [`BLOCK_TOKENS`] tokens; rounds of
//! [`SHARDS`] blocks train in parallel from the same snapshot and their updates are summed (deterministic
//! parameter mixing: the shard count is fixed by the data, never by the thread count).

use std::collections::HashMap;
use std::path::Path;

use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use stepwise_core::rng::{ChaCha8Rng, rng_for};

use crate::FeatureError;
use crate::builtin::fitted::load_or_fit;
use crate::builtin::tokenize::{self, tokenize};
use crate::encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, TokenOutput, Vocabulary};
use crate::registry::EncoderContext;

pub const NAME: &str = "w2v";
/// What a token vector is (`stepwise embed --tokens`).
pub const TOKENS: &str = "an in-vocabulary word of the text, in text order, with the pooled vector's tokenisation \
                          (lowercase; runs of letters/digits/_, each CJK character a token); vector = the word's \
                          word2vec vector (not normalised; the pooled vector is the L2-normalised mean of all of them)";
const VERSION: &str = "w2v-sgns-1";
const CONFIG_FILE: &str = "w2v.json";
const VECTORS_FILE: &str = "w2v-vectors.npy";
/// Tokens per epoch above which training runs in parallel shards.
pub const PARALLEL_THRESHOLD: usize = 1_000_000;
/// Tokens per parallel block.
pub const BLOCK_TOKENS: usize = 250_000;
/// Blocks trained from one snapshot.
pub const SHARDS: usize = 4;
const MAX_EXP: f32 = 6.0;

/// Training tokens the automatic epoch count aims for: small corpora need many passes (a 10k-token corpus
/// trained for 10 epochs leaves every word vector pointing the same way), large ones few.
pub const AUTO_EPOCH_TOKENS: usize = 2_000_000;

/// Epochs for `tokens` training tokens per pass: enough passes for [`AUTO_EPOCH_TOKENS`], between 5 and 100.
pub fn auto_epochs(tokens: usize) -> usize {
    AUTO_EPOCH_TOKENS.div_ceil(tokens.max(1)).clamp(5, 100)
}

/// Training parameters (`--encoder-opt`), recorded with the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct W2vConfig {
    pub dim: usize,
    /// Maximum context distance (a random reduced window in 1..=window is used per word, as in word2vec.c).
    pub window: usize,
    pub negative: usize,
    /// Passes over the texts; 0 = automatic (see [`auto_epochs`]).
    pub epochs: usize,
    /// Words seen fewer times get no vector.
    pub min_count: usize,
    /// Subsampling threshold of frequent words (0 disables).
    pub sample: f64,
    /// Initial learning rate, decayed linearly to 0.0001 × lr.
    pub lr: f64,
    pub seed: u64,
}

impl Default for W2vConfig {
    fn default() -> Self {
        W2vConfig { dim: 100, window: 5, negative: 5, epochs: 0, min_count: 2, sample: 1e-3, lr: 0.025, seed: 0 }
    }
}

/// The trained model: vocabulary (by decreasing count, ties by word) and one vector per word.
#[derive(Debug, Clone, PartialEq)]
pub struct W2vModel {
    pub config: W2vConfig,
    pub words: Vec<String>,
    pub counts: Vec<u64>,
    /// `words.len() * dim`, row-major.
    pub vectors: Vec<f32>,
    /// Texts the model was trained on.
    pub n_texts: usize,
}

#[derive(Serialize, Deserialize)]
struct SavedConfig {
    config: W2vConfig,
    words: Vec<String>,
    counts: Vec<u64>,
    n_texts: usize,
}

impl W2vModel {
    /// Train on `texts` (each text is one sentence).
    pub fn train(texts: &[String], mut config: W2vConfig) -> Result<Self, FeatureError> {
        if config.dim == 0 || config.window == 0 {
            return Err(FeatureError::usage("w2v: dim and window must be at least 1"));
        }
        let tokenized: Vec<Vec<String>> = texts.par_iter().map(|t| tokenize(t)).collect();
        let mut freq: HashMap<&str, u64> = HashMap::new();
        for toks in &tokenized {
            for t in toks {
                *freq.entry(t.as_str()).or_default() += 1;
            }
        }
        let mut vocab: Vec<(&str, u64)> =
            freq.into_iter().filter(|(_, c)| *c >= config.min_count.max(1) as u64).collect();
        if vocab.is_empty() {
            return Err(FeatureError::Core(stepwise_core::Error::bad_input(format!(
                "w2v: no word occurs at least min_count={} times in the {} texts to train on",
                config.min_count,
                texts.len()
            ))));
        }
        vocab.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let index: HashMap<&str, u32> = vocab.iter().enumerate().map(|(i, (w, _))| (*w, i as u32)).collect();
        let sentences: Vec<Vec<u32>> = tokenized
            .iter()
            .map(|toks| toks.iter().filter_map(|t| index.get(t.as_str()).copied()).collect::<Vec<u32>>())
            .filter(|s| !s.is_empty())
            .collect();
        let counts: Vec<u64> = vocab.iter().map(|(_, c)| *c).collect();
        if config.epochs == 0 {
            config.epochs = auto_epochs(sentences.iter().map(Vec::len).sum());
        }
        let vectors = Trainer::new(&counts, &config).train(&sentences);
        Ok(W2vModel {
            words: vocab.iter().map(|(w, _)| w.to_string()).collect(),
            counts,
            vectors,
            n_texts: texts.len(),
            config,
        })
    }

    pub fn word_vector(&self, word: &str) -> Option<&[f32]> {
        let i = self.words.iter().position(|w| w == word)?;
        Some(&self.vectors[i * self.config.dim..(i + 1) * self.config.dim])
    }
}

/// SGNS training state.
struct Trainer<'a> {
    cfg: &'a W2vConfig,
    counts: &'a [u64],
    total: u64,
    /// Cumulative unigram^0.75 distribution, for negative sampling by binary search.
    neg_cdf: Vec<f64>,
}

/// Input (`syn0`) and output (`syn1neg`) vectors.
#[derive(Clone)]
struct Params {
    syn0: Vec<f32>,
    syn1: Vec<f32>,
}

impl<'a> Trainer<'a> {
    fn new(counts: &'a [u64], cfg: &'a W2vConfig) -> Self {
        let mut acc = 0f64;
        let mut neg_cdf: Vec<f64> = counts
            .iter()
            .map(|&c| {
                acc += (c as f64).powf(0.75);
                acc
            })
            .collect();
        for v in &mut neg_cdf {
            *v /= acc;
        }
        Trainer { cfg, counts, total: counts.iter().sum(), neg_cdf }
    }

    fn train(&self, sentences: &[Vec<u32>]) -> Vec<f32> {
        let dim = self.cfg.dim;
        let v = self.counts.len();
        let mut init = rng_for(self.cfg.seed, "w2v/init");
        let syn0: Vec<f32> = (0..v * dim).map(|_| (init.random::<f32>() - 0.5) / dim as f32).collect();
        let mut params = Params { syn0, syn1: vec![0f32; v * dim] };
        let tokens: usize = sentences.iter().map(Vec::len).sum();
        let total_work = (self.cfg.epochs * tokens).max(1) as f64;
        // Blocks of whole sentences, ~BLOCK_TOKENS each (only used when the corpus is large).
        let blocks: Vec<&[Vec<u32>]> =
            if tokens <= PARALLEL_THRESHOLD { vec![sentences] } else { split_blocks(sentences, BLOCK_TOKENS) };
        let mut done = 0usize;
        for epoch in 0..self.cfg.epochs {
            if blocks.len() == 1 {
                let mut rng = rng_for(self.cfg.seed, &format!("w2v/epoch/{epoch}"));
                self.train_block(&mut params, sentences, &mut rng, done as f64, 1.0, total_work);
                done += tokens;
                continue;
            }
            for (round, group) in blocks.chunks(SHARDS).enumerate() {
                let key = format!("w2v/epoch/{epoch}/round/{round}");
                params = self.train_round(&params, group, &key, done as f64, total_work);
                done += group.iter().map(|b| b.iter().map(Vec::len).sum::<usize>()).sum::<usize>();
            }
        }
        params.syn0
    }

    /// Train each block of `group` from `base` in parallel (own keyed RNG per block) and sum their updates.
    fn train_round(&self, base: &Params, group: &[&[Vec<u32>]], key: &str, done: f64, total_work: f64) -> Params {
        let trained: Vec<Params> = group
            .par_iter()
            .enumerate()
            .map(|(s, block)| {
                let mut p = base.clone();
                let mut rng = rng_for(self.cfg.seed, &format!("{key}/shard/{s}"));
                // The blocks run concurrently: each one's progress counts for all of them.
                self.train_block(&mut p, block, &mut rng, done, group.len() as f64, total_work);
                p
            })
            .collect();
        merge(base, &trained)
    }

    /// One pass over `sentences`. The learning rate decays with global progress `(done + speed * local) / total`.
    fn train_block(
        &self,
        p: &mut Params,
        sentences: &[Vec<u32>],
        rng: &mut ChaCha8Rng,
        done: f64,
        speed: f64,
        total_work: f64,
    ) {
        let cfg = self.cfg;
        let dim = cfg.dim;
        let mut neu1e = vec![0f32; dim];
        let mut sen: Vec<u32> = Vec::new();
        let mut local = 0usize;
        let threshold = cfg.sample * self.total as f64;
        for sentence in sentences {
            let progress = (done + speed * local as f64) / total_work;
            let alpha = (cfg.lr * (1.0 - progress)).max(cfg.lr * 1e-4) as f32;
            local += sentence.len();
            sen.clear();
            for &w in sentence {
                if cfg.sample > 0.0 {
                    let f = self.counts[w as usize] as f64;
                    let keep = ((f / threshold).sqrt() + 1.0) * threshold / f;
                    if keep < rng.random::<f64>() {
                        continue;
                    }
                }
                sen.push(w);
            }
            for pos in 0..sen.len() {
                let word = sen[pos] as usize;
                let b = rng.random_range(0..cfg.window);
                let reach = cfg.window - b;
                let lo = pos.saturating_sub(reach);
                let hi = (pos + reach).min(sen.len() - 1);
                for (c, &context) in sen.iter().enumerate().take(hi + 1).skip(lo) {
                    if c == pos {
                        continue;
                    }
                    let l1 = context as usize * dim;
                    neu1e.iter_mut().for_each(|x| *x = 0.0);
                    for d in 0..=cfg.negative {
                        let (target, label) = if d == 0 {
                            (word, 1.0f32)
                        } else {
                            let t = self.sample_negative(rng);
                            if t == word {
                                continue;
                            }
                            (t, 0.0)
                        };
                        let l2 = target * dim;
                        let (syn0, syn1) = (&mut p.syn0, &mut p.syn1);
                        let f = dot(&syn0[l1..l1 + dim], &syn1[l2..l2 + dim]);
                        let g = if f > MAX_EXP {
                            (label - 1.0) * alpha
                        } else if f < -MAX_EXP {
                            label * alpha
                        } else {
                            (label - 1.0 / (1.0 + (-f).exp())) * alpha
                        };
                        axpy(g, &syn1[l2..l2 + dim], &mut neu1e);
                        let (a, b) = (&syn0[l1..l1 + dim], &mut syn1[l2..l2 + dim]);
                        axpy(g, a, b);
                    }
                    axpy(1.0, &neu1e, &mut p.syn0[l1..l1 + dim]);
                }
            }
        }
    }

    fn sample_negative(&self, rng: &mut ChaCha8Rng) -> usize {
        let u = rng.random::<f64>();
        self.neg_cdf.partition_point(|&c| c <= u).min(self.neg_cdf.len() - 1)
    }
}

/// Base plus the sum of every shard's update, in shard order.
fn merge(base: &Params, trained: &[Params]) -> Params {
    let mut out = base.clone();
    for t in trained {
        for ((o, &n), &b) in out.syn0.iter_mut().zip(&t.syn0).zip(&base.syn0) {
            *o += n - b;
        }
        for ((o, &n), &b) in out.syn1.iter_mut().zip(&t.syn1).zip(&base.syn1) {
            *o += n - b;
        }
    }
    out
}

fn split_blocks(sentences: &[Vec<u32>], block_tokens: usize) -> Vec<&[Vec<u32>]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut acc = 0;
    for (i, s) in sentences.iter().enumerate() {
        acc += s.len();
        if acc >= block_tokens {
            out.push(&sentences[start..=i]);
            start = i + 1;
            acc = 0;
        }
    }
    if start < sentences.len() {
        out.push(&sentences[start..]);
    }
    out
}

/// Dot product with 8 independent partial sums, so the compiler can keep them in one SIMD register (a single
/// running sum is a serial dependency chain it may not reorder). Fixed order: deterministic.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn axpy(g: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += g * x;
    }
}

/// The encoder: mean of word vectors, L2-normalised.
pub struct Word2Vec {
    info: EncoderInfo,
    model: W2vModel,
    index: HashMap<String, usize>,
}

impl Word2Vec {
    pub fn new(model: W2vModel) -> Self {
        let index = model.words.iter().enumerate().map(|(i, w)| (w.clone(), i)).collect();
        let c = &model.config;
        let info = EncoderInfo {
            name: NAME.to_string(),
            version: VERSION.to_string(),
            modality: Modality::Text,
            dim: c.dim,
            normalization: Normalization::L2,
            preprocessing: format!(
                "{}; skip-gram negative sampling trained on {} texts: dim={} window={} negative={} epochs={} \
                 min_count={} sample={} lr={} seed={}; vocabulary {} words; text = mean of its in-vocabulary \
                 word vectors, L2 (zero vector when none)",
                tokenize::DESCRIPTION,
                model.n_texts,
                c.dim,
                c.window,
                c.negative,
                c.epochs,
                c.min_count,
                c.sample,
                c.lr,
                c.seed,
                model.words.len()
            ),
        };
        Word2Vec { info, model, index }
    }

    pub fn model(&self) -> &W2vModel {
        &self.model
    }

    /// Vocabulary rows of the in-vocabulary words of `text`, in order: what a text's vector is the mean of.
    pub fn known_words(&self, text: &str) -> Vec<usize> {
        tokenize(text).iter().filter_map(|t| self.index.get(t).copied()).collect()
    }

    /// The vector of vocabulary row `i`.
    fn word(&self, i: usize) -> &[f32] {
        let dim = self.info.dim;
        &self.model.vectors[i * dim..(i + 1) * dim]
    }

    /// The text vector from its words' rows into `row` (zeroed): their sum, L2-normalised.
    fn pool(&self, words: &[usize], row: &mut [f32]) {
        for &i in words {
            axpy(1.0, self.word(i), row);
        }
        if !words.is_empty() {
            // The mean's direction is the sum's: normalising the sum is enough.
            let norm = dot(row, row).sqrt();
            if norm > 0.0 {
                row.iter_mut().for_each(|x| *x /= norm);
            }
        }
    }

    fn text<'a>(item: &Item<'a>) -> Result<&'a str, FeatureError> {
        match item {
            Item::Text(t) => Ok(t),
            Item::Image(_) => Err(FeatureError::Encoder("w2v encodes text, not images".into())),
        }
    }
}

impl Encoder for Word2Vec {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError> {
        let dim = self.info.dim;
        let mut out = vec![0f32; batch.len() * dim];
        for (item, row) in batch.iter().zip(out.chunks_mut(dim)) {
            self.pool(&self.known_words(Self::text(item)?), row);
        }
        Ok(out)
    }

    fn encode_with_tokens(&self, batch: &[Item<'_>], max_tokens: usize) -> Result<TokenOutput, FeatureError> {
        let dim = self.info.dim;
        let mut out = TokenOutput { vectors: vec![0f32; batch.len() * dim], ..Default::default() };
        for (item, row) in batch.iter().zip(out.vectors.chunks_mut(dim)) {
            let words = self.known_words(Self::text(item)?);
            self.pool(&words, row);
            let kept = &words[..words.len().min(max_tokens)];
            out.counts.push(kept.len());
            for &i in kept {
                out.tokens.extend_from_slice(self.word(i));
                out.ids.push(i as i64);
            }
        }
        Ok(out)
    }

    fn vocabulary(&self) -> Option<Vocabulary> {
        let name = "w2v: the word's row in the vocabulary fitted on the corpus (the store's model/; most frequent first, \
                    ties by word)";
        Some(Vocabulary::new(name, &self.model.words, &[]))
    }

    fn batch_size(&self) -> usize {
        256
    }
}

pub fn build(ctx: &EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    ctx.check_options(NAME, &["dim", "window", "negative", "epochs", "min_count", "sample", "lr"])?;
    let d = W2vConfig::default();
    let config = W2vConfig {
        dim: ctx.option(NAME, "dim", d.dim)?,
        window: ctx.option(NAME, "window", d.window)?,
        negative: ctx.option(NAME, "negative", d.negative)?,
        epochs: ctx.option(NAME, "epochs", d.epochs)?,
        min_count: ctx.option(NAME, "min_count", d.min_count)?,
        sample: ctx.option(NAME, "sample", d.sample)?,
        lr: ctx.option(NAME, "lr", d.lr)?,
        seed: ctx.seed,
    };
    let model = load_or_fit(ctx, NAME, CONFIG_FILE, load, |texts| W2vModel::train(texts, config), save)?;
    Ok(Box::new(Word2Vec::new(model)))
}

fn load(dir: &Path) -> Result<W2vModel, FeatureError> {
    let p = dir.join(CONFIG_FILE);
    let v = stepwise_core::json::read_json(&p)?;
    let saved: SavedConfig = serde_json::from_value(v)
        .map_err(|e| stepwise_core::Error::field(&p, stepwise_core::Location::File, "(w2v)", e.to_string()))?;
    let vp = dir.join(VECTORS_FILE);
    let ((rows, cols), vectors) = crate::npy::read_matrix(&vp)?;
    if rows != saved.words.len() || cols != saved.config.dim || saved.counts.len() != rows {
        return Err(FeatureError::Core(stepwise_core::Error::bad_input(format!(
            "{}: shape ({rows}, {cols}) does not match {} ({} words, dim {})",
            vp.display(),
            p.display(),
            saved.words.len(),
            saved.config.dim
        ))));
    }
    Ok(W2vModel { config: saved.config, words: saved.words, counts: saved.counts, vectors, n_texts: saved.n_texts })
}

/// Vectors first, the config (the marker) last.
fn save(m: &W2vModel, dir: &Path) -> Result<(), FeatureError> {
    crate::npy::write_matrix(&dir.join(VECTORS_FILE), m.words.len(), m.config.dim, &m.vectors)?;
    let saved =
        SavedConfig { config: m.config.clone(), words: m.words.clone(), counts: m.counts.clone(), n_texts: m.n_texts };
    let text = serde_json::to_string(&saved).expect("w2v config serializes");
    stepwise_core::output::write_string_atomic(&dir.join(CONFIG_FILE), &text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two topics that never share a sentence: words of one topic should end up closer to each other.
    fn topic_corpus() -> Vec<String> {
        let mut texts = Vec::new();
        for i in 0..300 {
            let (a, b) = (i % 7, (i * 3) % 5);
            texts.push(format!("whisk the eggs{a} with sugar and flour in the bowl{b} until smooth batter"));
            texts.push(format!("unscrew the screw{a} of the panel{b} with the screwdriver and lift the cover"));
        }
        texts
    }

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
    }

    #[test]
    fn learns_topics() {
        let cfg = W2vConfig { dim: 32, epochs: 5, ..Default::default() };
        let m = W2vModel::train(&topic_corpus(), cfg).unwrap();
        let v = |w: &str| m.word_vector(w).unwrap().to_vec();
        // Every cooking word is closer to "whisk" than any repair word is (and vice versa for "unscrew").
        let cooking = ["sugar", "flour", "smooth", "batter", "eggs1", "bowl2"];
        let repair = ["screwdriver", "lift", "cover", "screw1", "panel2"];
        let worst_same = cooking.iter().map(|w| cos(&v("whisk"), &v(w))).fold(f32::INFINITY, f32::min);
        let best_other = repair.iter().map(|w| cos(&v("whisk"), &v(w))).fold(f32::NEG_INFINITY, f32::max);
        assert!(worst_same > best_other, "whisk: same-topic min {worst_same} vs cross-topic max {best_other}");
        let worst_same = repair.iter().map(|w| cos(&v("unscrew"), &v(w))).fold(f32::INFINITY, f32::min);
        let best_other = cooking.iter().map(|w| cos(&v("unscrew"), &v(w))).fold(f32::NEG_INFINITY, f32::max);
        assert!(worst_same > best_other, "unscrew: same-topic min {worst_same} vs cross-topic max {best_other}");
    }

    #[test]
    fn deterministic_and_seed_dependent() {
        let texts = topic_corpus();
        let cfg = W2vConfig { dim: 16, epochs: 2, ..Default::default() };
        let a = W2vModel::train(&texts, cfg.clone()).unwrap();
        let b = W2vModel::train(&texts, cfg.clone()).unwrap();
        assert_eq!(a.vectors, b.vectors);
        let c = W2vModel::train(&texts, W2vConfig { seed: 1, ..cfg }).unwrap();
        assert_ne!(a.vectors, c.vectors);
    }

    #[test]
    fn parallel_rounds_are_independent_of_thread_count() {
        // Force the sharded path with a tiny block size.
        let texts = topic_corpus();
        let cfg = W2vConfig { dim: 8, epochs: 1, min_count: 1, ..Default::default() };
        let tokenized: Vec<Vec<u32>> =
            texts.iter().map(|t| tokenize(t).iter().map(|w| (w.len() % 11) as u32).collect()).collect();
        let counts = vec![10u64; 11];
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let t = Trainer::new(&counts, &cfg);
                let blocks = split_blocks(&tokenized, 500);
                assert!(blocks.len() > SHARDS);
                let mut p = Params { syn0: vec![0.01; 11 * 8], syn1: vec![0.0; 11 * 8] };
                for (round, group) in blocks.chunks(SHARDS).enumerate() {
                    p = t.train_round(&p, group, &format!("t/{round}"), 0.0, 1e5);
                }
                p.syn0
            })
        };
        assert_eq!(run(1), run(3));
    }

    #[test]
    fn step_vectors_are_unit_mean_vectors() {
        let texts = topic_corpus();
        let m = W2vModel::train(&texts, W2vConfig { dim: 8, epochs: 1, ..Default::default() }).unwrap();
        let enc = Word2Vec::new(m.clone());
        let v = enc.encode(&[Item::Text("Whisk the flour!"), Item::Text("qqq zzz")]).unwrap();
        let mut mean = vec![0f32; 8];
        for w in ["whisk", "the", "flour"] {
            axpy(1.0 / 3.0, m.word_vector(w).unwrap(), &mut mean);
        }
        let n = dot(&mean, &mean).sqrt();
        for (x, y) in v[..8].iter().zip(&mean) {
            assert!((x - y / n).abs() < 1e-5);
        }
        assert!(v[8..].iter().all(|&x| x == 0.0));
    }

    #[test]
    fn token_vectors_are_the_first_in_vocabulary_word_vectors() {
        let m = W2vModel::train(&topic_corpus(), W2vConfig { dim: 8, epochs: 1, ..Default::default() }).unwrap();
        let enc = Word2Vec::new(m.clone());
        let items = [Item::Text("Whisk qqq the flour, then whisk!"), Item::Text("qqq zzz"), Item::Text("the")];
        let out = enc.encode_with_tokens(&items, 3).unwrap();
        // Pooled vectors are exactly those of encode().
        assert_eq!(out.vectors, enc.encode(&items).unwrap());
        assert_eq!(out.counts, [3, 0, 1], "4 known words capped at 3; none; one");
        let mut want = Vec::new();
        for w in ["whisk", "the", "flour", "the"] {
            want.extend_from_slice(m.word_vector(w).unwrap());
        }
        assert_eq!(out.tokens, want);
        // Token ids are the words' vocabulary rows.
        let row = |w: &str| m.words.iter().position(|x| x == w).unwrap() as i64;
        assert_eq!(out.ids, [row("whisk"), row("the"), row("flour"), row("the")]);
        let vocab = enc.vocabulary().unwrap();
        assert_eq!(vocab.size, m.words.len());
        assert_eq!(vocab, Vocabulary::new(vocab.name.clone(), &m.words, &[]));
    }

    #[test]
    fn state_round_trips() {
        let td = tempfile::tempdir().unwrap();
        let mut ctx = EncoderContext { state_dir: Some(td.path().to_path_buf()), ..Default::default() };
        ctx.options.insert("dim".into(), "8".into());
        ctx.options.insert("epochs".into(), "1".into());
        ctx.fit_texts = Some(std::sync::Arc::new(topic_corpus()));
        let a = build(&ctx).unwrap();
        ctx.fit_texts = None;
        let b = build(&ctx).unwrap();
        assert_eq!(a.info(), b.info());
        let x = [Item::Text("whisk the eggs")];
        assert_eq!(a.encode(&x).unwrap(), b.encode(&x).unwrap());
    }
}
