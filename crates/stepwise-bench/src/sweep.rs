//! `stepwise bench sweep`: a full suite (RecipeQA mode + the 8 knob settings × the 4 tasks) over a large
//! built-in-world corpus with precomputed features, against references measured in the same run.
//!
//! Setup (not timed): the world corpus (default 20,000 cooking procedures, images not stored — about 233,000
//! step images) and its features: every step image rendered on demand and described by the built-in
//! `descriptor` encoder (480-d), and every distinct step title embedded by a text encoder (MiniLM by default).
//! Feature extraction is the slow part (minutes at 20,000 procedures), so with `--work-dir` the features are
//! cached there (`.npy` + ids, keyed by world size, seed and encoders) and later runs reuse them. `--synthetic`
//! replaces them with random vectors of the same shape (a quick check of the sweep alone). The world's
//! ground-truth annotations are dropped (the generators never read them).
//!
//! Timed: the sweep — catalogs, plans, neighbour search, questions, and writing every task set (JSON, Parquet
//! and manifests, streamed) and the counts table — with peak resident memory (VmHWM, reset before the sweep where
//! Linux allows). References: the same sweep with one setting (what the other eight add), and exact brute-force
//! neighbour search timed on a sample of the queries and extrapolated to all of them (what an exact sweep would
//! need for its neighbours alone), with the recall of the sweep's neighbour method on that sample and the share
//! of an exact range search that knob 2's widening finds there (below 1 with IVF, which widens over the probed
//! lists only).

use crate::process::{peak_rss_mib, reset_peak_rss};
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
use stepwise_tasks::{GenerateConfig, KnobSetting, KnobsMode, Mode, NeighborSearch, TaskGenerator};
use stepwise_world::{Domain, WorldParams};

use stepwise_cli::usage_bail;

const IMAGE_DIM: usize = 480;
const TEXT_DIM: usize = 384;

/// Time a full sweep over a large world corpus.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  stepwise bench sweep                  # 20,000 procedures, targets < 30 s and < 2 GiB\n  \
                        stepwise bench sweep -n 2000 --keep /tmp/suite"
)]
pub struct Args {
    /// World procedures.
    #[arg(short, long, default_value_t = 20_000)]
    pub n: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Neighbour search of the sweep: auto (IVF with 8 probes above 2·10⁹ query–item pairs, else exact), exact,
    /// ivf[:PROBES], hnsw[:EF].
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
    #[arg(long, default_value_t = 30.0)]
    pub target: f64,
    /// Pass/fail target for peak resident memory, in MiB.
    #[arg(long, default_value_t = 2048.0)]
    pub target_mib: f64,
    /// Cache the extracted features here and reuse them in later runs (default: extract, use, forget).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Text encoder for the step titles (minilm, glove-50d, tfidf, w2v).
    #[arg(long, default_value = "minilm")]
    pub text_encoder: String,
    /// Pretrained models folder.
    #[arg(long, env = "STEPWISE_MODELS", default_value = stepwise_features::registry::DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
    /// Random vectors with the features' shape instead of rendered images and embedded titles.
    #[arg(long)]
    pub synthetic: bool,
    /// How the knob settings choose negatives (`calibrated` or `paper`, as `stepwise sweep --knobs-mode`).
    #[arg(long, default_value = "calibrated", value_name = "MODE")]
    pub knobs_mode: String,
    /// Skip the same sweep with the other knob mode (timed after the measured one, for comparison; without
    /// --work-dir its features are extracted again).
    #[arg(long)]
    pub no_mode_reference: bool,
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
    // One procedure at a time, its ground truth dropped at once (the whole world's annotations would take
    // gigabytes that the sweep never reads).
    let procedures: Vec<stepwise_core::Procedure> = (0..args.n)
        .into_par_iter()
        .map(|i| {
            let mut p = stepwise_world::generate_procedure(&params, i)?;
            p.annotations = None;
            for s in &mut p.steps {
                s.annotations = None;
            }
            Ok(p)
        })
        .collect::<stepwise_core::Result<_>>()?;
    let steps: usize = procedures.iter().map(|p| p.steps.len()).sum();
    eprintln!("world: {} procedures, {steps} steps in {:.1} s", procedures.len(), t.elapsed().as_secs_f64());
    let t = Instant::now();
    let features = Features::new(&args, &params, &procedures)?;
    let (images, titles) = features.load()?;
    println!(
        "setup (not timed): {} image vectors ({}-d, {}), {} title vectors ({}-d, {}) in {:.1} s{}",
        images.len(),
        images.dim,
        features.image_source,
        titles.len(),
        titles.dim,
        features.text_source,
        t.elapsed().as_secs_f64(),
        features.cache_note()
    );
    let knobs_mode: KnobsMode = match args.knobs_mode.parse() {
        Ok(m) => m,
        Err(e) => usage_bail!("--knobs-mode: {e}"),
    };
    let cfg = GenerateConfig { seed: args.seed, neighbors, knobs_mode, ..Default::default() };
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
    let suite = SuiteConfig {
        generate: cfg.clone(),
        tasks: Task::ALL.to_vec(),
        modes: Mode::suite(),
        split_fractions: fractions,
        shard: None,
    };
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
        "sweep benchmark: {} procedures, {} images, 9 settings × 4 tasks, {threads} threads, {knobs_mode} knobs",
        procedures.len(),
        queries.image_items
    );
    println!("  questions written: {questions} ({:.0} MB of task sets)", bytes as f64 / 1e6);
    println!("  questions per setting (kept of the plan's):");
    print_retention(&rows);
    println!(
        "  neighbour search: images {} ({} queries), titles {} ({} queries)",
        methods.1, queries.image_queries, methods.0, queries.title_queries
    );
    println!("  sweep: {secs:.1} s");
    if !args.no_mode_reference {
        let other = match knobs_mode {
            KnobsMode::Calibrated => KnobsMode::Paper,
            KnobsMode::Paper => KnobsMode::Calibrated,
        };
        let (images, titles) = features.load()?;
        let suite = SuiteConfig { generate: GenerateConfig { knobs_mode: other, ..cfg.clone() }, ..suite.clone() };
        let dir = std::env::temp_dir().join(format!("stepwise-bench-sweep-{}-{other}", std::process::id()));
        let t = Instant::now();
        let (rows, _, _) = sweep(&dir, &procedures, &splits, titles, images, &suite, &base)?;
        let other_secs = t.elapsed().as_secs_f64();
        let _ = std::fs::remove_dir_all(&dir);
        println!(
            "  the same sweep with {other} knobs: {other_secs:.1} s ({:.2}× this run's time), {} questions; per setting:",
            other_secs / secs,
            rows.iter().map(|r| r.counts.questions).sum::<u64>()
        );
        print_retention(&rows);
    }

    // --- references
    let mut ratio_lines = Vec::new();
    if !args.no_reference {
        let (images, titles) = features.load()?;
        let one = SuiteConfig { modes: vec![Mode::Knobs(KnobSetting { k1: 0, k2: 0, k3: 0 })], ..suite.clone() };
        let dir1 = std::env::temp_dir().join(format!("stepwise-bench-sweep1-{}", std::process::id()));
        let t = Instant::now();
        sweep(&dir1, &procedures, &splits, titles, images, &one, &base)?;
        let secs1 = t.elapsed().as_secs_f64();
        let _ = std::fs::remove_dir_all(&dir1);
        println!(
            "  reference, one setting (knobs-0-0-0 × 4 tasks): {secs1:.1} s; the full sweep costs {:.2}× that for 9× the task sets",
            secs / secs1
        );
        ratio_lines.push(format!("full / one setting = {:.2}", secs / secs1));
    }
    if args.exact_sample > 0 {
        let (images, _) = features.load()?;
        let used = cfg.neighbors.resolve(queries.image_queries, queries.image_items);
        let ExactReference { secs: exact_secs, recall, widening } = exact_reference(
            &procedures,
            &images,
            &GenerateConfig { neighbors: used, ..cfg.clone() },
            args.exact_sample,
            queries.image_queries,
        )?;
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
        if let Some((share, per_query)) = widening {
            println!(
                "  knob 2's widening on that sample (each item a cloze answer, up to m_d + s_d of its {} nearest): \
                 finds {share:.3} of the {per_query:.1} items per query an exact range search finds",
                cfg.k_c
            );
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
/// Each task's questions per setting, with the share of its plan kept.
fn print_retention(rows: &[SuiteRow]) {
    for task in Task::ALL {
        let per: Vec<String> = rows
            .iter()
            .filter(|r| r.task == task && r.same_as.is_none())
            .map(|r| {
                let kept = r.counts.retention().map_or(String::new(), |k| format!(" ({:.0}%)", 100.0 * k));
                format!("{}={}{kept}", r.setting, r.counts.questions)
            })
            .collect();
        println!("    {task}: {}", per.join(" "));
    }
}

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
    rows.extend(write_kind_tasksets(
        dir,
        &mut tg,
        &[Task::VisualCloze, Task::VisualCoherence, Task::VisualOrdering],
        suite,
        base,
    )?);
    methods.1 = tg.neighbor_methods().0.join("+");
    counts.image_queries = tg.neighbor_queries();
    drop(tg);
    rows.sort_by_key(|r| (Task::ALL.iter().position(|t| *t == r.task), Mode::parse_label(&r.setting)));
    write_suite_summary(dir, procedures, suite, base, &rows)?;
    Ok((rows, methods, counts))
}

/// Exact neighbour search of a sample of image queries (with the same-procedure filter), extrapolated to
/// `total` queries; the recall of the sweep's neighbour method and of its knob-2 widening on that sample.
fn exact_reference(
    procedures: &[stepwise_core::Procedure],
    images: &Vectors,
    cfg: &GenerateConfig,
    sample: usize,
    total: usize,
) -> anyhow::Result<ExactReference> {
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
    // The catalog's search metric: inner product on its unit rows for cosine, else the metric itself.
    let metric = if cat.metric == Metric::Cosine { Metric::InnerProduct } else { cat.metric };
    let t = Instant::now();
    let exact = knn(&cat.data, &queries, cat.dim, KnnOptions { k: cfg.k, metric }, Some(&filter));
    let secs = t.elapsed().as_secs_f64() * total as f64 / picks.len() as f64;
    let approx = tg.neighbors_of(&picks)?;
    let mut hit = 0usize;
    let mut all = 0usize;
    for (e, a) in exact.iter().zip(&approx) {
        let e: std::collections::HashSet<usize> = e.iter().map(|n| n.index).collect();
        hit += a.iter().filter(|x| e.contains(&(x.0 as usize))).count();
        all += e.len();
    }
    let (found, in_range) = tg.widening_recall(&picks)?;
    Ok(ExactReference {
        secs,
        recall: (all > 0).then(|| hit as f64 / all as f64),
        widening: (in_range > 0).then(|| (found as f64 / in_range as f64, in_range as f64 / picks.len() as f64)),
    })
}

/// What [`exact_reference`] measured: the extrapolated time of exact search, the recall@K of the sweep's
/// neighbour method, and of its knob-2 widening (share found, items in range per query) on the sample.
struct ExactReference {
    secs: f64,
    recall: Option<f64>,
    widening: Option<(f64, f64)>,
}

impl Drop for Features<'_> {
    fn drop(&mut self) {
        if let Some(root) = &self.temporary {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

/// Where the bench's features come from, and their cache.
struct Features<'a> {
    procedures: &'a [stepwise_core::Procedure],
    params: WorldParams,
    seed: u64,
    synthetic: bool,
    text_encoder: String,
    models: PathBuf,
    /// The cache folder of this world and these encoders, if any.
    cache: Option<PathBuf>,
    /// A temporary cache root, removed when the bench ends.
    temporary: Option<PathBuf>,
    image_source: String,
    text_source: String,
    /// Whether the cache already held the features when the run started.
    cached: std::cell::Cell<Option<bool>>,
}

impl<'a> Features<'a> {
    fn new(args: &Args, params: &WorldParams, procedures: &'a [stepwise_core::Procedure]) -> anyhow::Result<Self> {
        let (image_source, text_source) = if args.synthetic {
            (format!("synthetic, {IMAGE_DIM}-d"), format!("synthetic, {TEXT_DIM}-d"))
        } else {
            ("rendered on demand + descriptor".to_string(), args.text_encoder.clone())
        };
        // Without --work-dir the features are still kept on disk for the run (the references reload them
        // instead of holding a second copy in memory while the sweep is measured), then removed.
        let temporary = args.work_dir.is_none();
        let root = args.work_dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("stepwise-bench-sweep-features-{}", std::process::id()))
        });
        let key = if args.synthetic { "synthetic".to_string() } else { format!("descriptor+{}", args.text_encoder) };
        let cache = Some(root.join(format!(
            "world-{}-n{}-seed{}-{key}",
            params.domain.as_str(),
            params.procedures,
            params.seed
        )));
        // A pretrained text encoder that is not installed should fail now, not after minutes of rendering.
        if !args.synthetic && !matches!(args.text_encoder.as_str(), "tfidf" | "w2v") {
            let ctx = stepwise_features::EncoderContext { models_dir: args.models.clone(), ..Default::default() };
            if let Err(e) = stepwise_features::build_encoder(&args.text_encoder, &ctx) {
                usage_bail!("--text-encoder {}: {e} (or pass --text-encoder tfidf, or --synthetic)", args.text_encoder);
            }
        }
        Ok(Features {
            procedures,
            params: params.clone(),
            seed: args.seed,
            synthetic: args.synthetic,
            text_encoder: args.text_encoder.clone(),
            models: args.models.clone(),
            cache,
            temporary: temporary.then_some(root),
            image_source,
            text_source,
            cached: std::cell::Cell::new(None),
        })
    }

    fn cache_note(&self) -> String {
        match (&self.cache, self.cached.get()) {
            (Some(d), Some(true)) => format!(" (read from the cache {})", d.display()),
            (Some(_), _) if self.temporary.is_some() => {
                " (extracted; pass --work-dir to keep them for later runs)".to_string()
            }
            (Some(d), _) => format!(" (extracted; cached in {})", d.display()),
            (None, _) => String::new(),
        }
    }

    /// The image and title vectors: from the cache, or extracted (and cached part by part, so a failure while
    /// embedding the titles does not lose the rendered images).
    fn load(&self) -> anyhow::Result<(Vectors, Vectors)> {
        let images = self.part("images", || {
            if self.synthetic {
                return Ok(synthetic_images(self.procedures, self.seed));
            }
            let t = Instant::now();
            let v = rendered_images(&self.params, self.procedures)?;
            eprintln!("  rendered and described {} images in {:.1} s", v.len(), t.elapsed().as_secs_f64());
            Ok(v)
        })?;
        let titles = self.part("titles", || {
            if self.synthetic {
                return Ok(synthetic_titles(self.procedures, self.seed));
            }
            let t = Instant::now();
            let v = embedded_titles(self.procedures, &self.text_encoder, &self.models, self.seed)?;
            eprintln!("  embedded the titles ({} ids) in {:.1} s", v.len(), t.elapsed().as_secs_f64());
            Ok(v)
        })?;
        Ok((images, titles))
    }

    /// One part of the features: read from the cache (`<name>.npy`, `<name>.ids`, marked complete by
    /// `<name>.done`), or made by `make` and cached.
    fn part(&self, name: &str, make: impl FnOnce() -> anyhow::Result<Vectors>) -> anyhow::Result<Vectors> {
        if let Some(dir) = &self.cache
            && (dir.join(format!("{name}.done")).exists() || dir.join("done").exists())
        {
            if self.cached.get().is_none() {
                self.cached.set(Some(true));
            }
            return read_vectors(dir, name);
        }
        self.cached.set(Some(false));
        let v = make()?;
        if let Some(dir) = &self.cache {
            std::fs::create_dir_all(dir)?;
            write_vectors(dir, name, &v)?;
            stepwise_core::output::write_string_atomic(&dir.join(format!("{name}.done")), "")?;
        }
        Ok(v)
    }
}

fn write_vectors(dir: &std::path::Path, name: &str, v: &Vectors) -> anyhow::Result<()> {
    stepwise_features::npy::write_matrix(&dir.join(format!("{name}.npy")), v.len(), v.dim, &v.data)?;
    let mut ids = v.ids.join("\n");
    ids.push('\n');
    stepwise_core::output::write_string_atomic(&dir.join(format!("{name}.ids")), &ids)?;
    Ok(())
}

fn read_vectors(dir: &std::path::Path, name: &str) -> anyhow::Result<Vectors> {
    let ((rows, dim), data) = stepwise_features::npy::read_matrix(&dir.join(format!("{name}.npy")))?;
    let ids: Vec<String> =
        std::fs::read_to_string(dir.join(format!("{name}.ids")))?.lines().map(str::to_string).collect();
    if ids.len() != rows {
        anyhow::bail!("{}: {} ids for {rows} vectors; delete the cache folder", dir.display(), ids.len());
    }
    Ok(Vectors::new(dim, ids, data))
}

/// Every step image rendered (one plan and backdrop per procedure) and described by the built-in descriptor,
/// in parallel over procedures, in corpus order.
fn rendered_images(params: &WorldParams, procedures: &[stepwise_core::Procedure]) -> anyhow::Result<Vectors> {
    let enc = stepwise_features::build_encoder("descriptor", &stepwise_features::EncoderContext::default())?;
    let dim = enc.info().dim;
    let pb = stepwise_core::progress::bar(procedures.len() as u64, "rendering + describing images");
    let rows: Vec<(Vec<String>, Vec<f32>)> = procedures
        .par_iter()
        .enumerate()
        .map(|(i, p)| -> anyhow::Result<(Vec<String>, Vec<f32>)> {
            let imgs = stepwise_world::render_procedure_images(params, i as u64)?;
            let mut ids = Vec::new();
            let mut items = Vec::new();
            for (s, step) in p.steps.iter().enumerate() {
                for img in &step.images {
                    let Some(im) = imgs.get(s) else {
                        anyhow::bail!("procedure {}: no rendered image for step {s}", p.id);
                    };
                    ids.push(format!("image:{img}"));
                    items.push(stepwise_features::Item::Image(im));
                }
            }
            let data = enc.encode(&items)?;
            pb.inc(1);
            Ok((ids, data))
        })
        .collect::<anyhow::Result<_>>()?;
    pb.finish_and_clear();
    let mut ids = Vec::new();
    let mut data = Vec::new();
    for (i, d) in rows {
        ids.extend(i);
        data.extend(d);
    }
    Ok(Vectors::new(dim, ids, data))
}

/// Every distinct step title embedded once by `encoder`; each titled step's id (`title:{procedure}#{step}`)
/// gets its title's vector.
fn embedded_titles(
    procedures: &[stepwise_core::Procedure],
    encoder: &str,
    models: &std::path::Path,
    seed: u64,
) -> anyhow::Result<Vectors> {
    let mut distinct: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for p in procedures {
        for s in &p.steps {
            if let Some(t) = s.title.as_deref().filter(|t| !t.trim().is_empty()) {
                let n = distinct.len();
                distinct.entry(t).or_insert(n);
            }
        }
    }
    let mut texts = vec![""; distinct.len()];
    for (t, &i) in &distinct {
        texts[i] = t;
    }
    let ctx = stepwise_features::EncoderContext {
        models_dir: models.to_path_buf(),
        seed,
        fit_texts: Some(std::sync::Arc::new(texts.iter().map(|t| t.to_string()).collect())),
        ..Default::default()
    };
    let enc = stepwise_features::build_encoder(encoder, &ctx)
        .map_err(|e| anyhow::anyhow!("text encoder {encoder:?}: {e} (or pass --text-encoder tfidf, or --synthetic)"))?;
    let dim = enc.info().dim;
    let pb = stepwise_core::progress::bar(texts.len() as u64, "embedding titles");
    let vecs: Vec<f32> = texts
        .par_chunks(256)
        .map(|chunk| -> anyhow::Result<Vec<f32>> {
            let items: Vec<stepwise_features::Item<'_>> =
                chunk.iter().map(|t| stepwise_features::Item::Text(t)).collect();
            let v = enc.encode(&items)?;
            pb.inc(chunk.len() as u64);
            Ok(v)
        })
        .collect::<anyhow::Result<Vec<_>>>()?
        .concat();
    pb.finish_and_clear();
    let mut ids = Vec::new();
    let mut data = Vec::new();
    for p in procedures {
        for (i, s) in p.steps.iter().enumerate() {
            if let Some(t) = s.title.as_deref().filter(|t| !t.trim().is_empty()) {
                let r = distinct[t];
                ids.push(format!("title:{}#{i}", p.id));
                data.extend_from_slice(&vecs[r * dim..(r + 1) * dim]);
            }
        }
    }
    Ok(Vectors::new(dim, ids, data))
}

/// One 480-d unit vector per step image: 0.6 × the procedure's style + 0.8 × noise, seeded per item.
fn synthetic_images(procedures: &[stepwise_core::Procedure], seed: u64) -> Vectors {
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
fn synthetic_titles(procedures: &[stepwise_core::Procedure], seed: u64) -> Vectors {
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
