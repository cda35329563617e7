//! TF-IDF text encoder, fitted on the corpus's step texts.
//!
//! Matches scikit-learn's `TfidfVectorizer` with the same vocabulary (`norm="l2"`, `smooth_idf=True`,
//! `sublinear_tf` as configured): idf = ln((1 + n) / (1 + df)) + 1, tf = raw count (or 1 + ln count), rows
//! L2-normalised; see `scripts/crosscheck/tfidf_sklearn.py`. The vocabulary is the `max_features` most frequent
//! terms (total count; ties by term) with document frequency ≥ `min_df`, in alphabetical order (sklearn's column
//! order). A text with no vocabulary term gets the zero vector.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::FeatureError;
use crate::builtin::fitted::load_or_fit;
use crate::builtin::tokenize::{self, tokenize};
use crate::encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, l2_normalize_rows};
use crate::registry::EncoderContext;

pub const NAME: &str = "tfidf";
const VERSION: &str = "tfidf-1";
const STATE_FILE: &str = "tfidf.json";

/// Fitting parameters (`--encoder-opt`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TfidfConfig {
    /// Keep at most this many terms (0 = all).
    pub max_features: usize,
    /// Drop terms in fewer documents.
    pub min_df: usize,
    /// tf = 1 + ln(count) instead of count.
    pub sublinear_tf: bool,
}

impl Default for TfidfConfig {
    fn default() -> Self {
        TfidfConfig { max_features: 2048, min_df: 1, sublinear_tf: false }
    }
}

/// The fitted state: vocabulary (column order) and idf weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TfidfModel {
    pub config: TfidfConfig,
    pub n_docs: usize,
    pub vocabulary: Vec<String>,
    pub idf: Vec<f64>,
}

impl TfidfModel {
    /// Fit on `docs`.
    pub fn fit(docs: &[String], config: TfidfConfig) -> Result<Self, FeatureError> {
        let mut df: HashMap<String, usize> = HashMap::new();
        let mut total: HashMap<String, u64> = HashMap::new();
        for d in docs {
            let mut counts: HashMap<String, u64> = HashMap::new();
            for t in tokenize(d) {
                *counts.entry(t).or_default() += 1;
            }
            for (t, c) in counts {
                *total.entry(t.clone()).or_default() += c;
                *df.entry(t).or_default() += 1;
            }
        }
        let mut terms: Vec<(String, u64)> =
            total.into_iter().filter(|(t, _)| df.get(t).copied().unwrap_or(0) >= config.min_df.max(1)).collect();
        if terms.is_empty() {
            return Err(FeatureError::Core(stepwise_core::Error::bad_input(format!(
                "tfidf: the {} texts to fit on have no term in at least {} document(s)",
                docs.len(),
                config.min_df.max(1)
            ))));
        }
        terms.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        if config.max_features > 0 {
            terms.truncate(config.max_features);
        }
        let mut vocabulary: Vec<String> = terms.into_iter().map(|(t, _)| t).collect();
        vocabulary.sort();
        let n = docs.len() as f64;
        let idf = vocabulary.iter().map(|t| ((1.0 + n) / (1.0 + df[t] as f64)).ln() + 1.0).collect();
        Ok(TfidfModel { config, n_docs: docs.len(), vocabulary, idf })
    }
}

pub struct Tfidf {
    info: EncoderInfo,
    model: TfidfModel,
    index: HashMap<String, usize>,
}

impl Tfidf {
    pub fn new(model: TfidfModel) -> Self {
        let index = model.vocabulary.iter().enumerate().map(|(i, t)| (t.clone(), i)).collect();
        let c = &model.config;
        let info = EncoderInfo {
            name: NAME.to_string(),
            version: VERSION.to_string(),
            modality: Modality::Text,
            dim: model.vocabulary.len(),
            normalization: Normalization::L2,
            preprocessing: format!(
                "{}; vocabulary: {} terms (max_features={}, min_df={}) from {} texts; tf={}; \
                 idf=ln((1+n)/(1+df))+1; L2 (zero vector when no term is known)",
                tokenize::DESCRIPTION,
                model.vocabulary.len(),
                c.max_features,
                c.min_df,
                model.n_docs,
                if c.sublinear_tf { "1+ln(count)" } else { "count" }
            ),
        };
        Tfidf { info, model, index }
    }

    pub fn model(&self) -> &TfidfModel {
        &self.model
    }

    fn encode_text(&self, text: &str, row: &mut [f32]) {
        let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
        for t in tokenize(text) {
            if let Some(&i) = self.index.get(&t) {
                *counts.entry(i).or_default() += 1;
            }
        }
        // Accumulate in f64 (as sklearn does) for a faithful cross-check, then normalise.
        let mut norm = 0f64;
        let weights: Vec<(usize, f64)> = counts
            .into_iter()
            .map(|(i, c)| {
                let tf = if self.model.config.sublinear_tf { 1.0 + (c as f64).ln() } else { c as f64 };
                let w = tf * self.model.idf[i];
                norm += w * w;
                (i, w)
            })
            .collect();
        let norm = norm.sqrt();
        if norm > 0.0 {
            for (i, w) in weights {
                row[i] = (w / norm) as f32;
            }
        }
    }
}

impl Encoder for Tfidf {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError> {
        let dim = self.info.dim;
        let mut out = vec![0f32; batch.len() * dim];
        for (item, row) in batch.iter().zip(out.chunks_mut(dim)) {
            match item {
                Item::Text(t) => self.encode_text(t, row),
                Item::Image(_) => {
                    return Err(FeatureError::Encoder("tfidf encodes text, not images".into()));
                }
            }
        }
        // Rows are already unit length; this only guards against rounding drift.
        l2_normalize_rows(&mut out, dim);
        Ok(out)
    }

    fn batch_size(&self) -> usize {
        256
    }
}

pub fn build(ctx: &EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    ctx.check_options(NAME, &["max_features", "min_df", "sublinear_tf"])?;
    let d = TfidfConfig::default();
    let config = TfidfConfig {
        max_features: ctx.option(NAME, "max_features", d.max_features)?,
        min_df: ctx.option(NAME, "min_df", d.min_df)?,
        sublinear_tf: ctx.option(NAME, "sublinear_tf", d.sublinear_tf)?,
    };
    let model = load_or_fit(ctx, NAME, STATE_FILE, load, |texts| TfidfModel::fit(texts, config), save)?;
    Ok(Box::new(Tfidf::new(model)))
}

fn load(dir: &Path) -> Result<TfidfModel, FeatureError> {
    let p = dir.join(STATE_FILE);
    let v = stepwise_core::json::read_json(&p)?;
    let m: TfidfModel = serde_json::from_value(v)
        .map_err(|e| stepwise_core::Error::field(&p, stepwise_core::Location::File, "(tfidf)", e.to_string()))?;
    if m.vocabulary.len() != m.idf.len() {
        return Err(FeatureError::Core(stepwise_core::Error::bad_input(format!(
            "{}: vocabulary and idf lengths differ",
            p.display()
        ))));
    }
    Ok(m)
}

fn save(m: &TfidfModel, dir: &Path) -> Result<(), FeatureError> {
    let text = serde_json::to_string(m).expect("tfidf model serializes");
    stepwise_core::output::write_string_atomic(&dir.join(STATE_FILE), &text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs() -> Vec<String> {
        ["Boil the water.", "Boil the eggs in the water.", "Serve the eggs."].iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn weights_follow_the_smooth_idf_formula() {
        let m = TfidfModel::fit(&docs(), TfidfConfig::default()).unwrap();
        assert_eq!(m.vocabulary, ["boil", "eggs", "in", "serve", "the", "water"]);
        let enc = Tfidf::new(m);
        let v = enc.encode(&[Item::Text("the water the")]).unwrap();
        let idf = |df: f64| ((1.0 + 3.0) / (1.0 + df)).ln() + 1.0;
        let (w_the, w_water) = (2.0 * idf(3.0), idf(2.0));
        let n = (w_the * w_the + w_water * w_water).sqrt();
        assert!((v[4] as f64 - w_the / n).abs() < 1e-6);
        assert!((v[5] as f64 - w_water / n).abs() < 1e-6);
        assert_eq!(v[0], 0.0);
        // Unknown words only: the zero vector.
        assert!(enc.encode(&[Item::Text("xyzzy")]).unwrap().iter().all(|&x| x == 0.0));
    }

    #[test]
    fn max_features_keeps_the_most_frequent_terms() {
        let cfg = TfidfConfig { max_features: 2, ..Default::default() };
        let m = TfidfModel::fit(&docs(), cfg).unwrap();
        // "the" occurs 4 times; boil, eggs and water twice each: the tie goes to the first term, "boil".
        assert_eq!(m.vocabulary, ["boil", "the"]);
    }

    #[test]
    fn state_round_trips_through_a_folder() {
        let td = tempfile::tempdir().unwrap();
        let mut ctx = EncoderContext { state_dir: Some(td.path().to_path_buf()), ..Default::default() };
        ctx.fit_texts = Some(std::sync::Arc::new(docs()));
        let a = build(&ctx).unwrap();
        ctx.fit_texts = None;
        let b = build(&ctx).unwrap();
        assert_eq!(a.info(), b.info());
        let x = [Item::Text("Boil eggs")];
        assert_eq!(a.encode(&x).unwrap(), b.encode(&x).unwrap());
        ctx.state_dir = None;
        assert!(matches!(build(&ctx), Err(FeatureError::MissingModel(_))));
    }
}
