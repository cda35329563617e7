//! Training pairs: every ordered pair (i, j), i ≠ j, of every training instance, labelled with the share of the
//! instance's references that put i before j — 1 or 0 when all references agree, in between for steps whose
//! order is free (exact for the built-in world, whose references are all valid orders). Both orders of each
//! pair are included, so the classifier learns an antisymmetric relation.

use crate::item_features::{ItemMatrix, column_moments};

/// For items `0..n` of one instance, entry `i * n + j`: the share of `references` (orders of item indices) that
/// put item i before item j (0 on the diagonal and with no reference). The pairwise model's labels and the
/// sequencer's pairwise targets.
pub fn precedence_shares(references: &[Vec<usize>], n: usize) -> Vec<f32> {
    let positions: Vec<Vec<usize>> = references
        .iter()
        .map(|r| {
            let mut pos = vec![0; n];
            for (k, &i) in r.iter().enumerate() {
                pos[i] = k;
            }
            pos
        })
        .collect();
    let mut out = vec![0f32; n * n];
    for i in 0..n {
        for j in 0..n {
            if i != j {
                let before = positions.iter().filter(|p| p[i] < p[j]).count();
                out[i * n + j] = before as f32 / positions.len().max(1) as f32;
            }
        }
    }
    out
}

/// Items of many instances stacked into one matrix, and labelled pairs indexing its rows.
#[derive(Debug, Clone, Default)]
pub struct PairTable {
    pub dim: usize,
    /// Row-major items (`rows × dim`).
    pub items: Vec<f32>,
    pub a: Vec<u32>,
    pub b: Vec<u32>,
    /// P(a before b) under the references.
    pub y: Vec<f32>,
}

impl PairTable {
    pub fn rows(&self) -> usize {
        self.items.len().checked_div(self.dim).unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.y.len()
    }

    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Add one instance's items and all its ordered pairs.
    pub fn push_instance(&mut self, x: &ItemMatrix, references: &[Vec<usize>]) {
        if self.dim == 0 {
            self.dim = x.dim;
        }
        assert_eq!(self.dim, x.dim, "all instances have the same feature dimension");
        let base = self.rows() as u32;
        let n = x.len();
        self.items.extend_from_slice(&x.data);
        let shares = precedence_shares(references, n);
        for i in 0..n {
            for j in 0..n {
                if i == j {
                    continue;
                }
                self.a.push(base + i as u32);
                self.b.push(base + j as u32);
                self.y.push(shares[i * n + j]);
            }
        }
    }

    /// Standardise the item columns in place.
    pub fn standardize(&mut self, s: &Standardizer) {
        for row in self.items.chunks_mut(self.dim.max(1)) {
            s.apply(row);
        }
    }
}

/// Per-dimension mean and standard deviation of the training items (z-scoring keeps AdamW's step sizes
/// comparable across feature stores of very different scales).
#[derive(Debug, Clone, PartialEq)]
pub struct Standardizer {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

impl Standardizer {
    /// Fitted on row-major `items` (`dim` columns). Constant columns get std 1.
    pub fn fit(items: &[f32], dim: usize) -> Self {
        let (mean, var) =
            column_moments(dim, items.chunks(dim.max(1))).unwrap_or_else(|| (vec![0.0; dim], vec![0.0; dim]));
        let std = var
            .iter()
            .map(|v| {
                let s = v.sqrt();
                if s > 1e-6 { s as f32 } else { 1.0 }
            })
            .collect();
        Standardizer { mean: mean.into_iter().map(|m| m as f32).collect(), std }
    }

    pub fn apply(&self, row: &mut [f32]) {
        for ((x, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
            *x = (*x - m) / s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_labels_count_references() {
        let x = ItemMatrix { dim: 1, data: vec![0.0, 1.0, 2.0] };
        let mut t = PairTable::default();
        // Two references: 0 1 2 and 1 0 2 → 0/1 free (0.5), both before 2.
        t.push_instance(&x, &[vec![0, 1, 2], vec![1, 0, 2]]);
        let label = |a: u32, b: u32| t.y[(0..t.len()).find(|&k| t.a[k] == a && t.b[k] == b).unwrap()];
        assert_eq!(t.len(), 6);
        assert_eq!(label(0, 1), 0.5);
        assert_eq!(label(1, 0), 0.5);
        assert_eq!(label(0, 2), 1.0);
        assert_eq!(label(2, 1), 0.0);
        // A second instance's rows are offset.
        t.push_instance(&ItemMatrix { dim: 1, data: vec![5.0, 6.0] }, &[vec![1, 0]]);
        assert_eq!(t.rows(), 5);
        let label = |a: u32, b: u32| t.y[(0..t.len()).find(|&k| t.a[k] == a && t.b[k] == b).unwrap()];
        assert_eq!(label(3, 4), 0.0);
        assert_eq!(label(4, 3), 1.0);
    }

    #[test]
    fn standardizer_centres_and_scales() {
        let s = Standardizer::fit(&[1.0, 5.0, 3.0, 5.0], 2);
        assert_eq!(s.mean, vec![2.0, 5.0]);
        assert_eq!(s.std, vec![1.0, 1.0]);
        let mut r = [3.0, 5.0];
        s.apply(&mut r);
        assert_eq!(r, [1.0, 0.0]);
    }
}
