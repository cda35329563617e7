//! The general M3C model: modality encoders + a scoring function.
//!
//! - Context encoder: the rows of each step (tokens, or images) → a bidirectional LSTM within the step → mean
//!   over rows → a bidirectional LSTM across the steps (`hidden` per direction). With `hierarchical = false` the
//!   first level is skipped and a step's rows are averaged (one vector per step).
//! - Query encoder: a bidirectional LSTM over each candidate's query sequence.
//! - Scoring function ([`Scorer`]): Impatient Reader, BiDAF or HTRN, each scoring every candidate of a question.

use candle_core::{D, DType, Device, Tensor};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::inputs::{InputSpec, QuestionInput};
use super::scorers::{Bidaf, Htrn, ImpatientReader};
use crate::item_features::column_moments;
use crate::nn::{BiLstm, CResult, Params, dropout};
use stepwise_core::TaskShape;

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
    /// How input rows are rescaled before the encoders; raw in models saved before it existed.
    #[serde(default)]
    pub scaling: FittedScaling,
    /// Dropout rate on the encoders' inputs and outputs while training (0: none).
    #[serde(default)]
    pub dropout: f64,
    /// Impatient Reader: what its joint embedding is compared with; the query summary in models saved before
    /// the choice existed, which is what they were trained with.
    #[serde(default, skip_serializing_if = "CandidateEmbedding::is_default")]
    pub candidate_embedding: CandidateEmbedding,
}

/// What the Impatient Reader compares its joint embedding `g` with by cosine similarity.
///
/// - `QuerySummary` (the default): `W_c u`, with `u` the summary of the query with the candidate in its place.
///   The candidate reaches the score through the query, as it does in every GM3C scorer (Meta-RecipeQA appendix
///   C puts it in the placeholder).
/// - `Item`: `W_c x_c` on the candidate's own input row (cloze: the choice; coherence: the image the candidate
///   leaves out), as RecipeQA §4.2's baseline compares `g` with the candidate answer's embedding. The linear map
///   is this implementation's (RecipeQA compares with its 100-d features directly). A visual ordering candidate
///   is a whole sequence, so there it is the query summary under either choice. In both forms `g` reads the
///   query with the candidate in its place, so in `Item` the candidate reaches the score twice (through `g` and
///   through `x_c`); this is also this implementation's reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateEmbedding {
    #[default]
    QuerySummary,
    Item,
}

impl CandidateEmbedding {
    /// Left out of saved files when it is the default, so that they read and write as before the choice existed.
    pub fn is_default(&self) -> bool {
        *self == CandidateEmbedding::QuerySummary
    }
}

/// How input rows are rescaled before the encoders, with statistics of the training questions' rows.
///
/// Why offered: the feature stores hold unit vectors that share most of their direction (unrelated items have
/// cosine ≈ 0.6), so what tells two items apart is a few hundredths per dimension. Centring removes the shared
/// part and one scale for all dimensions brings the rest to unit variance, keeping the relative spread of the
/// dimensions that distances read; per-dimension standardisation also equalises the dimensions, amplifying
/// those that barely vary. Rescaled inputs are fitted sooner (the capacity tests use centring), but whether a
/// model then generalises better on the world depends on the model, the seed and the training set's size, with
/// no setting better for all of them, so `raw`, the papers' (features used as they come), is the default for
/// every model; the other two are named departures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputScaling {
    #[default]
    Raw,
    /// `(x − mean) / s`, one `s` for all dimensions (the root mean variance).
    Centered,
    /// `(x − mean) / sd`, per dimension.
    Standardized,
}

/// A fitted affine rescaling of rows, `(x − mean) · inv_scale`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowScale {
    pub mean: Vec<f32>,
    /// Per dimension; 0 for a dimension that never varies in the training rows.
    pub inv_scale: Vec<f32>,
}

impl RowScale {
    /// Fitted on `rows` (each of dimension `dim`) by `method`; `None` for [`InputScaling::Raw`] or no rows.
    pub fn fit<'a>(
        dim: usize,
        rows: impl Iterator<Item = &'a [f32]> + Clone,
        method: InputScaling,
    ) -> Option<RowScale> {
        if method == InputScaling::Raw {
            return None;
        }
        let (mean, var) = column_moments(dim, rows)?;
        let inverse = |v: f64| if v > 1e-12 { (1.0 / v.sqrt()) as f32 } else { 0.0 };
        let inv_scale = match method {
            InputScaling::Centered => vec![inverse(var.iter().sum::<f64>() / dim.max(1) as f64); dim],
            _ => var.iter().map(|&v| inverse(v)).collect(),
        };
        Some(RowScale { mean: mean.into_iter().map(|m| m as f32).collect(), inv_scale })
    }

    /// Write the rescaled `row` into `dst`.
    pub fn apply(&self, row: &[f32], dst: &mut [f32]) {
        for (((d, &x), m), s) in dst.iter_mut().zip(row).zip(&self.mean).zip(&self.inv_scale) {
            *d = (x - m) * s;
        }
    }
}

/// The fitted rescaling of the context rows and the query rows ([`InputScaling`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FittedScaling {
    #[serde(default)]
    pub method: InputScaling,
    pub context: Option<RowScale>,
    pub query: Option<RowScale>,
}

impl FittedScaling {
    /// `method` fitted on the rows of `train` (every context row; every query row of every candidate).
    pub fn fit(method: InputScaling, train: &[QuestionInput], context_dim: usize, query_dim: usize) -> Self {
        let context_rows = train.iter().flat_map(|q| q.context.iter().flat_map(|m| m.rows()));
        let query_rows = train.iter().flat_map(|q| q.candidates.iter().flat_map(|m| m.rows()));
        FittedScaling {
            method,
            context: RowScale::fit(context_dim, context_rows, method),
            query: RowScale::fit(query_dim, query_rows, method),
        }
    }
}

/// Copy `row` into `dst`, rescaled when `scale` is given.
fn put_row(scale: Option<&RowScale>, row: &[f32], dst: &mut [f32]) {
    match scale {
        Some(s) => s.apply(row, dst),
        None => dst.copy_from_slice(row),
    }
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
            scaling: FittedScaling::default(),
            dropout: 0.0,
            candidate_embedding: CandidateEmbedding::QuerySummary,
        }
    }

    /// This configuration with the Impatient Reader's candidate embedding `e`; other scorers have none, so theirs
    /// stays the default (their saved configs, and a study's cache keys for their cells, are as before).
    pub fn with_candidate_embedding(mut self, e: CandidateEmbedding) -> Self {
        if self.scorer == ScorerKind::Impatient {
            self.candidate_embedding = e;
        }
        self
    }

    /// Whether the scorer reads each candidate's own item row ([`CandidateEmbedding::Item`]; not for ordering,
    /// whose candidates are sequences).
    pub fn reads_candidate_items(&self) -> bool {
        self.scorer == ScorerKind::Impatient
            && self.candidate_embedding == CandidateEmbedding::Item
            && self.input.task.shape() != TaskShape::Ordering
    }

    /// This configuration with its inputs rescaled by `method`, fitted on `train` (see [`InputScaling`]).
    pub fn scaled_on(mut self, method: InputScaling, train: &[QuestionInput]) -> Self {
        self.scaling = FittedScaling::fit(method, train, self.context_dim, self.query_dim);
        self
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
    /// `(B·A) × dq`: each candidate's own item row, when the model reads them
    /// ([`ModelConfig::reads_candidate_items`]).
    pub candidate_items: Option<Tensor>,
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
        let (cscale, qscale) = (cfg.scaling.context.as_ref(), cfg.scaling.query.as_ref());
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
                        put_row(cscale, m.row(r), &mut data[(base + r) * dc..(base + r + 1) * dc]);
                        mask[base + r] = 1.0;
                    }
                }
            }
            (tensor(data, &[b * n, t, dc]), Some(tensor(mask, &[b * n, t])))
        } else {
            let mut data = vec![0f32; b * n * dc];
            let mut row = vec![0f32; dc];
            for (qi, q) in items.iter().enumerate() {
                for (si, m) in q.context.iter().enumerate() {
                    check_dim(&q.qid, "context", m.dim, dc)?;
                    step_mask[qi * n + si] = 1.0;
                    let dst = &mut data[(qi * n + si) * dc..(qi * n + si + 1) * dc];
                    let rows = m.len().max(1) as f32;
                    for r in 0..m.len() {
                        put_row(cscale, m.row(r), &mut row);
                        dst.iter_mut().zip(&row).for_each(|(d, x)| *d += x / rows);
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
                    put_row(qscale, c.row(r), &mut query[(base + r) * dq..(base + r + 1) * dq]);
                    query_mask[base + r] = 1.0;
                }
            }
        }
        let candidate_items = if cfg.reads_candidate_items() {
            let mut data = vec![0f32; b * a * dq];
            for (qi, q) in items.iter().enumerate() {
                let m = q.candidate_items.as_ref().ok_or_else(|| {
                    format!("question {}: no rows of the candidates' own items, which the model compares", q.qid)
                })?;
                check_dim(&q.qid, "candidate item", m.dim, dq)?;
                if m.len() != a {
                    return Err(format!("question {}: {} candidate item rows for {a} candidates", q.qid, m.len()));
                }
                for ci in 0..a {
                    put_row(qscale, m.row(ci), &mut data[(qi * a + ci) * dq..(qi * a + ci + 1) * dq]);
                }
            }
            Some(tensor(data, &[b * a, dq]).map_err(|e| e.to_string())?)
        } else {
            None
        };
        Ok(Batch {
            questions: b,
            candidates: a,
            context: context.map_err(|e| e.to_string())?,
            row_mask: row_mask.transpose().map_err(|e| e.to_string())?,
            step_mask: tensor(step_mask, &[b, n]).map_err(|e| e.to_string())?,
            query: tensor(query, &[b * a, l, dq]).map_err(|e| e.to_string())?,
            query_mask: tensor(query_mask, &[b * a, l]).map_err(|e| e.to_string())?,
            candidate_items,
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
    /// `S × dq`: each candidate's own item row ([`Batch::candidate_items`]).
    pub candidate_items: Option<Tensor>,
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
        for (what, scale, dim) in [
            ("context", &config.scaling.context, config.context_dim),
            ("query", &config.scaling.query, config.query_dim),
        ] {
            if let Some(s) = scale
                && (s.mean.len() != dim || s.inv_scale.len() != dim)
            {
                candle_core::bail!(
                    "the {what} rescaling has {} means and {} scales for {dim}-dimensional inputs",
                    s.mean.len(),
                    s.inv_scale.len()
                );
            }
        }
        let mut p = Params::new(seed);
        let h = config.hidden;
        let step_encoder =
            if config.hierarchical { Some(BiLstm::new(&mut p, "encoder.step", config.context_dim, h)?) } else { None };
        let context_in = if config.hierarchical { 2 * h } else { config.context_dim };
        let context_encoder = BiLstm::new(&mut p, "encoder.context", context_in, h)?;
        let query_encoder = BiLstm::new(&mut p, "encoder.query", config.query_dim, h)?;
        let scorer: Box<dyn Scorer + Send + Sync> = match config.scorer {
            ScorerKind::Impatient => {
                let candidate_in = if config.reads_candidate_items() { Some(config.query_dim) } else { None };
                Box::new(ImpatientReader::new(&mut p, "scorer", 2 * h, config.attention, candidate_in)?)
            }
            ScorerKind::Bidaf => Box::new(Bidaf::new(&mut p, "scorer", h)?),
            ScorerKind::Htrn => Box::new(Htrn::new(&mut p, "scorer", 2 * h, &config.htrn)?),
        };
        Ok(M3cModel { config, params: p, step_encoder, context_encoder, query_encoder, scorer })
    }

    /// Encode a batch.
    pub fn encode(&self, batch: &Batch) -> CResult<Encoded> {
        self.encode_dropping(batch, None)
    }

    /// Encode a batch, with dropout on the encoders' inputs and outputs when `rng` is given (training).
    fn encode_dropping(&self, batch: &Batch, mut rng: Option<&mut ChaCha8Rng>) -> CResult<Encoded> {
        let rate = self.config.dropout;
        let mut drop = |x: &Tensor| dropout(x, rate, rng.as_deref_mut());
        let (b, n) = batch.step_mask.dims2()?;
        let context_rows = drop(&batch.context)?;
        let steps = match (&self.step_encoder, &batch.row_mask) {
            (Some(enc), Some(mask)) => {
                let (out, _) = enc.forward(&context_rows, Some(mask))?;
                crate::nn::masked_mean(&out, mask)?.reshape((b, n, 2 * self.config.hidden))?
            }
            (None, None) => context_rows,
            _ => candle_core::bail!("batch and model disagree on the hierarchical context encoder"),
        };
        let (context, _) = self.context_encoder.forward(&steps, Some(&batch.step_mask))?;
        let (query, query_summary) = self.query_encoder.forward(&drop(&batch.query)?, Some(&batch.query_mask))?;
        let (context, query, query_summary) = (drop(&context)?, drop(&query)?, drop(&query_summary)?);
        let candidate_items = batch.candidate_items.as_ref().map(&mut drop).transpose()?;
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
            candidate_items,
        })
    }

    /// Scores `B × A`.
    pub fn scores(&self, batch: &Batch) -> CResult<Tensor> {
        self.scores_dropping(batch, None)
    }

    fn scores_dropping(&self, batch: &Batch, rng: Option<&mut ChaCha8Rng>) -> CResult<Tensor> {
        let e = self.encode_dropping(batch, rng)?;
        self.scorer.scores(&e)?.reshape((batch.questions, batch.candidates))
    }

    /// The loss of a batch (a scalar) and the scores, without dropout.
    pub fn loss(&self, batch: &Batch) -> CResult<(Tensor, Tensor)> {
        self.loss_dropping(batch, None)
    }

    /// The training loss of a batch and the scores, with the configured dropout drawn from `rng`.
    pub fn training_loss(&self, batch: &Batch, rng: &mut ChaCha8Rng) -> CResult<(Tensor, Tensor)> {
        self.loss_dropping(batch, Some(rng))
    }

    fn loss_dropping(&self, batch: &Batch, rng: Option<&mut ChaCha8Rng>) -> CResult<(Tensor, Tensor)> {
        let s = self.scores_dropping(batch, rng)?;
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
