//! The feature vector of each item of a sequencing instance, from precomputed feature stores.
//!
//! - text: the vector of `text:{procedure}#{step}` (the step's full text: title + text, as the feature store
//!   embeds it — not the truncated text shown in the instance);
//! - image: the mean of the vectors of the item's images `image:{path}` (images missing from the store, e.g.
//!   listed in its `failures.jsonl`, are left out of the mean; an item with none of its images is an error);
//! - multimodal: the two above, each L2-normalised, concatenated (text first), so neither modality dominates by
//!   scale.

use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Error, Result};
use stepwise_features::Vectors;
use stepwise_features::items::{image_id, text_id};

/// Which features a model sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureKind {
    Text,
    Image,
    Multimodal,
}

impl FeatureKind {
    pub const ALL: [FeatureKind; 3] = [FeatureKind::Text, FeatureKind::Image, FeatureKind::Multimodal];

    pub fn as_str(self) -> &'static str {
        match self {
            FeatureKind::Text => "text",
            FeatureKind::Image => "image",
            FeatureKind::Multimodal => "multimodal",
        }
    }
}

/// Loaded feature stores: a text store, an image store, or both.
#[derive(Debug, Clone, Copy, Default)]
pub struct FeatureSet<'a> {
    pub text: Option<&'a Vectors>,
    pub image: Option<&'a Vectors>,
}

impl<'a> FeatureSet<'a> {
    /// The view for `kind`, or None when a needed store is absent.
    pub fn restrict(&self, kind: FeatureKind) -> Option<FeatureSet<'a>> {
        match kind {
            FeatureKind::Text => self.text.map(|t| FeatureSet { text: Some(t), image: None }),
            FeatureKind::Image => self.image.map(|i| FeatureSet { text: None, image: Some(i) }),
            FeatureKind::Multimodal => (self.text.is_some() && self.image.is_some()).then_some(*self),
        }
    }

    /// What this set provides.
    pub fn kind(&self) -> Option<FeatureKind> {
        match (self.text.is_some(), self.image.is_some()) {
            (true, false) => Some(FeatureKind::Text),
            (false, true) => Some(FeatureKind::Image),
            (true, true) => Some(FeatureKind::Multimodal),
            (false, false) => None,
        }
    }

    pub fn dim(&self) -> usize {
        self.text.map_or(0, |v| v.dim) + self.image.map_or(0, |v| v.dim)
    }
}

/// Row-major item vectors of one instance (`n × dim`, item order).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemMatrix {
    pub dim: usize,
    pub data: Vec<f32>,
}

impl ItemMatrix {
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    pub fn rows(&self) -> impl Iterator<Item = &[f32]> + Clone {
        (0..self.len()).map(|i| self.row(i))
    }
}

/// Per-column mean and population variance of `rows` (each `dim` wide), in two passes over the rows in order;
/// `None` without rows. What the models' input rescalings are fitted from.
pub fn column_moments<'a>(dim: usize, rows: impl Iterator<Item = &'a [f32]> + Clone) -> Option<(Vec<f64>, Vec<f64>)> {
    let (mut mean, mut n) = (vec![0f64; dim], 0usize);
    for row in rows.clone() {
        mean.iter_mut().zip(row).for_each(|(m, &x)| *m += x as f64);
        n += 1;
    }
    if n == 0 {
        return None;
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    let mut var = vec![0f64; dim];
    for row in rows {
        var.iter_mut().zip(row).zip(&mean).for_each(|((v, &x), m)| *v += (x as f64 - m).powi(2));
    }
    var.iter_mut().for_each(|v| *v /= n as f64);
    Some((mean, var))
}

/// The item vectors of `inst` under `set` (see the module docs for how each modality is built).
pub fn item_matrix(inst: &SequencingInstance, set: &FeatureSet<'_>) -> Result<ItemMatrix> {
    let kind = set.kind().ok_or_else(|| Error::usage("no features given"))?;
    let dim = set.dim();
    let mut data = Vec::with_capacity(dim * inst.items.len());
    for (k, item) in inst.items.iter().enumerate() {
        let text = match set.text {
            Some(v) => {
                let id = text_id(&inst.procedure, item.step);
                let row = v.get(&id).ok_or_else(|| {
                    Error::bad_input(format!(
                        "instance {:?}, item {k}: no text vector `{id}` in the text features (embed the instances' corpus with `stepwise embed`)",
                        inst.id
                    ))
                })?;
                Some(row.to_vec())
            }
            None => None,
        };
        let image = match set.image {
            Some(v) => Some(mean_image_vector(inst, k, v)?),
            None => None,
        };
        match (text, image) {
            (Some(t), None) => data.extend_from_slice(&t),
            (None, Some(i)) => data.extend_from_slice(&i),
            (Some(mut t), Some(mut i)) => {
                debug_assert_eq!(kind, FeatureKind::Multimodal);
                l2_normalize(&mut t);
                l2_normalize(&mut i);
                data.extend_from_slice(&t);
                data.extend_from_slice(&i);
            }
            (None, None) => unreachable!("the set has at least one store"),
        }
    }
    Ok(ItemMatrix { dim, data })
}

fn mean_image_vector(inst: &SequencingInstance, k: usize, v: &Vectors) -> Result<Vec<f32>> {
    let item = &inst.items[k];
    if item.images.is_empty() {
        return Err(Error::bad_input(format!(
            "instance {:?}, item {k}: no images (image features need instances generated with --modality image or multimodal)",
            inst.id
        )));
    }
    let mut mean = vec![0f32; v.dim];
    let mut found = 0usize;
    for path in &item.images {
        if let Some(row) = v.get(&image_id(path)) {
            mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
            found += 1;
        }
    }
    if found == 0 {
        return Err(Error::bad_input(format!(
            "instance {:?}, item {k}: none of its images ({}) is in the image features (embed the instances' corpus with `stepwise embed`)",
            inst.id,
            item.images.join(", ")
        )));
    }
    mean.iter_mut().for_each(|m| *m /= found as f32);
    Ok(mean)
}

/// Scale a vector to unit length (a zero vector stays zero).
pub fn l2_normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// Cosine similarity (0 when either vector is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    1.0 - stepwise_features::knn::distance(a, b, stepwise_features::Metric::Cosine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::sequencing::SequencingItem;

    fn inst() -> SequencingInstance {
        SequencingInstance {
            constraints: None,
            id: "p#s0".into(),
            procedure: "p".into(),
            split: "test".into(),
            modality: "multimodal".into(),
            items: vec![
                SequencingItem { step: 1, title: None, text: None, images: vec!["a.jpg".into(), "b.jpg".into()] },
                SequencingItem { step: 0, title: None, text: None, images: vec!["c.jpg".into(), "gone.jpg".into()] },
            ],
            references: vec![vec![1, 0]],
        }
    }

    #[test]
    fn multimodal_is_normalised_text_then_mean_image() {
        let text = Vectors::new(2, vec!["text:p#0".into(), "text:p#1".into()], vec![3.0, 4.0, 0.0, 2.0]);
        let image = Vectors::new(
            1,
            vec!["image:a.jpg".into(), "image:b.jpg".into(), "image:c.jpg".into()],
            vec![1.0, 3.0, -5.0],
        );
        let set = FeatureSet { text: Some(&text), image: Some(&image) };
        let m = item_matrix(&inst(), &set).unwrap();
        assert_eq!(m.dim, 3);
        // item 0 = step 1: text (0, 2) → (0, 1); images mean 2 → 1.
        assert_eq!(m.row(0), &[0.0, 1.0, 1.0]);
        // item 1 = step 0: text (3, 4) → (0.6, 0.8); only c.jpg present: -5 → -1.
        assert_eq!(m.row(1), &[0.6, 0.8, -1.0]);
        let only_image = item_matrix(&inst(), &set.restrict(FeatureKind::Image).unwrap()).unwrap();
        assert_eq!(only_image.data, vec![2.0, -5.0]);
    }

    #[test]
    fn missing_vectors_are_named() {
        let text = Vectors::new(2, vec!["text:p#0".into()], vec![1.0, 0.0]);
        let e = item_matrix(&inst(), &FeatureSet { text: Some(&text), image: None }).unwrap_err().to_string();
        assert!(e.contains("text:p#1") && e.contains("item 0"), "{e}");
    }
}
