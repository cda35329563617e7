//! The image-chain heuristic: consecutive steps look alike (the scene changes a little per step), so chain the
//! items by nearest neighbour in feature space (cosine similarity of the item vectors — image features for
//! the paper's heuristic, though any features work).
//!
//! - Start ([`ChainStart::Outlier`], default): the item least similar to the mean of the *other* items — the
//!   ends of a procedure (raw ingredients, finished dish) tend to differ most from the rest. Then repeatedly
//!   append the most similar unvisited item (ties: lowest index).
//! - [`ChainStart::Best`]: run the greedy chain from every start and keep the chain with the highest total
//!   similarity of consecutive items (ties: lowest start).
//!
//! Similarity alone cannot tell a chain from its reverse; the direction is whatever the start rule gives, so
//! the heuristic scores well on adjacency (L_r, L_q) and only near chance on direction-sensitive metrics unless
//! the outlier happens to be the first step.

use crate::item_features::{ItemMatrix, cosine};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChainStart {
    #[default]
    Outlier,
    Best,
}

/// The predicted order of the items of `x`.
pub fn chain_order(x: &ItemMatrix, start: ChainStart) -> Vec<usize> {
    let n = x.len();
    if n == 0 {
        return Vec::new();
    }
    let sim: Vec<Vec<f32>> = (0..n).map(|i| (0..n).map(|j| cosine(x.row(i), x.row(j))).collect()).collect();
    match start {
        ChainStart::Outlier => greedy_chain(&sim, outlier(x)),
        ChainStart::Best => {
            let mut best: Option<(f32, Vec<usize>)> = None;
            for s in 0..n {
                let chain = greedy_chain(&sim, s);
                let total: f32 = chain.windows(2).map(|w| sim[w[0]][w[1]]).sum();
                if best.as_ref().is_none_or(|(t, _)| total > *t) {
                    best = Some((total, chain));
                }
            }
            best.map(|(_, c)| c).expect("n > 0")
        }
    }
}

/// The item least similar to the mean of the others (ties: lowest index).
fn outlier(x: &ItemMatrix) -> usize {
    let n = x.len();
    if n == 1 {
        return 0;
    }
    let mut total = vec![0f32; x.dim];
    for i in 0..n {
        total.iter_mut().zip(x.row(i)).for_each(|(t, v)| *t += v);
    }
    let mut best = (f32::INFINITY, 0);
    for i in 0..n {
        let others: Vec<f32> = total.iter().zip(x.row(i)).map(|(t, v)| (t - v) / (n - 1) as f32).collect();
        let s = cosine(x.row(i), &others);
        if s < best.0 {
            best = (s, i);
        }
    }
    best.1
}

fn greedy_chain(sim: &[Vec<f32>], start: usize) -> Vec<usize> {
    let n = sim.len();
    let mut used = vec![false; n];
    let mut chain = vec![start];
    used[start] = true;
    while chain.len() < n {
        let cur = *chain.last().expect("non-empty");
        let mut best: Option<(f32, usize)> = None;
        for j in 0..n {
            if !used[j] && best.is_none_or(|(s, _)| sim[cur][j] > s) {
                best = Some((sim[cur][j], j));
            }
        }
        let (_, j) = best.expect("an unused item remains");
        used[j] = true;
        chain.push(j);
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items on an arc: consecutive steps close, the ends far apart.
    fn arc(order: &[usize]) -> ItemMatrix {
        let n = order.len();
        let mut data = vec![0f32; n * 2];
        for (item, &pos) in order.iter().enumerate() {
            let a = pos as f32 / (n - 1) as f32 * 2.0;
            data[item * 2] = a.cos();
            data[item * 2 + 1] = a.sin();
        }
        ItemMatrix { dim: 2, data }
    }

    #[test]
    fn chains_recover_a_smooth_path_up_to_direction() {
        // item k sits at position pos[k]
        let pos = [2, 0, 4, 1, 3];
        let x = arc(&pos);
        let mut truth = vec![0; 5];
        for (item, &p) in pos.iter().enumerate() {
            truth[p] = item;
        }
        let reversed: Vec<usize> = truth.iter().rev().copied().collect();
        for start in [ChainStart::Outlier, ChainStart::Best] {
            let got = chain_order(&x, start);
            assert!(got == truth || got == reversed, "{start:?}: {got:?} vs {truth:?}");
        }
    }
}
