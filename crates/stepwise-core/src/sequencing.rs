//! Step-sequencing instances: shuffled steps of one procedure and the orders that put them right.
//!
//! Conventions (used by generators, models and metrics alike): `items` are in *shuffled* order; an order (a
//! reference or a prediction) is a permutation of `0..items.len()` listing item indices in procedural order.
//! `references[0]` is the authored order; further references are alternative valid orders.

use serde::{Deserialize, Serialize};

/// The instances file inside a sequencing folder (`stepwise generate --task sequencing`).
pub const INSTANCES_JSONL: &str = "instances.jsonl";
/// Its Parquet copy.
pub const INSTANCES_PARQUET: &str = "instances.parquet";

/// One step shown to a sequencing model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequencingItem {
    /// Index of the step in its procedure.
    pub step: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequencingInstance {
    pub id: String,
    pub procedure: String,
    pub split: String,
    /// `text`, `image` or `multimodal`.
    pub modality: String,
    pub items: Vec<SequencingItem>,
    /// Valid orders (permutations of item indices); the first is the authored order.
    pub references: Vec<Vec<usize>>,
    /// When `references` is a sample of the valid orders (a window with more of them than a generator keeps):
    /// the precedence pairs `[a, b]` (item `a` comes before item `b`) whose satisfying orders are exactly the
    /// valid ones, so that any valid order can be recognised, not only the sampled ones. An empty list means
    /// every order is valid; `None` that `references` lists every valid order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<[usize; 2]>>,
}

impl SequencingInstance {
    /// The instance with its authored order as the only reference (the sequencing paper's single-reference
    /// scoring).
    pub fn authored_only(&self) -> SequencingInstance {
        SequencingInstance { references: vec![self.references[0].clone()], constraints: None, ..self.clone() }
    }

    /// Whether `order` (a permutation of the items) is a valid order: one of the references, or, when they are a
    /// sample, any order satisfying the precedence constraints.
    pub fn is_valid_order(&self, order: &[usize]) -> bool {
        self.references.iter().any(|r| r == order) || (self.constraints.is_some() && self.satisfies_constraints(order))
    }

    /// The precedence pairs (none when the references are complete).
    pub fn constraint_pairs(&self) -> &[[usize; 2]] {
        self.constraints.as_deref().unwrap_or_default()
    }

    /// Whether `order` (a permutation of the items) satisfies every precedence constraint.
    pub fn satisfies_constraints(&self, order: &[usize]) -> bool {
        let mut position = vec![0; order.len()];
        for (k, &item) in order.iter().enumerate() {
            position[item] = k;
        }
        self.constraint_pairs().iter().all(|&[a, b]| position[a] < position[b])
    }

    /// The valid order closest to `order` in a simple sense: at each position, the item earliest in `order` whose
    /// constrained predecessors are all placed (a stable topological sort). `order` itself when it is valid.
    /// Needs acyclic constraints over items of `order` (as [`crate::sequencing`] readers check).
    pub fn repair_order(&self, order: &[usize]) -> Vec<usize> {
        let precedence = Precedence::new(order.len(), self.constraint_pairs());
        let mut placed = vec![false; order.len()];
        let mut out = Vec::with_capacity(order.len());
        // A cycle leaves no placeable item: stop there (readers refuse such constraints).
        while let Some(&next) = order.iter().find(|&&i| precedence.is_placeable(i, &placed)) {
            placed[next] = true;
            out.push(next);
        }
        out
    }
}

/// Precedence pairs `[a, b]` (a before b) as each item's predecessors: which items may come next in a partial
/// order, shared by repairing a prediction (eval) and by a sequencer's training targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Precedence {
    predecessors: Vec<Vec<usize>>,
}

impl Precedence {
    /// The constraints over `n` items; pairs naming an item outside `0..n` are ignored.
    pub fn new(n: usize, pairs: &[[usize; 2]]) -> Precedence {
        let mut predecessors = vec![Vec::new(); n];
        for &[a, b] in pairs {
            if a < n && b < n {
                predecessors[b].push(a);
            }
        }
        Precedence { predecessors }
    }

    /// Whether `item` may be placed next after the items marked in `placed`: it is unplaced and every
    /// predecessor is placed. `item` and `placed` must cover the `n` items the constraints were made for.
    pub fn is_placeable(&self, item: usize, placed: &[bool]) -> bool {
        !placed[item] && self.predecessors[item].iter().all(|&a| placed[a])
    }

    /// Every item that may be placed next after the items marked in `placed`, ascending.
    pub fn placeable(&self, placed: &[bool]) -> Vec<usize> {
        (0..self.predecessors.len()).filter(|&i| self.is_placeable(i, placed)).collect()
    }
}

/// A multiple-choice prediction: `{"qid": ..., "answer": i}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChoicePrediction {
    pub qid: String,
    pub answer: i64,
}

/// A sequencing prediction: `{"id": ..., "order": [...]}` (item indices in predicted procedural order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPrediction {
    pub id: String,
    pub order: Vec<usize>,
}

/// Calls `f` on every permutation of `0..n` in lexicographic order (the identity first); n! calls.
pub fn for_each_permutation(n: usize, mut f: impl FnMut(&[usize])) {
    let mut cur: Vec<usize> = (0..n).collect();
    loop {
        f(&cur);
        // Next lexicographic permutation: the last rise, swap with the last larger element, reverse the tail.
        let Some(i) = (0..n.saturating_sub(1)).rev().find(|&i| cur[i] < cur[i + 1]) else {
            return;
        };
        let j = (i + 1..n).rev().find(|&j| cur[j] > cur[i]).expect("a larger element exists after a rise");
        cur.swap(i, j);
        cur[i + 1..].reverse();
    }
}

/// All permutations of `0..n` in lexicographic order (the identity first).
pub fn all_permutations(n: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for_each_permutation(n, |p| out.push(p.to_vec()));
    out
}

/// True when `order` is a permutation of `0..n`.
pub fn is_permutation(order: &[usize], n: usize) -> bool {
    if order.len() != n {
        return false;
    }
    let mut seen = vec![false; n];
    for &i in order {
        if i >= n || seen[i] {
            return false;
        }
        seen[i] = true;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeable_items_are_the_unplaced_ones_whose_predecessors_are_placed() {
        // 0 → 2, 1 → 2, 2 → 3; item 4 free; a pair naming item 9 is outside the items and ignored.
        let p = Precedence::new(5, &[[0, 2], [1, 2], [2, 3], [9, 0]]);
        let mut placed = vec![false; 5];
        assert_eq!(p.placeable(&placed), vec![0, 1, 4]);
        placed[0] = true;
        assert_eq!(p.placeable(&placed), vec![1, 4], "2 still waits for 1");
        placed[1] = true;
        assert_eq!(p.placeable(&placed), vec![2, 4]);
        placed[2] = true;
        assert_eq!(p.placeable(&placed), vec![3, 4]);
        assert!(!p.is_placeable(2, &placed), "a placed item is not placeable again");
        // Every order a repair produces satisfies the constraints; a valid order is its own repair.
        let inst = SequencingInstance {
            id: "x".into(),
            procedure: "p".into(),
            split: "test".into(),
            modality: "text".into(),
            items: Vec::new(),
            references: vec![vec![0, 1, 2, 3, 4]],
            constraints: Some(vec![[0, 2], [1, 2], [2, 3]]),
        };
        assert_eq!(inst.repair_order(&[3, 2, 4, 1, 0]), vec![4, 1, 0, 2, 3]);
        assert_eq!(inst.repair_order(&[4, 1, 0, 2, 3]), vec![4, 1, 0, 2, 3]);
    }

    #[test]
    fn permutations_are_lexicographic_complete_and_distinct() {
        let p = all_permutations(4);
        assert_eq!(p.len(), 24);
        assert_eq!(p[0], vec![0, 1, 2, 3]);
        assert_eq!(p[23], vec![3, 2, 1, 0]);
        assert!(p.windows(2).all(|w| w[0] < w[1]));
        assert!(p.iter().all(|o| is_permutation(o, 4)));
        assert_eq!(all_permutations(0), vec![Vec::<usize>::new()]);
        assert_eq!(all_permutations(1), vec![vec![0]]);
    }
}
