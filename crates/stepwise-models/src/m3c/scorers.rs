//! The scoring functions of the M3C framework, each behind [`Scorer`].
//!
//! Notation: `S` candidate rows (questions × candidates), context states `C` (`S × N × 2H`, the step-level
//! BiLSTM), query states `Q` (`S × L × 2H`), query summary `u` (`S × 2H`).

use candle_core::{D, DType, Device, Tensor};

use super::model::{Encoded, HtrnConfig, Scorer};
use crate::nn::{
    BiLstm, CResult, LayerNorm, Linear, Params, TransformerLayer, key_bias, masked_max, masked_mean, row_cosine,
    transformer_stack,
};

/// Impatient Reader (Hermann et al. 2015; RecipeQA §4.2): for each query position i, attention over the context
/// conditioned on the previous read r(i−1) and the query state y_q(i):
/// `m(i,t) = tanh(W_dm y_d(t) + W_rm r(i−1) + W_qm y_q(i))`, `s(i) = softmax_t(w_ms·m(i,t))`,
/// `r(i) = Σ_t s(i,t) y_d(t) + tanh(W_rr r(i−1))`; the joint embedding `g = tanh(W_rg r(L) + W_ug u)` is compared
/// by cosine similarity with the candidate's embedding: `W_c x_c` on the candidate's own item row, or `W_c u`
/// ([`super::model::CandidateEmbedding`]). Padded query positions leave r unchanged.
pub struct ImpatientReader {
    dm: Linear,
    rm: Linear,
    qm: Linear,
    ms: Linear,
    rr: Linear,
    rg: Linear,
    ug: Linear,
    candidate: Linear,
    /// Whether `candidate` reads the candidate's own item row (else the query summary).
    reads_item: bool,
}

impl ImpatientReader {
    /// `candidate_item_dim`: the width of the candidates' own item rows when the candidate embedding reads them.
    pub fn new(
        p: &mut Params,
        name: &str,
        state: usize,
        attention: usize,
        candidate_item_dim: Option<usize>,
    ) -> CResult<Self> {
        let l = |p: &mut Params, n: &str, i, o, b| Linear::new(p, &format!("{name}.{n}"), i, o, b);
        Ok(ImpatientReader {
            dm: l(p, "w_dm", state, attention, true)?,
            rm: l(p, "w_rm", state, attention, false)?,
            qm: l(p, "w_qm", state, attention, false)?,
            ms: l(p, "w_ms", attention, 1, false)?,
            rr: l(p, "w_rr", state, state, false)?,
            rg: l(p, "w_rg", state, state, false)?,
            ug: l(p, "w_ug", state, state, true)?,
            candidate: l(p, "w_candidate", candidate_item_dim.unwrap_or(state), state, true)?,
            reads_item: candidate_item_dim.is_some(),
        })
    }
}

impl Scorer for ImpatientReader {
    fn scores(&self, e: &Encoded) -> CResult<Tensor> {
        let (s, _n, state) = e.context.dims3()?;
        let (_, l, _) = e.query.dims3()?;
        let dm = self.dm.forward(&e.context)?; // S × N × A
        let ctx_bias = (e.context_mask.affine(1.0, -1.0)? * 1e9)?; // S × N
        let mut r = Tensor::zeros((s, state), DType::F32, &Device::Cpu)?;
        for i in 0..l {
            let qi = e.query.narrow(1, i, 1)?.squeeze(1)?;
            let cond = (self.rm.forward(&r)? + self.qm.forward(&qi)?)?.unsqueeze(1)?;
            let m = dm.broadcast_add(&cond)?.tanh()?;
            let logits = (self.ms.forward(&m)?.squeeze(2)? + &ctx_bias)?;
            let att = candle_nn::ops::softmax(&logits, D::Minus1)?.unsqueeze(1)?; // S × 1 × N
            let read = att.matmul(&e.context)?.squeeze(1)?;
            let r_new = (read + self.rr.forward(&r)?.tanh()?)?;
            let mi = e.query_mask.narrow(1, i, 1)?; // S × 1
            r = (&r + r_new.broadcast_sub(&r)?.broadcast_mul(&mi)?)?;
        }
        let g = (self.rg.forward(&r)? + self.ug.forward(&e.query_summary)?)?.tanh()?;
        let candidate = match (&e.candidate_items, self.reads_item) {
            (Some(items), true) => items,
            (None, true) => candle_core::bail!("the Impatient Reader compares candidate items the batch does not hold"),
            (_, false) => &e.query_summary,
        };
        row_cosine(&g, &self.candidate.forward(candidate)?)
    }
}

/// BiDAF (Seo et al. 2017) adapted to choices: similarity `α(c,q) = w·[c; q; c∘q]` between every context step
/// and query position; context-to-query attention `Ũ_t = Σ_j softmax_j(α_tj) q_j`; query-to-context attention
/// `h̃ = Σ_t softmax_t(max_j α_tj) c_t`; `G_t = [c_t; Ũ_t; c_t∘Ũ_t; c_t∘h̃]`; a modelling BiLSTM over G; its
/// masked mean and max over steps → a linear layer → the candidate's score.
pub struct Bidaf {
    w_c: Linear,
    w_q: Linear,
    w_cq: Tensor,
    modelling: BiLstm,
    out: Linear,
}

impl Bidaf {
    pub fn new(p: &mut Params, name: &str, hidden: usize) -> CResult<Self> {
        let state = 2 * hidden;
        let bound = 1.0 / ((3 * state) as f32).sqrt();
        Ok(Bidaf {
            w_c: Linear::new(p, &format!("{name}.sim_c"), state, 1, false)?,
            w_q: Linear::new(p, &format!("{name}.sim_q"), state, 1, false)?,
            w_cq: p.uniform(&format!("{name}.sim_cq"), &[state], bound)?,
            modelling: BiLstm::new(p, &format!("{name}.modelling"), 4 * state, hidden)?,
            // No bias: a constant added to every candidate cannot change the ranking (its gradient is zero).
            out: Linear::new(p, &format!("{name}.out"), 2 * state, 1, false)?,
        })
    }
}

impl Scorer for Bidaf {
    fn scores(&self, e: &Encoded) -> CResult<Tensor> {
        let (c, q) = (&e.context, &e.query);
        // α: S × N × L.
        let sc = self.w_c.forward(c)?; // S × N × 1
        let sq = self.w_q.forward(q)?.transpose(1, 2)?; // S × 1 × L
        let scq = c.broadcast_mul(&self.w_cq)?.matmul(&q.transpose(1, 2)?.contiguous()?)?;
        let alpha = scq.broadcast_add(&sc)?.broadcast_add(&sq)?;
        let q_bias = (e.query_mask.affine(1.0, -1.0)? * 1e9)?.unsqueeze(1)?; // S × 1 × L
        let alpha = alpha.broadcast_add(&q_bias)?;
        let a = candle_nn::ops::softmax(&alpha, D::Minus1)?;
        let u_tilde = a.matmul(q)?; // S × N × 2H
        let c_bias = (e.context_mask.affine(1.0, -1.0)? * 1e9)?;
        let b = candle_nn::ops::softmax(&(alpha.max(D::Minus1)? + c_bias)?, D::Minus1)?; // S × N
        let h_tilde = b.unsqueeze(1)?.matmul(c)?; // S × 1 × 2H
        let g = Tensor::cat(&[c, &u_tilde, &(c * &u_tilde)?, &c.broadcast_mul(&h_tilde)?], 2)?;
        let (m, _) = self.modelling.forward(&g, Some(&e.context_mask))?;
        let pooled = Tensor::cat(&[masked_mean(&m, &e.context_mask)?, masked_max(&m, &e.context_mask)?], 1)?;
        self.out.forward(&pooled)?.squeeze(1)
    }
}

/// HTRN (Meta-RecipeQA §3.4, appendices A and C): a transformer trained from scratch over
/// `[CLS, φ_C(c_1..c_N), SEP, φ_V(q_1..q_L)]` (projected encoder states, learned position and segment
/// embeddings, layer norm, post-LN layers); the CLS output → a linear layer → the candidate's score.
pub struct Htrn {
    proj_c: Linear,
    proj_q: Linear,
    cls: Tensor,
    sep: Tensor,
    positions: Tensor,
    segments: Tensor,
    norm: LayerNorm,
    layers: Vec<TransformerLayer>,
    out: Linear,
    dim: usize,
    max_positions: usize,
}

impl Htrn {
    pub fn new(p: &mut Params, name: &str, state: usize, cfg: &HtrnConfig) -> CResult<Self> {
        let d = cfg.dim;
        let layers = (0..cfg.layers)
            .map(|i| TransformerLayer::new(p, &format!("{name}.layer{i}"), d, cfg.heads, cfg.ff))
            .collect::<CResult<Vec<_>>>()?;
        Ok(Htrn {
            proj_c: Linear::new(p, &format!("{name}.proj_context"), state, d, true)?,
            proj_q: Linear::new(p, &format!("{name}.proj_query"), state, d, true)?,
            cls: p.normal(&format!("{name}.cls"), &[d], 0.02)?,
            sep: p.normal(&format!("{name}.sep"), &[d], 0.02)?,
            positions: p.normal(&format!("{name}.positions"), &[cfg.max_positions, d], 0.02)?,
            segments: p.normal(&format!("{name}.segments"), &[2, d], 0.02)?,
            norm: LayerNorm::new(p, &format!("{name}.norm"), d, 1e-12)?,
            layers,
            // No bias: a constant added to every candidate cannot change the ranking (its gradient is zero).
            out: Linear::new(p, &format!("{name}.out"), d, 1, false)?,
            dim: d,
            max_positions: cfg.max_positions,
        })
    }
}

impl Scorer for Htrn {
    fn scores(&self, e: &Encoded) -> CResult<Tensor> {
        let (s, n, _) = e.context.dims3()?;
        let (_, l, _) = e.query.dims3()?;
        let len = n + l + 2;
        if len > self.max_positions {
            candle_core::bail!(
                "HTRN input of {len} positions (context {n} + query {l} + 2) exceeds max_positions {}",
                self.max_positions
            );
        }
        let d = self.dim;
        let cls = self.cls.reshape((1, 1, d))?.broadcast_as((s, 1, d))?;
        let sep = self.sep.reshape((1, 1, d))?.broadcast_as((s, 1, d))?;
        let x = Tensor::cat(&[&cls, &self.proj_c.forward(&e.context)?, &sep, &self.proj_q.forward(&e.query)?], 1)?;
        let seg_ids: Vec<u32> = (0..len).map(|i| u32::from(i > n + 1)).collect();
        let seg = self.segments.index_select(&Tensor::from_vec(seg_ids, len, &Device::Cpu)?, 0)?;
        let pos = self.positions.narrow(0, 0, len)?;
        let x = x.broadcast_add(&(pos + seg)?.unsqueeze(0)?)?;
        let x = self.norm.forward(&x)?;
        let ones = Tensor::ones((s, 1), DType::F32, &Device::Cpu)?;
        let mask = Tensor::cat(&[&ones, &e.context_mask, &ones, &e.query_mask], 1)?;
        let x = transformer_stack(&self.layers, &x, Some(&key_bias(&mask)?))?;
        self.out.forward(&x.narrow(1, 0, 1)?.squeeze(1)?)?.squeeze(1)
    }
}
