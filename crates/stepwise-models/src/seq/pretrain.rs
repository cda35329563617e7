//! Sequence-aware pretraining (the sequencing paper §4): how each objective changes a batch of ordered
//! sequences, as pure functions of the steps and a seeded generator (unit-tested on hand-made inputs).
//!
//! - MLM: the same number of text rows masked in every step (`max(1, round(rate × mean rows per step))`, at most
//!   a step's rows), predicted as vocabulary ids.
//! - ISP: with probability δ the images of two distinct steps are swapped; label "swapped".
//! - PISP: with probability δ, M (1 ≤ M ≤ w) random patch positions are swapped between two steps' images.
//! - SMRM: 15% of each image's patches (at least one) are set to zero vectors; the masked positions of any two
//!   images overlap in fewer than half of them (resampled until they do, within a bounded number of tries, then
//!   the least-used positions are taken).

use rand::Rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use super::inputs::StepInput;

/// The pretraining objectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    Mlm,
    Isp,
    Pisp,
    Smrm,
}

impl Objective {
    pub const ALL: [Objective; 4] = [Objective::Mlm, Objective::Isp, Objective::Pisp, Objective::Smrm];

    pub fn as_str(self) -> &'static str {
        match self {
            Objective::Mlm => "mlm",
            Objective::Isp => "isp",
            Objective::Pisp => "pisp",
            Objective::Smrm => "smrm",
        }
    }

    pub fn parse(s: &str) -> Option<Objective> {
        Objective::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Whether the objective reads the text stream (else the image stream).
    pub fn needs_text(self) -> bool {
        self == Objective::Mlm
    }
}

/// Pretraining options (the paper's values by default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PretrainConfig {
    pub objectives: Vec<Objective>,
    /// MLM: share of text rows masked (per step, the same count in every step).
    pub mlm_rate: f64,
    /// ISP and PISP: probability of a swap.
    pub swap_probability: f64,
    /// PISP: at most this many patches swapped (w).
    pub pisp_max_patches: usize,
    /// SMRM: share of each image's patches masked.
    pub smrm_rate: f64,
    /// SMRM: masked positions of two images overlap in less than this share.
    pub smrm_max_overlap: f64,
}

impl Default for PretrainConfig {
    fn default() -> Self {
        PretrainConfig {
            objectives: vec![Objective::Mlm, Objective::Isp, Objective::Smrm],
            mlm_rate: 0.15,
            swap_probability: 0.5,
            pisp_max_patches: 3,
            smrm_rate: 0.15,
            smrm_max_overlap: 0.5,
        }
    }
}

/// The rows to mask in each step for MLM: the same count `max(1, round(rate × mean rows))` per step (capped by
/// the step's rows), positions drawn uniformly. Steps without ids get none.
pub fn mlm_positions(steps: &[StepInput], rate: f64, rng: &mut impl Rng) -> Vec<Vec<usize>> {
    let lens: Vec<usize> =
        steps.iter().map(|s| if s.ids.is_some() { s.text.as_ref().map_or(0, |t| t.len()) } else { 0 }).collect();
    let with: Vec<usize> = lens.iter().copied().filter(|&l| l > 0).collect();
    if with.is_empty() {
        return vec![Vec::new(); steps.len()];
    }
    let mean = with.iter().sum::<usize>() as f64 / with.len() as f64;
    let k = ((rate * mean).round() as usize).max(1);
    lens.iter()
        .map(|&len| {
            let mut pos: Vec<usize> = (0..len).collect();
            pos.shuffle(rng);
            pos.truncate(k.min(len));
            pos.sort_unstable();
            pos
        })
        .collect()
}

/// ISP: with probability `p`, swap the images of two distinct steps; returns the swapped pair.
pub fn isp_swap(steps: &mut [StepInput], p: f64, rng: &mut impl Rng) -> Option<(usize, usize)> {
    let n = steps.len();
    if n < 2 || !rng.random_bool(p.clamp(0.0, 1.0)) {
        return None;
    }
    let i = rng.random_range(0..n);
    let j = (i + rng.random_range(1..n)) % n;
    let a = steps[i].image.take();
    steps[i].image = steps[j].image.take();
    steps[j].image = a;
    Some((i.min(j), i.max(j)))
}

/// PISP: with probability `p`, swap M ∈ [1, min(w, patches)] random patch positions between the images of two
/// distinct steps; returns the steps and the swapped positions.
pub fn pisp_swap(
    steps: &mut [StepInput],
    p: f64,
    max_patches: usize,
    rng: &mut impl Rng,
) -> Option<(usize, usize, Vec<usize>)> {
    let n = steps.len();
    if n < 2 || !rng.random_bool(p.clamp(0.0, 1.0)) {
        return None;
    }
    let i = rng.random_range(0..n);
    let j = (i + rng.random_range(1..n)) % n;
    let rows = steps[i].image.as_ref()?.len().min(steps[j].image.as_ref()?.len());
    if rows == 0 {
        return None;
    }
    let m = rng.random_range(1..=max_patches.clamp(1, rows));
    let mut pos: Vec<usize> = (0..rows).collect();
    pos.shuffle(rng);
    pos.truncate(m);
    pos.sort_unstable();
    let (lo, hi) = (i.min(j), i.max(j));
    let (left, right) = steps.split_at_mut(hi);
    let (a, b) = (left[lo].image.as_mut()?, right[0].image.as_mut()?);
    let dim = a.dim;
    for &r in &pos {
        for c in 0..dim {
            std::mem::swap(&mut a.data[r * dim + c], &mut b.data[r * dim + c]);
        }
    }
    Some((lo, hi, pos))
}

/// SMRM: the patch positions to mask in each step's image (see the module docs for the overlap bound).
pub fn smrm_positions(steps: &[StepInput], rate: f64, max_overlap: f64, rng: &mut impl Rng) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::with_capacity(steps.len());
    let mut used = std::collections::BTreeMap::<usize, usize>::new();
    for s in steps {
        let rows = s.image.as_ref().map_or(0, |m| m.len());
        if rows == 0 {
            out.push(Vec::new());
            continue;
        }
        let k = ((rate * rows as f64).round() as usize).clamp(1, rows);
        let ok = |cand: &[usize], prev: &[Vec<usize>]| {
            prev.iter().filter(|p| !p.is_empty()).all(|p| {
                let shared = cand.iter().filter(|c| p.contains(c)).count();
                (shared as f64) < max_overlap * k.min(p.len()) as f64
            })
        };
        let mut chosen = None;
        for _ in 0..64 {
            let mut pos: Vec<usize> = (0..rows).collect();
            pos.shuffle(rng);
            pos.truncate(k);
            pos.sort_unstable();
            if ok(&pos, &out) {
                chosen = Some(pos);
                break;
            }
        }
        let pos = chosen.unwrap_or_else(|| {
            // The least-used positions (ties to the lower index): the bound may be unsatisfiable (few patches).
            let mut by_use: Vec<usize> = (0..rows).collect();
            by_use.sort_by_key(|r| (used.get(r).copied().unwrap_or(0), *r));
            let mut pos: Vec<usize> = by_use.into_iter().take(k).collect();
            pos.sort_unstable();
            pos
        });
        for &r in &pos {
            *used.entry(r).or_insert(0) += 1;
        }
        out.push(pos);
    }
    out
}

/// Zero the patches at `positions` of each step's image; returns the original rows (in step, then position
/// order) for SMRM's candidates.
pub fn zero_patches(steps: &mut [StepInput], positions: &[Vec<usize>]) -> Vec<Vec<f32>> {
    let mut originals = Vec::new();
    for (s, pos) in steps.iter_mut().zip(positions) {
        let Some(img) = s.image.as_mut() else { continue };
        let dim = img.dim;
        for &r in pos {
            let row = &mut img.data[r * dim..(r + 1) * dim];
            originals.push(row.to_vec());
            row.iter_mut().for_each(|x| *x = 0.0);
        }
    }
    originals
}

/// A random sub-sequence (order kept) of at least 2 and at most `max` steps: a uniform length, then a uniform
/// subset of that size.
pub fn subsample(steps: &[StepInput], max: usize, rng: &mut impl Rng) -> Vec<StepInput> {
    let n = steps.len();
    if n <= 2 {
        return steps.to_vec();
    }
    let len = rng.random_range(2..=n.min(max.max(2)));
    let mut idx: Vec<usize> = (0..n).collect();
    idx.shuffle(rng);
    idx.truncate(len);
    idx.sort_unstable();
    idx.into_iter().map(|i| steps[i].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item_features::ItemMatrix;
    use stepwise_core::rng::rng_for;

    fn step(k: usize, tokens: usize, patches: usize) -> StepInput {
        StepInput {
            text: Some(ItemMatrix { dim: 2, data: (0..tokens * 2).map(|x| x as f32).collect() }),
            ids: Some((0..tokens as i64).collect()),
            image: Some(ItemMatrix { dim: 2, data: (0..patches * 2).map(|x| (100 * (k + 1) + x) as f32).collect() }),
        }
    }

    #[test]
    fn isp_swaps_exactly_two_images() {
        let mut swapped = 0;
        for t in 0..200 {
            let orig: Vec<StepInput> = (0..5).map(|k| step(k, 3, 4)).collect();
            let mut s = orig.clone();
            let r = isp_swap(&mut s, 0.5, &mut rng_for(t, "isp"));
            let changed: Vec<usize> = (0..5).filter(|&k| s[k].image != orig[k].image).collect();
            match r {
                Some((i, j)) => {
                    swapped += 1;
                    assert_eq!(changed, vec![i, j]);
                    assert_eq!(s[i].image, orig[j].image);
                    assert_eq!(s[j].image, orig[i].image);
                }
                None => assert!(changed.is_empty()),
            }
            assert!(s.iter().zip(&orig).all(|(a, b)| a.text == b.text));
        }
        assert!((70..130).contains(&swapped), "{swapped} of 200 swapped at δ = 0.5");
    }

    #[test]
    fn pisp_swaps_exactly_m_patches() {
        for t in 0..100 {
            let orig: Vec<StepInput> = (0..4).map(|k| step(k, 2, 9)).collect();
            let mut s = orig.clone();
            let Some((i, j, pos)) = pisp_swap(&mut s, 1.0, 3, &mut rng_for(t, "pisp")) else { panic!("δ = 1") };
            assert!((1..=3).contains(&pos.len()) && i < j);
            for k in 0..4 {
                let (a, b) = (s[k].image.as_ref().unwrap(), orig[k].image.as_ref().unwrap());
                let rows_changed: Vec<usize> = (0..9).filter(|&r| a.row(r) != b.row(r)).collect();
                if k == i || k == j {
                    assert_eq!(rows_changed, pos);
                    let other = if k == i { j } else { i };
                    for &r in &pos {
                        assert_eq!(a.row(r), orig[other].image.as_ref().unwrap().row(r));
                    }
                } else {
                    assert!(rows_changed.is_empty());
                }
            }
        }
    }

    #[test]
    fn smrm_masks_15_percent_with_bounded_overlap() {
        for t in 0..50 {
            let steps: Vec<StepInput> = (0..5).map(|k| step(k, 2, 49)).collect();
            let pos = smrm_positions(&steps, 0.15, 0.5, &mut rng_for(t, "smrm"));
            for p in &pos {
                assert_eq!(p.len(), 7, "round(0.15 × 49)");
            }
            for a in 0..5 {
                for b in a + 1..5 {
                    let shared = pos[a].iter().filter(|x| pos[b].contains(x)).count();
                    assert!((shared as f64) < 0.5 * 7.0, "{:?} {:?}", pos[a], pos[b]);
                }
            }
            let mut s = steps.clone();
            let originals = zero_patches(&mut s, &pos);
            assert_eq!(originals.len(), 35);
            assert_eq!(originals[0], steps[0].image.as_ref().unwrap().row(pos[0][0]).to_vec());
            for (k, p) in pos.iter().enumerate() {
                let img = s[k].image.as_ref().unwrap();
                for r in 0..49 {
                    assert_eq!(img.row(r).iter().all(|&x| x == 0.0), p.contains(&r), "step {k} row {r}");
                }
            }
        }
        // Nine patches, one masked per image: no two images share a position while positions remain.
        let steps: Vec<StepInput> = (0..5).map(|k| step(k, 2, 9)).collect();
        let pos = smrm_positions(&steps, 0.15, 0.5, &mut rng_for(1, "smrm"));
        let mut all: Vec<usize> = pos.iter().flatten().copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 5);
    }

    #[test]
    fn mlm_masks_the_same_count_per_step() {
        let steps = vec![step(0, 20, 1), step(1, 10, 1), step(2, 30, 1), step(3, 2, 1)];
        let pos = mlm_positions(&steps, 0.15, &mut rng_for(3, "mlm"));
        // mean 15.5 rows → round(2.325) = 2 per step.
        assert_eq!(pos.iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 2, 2]);
        assert!(pos.iter().zip(&steps).all(|(p, s)| p.iter().all(|&r| r < s.text.as_ref().unwrap().len())));
        let mut no_ids = steps.clone();
        no_ids[1].ids = None;
        assert!(mlm_positions(&no_ids, 0.15, &mut rng_for(3, "mlm"))[1].is_empty());
    }

    #[test]
    fn subsample_keeps_order_and_at_least_two() {
        let steps: Vec<StepInput> = (0..6).map(|k| step(k, 1, 1)).collect();
        for t in 0..50 {
            let s = subsample(&steps, 16, &mut rng_for(t, "sub"));
            assert!(s.len() >= 2);
            let keys: Vec<f32> = s.iter().map(|x| x.image.as_ref().unwrap().data[0]).collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
