//! Step DAGs and their linear extensions (the valid orders of a procedure).
//!
//! Counting is exact: a dynamic programme over the *order ideals* (down-closed step sets) of the DAG, stored
//! level by level as sorted bitmasks, so only reachable subsets are visited. The same table gives a uniform
//! sampler over linear extensions (choose the next step with probability proportional to the number of ways
//! to finish) and a lexicographic enumerator. Edges are `[a, b]` = step `a` before step `b` (0-based).
//! Sequencing code that needs the valid orders of a window of steps can use [`LinearExtensions`] on the
//! induced sub-DAG ([`induced_edges`]).

use rand::Rng;
use stepwise_core::procedure::ValidOrders;

/// The most nodes a DAG may have here (bitmasks are `u32`).
pub const MAX_NODES: usize = 32;
/// Refuse DAGs with more order ideals than this (they would need too much memory); the world never comes close.
pub const MAX_IDEALS: usize = 4_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    #[error("{0} nodes: at most {MAX_NODES} are supported")]
    TooManyNodes(usize),
    #[error("edge [{0}, {1}] names a node outside 0..{2}")]
    BadEdge(usize, usize, usize),
    #[error("the constraints contain a cycle")]
    Cycle,
    #[error("more than {MAX_IDEALS} order ideals: the DAG is too wide to count exactly")]
    TooWide,
}

/// For each node, the mask of its direct predecessors.
pub fn predecessor_masks(n: usize, edges: &[[usize; 2]]) -> Result<Vec<u32>, OrderError> {
    if n > MAX_NODES {
        return Err(OrderError::TooManyNodes(n));
    }
    let mut preds = vec![0u32; n];
    for &[a, b] in edges {
        if a >= n || b >= n {
            return Err(OrderError::BadEdge(a, b, n));
        }
        if a == b {
            return Err(OrderError::Cycle);
        }
        preds[b] |= 1 << a;
    }
    Ok(preds)
}

/// True when `order` is a permutation of `0..n` that puts every edge's source before its target.
pub fn is_topological_order(n: usize, edges: &[[usize; 2]], order: &[usize]) -> bool {
    if !stepwise_core::sequencing::is_permutation(order, n) {
        return false;
    }
    let mut pos = vec![0usize; n];
    for (i, &s) in order.iter().enumerate() {
        pos[s] = i;
    }
    edges.iter().all(|&[a, b]| a < n && b < n && pos[a] < pos[b])
}

/// For each node, the mask of all nodes reachable from it (its descendants, itself excluded).
pub fn descendant_masks(n: usize, edges: &[[usize; 2]]) -> Result<Vec<u32>, OrderError> {
    let preds = predecessor_masks(n, edges)?;
    let topo = topological_order(&preds).ok_or(OrderError::Cycle)?;
    let mut desc = vec![0u32; n];
    for &v in topo.iter().rev() {
        let mut m = 0u32;
        for &[a, b] in edges {
            if a == v {
                m |= (1 << b) | desc[b];
            }
        }
        desc[v] = m;
    }
    Ok(desc)
}

/// The transitive reduction of a DAG: the fewest edges with the same reachability, sorted.
pub fn transitive_reduction(n: usize, edges: &[[usize; 2]]) -> Result<Vec<[usize; 2]>, OrderError> {
    let desc = descendant_masks(n, edges)?;
    let mut direct = vec![0u32; n];
    for &[a, b] in edges {
        direct[a] |= 1 << b;
    }
    let mut out = Vec::new();
    for a in 0..n {
        // b is redundant when it is reachable through another direct successor of a.
        let mut via = 0u32;
        for c in bits(direct[a]) {
            via |= desc[c];
        }
        for b in bits(direct[a] & !via) {
            out.push([a, b]);
        }
    }
    Ok(out)
}

/// The edges among `nodes` implied by the DAG (including through nodes outside the set), renumbered to
/// positions in `nodes`, transitively reduced.
pub fn induced_edges(n: usize, edges: &[[usize; 2]], nodes: &[usize]) -> Result<Vec<[usize; 2]>, OrderError> {
    let desc = descendant_masks(n, edges)?;
    let mut out = Vec::new();
    for (i, &a) in nodes.iter().enumerate() {
        for (j, &b) in nodes.iter().enumerate() {
            if a < n && b < n && desc[a] & (1 << b) != 0 {
                out.push([i, j]);
            }
        }
    }
    transitive_reduction(nodes.len(), &out)
}

/// Kahn's algorithm with the smallest available node first; None on a cycle.
fn topological_order(preds: &[u32]) -> Option<Vec<usize>> {
    let n = preds.len();
    let mut done = 0u32;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let v = (0..n).find(|&v| done & (1 << v) == 0 && preds[v] & !done == 0)?;
        done |= 1 << v;
        out.push(v);
    }
    Some(out)
}

fn bits(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(b)
    })
}

/// The linear extensions of a DAG: exact count, enumeration, uniform sampling.
#[derive(Debug, Clone)]
pub struct LinearExtensions {
    n: usize,
    preds: Vec<u32>,
    /// `levels[k]`: the ideals with k nodes, sorted, each with the number of ways to complete it.
    levels: Vec<Vec<(u32, u128)>>,
}

impl LinearExtensions {
    pub fn new(n: usize, edges: &[[usize; 2]]) -> Result<Self, OrderError> {
        let preds = predecessor_masks(n, edges)?;
        let full: u32 = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        // Forward pass: the ideals of each size.
        let mut levels: Vec<Vec<(u32, u128)>> = Vec::with_capacity(n + 1);
        levels.push(vec![(0, 0)]);
        let mut total = 1usize;
        let mut next: Vec<u32> = Vec::new();
        for k in 0..n {
            next.clear();
            for &(ideal, _) in &levels[k] {
                for v in bits(available(&preds, ideal, full)) {
                    next.push(ideal | (1 << v));
                }
            }
            next.sort_unstable();
            next.dedup();
            if next.is_empty() {
                return Err(OrderError::Cycle);
            }
            total += next.len();
            if total > MAX_IDEALS {
                return Err(OrderError::TooWide);
            }
            levels.push(next.iter().map(|&m| (m, 0)).collect());
        }
        // Backward pass: ways to complete each ideal.
        levels[n][0].1 = 1;
        for k in (0..n).rev() {
            let (lower, upper) = levels.split_at_mut(k + 1);
            let above = &upper[0];
            for entry in lower[k].iter_mut() {
                let mut ways = 0u128;
                for v in bits(available(&preds, entry.0, full)) {
                    ways = ways.saturating_add(lookup(above, entry.0 | (1 << v)));
                }
                entry.1 = ways;
            }
        }
        Ok(LinearExtensions { n, preds, levels })
    }

    /// The exact number of valid orders (fits: at most 32! < 2^128).
    pub fn count(&self) -> u128 {
        self.levels[0][0].1
    }

    /// The count saturated to `u64`.
    pub fn count_u64(&self) -> u64 {
        u64::try_from(self.count()).unwrap_or(u64::MAX)
    }

    /// The number of order ideals (the DP's table size).
    pub fn ideal_count(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    fn ways(&self, ideal: u32) -> u128 {
        lookup(&self.levels[ideal.count_ones() as usize], ideal)
    }

    fn full(&self) -> u32 {
        if self.n == 32 { u32::MAX } else { (1u32 << self.n) - 1 }
    }

    /// All valid orders in lexicographic order, or None when there are more than `cap`.
    pub fn enumerate(&self, cap: usize) -> Option<Vec<Vec<usize>>> {
        if self.count() > cap as u128 {
            return None;
        }
        let mut out = Vec::with_capacity(self.count() as usize);
        let mut prefix = Vec::with_capacity(self.n);
        self.enumerate_from(0, &mut prefix, &mut out);
        Some(out)
    }

    fn enumerate_from(&self, ideal: u32, prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if prefix.len() == self.n {
            out.push(prefix.clone());
            return;
        }
        for v in bits(available(&self.preds, ideal, self.full())) {
            prefix.push(v);
            self.enumerate_from(ideal | (1 << v), prefix, out);
            prefix.pop();
        }
    }

    /// One valid order drawn uniformly at random.
    pub fn sample(&self, rng: &mut impl Rng) -> Vec<usize> {
        let mut ideal = 0u32;
        let mut order = Vec::with_capacity(self.n);
        while order.len() < self.n {
            let total = self.ways(ideal);
            let mut r = rng.random_range(0..total);
            let mut chosen = None;
            for v in bits(available(&self.preds, ideal, self.full())) {
                let w = self.ways(ideal | (1 << v));
                if r < w {
                    chosen = Some(v);
                    break;
                }
                r -= w;
            }
            let v = chosen.expect("the ways of an ideal are the sum of its successors' ways");
            ideal |= 1 << v;
            order.push(v);
        }
        order
    }

    /// The valid orders as the corpus records them: all of them (lexicographic, so the authored identity order
    /// comes first) when there are at most `cap`; otherwise the identity order followed by up to `samples`
    /// distinct uniform samples (fewer if sampling keeps repeating), with `complete: false`.
    pub fn valid_orders(&self, cap: usize, samples: usize, rng: &mut impl Rng) -> ValidOrders {
        let count = self.count_u64();
        if let Some(orders) = self.enumerate(cap) {
            return ValidOrders { count, orders, complete: true };
        }
        let identity: Vec<usize> = (0..self.n).collect();
        let mut seen = std::collections::BTreeSet::new();
        seen.insert(identity.clone());
        let mut orders = vec![identity];
        let mut attempts = 0;
        while orders.len() < samples + 1 && attempts < samples * 4 {
            attempts += 1;
            let o = self.sample(rng);
            if seen.insert(o.clone()) {
                orders.push(o);
            }
        }
        ValidOrders { count, orders, complete: false }
    }
}

fn available(preds: &[u32], ideal: u32, full: u32) -> u32 {
    let mut m = 0u32;
    for v in bits(full & !ideal) {
        if preds[v] & !ideal == 0 {
            m |= 1 << v;
        }
    }
    m
}

fn lookup(level: &[(u32, u128)], ideal: u32) -> u128 {
    match level.binary_search_by_key(&ideal, |e| e.0) {
        Ok(i) => level[i].1,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::rng::rng_for;

    fn brute_force(n: usize, edges: &[[usize; 2]]) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        stepwise_core::sequencing::for_each_permutation(n, |p| {
            if is_topological_order(n, edges, p) {
                out.push(p.to_vec());
            }
        });
        out.sort();
        out
    }

    #[test]
    fn counts_and_enumeration_match_brute_force_on_random_dags() {
        use rand::Rng;
        for case in 0..200 {
            let mut rng = rng_for(case, "orders-test");
            let n = rng.random_range(1..=7);
            let mut edges = Vec::new();
            for a in 0..n {
                for b in a + 1..n {
                    if rng.random_bool(0.3) {
                        edges.push([a, b]);
                    }
                }
            }
            let le = LinearExtensions::new(n, &edges).unwrap();
            let brute = brute_force(n, &edges);
            assert_eq!(le.count(), brute.len() as u128, "case {case}: {edges:?}");
            assert_eq!(le.enumerate(10_000).unwrap(), brute);
            let red = transitive_reduction(n, &edges).unwrap();
            assert_eq!(brute_force(n, &red), brute, "reduction keeps the orders");
        }
    }

    #[test]
    fn known_counts() {
        // An antichain of 5: 5! orders; a chain: 1; two chains of 2 and 3: C(5,2) = 10.
        assert_eq!(LinearExtensions::new(5, &[]).unwrap().count(), 120);
        assert_eq!(LinearExtensions::new(4, &[[0, 1], [1, 2], [2, 3]]).unwrap().count(), 1);
        assert_eq!(LinearExtensions::new(5, &[[0, 1], [2, 3], [3, 4]]).unwrap().count(), 10);
        // 20 independent steps: 20! fits in u64.
        let le = LinearExtensions::new(20, &[]).unwrap();
        assert_eq!(le.count_u64(), 2_432_902_008_176_640_000);
    }

    #[test]
    fn cycles_and_bad_edges_are_errors() {
        assert_eq!(LinearExtensions::new(3, &[[0, 1], [1, 2], [2, 0]]).unwrap_err(), OrderError::Cycle);
        assert_eq!(LinearExtensions::new(2, &[[0, 2]]).unwrap_err(), OrderError::BadEdge(0, 2, 2));
        assert_eq!(LinearExtensions::new(33, &[]).unwrap_err(), OrderError::TooManyNodes(33));
    }

    #[test]
    fn sampling_is_uniform() {
        // Two chains 0<1 and 2<3<4: 10 orders, each should get ~1/10 of the draws.
        let edges = [[0, 1], [2, 3], [3, 4]];
        let le = LinearExtensions::new(5, &edges).unwrap();
        let mut rng = rng_for(1, "uniform");
        let mut hist = std::collections::BTreeMap::new();
        let draws = 20_000;
        for _ in 0..draws {
            let o = le.sample(&mut rng);
            assert!(is_topological_order(5, &edges, &o));
            *hist.entry(o).or_insert(0usize) += 1;
        }
        assert_eq!(hist.len(), 10);
        for (o, c) in hist {
            // Expected 2000 each; 5 standard deviations is about 212.
            assert!((c as f64 - 2000.0).abs() < 212.0, "{o:?}: {c}");
        }
    }

    #[test]
    fn valid_orders_caps_and_samples() {
        let le = LinearExtensions::new(6, &[]).unwrap();
        let mut rng = rng_for(3, "cap");
        let v = le.valid_orders(50, 49, &mut rng);
        assert_eq!(v.count, 720);
        assert!(!v.complete);
        assert_eq!(v.orders.len(), 50);
        assert_eq!(v.orders[0], vec![0, 1, 2, 3, 4, 5]);
        let distinct: std::collections::BTreeSet<_> = v.orders.iter().collect();
        assert_eq!(distinct.len(), 50);
        let all = le.valid_orders(720, 10, &mut rng);
        assert!(all.complete);
        assert_eq!(all.orders.len(), 720);
    }

    #[test]
    fn induced_edges_follow_paths_through_missing_nodes() {
        // 0 -> 1 -> 2; the window {0, 2} keeps 0 before 2.
        assert_eq!(induced_edges(3, &[[0, 1], [1, 2]], &[0, 2]).unwrap(), vec![[0, 1]]);
        assert_eq!(induced_edges(3, &[[0, 1]], &[2, 1]).unwrap(), Vec::<[usize; 2]>::new());
    }
}
