//! Fine-tuning the upper layers of the pretrained text encoder (all-MiniLM-L6-v2) inside the sequencer, as the
//! sequencing paper fine-tunes RoBERTa end to end.
//!
//! The encoder is split in two: its lower `frozen_layers` run once per step on the inference kernels
//! ([`stepwise_features::pretrained::minilm::MiniLm::frozen_states`]: `[CLS] tokens [SEP]`, the step's first
//! WordPiece tokens as the token store keeps them), and their outputs become the step's text rows
//! ([`frozen_inputs`]); the upper `tuned_layers` are [`TransformerLayer`]s of the sequencing model, initialised
//! from the pretrained weights ([`init_from`]) and trained with everything else. They run per step (attention
//! within a step's rows, as the encoder reads one text at a time), and their outputs enter the sequencer where
//! frozen token vectors did. Freezing the lower layers is what makes this affordable on CPU: their activations are
//! computed once, not in every epoch, and no gradient flows through them.
//!
//! Departures from fine-tuning the whole encoder, named: the lower layers stay frozen; a step's text is cut to
//! the tokens the store kept (`--max-tokens` minus the two special tokens) before the encoder reads it, where the
//! pooled MiniLM vector reads up to 256; no dropout inside the encoder.

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};
use stepwise_features::pretrained::bert::Bert;
use stepwise_features::pretrained::minilm::MiniLm;

use super::inputs::SeqInput;
use crate::item_features::ItemMatrix;
use crate::nn::{CResult, Params, TransformerLayer};

/// The fine-tuned part of a pretrained text encoder (saved in the model's `config.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextTowerConfig {
    /// Registry name of the pretrained encoder (`minilm`) and its version (code and weights hash): prediction
    /// must run the same frozen layers.
    pub encoder: String,
    pub version: String,
    /// Layers run frozen, once per step; the layers after them are fine-tuned.
    pub frozen_layers: usize,
    pub tuned_layers: usize,
    /// Width, heads and feed-forward width of the encoder's layers.
    pub hidden: usize,
    pub heads: usize,
    pub ff: usize,
}

impl TextTowerConfig {
    /// The upper `tuned` layers of `encoder` (named `name`, at `version`) fine-tuned, the rest frozen.
    pub fn of(bert: &Bert, name: &str, version: &str, tuned: usize) -> Result<TextTowerConfig, String> {
        let c = bert.config();
        if tuned == 0 || tuned > c.num_hidden_layers {
            return Err(format!("{tuned} layers to fine-tune: the text encoder has 1 to {}", c.num_hidden_layers));
        }
        if (c.layer_norm_eps - 1e-12).abs() > 1e-15 {
            return Err(format!("layer_norm_eps {} (the fine-tuned layers use BERT's 1e-12)", c.layer_norm_eps));
        }
        Ok(TextTowerConfig {
            encoder: name.to_string(),
            version: version.to_string(),
            frozen_layers: c.num_hidden_layers - tuned,
            tuned_layers: tuned,
            hidden: c.hidden_size,
            heads: c.num_attention_heads,
            ff: c.intermediate_size,
        })
    }

    /// The fine-tuned layers, as parameters of `p` (named `text_tower.layer<i>`; randomly initialised until
    /// [`init_from`]).
    pub fn layers(&self, p: &mut Params) -> CResult<Vec<TransformerLayer>> {
        (0..self.tuned_layers)
            .map(|i| TransformerLayer::new(p, &format!("text_tower.layer{i}"), self.hidden, self.heads, self.ff))
            .collect()
    }
}

/// The pretrained encoder's upper layers as the fine-tuned layers' parameter values (by parameter name).
pub type TowerValues = BTreeMap<String, Tensor>;

/// The pretrained values of the fine-tuned layers: `bert`'s layers after the frozen ones.
pub fn pretrained_values(bert: &Bert, tower: &TextTowerConfig) -> CResult<TowerValues> {
    let dev = &Device::Cpu;
    let mut values = BTreeMap::new();
    for i in 0..tower.tuned_layers {
        let l = bert.layer_weights(tower.frozen_layers + i).ok_or_else(|| {
            candle_core::Error::Msg(format!("the text encoder has no layer {}", tower.frozen_layers + i))
        })?;
        let name = format!("text_tower.layer{i}");
        let mut dense = |part: &str, d: &stepwise_features::pretrained::bert::DenseWeights| -> CResult<()> {
            values.insert(format!("{name}.{part}.weight"), Tensor::from_slice(&d.w, (d.rows, d.cols), dev)?);
            values.insert(format!("{name}.{part}.bias"), Tensor::from_slice(&d.b, d.cols, dev)?);
            Ok(())
        };
        dense("attn.q", &l.query)?;
        dense("attn.k", &l.key)?;
        dense("attn.v", &l.value)?;
        dense("attn.out", &l.attention_out)?;
        dense("ff1", &l.up)?;
        dense("ff2", &l.down)?;
        for (part, (gamma, beta)) in [("norm1", l.norm1), ("norm2", l.norm2)] {
            values.insert(format!("{name}.{part}.weight"), Tensor::from_slice(gamma, gamma.len(), dev)?);
            values.insert(format!("{name}.{part}.bias"), Tensor::from_slice(beta, beta.len(), dev)?);
        }
    }
    Ok(values)
}

/// Set the fine-tuned layers' parameters in `params` to `values` ([`pretrained_values`]); nothing without values
/// (a model without a text tower).
pub fn init_from(params: &Params, values: Option<&TowerValues>) -> CResult<()> {
    let Some(values) = values else { return Ok(()) };
    let set = params.restore_prefix(values, "text_tower.")?;
    if set != values.len() {
        candle_core::bail!("text tower: {set} of {} pretrained tensors set", values.len());
    }
    Ok(())
}

/// Replace every step's text rows in `inputs` by the frozen layers' outputs for `[CLS]` + its first
/// `max_tokens − 2` tokens + `[SEP]` (the token ids the token store keeps; steps without ids are an error). A
/// step met in several instances is run once. The ids are dropped: a masked token's id is in its frozen rows,
/// so MLM cannot be trained on them.
pub fn frozen_inputs(
    inputs: &mut [SeqInput],
    encoder: &MiniLm,
    tower: &TextTowerConfig,
    max_tokens: usize,
) -> Result<(), String> {
    let keep = max_tokens.saturating_sub(2).max(1);
    let mut texts: Vec<Vec<u32>> = Vec::new();
    let mut index: HashMap<Vec<u32>, usize> = HashMap::new();
    let mut at: Vec<Vec<usize>> = Vec::with_capacity(inputs.len());
    for inst in inputs.iter() {
        let mut row = Vec::with_capacity(inst.steps.len());
        for (k, step) in inst.steps.iter().enumerate() {
            let ids = step.ids.as_ref().ok_or_else(|| {
                format!(
                    "instance {:?}, item {k}: no token ids (fine-tuning the text encoder needs a text store embedded \
                     with `--encoder {} --tokens`)",
                    inst.id, tower.encoder
                )
            })?;
            let ids: Vec<u32> = ids
                .iter()
                .take(keep)
                .map(|&i| u32::try_from(i).map_err(|_| format!("instance {:?}, item {k}: token id {i}", inst.id)))
                .collect::<Result<_, _>>()?;
            let next = texts.len();
            let slot = *index.entry(ids.clone()).or_insert(next);
            if slot == next {
                texts.push(ids);
            }
            row.push(slot);
        }
        at.push(row);
    }
    let refs: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
    let states = encoder.frozen_states(&refs, tower.frozen_layers).map_err(|e| e.to_string())?;
    for (inst, slots) in inputs.iter_mut().zip(&at) {
        for (step, &slot) in inst.steps.iter_mut().zip(slots) {
            step.text = Some(ItemMatrix { dim: tower.hidden, data: states[slot].clone() });
            step.ids = None;
        }
    }
    Ok(())
}

/// The fine-tuned layers over each step's text rows: `text` `B × n × s × hidden`, `mask` `B × n × s` (1 = a real
/// row); attention stays within a step.
pub fn forward(layers: &[TransformerLayer], text: &Tensor, mask: &Tensor) -> CResult<Tensor> {
    let (b, n, s, h) = text.dims4()?;
    if s == 0 {
        return Ok(text.clone());
    }
    let x = text.reshape((b * n, s, h))?;
    let bias = crate::nn::key_bias(&mask.reshape((b * n, s))?)?;
    crate::nn::transformer_stack(layers, &x, Some(&bias))?.reshape((b, n, s, h))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use super::*;

    /// A BERT folder with random weights in the Hugging Face layout (`layers` layers, width 8, 2 heads) and a
    /// word-level tokenizer (`[PAD]` 0, `[UNK]` 1, `[CLS]` 2, `[SEP]` 3, then 8 words).
    pub(crate) fn tiny_bert_dir(dir: &Path, layers: usize) {
        let (h, ff, vocab) = (8usize, 16usize, 12usize);
        let config = serde_json::json!({
            "vocab_size": vocab, "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": 2,
            "intermediate_size": ff, "hidden_act": "gelu", "max_position_embeddings": 64,
            "type_vocab_size": 2, "layer_norm_eps": 1e-12, "model_type": "bert"
        });
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        let mut rng = stepwise_core::rng::rng_for(7, "tiny-bert");
        let mut tensors = HashMap::new();
        let mut add = |name: String, shape: &[usize], scale: f32, offset: f32| {
            use rand::Rng;
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n).map(|_| offset + scale * rng.random_range(-1.0f32..1.0)).collect();
            tensors.insert(name, Tensor::from_vec(v, shape, &Device::Cpu).unwrap());
        };
        add("embeddings.word_embeddings.weight".into(), &[vocab, h], 1.0, 0.0);
        add("embeddings.position_embeddings.weight".into(), &[64, h], 0.5, 0.0);
        add("embeddings.token_type_embeddings.weight".into(), &[2, h], 0.5, 0.0);
        for norm in ["embeddings.LayerNorm".to_string()].into_iter().chain((0..layers).flat_map(|i| {
            [format!("encoder.layer.{i}.attention.output.LayerNorm"), format!("encoder.layer.{i}.output.LayerNorm")]
        })) {
            add(format!("{norm}.weight"), &[h], 0.2, 1.0);
            add(format!("{norm}.bias"), &[h], 0.2, 0.0);
        }
        for i in 0..layers {
            let p = format!("encoder.layer.{i}");
            for (name, out, inp) in [
                ("attention.self.query", h, h),
                ("attention.self.key", h, h),
                ("attention.self.value", h, h),
                ("attention.output.dense", h, h),
                ("intermediate.dense", ff, h),
                ("output.dense", h, ff),
            ] {
                add(format!("{p}.{name}.weight"), &[out, inp], 0.5, 0.0);
                add(format!("{p}.{name}.bias"), &[out], 0.1, 0.0);
            }
        }
        candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
        let words = ["whisk", "the", "eggs", "preheat", "oven", "serve", "warm", "and"];
        let mut vocab_map = serde_json::Map::new();
        for (i, w) in ["[PAD]", "[UNK]", "[CLS]", "[SEP]"].iter().chain(&words).enumerate() {
            vocab_map.insert(w.to_string(), serde_json::json!(i));
        }
        let tokenizer = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
            "decoder": null, "model": {"type": "WordLevel", "vocab": vocab_map, "unk_token": "[UNK]"}
        });
        std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    }

    /// The frozen lower layer, then the fine-tuned upper layers as initialised from the encoder, give the
    /// encoder's own last hidden states (with texts of different lengths padded in one batch).
    #[test]
    fn frozen_then_tuned_layers_are_the_pretrained_encoder() {
        let td = tempfile::tempdir().unwrap();
        tiny_bert_dir(td.path(), 3);
        let encoder = MiniLm::from_dir(td.path()).unwrap();
        let texts: [&[u32]; 3] = [&[4, 5, 6], &[7, 8, 9, 10, 11, 5], &[9]];
        let full = encoder.frozen_states(&texts, 3).unwrap();
        let lower = encoder.frozen_states(&texts, 1).unwrap();
        let tower = TextTowerConfig::of(encoder.bert(), "minilm", "v", 2).unwrap();
        assert_eq!((tower.frozen_layers, tower.tuned_layers, tower.hidden, tower.heads), (1, 2, 8, 2));
        let mut params = Params::for_family(1, "seq");
        let layers = tower.layers(&mut params).unwrap();
        init_from(&params, Some(&pretrained_values(encoder.bert(), &tower).unwrap())).unwrap();
        // One batch of one sequence of three steps, padded to the longest (8 rows with [CLS] and [SEP]).
        let (n, s, h) = (texts.len(), 8, 8);
        let mut data = vec![0f32; n * s * h];
        let mut mask = vec![0f32; n * s];
        for (k, rows) in lower.iter().enumerate() {
            data[k * s * h..][..rows.len()].copy_from_slice(rows);
            mask[k * s..][..rows.len() / h].iter_mut().for_each(|m| *m = 1.0);
        }
        let x = Tensor::from_vec(data, (1, n, s, h), &Device::Cpu).unwrap();
        let m = Tensor::from_vec(mask, (1, n, s), &Device::Cpu).unwrap();
        let y = forward(&layers, &x, &m).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (k, want) in full.iter().enumerate() {
            let got = &y[k * s * h..][..want.len()];
            let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst < 1e-4, "text {k}: max |difference| {worst}");
        }
        // A text past the frozen layers is not the encoder's output: the test would catch a tower left random.
        assert!(lower[0].iter().zip(&full[0]).any(|(a, b)| (a - b).abs() > 1e-2));
    }
}
