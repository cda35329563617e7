//! Inference of a BERT encoder (the architecture of all-MiniLM-L6-v2) on stepwise's own kernels: the packed GEMM
//! of `stepwise-kernels` for every projection, its vectorised softmax, GELU (erf) and layer normalisation.
//!
//! Why not candle-transformers' `BertModel` (used before): it ran MiniLM well below onnxruntime's speed, its time
//! going to candle's matmul, libm's scalar `erff`/`expf`, per-op allocation, thread hand-offs and elementwise
//! passes over padded batches (the profile is in docs/performance.md). Here:
//! - a batch's texts are packed end to end, never padded: attention runs per text, the projections over all
//!   tokens at once (no work on padding, and no attention mask to apply);
//! - Q, K and V are one product with a concatenated weight, biases are written first and accumulated into;
//! - several batches run side by side, one per thread, each with single-threaded products (a product of this
//!   size loses a third of its speed when split over threads); a lone batch splits its products instead.
//!
//! Every output value is computed the same way whatever the thread count (the GEMM's and the row kernels'
//! guarantee), so embeddings are byte-identical for any `--threads`. They agree with candle-transformers' BERT
//! within 1e-5 (tested on random weights here, on the real model and texts in the acceptance tests).

use std::collections::HashMap;
use std::path::Path;

use stepwise_kernels::attention::attention_head;
use stepwise_kernels::gemm::{MatRef, gemm};
use stepwise_kernels::math::{gelu, layer_norm_row};

use crate::FeatureError;

/// What the loader reads from `config.json` (Hugging Face `BertConfig` names).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
}

fn default_hidden_act() -> String {
    "gelu".into()
}

fn default_eps() -> f64 {
    1e-12
}

/// A projection `y = x · w + b` with `w` stored `in × out`, row-major (PyTorch's `out × in` transposed at load).
struct Dense {
    w: Vec<f32>,
    b: Vec<f32>,
    rows: usize,
    cols: usize,
}

impl Dense {
    /// `y (n × cols) = x (n × rows) · w + b`.
    fn apply(&self, x: &[f32], n: usize, y: &mut Vec<f32>, parallel: bool) -> Result<(), FeatureError> {
        y.clear();
        y.reserve(n * self.cols);
        for _ in 0..n {
            y.extend_from_slice(&self.b);
        }
        gemm(MatRef::row_major(x, n, self.rows), MatRef::row_major(&self.w, self.rows, self.cols), y, true, parallel)
            .map_err(|e| FeatureError::Encoder(format!("BERT forward: {e}")))
    }
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Q, K and V side by side: `hidden × 3·hidden`.
    qkv: Dense,
    out: Dense,
    norm1: Norm,
    up: Dense,
    down: Dense,
    norm2: Norm,
}

/// A projection's weights as [`Bert::layer_weights`] gives them: `w` is `rows × cols` (in × out), row-major.
#[derive(Debug, Clone)]
pub struct DenseWeights {
    pub w: Vec<f32>,
    pub b: Vec<f32>,
    pub rows: usize,
    pub cols: usize,
}

/// One encoder layer's weights (post-LN: attention, add & norm, GELU feed-forward, add & norm).
#[derive(Debug, Clone)]
pub struct LayerWeights<'a> {
    pub query: DenseWeights,
    pub key: DenseWeights,
    pub value: DenseWeights,
    pub attention_out: DenseWeights,
    /// (gamma, beta) of the norm after attention.
    pub norm1: (&'a [f32], &'a [f32]),
    pub up: DenseWeights,
    pub down: DenseWeights,
    /// (gamma, beta) of the norm after the feed-forward block.
    pub norm2: (&'a [f32], &'a [f32]),
}

/// Removes a named tensor of the expected shape from the loaded file.
type Take<'a> = dyn FnMut(&str, &[usize]) -> Result<Vec<f32>, FeatureError> + 'a;

/// A loaded BERT encoder.
pub struct Bert {
    config: BertConfig,
    word: Vec<f32>,
    position: Vec<f32>,
    /// Token type 0's embedding (stepwise encodes single texts).
    token_type: Vec<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    eps: f32,
}

thread_local! {
    /// Work buffers reused across batches (fresh ones per batch cost 5% of the time in page faults).
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Rows of the feed-forward block computed at once: the `ROWS × intermediate` activations stay in L2.
const FFN_ROWS: usize = 256;

/// Per-thread work buffers of one forward pass.
#[derive(Default)]
struct Scratch {
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    proj: Vec<f32>,
    up: Vec<f32>,
    act: Vec<f32>,
    scores: Vec<f32>,
    head: Vec<f32>,
}

impl Bert {
    /// Load `model.safetensors` (names with or without a `bert.` prefix) for `config`; errors name the file and
    /// the tensor.
    pub fn load(weights: &Path, config: BertConfig) -> Result<Bert, FeatureError> {
        let bad =
            |msg: String| FeatureError::Core(stepwise_core::Error::bad_input(format!("{}: {msg}", weights.display())));
        if config.hidden_act != "gelu" {
            return Err(bad(format!("hidden_act {:?} is not supported (only \"gelu\")", config.hidden_act)));
        }
        let (h, heads) = (config.hidden_size, config.num_attention_heads);
        if h == 0 || heads == 0 || h % heads != 0 {
            return Err(bad(format!("hidden_size {h} is not a multiple of num_attention_heads {heads}")));
        }
        let mut map: HashMap<String, (Vec<usize>, Vec<f32>)> = super::load_f32_tensors(weights)?
            .into_iter()
            .map(|(k, v)| (k.strip_prefix("bert.").map(str::to_string).unwrap_or(k), v))
            .collect();
        let (types_dims, types) = map
            .remove("embeddings.token_type_embeddings.weight")
            .ok_or_else(|| bad("tensor `embeddings.token_type_embeddings.weight` missing".into()))?;
        if types_dims.len() != 2 || types_dims[0] == 0 || types_dims[1] != h {
            return Err(bad(format!(
                "tensor `embeddings.token_type_embeddings.weight`: expected shape [types, {h}], found {types_dims:?}"
            )));
        }
        let token_type = types[..h].to_vec();
        let mut take = |name: &str, shape: &[usize]| -> Result<Vec<f32>, FeatureError> {
            let (dims, v) = map.remove(name).ok_or_else(|| bad(format!("tensor `{name}` missing")))?;
            if dims != shape {
                return Err(bad(format!("tensor `{name}`: expected shape {shape:?}, found {dims:?}")));
            }
            Ok(v)
        };
        let norm = |take: &mut Take, p: &str| {
            Ok::<_, FeatureError>(Norm {
                gamma: take(&format!("{p}.weight"), &[h])?,
                beta: take(&format!("{p}.bias"), &[h])?,
            })
        };
        let word = take("embeddings.word_embeddings.weight", &[config.vocab_size, h])?;
        let position = take("embeddings.position_embeddings.weight", &[config.max_position_embeddings, h])?;
        let emb_norm = norm(&mut take, "embeddings.LayerNorm")?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let dense =
                |take: &mut Take, names: &[&str], fan_in: usize, fan_out: usize| -> Result<Dense, FeatureError> {
                    // PyTorch's `out × in` weights side by side as one `in × Σout` matrix.
                    let cols = fan_out * names.len();
                    let mut w = vec![0f32; fan_in * cols];
                    let mut b = Vec::with_capacity(cols);
                    for (j, name) in names.iter().enumerate() {
                        let wt = take(&format!("{p}.{name}.weight"), &[fan_out, fan_in])?;
                        for (o, row) in wt.chunks(fan_in).enumerate() {
                            for (r, &v) in row.iter().enumerate() {
                                w[r * cols + j * fan_out + o] = v;
                            }
                        }
                        b.extend(take(&format!("{p}.{name}.bias"), &[fan_out])?);
                    }
                    Ok(Dense { w, b, rows: fan_in, cols })
                };
            let qkv = dense(&mut take, &["attention.self.query", "attention.self.key", "attention.self.value"], h, h)?;
            let out = dense(&mut take, &["attention.output.dense"], h, h)?;
            let norm1 = norm(&mut take, &format!("{p}.attention.output.LayerNorm"))?;
            let up = dense(&mut take, &["intermediate.dense"], h, config.intermediate_size)?;
            let down = dense(&mut take, &["output.dense"], config.intermediate_size, h)?;
            let norm2 = norm(&mut take, &format!("{p}.output.LayerNorm"))?;
            layers.push(Layer { qkv, out, norm1, up, down, norm2 });
        }
        let eps = config.layer_norm_eps as f32;
        Ok(Bert { config, word, position, token_type, norm: emb_norm, layers, eps })
    }

    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// The weights of layer `i` (`None` past the last), each projection `in × out` row-major.
    pub fn layer_weights(&self, i: usize) -> Option<LayerWeights<'_>> {
        let l = self.layers.get(i)?;
        let h = self.config.hidden_size;
        // The fused Q|K|V matrix split back into its three `h × h` blocks.
        let block = |j: usize| (0..h).flat_map(|r| l.qkv.w[r * 3 * h + j * h..][..h].iter().copied()).collect();
        let dense = |d: &Dense| DenseWeights { w: d.w.clone(), b: d.b.clone(), rows: d.rows, cols: d.cols };
        let split = |j: usize| DenseWeights { w: block(j), b: l.qkv.b[j * h..(j + 1) * h].to_vec(), rows: h, cols: h };
        Some(LayerWeights {
            query: split(0),
            key: split(1),
            value: split(2),
            attention_out: dense(&l.out),
            norm1: (&l.norm1.gamma, &l.norm1.beta),
            up: dense(&l.up),
            down: dense(&l.down),
            norm2: (&l.norm2.gamma, &l.norm2.beta),
        })
    }

    /// Floating-point operations (a multiply-add is 2) of one text of `tokens` tokens: the projections and the
    /// two attention products, as benchmarks count them (softmax, GELU and normalisation not counted).
    pub fn flops_per_text(&self, tokens: usize) -> f64 {
        let (l, h, i) = (tokens as f64, self.config.hidden_size as f64, self.config.intermediate_size as f64);
        let per_layer = 2.0 * l * (4.0 * h * h + 2.0 * h * i) + 4.0 * l * l * h;
        self.config.num_hidden_layers as f64 * per_layer
    }

    /// Last hidden states of `seqs` packed end to end: `Σ len × hidden` values, text `i`'s tokens after those of
    /// texts `0..i`. `parallel` splits each product over rayon's pool (for a lone batch); the values do not depend
    /// on it.
    pub fn hidden_states(&self, seqs: &[&[u32]], parallel: bool) -> Result<Vec<f32>, FeatureError> {
        self.hidden_states_through(seqs, parallel, self.layers.len())
    }

    /// [`Self::hidden_states`] after the first `layers` layers only (0: the embeddings' output; the frozen part of
    /// an encoder whose upper layers are fine-tuned elsewhere).
    pub fn hidden_states_through(
        &self,
        seqs: &[&[u32]],
        parallel: bool,
        layers: usize,
    ) -> Result<Vec<f32>, FeatureError> {
        if layers > self.layers.len() {
            return Err(FeatureError::Encoder(format!(
                "BERT: {layers} layers asked for, the model has {}",
                self.layers.len()
            )));
        }
        let h = self.config.hidden_size;
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let mut x = Vec::with_capacity(total * h);
        for (i, s) in seqs.iter().enumerate() {
            if s.len() > self.config.max_position_embeddings {
                return Err(FeatureError::Encoder(format!(
                    "text {i} has {} tokens, the model's position embeddings end at {}",
                    s.len(),
                    self.config.max_position_embeddings
                )));
            }
            for (p, &id) in s.iter().enumerate() {
                let id = id as usize;
                if id >= self.config.vocab_size {
                    return Err(FeatureError::Encoder(format!(
                        "text {i}: token id {id} is outside the vocabulary ({} ids)",
                        self.config.vocab_size
                    )));
                }
                let (w, pos) = (&self.word[id * h..][..h], &self.position[p * h..][..h]);
                x.extend(w.iter().zip(pos).zip(&self.token_type).map(|((a, b), c)| a + b + c));
            }
        }
        for row in x.chunks_mut(h) {
            layer_norm_row(row, &self.norm.gamma, &self.norm.beta, self.eps);
        }
        SCRATCH.with(|cell| {
            // A nested call on this thread (rayon may run another batch here while a product waits) gets its own.
            let mut own = Scratch::default();
            let mut held = cell.try_borrow_mut();
            let s = match held.as_deref_mut() {
                Ok(s) => s,
                Err(_) => &mut own,
            };
            for layer in &self.layers[..layers] {
                self.layer(layer, seqs, &mut x, total, s, parallel)?;
            }
            Ok(x)
        })
    }

    fn layer(
        &self,
        l: &Layer,
        seqs: &[&[u32]],
        x: &mut [f32],
        total: usize,
        s: &mut Scratch,
        parallel: bool,
    ) -> Result<(), FeatureError> {
        let h = self.config.hidden_size;
        let heads = self.config.num_attention_heads;
        let dh = h / heads;
        let scale = 1.0 / (dh as f32).sqrt();
        let err = |e: stepwise_kernels::gemm::GemmError| FeatureError::Encoder(format!("BERT attention: {e}"));
        l.qkv.apply(x, total, &mut s.qkv, parallel)?;
        s.ctx.clear();
        s.ctx.resize(total * h, 0.0);
        let mut start = 0;
        for seq in seqs {
            let len = seq.len();
            if len == 0 {
                continue;
            }
            s.head.resize(len * dh, 0.0);
            let rows = &s.qkv[start * 3 * h..(start + len) * 3 * h];
            for hd in 0..heads {
                let (q, k, v) = (&rows[hd * dh..], &rows[h + hd * dh..], &rows[2 * h + hd * dh..]);
                attention_head(q, k, v, 3 * h, len, dh, scale, &mut s.head, &mut s.scores).map_err(err)?;
                for (t, src) in s.head.chunks(dh).enumerate() {
                    s.ctx[(start + t) * h + hd * dh..][..dh].copy_from_slice(src);
                }
            }
            start += len;
        }
        l.out.apply(&s.ctx, total, &mut s.proj, parallel)?;
        residual_norm(x, &s.proj, &l.norm1, self.eps, h);
        for rows in x.chunks_mut(FFN_ROWS * h) {
            let n = rows.len() / h;
            l.up.apply(rows, n, &mut s.up, parallel)?;
            s.act.resize(s.up.len(), 0.0);
            gelu(&s.up, &mut s.act);
            l.down.apply(&s.act, n, &mut s.proj, parallel)?;
            residual_norm(rows, &s.proj, &l.norm2, self.eps, h);
        }
        Ok(())
    }
}

/// `x = LayerNorm(y + x)` row by row.
fn residual_norm(x: &mut [f32], y: &[f32], norm: &Norm, eps: f32, h: usize) {
    for (xr, yr) in x.chunks_mut(h).zip(y.chunks(h)) {
        for (a, &b) in xr.iter_mut().zip(yr) {
            *a += b;
        }
        layer_norm_row(xr, &norm.gamma, &norm.beta, eps);
    }
}
