//! The measurements behind `stepwise bench features` (the CLI prints them):
//! - exact k-NN on seeded synthetic unit vectors against faiss `IndexFlatIP` run by `scripts/bench/faiss_knn.py`
//!   on the same data in the same invocation (time ratio, and agreement of the results);
//! - HNSW (usearch) build and search time and recall@k against exact search on the same data;
//! - the feature store: embedding images with the built-in descriptor through [`crate::embed`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rand::Rng;
use rayon::prelude::*;
use serde::Deserialize;
use stepwise_core::rng::rng_for;

use crate::FeatureError;
use crate::ann::{AnnIndex, AnnParams, recall_at_k};
use crate::embed::{EmbedOptions, EmbedReport, embed_items};
use crate::image_source::ImageSource;
use crate::items::ItemSpec;
use crate::knn::{KnnOptions, Metric, Neighbor, Screening, TileConfig, knn, knn_with};

/// Rows generated per RNG stream (so generation parallelises and stays deterministic).
const GEN_BLOCK: usize = 1024;

/// `n` unit vectors around `centers` (a mixture: each row is a random centre plus isotropic noise of the same
/// expected norm, normalised), from streams `"{stream}/{block}"` of `seed` — the shape of real embeddings
/// (clusters), where uniformly random vectors would make every neighbour equally far.
pub fn synthetic_unit_vectors(n: usize, dim: usize, seed: u64, stream: &str, centers: &[f32]) -> Vec<f32> {
    let n_centers = centers.len() / dim.max(1);
    let mut out = vec![0f32; n * dim];
    let sigma = (3.0 / dim as f32).sqrt(); // uniform(-σ, σ) has variance 1/dim: noise norm ≈ 1
    out.par_chunks_mut(GEN_BLOCK * dim).enumerate().for_each(|(b, chunk)| {
        let mut rng = rng_for(seed, &format!("{stream}/{b}"));
        for row in chunk.chunks_mut(dim) {
            if n_centers > 0 {
                let c = rng.random_range(0..n_centers);
                row.copy_from_slice(&centers[c * dim..(c + 1) * dim]);
            }
            for v in row.iter_mut() {
                *v += (rng.random::<f32>() * 2.0 - 1.0) * sigma;
            }
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                row.iter_mut().for_each(|x| *x /= norm);
            }
        }
    });
    out
}

/// Random unit cluster centres.
pub fn synthetic_centers(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    synthetic_unit_vectors(n, dim, seed, "bench/centers", &[])
}

/// The exact k-NN benchmark's data.
pub struct KnnData {
    pub dim: usize,
    pub base: Vec<f32>,
    pub queries: Vec<f32>,
}

impl KnnData {
    pub fn generate(n_base: usize, n_queries: usize, dim: usize, seed: u64) -> KnnData {
        let centers = synthetic_centers(1024, dim, seed);
        KnnData {
            dim,
            base: synthetic_unit_vectors(n_base, dim, seed, "bench/base", &centers),
            queries: synthetic_unit_vectors(n_queries, dim, seed, "bench/queries", &centers),
        }
    }

    /// Write `base.npy` and `queries.npy` into `dir` (for the reference script).
    pub fn write(&self, dir: &Path) -> Result<(PathBuf, PathBuf), FeatureError> {
        std::fs::create_dir_all(dir).map_err(|e| stepwise_core::Error::io(dir, e))?;
        let b = dir.join("base.npy");
        let q = dir.join("queries.npy");
        crate::npy::write_matrix(&b, self.base.len() / self.dim, self.dim, &self.base)?;
        crate::npy::write_matrix(&q, self.queries.len() / self.dim, self.dim, &self.queries)?;
        Ok((b, q))
    }
}

/// Time exact search on `data` with the given screening, best of `repeat` runs: (seconds, results).
pub fn time_exact(
    data: &KnnData,
    k: usize,
    metric: Metric,
    repeat: usize,
    screening: Screening,
) -> (f64, Vec<Vec<Neighbor>>) {
    let mut best = f64::INFINITY;
    let mut results = Vec::new();
    let tiles = TileConfig { screening, ..TileConfig::default() };
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        results = knn_with(&data.base, &data.queries, data.dim, KnnOptions { k, metric }, None, &tiles);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, results)
}

/// What the faiss script reports.
#[derive(Debug, Clone, Deserialize)]
pub struct FaissRun {
    pub seconds: f64,
    pub faiss_version: String,
    pub threads: usize,
    /// Top-k row indices per query.
    pub indices: Vec<Vec<i64>>,
}

/// How to run the faiss reference script.
#[derive(Debug, Clone)]
pub struct FaissCommand<'a> {
    pub python: &'a Path,
    pub script: &'a Path,
    pub threads: usize,
    /// Best of this many timed searches.
    pub repeat: usize,
}

/// Run `python script --base B --queries Q --k K --threads T --repeat R --out OUT` and read its JSON result.
/// `Err` explains why there is no reference (no python, no faiss, script failure).
pub fn run_faiss(
    cmd: &FaissCommand<'_>,
    base: &Path,
    queries: &Path,
    k: usize,
    out: &Path,
) -> Result<FaissRun, String> {
    let FaissCommand { python, script, threads, repeat } = *cmd;
    if !script.is_file() {
        return Err(format!("reference script {} not found", script.display()));
    }
    let output = Command::new(python)
        .arg(script)
        .arg("--base")
        .arg(base)
        .arg("--queries")
        .arg(queries)
        .args(["--k", &k.to_string(), "--threads", &threads.to_string(), "--repeat", &repeat.max(1).to_string()])
        .arg("--out")
        .arg(out)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let msg = stdout.lines().chain(stderr.lines()).last().unwrap_or("(no output)").to_string();
        return Err(format!("{} {} failed: {msg}", python.display(), script.display()));
    }
    let text = std::fs::read_to_string(out).map_err(|e| format!("cannot read {}: {e}", out.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: unexpected output: {e}", out.display()))
}

/// Mean overlap of our top-k indices with the reference's.
pub fn agreement(ours: &[Vec<Neighbor>], reference: &[Vec<i64>]) -> f64 {
    let exact: Vec<Vec<Neighbor>> = reference
        .iter()
        .map(|r| r.iter().filter(|&&i| i >= 0).map(|&i| Neighbor { index: i as usize, distance: 0.0 }).collect())
        .collect();
    recall_at_k(ours, &exact)
}

/// HNSW measured against exact search on the same data.
#[derive(Debug, Clone)]
pub struct AnnReport {
    pub n_base: usize,
    pub build_seconds: f64,
    /// (ef, search seconds, recall@k) for each search setting.
    pub searches: Vec<(usize, f64, f64)>,
    pub exact_seconds: f64,
    /// usearch's distance kernel.
    pub simd: String,
}

/// Build HNSW over the first `n_base` rows of `data` and search all queries at each `ef`.
pub fn bench_ann(
    data: &KnnData,
    n_base: usize,
    k: usize,
    metric: Metric,
    params: &AnnParams,
    efs: &[usize],
) -> Result<AnnReport, FeatureError> {
    let n_base = n_base.min(data.base.len() / data.dim);
    let base = &data.base[..n_base * data.dim];
    let t = Instant::now();
    let exact = knn(base, &data.queries, data.dim, KnnOptions { k, metric }, None);
    let exact_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let index = AnnIndex::build(base, data.dim, metric, params)?;
    let build_seconds = t.elapsed().as_secs_f64();
    let mut searches = Vec::new();
    for &ef in efs {
        index.set_expansion_search(ef);
        let t = Instant::now();
        let approx = index.search(&data.queries, k)?;
        searches.push((ef, t.elapsed().as_secs_f64(), recall_at_k(&approx, &exact)));
    }
    Ok(AnnReport { n_base, build_seconds, searches, exact_seconds, simd: index.hardware_acceleration() })
}

/// Embed `items` (images) with the built-in descriptor into a fresh store at `dir`: (seconds, report).
pub fn bench_store(
    dir: &Path,
    items: &[ItemSpec],
    images: &dyn ImageSource,
) -> Result<(f64, EmbedReport), FeatureError> {
    let mut opts = EmbedOptions::new(crate::builtin::descriptor::NAME);
    opts.force = true;
    let t = Instant::now();
    let report = embed_items(dir, items, images, &opts)?;
    Ok((t.elapsed().as_secs_f64(), report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_data_is_unit_norm_and_deterministic_across_threads() {
        let generate = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| KnnData::generate(3000, 10, 24, 5))
        };
        let a = generate(1);
        let b = generate(3);
        assert_eq!(a.base, b.base);
        assert_eq!(a.queries, b.queries);
        for row in a.base.chunks(24) {
            let n: f32 = row.iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-4);
        }
    }

    #[test]
    fn agreement_of_identical_results_is_one() {
        let data = KnnData::generate(500, 5, 8, 1);
        let (_, r) = time_exact(&data, 3, Metric::InnerProduct, 1, Screening::Auto);
        let reference: Vec<Vec<i64>> = r.iter().map(|v| v.iter().map(|n| n.index as i64).collect()).collect();
        assert_eq!(agreement(&r, &reference), 1.0);
    }
}
