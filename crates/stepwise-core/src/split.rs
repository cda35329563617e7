//! Train/val/test splits *by procedure*: no procedure in two splits, category-stratified when categories exist,
//! deterministic for a seed and independent of input order; and K-fold cross-validation by procedure
//! ([`ProcedureFolds`]) for datasets too small for a held-out split.

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

/// Procedures that only ever train (`--train-only PREFIX`): extra training corpora beside the dataset under study.
/// A procedure whose id starts with one of the prefixes is in the training set of every split and every
/// cross-validation fold, and is never validated, tested or scored; the folds are made over the other procedures.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TrainOnly(Vec<String>);

impl TrainOnly {
    /// Empty prefixes are refused: they would make every procedure train-only.
    pub fn new(prefixes: Vec<String>) -> crate::Result<Self> {
        if prefixes.iter().any(String::is_empty) {
            return Err(crate::Error::usage("--train-only: a prefix must not be empty"));
        }
        Ok(TrainOnly(prefixes))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn prefixes(&self) -> &[String] {
        &self.0
    }

    /// True when `procedure` only trains.
    pub fn contains(&self, procedure: &str) -> bool {
        self.0.iter().any(|p| procedure.starts_with(p.as_str()))
    }

    /// The split a procedure's item is used in: `train` for a train-only procedure, else its own `split`.
    pub fn split_of<'a>(&self, procedure: &str, split: &'a str) -> &'a str {
        if self.contains(procedure) { "train" } else { split }
    }

    /// The protocol's note on the train-only instances (`n` of them), `None` when there are none to name.
    pub fn note(&self, n: usize) -> Option<String> {
        (!self.is_empty()).then(|| {
            format!(
                "{n} train-only instances (procedures {}) in the training set of every fold or split, never selected on, predicted or scored",
                self.0.iter().map(|p| format!("{p}*")).collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// Cross-validation folds over the procedures that are not train-only (which [`ProcedureFolds::role`] then
    /// places in training in every fold).
    pub fn folds<'a>(
        &self,
        procedures: impl IntoIterator<Item = &'a str>,
        k: usize,
        seed: u64,
    ) -> crate::Result<ProcedureFolds> {
        ProcedureFolds::new(procedures.into_iter().filter(|p| !self.contains(p)), k, seed)
    }
}

/// K-fold cross-validation by procedure, one rule for every command that has `--cv K`: the distinct procedures,
/// sorted, are shuffled with `rng_for(seed, "cv")` and dealt round-robin into K folds. For fold `f`, the
/// procedures of fold `f` are tested, those of fold `f + 1 (mod K)` select the epoch or model (val), the rest
/// train, so every instance is predicted once by a model that never saw its procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcedureFolds {
    k: usize,
    fold_of: BTreeMap<String, usize>,
}

impl ProcedureFolds {
    /// Folds over `procedures` (repeats are fine). `k` must be at least 3 (train, val and test).
    pub fn new<'a>(procedures: impl IntoIterator<Item = &'a str>, k: usize, seed: u64) -> crate::Result<Self> {
        use rand::Rng;
        if k < 3 {
            return Err(crate::Error::usage(format!(
                "--cv {k}: cross-validation needs at least 3 folds (train, val, test)"
            )));
        }
        let mut distinct: Vec<&str> =
            procedures.into_iter().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let mut rng = crate::rng::rng_for(seed, "cv");
        for j in (1..distinct.len()).rev() {
            distinct.swap(j, rng.random_range(0..=j));
        }
        let fold_of = distinct.into_iter().enumerate().map(|(i, p)| (p.to_string(), i % k)).collect();
        Ok(ProcedureFolds { k, fold_of })
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// The fold of a procedure (None for one the folds were not made over).
    pub fn fold(&self, procedure: &str) -> Option<usize> {
        self.fold_of.get(procedure).copied()
    }

    /// The role of `procedure` in fold `f`: test, val, or train (also for unknown procedures).
    pub fn role(&self, procedure: &str, f: usize) -> Split {
        match self.fold(procedure) {
            Some(g) if g == f => Split::Test,
            Some(g) if g == (f + 1) % self.k => Split::Val,
            _ => Split::Train,
        }
    }

    /// The (train, val, test) indices of fold `f` over items whose procedure `procedure_of` gives.
    pub fn indices<T>(&self, items: &[T], f: usize, procedure_of: impl Fn(&T) -> &str) -> [Vec<usize>; 3] {
        let mut parts: [Vec<usize>; 3] = Default::default();
        for (i, item) in items.iter().enumerate() {
            let part = match self.role(procedure_of(item), f) {
                Split::Train => 0,
                Split::Val => 1,
                Split::Test => 2,
            };
            parts[part].push(i);
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn train_only_procedures_train_in_every_fold() {
        let t = TrainOnly::new(vec!["extra/".into(), "more/".into()]).unwrap();
        let studied = ["a", "b", "c", "d", "e", "f", "g"];
        let all = studied.iter().copied().chain(["extra/x", "more/y", "extra/z"]);
        let folds = t.folds(all, 3, 5).unwrap();
        assert_eq!(folds, ProcedureFolds::new(studied, 3, 5).unwrap(), "folds over the studied procedures alone");
        for f in 0..3 {
            for p in ["extra/x", "more/y"] {
                assert_eq!(folds.role(p, f), Split::Train);
            }
        }
        assert_eq!(t.split_of("extra/x", "test"), "train");
        assert_eq!(t.split_of("a", "test"), "test");
        assert!(!t.contains("extr"));
        assert_eq!(
            t.note(3).unwrap(),
            "3 train-only instances (procedures extra/*, more/*) in the training set of every fold or split, never selected on, predicted or scored"
        );
        assert_eq!(TrainOnly::default().note(0), None);
        assert!(TrainOnly::new(vec![String::new()]).is_err());
    }

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

    #[test]
    fn procedure_folds_test_every_item_once_and_keep_procedures_together() {
        let procs: Vec<String> = (0..23).map(|i| format!("p{}", i % 7)).collect();
        let folds = ProcedureFolds::new(procs.iter().map(String::as_str), 4, 3).unwrap();
        let mut tested = vec![0; procs.len()];
        let mut sizes = [0usize; 4];
        (0..7).for_each(|p| sizes[folds.fold(&format!("p{p}")).unwrap()] += 1);
        assert_eq!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap(), 1, "{sizes:?}");
        for f in 0..4 {
            let [train, val, test] = folds.indices(&procs, f, |p| p.as_str());
            assert_eq!(train.len() + val.len() + test.len(), procs.len());
            let of = |ix: &[usize]| ix.iter().map(|&i| procs[i].clone()).collect::<std::collections::BTreeSet<_>>();
            assert!(of(&test).is_disjoint(&of(&train)) && of(&test).is_disjoint(&of(&val)));
            assert!(of(&val).is_disjoint(&of(&train)));
            test.iter().for_each(|&i| tested[i] += 1);
        }
        assert!(tested.iter().all(|&t| t == 1), "{tested:?}");
        let reversed: Vec<&str> = procs.iter().rev().map(String::as_str).collect();
        assert_eq!(folds, ProcedureFolds::new(reversed, 4, 3).unwrap(), "input order does not matter");
        assert_ne!(folds, ProcedureFolds::new(procs.iter().map(String::as_str), 4, 4).unwrap());
        assert!(ProcedureFolds::new(["a", "b", "c"], 2, 0).is_err());
    }
}
