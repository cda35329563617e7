//! Valid orders of a window of steps: the linear extensions of the step DAG induced on the window.
//!
//! A window's sub-DAG must keep the *transitive* constraints of the whole procedure (a → b → c with b outside
//! the window still forces a before c), so we close the procedure's constraints first and then restrict. Orders
//! here are lists of window positions (0 = the window's first step in authored order).

use rand::Rng;
use stepwise_core::rng::ChaCha8Rng;

/// The transitive closure of `constraints` (`[a, b]` = step a before step b) over `n` steps:
/// `closure[a][b]` is true when a must come before b. Errors describe an out-of-range index or a cycle.
pub fn transitive_closure(n: usize, constraints: &[[usize; 2]]) -> Result<Vec<Vec<bool>>, String> {
    let mut c = vec![vec![false; n]; n];
    for (k, &[a, b]) in constraints.iter().enumerate() {
        if a >= n || b >= n {
            return Err(format!("[{k}] = [{a}, {b}]: step index out of range (the procedure has {n} steps)"));
        }
        if a == b {
            return Err(format!("[{k}] = [{a}, {b}]: a step cannot precede itself"));
        }
        c[a][b] = true;
    }
    // Floyd–Warshall style closure; procedures have tens of steps, so O(n³) is nothing.
    for k in 0..n {
        let row_k = c[k].clone();
        for row in c.iter_mut() {
            if row[k] {
                row.iter_mut().zip(&row_k).for_each(|(x, &via)| *x |= via);
            }
        }
    }
    if let Some(i) = (0..n).find(|&i| c[i][i]) {
        return Err(format!("the constraints have a cycle through step {i}"));
    }
    Ok(c)
}

/// For each window position, the bit mask of window positions that must precede it.
pub fn window_predecessors(closure: &[Vec<bool>], window: &[usize]) -> Vec<u32> {
    window
        .iter()
        .map(|&b| window.iter().enumerate().filter(|&(_, &a)| closure[a][b]).fold(0u32, |m, (p, _)| m | (1 << p)))
        .collect()
}

/// Counts of completions for every placed set: `ways[mask]` = number of ways to order the positions not in
/// `mask` after those in `mask` (saturating). `ways[0]` is the number of linear extensions.
pub struct Extensions {
    pred: Vec<u32>,
    ways: Vec<u64>,
}

impl Extensions {
    /// Dynamic programme over subsets; `pred.len()` must be at most [`super::MAX_STEPS`].
    pub fn new(pred: &[u32]) -> Self {
        let n = pred.len();
        let full = (1usize << n) - 1;
        let mut ways = vec![0u64; full + 1];
        ways[full] = 1;
        for mask in (0..full).rev() {
            let mut total = 0u64;
            for (i, &p) in pred.iter().enumerate() {
                let bit = 1usize << i;
                if mask & bit == 0 && (p as usize) & !mask == 0 {
                    total = total.saturating_add(ways[mask | bit]);
                }
            }
            ways[mask] = total;
        }
        Extensions { pred: pred.to_vec(), ways }
    }

    /// The number of valid orders (saturates at `u64::MAX`).
    pub fn count(&self) -> u64 {
        self.ways[0]
    }

    fn available(&self, mask: usize) -> impl Iterator<Item = usize> + '_ {
        self.pred
            .iter()
            .enumerate()
            .filter(move |&(i, &p)| mask & (1 << i) == 0 && (p as usize) & !mask == 0)
            .map(|(i, _)| i)
    }

    /// Every valid order, in lexicographic order of positions (call only when [`Self::count`] is small).
    pub fn all(&self) -> Vec<Vec<usize>> {
        let mut out = Vec::with_capacity(self.count() as usize);
        let mut cur = Vec::with_capacity(self.pred.len());
        self.enumerate(0, &mut cur, &mut out);
        out
    }

    fn enumerate(&self, mask: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if cur.len() == self.pred.len() {
            out.push(cur.clone());
            return;
        }
        let next: Vec<usize> = self.available(mask).collect();
        for i in next {
            cur.push(i);
            self.enumerate(mask | (1 << i), cur, out);
            cur.pop();
        }
    }

    /// One valid order drawn uniformly at random: each next position is chosen with probability proportional
    /// to the number of completions it leaves.
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> Vec<usize> {
        let mut mask = 0usize;
        let mut order = Vec::with_capacity(self.pred.len());
        while order.len() < self.pred.len() {
            let total = self.ways[mask];
            let mut r = rng.random_range(0..total.max(1));
            let mut chosen = None;
            for i in self.available(mask) {
                let w = self.ways[mask | (1 << i)];
                if r < w {
                    chosen = Some(i);
                    break;
                }
                r -= w;
            }
            // With saturated counts the draw may run past the last candidate: take the last one then.
            let i = chosen.or_else(|| self.available(mask).last()).expect("a DAG always has an available step");
            order.push(i);
            mask |= 1 << i;
        }
        order
    }
}

/// The valid orders of a window given its predecessor masks: all of them when there are at most `cap`, else
/// the authored order plus a uniform sample of distinct others up to `cap`. Returns the orders (authored first,
/// the rest sorted) and whether the list is complete.
pub fn window_orders(pred: &[u32], cap: usize, rng: &mut ChaCha8Rng) -> (Vec<Vec<usize>>, bool) {
    let n = pred.len();
    let authored: Vec<usize> = (0..n).collect();
    let ext = Extensions::new(pred);
    let (mut others, complete) = if ext.count() <= cap as u64 {
        (ext.all(), true)
    } else {
        let mut seen = std::collections::BTreeSet::new();
        seen.insert(authored.clone());
        // Rejection of duplicates; give up after many draws (only reachable with tiny caps and huge counts).
        let mut draws = 0usize;
        while seen.len() < cap && draws < cap.saturating_mul(50) {
            seen.insert(ext.sample(rng));
            draws += 1;
        }
        (seen.into_iter().collect(), false)
    };
    others.retain(|o| *o != authored);
    others.sort();
    let mut out = Vec::with_capacity(others.len() + 1);
    out.push(authored);
    out.extend(others);
    (out, complete)
}

/// Orders over procedure steps (full or partial, e.g. human annotations or a world's valid orders) restricted to
/// a window: each order that contains every window step gives the window positions in its order. Duplicates
/// are dropped; the authored order comes first, the rest sorted.
pub fn restrict_orders(orders: &[Vec<usize>], window: &[usize]) -> Vec<Vec<usize>> {
    let authored: Vec<usize> = (0..window.len()).collect();
    let mut set = std::collections::BTreeSet::new();
    for o in orders {
        let restricted: Vec<usize> = o.iter().filter_map(|s| window.iter().position(|w| w == s)).collect();
        if restricted.len() == window.len() {
            set.insert(restricted);
        }
    }
    set.remove(&authored);
    let mut out = vec![authored];
    out.extend(set);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::rng::rng_for;

    fn brute_force(pred: &[u32]) -> Vec<Vec<usize>> {
        let n = pred.len();
        let mut out = Vec::new();
        stepwise_core::sequencing::for_each_permutation(n, |p| {
            let ok = p.iter().enumerate().all(|(k, &i)| {
                let placed: u32 = p[..k].iter().fold(0, |m, &j| m | (1 << j));
                pred[i] & !placed == 0
            });
            if ok {
                out.push(p.to_vec());
            }
        });
        out.sort();
        out
    }

    #[test]
    fn closure_keeps_constraints_through_steps_outside_the_window() {
        // 0 → 2 → 4, 1 free, 3 after 1. Window {0, 1, 4}: 0 before 4 (through 2), 1 free.
        let c = transitive_closure(5, &[[0, 2], [2, 4], [1, 3]]).unwrap();
        let pred = window_predecessors(&c, &[0, 1, 4]);
        assert_eq!(pred, vec![0, 0, 0b001]);
        let ext = Extensions::new(&pred);
        assert_eq!(ext.count(), 3);
        assert_eq!(ext.all(), vec![vec![0, 1, 2], vec![0, 2, 1], vec![1, 0, 2]]);
    }

    #[test]
    fn cycles_and_bad_indices_are_errors() {
        assert!(transitive_closure(3, &[[0, 1], [1, 2], [2, 0]]).unwrap_err().contains("cycle"));
        assert!(transitive_closure(3, &[[0, 5]]).unwrap_err().contains("out of range"));
    }

    #[test]
    fn dp_count_and_enumeration_match_brute_force() {
        let mut rng = rng_for(3, "test");
        for trial in 0..200 {
            let n = 1 + trial % 7;
            // A random DAG respecting index order.
            let mut cons = Vec::new();
            for a in 0..n {
                for b in a + 1..n {
                    if rng.random_bool(0.3) {
                        cons.push([a, b]);
                    }
                }
            }
            let c = transitive_closure(n, &cons).unwrap();
            let window: Vec<usize> = (0..n).collect();
            let pred = window_predecessors(&c, &window);
            let ext = Extensions::new(&pred);
            let bf = brute_force(&pred);
            assert_eq!(ext.count() as usize, bf.len());
            assert_eq!(ext.all(), bf);
        }
    }

    #[test]
    fn sampling_is_uniform_over_linear_extensions() {
        // Two chains 0<1 and 2<3: C(4,2) = 6 extensions, each should be drawn ~1/6 of the time.
        let pred = vec![0, 0b0001, 0, 0b0100];
        let ext = Extensions::new(&pred);
        assert_eq!(ext.count(), 6);
        let mut rng = rng_for(1, "uniform");
        let mut counts = std::collections::BTreeMap::new();
        let draws = 12_000;
        for _ in 0..draws {
            *counts.entry(ext.sample(&mut rng)).or_insert(0usize) += 1;
        }
        assert_eq!(counts.len(), 6);
        for (o, c) in counts {
            let share = c as f64 / draws as f64;
            assert!((share - 1.0 / 6.0).abs() < 0.02, "{o:?}: {share}");
        }
    }

    #[test]
    fn capped_orders_keep_the_authored_order_first() {
        let pred = vec![0u32; 6]; // 720 orders
        let (orders, complete) = window_orders(&pred, 10, &mut rng_for(1, "cap"));
        assert!(!complete);
        assert_eq!(orders.len(), 10);
        assert_eq!(orders[0], vec![0, 1, 2, 3, 4, 5]);
        let (all, complete) = window_orders(&pred[..3], 10, &mut rng_for(1, "cap"));
        assert!(complete);
        assert_eq!(all.len(), 6);
        assert_eq!(all[0], vec![0, 1, 2]);
    }

    #[test]
    fn restricting_orders_maps_to_window_positions() {
        let orders = vec![vec![0, 1, 2, 3, 4], vec![0, 3, 2, 1, 4], vec![2, 3]];
        let r = restrict_orders(&orders, &[1, 2, 3]);
        assert_eq!(r, vec![vec![0, 1, 2], vec![2, 1, 0]]);
    }
}
