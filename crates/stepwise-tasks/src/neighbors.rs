//! Nearest neighbours of question items among the items of *other* procedures (RecipeQA §3: distractors come
//! from other recipes through k-NN), computed once per item and shared by every mode of a sweep.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use stepwise_core::{Error, Result};
use stepwise_features::Metric;
use stepwise_features::ann::{AnnIndex, AnnParams};
use stepwise_features::knn::{KnnOptions, knn};

use crate::catalog::{Catalog, OwnerIndex};
use crate::config::NeighborSearch;
use crate::ivf::{Ivf, IvfParams};
use crate::range::RangeIndex;

/// Queries per k-NN call: bounds the memory of one batch's results.
const BATCH: usize = 4096;

/// The K nearest neighbours (item, distance), sorted by (distance, item), of the items asked for so far.
/// Neighbours never share a procedure with the query item.
pub struct NeighborTable {
    k: usize,
    search: NeighborSearch,
    lists: HashMap<u32, Box<[(u32, f32)]>>,
    /// The HNSW graph, built on first use.
    index: Option<AnnIndex>,
    /// The IVF lists, trained on first use (seeded by `seed`).
    ivf: Option<Ivf>,
    /// The queries whose neighbours IVF found (not exact fallbacks).
    ivf_answered: HashSet<u32>,
    /// The range-search index (knob 2's widening), built on first use from the IVF lists.
    ranges: std::sync::OnceLock<RangeIndex>,
    seed: u64,
    /// How the neighbours were found (`exact`, `hnsw`), for manifests.
    used: BTreeSet<&'static str>,
    /// HNSW queries that had to fall back to exact search (too many results from their own procedure).
    pub exact_fallbacks: usize,
    /// In a shard of a sweep: the queries whose fallbacks this table counts (those no earlier shard also asks
    /// for), so the shards' counts add up to a full run's.
    counted: Option<BTreeSet<u32>>,
}

impl NeighborTable {
    pub fn new(k: usize, search: NeighborSearch) -> Self {
        Self::with_seed(k, search, 0)
    }

    /// A table whose approximate index (IVF) is trained with `seed`.
    pub fn with_seed(k: usize, search: NeighborSearch, seed: u64) -> Self {
        NeighborTable {
            k,
            search,
            lists: HashMap::new(),
            index: None,
            ivf: None,
            ivf_answered: HashSet::new(),
            ranges: std::sync::OnceLock::new(),
            seed,
            used: BTreeSet::new(),
            exact_fallbacks: 0,
            counted: None,
        }
    }

    /// The search methods used so far (`exact`, `hnsw`, `ivf`), IVF with its lists and probes
    /// (`ivf(lists=483,probes=8)`).
    pub fn methods(&self) -> Vec<String> {
        self.used
            .iter()
            .map(|&m| match (m, &self.ivf) {
                ("ivf", Some(ivf)) => format!("ivf(lists={},probes={})", ivf.lists(), ivf.probes()),
                _ => m.to_string(),
            })
            .collect()
    }

    pub fn k(&self) -> usize {
        self.k
    }

    pub fn len(&self) -> usize {
        self.lists.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// The neighbours of `item`; it must have been computed with [`NeighborTable::ensure`].
    pub fn get(&self, item: u32) -> &[(u32, f32)] {
        self.lists.get(&item).map(|b| &b[..]).expect("neighbours are computed for every planned query item")
    }

    /// Compute the neighbours of the `queries` not computed yet.
    pub fn ensure(&mut self, cat: &Catalog, queries: &BTreeSet<u32>) -> Result<()> {
        self.ensure_as_part_of(cat, queries, queries, None)
    }

    /// Compute the neighbours of the `queries` not computed yet, choosing the search method (`auto`) as for all
    /// of `planned` (a superset: a shard of a sweep searches its own queries the way the whole run would), and
    /// counting exact fallbacks only of the queries in `counted` (when given).
    pub fn ensure_as_part_of(
        &mut self,
        cat: &Catalog,
        queries: &BTreeSet<u32>,
        planned: &BTreeSet<u32>,
        counted: Option<BTreeSet<u32>>,
    ) -> Result<()> {
        self.counted = counted;
        let todo: Vec<u32> = queries.iter().copied().filter(|q| !self.lists.contains_key(q)).collect();
        if todo.is_empty() || cat.is_empty() {
            return Ok(());
        }
        let planned_todo = planned.iter().filter(|q| !self.lists.contains_key(q)).count().max(todo.len());
        match self.search.resolve(planned_todo, cat.len()) {
            NeighborSearch::Hnsw { ef } => self.hnsw(cat, &todo, ef)?,
            NeighborSearch::Ivf { probes } => self.ivf(cat, &todo, probes),
            _ => self.exact(cat, &todo),
        }
        Ok(())
    }

    /// The exact range-search index of `cat` ([`crate::range`]): over this table's IVF lists when it has them,
    /// else over k-means lists trained here (same seed), once; safe to ask from many threads.
    pub fn ranges(&self, cat: &Catalog) -> &RangeIndex {
        self.ranges.get_or_init(|| {
            let members = match &self.ivf {
                Some(ivf) => ivf.members().to_vec(),
                None => {
                    let (metric, _) = Self::search_metric(cat);
                    let params = IvfParams { probes: 1, ..Default::default() };
                    Ivf::build(&cat.data, cat.dim, metric, &params, self.seed).members().to_vec()
                }
            };
            RangeIndex::new(cat, members)
        })
    }

    /// The lists each query of a widened search scans ([`RangeIndex::within`]'s `only`): when IVF found the
    /// neighbours of every query, the lists its own search probed (sorted) — the candidates its neighbours came
    /// from, so widening stays as approximate as the neighbours (a full-catalog range search from each widened
    /// question dominated the 20,000-procedure sweep). `None`, the whole catalog, when any query's
    /// neighbours are exact (exact search, or an IVF query that fell back to it) or from HNSW.
    pub fn probed_lists(&self, queries: &[u32]) -> Option<Vec<Vec<u32>>> {
        let ivf = self.ivf.as_ref()?;
        if !queries.iter().all(|q| self.ivf_answered.contains(q)) {
            return None;
        }
        let lists = queries.iter().map(|&q| {
            let mut lists = ivf.probes_of(q).to_vec();
            lists.sort_unstable();
            lists.dedup();
            lists
        });
        Some(lists.collect())
    }

    /// IVF search ([`crate::ivf`]): k-means lists trained once per catalog (seeded by `seed`), each query scans
    /// its nearest lists exactly. A query left with fewer than K neighbours (when the catalog has more) is
    /// answered exactly instead.
    fn ivf(&mut self, cat: &Catalog, todo: &[u32], probes: usize) {
        self.used.insert("ivf");
        let (metric, shift) = Self::search_metric(cat);
        if self.ivf.is_none() {
            let pb = stepwise_core::progress::spinner("clustering the catalog");
            let params = IvfParams { probes, ..Default::default() };
            self.ivf = Some(Ivf::build(&cat.data, cat.dim, metric, &params, self.seed));
            pb.finish_and_clear();
        }
        let ivf = self.ivf.as_ref().expect("built above");
        let slack = own_items(cat);
        let owners = OwnerIndex::new(cat);
        let keep = |q: u32, j: u32| j != q && !owners.share(cat, q, j);
        let mut fallback = Vec::new();
        let pb = stepwise_core::progress::bar(todo.len() as u64, "neighbours");
        for chunk in todo.chunks(BATCH * 16) {
            let found = ivf.search(&cat.data, chunk, self.k, &keep);
            for (&q, list) in chunk.iter().zip(found) {
                let possible = cat.len().saturating_sub(slack(q)).min(self.k);
                if list.len() < possible {
                    fallback.push(q);
                } else {
                    self.ivf_answered.insert(q);
                    self.lists.insert(q, list.into_iter().map(|(i, d)| (i, d + shift)).collect());
                }
            }
            pb.inc(chunk.len() as u64);
        }
        pb.finish_and_clear();
        if !fallback.is_empty() {
            self.exact_fallbacks +=
                fallback.iter().filter(|q| self.counted.as_ref().is_none_or(|c| c.contains(q))).count();
            self.exact(cat, &fallback);
        }
    }

    /// Cosine on unit rows is 1 − dot: search by inner product (cheaper) and shift the distances back.
    fn search_metric(cat: &Catalog) -> (Metric, f32) {
        match cat.metric {
            Metric::Cosine => (Metric::InnerProduct, 1.0f32),
            m => (m, 0.0),
        }
    }

    /// Exact search, parallel over queries, neighbours of the query's own procedures filtered out.
    fn exact(&mut self, cat: &Catalog, todo: &[u32]) {
        self.used.insert("exact");
        let pb = stepwise_core::progress::bar(todo.len() as u64, "neighbours");
        let (metric, shift) = Self::search_metric(cat);
        let opts = KnnOptions { k: self.k, metric };
        let owners = OwnerIndex::new(cat);
        for chunk in todo.chunks(BATCH) {
            let mut queries = Vec::with_capacity(chunk.len() * cat.dim);
            for &q in chunk {
                queries.extend_from_slice(cat.row(q));
            }
            let filter = |qi: usize, j: usize| {
                let q = chunk[qi];
                j as u32 != q && !owners.share(cat, q, j as u32)
            };
            let results = knn(&cat.data, &queries, cat.dim, opts, Some(&filter));
            for (&q, res) in chunk.iter().zip(results) {
                let list: Box<[(u32, f32)]> = res.into_iter().map(|n| (n.index as u32, n.distance + shift)).collect();
                self.lists.insert(q, list);
            }
            pb.inc(chunk.len() as u64);
        }
        pb.finish_and_clear();
    }

    /// HNSW search: the graph is built on one thread in catalog order (reproducible); each query asks for K plus
    /// the number of items of its own procedures, which are then filtered out. A query left with fewer than K
    /// neighbours (when the catalog has more) is answered exactly instead.
    fn hnsw(&mut self, cat: &Catalog, todo: &[u32], ef: usize) -> Result<()> {
        self.used.insert("hnsw");
        let (metric, shift) = Self::search_metric(cat);
        if self.index.is_none() {
            let pb = stepwise_core::progress::spinner("building the neighbour graph");
            let params =
                AnnParams { connectivity: 16, expansion_add: 128, expansion_search: ef, parallel_build: false };
            let index =
                AnnIndex::build(&cat.data, cat.dim, metric, &params).map_err(|e| Error::runtime(e.to_string()))?;
            pb.finish_and_clear();
            self.index = Some(index);
        }
        let index = self.index.as_ref().expect("built above");
        let slack = own_items(cat);
        let pb = stepwise_core::progress::bar(todo.len() as u64, "neighbours");
        let mut fallback = Vec::new();
        // Queries grouped by how many results they need, so most ask for little more than K.
        let mut by_need: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for &q in todo {
            let need = (self.k + slack(q)).min(cat.len());
            by_need.entry(need.next_power_of_two().min(cat.len())).or_default().push(q);
        }
        for (need, qs) in by_need {
            index.set_expansion_search(ef.max(need));
            for chunk in qs.chunks(BATCH) {
                let mut queries = Vec::with_capacity(chunk.len() * cat.dim);
                for &q in chunk {
                    queries.extend_from_slice(cat.row(q));
                }
                let results = index.search(&queries, need).map_err(|e| Error::runtime(e.to_string()))?;
                for (&q, res) in chunk.iter().zip(results) {
                    let list: Box<[(u32, f32)]> = res
                        .into_iter()
                        .filter(|n| n.index as u32 != q && !cat.share_owner(q, n.index as u32))
                        .take(self.k)
                        .map(|n| (n.index as u32, n.distance + shift))
                        .collect();
                    let possible = cat.len().saturating_sub(slack(q)).min(self.k);
                    if list.len() < possible {
                        fallback.push(q);
                    } else {
                        self.lists.insert(q, list);
                    }
                }
                pb.inc(chunk.len() as u64);
            }
        }
        pb.finish_and_clear();
        if !fallback.is_empty() {
            self.exact_fallbacks +=
                fallback.iter().filter(|q| self.counted.as_ref().is_none_or(|c| c.contains(q))).count();
            self.exact(cat, &fallback);
        }
        Ok(())
    }
}

/// For a query item, an upper bound on the catalog items the same-procedure filter removes (the items of its
/// procedures, plus itself).
fn own_items(cat: &Catalog) -> impl Fn(u32) -> usize + '_ {
    let mut per_proc = vec![0usize; cat.procs.len()];
    for it in &cat.items {
        for &o in &it.owners {
            per_proc[o as usize] += 1;
        }
    }
    move |q: u32| cat.items[q as usize].owners.iter().map(|&o| per_proc[o as usize]).sum::<usize>() + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Item;
    use crate::config::ItemKind;

    fn cat(points: &[(f32, f32)], owners: &[&[u32]], metric: Metric) -> Catalog {
        Catalog {
            kind: ItemKind::Image,
            metric,
            dim: 2,
            data: points.iter().flat_map(|&(x, y)| [x, y]).collect(),
            items: owners
                .iter()
                .enumerate()
                .map(|(i, o)| Item { feature_id: format!("image:{i}"), content: format!("{i}"), owners: o.to_vec() })
                .collect(),
            procs: Vec::new(),
            norms: Default::default(),
        }
    }

    #[test]
    fn neighbours_skip_items_of_the_same_procedure_and_are_sorted() {
        let c = cat(
            &[(0.0, 0.0), (0.1, 0.0), (0.5, 0.0), (0.2, 0.0), (3.0, 0.0)],
            &[&[0], &[0], &[1], &[0, 2], &[]],
            Metric::L2,
        );
        let mut t = NeighborTable::new(10, NeighborSearch::Exact);
        t.ensure(&c, &BTreeSet::from([0])).unwrap();
        let got: Vec<u32> = t.get(0).iter().map(|n| n.0).collect();
        // item 1 (same procedure) and 3 (shared with procedure 0) are excluded; the pool item is a candidate.
        assert_eq!(got, vec![2, 4]);
        assert!((t.get(0)[0].1 - 0.5).abs() < 1e-6);
    }

    #[test]
    fn hnsw_agrees_with_exact_search_and_is_reproducible() {
        // 600 items in 60 procedures of 10, random unit vectors in 8 dimensions.
        use rand::Rng;
        let mut rng = stepwise_core::rng::rng_for(1, "hnsw-test");
        let n = 600;
        let points: Vec<(f32, f32)> = Vec::new();
        let mut c = cat(&points, &[], Metric::Cosine);
        c.dim = 8;
        c.data = (0..n * 8).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        stepwise_features::encoder::l2_normalize_rows(&mut c.data, 8);
        c.items = (0..n)
            .map(|i| Item { feature_id: format!("image:{i}"), content: format!("{i}"), owners: vec![(i / 10) as u32] })
            .collect();
        c.procs = vec![crate::catalog::ProcEntry { eligible: Vec::new(), excluded: Vec::new() }; 60];
        let queries: BTreeSet<u32> = (0..n as u32).step_by(7).collect();
        let mut exact = NeighborTable::new(20, NeighborSearch::Exact);
        exact.ensure(&c, &queries).unwrap();
        let mut approx = NeighborTable::new(20, NeighborSearch::Hnsw { ef: 128 });
        approx.ensure(&c, &queries).unwrap();
        let mut again = NeighborTable::new(20, NeighborSearch::Hnsw { ef: 128 });
        again.ensure(&c, &queries).unwrap();
        let (mut hit, mut total) = (0, 0);
        for &q in &queries {
            let e: BTreeSet<u32> = exact.get(q).iter().map(|n| n.0).collect();
            let a = approx.get(q);
            assert_eq!(a.len(), 20);
            assert!(a.iter().all(|n| !c.share_owner(q, n.0)));
            assert_eq!(a, again.get(q));
            hit += a.iter().filter(|n| e.contains(&n.0)).count();
            total += 20;
        }
        assert!(hit as f64 / total as f64 > 0.95, "recall {hit}/{total}");
        assert_eq!(approx.methods(), vec!["hnsw"]);
    }

    #[test]
    fn ivf_widening_scans_the_lists_the_neighbours_came_from() {
        // 600 items in 60 procedures of 10, random points in 8 dimensions; 25 IVF lists, 2 probed.
        use rand::Rng;
        let mut rng = stepwise_core::rng::rng_for(2, "ivf-widening-test");
        let n = 600;
        let mut c = cat(&[], &[], Metric::L2);
        c.dim = 8;
        c.data = (0..n * 8).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        c.items = (0..n)
            .map(|i| Item { feature_id: format!("image:{i}"), content: format!("{i}"), owners: vec![(i / 10) as u32] })
            .collect();
        c.procs = vec![crate::catalog::ProcEntry { eligible: Vec::new(), excluded: Vec::new() }; 60];
        let queries: BTreeSet<u32> = (0..n as u32).step_by(13).collect();
        let mut ivf = NeighborTable::new(20, NeighborSearch::Ivf { probes: 2 });
        ivf.ensure(&c, &queries).unwrap();
        let mut exact = NeighborTable::new(20, NeighborSearch::Exact);
        exact.ensure(&c, &queries).unwrap();
        let members = ivf.ivf.as_ref().unwrap().members().to_vec();
        let list_of = |x: u32| members.iter().position(|m| m.contains(&x)).unwrap() as u32;
        let (mut partial, mut checked) = (0, 0);
        for &q in &queries {
            assert_eq!(exact.probed_lists(&[q]), None, "exact neighbours widen over the whole catalog");
            if !ivf.ivf_answered.contains(&q) {
                assert_eq!(ivf.probed_lists(&[q]), None, "an exact fallback widens over the whole catalog");
                continue;
            }
            let only = ivf.probed_lists(&[q]).unwrap();
            assert_eq!(only.len(), 1);
            let lists = &only[0];
            assert!(!lists.is_empty() && lists.len() <= 2 && lists.windows(2).all(|w| w[0] < w[1]), "{lists:?}");
            // Every IVF neighbour comes from a probed list, so a widening past the last neighbour keeps them all.
            assert!(ivf.get(q).iter().all(|nb| lists.contains(&list_of(nb.0))));
            let bound = ivf.get(q).last().unwrap().1 * 1.05;
            let ranges = ivf.ranges(&c);
            let wide = ranges.within(&c, &[q], 0.0, bound, Some(&only));
            let full = ranges.within(&c, &[q], 0.0, bound, None);
            assert!(ivf.get(q).iter().all(|nb| wide.iter().any(|w| w.item == nb.0)));
            assert!(wide.iter().all(|w| full.contains(w) && lists.contains(&list_of(w.item))));
            partial += usize::from(wide.len() < full.len());
            checked += 1;
        }
        assert!(checked > 30, "{checked} queries answered by IVF");
        assert!(partial > 0, "some widening misses items outside the probed lists");
        // Two queries: each keeps its own lists.
        let (a, b) = (0u32, 13u32);
        if let (Some(la), Some(lb)) = (ivf.probed_lists(&[a]), ivf.probed_lists(&[b])) {
            assert_eq!(ivf.probed_lists(&[a, b]), Some([la, lb].concat()));
        }
    }

    #[test]
    fn cosine_distances_match_the_metric() {
        let mut c = cat(&[(1.0, 0.0), (0.0, 2.0), (1.0, 1.0)], &[&[0], &[1], &[2]], Metric::Cosine);
        stepwise_features::encoder::l2_normalize_rows(&mut c.data, 2);
        let mut t = NeighborTable::new(2, NeighborSearch::Exact);
        t.ensure(&c, &BTreeSet::from([0])).unwrap();
        let l = t.get(0);
        assert_eq!(l[0].0, 2);
        assert!((l[0].1 - (1.0 - 0.5f32.sqrt())).abs() < 1e-5);
        assert!((l[1].1 - 1.0).abs() < 1e-5);
    }
}
