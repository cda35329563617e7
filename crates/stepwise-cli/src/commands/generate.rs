//! `stepwise generate CORPUS --features F --task T [--mode recipeqa | --knobs a,b,c] -o OUT`: multiple-choice
//! questions of RecipeQA's four tasks (RecipeQA's recipe or a Meta-RecipeQA knob setting), or step-sequencing
//! instances (`--task sequencing`, see `generate_sequencing`).
//!
//! Also home of what `sweep` and `audit` share: generation options, loading feature stores, and the extra
//! distractor pool.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use rayon::prelude::*;
use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::OutputDir;
use stepwise_core::split::SplitFractions;
use stepwise_core::{Corpus, Task};
use stepwise_features::embed::{EmbedOptions, embed_items};
use stepwise_features::image_source::{FsImageSource, ImageSource};
use stepwise_features::items::{ItemContent, ItemSpec, image_id};
use stepwise_features::registry::{DEFAULT_MODELS_DIR, EncoderContext};
use stepwise_features::{FeatureStore, Item, Metric, Modality, Vectors};
use stepwise_tasks::catalog::FeatureSources;
use stepwise_tasks::suite::{
    SuiteRow, counts_markdown, counts_warnings, procedure_splits, taskset_manifest, write_taskset,
};
use stepwise_tasks::{ClozeField, GenerateConfig, KnobSetting, Mode, QuestionsPerProcedure, TaskGenerator};

use super::generate_r2vq::{R2vqGenArgs, run_r2vq};
use super::generate_sequencing::{SequencingArgs, run_sequencing};
use crate::cli_util::feature_error;
use crate::usage_bail;

/// Generate benchmark questions from a corpus and its features.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise generate corpus/ --features feats/minilm --task textual_cloze --mode recipeqa -o tc-recipeqa\n  \
    stepwise generate corpus/ --features feats/descriptor --task visual_cloze --knobs 0,1,1 -o vc-011\n  \
    stepwise generate corpus/ --features feats/minilm --features feats/descriptor --task all -o all-tasks\n  \
    stepwise generate corpus/ --features feats/descriptor --task visual_cloze --distractor-pool grocery/ -o vc\n  \
    stepwise generate corpus/ --task sequencing --modality text -o seq\n  \
    stepwise generate test_crl_srl.csv --task r2vq -o r2vq-questions\n\n\
    Output: OUT/questions.json (the official RecipeQA layout: qid, recipe_id, task, split, context, \
    context_modality, question with @placeholder, question_modality, question_text, choice_list, 0-based answer; \
    plus `meta` with each question's provenance), OUT/questions.parquet and OUT/manifest.json (parameters, counts, \
    questions skipped by reason). Splits are by procedure (category-stratified).\n\
    Knobs (Meta-RecipeQA): k1 question overlap (0: ⌊n/2⌋ questions per procedure, 1: ⌊n/3⌋ and a further step \
    removed), k2 hard negatives (0: ball (0, m−s), 1: shell (m−s, m+s) around the answer), k3 (1: a negative as \
    close to the question as the answer). Settings sharing k1 ask the same questions: a knob setting is built \
    with its three partners and keeps a question only if all four can make it (the search widens beyond the K \
    neighbours when the region reaches past them); a question no candidate can serve is skipped and counted. \
    Visual ordering has no knob 3 (k3 = 1 gives the k3 = 0 questions).\n\
    --knobs-mode calibrated (the default) keeps knob 2's regions but draws a target rank for the answer's distance \
    to the question among the choices and picks negatives that realise it, ranks allocated so that they are \
    uniform over the kept questions (nearest- and farthest-choice shortcuts at chance; questions that cannot take \
    an under-filled rank are skipped as calibrated_rank_balance); --knobs-mode paper applies the papers' rules, \
    knob 3 on a coin flip's half of the questions as the paper's implementation did. `stepwise audit` says which \
    settings are shortcut-free.")]
pub struct Args {
    /// Corpus folder or procedure-JSONL file.
    pub corpus: PathBuf,
    /// Task(s): textual_cloze, visual_cloze, visual_coherence, visual_ordering (comma-separated or repeated),
    /// `all` for the four, `sequencing`, or `r2vq` (CORPUS is then an annotated R2VQ file in the SemEval layout).
    #[arg(long, value_delimiter = ',', required = true)]
    pub task: Vec<String>,
    /// RecipeQA's original recipe (the default unless --knobs is given).
    #[arg(long, value_enum, conflicts_with = "knobs")]
    pub mode: Option<ModeArg>,
    /// A Meta-RecipeQA knob setting k1,k2,k3 with each 0 or 1, e.g. `0,1,1`.
    #[arg(long, value_name = "K1,K2,K3")]
    pub knobs: Option<String>,
    /// Output folder.
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub options: GenOptions,
    #[command(flatten)]
    pub sequencing: SequencingArgs,
    #[command(flatten)]
    pub r2vq: R2vqGenArgs,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeArg {
    Recipeqa,
}

/// Options shared by `generate` and `sweep`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenOptions {
    /// Feature store(s) (`stepwise embed`); repeat to give a text store and an image store. Each task uses the
    /// first store holding its items (title:/text: ids for textual cloze, image: ids for the visual tasks).
    #[arg(long, value_name = "DIR")]
    pub features: Vec<PathBuf>,
    /// Extra distractor images for visual cloze and coherence: a feature store of images, or a folder of images
    /// (embedded now with the image store's encoder). Never question items.
    #[arg(long, value_name = "DIR")]
    pub distractor_pool: Option<PathBuf>,
    /// Keep the embedded distractor-pool folder in this feature store (created or brought up to date with the
    /// image store's encoder, like `stepwise embed`), so later runs do not embed it again.
    #[arg(long, value_name = "DIR", requires = "distractor_pool")]
    pub pool_features: Option<PathBuf>,
    /// Pretrained models folder (to embed a distractor-pool folder with a pretrained encoder).
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
    /// Items shown per question (N_Q).
    #[arg(long, default_value_t = 4, help_heading = "Question parameters")]
    pub items: usize,
    /// Choices per question (one correct).
    #[arg(long, default_value_t = 4, help_heading = "Question parameters")]
    pub choices: usize,
    /// Nearest neighbours searched for distractors (RecipeQA's k, Meta-RecipeQA's K).
    #[arg(long, default_value_t = 100, help_heading = "Question parameters")]
    pub k: usize,
    /// Knob 2 (cloze): the K_C nearest neighbours giving m_d and s_d (Meta-RecipeQA names K_C without a
    /// recoverable value; the default K/2 is this implementation's choice). Coherence uses the whole union.
    #[arg(long = "k-c", help_heading = "Question parameters")]
    pub k_c: Option<usize>,
    /// RecipeQA mode: drop candidates closer than margin × (closest candidate's distance). RecipeQA gives no
    /// value; 1.2 is this implementation's choice.
    #[arg(long, default_value_t = 1.2, help_heading = "Question parameters")]
    pub margin: f64,
    /// Use procedures with at least this many steps (RecipeQA: 3).
    #[arg(long, default_value_t = 3, help_heading = "Question parameters")]
    pub min_steps: usize,
    /// ... and at most this many (RecipeQA: 25).
    #[arg(long, default_value_t = 25, help_heading = "Question parameters")]
    pub max_steps: usize,
    /// Let the first step be a question item (RecipeQA skips it as a narrative introduction).
    #[arg(long, help_heading = "Question parameters")]
    pub keep_first_step: bool,
    /// Knob 1: minimum eligible steps of a procedure (Meta-RecipeQA: 5).
    #[arg(long, default_value_t = 5, help_heading = "Question parameters")]
    pub knob1_min_steps: usize,
    /// How knob settings choose negatives: `calibrated` (the answer's distance rank to the question uniform over
    /// the choices, so nearest-or-farthest shortcuts sit at chance; knob 2's regions kept) or `paper` (the papers'
    /// rules, knob 3 applied to a coin flip's half of the questions as the paper's implementation did).
    #[arg(long, default_value = "calibrated", value_name = "MODE", help_heading = "Question parameters")]
    pub knobs_mode: String,
    /// Knob 3 (paper mode): negatives that must be as close to the question as the answer (the paper: 1).
    #[arg(long, default_value_t = 1, help_heading = "Question parameters")]
    pub constrained_negatives: usize,
    /// RecipeQA mode: questions per procedure and task: `auto` (max(1, ⌊eligible steps / 4⌋)) or a number.
    #[arg(long, default_value = "auto", help_heading = "Question parameters")]
    pub questions_per_procedure: String,
    /// Textual cloze: hide the step `title` (RecipeQA) or the step `text`.
    #[arg(long, default_value = "title", help_heading = "Question parameters")]
    pub cloze_field: String,
    /// Distance for neighbours and knobs: l2 (Euclidean, the papers' distance), cosine or ip.
    #[arg(long, default_value = "l2", help_heading = "Question parameters")]
    pub metric: String,
    /// Neighbour search: `exact`; `ivf` / `ivf:PROBES` (k-means lists, each query scans its PROBES nearest
    /// lists exactly — approximate, reproducible for any --threads; default 8 probes; knob 2's widened search
    /// then scans the same lists); `hnsw` / `hnsw:EF`; or
    /// `auto` (exact unless queries × items exceed 2·10⁹, then ivf). The manifest records the method used.
    #[arg(long, default_value = "auto", help_heading = "Question parameters")]
    pub neighbors: String,
    /// Leave out steps whose item has no vector (counted) instead of failing.
    #[arg(long, help_heading = "Question parameters")]
    pub allow_missing_features: bool,
    /// Train,val,test fractions of procedures (split by procedure, stratified by category).
    #[arg(long, value_name = "T,V,E", default_value = "0.8,0.1,0.1")]
    pub split: String,
}

impl GenOptions {
    /// The library configuration (usage errors for bad values).
    pub fn config(&self, seed: u64) -> anyhow::Result<GenerateConfig> {
        let questions = match self.questions_per_procedure.as_str() {
            "auto" => QuestionsPerProcedure::Auto,
            n => match n.parse::<usize>() {
                Ok(n) if n > 0 => QuestionsPerProcedure::Fixed(n),
                _ => usage_bail!("--questions-per-procedure must be `auto` or a positive number (got {n:?})"),
            },
        };
        let cloze_field: ClozeField = match self.cloze_field.parse() {
            Ok(f) => f,
            Err(e) => usage_bail!("--cloze-field: {e}"),
        };
        let metric = match self.metric.as_str() {
            "cosine" => Metric::Cosine,
            "l2" => Metric::L2,
            "ip" | "inner_product" => Metric::InnerProduct,
            m => usage_bail!("--metric must be cosine, l2 or ip (got {m:?})"),
        };
        let cfg = GenerateConfig {
            seed,
            n_items: self.items,
            n_choices: self.choices,
            k: self.k,
            k_c: self.k_c.unwrap_or((self.k / 2).max(1)),
            margin: self.margin,
            min_steps: self.min_steps,
            max_steps: self.max_steps,
            skip_first_step: !self.keep_first_step,
            knob1_min_steps: self.knob1_min_steps,
            n_constrained: self.constrained_negatives,
            recipeqa_questions: questions,
            cloze_field,
            metric,
            duplicate_epsilon: GenerateConfig::default().duplicate_epsilon,
            neighbors: match self.neighbors.parse() {
                Ok(n) => n,
                Err(e) => usage_bail!("--neighbors: {e}"),
            },
            knobs_mode: match self.knobs_mode.parse() {
                Ok(m) => m,
                Err(e) => usage_bail!("--knobs-mode: {e}"),
            },
        };
        if let Err(e) = cfg.validate() {
            usage_bail!("{e}");
        }
        Ok(cfg)
    }

    pub fn split_fractions(&self) -> anyhow::Result<SplitFractions> {
        parse_split(&self.split)
    }
}

pub fn parse_split(s: &str) -> anyhow::Result<SplitFractions> {
    let parts: Vec<f64> = s.split(',').map(|p| p.trim().parse::<f64>()).collect::<Result<_, _>>().unwrap_or_default();
    if parts.len() != 3 || parts.iter().any(|x| !x.is_finite() || *x < 0.0) || parts.iter().sum::<f64>() <= 0.0 {
        usage_bail!("--split must be three non-negative fractions like 0.8,0.1,0.1 (got {s:?})");
    }
    Ok(SplitFractions { train: parts[0], val: parts[1], test: parts[2] })
}

/// Parse task names (`all` = the four RecipeQA tasks), keeping order and dropping repeats.
pub fn parse_tasks(raw: &[String]) -> anyhow::Result<Vec<Task>> {
    let mut out: Vec<Task> = Vec::new();
    for t in raw {
        let t = t.trim();
        let add: Vec<Task> = if t == "all" {
            Task::ALL.to_vec()
        } else {
            match Task::parse(t) {
                Some(x) => vec![x],
                None => usage_bail!(
                    "unknown task {t:?} (textual_cloze, visual_cloze, visual_coherence, visual_ordering, all{})",
                    if raw.len() == 1 { ", sequencing, r2vq" } else { "" }
                ),
            }
        };
        for x in add {
            if !out.contains(&x) {
                out.push(x);
            }
        }
    }
    Ok(out)
}

/// Feature stores opened once and loaded into memory on demand.
pub struct LoadedFeatures {
    pub stores: Vec<(PathBuf, FeatureStore)>,
    loaded: BTreeMap<usize, Vectors>,
}

impl LoadedFeatures {
    pub fn open(paths: &[PathBuf]) -> anyhow::Result<Self> {
        let mut stores = Vec::new();
        for p in paths {
            let s = FeatureStore::open(p).map_err(feature_error).with_context(|| format!("opening {}", p.display()))?;
            if let Some(part) = &s.meta().shard {
                // A part holds a slice of the items: questions and audits made from it would silently miss the rest.
                return Err(anyhow::Error::new(stepwise_core::Error::usage(format!(
                    "{}: shard {} of a sharded embedding, not a whole store; join the parts with `stepwise features \
                     merge` first",
                    p.display(),
                    part.shard
                ))));
            }
            stores.push((p.clone(), s));
        }
        Ok(LoadedFeatures { stores, loaded: BTreeMap::new() })
    }

    /// Index of the first store holding ids starting with `prefix`.
    pub fn find(&self, prefix: &str) -> Option<usize> {
        self.stores.iter().position(|(_, s)| s.ids().iter().any(|id| id.starts_with(prefix)))
    }

    /// Load the vectors of store `i` into memory (once).
    pub fn load(&mut self, i: usize) -> anyhow::Result<()> {
        if !self.loaded.contains_key(&i) {
            let v = self.stores[i].1.load().map_err(feature_error)?;
            self.loaded.insert(i, v);
        }
        Ok(())
    }

    /// The vectors of store `i`, which must have been loaded.
    pub fn get(&self, i: usize) -> &Vectors {
        self.loaded.get(&i).expect("feature stores are loaded before use")
    }

    /// Fingerprints of the stores (their `ids` and `meta.json`) for manifests.
    pub fn input_hashes(&self) -> anyhow::Result<Vec<InputHash>> {
        let mut out = Vec::new();
        for (p, _) in &self.stores {
            out.push(InputHash::of(&p.join(stepwise_features::store::IDS_FILE))?);
            out.push(InputHash::of(&p.join(stepwise_features::store::META_FILE))?);
        }
        Ok(out)
    }
}

/// The store a task reads, with a clear error when none has its items.
pub fn store_for(features: &LoadedFeatures, task: Task, cfg: &GenerateConfig) -> anyhow::Result<usize> {
    let prefix = cfg.item_kind(task).prefix();
    if features.stores.is_empty() {
        usage_bail!("--features is required for {task}: embed the corpus with `stepwise embed` first");
    }
    if let Some(i) = features.find(prefix) {
        return Ok(i);
    }
    let modality = if prefix == "image:" { Modality::Image } else { Modality::Text };
    let kind = if modality == Modality::Image { "an image" } else { "a text" };
    // A store of the right kind that holds nothing: say so instead of asking for what the user already did.
    if let Some((path, store)) = features.stores.iter().find(|(_, s)| s.info().modality == modality && s.is_empty()) {
        let failures = store.failures().map(|f| f.len()).unwrap_or(0);
        usage_bail!(
            "{}: the `{}` store holds no vectors ({failures} inputs failed to encode; see {}), so {task} has no \
             {} to work with",
            path.display(),
            store.info().name,
            path.join(stepwise_features::store::FAILURES_FILE).display(),
            if modality == Modality::Image { "images" } else { "texts" }
        );
    }
    usage_bail!(
        "none of the --features stores has `{prefix}` items, which {task} needs; embed the corpus with {kind} encoder"
    )
}

/// The extra distractor pool: a feature store of images, or a folder of images embedded now with the encoder of
/// the image store `image_store`.
pub fn load_pool(
    path: &Path,
    features: &LoadedFeatures,
    image_store: Option<usize>,
    models: &Path,
    cache: Option<&Path>,
) -> anyhow::Result<Vectors> {
    if path.join(stepwise_features::store::META_FILE).exists() {
        let s = FeatureStore::open(path).map_err(feature_error)?;
        if let Some(i) = image_store {
            let main = features.stores[i].1.info();
            if s.info() != main {
                usage_bail!(
                    "{}: the distractor pool was embedded with `{}` ({}-d) but the features with `{}` ({}-d); \
                     embed both with the same encoder",
                    path.display(),
                    s.info().name,
                    s.info().dim,
                    main.name,
                    main.dim
                );
            }
        }
        return s.load().map_err(feature_error);
    }
    if !path.is_dir() {
        usage_bail!("--distractor-pool {}: not a feature store or a folder of images", path.display());
    }
    let Some(i) = image_store else {
        usage_bail!("--distractor-pool with a folder of images needs an image feature store in --features");
    };
    let files = stepwise_features::image_source::image_files(path)?;
    if files.is_empty() {
        usage_bail!("--distractor-pool {}: no .jpg/.jpeg/.png images found", path.display());
    }
    let source = FsImageSource::new(path);
    let main = &features.stores[i].1;
    let ctx = EncoderContext {
        models_dir: models.to_path_buf(),
        seed: main.meta().seed,
        options: main.meta().options.clone(),
        ..Default::default()
    };
    if let Some(cache) = cache {
        // The feature store's own pipeline: incremental (only new or changed images are encoded), resumable.
        let items: Vec<ItemSpec> =
            files.iter().map(|f| ItemSpec { id: image_id(f), content: ItemContent::Image(f.clone()) }).collect();
        let opts = EmbedOptions { ctx, label: "pool images".into(), ..EmbedOptions::new(&main.info().name) };
        embed_items(cache, &items, &source, &opts).map_err(feature_error)?;
        let store = FeatureStore::open(cache).map_err(feature_error)?;
        return store.load().map_err(feature_error);
    }
    let enc = main.encoder(&ctx).map_err(feature_error)?;
    let dim = enc.info().dim;
    let pb = stepwise_core::progress::bar(files.len() as u64, "pool images");
    let batch = enc.batch_size().max(1);
    let chunks: Vec<anyhow::Result<Vec<Option<Vec<f32>>>>> = files
        .par_chunks(batch)
        .map(|chunk| {
            let imgs: Vec<Option<_>> = chunk.iter().map(|f| source.load(f).ok()).collect();
            let items: Vec<Item<'_>> = imgs.iter().flatten().map(Item::Image).collect();
            let out = enc.encode(&items).map_err(feature_error)?;
            let mut rows = out.chunks(dim).map(|r| r.to_vec());
            pb.inc(chunk.len() as u64);
            Ok(imgs.iter().map(|im| im.as_ref().and_then(|_| rows.next())).collect())
        })
        .collect();
    pb.finish_and_clear();
    let mut ids = Vec::new();
    let mut data = Vec::new();
    let mut failed = 0usize;
    for (chunk, rows) in files.chunks(batch).zip(chunks) {
        for (f, r) in chunk.iter().zip(rows?) {
            match r {
                Some(v) => {
                    ids.push(format!("image:{f}"));
                    data.extend(v);
                }
                None => failed += 1,
            }
        }
    }
    if failed > 0 {
        tracing::warn!("{failed} distractor-pool images could not be read and were left out");
    }
    Ok(Vectors::new(dim, ids, data))
}

/// What `generate` and `sweep` set up before making questions: the checked configuration, the output folder,
/// the corpus, the feature stores each task reads (loaded), the extra distractor pool and the base manifest.
pub struct Prepared {
    pub cfg: GenerateConfig,
    pub fractions: SplitFractions,
    pub out: OutputDir,
    pub corpus: Corpus,
    pub features: LoadedFeatures,
    /// Per task (in the order given), the index of the feature store holding its items.
    pub store_of: Vec<usize>,
    pub pool: Option<Vectors>,
    pub base: Manifest,
}

impl Prepared {
    pub fn new(
        options: &GenOptions,
        corpus_dir: &Path,
        output: &Path,
        force: bool,
        seed: u64,
        tasks: &[Task],
    ) -> anyhow::Result<Prepared> {
        let cfg = options.config(seed)?;
        for &t in tasks {
            if let Err(e) = cfg.validate_for(t) {
                usage_bail!("{e}");
            }
        }
        let fractions = options.split_fractions()?;
        let out = OutputDir::create(output, force)?;
        let corpus = Corpus::load(corpus_dir)?;
        let mut features = LoadedFeatures::open(&options.features)?;
        let store_of: Vec<usize> =
            tasks.iter().map(|&t| store_for(&features, t, &cfg)).collect::<anyhow::Result<_>>()?;
        let image_store = tasks.iter().zip(&store_of).find(|(t, _)| **t != Task::TextualCloze).map(|(_, &s)| s);
        let pool = match &options.distractor_pool {
            Some(p) if image_store.is_some() => {
                Some(load_pool(p, &features, image_store, &options.models, options.pool_features.as_deref())?)
            }
            _ => None,
        };
        let base = base_manifest(corpus_dir, &features, options.distractor_pool.as_deref())?;
        for &si in &store_of {
            features.load(si)?;
        }
        Ok(Prepared { cfg, fractions, out, corpus, features, store_of, pool, base })
    }
}

/// The base manifest of generated task sets: the canonical command line and the inputs.
pub fn base_manifest(corpus: &Path, features: &LoadedFeatures, pool: Option<&Path>) -> anyhow::Result<Manifest> {
    let mut m = Manifest::new("taskset");
    let file =
        if corpus.is_file() { corpus.to_path_buf() } else { corpus.join(stepwise_core::corpus::PROCEDURES_JSONL) };
    m.inputs.push(InputHash::of(&file)?);
    m.inputs.extend(features.input_hashes()?);
    if let Some(p) = pool {
        m.param("distractor_pool", p.to_string_lossy());
    }
    Ok(m)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.task.len() == 1 && args.task[0].trim() == "sequencing" {
        if args.knobs.is_some() || args.mode.is_some() {
            usage_bail!("--mode and --knobs do not apply to --task sequencing");
        }
        let mut s = args.sequencing.clone();
        s.corpus = args.corpus.clone();
        s.output = args.output.clone();
        s.seed = args.seed;
        s.force = args.force;
        return run_sequencing(&s);
    }
    if args.task.len() == 1 && args.task[0].trim() == "r2vq" {
        if args.knobs.is_some() || args.mode.is_some() {
            usage_bail!("--mode and --knobs do not apply to --task r2vq");
        }
        return run_r2vq(&args.corpus, &args.output, args.seed, args.force, &args.options.split, &args.r2vq);
    }
    let tasks = parse_tasks(&args.task)?;
    let mode = match &args.knobs {
        Some(k) => match k.parse::<KnobSetting>() {
            Ok(k) => Mode::Knobs(k),
            Err(e) => usage_bail!("--knobs: {e}"),
        },
        None => Mode::RecipeQa,
    };
    let Prepared { cfg, fractions, out, corpus, features, store_of, pool, base } =
        Prepared::new(&args.options, &args.corpus, &args.output, args.force, args.seed, &tasks)?;
    let splits = procedure_splits(&corpus.procedures, fractions, args.seed);
    let mut generated = Vec::new();
    // Tasks of one item kind (the visual ones) share a catalog and its neighbours.
    let mut current: Option<(usize, TaskGenerator<'_>)> = None;
    for (&task, &si) in tasks.iter().zip(&store_of) {
        let kind = cfg.item_kind(task);
        if current.as_ref().is_none_or(|(s, g)| *s != si || g.kind != kind) {
            let sources = FeatureSources {
                features: features.get(si),
                extra_pool: pool.as_ref(),
                allow_missing: args.options.allow_missing_features,
            };
            current = Some((si, TaskGenerator::for_kind(kind, &corpus.procedures, &sources, Some(&splits), &cfg)?));
        }
        let (_, tg) = current.as_mut().expect("set above");
        generated.push(tg.generate(task, mode)?);
    }
    let manifest = if let [g] = generated.as_slice() {
        taskset_manifest(&base, &cfg, g, Some(fractions))
    } else {
        let mut m = base.clone();
        m.kind = "taskset".into();
        m.seed = Some(args.seed);
        m.param("tasks", tasks.iter().map(|t| t.as_str()).collect::<Vec<_>>());
        m.param("setting", mode.label());
        m.param("generate", &cfg);
        m.param("split_fractions", fractions);
        m.count("questions", generated.iter().map(|g| g.counts.questions).sum());
        for g in &generated {
            for (k, v) in g.counts.manifest_entries() {
                m.count(&format!("{}.{k}", g.task), v);
            }
        }
        m
    };
    let rows: Vec<SuiteRow> = generated
        .iter()
        .map(|g| SuiteRow { setting: mode.label(), task: g.task, same_as: None, counts: g.counts.clone() })
        .collect();
    let questions: Vec<_> = generated.into_iter().flat_map(|g| g.questions).collect();
    if questions.is_empty() {
        anyhow::bail!(stepwise_core::Error::bad_input(format!(
            "{}: no question could be made ({})",
            args.corpus.display(),
            rows.iter()
                .map(|r| format!("{}: {:?}", r.task, r.counts.manifest_entries()))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    let warnings = counts_warnings(&rows);
    let mut manifest = manifest;
    if !warnings.is_empty() {
        manifest.param("warnings", &warnings);
    }
    write_taskset(out.path(), questions, &manifest)?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprint!("{}", counts_markdown(&rows).split_once('\n').map_or("", |x| x.1));
        eprintln!("\nwrote {}", dest.display());
    }
    for w in &warnings {
        crate::cli_util::warn_user(w);
    }
    Ok(())
}
