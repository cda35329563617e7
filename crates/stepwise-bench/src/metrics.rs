//! `stepwise bench metrics`: the sequencing metrics on many random predictions (default 1,000,000 five-step
//! predictions, one reference), against a straightforward reference implementation measured in the same run.
//!
//! Timed: scoring every prediction against its best reference (the library kernel `stepwise_score` uses for
//! `stepwise eval`, in parallel) and averaging all metrics, macro and pooled. Not timed: generating the random
//! orders. The reference is a literal, unoptimised single-threaded implementation in the style of the papers'
//! released Python code (position lookups with `index`, full dynamic-programming tables for L_q and L_r, sets
//! of ordered pairs for τ, fresh allocations per sequence). Both must give identical totals, or the benchmark
//! fails.

use std::collections::HashSet;
use std::time::Instant;

use rand::Rng;
use rayon::prelude::*;
use stepwise_core::rng::rng_for;
use stepwise_score::multiref::best_reference_unchecked;
use stepwise_score::sequence_metrics::{Metric, OrderScore, PooledMetric, Scratch, Totals};

use stepwise_cli::usage_bail;

/// Time the sequencing metrics on random predictions.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  stepwise bench metrics                 # 1,000,000 five-step predictions, target < 1 s\n  \
                        stepwise bench metrics -n 200000 --references 3 --steps 8"
)]
pub struct Args {
    /// Number of predictions.
    #[arg(short, long, default_value_t = 1_000_000)]
    pub n: usize,
    /// Items per sequence.
    #[arg(long, default_value_t = 5)]
    pub steps: usize,
    /// References per instance.
    #[arg(long, default_value_t = 1)]
    pub references: usize,
    /// Seed of the random orders.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Timed repetitions of the fast path (the best is reported).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Pass/fail target for the fast path, in seconds.
    #[arg(long, default_value_t = 1.0)]
    pub target: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.n == 0 || args.steps == 0 || args.references == 0 || args.repeats == 0 {
        usage_bail!("-n, --steps, --references and --repeats must be at least 1");
    }
    let k = args.steps;
    let t = Instant::now();
    let preds = random_orders(args.seed, "pred", args.n, k);
    let refs = random_orders(args.seed, "ref", args.n * args.references, k);
    eprintln!(
        "generated {} predictions of {k} items with {} reference(s) each in {:.2} s (not timed)",
        args.n,
        args.references,
        t.elapsed().as_secs_f64()
    );

    let mut best = f64::INFINITY;
    let mut fast = Totals::default();
    for _ in 0..args.repeats {
        let t = Instant::now();
        fast = fast_totals(&preds, &refs, k, args.references);
        best = best.min(t.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    let reference = reference_totals(&preds, &refs, k, args.references);
    let reference_time = t.elapsed().as_secs_f64();
    if reference != fast {
        anyhow::bail!("the fast path and the reference disagree:\n fast      {fast:?}\n reference {reference:?}");
    }

    println!(
        "metrics benchmark: {} predictions × {k} items, {} reference(s), {} threads",
        args.n,
        args.references,
        rayon::current_num_threads()
    );
    for m in Metric::ALL {
        println!("  {:<20} {:.6}", m.name(), fast.mean(m));
    }
    for m in PooledMetric::ALL {
        println!("  {:<26} {:.6}", m.name(), fast.pooled(m));
    }
    let throughput = args.n as f64 / best;
    println!(
        "fast path (library kernel, parallel): {best:.3} s (best of {}), {:.2} M predictions/s",
        args.repeats,
        throughput / 1e6
    );
    println!(
        "reference (straightforward, single-threaded, same run): {reference_time:.3} s, {:.2} M predictions/s",
        args.n as f64 / reference_time / 1e6
    );
    println!("speed-up vs reference: {:.1}×  (identical totals)", reference_time / best);
    let pass = best < args.target;
    println!("target < {:.3} s: {}", args.target, if pass { "PASS" } else { "FAIL" });
    if !pass {
        anyhow::bail!("metrics benchmark missed its target: {best:.3} s ≥ {:.3} s", args.target);
    }
    Ok(())
}

/// `count` random permutations of `0..k`, flat; chunk `c` draws from `rng_for(seed, "bench-metrics/{what}/{c}")`.
fn random_orders(seed: u64, what: &str, count: usize, k: usize) -> Vec<usize> {
    const CHUNK: usize = 4096;
    let mut flat = vec![0usize; count * k];
    flat.par_chunks_mut(CHUNK * k).enumerate().for_each(|(c, chunk)| {
        let mut rng = rng_for(seed, &format!("bench-metrics/{what}/{c}"));
        for order in chunk.chunks_mut(k) {
            for (i, x) in order.iter_mut().enumerate() {
                *x = i;
            }
            for i in (1..k).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
        }
    });
    flat
}

/// The library path: best reference per prediction in parallel, then totals in order.
fn fast_totals(preds: &[usize], refs: &[usize], k: usize, r: usize) -> Totals {
    let scores: Vec<OrderScore> = preds
        .par_chunks(k)
        .zip(refs.par_chunks(k * r))
        .map_init(Scratch::default, |scratch, (p, rs)| {
            best_reference_unchecked(p, rs.chunks(k), scratch).expect("at least one reference").score
        })
        .collect();
    Totals::of(&scores)
}

/// A literal implementation, one sequence at a time, no reuse.
fn reference_totals(preds: &[usize], refs: &[usize], k: usize, r: usize) -> Totals {
    let mut totals = Totals::default();
    for (p, rs) in preds.chunks(k).zip(refs.chunks(k * r)) {
        let mut best: Option<OrderScore> = None;
        for g in rs.chunks(k) {
            let s = naive_score(p, g);
            let better = match &best {
                None => true,
                Some(b) => stepwise_score::multiref::compare_for_selection(&s, b) == std::cmp::Ordering::Greater,
            };
            if better {
                best = Some(s);
            }
        }
        totals.add(&best.expect("at least one reference"));
    }
    totals
}

fn naive_score(p: &[usize], g: &[usize]) -> OrderScore {
    let n = g.len();
    let p = p.to_vec();
    let g = g.to_vec();
    let correct = (0..n).filter(|&i| p[i] == g[i]).count() as u32;
    let mut distance = 0u64;
    let mut within = [0u32; 3];
    for (j, item) in g.iter().enumerate() {
        let pos = p.iter().position(|x| x == item).expect("permutation");
        let d = j.abs_diff(pos);
        distance += d as u64;
        for (w, window) in [1usize, 2, 3].iter().enumerate() {
            within[w] += u32::from(d <= *window);
        }
    }
    // Longest common subsequence and substring by full tables.
    let mut lcs = vec![vec![0u32; n + 1]; n + 1];
    let mut suffix = vec![vec![0u32; n + 1]; n + 1];
    let mut lcsubstr = 0;
    for i in 1..=n {
        for j in 1..=n {
            if p[i - 1] == g[j - 1] {
                lcs[i][j] = lcs[i - 1][j - 1] + 1;
                suffix[i][j] = suffix[i - 1][j - 1] + 1;
                lcsubstr = lcsubstr.max(suffix[i][j]);
            } else {
                lcs[i][j] = lcs[i - 1][j].max(lcs[i][j - 1]);
            }
        }
    }
    // τ from sets of ordered pairs, as the released code does.
    let pairs = |o: &[usize]| -> HashSet<(usize, usize)> {
        (0..n).flat_map(|i| (i + 1..n).map(move |j| (o[i], o[j]))).collect()
    };
    let (sp, sg) = (pairs(&p), pairs(&g));
    let discordant = (sp.len() - sp.intersection(&sg).count()) as u64;
    // Swap counts (tie-breaking between references): cycles of the predicted positions of gold items.
    let t: Vec<usize> = g.iter().map(|x| p.iter().position(|y| y == x).expect("permutation")).collect();
    let mut visited = vec![false; n];
    let (mut min_swaps, mut weighted_swaps) = (0u32, 0u64);
    for i in 0..n {
        if visited[i] || t[i] == i {
            continue;
        }
        let (mut size, mut j) = (0u32, i);
        while !visited[j] {
            visited[j] = true;
            j = t[j];
            size += 1;
        }
        min_swaps += size - 1;
        weighted_swaps += (size as u64 - 1) * t[i].abs_diff(i) as u64;
    }
    OrderScore {
        n: n as u32,
        correct,
        distance,
        lcs: lcs[n][n],
        lcsubstr,
        discordant,
        within,
        min_swaps,
        weighted_swaps,
    }
}
