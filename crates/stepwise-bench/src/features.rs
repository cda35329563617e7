//! `stepwise bench features`: exact k-NN against faiss `IndexFlatIP` (same data, same run), HNSW recall and
//! speed against exact search, and feature-store throughput with the built-in image descriptor.

use std::path::{Path, PathBuf};

use stepwise_core::Corpus;
use stepwise_features::ann::AnnParams;
use stepwise_features::bench::{FaissCommand, KnnData, agreement, bench_ann, bench_store, run_faiss, time_exact};
use stepwise_features::encoder::Modality;
use stepwise_features::items::corpus_items;
use stepwise_features::knn::{Metric, Screening};
use stepwise_world::{Domain, WorldParams, write_corpus};

use stepwise_cli::cli_util::feature_error;
use stepwise_cli::usage_bail;

/// Exact k-NN vs faiss, HNSW recall, and feature-store throughput.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise bench features --python /tmp/venv/bin/python\n  \
    stepwise bench features --only knn --base 50000 --queries 2000\n  \
    stepwise bench features --only store --images-corpus corpus/\n\n\
    Targets: exact k-NN (300,000 x 512, 10,000 queries, top-10) time ratio stepwise/faiss <= 1.0; embedding \
    10,000 images with the descriptor < 30 s. The faiss reference runs scripts/bench/faiss_knn.py with a Python \
    that has faiss-cpu and numpy (--python, else $STEPWISE_PYTHON, else python3); without one, only our time is \
    printed.")]
pub struct Args {
    /// Base vectors of the k-NN benchmark.
    #[arg(long, default_value_t = 300_000)]
    pub base: usize,
    /// Query vectors.
    #[arg(long, default_value_t = 10_000)]
    pub queries: usize,
    #[arg(long, default_value_t = 512)]
    pub dim: usize,
    #[arg(short, long, default_value_t = 10)]
    pub k: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Time each exact search (ours and faiss) this many times and keep the best (less noise on a busy machine).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Python with faiss-cpu and numpy.
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The faiss reference script.
    #[arg(long, default_value = "scripts/bench/faiss_knn.py")]
    pub script: PathBuf,
    /// Base rows indexed by HNSW (its build is the slow part).
    #[arg(long, default_value_t = 50_000)]
    pub ann_base: usize,
    /// HNSW search-time candidate list sizes to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [16, 64, 256])]
    pub ann_ef: Vec<usize>,
    /// Images embedded by the store benchmark.
    #[arg(long, default_value_t = 10_000)]
    pub images: usize,
    /// Corpus whose images the store benchmark embeds (the first --images distinct images); default: a built-in
    /// world corpus generated (untimed) into the work folder.
    #[arg(long)]
    pub images_corpus: Option<PathBuf>,
    /// Run only these parts (knn, ann, store); default all.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<Part>,
    /// Folder for the generated data and the store (default: a temporary folder, removed afterwards).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Knn,
    Ann,
    Store,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let wants = |p: Part| args.only.is_empty() || args.only.contains(&p);
    if args.dim == 0 || args.base == 0 || args.queries == 0 || args.k == 0 {
        usage_bail!("--base, --queries, --dim and -k must be at least 1");
    }
    let tmp;
    let work: &Path = match &args.work_dir {
        Some(d) => d,
        None => {
            tmp = TempDir::new()?;
            &tmp.0
        }
    };
    let threads = rayon::current_num_threads();
    let mut failed_targets = Vec::new();

    if wants(Part::Knn) || wants(Part::Ann) {
        eprintln!(
            "generating {} + {} unit vectors of dim {} (seed {})...",
            args.base, args.queries, args.dim, args.seed
        );
        let data = KnnData::generate(args.base, args.queries, args.dim, args.seed);
        if wants(Part::Knn) {
            println!(
                "exact k-NN: {} x {}, {} queries, top-{}, inner product, {threads} threads, best of {}",
                args.base,
                args.dim,
                args.queries,
                args.k,
                args.repeat.max(1)
            );
            let (ours, results) = time_exact(&data, args.k, Metric::InnerProduct, args.repeat, Screening::Off);
            println!("  stepwise knn (tiled gemm)   {ours:>8.2} s   {:>10.0} queries/s", args.queries as f64 / ours);
            let flops = 2.0 * args.base as f64 * args.queries as f64 * args.dim as f64;
            let f32_peak = stepwise_kernels::peak::fma_peak_gflops(0.2);
            println!(
                "    {:.0} GFLOP/s; measured f32 FMA peak {f32_peak:.0} GFLOP/s ({:.0}%)",
                flops / ours / 1e9,
                100.0 * flops / ours / 1e9 / f32_peak
            );
            // The bfloat16-screened search: identical results by construction (checked here), faster only where
            // the CPU's bfloat16 products outrun its f32 FMAs.
            let screened_secs = match stepwise_kernels::peak::bf16_dot_peak_gflops(0.2) {
                Some(bf16_peak) => {
                    let (secs, screened) = time_exact(&data, args.k, Metric::InnerProduct, args.repeat, Screening::On);
                    let same = screened.iter().zip(&results).filter(|(a, b)| a == b).count();
                    println!(
                        "  stepwise knn, bf16 screen + exact f32 re-rank {secs:>8.2} s   {:>10.0} queries/s; identical \
                         top-{} lists: {same} of {}",
                        args.queries as f64 / secs,
                        args.k,
                        results.len()
                    );
                    println!(
                        "    measured vdpbf16ps peak {bf16_peak:.0} GFLOP/s = {:.2}× the f32 FMA peak (auto uses the \
                         screen: {})",
                        bf16_peak / f32_peak,
                        if stepwise_kernels::bf16::pays_off() { "yes" } else { "no" }
                    );
                    if same != results.len() {
                        failed_targets.push("bf16-screened k-NN identical to f32");
                    }
                    Some(secs)
                }
                None => {
                    println!("  bf16 screening: not measured (no AVX-512 BF16 on this CPU)");
                    None
                }
            };
            let (base_npy, queries_npy) = data.write(work).map_err(feature_error)?;
            let python = python(&args);
            let cmd = FaissCommand { python: &python, script: &args.script, threads, repeat: args.repeat };
            match run_faiss(&cmd, &base_npy, &queries_npy, args.k, &work.join("faiss.json")) {
                Ok(f) => {
                    let ratio = ours / f.seconds;
                    let pass = ratio <= 1.0;
                    println!(
                        "  faiss {} IndexFlatIP     {:>8.2} s   {:>10.0} queries/s ({} threads)",
                        f.faiss_version,
                        f.seconds,
                        args.queries as f64 / f.seconds,
                        f.threads
                    );
                    println!("  ratio stepwise/faiss        {ratio:>8.3}     target <= 1.0: {}", verdict(pass));
                    if let Some(secs) = screened_secs {
                        let r = secs / f.seconds;
                        println!(
                            "  ratio screened/faiss        {r:>8.3}     (goal <= 0.556, i.e. 1.8x faster than faiss): {}",
                            verdict(r <= 1.0 / 1.8)
                        );
                    }
                    println!(
                        "  agreement with faiss        recall@{} = {:.5}",
                        args.k,
                        agreement(&results, &f.indices)
                    );
                    if !pass {
                        failed_targets.push("exact k-NN ratio");
                    }
                }
                Err(why) => println!("  faiss reference: not run ({why}); no ratio"),
            }
        }
        if wants(Part::Ann) {
            let params = AnnParams::default();
            let r = bench_ann(&data, args.ann_base, args.k, Metric::InnerProduct, &params, &args.ann_ef)
                .map_err(feature_error)?;
            println!(
                "HNSW (usearch, {} kernels, M={}, efConstruction={}) on {} x {}: build {:.2} s; exact search of \
                 the same {} queries {:.2} s",
                r.simd,
                params.connectivity,
                params.expansion_add,
                r.n_base,
                args.dim,
                r.build_seconds,
                args.queries,
                r.exact_seconds
            );
            for (ef, secs, recall) in &r.searches {
                println!(
                    "  ef={ef:<4} search {secs:>7.3} s   recall@{} vs exact {recall:.4}   {:>6.1}x faster than exact",
                    args.k,
                    r.exact_seconds / secs
                );
            }
        }
    }

    if wants(Part::Store) {
        let corpus_dir = match &args.images_corpus {
            Some(d) => d.clone(),
            None => world_corpus(&work.join("world"), args.images, args.seed)?,
        };
        let corpus = Corpus::load(&corpus_dir)?;
        let mut items = corpus_items(&corpus, Modality::Image);
        items.truncate(args.images);
        if items.len() < args.images {
            eprintln!("note: {} has only {} distinct images", corpus_dir.display(), items.len());
        }
        let source = stepwise_features::image_source::for_corpus(&corpus)?;
        let (secs, report) = bench_store(&work.join("store"), &items, source.as_ref()).map_err(feature_error)?;
        let full = items.len() >= 10_000;
        let pass = secs < 30.0;
        println!(
            "feature store: {} images of {} with `descriptor`, {threads} threads: {secs:.2} s ({:.0} images/s), \
             {} failures; target 10,000 in < 30 s: {}",
            items.len(),
            corpus_dir.display(),
            items.len() as f64 / secs,
            report.failed,
            if full { verdict(pass) } else { "n/a (fewer than 10,000 images)" }
        );
        if full && !pass {
            failed_targets.push("feature store time");
        }
    }
    if !failed_targets.is_empty() {
        eprintln!("targets missed: {}", failed_targets.join(", "));
    }
    Ok(())
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

fn python(args: &Args) -> PathBuf {
    args.python
        .clone()
        .or_else(|| std::env::var_os("STEPWISE_PYTHON").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// Generate (untimed) a built-in world corpus with stored JPEG step images, with at least `images` of them.
fn world_corpus(dir: &Path, images: usize, seed: u64) -> anyhow::Result<PathBuf> {
    // World procedures have several steps each; grow the corpus until it has enough images.
    let mut procedures = (images as u64 / 6).max(1);
    loop {
        eprintln!("generating a world corpus of {procedures} procedures with stored images (not timed)...");
        let params = WorldParams::new(seed, Domain::Cooking, procedures);
        let summary = write_corpus(&params, dir, true, &|_| {})?;
        if summary.images_written as usize >= images {
            return Ok(dir.to_path_buf());
        }
        procedures = procedures * images as u64 / summary.images_written.max(1) + 1;
    }
}

/// A temporary folder removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<Self> {
        let p = std::env::temp_dir().join(format!("stepwise-bench-features-{}", std::process::id()));
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
