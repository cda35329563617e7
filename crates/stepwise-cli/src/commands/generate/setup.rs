//! What `generate`, `sweep` and `audit` share: the generation options, opening the feature stores, and the setup
//! before questions are made (configuration, output folder, corpus, the stores each task reads, the extra
//! distractor pool, the base manifest).

use std::path::{Path, PathBuf};

use anyhow::Context;
use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::OutputDir;
use stepwise_core::split::SplitFractions;
use stepwise_core::{Corpus, ItemModality, Task, TaskFamily, TaskSelection};
use stepwise_features::registry::DEFAULT_MODELS_DIR;
use stepwise_features::stores::{LoadedStores, load_pool};
use stepwise_features::{FeatureStore, Metric, Vectors};
use stepwise_tasks::{ClozeField, GenerateConfig, QuestionsPerProcedure};

use crate::cli_util::feature_error;
use crate::usage_bail;

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

/// Parse `--task` for a command that makes RecipeQA's question types only (`all` = the four).
pub fn parse_tasks(raw: &[String]) -> anyhow::Result<Vec<Task>> {
    match TaskSelection::parse(raw) {
        Ok(TaskSelection::RecipeQa(tasks)) => Ok(tasks),
        Ok(TaskSelection::Sequencing) => not_here(TaskFamily::Sequencing),
        Ok(TaskSelection::R2vq) => not_here(TaskFamily::R2vq),
        Err(e) => usage_bail!("{e}"),
    }
}

/// The usage error for a family that only `stepwise generate` makes.
fn not_here(family: TaskFamily) -> anyhow::Result<Vec<Task>> {
    usage_bail!("--task {family} is made by `stepwise generate --task {family}`, not here")
}

/// Open the `--features` stores (loaded later, on demand).
pub fn open_stores(paths: &[PathBuf]) -> anyhow::Result<LoadedStores> {
    let mut stores = LoadedStores::default();
    for p in paths {
        let s = FeatureStore::open(p).map_err(feature_error).with_context(|| format!("opening {}", p.display()))?;
        stores.add(p, s).map_err(feature_error)?;
    }
    Ok(stores)
}

/// The store a task reads, with a clear error when none has its items.
fn store_for(features: &LoadedStores, task: Task, cfg: &GenerateConfig) -> anyhow::Result<usize> {
    features.holding(cfg.item_kind(task).prefix(), task.as_str()).map_err(feature_error)
}

/// What `generate` and `sweep` set up before making questions: the checked configuration, the output folder,
/// the corpus, the feature stores each task reads (loaded), the extra distractor pool and the base manifest.
pub struct Prepared {
    pub cfg: GenerateConfig,
    pub fractions: SplitFractions,
    pub out: OutputDir,
    pub corpus: Corpus,
    pub features: LoadedStores,
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
        let mut features = open_stores(&options.features)?;
        let store_of: Vec<usize> =
            tasks.iter().map(|&t| store_for(&features, t, &cfg)).collect::<anyhow::Result<_>>()?;
        let image_store =
            tasks.iter().zip(&store_of).find(|(t, _)| t.item_modality() == ItemModality::Image).map(|(_, &s)| s);
        let pool = match (&options.distractor_pool, image_store) {
            (Some(p), Some(i)) => {
                let main = Some(&features.stores[i].1);
                Some(load_pool(p, main, &options.models, options.pool_features.as_deref()).map_err(feature_error)?)
            }
            _ => None,
        };
        let base = base_manifest(corpus_dir, &features, options.distractor_pool.as_deref())?;
        for &si in &store_of {
            features.load(si).map_err(feature_error)?;
        }
        Ok(Prepared { cfg, fractions, out, corpus, features, store_of, pool, base })
    }
}

/// The base manifest of generated task sets: the canonical command line and the inputs.
pub fn base_manifest(corpus: &Path, features: &LoadedStores, pool: Option<&Path>) -> anyhow::Result<Manifest> {
    let mut m = Manifest::new("taskset");
    let file =
        if corpus.is_file() { corpus.to_path_buf() } else { corpus.join(stepwise_core::corpus::PROCEDURES_JSONL) };
    m.inputs.push(InputHash::of(&file)?);
    m.inputs.extend(features.input_hashes().map_err(feature_error)?);
    if let Some(p) = pool {
        m.param("distractor_pool", p.to_string_lossy());
    }
    Ok(m)
}
