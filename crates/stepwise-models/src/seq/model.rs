//! The multimodal step encoder and the order heads.
//!
//! Encoder (one transformer over the concatenated steps, as `scripts/bench/seq_torch.py`): per step a learned
//! [CLS] plus the mean of the step's projected rows, the text rows projected (`text_dim → dim`) and the image rows projected (`image_dim → dim`); plus a
//! position embedding (the row's index within its step), a step-index embedding (the step's index in the input)
//! and a token-type embedding (0 [CLS], 1 text, 2 image); layer norm; `layers` post-LN transformer layers with
//! full attention over every real row of every step. A step's representation is its [CLS] output. Text-only and
//! image-only variants are the same model without the other stream.
//!
//! Heads:
//! - pairwise relative order (BERSON's local module): `MLP([h_i, h_j, h_i∘h_j, h_i−h_j]) → logit(i before j)`;
//! - pointer network (BERSON's global module): one more transformer layer over the step representations, an
//!   LSTM decoder fed the previously placed step (teacher forcing in training), attention scores
//!   `vᵀ tanh(W₁ e_j + W₂ d_t)` over the steps not yet placed;
//! - pretraining: MLM (text rows → vocabulary ids), ISP and PISP (binary, from the mean [CLS]), SMRM (masked patch
//!   outputs against the in-batch original patches).

use candle_core::{D, DType, Device, IndexOp, Tensor};
use serde::{Deserialize, Serialize};
use stepwise_core::sequencing::Precedence;

use crate::item_features::FeatureKind;
use crate::nn::{CResult, LayerNorm, Linear, Lstm, Params, TransformerLayer, key_bias, masked_mean};

/// How an order is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecoderKind {
    /// BERSON: pointer network + pairwise head, trained jointly; beam search over the pointer's log-probabilities
    /// plus the mean pairwise log-probability that the chosen step precedes every step still unplaced.
    Berson,
    /// The pairwise head alone, decoded by topological sort (the existing pairwise baseline's decoder).
    Pairwise,
}

impl DecoderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecoderKind::Berson => "berson",
            DecoderKind::Pairwise => "pairwise",
        }
    }

    pub fn parse(s: &str) -> Option<DecoderKind> {
        [DecoderKind::Berson, DecoderKind::Pairwise].into_iter().find(|k| k.as_str() == s)
    }
}

/// How a trained model's scores become an order at prediction time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoding {
    /// The model's own decoder: BERSON's beam search of this width (1 = greedy); a pairwise model's topological
    /// sort (the width is then unused).
    Own { beam: usize },
    /// The pairwise head alone, by topological sort, whatever the decoder trained with it: for a BERSON model,
    /// the ablation that leaves its pointer network out.
    PairwiseHead,
}

/// Everything that defines a sequencing model's shape (saved as `config.json` beside the weights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeqConfig {
    /// Which streams the encoder reads.
    pub modality: FeatureKind,
    /// Width of a text row (0 when text is left out).
    pub text_dim: usize,
    /// Width of an image row (0 when images are left out).
    pub image_dim: usize,
    /// Transformer width, layers, heads and feed-forward width.
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub ff: usize,
    /// At most this many text rows per step (the paper: 60 tokens).
    pub max_tokens: usize,
    /// At most this many image rows per step.
    pub max_patches: usize,
    /// At most this many steps per sequence.
    pub max_steps: usize,
    /// MLM classes (0: no MLM head).
    pub vocab: usize,
    pub decoder: DecoderKind,
    /// The pretrained text encoder's upper layers, fine-tuned here on its frozen lower layers' outputs
    /// ([`super::text_tower`]); `None`: the text rows are fixed features. Left out of saved files when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_tower: Option<super::text_tower::TextTowerConfig>,
}

impl SeqConfig {
    /// A small default that trains in minutes on 2 cores: width 128, 2 layers, 4 heads.
    pub fn new(modality: FeatureKind, text_dim: usize, image_dim: usize) -> SeqConfig {
        let uses_text = modality != FeatureKind::Image;
        let uses_image = modality != FeatureKind::Text;
        SeqConfig {
            modality,
            text_dim: if uses_text { text_dim } else { 0 },
            image_dim: if uses_image { image_dim } else { 0 },
            dim: 128,
            layers: 2,
            heads: 4,
            ff: 512,
            max_tokens: 60,
            max_patches: 49,
            max_steps: 16,
            vocab: 0,
            decoder: DecoderKind::Berson,
            text_tower: None,
        }
    }

    pub fn uses_text(&self) -> bool {
        self.text_dim > 0
    }

    pub fn uses_image(&self) -> bool {
        self.image_dim > 0
    }

    /// Positions within a step: [CLS] + text rows + image rows.
    pub fn positions(&self) -> usize {
        1 + if self.uses_text() { self.max_tokens } else { 0 } + if self.uses_image() { self.max_patches } else { 0 }
    }
}

/// A padded batch of sequences: `B` sequences of at most `n` steps, `s` text rows and `p` image rows per step.
pub struct SeqBatch {
    pub b: usize,
    pub n: usize,
    pub s: usize,
    pub p: usize,
    /// `B × n × s × text_dim` and `B × n × s` (1 = a real row), when text is used.
    pub text: Option<(Tensor, Tensor)>,
    /// `B × n × p × image_dim` and `B × n × p`, when images are used.
    pub image: Option<(Tensor, Tensor)>,
    /// `B × n`: 1 = a real step.
    pub step_mask: Tensor,
    /// Steps of each sequence.
    pub lens: Vec<usize>,
    /// MLM: `B × n × s` 1 where a text row is replaced by the [MASK] vector.
    pub text_masked: Option<Tensor>,
}

impl SeqBatch {
    /// Pad `seqs` (each a list of steps) into tensors. Rows beyond the config's caps are dropped.
    pub fn new(seqs: &[&[super::inputs::StepInput]], cfg: &SeqConfig) -> Result<SeqBatch, String> {
        let b = seqs.len();
        if b == 0 {
            return Err("empty batch".into());
        }
        let n = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        if n > cfg.max_steps {
            return Err(format!("a sequence of {n} steps exceeds the model's {} steps", cfg.max_steps));
        }
        let rows = |m: Option<&crate::item_features::ItemMatrix>| m.map_or(0, |m| m.len());
        let s = if cfg.uses_text() {
            seqs.iter().flat_map(|q| q.iter().map(|st| rows(st.text.as_ref()))).max().unwrap_or(0).min(cfg.max_tokens)
        } else {
            0
        };
        let p = if cfg.uses_image() {
            seqs.iter().flat_map(|q| q.iter().map(|st| rows(st.image.as_ref()))).max().unwrap_or(0).min(cfg.max_patches)
        } else {
            0
        };
        let dev = &Device::Cpu;
        let fill = |width: usize,
                    slots: usize,
                    get: &dyn Fn(&super::inputs::StepInput) -> Option<&crate::item_features::ItemMatrix>|
         -> Result<(Tensor, Tensor), String> {
            let mut data = vec![0f32; b * n * slots * width];
            let mut mask = vec![0f32; b * n * slots];
            for (bi, q) in seqs.iter().enumerate() {
                for (k, st) in q.iter().enumerate() {
                    let Some(m) = get(st) else { continue };
                    if m.dim != width {
                        return Err(format!("a step has {}-d rows, the model expects {width}-d", m.dim));
                    }
                    for r in 0..m.len().min(slots) {
                        let at = (bi * n + k) * slots + r;
                        data[at * width..(at + 1) * width].copy_from_slice(m.row(r));
                        mask[at] = 1.0;
                    }
                }
            }
            let t = Tensor::from_vec(data, (b, n, slots, width), dev).map_err(|e| e.to_string())?;
            let m = Tensor::from_vec(mask, (b, n, slots), dev).map_err(|e| e.to_string())?;
            Ok((t, m))
        };
        let text = if cfg.uses_text() { Some(fill(cfg.text_dim, s, &|st| st.text.as_ref())?) } else { None };
        let image = if cfg.uses_image() { Some(fill(cfg.image_dim, p, &|st| st.image.as_ref())?) } else { None };
        let mut sm = vec![0f32; b * n];
        for (bi, q) in seqs.iter().enumerate() {
            for k in 0..q.len() {
                sm[bi * n + k] = 1.0;
            }
        }
        let step_mask = Tensor::from_vec(sm, (b, n), dev).map_err(|e| e.to_string())?;
        Ok(SeqBatch {
            b,
            n,
            s,
            p,
            text,
            image,
            step_mask,
            lens: seqs.iter().map(|q| q.len()).collect(),
            text_masked: None,
        })
    }
}

/// The encoder's outputs.
pub struct Encoded {
    /// `B × n × L × dim` (L = 1 + s + p): every row's output.
    pub rows: Tensor,
    /// `B × n × dim`: the [CLS] output of each step.
    pub steps: Tensor,
}

/// The sequencing model: encoder, order heads and pretraining heads.
pub struct SeqModel {
    pub config: SeqConfig,
    pub params: Params,
    /// The fine-tuned upper layers of the pretrained text encoder (empty without a text tower).
    text_tower: Vec<TransformerLayer>,
    text_proj: Option<Linear>,
    image_proj: Option<Linear>,
    cls: Tensor,
    mask_vec: Option<Tensor>,
    positions: Tensor,
    step_index: Tensor,
    types: Tensor,
    norm: LayerNorm,
    layers: Vec<TransformerLayer>,
    pair1: Linear,
    pair2: Linear,
    pointer: Option<Pointer>,
    mlm: Option<Linear>,
    isp: Option<Linear>,
    pisp: Option<Linear>,
}

struct Pointer {
    layer: TransformerLayer,
    start: Tensor,
    lstm: Lstm,
    w1: Linear,
    w2: Linear,
    v: Linear,
}

impl SeqModel {
    pub fn new(config: SeqConfig, seed: u64) -> CResult<SeqModel> {
        let mut p = Params::for_family(seed, "seq");
        let d = config.dim;
        let std = 0.02;
        let text_proj = config
            .uses_text()
            .then(|| Linear::new(&mut p, "encoder.text_proj", config.text_dim, d, true))
            .transpose()?;
        let image_proj = config
            .uses_image()
            .then(|| Linear::new(&mut p, "encoder.image_proj", config.image_dim, d, true))
            .transpose()?;
        let cls = p.normal("encoder.cls", &[d], std)?;
        let mask_vec = config.uses_text().then(|| p.normal("encoder.mask", &[d], std)).transpose()?;
        let positions = p.normal("encoder.positions", &[config.positions(), d], std)?;
        let step_index = p.normal("encoder.steps", &[config.max_steps, d], std)?;
        let types = p.normal("encoder.types", &[3, d], std)?;
        let norm = LayerNorm::new(&mut p, "encoder.norm", d, 1e-12)?;
        let layers = (0..config.layers)
            .map(|i| TransformerLayer::new(&mut p, &format!("encoder.layer{i}"), d, config.heads, config.ff))
            .collect::<CResult<Vec<_>>>()?;
        let pair1 = Linear::new(&mut p, "pairwise.fc1", 4 * d, d, true)?;
        let pair2 = Linear::new(&mut p, "pairwise.fc2", d, 1, true)?;
        let pointer = match config.decoder {
            DecoderKind::Berson => Some(Pointer {
                layer: TransformerLayer::new(&mut p, "pointer.layer", d, config.heads, config.ff)?,
                start: p.normal("pointer.start", &[d], std)?,
                lstm: Lstm::new(&mut p, "pointer.lstm", d, d)?,
                w1: Linear::new(&mut p, "pointer.w1", d, d, false)?,
                w2: Linear::new(&mut p, "pointer.w2", d, d, false)?,
                v: Linear::new(&mut p, "pointer.v", d, 1, false)?,
            }),
            DecoderKind::Pairwise => None,
        };
        let text_tower = match &config.text_tower {
            Some(t) if config.uses_text() => {
                if t.hidden != config.text_dim {
                    candle_core::bail!("text tower of width {} on {}-d text rows", t.hidden, config.text_dim);
                }
                t.layers(&mut p)?
            }
            _ => Vec::new(),
        };
        Ok(SeqModel {
            text_tower,
            text_proj,
            image_proj,
            cls,
            mask_vec,
            positions,
            step_index,
            types,
            norm,
            layers,
            pair1,
            pair2,
            pointer,
            mlm: None,
            isp: None,
            pisp: None,
            params: p,
            config,
        })
    }

    /// Add the pretraining heads (MLM needs `config.vocab > 0`; ISP and PISP need images). Their parameters are
    /// not part of the fine-tuned model's weights.
    pub fn with_pretraining_heads(mut self) -> CResult<SeqModel> {
        let d = self.config.dim;
        if self.config.vocab > 0 && self.config.uses_text() {
            self.mlm = Some(Linear::new(&mut self.params, "pretrain.mlm", d, self.config.vocab, true)?);
        }
        if self.config.uses_image() {
            self.isp = Some(Linear::new(&mut self.params, "pretrain.isp", d, 1, true)?);
            self.pisp = Some(Linear::new(&mut self.params, "pretrain.pisp", d, 1, true)?);
        }
        Ok(self)
    }

    pub fn parameter_count(&self) -> usize {
        self.params.count()
    }

    /// Run the encoder over every real row of every step.
    pub fn encode(&self, batch: &SeqBatch) -> CResult<Encoded> {
        self.encode_dropping(batch, None)
    }

    /// [`Self::encode`], with dropout (rate, draws) on the encoder's input rows and on its outputs when given
    /// (fine-tuning).
    pub fn encode_dropping(
        &self,
        batch: &SeqBatch,
        mut dropping: Option<(f64, &mut rand_chacha::ChaCha8Rng)>,
    ) -> CResult<Encoded> {
        let mut drop = |x: &Tensor| match dropping.as_mut() {
            Some((rate, rng)) => crate::nn::dropout(x, *rate, Some(&mut **rng)),
            None => Ok(x.clone()),
        };
        let (b, n, d) = (batch.b, batch.n, self.config.dim);
        let dev = &Device::Cpu;
        let step_mask = batch.step_mask.flatten_all()?.to_vec1::<f32>()?;
        // A stream's projected rows and its rows' 0/1 mask (the step's mask applied), or an empty stream.
        let stream =
            |proj: &Option<Linear>, input: &Option<(Tensor, Tensor)>, rows: usize| -> CResult<(Tensor, Vec<f32>)> {
                match (proj, input) {
                    (Some(proj), Some((t, m))) => {
                        let mut m = m.flatten_all()?.to_vec1::<f32>()?;
                        m.iter_mut().enumerate().for_each(|(i, v)| *v *= step_mask[i / rows.max(1)]);
                        Ok((proj.forward(t)?, m))
                    }
                    _ => Ok((Tensor::zeros((b, n, 0, d), DType::F32, dev)?, Vec::new())),
                }
            };
        let tuned_text = match (&batch.text, self.text_tower.is_empty()) {
            (Some((t, m)), false) => Some((super::text_tower::forward(&self.text_tower, t, m)?, m.clone())),
            _ => None,
        };
        let text_input = if tuned_text.is_some() { &tuned_text } else { &batch.text };
        let (text, text_mask) = stream(&self.text_proj, text_input, batch.s)?;
        let (image, image_mask) = stream(&self.image_proj, &batch.image, batch.p)?;
        let (s, p) = (text.dim(2)?, image.dim(2)?);
        // The [CLS] input of a step also carries the mean of its rows' projections, so a step's representation
        // starts from its own content (with a learned [CLS] alone, every step's [CLS] first sees the same
        // mixture of all rows and training sits on a plateau for many epochs); attention then adds context.
        let mut weights = (text_mask.clone(), image_mask.clone());
        for step in 0..b * n {
            let count: f32 =
                text_mask[step * s..(step + 1) * s].iter().chain(&image_mask[step * p..(step + 1) * p]).sum();
            let count = count.max(1.0);
            weights.0[step * s..(step + 1) * s].iter_mut().for_each(|w| *w /= count);
            weights.1[step * p..(step + 1) * p].iter_mut().for_each(|w| *w /= count);
        }
        let text_masked = match (&batch.text_masked, &self.mask_vec) {
            (Some(tm), Some(_)) if s > 0 => tm.flatten_all()?.to_vec1::<f32>()?.into_iter().map(|v| v != 0.0).collect(),
            _ => Vec::new(),
        };
        let mask_vec = match &self.mask_vec {
            Some(mv) => mv.clone(),
            None => Tensor::zeros(d, DType::F32, dev)?,
        };
        let tables = Tensor::cat(
            &[
                self.cls.clone(),
                self.positions.flatten_all()?,
                self.types.flatten_all()?,
                self.step_index.flatten_all()?,
                mask_vec,
            ],
            0,
        )?;
        let layout = super::assemble::Tables { positions: self.positions.dim(0)?, steps: self.step_index.dim(0)? };
        let rows = super::assemble::RowWeights { text: weights.0, image: weights.1, text_masked };
        let x = super::assemble::assemble(&text, &image, &tables, layout, rows)?;
        let l = 1 + s + p;
        let mut mask = Vec::with_capacity(b * n * l);
        for step in 0..b * n {
            mask.push(step_mask[step]);
            mask.extend_from_slice(&text_mask[step * s..(step + 1) * s]);
            mask.extend_from_slice(&image_mask[step * p..(step + 1) * p]);
        }
        let mask = Tensor::from_vec(mask, (b, n * l), dev)?;
        let bias = key_bias(&mask)?;
        let x = drop(&self.norm.forward(&x)?)?;
        let h = drop(&crate::nn::transformer_stack(&self.layers, &x, Some(&bias))?)?; // B × n·l × D
        // Each step's [CLS] row by its index: its backward pass makes one full-size gradient (zeros, then the rows
        // added) where a narrowed view of `rows` made three; the reshape for `rows` stays out of the fine-tuning
        // graph, which does not read it.
        let cls_rows = Tensor::from_vec((0..n).map(|k| (k * l) as u32).collect::<Vec<_>>(), n, dev)?;
        let steps = h.index_select(&cls_rows, 1)?;
        let rows = h.reshape((b, n, l, d))?;
        Ok(Encoded { rows, steps })
    }

    /// Pairwise logits `B × n × n`: entry (i, j) = logit that step i comes before step j.
    pub fn pair_logits(&self, h: &Tensor) -> CResult<Tensor> {
        let (b, n, d) = h.dims3()?;
        let hi = h.unsqueeze(2)?.broadcast_as((b, n, n, d))?;
        let hj = h.unsqueeze(1)?.broadcast_as((b, n, n, d))?;
        let f = Tensor::cat(&[&hi, &hj, &(&hi * &hj)?, &(&hi - &hj)?], 3)?;
        self.pair2.forward(&self.pair1.forward(&f)?.relu()?)?.squeeze(3)
    }

    /// The pointer network's step encodings `e` (`B × n × dim`).
    fn pointer_steps(&self, ptr: &Pointer, h: &Tensor, step_mask: &Tensor) -> CResult<Tensor> {
        ptr.layer.forward(h, Some(&key_bias(step_mask)?))
    }

    /// The fine-tuning loss on `batch` with every sequence's valid orders (item indices in procedural order;
    /// the first is the authored one): pairwise BCE over every ordered pair of real steps against the share of
    /// references that put i before j (1 or 0 when they agree, as the pairwise baseline's labels), plus the
    /// pointer's cross-entropy (BERSON). The pointer is teacher-forced along the first reference and at each
    /// position rewarded for the probability it puts on any step that may come next after the same steps (with
    /// one reference: the authored next step, BERSON's loss); see [`OrderLabels::valid_next_steps`].
    pub fn order_loss(&self, batch: &SeqBatch, labels: &[OrderLabels<'_>]) -> CResult<Tensor> {
        self.order_loss_dropping(batch, labels, None)
    }

    /// [`Self::order_loss`] with the encoder's dropout when given ([`Self::encode_dropping`]).
    pub fn order_loss_dropping(
        &self,
        batch: &SeqBatch,
        labels: &[OrderLabels<'_>],
        dropping: Option<(f64, &mut rand_chacha::ChaCha8Rng)>,
    ) -> CResult<Tensor> {
        let enc = self.encode_dropping(batch, dropping)?;
        self.order_loss_from(&enc.steps, batch, labels)
    }

    fn order_loss_from(&self, h: &Tensor, batch: &SeqBatch, labels: &[OrderLabels<'_>]) -> CResult<Tensor> {
        let (b, n) = (batch.b, batch.n);
        let dev = &Device::Cpu;
        let mut target = vec![0f32; b * n * n];
        let mut weight = vec![0f32; b * n * n];
        for (bi, l) in labels.iter().enumerate() {
            let len = l.references.first().map_or(0, Vec::len);
            let shares = crate::pairwise::pairs::precedence_shares(l.references, len);
            for i in 0..len {
                for j in 0..len {
                    if i != j {
                        weight[(bi * n + i) * n + j] = 1.0;
                        target[(bi * n + i) * n + j] = shares[i * len + j];
                    }
                }
            }
        }
        let pairs: f32 = weight.iter().sum();
        let z = self.pair_logits(h)?;
        let y = Tensor::from_vec(target, (b, n, n), dev)?;
        let w = Tensor::from_vec(weight, (b, n, n), dev)?;
        let bce = ((softplus(&z.neg()?)? * &y)? + (softplus(&z)? * y.affine(-1.0, 1.0)?)?)?;
        let mut loss = ((bce * w)?.sum_all()? / pairs.max(1.0) as f64)?;
        if let Some(ptr) = &self.pointer {
            loss = (loss + self.pointer_loss(ptr, h, batch, labels)?)?;
        }
        Ok(loss)
    }

    fn pointer_loss(&self, ptr: &Pointer, h: &Tensor, batch: &SeqBatch, labels: &[OrderLabels<'_>]) -> CResult<Tensor> {
        let (b, n, d) = (batch.b, batch.n, self.config.dim);
        let dev = &Device::Cpu;
        let e = self.pointer_steps(ptr, h, &batch.step_mask)?;
        // Teacher forcing: the decoder's input at t is the step placed at t − 1 (the start vector at t = 0).
        let mut idx = Vec::with_capacity(b * n);
        let mut mask = vec![-1e9f32; b * n * n];
        let mut valid = vec![-1e9f32; b * n * n];
        let mut tw = vec![0f32; b * n];
        for (bi, l) in labels.iter().enumerate() {
            let order = l.references.first().map_or(&[][..], Vec::as_slice);
            let next = l.valid_next_steps();
            for t in 0..n {
                let prev = if t > 0 && t <= order.len() { order[t - 1] } else { 0 };
                idx.push((bi * n + prev) as u32);
                if t < order.len() {
                    // The last position has one candidate: no information, no loss (as the reference).
                    tw[bi * n + t] = if t + 1 < order.len() { 1.0 } else { 0.0 };
                    for &j in &order[t..] {
                        mask[(bi * n + t) * n + j] = 0.0;
                    }
                    for &j in &next[t] {
                        valid[(bi * n + t) * n + j] = 0.0;
                    }
                } else {
                    mask[(bi * n + t) * n] = 0.0;
                    valid[(bi * n + t) * n] = 0.0;
                }
            }
        }
        let flat = e.reshape((b * n, d))?;
        let prev = flat.index_select(&Tensor::from_vec(idx, b * n, dev)?, 0)?.reshape((b, n, d))?;
        let start = ptr.start.reshape((1, 1, d))?.broadcast_as((b, 1, d))?.contiguous()?;
        // Position 0 takes the start vector, the others the previous step.
        let inputs = if n > 1 { Tensor::cat(&[&start, &prev.narrow(1, 1, n - 1)?], 1)? } else { start };
        let h0 = masked_mean(&e, &batch.step_mask)?;
        let c0 = h0.zeros_like()?;
        let dec = ptr.lstm.forward(&inputs, &h0, &c0)?; // B × n × D
        let scores = pointer_scores(ptr, &e, &dec)?; // B × n(t) × n(j)
        let scores = (scores + Tensor::from_vec(mask, (b, n, n), dev)?)?;
        let logp = candle_nn::ops::log_softmax(&scores, D::Minus1)?;
        // log Σ_{valid j} p_j, shifted by the (constant) largest valid log-probability.
        let on_valid = (logp + Tensor::from_vec(valid, (b, n, n), dev)?)?;
        let top = on_valid.max_keepdim(D::Minus1)?.detach();
        let picked = (on_valid.broadcast_sub(&top)?.exp()?.sum_keepdim(D::Minus1)?.log()? + top)?.reshape(b * n)?;
        let w = Tensor::from_vec(tw.clone(), b * n, dev)?;
        let count: f32 = tw.iter().sum();
        (picked * w)?.sum_all()?.neg()? / count.max(1.0) as f64
    }

    /// Decode an order for each sequence of `batch` (item indices in predicted procedural order): BERSON's beam
    /// search or the pairwise head's topological sort, as `decoding` says.
    pub fn decode(&self, batch: &SeqBatch, decoding: Decoding) -> CResult<Vec<Vec<usize>>> {
        let enc = self.encode(batch)?;
        let pair = candle_nn::ops::sigmoid(&self.pair_logits(&enc.steps)?)?.to_vec3::<f32>()?;
        let (Some(ptr), Decoding::Own { beam }) = (&self.pointer, decoding) else {
            return Ok((0..batch.b)
                .map(|bi| {
                    let n = batch.lens[bi];
                    let p: Vec<Vec<f64>> = (0..n).map(|i| (0..n).map(|j| pair[bi][i][j] as f64).collect()).collect();
                    crate::topo_decode::decode(&p).0
                })
                .collect());
        };
        let e = self.pointer_steps(ptr, &enc.steps, &batch.step_mask)?;
        let h0 = masked_mean(&e, &batch.step_mask)?;
        let w1e = ptr.w1.forward(&e)?; // B × n × D
        let mut out = Vec::with_capacity(batch.b);
        for bi in 0..batch.b {
            let n = batch.lens[bi];
            let q = crate::topo_decode::symmetrize(
                &(0..n).map(|i| (0..n).map(|j| pair[bi][i][j] as f64).collect()).collect::<Vec<_>>(),
            );
            out.push(beam_search(ptr, &e.i(bi)?.narrow(0, 0, n)?, &w1e.i(bi)?.narrow(0, 0, n)?, &h0.i(bi)?, &q, beam)?);
        }
        Ok(out)
    }

    /// MLM loss: cross-entropy of the vocabulary ids at the masked text rows (`targets`: flat row index into
    /// `B·n·s` and id).
    pub fn mlm_loss(&self, enc: &Encoded, batch: &SeqBatch, targets: &[(usize, i64)]) -> CResult<Option<Tensor>> {
        let Some(head) = &self.mlm else { return Ok(None) };
        if targets.is_empty() || batch.s == 0 {
            return Ok(None);
        }
        let (b, n, d) = (batch.b, batch.n, self.config.dim);
        let text_rows = enc.rows.narrow(2, 1, batch.s)?.contiguous()?.reshape((b * n * batch.s, d))?;
        let idx =
            Tensor::from_vec(targets.iter().map(|&(r, _)| r as u32).collect::<Vec<_>>(), targets.len(), &Device::Cpu)?;
        let logits = head.forward(&text_rows.index_select(&idx, 0)?)?;
        let ids: Vec<u32> = targets.iter().map(|&(_, id)| id.clamp(0, self.config.vocab as i64 - 1) as u32).collect();
        Ok(Some(crate::ops::cross_entropy(&logits, &ids)?))
    }

    /// A binary head (ISP or PISP) on the mean [CLS] output: BCE against `labels` (1 = swapped).
    pub fn swap_loss(&self, enc: &Encoded, batch: &SeqBatch, labels: &[bool], pisp: bool) -> CResult<Option<Tensor>> {
        let head = if pisp { &self.pisp } else { &self.isp };
        let Some(head) = head else { return Ok(None) };
        let pooled = masked_mean(&enc.steps, &batch.step_mask)?;
        let z = head.forward(&pooled)?.squeeze(1)?;
        let y = Tensor::from_vec(
            labels.iter().map(|&l| if l { 1f32 } else { 0.0 }).collect::<Vec<_>>(),
            labels.len(),
            &Device::Cpu,
        )?;
        let bce = ((softplus(&z.neg()?)? * &y)? + (softplus(&z)? * y.affine(-1.0, 1.0)?)?)?;
        Ok(Some(bce.mean_all()?))
    }

    /// SMRM loss: each masked patch output (`masked`: flat row index into `B·n·p`) classifies which of the
    /// in-batch original patches (their projected features, `originals`: `K × image_dim`) it was; `perms[k]` is
    /// the shuffled candidate order of position k (the label is where the true candidate landed).
    pub fn smrm_loss(
        &self,
        enc: &Encoded,
        batch: &SeqBatch,
        masked: &[usize],
        originals: &Tensor,
        perms: &[Vec<usize>],
    ) -> CResult<Option<Tensor>> {
        let Some(proj) = &self.image_proj else { return Ok(None) };
        if masked.is_empty() || batch.p == 0 {
            return Ok(None);
        }
        let (b, n, d) = (batch.b, batch.n, self.config.dim);
        let off = 1 + batch.s;
        let img_rows = enc.rows.narrow(2, off, batch.p)?.contiguous()?.reshape((b * n * batch.p, d))?;
        let idx = Tensor::from_vec(masked.iter().map(|&r| r as u32).collect::<Vec<_>>(), masked.len(), &Device::Cpu)?;
        let out = img_rows.index_select(&idx, 0)?; // K × D
        let cand = proj.forward(originals)?; // K × D
        let k = masked.len();
        let logits = out.matmul(&cand.t()?)?; // K × K, column c = candidate c
        // Reorder each row's columns by its permutation: column m of row r is candidate perms[r][m].
        let flat: Vec<u32> = perms.iter().flat_map(|p| p.iter().map(|&c| c as u32)).collect();
        let shuffled = logits.gather(&Tensor::from_vec(flat, (k, k), &Device::Cpu)?, 1)?;
        let labels: Vec<u32> =
            perms.iter().enumerate().map(|(r, p)| p.iter().position(|&c| c == r).unwrap_or(0) as u32).collect();
        Ok(Some(crate::ops::cross_entropy(&shuffled, &labels)?))
    }
}

/// What one sequence's order loss learns from.
#[derive(Clone, Copy, Debug)]
pub struct OrderLabels<'a> {
    /// Valid orders (item indices in procedural order); the first is teacher-forced.
    pub references: &'a [Vec<usize>],
    /// When `references` is a sample of the valid orders: the precedence pairs `[a, b]` (a before b) whose
    /// satisfying orders are exactly the valid ones (empty: every order is valid). `None` when `references`
    /// lists them all, or only the authored order is trained on.
    pub constraints: Option<&'a [[usize; 2]]>,
}

impl<'a> OrderLabels<'a> {
    /// Labels from `references` alone.
    pub fn of_references(references: &'a [Vec<usize>]) -> OrderLabels<'a> {
        OrderLabels { references, constraints: None }
    }

    /// For each position t of the first reference, the steps that may come next after its first t steps
    /// (sorted; the first reference's own step always among them). With constraints: every unplaced step whose
    /// predecessors are all placed, which counts the valid orders a sample left out. Without: the steps some
    /// reference places at t after the same set of steps.
    pub fn valid_next_steps(&self) -> Vec<Vec<usize>> {
        let Some(first) = self.references.first() else { return Vec::new() };
        let n = first.len();
        let mut placed = vec![false; n];
        let mut out = Vec::with_capacity(n);
        let precedence = self.constraints.map(|pairs| Precedence::new(n, pairs));
        for t in 0..n {
            let mut next: Vec<usize> = if let Some(precedence) = &precedence {
                precedence.placeable(&placed)
            } else {
                self.references.iter().filter(|r| r[..t].iter().all(|&i| placed[i])).map(|r| r[t]).collect()
            };
            if !next.contains(&first[t]) {
                // Labels that contradict their own first reference: keep the teacher-forced step trainable.
                next.push(first[t]);
            }
            next.sort_unstable();
            next.dedup();
            out.push(next);
            placed[first[t]] = true;
        }
        out
    }
}

/// `log(1 + exp(x))`, stable for large |x|, with gradients.
fn softplus(x: &Tensor) -> CResult<Tensor> {
    x.relu()? + x.abs()?.neg()?.exp()?.affine(1.0, 1.0)?.log()?
}

/// `vᵀ tanh(W₁ e_j + W₂ d_t)` for every t and j: `B × n × n` from `e` (`B × n × D`) and `dec` (`B × n × D`).
fn pointer_scores(ptr: &Pointer, e: &Tensor, dec: &Tensor) -> CResult<Tensor> {
    let a = ptr.w1.forward(e)?.unsqueeze(1)?; // B × 1 × n × D
    let c = ptr.w2.forward(dec)?.unsqueeze(2)?; // B × n × 1 × D
    ptr.v.forward(&a.broadcast_add(&c)?.tanh()?)?.squeeze(3)
}

/// Beam search for one sequence: `e`, `w1e` (`n × D`), `h0` (`D`), symmetrised pairwise probabilities `q`.
/// A partial order's score is the sum over its placements of the pointer's log-probability plus the mean
/// log-probability (pairwise head) that the placed step precedes each step still unplaced. Ties keep the
/// lexicographically smaller order, so decoding is deterministic.
fn beam_search(
    ptr: &Pointer,
    e: &Tensor,
    w1e: &Tensor,
    h0: &Tensor,
    q: &[Vec<f64>],
    beam: usize,
) -> CResult<Vec<usize>> {
    let n = q.len();
    let d = h0.dim(0)?;
    struct Hyp {
        order: Vec<usize>,
        score: f64,
        h: Tensor,
        c: Tensor,
        input: Tensor,
    }
    let h0 = h0.reshape((1, d))?;
    let mut beams =
        vec![Hyp { order: Vec::new(), score: 0.0, c: h0.zeros_like()?, h: h0, input: ptr.start.reshape((1, d))? }];
    for _ in 0..n {
        let mut next: Vec<Hyp> = Vec::new();
        for hyp in &beams {
            let (h, c) = ptr.lstm.step(&hyp.input, &hyp.h, &hyp.c)?;
            let s = ptr.v.forward(&w1e.broadcast_add(&ptr.w2.forward(&h)?)?.tanh()?)?.squeeze(1)?.to_vec1::<f32>()?;
            let free: Vec<usize> = (0..n).filter(|j| !hyp.order.contains(j)).collect();
            let max = free.iter().map(|&j| s[j] as f64).fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = free.iter().map(|&j| (s[j] as f64 - max).exp()).sum();
            for &j in &free {
                let logp = s[j] as f64 - max - z.ln();
                let rest: Vec<usize> = free.iter().copied().filter(|&k| k != j).collect();
                let pair = if rest.is_empty() {
                    0.0
                } else {
                    rest.iter().map(|&k| q[j][k].max(1e-9).ln()).sum::<f64>() / rest.len() as f64
                };
                let mut order = hyp.order.clone();
                order.push(j);
                next.push(Hyp {
                    order,
                    score: hyp.score + logp + pair,
                    h: h.clone(),
                    c: c.clone(),
                    input: e.narrow(0, j, 1)?,
                });
            }
        }
        next.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.order.cmp(&b.order)));
        next.truncate(beam.max(1));
        beams = next;
    }
    Ok(beams.into_iter().next().map(|h| h.order).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where each item stands in `order`.
    fn positions_of(order: &[usize]) -> Vec<usize> {
        let mut pos = vec![0usize; order.len()];
        for (t, &i) in order.iter().enumerate() {
            pos[i] = t;
        }
        pos
    }

    /// The steps some reference places at t after exactly the first reference's first t steps, by brute force
    /// over sets.
    fn brute_force(references: &[Vec<usize>]) -> Vec<Vec<usize>> {
        let first = &references[0];
        (0..first.len())
            .map(|t| {
                let mut placed: Vec<usize> = first[..t].to_vec();
                placed.sort_unstable();
                let mut next: Vec<usize> = references
                    .iter()
                    .filter(|r| {
                        let mut p = r[..t].to_vec();
                        p.sort_unstable();
                        p == placed
                    })
                    .map(|r| r[t])
                    .collect();
                next.sort_unstable();
                next.dedup();
                next
            })
            .collect()
    }

    #[test]
    fn valid_next_steps_follow_every_reference_that_agrees_so_far() {
        // Steps 0 and 1 are free, then 2; then 3 and 4 free.
        let refs = vec![vec![0, 1, 2, 3, 4], vec![1, 0, 2, 4, 3], vec![0, 1, 2, 4, 3], vec![1, 0, 2, 3, 4]];
        assert_eq!(
            OrderLabels::of_references(&refs).valid_next_steps(),
            vec![vec![0, 1], vec![1], vec![2], vec![3, 4], vec![4]]
        );
        // One reference: the authored next step only.
        assert_eq!(
            OrderLabels::of_references(&refs[..1]).valid_next_steps(),
            vec![vec![0], vec![1], vec![2], vec![3], vec![4]]
        );
        // Every linear extension of a small DAG (0 before 2, 1 before 3), in a scrambled order.
        let mut all = Vec::new();
        let perms = |n: usize| -> Vec<Vec<usize>> {
            let mut out = vec![vec![]];
            for _ in 0..n {
                out = out
                    .into_iter()
                    .flat_map(|p: Vec<usize>| {
                        let free: Vec<usize> = (0..n).filter(|i| !p.contains(i)).collect();
                        free.into_iter().map(move |i| [p.clone(), vec![i]].concat())
                    })
                    .collect();
            }
            out
        };
        for p in perms(4) {
            let pos = positions_of(&p);
            if pos[0] < pos[2] && pos[1] < pos[3] {
                all.push(p);
            }
        }
        all.rotate_left(3);
        assert_eq!(OrderLabels::of_references(&all).valid_next_steps(), brute_force(&all));
        for _ in 0..all.len() {
            all.rotate_left(1);
            assert_eq!(
                OrderLabels::of_references(&all).valid_next_steps(),
                brute_force(&all),
                "first reference {:?}",
                all[0]
            );
        }
        // A sample of one order with the DAG's constraints gives every valid next step, as the complete list.
        let constraints = [[0, 2], [1, 3]];
        for _ in 0..all.len() {
            all.rotate_left(1);
            let sample = OrderLabels { references: &all[..1], constraints: Some(&constraints) };
            assert_eq!(sample.valid_next_steps(), brute_force(&all), "first reference {:?}", all[0]);
        }
        // No constraints on a sample: every unplaced step may come next.
        let free = OrderLabels { references: &all[..1], constraints: Some(&[]) };
        let unplaced = |t: usize| -> Vec<usize> {
            let mut rest = all[0][t..].to_vec();
            rest.sort_unstable();
            rest
        };
        assert_eq!(free.valid_next_steps(), (0..4).map(unplaced).collect::<Vec<_>>());
    }
}
