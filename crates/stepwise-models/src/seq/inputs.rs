//! Sequencing instances → per-step model inputs: the text rows (tokens, with their vocabulary ids when the
//! store has them) and the image rows (a patch grid) of every item, in the instance's (shuffled) item order.
//!
//! Without token-level text features a step's text is its one pooled vector (one row, no ids: no MLM); without a
//! patch grid an image is its one pooled vector (one row). Items with several images average them row by row.

use stepwise_core::sequencing::SequencingInstance;
use stepwise_features::Vectors;
use stepwise_features::items::{image_id, text_id};

use crate::item_features::{FeatureKind, ItemMatrix};
use crate::m3c::inputs::TokenRows;

/// Patch grids of image items (rows of one item: its patches, grid row-major).
pub trait PatchRows: Sync {
    fn dim(&self) -> usize;
    /// Row-major `patches × dim`, or `None` when the item has none.
    fn rows(&self, id: &str) -> Option<Vec<f32>>;
}

impl PatchRows for stepwise_features::PatchGrids {
    fn dim(&self) -> usize {
        self.dim
    }

    fn rows(&self, id: &str) -> Option<Vec<f32>> {
        self.get(id)
    }
}

/// Where the step features come from.
#[derive(Clone, Copy, Default)]
pub struct SeqSources<'a> {
    /// Pooled text vectors (`text:` ids).
    pub text: Option<&'a Vectors>,
    /// Token-level text vectors; used instead of `text` when present.
    pub tokens: Option<&'a dyn TokenRows>,
    /// Pooled image vectors (`image:` ids).
    pub image: Option<&'a Vectors>,
    /// Patch grids; used instead of `image` when present.
    pub patches: Option<&'a dyn PatchRows>,
}

impl SeqSources<'_> {
    /// Which modalities the sources provide.
    pub fn kind(&self) -> Option<FeatureKind> {
        let text = self.text.is_some() || self.tokens.is_some();
        let image = self.image.is_some() || self.patches.is_some();
        match (text, image) {
            (true, false) => Some(FeatureKind::Text),
            (false, true) => Some(FeatureKind::Image),
            (true, true) => Some(FeatureKind::Multimodal),
            (false, false) => None,
        }
    }

    /// Width of a text row (0 without text).
    pub fn text_dim(&self) -> usize {
        self.tokens.map(|t| t.dim()).or(self.text.map(|v| v.dim)).unwrap_or(0)
    }

    /// Width of an image row (0 without images).
    pub fn image_dim(&self) -> usize {
        self.patches.map(|p| p.dim()).or(self.image.map(|v| v.dim)).unwrap_or(0)
    }

    /// The vocabulary of the token ids (MLM's classes), when the token store has ids.
    pub fn vocab_size(&self) -> Option<usize> {
        self.tokens.and_then(|t| t.vocab_size())
    }
}

/// One step's inputs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepInput {
    /// `tokens × text_dim` (empty when the modality is left out).
    pub text: Option<ItemMatrix>,
    /// The vocabulary id of each text row (token stores with ids only).
    pub ids: Option<Vec<i64>>,
    /// `patches × image_dim`.
    pub image: Option<ItemMatrix>,
}

/// One instance's inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqInput {
    pub id: String,
    pub procedure: String,
    pub split: String,
    /// In the instance's item order (shuffled).
    pub steps: Vec<StepInput>,
    /// Every valid order (item indices in procedural order); the first is the authored order, trained on.
    pub references: Vec<Vec<usize>>,
    /// When `references` is a sample of the valid orders: the precedence pairs whose satisfying orders are
    /// exactly the valid ones (see [`SequencingInstance::constraints`]).
    pub constraints: Option<Vec<[usize; 2]>>,
}

impl SeqInput {
    pub fn gold(&self) -> &[usize] {
        &self.references[0]
    }

    /// The steps in authored order (what pretraining sees).
    pub fn in_order(&self) -> Vec<StepInput> {
        self.gold().iter().map(|&i| self.steps[i].clone()).collect()
    }
}

/// The inputs of `inst` for `kind` (text and/or image), with at most `max_tokens` text rows per step (the first
/// ones). The error names the instance, the item and the missing feature id.
pub fn seq_input(
    inst: &SequencingInstance,
    sources: &SeqSources<'_>,
    kind: FeatureKind,
    max_tokens: usize,
) -> Result<SeqInput, String> {
    let n = inst.items.len();
    if n < 2 {
        return Err(format!("instance {:?}: {n} items (a sequence needs at least 2)", inst.id));
    }
    if inst.references.is_empty() || inst.references.iter().any(|r| !is_permutation(r, n)) {
        return Err(format!("instance {:?}: a reference is not a permutation of its {n} items", inst.id));
    }
    let want_text = matches!(kind, FeatureKind::Text | FeatureKind::Multimodal);
    let want_image = matches!(kind, FeatureKind::Image | FeatureKind::Multimodal);
    let mut steps = Vec::with_capacity(n);
    for (k, item) in inst.items.iter().enumerate() {
        let mut step = StepInput::default();
        if want_text {
            let id = text_id(&inst.procedure, item.step);
            if let Some(t) = sources.tokens {
                let data = t.rows(&id).ok_or_else(|| missing(inst, k, &id, "token-level text features"))?;
                let rows = (data.len() / t.dim().max(1)).min(max_tokens.max(1));
                step.text = Some(ItemMatrix { dim: t.dim(), data: data[..rows * t.dim()].to_vec() });
                step.ids = t.ids(&id).map(|mut ids| {
                    ids.truncate(rows);
                    ids
                });
            } else if let Some(v) = sources.text {
                let row = v.get(&id).ok_or_else(|| missing(inst, k, &id, "text features"))?;
                step.text = Some(ItemMatrix { dim: v.dim, data: row.to_vec() });
            } else {
                return Err("no text features given".into());
            }
        }
        if want_image {
            step.image = Some(image_rows(inst, k, sources)?);
        }
        steps.push(step);
    }
    Ok(SeqInput {
        id: inst.id.clone(),
        procedure: inst.procedure.clone(),
        split: inst.split.clone(),
        steps,
        references: inst.references.clone(),
        constraints: inst.constraints.clone(),
    })
}

fn missing(inst: &SequencingInstance, k: usize, id: &str, what: &str) -> String {
    format!(
        "instance {:?}, item {k}: no `{id}` in the {what} (embed the instances' corpus with `stepwise embed`)",
        inst.id
    )
}

fn is_permutation(order: &[usize], n: usize) -> bool {
    let mut seen = vec![false; n];
    order.len() == n && order.iter().all(|&i| i < n && !std::mem::replace(&mut seen[i], true))
}

/// The mean patch grid (or pooled vector) of the item's images found in the store.
fn image_rows(inst: &SequencingInstance, k: usize, sources: &SeqSources<'_>) -> Result<ItemMatrix, String> {
    let item = &inst.items[k];
    if item.images.is_empty() {
        return Err(format!(
            "instance {:?}, item {k}: no images (image features need instances generated with --modality image or multimodal)",
            inst.id
        ));
    }
    let (dim, found): (usize, Vec<Vec<f32>>) = if let Some(p) = sources.patches {
        (p.dim(), item.images.iter().filter_map(|path| p.rows(&image_id(path))).collect())
    } else if let Some(v) = sources.image {
        (v.dim, item.images.iter().filter_map(|path| v.get(&image_id(path)).map(<[f32]>::to_vec)).collect())
    } else {
        return Err("no image features given".into());
    };
    let Some(first) = found.first() else {
        return Err(format!(
            "instance {:?}, item {k}: none of its images ({}) is in the image features (embed the instances' corpus with `stepwise embed`)",
            inst.id,
            item.images.join(", ")
        ));
    };
    let mut mean = vec![0f32; first.len()];
    let mut used = 0usize;
    for rows in found.iter().filter(|r| r.len() == first.len()) {
        mean.iter_mut().zip(rows).for_each(|(m, x)| *m += x);
        used += 1;
    }
    mean.iter_mut().for_each(|m| *m /= used as f32);
    Ok(ItemMatrix { dim, data: mean })
}
