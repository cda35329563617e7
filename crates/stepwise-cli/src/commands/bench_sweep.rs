//! `stepwise bench sweep`: a full suite (RecipeQA mode + the 8 knob settings × the 4 tasks) over a large
//! built-in-world corpus with precomputed features, against references measured in the same run.
//!
//! Setup (not timed): the world corpus (default 20,000 cooking procedures, images not stored — about 233,000
//! step images) and its features. Rendering and describing every image would dominate the run, so the features
//! are synthetic vectors *with the shape of the real ones*: 480-d image vectors (the built-in `descriptor`'s
//! dimension) with a per-procedure style component, as the world's images have a per-procedure visual style,
//! and 384-d title vectors (MiniLM's dimension), one per distinct title. The world's ground-truth annotations
//! are dropped (the generators never read them).
//!
//! Timed: the sweep — catalogs, plans, neighbour search, questions, and writing every task set (JSON + Parquet
//! + manifests) and the counts table — with peak resident memory (VmHWM, reset before the sweep where Linux
//! allows). References: the same sweep with one setting (what the other eight add), and exact brute-force
//! neighbour search timed on a sample of the queries and extrapolated to all of them (what an exact sweep would
//! need for its neighbours alone), with the recall of the neighbours actually used.

use std::path::PathBuf;
use std::time::Instant;

use rand::Rng;
use rayon::prelude::*;
use stepwise_core::Task;
use stepwise_core::manifest::Manifest;
use stepwise_core::rng::rng_for;
use stepwise_core::split::SplitFractions;
use stepwise_features::knn::{KnnOptions, knn};
use stepwise_features::{Metric, Vectors};
use stepwise_tasks::catalog::FeatureSources;
use stepwise_tasks::config::ItemKind;
use stepwise_tasks::suite::{SuiteConfig, SuiteRow, procedure_splits, write_kind_tasksets, write_suite_summary};
use stepwise_tasks::{GenerateConfig, KnobSetting, Mode, NeighborSearch, TaskGenerator};
use stepwise_world::{Domain, WorldParams};

use crate::usage_bail;

const IMAGE_DIM: usize = 480;
const TEXT_DIM: usize = 384;

/// Time a full sweep over a large world corpus.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  stepwise bench sweep                  # 20,000 procedures, targets < 60 s and < 2 GiB\n  \
                        stepwise bench sweep -n 2000 --keep /tmp/suite")]
pub struct Args {
    /// World procedures.
    #[arg(short, long, default_value_t = 20_000)]
    pub n: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Neighbour search of the sweep (auto: HNSW above 2·10⁹ query–item pairs).
    #[arg(long, default_value = "auto")]
    pub neighbors: String,
    /// Queries timed with exact search for the extrapolated reference.
    #[arg(long, default_value_t = 1000)]
    pub exact_sample: usize,
    /// Skip the one-setting reference run.
    #[arg(long)]
    pub no_reference: bool,
    /// Keep the suite in this folder (default: a temporary folder, removed).
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Pass/fail target for the sweep, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub target: f64,
    /// Pass/fail target for peak resident memory, in MiB.
    #[arg(long, default_value_t = 2048.0)]
    pub target_mib: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.n == 0 {
        usage_bail!("-n must be at least 1");
    }
    let neighbors: NeighborSearch = match args.neighbors.parse() {
        Ok(n) => n,
        Err(e) => usage_bail!("--neighbors: {e}"),
    };
    let threads = rayon::current_num_threads();

    // --- setup (not timed)
    let t = Instant::now();
    let params = WorldParams { images_stored: false, ..WorldParams::new(args.seed, Domain::Cooking, args.n) };
    let mut procedures = stepwise_world::generate(&params)?;
    for p in &mut procedures {
        p.annotations = None;
        for s in &mut p.steps {
            s.annotations = None;
        }
    }
    let steps: usize = procedures.iter().map(|p| p.steps.len()).sum();
    let images = image_features(&procedures, args.seed);
    let titles = title_features(&procedures, args.seed);
    eprintln!(
        "setup (not timed): {} procedures, {steps} steps, {} images ({IMAGE_DIM}-d synthetic), {} title items \
         ({TEXT_DIM}-d synthetic) in {:.1} s",
        procedures.len(),
        images.len(),
        titles.len(),
        t.elapsed().as_secs_f64()
    );
    let cfg = GenerateConfig { seed: args.seed, neighbors, ..Default::default() };
    let fractions = SplitFractions::default();
    let splits = procedure_splits(&procedures, fractions, args.seed);
    let base = Manifest::new("taskset");

    // --- the sweep (timed)
    let dir = match &args.keep {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => std::env::temp_dir().join(format!("stepwise-bench-sweep-{}", std::process::id())),
    };
    let suite = SuiteConfig { generate: cfg.clone(), tasks: Task::ALL.to_vec(), modes: Mode::suite(), split_fractions: fractions };
    reset_peak_rss();
    let t = Instant::now();
    let (rows, methods, queries) = sweep(&dir, &procedures, &splits, titles, images, &suite, &base)?;
    let secs = t.elapsed().as_secs_f64();
    let peak = peak_rss_mib();
    let questions: u64 = rows.iter().map(|r| r.counts.questions).sum();
    let bytes = dir_bytes(&dir);
    if args.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }

    println!(
        "sweep benchmark: {} procedures, {} images, 9 settings × 4 tasks, {threads} threads",
        procedures.len(),
        queries.image_items
    );
    println!("  questions written: {questions} ({:.0} MB of task sets)", bytes as f64 / 1e6);
    for task in Task::ALL {
        let per: Vec<String> = rows.iter().filter(|r| r.task == task).map(|r| format!("{}={}", r.setting, r.counts.questions)).collect();
        println!("  {task}: {}", per.join(" "));
    }
    println!("  neighbour search: images {} ({} queries), titles {} ({} queries)", methods.1, queries.image_queries, methods.0, queries.title_queries);
    println!("  sweep: {secs:.1} s");

    // --- references
    let mut ratio_lines = Vec::new();
    if !args.no_reference {
        let images = image_features(&procedures, args.seed);
        let titles = title_features(&procedures, args.seed);
        let one = SuiteConfig { modes: vec![Mode::Knobs(KnobSetting { k1: 0, k2: 0, k3: 0 })], ..suite.clone() };
        let dir1 = std::env::temp_dir().join(format!("stepwise-bench-sweep1-{}", std::process::id()));
        let t = Instant::now();
        sweep(&dir1, &procedures, &splits, titles, images, &one, &base)?;
        let secs1 = t.elapsed().as_secs_f64();
        let _ = std::fs::remove_dir_all(&dir1);
        println!("  reference, one setting (knobs-0-0-0 × 4 tasks): {secs1:.1} s; the full sweep costs {:.2}× that for 9× the task sets", secs / secs1);
        ratio_lines.push(format!("full / one setting = {:.2}", secs / secs1));
    }
    if args.exact_sample > 0 {
        let images = image_features(&procedures, args.seed);
        let (exact_secs, recall) = exact_reference(&procedures, &images, &cfg, args.exact_sample, queries.image_queries)?;
        println!(
            "  reference, exact brute-force neighbours for the {} image queries (extrapolated from {}): {exact_secs:.1} s; \
             the whole sweep takes {:.2}× that",
            queries.image_queries,
            args.exact_sample.min(queries.image_queries),
            secs / exact_secs
        );
        if let Some(r) = recall {
            println!("  recall@{} of the sweep's neighbours against exact search on that sample: {:.3}", cfg.k, r);
        }
        ratio_lines.push(format!("sweep / exact neighbours alone = {:.2}", secs / exact_secs));
    }
    if !ratio_lines.is_empty() {
        println!("  ratios: {}", ratio_lines.join(", "));
    }
    match peak {
        Some(p) => println!("  peak resident memory during the sweep (VmHWM): {p:.0} MiB"),
        None => println!("  peak resident memory: unavailable (no /proc/self/status)"),
    }
    let time_ok = secs < args.target;
    let mem_ok = peak.is_none_or(|p| p < args.target_mib);
    println!("target < {:.0} s: {}", args.target, if time_ok { "PASS" } else { "FAIL" });
    println!("target < {:.0} MiB peak: {}", args.target_mib, if mem_ok { "PASS" } else { "FAIL" });
    Ok(())
}

struct QueryCounts {
    image_items: usize,
    image_queries: usize,
    title_queries: usize,
}

/// The timed part: titles first (their vectors are freed once their catalog is built), then the images.
fn sweep(
    dir: &std::path::Path,
    procedures: &[stepwise_core::Procedure],
    splits: &std::collections::BTreeMap<String, stepwise_core::Split>,
    titles: Vectors,
    images: Vectors,
    suite: &SuiteConfig,
    base: &Manifest,
) -> anyhow::Result<(Vec<SuiteRow>, (String, String), QueryCounts)> {
    let mut rows = Vec::new();
    let mut methods = (String::new(), String::new());
    let mut counts = QueryCounts { image_items: 0, image_queries: 0, title_queries: 0 };
    let mut tg = TaskGenerator::for_kind(
        ItemKind::Title,
        procedures,
        &FeatureSources { features: &titles, extra_pool: None, allow_missing: false },
        Some(splits),
        &suite.generate,
    )?;
    drop(titles);
    rows.extend(write_kind_tasksets(dir, &mut tg, &[Task::TextualCloze], suite, base)?);
    methods.0 = tg.neighbor_methods().0.join("+");
    counts.title_queries = tg.neighbor_queries();
    drop(tg);
    let mut tg = TaskGenerator::for_kind(
        ItemKind::Image,
        procedures,
        &FeatureSources { features: &images, extra_pool: None, allow_missing: false },
        Some(splits),
        &suite.generate,
    )?;
    drop(images);
    counts.image_items = tg.catalog().len();
    rows.extend(write_kind_tasksets(dir, &mut tg, &[Task::VisualCloze, Task::VisualCoherence, Task::VisualOrdering], suite, base)?);
    methods.1 = tg.neighbor_methods().0.join("+");
    counts.image_queries = tg.neighbor_queries();
    drop(tg);
    rows.sort_by_key(|r| (Task::ALL.iter().position(|t| *t == r.task), Mode::parse_label(&r.setting)));
    write_suite_summary(dir, procedures, suite, base, &rows)?;
    Ok((rows, methods, counts))
}

/// Exact neighbour search of a sample of image queries (with the same-procedure filter), extrapolated to
/// `total` queries; and the recall of the sweep's neighbour method on that sample.
fn exact_reference(
    procedures: &[stepwise_core::Procedure],
    images: &Vectors,
    cfg: &GenerateConfig,
    sample: usize,
    total: usize,
) -> anyhow::Result<(f64, Option<f64>)> {
    let mut tg = TaskGenerator::for_kind(
        ItemKind::Image,
        procedures,
        &FeatureSources { features: images, extra_pool: None, allow_missing: false },
        None,
        cfg,
    )?;
    let cat = tg.catalog();
    let n = cat.len();
    let sample = sample.min(n).max(1);
    let step = (n / sample).max(1);
    let picks: Vec<u32> = (0..n).step_by(step).take(sample).map(|i| i as u32).collect();
    let mut queries = Vec::with_capacity(picks.len() * cat.dim);
    for &q in &picks {
        queries.extend_from_slice(cat.row(q));
    }
    let filter = |qi: usize, j: usize| j as u32 != picks[qi] && !cat.share_owner(picks[qi], j as u32);
    let t = Instant::now();
    let exact = knn(&cat.data, &queries, cat.dim, KnnOptions { k: cfg.k, metric: Metric::InnerProduct }, Some(&filter));
    let secs = t.elapsed().as_secs_f64() * total as f64 / picks.len() as f64;
    let approx = tg.neighbors_of(&picks)?;
    let mut hit = 0usize;
    let mut all = 0usize;
    for (e, a) in exact.iter().zip(&approx) {
        let e: std::collections::HashSet<usize> = e.iter().map(|n| n.index).collect();
        hit += a.iter().filter(|x| e.contains(&(x.0 as usize))).count();
        all += e.len();
    }
    Ok((secs, (all > 0).then(|| hit as f64 / all as f64)))
}

/// One 480-d unit vector per step image: 0.6 × the procedure's style + 0.8 × noise, seeded per item.
fn image_features(procedures: &[stepwise_core::Procedure], seed: u64) -> Vectors {
    let rows: Vec<(Vec<String>, Vec<f32>)> = procedures
        .par_iter()
        .map(|p| {
            let mut rng = rng_for(seed, &format!("bench-sweep/style/{}", p.id));
            let style: Vec<f32> = (0..IMAGE_DIM).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let mut ids = Vec::new();
            let mut data = Vec::new();
            for img in p.step_images() {
                let mut r = rng_for(seed, &format!("bench-sweep/image/{img}"));
                let mut v: Vec<f32> = style.iter().map(|s| 0.6 * s + 0.8 * r.random_range(-1.0f32..1.0)).collect();
                stepwise_features::encoder::l2_normalize_rows(&mut v, IMAGE_DIM);
                ids.push(format!("image:{img}"));
                data.extend(v);
            }
            (ids, data)
        })
        .collect();
    let mut ids = Vec::new();
    let mut data = Vec::new();
    for (i, d) in rows {
        ids.extend(i);
        data.extend(d);
    }
    Vectors::new(IMAGE_DIM, ids, data)
}

/// One 384-d unit vector per titled step, seeded by the title text (equal titles, equal vectors).
fn title_features(procedures: &[stepwise_core::Procedure], seed: u64) -> Vectors {
    let mut ids = Vec::new();
    let mut data = Vec::new();
    for p in procedures {
        for (i, s) in p.steps.iter().enumerate() {
            if let Some(t) = s.title.as_deref().filter(|t| !t.trim().is_empty()) {
                let mut r = rng_for(seed, &format!("bench-sweep/title/{t}"));
                let mut v: Vec<f32> = (0..TEXT_DIM).map(|_| r.random_range(-1.0f32..1.0)).collect();
                stepwise_features::encoder::l2_normalize_rows(&mut v, TEXT_DIM);
                ids.push(format!("title:{}#{i}", p.id));
                data.extend(v);
            }
        }
    }
    Vectors::new(TEXT_DIM, ids, data)
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            total += if p.is_dir() { dir_bytes(&p) } else { e.metadata().map_or(0, |m| m.len()) };
        }
    }
    total
}

/// Reset the peak-RSS counter (Linux: writing 5 to /proc/self/clear_refs), so VmHWM covers what follows.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}
