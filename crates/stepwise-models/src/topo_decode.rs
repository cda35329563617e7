//! Decoding an order from pairwise "i before j" probabilities with a topological sort (Prabhumoye et al.,
//! ACL 2020, "Topological Sort for Sentence Ordering"), made robust to cycles.
//!
//! 1. Symmetrise: `q[i][j] = (p[i][j] + 1 − p[j][i]) / 2` (the classifier sees both orders of a pair), so
//!    `q[i][j] + q[j][i] = 1`.
//! 2. Tournament: an edge i → j for every pair with `q[i][j] > 0.5` (none on an exact tie).
//! 3. Cycles: while the graph has a cycle, find one (depth-first search from the lowest-index node, neighbours
//!    in index order) and drop its least confident edge (smallest `q`, ties to the lowest `(i, j)`). B-TSort's
//!    released code does a plain DFS topological sort that ignores back edges; dropping the weakest edge keeps
//!    the most confident constraints instead.
//! 4. Topological sort (Kahn): among the items with no remaining predecessor, emit the one with the highest
//!    score `s_i = Σ_j q[i][j]` (its expected number of successors), ties to the lower index.

/// Symmetrised probabilities (see module docs). `p` is `n × n`; the diagonal is ignored.
pub fn symmetrize(p: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = p.len();
    let mut q = vec![vec![0.5; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i != j {
                q[i][j] = (p[i][j] + 1.0 - p[j][i]) / 2.0;
            }
        }
    }
    q
}

/// The decoded order (item indices in predicted procedural order) and the number of edges dropped to break
/// cycles.
pub fn decode(p: &[Vec<f64>]) -> (Vec<usize>, usize) {
    let q = symmetrize(p);
    let n = q.len();
    let mut edge = vec![vec![false; n]; n];
    for i in 0..n {
        for j in 0..n {
            edge[i][j] = i != j && q[i][j] > 0.5;
        }
    }
    let mut dropped = 0;
    while let Some(cycle) = find_cycle(&edge) {
        let (a, b) = cycle
            .iter()
            .copied()
            .min_by(|&(a, b), &(c, d)| q[a][b].total_cmp(&q[c][d]).then((a, b).cmp(&(c, d))))
            .expect("a cycle has edges");
        edge[a][b] = false;
        dropped += 1;
    }
    let score: Vec<f64> = (0..n).map(|i| (0..n).filter(|&j| j != i).map(|j| q[i][j]).sum()).collect();
    let mut indegree: Vec<usize> = (0..n).map(|j| (0..n).filter(|&i| edge[i][j]).count()).collect();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for _ in 0..n {
        let next = (0..n)
            .filter(|&i| !done[i] && indegree[i] == 0)
            .max_by(|&a, &b| score[a].total_cmp(&score[b]).then(b.cmp(&a)))
            .expect("an acyclic graph always has a source");
        done[next] = true;
        order.push(next);
        for j in 0..n {
            if edge[next][j] {
                indegree[j] -= 1;
            }
        }
    }
    (order, dropped)
}

/// The edges of some cycle, or None when the graph is acyclic.
fn find_cycle(edge: &[Vec<bool>]) -> Option<Vec<(usize, usize)>> {
    let n = edge.len();
    // 0 = unvisited, 1 = on the DFS stack, 2 = finished.
    let mut state = vec![0u8; n];
    let mut parent = vec![usize::MAX; n];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        // Iterative DFS: (node, next neighbour to try).
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (u, ref mut next)) = stack.last_mut() {
            if *next < n {
                let v = *next;
                *next += 1;
                if !edge[u][v] {
                    continue;
                }
                if state[v] == 1 {
                    // Back edge u → v: the cycle is v → … → u → v.
                    let mut cycle = vec![(u, v)];
                    let mut w = u;
                    while w != v {
                        let pw = parent[w];
                        cycle.push((pw, w));
                        w = pw;
                    }
                    return Some(cycle);
                }
                if state[v] == 0 {
                    state[v] = 1;
                    parent[v] = u;
                    stack.push((v, 0));
                }
            } else {
                state[u] = 2;
                stack.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probabilities that agree with `order` with confidence `c`.
    fn from_order(order: &[usize], c: f64) -> Vec<Vec<f64>> {
        let n = order.len();
        let mut pos = vec![0; n];
        for (k, &i) in order.iter().enumerate() {
            pos[i] = k;
        }
        (0..n).map(|i| (0..n).map(|j| if pos[i] < pos[j] { c } else { 1.0 - c }).collect()).collect()
    }

    #[test]
    fn consistent_probabilities_decode_exactly() {
        let order = vec![3, 0, 4, 1, 2];
        let (got, dropped) = decode(&from_order(&order, 0.9));
        assert_eq!(got, order);
        assert_eq!(dropped, 0);
    }

    #[test]
    fn a_cycle_loses_its_weakest_edge() {
        // 0 → 1 (0.9), 1 → 2 (0.8), 2 → 0 (0.6): dropping 2 → 0 gives 0, 1, 2.
        let mut p = vec![vec![0.5; 3]; 3];
        let mut set = |i: usize, j: usize, v: f64| {
            p[i][j] = v;
            p[j][i] = 1.0 - v;
        };
        set(0, 1, 0.9);
        set(1, 2, 0.8);
        set(2, 0, 0.6);
        let (got, dropped) = decode(&p);
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(dropped, 1);
    }

    #[test]
    fn ties_are_broken_by_score_then_index() {
        // No confident pairs at all: everything 0.5 → index order.
        let p = vec![vec![0.5; 4]; 4];
        assert_eq!(decode(&p).0, vec![0, 1, 2, 3]);
        // Item 2 is before everything with 0.7 but unrelated pairs are ties: 2 first.
        let mut p = vec![vec![0.5; 3]; 3];
        p[2][0] = 0.7;
        p[0][2] = 0.3;
        p[2][1] = 0.7;
        p[1][2] = 0.3;
        assert_eq!(decode(&p).0, vec![2, 0, 1]);
    }

    #[test]
    fn random_tournaments_always_give_permutations() {
        use rand::Rng;
        let mut rng = stepwise_core::rng::rng_for(5, "topo");
        for n in 1..9 {
            for _ in 0..50 {
                let p: Vec<Vec<f64>> = (0..n).map(|_| (0..n).map(|_| rng.random::<f64>()).collect()).collect();
                let (order, _) = decode(&p);
                assert!(stepwise_core::sequencing::is_permutation(&order, n));
            }
        }
    }
}
