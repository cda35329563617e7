//! Step-sequencing metrics of one predicted order against one reference, and their averages.
//!
//! Orders follow `stepwise_core::sequencing`: an order lists item indices in (predicted or reference)
//! procedural order, so `order[k]` is the item at position `k`. For a prediction `p` and a reference `g` of `n`
//! items, write `pos_p(x)`, `pos_g(x)` for the position of item `x`. Per sequence:
//!
//! | metric | formula (per sequence) | average over sequences |
//! |---|---|---|
//! | position accuracy | `#{k : p[k] = g[k]} / n` | mean |
//! | PMR (perfect match ratio) | `1` if `p = g` else `0` | mean |
//! | distance | `Σ_x |pos_g(x) − pos_p(x)|` (a SUM over items, not a mean) | mean |
//! | L_q | length of the longest common subsequence of `p` and `g` (raw, not divided by `n`) | mean |
//! | L_r | length of the longest common substring (contiguous run) of `p` and `g` (raw) | mean |
//! | Kendall's τ | `1 − 2·D / C(n,2)`, `D` = pairs of items in opposite relative order | mean |
//!
//! These are the semantics of the multimodal sequencing paper's released code (Wu et al., ACL 2022;
//! `telin0411/multimodal_sequencing`, `trainers/metrics.py`: `compute_metrics` with `partial_match`,
//! `exact_match`, `distance_based`, `lcs`, `lcs_substr`, `tau`), which compares orders in this "item at
//! position" representation. Differences: the released code truncates a prediction of the wrong length and
//! divides by zero for `n = 1`; we reject non-permutations upstream and define τ = 1 for `n < 2` (a single item
//! is trivially in order; scipy would return NaN).
//!
//! Pooled ("micro") variants, as printed by the topological-sort paper's `Stats.print_stats` (Prabhumoye et al.,
//! ACL 2020; `shrimai/Topological-Sort-for-Sentence-Ordering`, `topological_sort.py`), divide sums over all
//! sequences instead of averaging per-sequence ratios:
//!
//! | pooled metric | formula over all sequences |
//! |---|---|
//! | pooled position accuracy ("Sentence Accuracy") | `Σ #correct positions / Σ n` |
//! | pooled LCS ("LCS") | `Σ L_q / Σ n` |
//! | pooled Rouge-S | `Σ concordant pairs / Σ C(n,2)` |
//! | pooled displacement ≤ w ("Min Dist Metric", w = 1, 2, 3) | `Σ #{x : |pos_p(x) − pos_g(x)| ≤ w} / Σ n` |
//!
//! Their PMR and τ are per-sequence means, identical to ours. Their Rouge-S counts the edges of the predicted
//! constraint graph that agree with the gold order; given only an order, we count concordant pairs of it.
//!
//! Implementation: with `s[k] = pos_g(p[k])` (the gold position of the item predicted at position `k`),
//! correct positions are fixed points of `s`, L_q is the longest increasing subsequence of `s` (the LCS of two
//! permutations), L_r the longest run with `s[k+1] = s[k] + 1`, and `D` the number of inversions of `s`.

use serde::Serialize;

/// Windows of the pooled displacement metric (the topological-sort paper's `dist_window`).
pub const DISPLACEMENT_WINDOWS: [u32; 3] = [1, 2, 3];

/// Everything the metrics need about one prediction against one reference, as exact integers; ratios are formed
/// when averaging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct OrderScore {
    /// Number of items.
    pub n: u32,
    /// Positions holding the same item in both orders.
    pub correct: u32,
    /// `Σ |pos_g(x) − pos_p(x)|` over items.
    pub distance: u64,
    /// Longest common subsequence length (L_q).
    pub lcs: u32,
    /// Longest common substring length (L_r).
    pub lcsubstr: u32,
    /// Pairs of items in opposite relative order.
    pub discordant: u64,
    /// Items displaced by at most 1, 2, 3 positions.
    pub within: [u32; 3],
    /// Minimum number of swaps turning one order into the other (released code's `MS`); used only to break
    /// ties between references the way the released code does.
    pub min_swaps: u32,
    /// Released code's weighted swap count (`MS(weighted=True)`); tie-breaking only.
    pub weighted_swaps: u64,
}

impl OrderScore {
    /// Number of item pairs, `C(n, 2)`.
    pub fn pairs(&self) -> u64 {
        let n = self.n as u64;
        n * n.saturating_sub(1) / 2
    }

    /// The orders are identical.
    pub fn exact(&self) -> bool {
        self.correct == self.n
    }

    pub fn position_accuracy(&self) -> f64 {
        if self.n == 0 { 1.0 } else { self.correct as f64 / self.n as f64 }
    }

    /// Kendall's τ = 1 − 2·D / C(n,2) (1 for fewer than two items).
    pub fn kendall_tau(&self) -> f64 {
        let pairs = self.pairs();
        if pairs == 0 { 1.0 } else { 1.0 - 2.0 * self.discordant as f64 / pairs as f64 }
    }
}

/// Per-sequence metrics averaged over sequences (the sequencing paper's numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    PositionAccuracy,
    Pmr,
    Distance,
    Lq,
    Lr,
    KendallTau,
}

impl Metric {
    pub const ALL: [Metric; 6] =
        [Metric::PositionAccuracy, Metric::Pmr, Metric::Distance, Metric::Lq, Metric::Lr, Metric::KendallTau];

    /// Machine name (JSON keys).
    pub fn name(self) -> &'static str {
        match self {
            Metric::PositionAccuracy => "position_accuracy",
            Metric::Pmr => "pmr",
            Metric::Distance => "distance",
            Metric::Lq => "lq",
            Metric::Lr => "lr",
            Metric::KendallTau => "kendall_tau",
        }
    }

    /// Column header for tables.
    pub fn label(self) -> &'static str {
        match self {
            Metric::PositionAccuracy => "Acc",
            Metric::Pmr => "PMR",
            Metric::Distance => "Dist",
            Metric::Lq => "L_q",
            Metric::Lr => "L_r",
            Metric::KendallTau => "τ",
        }
    }

    /// The definition, for reports.
    pub fn formula(self) -> &'static str {
        match self {
            Metric::PositionAccuracy => "mean over sequences of #{k: pred[k] = ref[k]} / n",
            Metric::Pmr => "share of sequences with pred = ref",
            Metric::Distance => "mean over sequences of the SUM over items of |ref position - predicted position|",
            Metric::Lq => "mean over sequences of the longest common subsequence length (raw)",
            Metric::Lr => "mean over sequences of the longest common substring length (raw)",
            Metric::KendallTau => "mean over sequences of 1 - 2 * discordant pairs / C(n,2)",
        }
    }

    /// True when the metric is a share (printed as a percentage).
    pub fn is_share(self) -> bool {
        matches!(self, Metric::PositionAccuracy | Metric::Pmr)
    }

    /// The per-sequence value.
    pub fn value(self, s: &OrderScore) -> f64 {
        match self {
            Metric::PositionAccuracy => s.position_accuracy(),
            Metric::Pmr => f64::from(u8::from(s.exact())),
            Metric::Distance => s.distance as f64,
            Metric::Lq => s.lcs as f64,
            Metric::Lr => s.lcsubstr as f64,
            Metric::KendallTau => s.kendall_tau(),
        }
    }
}

/// Pooled ("micro") ratios of sums, the topological-sort paper's variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PooledMetric {
    PositionAccuracy,
    Lcs,
    RougeS,
    Within1,
    Within2,
    Within3,
}

impl PooledMetric {
    pub const ALL: [PooledMetric; 6] = [
        PooledMetric::PositionAccuracy,
        PooledMetric::Lcs,
        PooledMetric::RougeS,
        PooledMetric::Within1,
        PooledMetric::Within2,
        PooledMetric::Within3,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PooledMetric::PositionAccuracy => "pooled_position_accuracy",
            PooledMetric::Lcs => "pooled_lcs",
            PooledMetric::RougeS => "pooled_rouge_s",
            PooledMetric::Within1 => "pooled_within_1",
            PooledMetric::Within2 => "pooled_within_2",
            PooledMetric::Within3 => "pooled_within_3",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            PooledMetric::PositionAccuracy => "Acc (pooled)",
            PooledMetric::Lcs => "LCS (pooled)",
            PooledMetric::RougeS => "Rouge-S (pooled)",
            PooledMetric::Within1 => "≤1 (pooled)",
            PooledMetric::Within2 => "≤2 (pooled)",
            PooledMetric::Within3 => "≤3 (pooled)",
        }
    }

    /// The definition, for reports.
    pub fn formula(self) -> &'static str {
        match self {
            PooledMetric::PositionAccuracy => "sum of correct positions / sum of n",
            PooledMetric::Lcs => "sum of longest common subsequence lengths / sum of n",
            PooledMetric::RougeS => "sum of concordant pairs / sum of C(n,2)",
            PooledMetric::Within1 => "sum of items displaced by <= 1 position / sum of n",
            PooledMetric::Within2 => "sum of items displaced by <= 2 positions / sum of n",
            PooledMetric::Within3 => "sum of items displaced by <= 3 positions / sum of n",
        }
    }

    /// Numerator of the sequence's contribution.
    pub fn numerator(self, s: &OrderScore) -> f64 {
        match self {
            PooledMetric::PositionAccuracy => s.correct as f64,
            PooledMetric::Lcs => s.lcs as f64,
            PooledMetric::RougeS => (s.pairs() - s.discordant) as f64,
            PooledMetric::Within1 => s.within[0] as f64,
            PooledMetric::Within2 => s.within[1] as f64,
            PooledMetric::Within3 => s.within[2] as f64,
        }
    }

    /// Denominator of the sequence's contribution.
    pub fn denominator(self, s: &OrderScore) -> f64 {
        match self {
            PooledMetric::RougeS => s.pairs() as f64,
            _ => s.n as f64,
        }
    }
}

/// Reusable buffers, so scoring millions of orders does not allocate per order.
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    gold_pos: Vec<usize>,
    s: Vec<usize>,
    inverse: Vec<usize>,
    tails: Vec<usize>,
    visited: Vec<bool>,
}

/// Why an order cannot be scored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    #[error("has {got} entries but there are {expected} items")]
    Length { expected: usize, got: usize },
    #[error("entry {index} is {value}, out of range for {n} items")]
    OutOfRange { index: usize, value: usize, n: usize },
    #[error("item {value} appears twice (entries {first} and {second})")]
    Repeated { value: usize, first: usize, second: usize },
}

/// Check that `order` is a permutation of `0..n`, saying what is wrong when it is not.
pub fn check_permutation(order: &[usize], n: usize) -> Result<(), OrderError> {
    if order.len() != n {
        return Err(OrderError::Length { expected: n, got: order.len() });
    }
    let mut first = vec![usize::MAX; n];
    for (index, &value) in order.iter().enumerate() {
        if value >= n {
            return Err(OrderError::OutOfRange { index, value, n });
        }
        if first[value] != usize::MAX {
            return Err(OrderError::Repeated { value, first: first[value], second: index });
        }
        first[value] = index;
    }
    Ok(())
}

/// Score `pred` against `gold`, both permutations of `0..n` (checked).
pub fn score_order(pred: &[usize], gold: &[usize]) -> Result<OrderScore, OrderError> {
    check_permutation(gold, gold.len())?;
    check_permutation(pred, gold.len())?;
    Ok(score_order_unchecked(pred, gold, &mut Scratch::default()))
}

/// [`score_order`] without the permutation checks, reusing `scratch`. The caller guarantees that both orders are
/// permutations of `0..n` of the same length (violations may panic on indexing; they never give wrong numbers
/// silently for out-of-range entries).
pub fn score_order_unchecked(pred: &[usize], gold: &[usize], scratch: &mut Scratch) -> OrderScore {
    let n = gold.len();
    debug_assert_eq!(pred.len(), n);
    let Scratch { gold_pos, s, inverse, tails, visited } = scratch;
    gold_pos.clear();
    gold_pos.resize(n, 0);
    for (k, &item) in gold.iter().enumerate() {
        gold_pos[item] = k;
    }
    s.clear();
    s.extend(pred.iter().map(|&item| gold_pos[item]));

    let mut score = OrderScore { n: n as u32, ..OrderScore::default() };
    let mut run = 0u32;
    for (k, &g) in s.iter().enumerate() {
        let displacement = g.abs_diff(k);
        score.correct += u32::from(displacement == 0);
        score.distance += displacement as u64;
        for (w, &window) in DISPLACEMENT_WINDOWS.iter().enumerate() {
            score.within[w] += u32::from(displacement as u64 <= window as u64);
        }
        run = if k > 0 && s[k - 1] + 1 == g { run + 1 } else { 1 };
        score.lcsubstr = score.lcsubstr.max(run);
    }
    score.lcs = longest_increasing(s, tails) as u32;
    score.discordant = inversions(s);

    // The released code's swap counts: t[k] = predicted position of the gold item at position k (the inverse of
    // s); walk its cycles from the smallest index, adding (size − 1) and (size − 1)·|t[start] − start|.
    inverse.clear();
    inverse.resize(n, 0);
    for (k, &g) in s.iter().enumerate() {
        inverse[g] = k;
    }
    visited.clear();
    visited.resize(n, false);
    for start in 0..n {
        if visited[start] || inverse[start] == start {
            continue;
        }
        let mut size = 0u32;
        let mut j = start;
        while !visited[j] {
            visited[j] = true;
            j = inverse[j];
            size += 1;
        }
        score.min_swaps += size - 1;
        score.weighted_swaps += (size as u64 - 1) * inverse[start].abs_diff(start) as u64;
    }
    score
}

/// Length of the longest strictly increasing subsequence (patience sorting, O(n log n)).
fn longest_increasing(s: &[usize], tails: &mut Vec<usize>) -> usize {
    tails.clear();
    for &x in s {
        let at = tails.partition_point(|&t| t < x);
        if at == tails.len() {
            tails.push(x);
        } else {
            tails[at] = x;
        }
    }
    tails.len()
}

/// Number of pairs `i < j` with `s[i] > s[j]`.
fn inversions(s: &[usize]) -> u64 {
    if s.len() <= 64 {
        let mut count = 0u64;
        for i in 0..s.len() {
            for j in i + 1..s.len() {
                count += u64::from(s[i] > s[j]);
            }
        }
        count
    } else {
        let mut v = s.to_vec();
        let mut buf = vec![0; v.len()];
        merge_count(&mut v, &mut buf)
    }
}

/// Merge sort counting inversions, for long sequences.
fn merge_count(v: &mut [usize], buf: &mut [usize]) -> u64 {
    let n = v.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let mut count = merge_count(&mut v[..mid], &mut buf[..mid]) + merge_count(&mut v[mid..], &mut buf[mid..]);
    let (mut i, mut j, mut k) = (0, mid, 0);
    while i < mid && j < n {
        if v[i] <= v[j] {
            buf[k] = v[i];
            i += 1;
        } else {
            buf[k] = v[j];
            count += (mid - i) as u64;
            j += 1;
        }
        k += 1;
    }
    buf[k..k + mid - i].copy_from_slice(&v[i..mid]);
    k += mid - i;
    buf[k..k + n - j].copy_from_slice(&v[j..n]);
    v.copy_from_slice(&buf[..n]);
    count
}

/// Exact sums over sequences, from which every averaged and pooled metric follows.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Totals {
    pub sequences: u64,
    pub items: u64,
    pub pairs: u64,
    pub correct: u64,
    pub exact: u64,
    pub distance: u64,
    pub lcs: u64,
    pub lcsubstr: u64,
    pub discordant: u64,
    pub within: [u64; 3],
    /// Σ per-sequence position accuracy (a float: the mean of ratios is not a ratio of sums).
    pub position_accuracy_sum: f64,
    /// Σ per-sequence τ.
    pub tau_sum: f64,
}

impl Totals {
    /// Sum scores in order (a fixed order keeps float sums identical across runs).
    pub fn of<'a>(scores: impl IntoIterator<Item = &'a OrderScore>) -> Totals {
        let mut t = Totals::default();
        for s in scores {
            t.add(s);
        }
        t
    }

    pub fn add(&mut self, s: &OrderScore) {
        self.sequences += 1;
        self.items += s.n as u64;
        self.pairs += s.pairs();
        self.correct += s.correct as u64;
        self.exact += u64::from(s.exact());
        self.distance += s.distance;
        self.lcs += s.lcs as u64;
        self.lcsubstr += s.lcsubstr as u64;
        self.discordant += s.discordant;
        for w in 0..3 {
            self.within[w] += s.within[w] as u64;
        }
        self.position_accuracy_sum += s.position_accuracy();
        self.tau_sum += s.kendall_tau();
    }

    /// The averaged metric over sequences (NaN for no sequences).
    pub fn mean(&self, m: Metric) -> f64 {
        let n = self.sequences as f64;
        match m {
            Metric::PositionAccuracy => self.position_accuracy_sum / n,
            Metric::Pmr => self.exact as f64 / n,
            Metric::Distance => self.distance as f64 / n,
            Metric::Lq => self.lcs as f64 / n,
            Metric::Lr => self.lcsubstr as f64 / n,
            Metric::KendallTau => self.tau_sum / n,
        }
    }

    /// The pooled metric (NaN for no items or pairs).
    pub fn pooled(&self, m: PooledMetric) -> f64 {
        let items = self.items as f64;
        match m {
            PooledMetric::PositionAccuracy => self.correct as f64 / items,
            PooledMetric::Lcs => self.lcs as f64 / items,
            PooledMetric::RougeS => (self.pairs - self.discordant) as f64 / self.pairs as f64,
            PooledMetric::Within1 => self.within[0] as f64 / items,
            PooledMetric::Within2 => self.within[1] as f64 / items,
            PooledMetric::Within3 => self.within[2] as f64 / items,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(p: &[usize], g: &[usize]) -> OrderScore {
        score_order(p, g).expect("valid orders")
    }

    /// Hand-computed table. Gold [0,1,2,3,4]; prediction [1,0,2,4,3]:
    /// correct positions: k=2 only → 1; distance: items 0,1,3,4 each moved by 1 → 4; LCS: e.g. 0,2,3 → 3;
    /// longest common substring: no two adjacent predicted items are adjacent in gold order → 1;
    /// discordant pairs: (1,0) and (4,3) → 2; τ = 1 − 4/10 = 0.6.
    #[test]
    fn hand_computed_swaps() {
        let s = score(&[1, 0, 2, 4, 3], &[0, 1, 2, 3, 4]);
        assert_eq!((s.correct, s.distance, s.lcs, s.lcsubstr, s.discordant), (1, 4, 3, 1, 2));
        assert!((s.kendall_tau() - 0.6).abs() < 1e-15);
        assert!((s.position_accuracy() - 0.2).abs() < 1e-15);
        assert!(!s.exact());
        assert_eq!(s.within, [5, 5, 5]);
        assert_eq!(s.min_swaps, 2);
    }

    /// Gold [3,1,4,0,2] (items listed in gold order); prediction [1,4,0,2,3]: the block 1,4,0,2 is kept, 3 moved
    /// from the front to the back. correct 0; distance: 3 moved 4, others 1 each → 8; L_q 4; L_r 4;
    /// discordant: 3 vs each of the 4 others → 4; τ = 1 − 8/10 = 0.2.
    #[test]
    fn hand_computed_rotation() {
        let s = score(&[1, 4, 0, 2, 3], &[3, 1, 4, 0, 2]);
        assert_eq!((s.correct, s.distance, s.lcs, s.lcsubstr, s.discordant), (0, 8, 4, 4, 4));
        assert!((s.kendall_tau() - 0.2).abs() < 1e-15);
        assert_eq!(s.within, [4, 4, 4]);
        // A rotation of 5 elements is one 5-cycle: 4 swaps.
        assert_eq!(s.min_swaps, 4);
    }

    /// The released code's own example: MS([3,2,4,1], [3,4,2,1]) = 1 and weighted MS = 1; LCSubStr of
    /// [3,2,0,1,4] and [2,0,1,4,3] = 4 (items relabelled to 0..n).
    #[test]
    fn released_code_examples() {
        // Relabel 1..4 → 0..3: pred [2,1,3,0], gold [2,3,1,0].
        let s = score(&[2, 1, 3, 0], &[2, 3, 1, 0]);
        assert_eq!((s.min_swaps, s.weighted_swaps), (1, 1));
        let s = score(&[3, 2, 0, 1, 4], &[2, 0, 1, 4, 3]);
        assert_eq!(s.lcsubstr, 4);
        // LCS([1,2,3,4],[4,1,2,3]) = 3 (relabelled).
        assert_eq!(score(&[0, 1, 2, 3], &[3, 0, 1, 2]).lcs, 3);
    }

    #[test]
    fn single_item_and_empty() {
        let s = score(&[0], &[0]);
        assert_eq!((s.correct, s.lcs, s.lcsubstr, s.discordant), (1, 1, 1, 0));
        assert_eq!(s.kendall_tau(), 1.0);
        let e = score(&[], &[]);
        assert_eq!(e.kendall_tau(), 1.0);
        assert!(e.exact());
    }

    #[test]
    fn non_permutations_are_explained() {
        assert_eq!(score_order(&[0, 1], &[0, 1, 2]), Err(OrderError::Length { expected: 3, got: 2 }));
        assert_eq!(score_order(&[0, 3, 1], &[0, 1, 2]), Err(OrderError::OutOfRange { index: 1, value: 3, n: 3 }));
        assert_eq!(score_order(&[0, 1, 0], &[0, 1, 2]), Err(OrderError::Repeated { value: 0, first: 0, second: 2 }));
    }

    #[test]
    fn long_sequences_use_merge_sort_inversions() {
        let n = 300;
        let pred: Vec<usize> = (0..n).map(|i| (i * 7) % n).collect(); // gcd(7, 300) = 1: a permutation
        let gold: Vec<usize> = (0..n).collect();
        let s = score(&pred, &gold);
        let brute: u64 =
            (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).filter(|&(i, j)| pred[i] > pred[j]).count() as u64;
        assert_eq!(s.discordant, brute);
    }

    #[test]
    fn totals_average_and_pool() {
        let g = [0, 1, 2, 3, 4];
        let a = score(&[1, 0, 2, 4, 3], &g);
        let b = score(&[0, 1, 2], &[0, 1, 2]);
        let t = Totals::of([&a, &b]);
        assert!((t.mean(Metric::PositionAccuracy) - (0.2 + 1.0) / 2.0).abs() < 1e-15);
        assert!((t.pooled(PooledMetric::PositionAccuracy) - 4.0 / 8.0).abs() < 1e-15);
        assert!((t.mean(Metric::Pmr) - 0.5).abs() < 1e-15);
        assert!((t.mean(Metric::Distance) - 2.0).abs() < 1e-15);
        assert!((t.pooled(PooledMetric::RougeS) - (8.0 + 3.0) / 13.0).abs() < 1e-15);
        assert!((t.pooled(PooledMetric::Lcs) - 6.0 / 8.0).abs() < 1e-15);
        for m in Metric::ALL {
            let direct = (m.value(&a) + m.value(&b)) / 2.0;
            assert!((t.mean(m) - direct).abs() < 1e-12, "{m:?}");
        }
    }
}
