//! The general M3C model: modality encoders + a scoring function.
//!
//! - Context encoder: the rows of each step (tokens, or images) → a bidirectional LSTM within the step → mean
//!   over rows → a bidirectional LSTM across the steps (`hidden` per direction). With `hierarchical = false` the
//!   first level is skipped and a step's rows are averaged (one vector per step).
//! - Query encoder: a bidirectional LSTM over each candidate's query sequence.
//! - Scoring function ([`Scorer`]): Impatient Reader, BiDAF or HTRN, each scoring every candidate of a question.

use candle_core::{D, DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use super::inputs::{InputSpec, QuestionInput};
use super::scorers::{Bidaf, Htrn, ImpatientReader};
use crate::nn::{BiLstm, CResult, Linear, Params, row_cosine};

/// The scoring functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScorerKind {
    Impatient,
    Bidaf,
    Htrn,
}

impl ScorerKind {
    pub const ALL: [ScorerKind; 3] = [ScorerKind::Impatient, ScorerKind::Bidaf, ScorerKind::Htrn];

    pub fn as_str(self) -> &'static str {
        match self {
            ScorerKind::Impatient => "impatient",
            ScorerKind::Bidaf => "bidaf",
            ScorerKind::Htrn => "htrn",
        }
    }

    /// The name in tables.
    pub fn display(self) -> &'static str {
        match self {
            ScorerKind::Impatient => "Impatient Reader",
            ScorerKind::Bidaf => "BiDAF",
            ScorerKind::Htrn => "HTRN",
        }
    }

    pub fn parse(s: &str) -> Option<ScorerKind> {
        ScorerKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The training loss.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Loss {
    /// Σ over wrong candidates of max(0, margin − s_answer + s_wrong), averaged (RecipeQA: margin 1.5).
    Hinge { margin: f64 },
    /// Cross-entropy over the candidates' scores.
    CrossEntropy,
}

/// HTRN's transformer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtrnConfig {
    pub layers: usize,
    pub dim: usize,
    pub heads: usize,
    /// Feed-forward width (4 × dim in BERT).
    pub ff: usize,
    /// Longest input sequence ([CLS] + context + [SEP] + query).
    pub max_positions: usize,
}

impl Default for HtrnConfig {
    fn default() -> Self {
        HtrnConfig { layers: 4, dim: 512, heads: 8, ff: 2048, max_positions: 128 }
    }
}

/// Everything that defines a model's shape (saved as `config.json` beside the weights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub scorer: ScorerKind,
    pub input: InputSpec,
    pub context_dim: usize,
    pub query_dim: usize,
    /// LSTM hidden units per direction.
    pub hidden: usize,
    /// Whether the context encoder's first level (a BiLSTM over each step's rows) is used; false when only one
    /// vector per step exists.
    pub hierarchical: bool,
    /// Impatient Reader: width of the attention layer.
    pub attention: usize,
    pub htrn: HtrnConfig,
    pub loss: Loss,
}

impl ModelConfig {
    /// The paper's defaults for `scorer` (hidden 256; HTRN 4 × 512 × 8; hinge loss with margin 1.5 for the
    /// Impatient Reader, cross-entropy otherwise).
    pub fn new(scorer: ScorerKind, input: InputSpec, context_dim: usize, query_dim: usize) -> Self {
        let loss = match scorer {
            ScorerKind::Impatient => Loss::Hinge { margin: 1.5 },
            _ => Loss::CrossEntropy,
        };
        ModelConfig {
            scorer,
            hierarchical: input.tokens || input.context == super::inputs::ContextKind::Images,
            input,
            context_dim,
            query_dim,
            hidden: 256,
            attention: 256,
            htrn: HtrnConfig::default(),
            loss,
        }
    }
}

/// A padded batch of questions as tensors.
pub struct Batch {
    pub questions: usize,
    pub candidates: usize,
    /// Hierarchical: `(B·N) × T × dc` rows with mask `(B·N) × T`; flat: `B × N × dc`.
    pub context: Tensor,
    pub row_mask: Option<Tensor>,
    /// `B × N`.
    pub step_mask: Tensor,
    /// `(B·A) × L × dq` and mask `(B·A) × L`.
    pub query: Tensor,
    pub query_mask: Tensor,
    /// `B × A` one-hot of the answers.
    pub answer_onehot: Tensor,
    pub answers: Vec<usize>,
}

impl Batch {
    /// Pad `items` (all with the same number of candidates) for a model of `cfg`.
    pub fn new(items: &[&QuestionInput], cfg: &ModelConfig) -> Result<Batch, String> {
        let b = items.len();
        if b == 0 {
            return Err("empty batch".into());
        }
        let a = items[0].candidates.len();
        if let Some(q) = items.iter().find(|q| q.candidates.len() != a) {
            return Err(format!(
                "question {} has {} choices, others {a}: a model needs the same number of choices in every question",
                q.qid,
                q.candidates.len()
            ));
        }
        let (dc, dq) = (cfg.context_dim, cfg.query_dim);
        let n = items.iter().map(|q| q.context.len()).max().unwrap_or(1).max(1);
        let mut step_mask = vec![0f32; b * n];
        let (context, row_mask) = if cfg.hierarchical {
            let t = items.iter().flat_map(|q| q.context.iter().map(|m| m.len())).max().unwrap_or(1).max(1);
            let mut data = vec![0f32; b * n * t * dc];
            let mut mask = vec![0f32; b * n * t];
            for (qi, q) in items.iter().enumerate() {
                for (si, m) in q.context.iter().enumerate() {
                    check_dim(&q.qid, "context", m.dim, dc)?;
                    step_mask[qi * n + si] = 1.0;
                    let base = (qi * n + si) * t;
                    for r in 0..m.len() {
                        data[(base + r) * dc..(base + r + 1) * dc].copy_from_slice(m.row(r));
                        mask[base + r] = 1.0;
                    }
                }
            }
            (tensor(data, &[b * n, t, dc]), Some(tensor(mask, &[b * n, t])))
        } else {
            let mut data = vec![0f32; b * n * dc];
            for (qi, q) in items.iter().enumerate() {
                for (si, m) in q.context.iter().enumerate() {
                    check_dim(&q.qid, "context", m.dim, dc)?;
                    step_mask[qi * n + si] = 1.0;
                    let dst = &mut data[(qi * n + si) * dc..(qi * n + si + 1) * dc];
                    let rows = m.len().max(1) as f32;
                    for r in 0..m.len() {
                        dst.iter_mut().zip(m.row(r)).for_each(|(d, x)| *d += x / rows);
                    }
                }
            }
            (tensor(data, &[b, n, dc]), None)
        };
        let l = items.iter().flat_map(|q| q.candidates.iter().map(|c| c.len())).max().unwrap_or(1).max(1);
        let mut query = vec![0f32; b * a * l * dq];
        let mut query_mask = vec![0f32; b * a * l];
        let mut onehot = vec![0f32; b * a];
        for (qi, q) in items.iter().enumerate() {
            onehot[qi * a + q.answer] = 1.0;
            for (ci, c) in q.candidates.iter().enumerate() {
                check_dim(&q.qid, "query", c.dim, dq)?;
                let base = (qi * a + ci) * l;
                for r in 0..c.len() {
                    query[(base + r) * dq..(base + r + 1) * dq].copy_from_slice(c.row(r));
                    query_mask[base + r] = 1.0;
                }
            }
        }
        Ok(Batch {
            questions: b,
            candidates: a,
            context: context.map_err(|e| e.to_string())?,
            row_mask: row_mask.transpose().map_err(|e| e.to_string())?,
            step_mask: tensor(step_mask, &[b, n]).map_err(|e| e.to_string())?,
            query: tensor(query, &[b * a, l, dq]).map_err(|e| e.to_string())?,
            query_mask: tensor(query_mask, &[b * a, l]).map_err(|e| e.to_string())?,
            answer_onehot: tensor(onehot, &[b, a]).map_err(|e| e.to_string())?,
            answers: items.iter().map(|q| q.answer).collect(),
        })
    }
}

fn check_dim(qid: &str, what: &str, got: usize, want: usize) -> Result<(), String> {
    if got != want {
        return Err(format!("question {qid}: {what} vectors have dimension {got}, the model expects {want}"));
    }
    Ok(())
}

fn tensor(data: Vec<f32>, shape: &[usize]) -> CResult<Tensor> {
    Tensor::from_vec(data, shape, &Device::Cpu)
}

/// The encoders' output for a batch, with the context repeated for each candidate (`S = B·A` rows).
pub struct Encoded {
    /// `S × N × 2H`, mask `S × N`.
    pub context: Tensor,
    pub context_mask: Tensor,
    /// `S × L × 2H`, mask `S × L`.
    pub query: Tensor,
    pub query_mask: Tensor,
    /// `S × 2H`: the query encoder's final states.
    pub query_summary: Tensor,
}

/// A scoring function: one score per candidate row of [`Encoded`] (`S`).
pub trait Scorer {
    fn scores(&self, e: &Encoded) -> CResult<Tensor>;
}

/// An M3C model: parameters, encoders, scorer.
pub struct M3cModel {
    pub config: ModelConfig,
    pub params: Params,
    step_encoder: Option<BiLstm>,
    context_encoder: BiLstm,
    query_encoder: BiLstm,
    scorer: Box<dyn Scorer + Send + Sync>,
}

impl M3cModel {
    /// A freshly initialised model (`seed` names every parameter's random stream).
    pub fn new(config: ModelConfig, seed: u64) -> CResult<M3cModel> {
        let mut p = Params::new(seed);
        let h = config.hidden;
        let step_encoder =
            if config.hierarchical { Some(BiLstm::new(&mut p, "encoder.step", config.context_dim, h)?) } else { None };
        let context_in = if config.hierarchical { 2 * h } else { config.context_dim };
        let context_encoder = BiLstm::new(&mut p, "encoder.context", context_in, h)?;
        let query_encoder = BiLstm::new(&mut p, "encoder.query", config.query_dim, h)?;
        let scorer: Box<dyn Scorer + Send + Sync> = match config.scorer {
            ScorerKind::Impatient => Box::new(ImpatientReader::new(&mut p, "scorer", 2 * h, config.attention)?),
            ScorerKind::Bidaf => Box::new(Bidaf::new(&mut p, "scorer", h)?),
            ScorerKind::Htrn => Box::new(Htrn::new(&mut p, "scorer", 2 * h, &config.htrn)?),
        };
        Ok(M3cModel { config, params: p, step_encoder, context_encoder, query_encoder, scorer })
    }

    /// Encode a batch.
    pub fn encode(&self, batch: &Batch) -> CResult<Encoded> {
        let (b, n) = batch.step_mask.dims2()?;
        let steps = match (&self.step_encoder, &batch.row_mask) {
            (Some(enc), Some(mask)) => {
                let (out, _) = enc.forward(&batch.context, Some(mask))?;
                crate::nn::masked_mean(&out, mask)?.reshape((b, n, 2 * self.config.hidden))?
            }
            (None, None) => batch.context.clone(),
            _ => candle_core::bail!("batch and model disagree on the hierarchical context encoder"),
        };
        let (context, _) = self.context_encoder.forward(&steps, Some(&batch.step_mask))?;
        let (query, query_summary) = self.query_encoder.forward(&batch.query, Some(&batch.query_mask))?;
        // Repeat each question's context for its candidates.
        let a = batch.candidates;
        let idx: Vec<u32> = (0..b as u32).flat_map(|q| std::iter::repeat_n(q, a)).collect();
        let idx = Tensor::from_vec(idx, b * a, &Device::Cpu)?;
        Ok(Encoded {
            context: context.index_select(&idx, 0)?,
            context_mask: batch.step_mask.index_select(&idx, 0)?,
            query,
            query_mask: batch.query_mask.clone(),
            query_summary,
        })
    }

    /// Scores `B × A`.
    pub fn scores(&self, batch: &Batch) -> CResult<Tensor> {
        let e = self.encode(batch)?;
        self.scorer.scores(&e)?.reshape((batch.questions, batch.candidates))
    }

    /// The training loss of a batch (a scalar) and the scores.
    pub fn loss(&self, batch: &Batch) -> CResult<(Tensor, Tensor)> {
        let s = self.scores(batch)?;
        let l = match self.config.loss {
            Loss::CrossEntropy => {
                let logp = candle_nn::ops::log_softmax(&s, D::Minus1)?;
                (logp * &batch.answer_onehot)?.sum_all()?.affine(-1.0 / batch.questions as f64, 0.0)?
            }
            Loss::Hinge { margin } => {
                let ans = (&s * &batch.answer_onehot)?.sum_keepdim(1)?; // B × 1
                let wrong = batch.answer_onehot.affine(-1.0, 1.0)?;
                let h = s.broadcast_sub(&ans)?.affine(1.0, margin)?.relu()?;
                let pairs = (batch.questions * (batch.candidates - 1).max(1)) as f64;
                (h * wrong)?.sum_all()?.affine(1.0 / pairs, 0.0)?
            }
        };
        Ok((l, s))
    }

    pub fn parameter_count(&self) -> usize {
        self.params.count()
    }
}

/// The predicted candidate of each row of `scores` (`B × A`; ties to the lowest index, NaN never wins).
pub fn argmax_rows(scores: &Tensor) -> CResult<Vec<usize>> {
    let rows = scores.to_dtype(DType::F32)?.to_vec2::<f32>()?;
    Ok(rows
        .iter()
        .map(|r| {
            let mut best: Option<(usize, f32)> = None;
            for (i, &v) in r.iter().enumerate() {
                if !v.is_nan() && best.is_none_or(|(_, b)| v > b) {
                    best = Some((i, v));
                }
            }
            best.map_or(0, |(i, _)| i)
        })
        .collect())
}

/// Cosine compatibility of a joint embedding with each candidate's embedding (the Impatient Reader's output).
pub(super) fn cosine_scores(joint: &Tensor, candidate: &Linear, summary: &Tensor) -> CResult<Tensor> {
    row_cosine(joint, &candidate.forward(summary)?)
}
