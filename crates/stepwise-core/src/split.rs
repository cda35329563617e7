//! Train/val/test splits *by procedure*: no procedure in two splits, category-stratified when categories exist,
//! deterministic for a seed and independent of input order.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hash::hash64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Val,
    Test,
}

impl Split {
    pub const ALL: [Split; 3] = [Split::Train, Split::Val, Split::Test];

    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
            Split::Test => "test",
        }
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Fractions of procedures for train, val and test (they are normalised to sum to 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SplitFractions {
    pub train: f64,
    pub val: f64,
    pub test: f64,
}

impl Default for SplitFractions {
    /// 80/10/10, as RecipeQA and Meta-RecipeQA.
    fn default() -> Self {
        SplitFractions { train: 0.8, val: 0.1, test: 0.1 }
    }
}

/// Assign each procedure to a split. Within each category (all procedures share one stratum when `category` is
/// None), procedures are ordered by a seeded hash of their id and cut by the fractions, rounding so each stratum's
/// counts are as close to the fractions as possible.
pub fn assign_splits<'a>(
    procedures: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    fractions: SplitFractions,
    seed: u64,
) -> BTreeMap<String, Split> {
    let mut strata: BTreeMap<Option<&str>, Vec<(u64, &str)>> = BTreeMap::new();
    for (id, cat) in procedures {
        strata.entry(cat).or_default().push((hash64(&[&seed.to_le_bytes(), b"split", id.as_bytes()]), id));
    }
    let total = fractions.train + fractions.val + fractions.test;
    let (ft, fv) = if total > 0.0 { (fractions.train / total, fractions.val / total) } else { (1.0, 0.0) };
    let mut out = BTreeMap::new();
    for (_, mut ids) in strata {
        ids.sort();
        let n = ids.len() as f64;
        let n_train = (n * ft).round() as usize;
        let n_val = ((n * (ft + fv)).round() as usize).saturating_sub(n_train);
        for (i, (_, id)) in ids.into_iter().enumerate() {
            let s = if i < n_train {
                Split::Train
            } else if i < n_train + n_val {
                Split::Val
            } else {
                Split::Test
            };
            out.insert(id.to_string(), s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_are_stratified_and_order_independent() {
        let ids: Vec<(String, Option<&str>)> =
            (0..100).map(|i| (format!("p{i}"), Some(if i % 2 == 0 { "a" } else { "b" }))).collect();
        let a = assign_splits(ids.iter().map(|(i, c)| (i.as_str(), *c)), SplitFractions::default(), 1);
        let b = assign_splits(ids.iter().rev().map(|(i, c)| (i.as_str(), *c)), SplitFractions::default(), 1);
        assert_eq!(a, b);
        let train_a = ids.iter().filter(|(i, c)| *c == Some("a") && a[i] == Split::Train).count();
        assert_eq!(train_a, 40);
        assert_eq!(a.values().filter(|s| **s == Split::Test).count(), 10);
    }
}
