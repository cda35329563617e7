//! `stepwise baseline`: sequencing baselines over precomputed features, and the paper-style results table.
//!
//! - one model: `stepwise baseline INSTANCES --model M [--features F [--features F2]] -o PREDICTIONS.jsonl`
//!   writes `{"id", "order"}` lines (what `stepwise eval` reads);
//! - all models: `stepwise baseline INSTANCES --table NAME --features F [--features F2] -o DIR` runs every
//!   method with every feature view available (text, image, multimodal) and writes `predictions/`,
//!   `results.json`, `results.md`, `manifest.json`;
//! - `stepwise baseline --merge DIR1 DIR2 ... -o DIR` joins the results of several datasets into one table.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::Context;
use stepwise_core::Manifest;
use stepwise_core::output::OutputDir;
use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::split::TrainOnly;
use stepwise_models::pairwise::PairwiseConfig;
use stepwise_models::pairwise::net::Classifier;
use stepwise_models::sequencer::{self, ChainStartName, Evaluation, ModelKind, RunConfig};
use stepwise_models::sequencer_table::{TableRun, protocol_note, run_table_row, score_row, table_runs, training_note};

use crate::usage_bail;
use stepwise_models::sequencing_features::{SequencingFeatures, load_features};
use stepwise_score::predictions::write_order_predictions;
use stepwise_score::sequencing_table::{self as table, Results};

/// Run sequencing baselines (random, text-position, image-chain, pairwise + topological sort).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise baseline seq/ --model pairwise --features feats-text --features feats-image -o preds.jsonl\n  \
    stepwise eval seq/ --predictions preds.jsonl --split test\n  \
    stepwise baseline seq/ --table world --features feats-text --features feats-image -o results/world\n  \
    stepwise baseline --merge results/world --merge results/recipeqa -o results/all\n\n\
    Models: random (uniform permutation); text-position (position cue words such as first/then/finally, no \
    training); image-chain (nearest-neighbour chaining of item vectors from the least typical item); pairwise \
    (a logistic-regression or MLP classifier on [f_i, f_j, f_i - f_j, f_i * f_j] predicting \"i before j\", \
    trained with candle on the train split and selected on val, decoded by a topological sort that drops the \
    least confident edges of cycles). Features: one text store and/or one image store (`stepwise embed`); both \
    = multimodal (each L2-normalised, concatenated).")]
pub struct Args {
    /// Sequencing instances (a folder from `stepwise generate --task sequencing`, or its instances.jsonl).
    #[arg(value_name = "INSTANCES", required_unless_present = "merge")]
    pub instances: Option<PathBuf>,
    /// The model to run (with -o PREDICTIONS.jsonl).
    #[arg(long, value_enum, conflicts_with_all = ["table", "merge"], required_unless_present_any = ["table", "merge"])]
    pub model: Option<ModelArg>,
    /// Run every model with every feature view and write the results table; the value names the dataset.
    #[arg(long, value_name = "DATASET", conflicts_with = "merge")]
    pub table: Option<String>,
    /// Join the results of earlier `--table` runs (folders with results.json) into one table.
    #[arg(long, value_name = "DIR")]
    pub merge: Vec<PathBuf>,
    /// A feature store (`stepwise embed`); give a text store and/or an image store.
    #[arg(long, value_name = "DIR")]
    pub features: Vec<PathBuf>,
    /// Output: the predictions file (--model) or folder (--table, --merge).
    #[arg(short, long, value_name = "PATH")]
    pub output: PathBuf,
    /// Replace an existing output.
    #[arg(long)]
    pub force: bool,
    /// Predict the instances of this split (the pairwise model trains on `train` and selects on `val`).
    #[arg(long, default_value = "test", conflicts_with = "cv")]
    pub split: String,
    /// Instead of the split: K-fold cross-validation by procedure, predicting every instance (small datasets).
    #[arg(long, value_name = "K")]
    pub cv: Option<usize>,
    /// Procedures whose id starts with PREFIX (repeatable) only train: in the training set of every fold or split,
    /// never selected on, predicted or scored (extra training corpora beside the dataset under study).
    #[arg(long = "train-only", value_name = "PREFIX")]
    pub train_only: Vec<String>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print the metrics of the predictions (--model).
    #[arg(long = "eval")]
    pub evaluate: bool,
    /// Image-chain: start from the least typical item (`outlier`) or keep the best chain over all starts.
    #[arg(long, value_enum, default_value = "outlier")]
    pub chain_start: ChainStartArg,
    /// Pairwise: classifier.
    #[arg(long, value_enum, default_value = "mlp")]
    pub classifier: ClassifierArg,
    /// Pairwise: hidden units of the MLP.
    #[arg(long, default_value_t = 64)]
    pub hidden: usize,
    /// Pairwise: maximum training epochs.
    #[arg(long, default_value_t = 60)]
    pub epochs: usize,
    /// Pairwise: AdamW learning rate.
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Pairwise: AdamW weight decay.
    #[arg(long, default_value_t = 1e-2)]
    pub weight_decay: f64,
    /// Pairwise: pairs per mini-batch.
    #[arg(long, default_value_t = 256)]
    pub batch_size: usize,
    /// Pairwise: stop after this many epochs without a better validation loss.
    #[arg(long, default_value_t = 8)]
    pub patience: usize,
    /// Pairwise: item vectors wider than this are reduced by a seeded random projection (0 = never).
    #[arg(long, default_value_t = 256)]
    pub max_dim: usize,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelArg {
    Random,
    TextPosition,
    ImageChain,
    Pairwise,
}

impl From<ModelArg> for ModelKind {
    fn from(m: ModelArg) -> Self {
        match m {
            ModelArg::Random => ModelKind::Random,
            ModelArg::TextPosition => ModelKind::TextPosition,
            ModelArg::ImageChain => ModelKind::ImageChain,
            ModelArg::Pairwise => ModelKind::Pairwise,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainStartArg {
    Outlier,
    Best,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassifierArg {
    Logreg,
    Mlp,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.merge.is_empty() {
        return run_merge(&args);
    }
    let path = args.instances.clone().expect("clap requires INSTANCES unless --merge");
    let instances = stepwise_score::predictions::read_instances(&path)?;
    let config = run_config(&args, ModelKind::Random)?;
    let loaded = load_features(&args.features, &instances)?;
    match (args.model, &args.table) {
        (Some(m), _) => run_one(&args, &instances, &loaded, RunConfig { model: m.into(), ..config }),
        (None, Some(name)) => {
            let out = TableOutput { dir: args.output.clone(), force: args.force, seed: args.seed };
            let results = run_table(&out, &path, name, &instances, &loaded, config)?;
            print!("{}", table::markdown(&results));
            if !stepwise_core::progress::is_quiet() {
                eprintln!("wrote {}", args.output.display());
            }
            Ok(())
        }
        (None, None) => usage_bail!("give --model, --table or --merge"),
    }
}

/// The run configuration from the options (model set by the caller).
pub fn run_config(args: &Args, model: ModelKind) -> anyhow::Result<RunConfig> {
    let evaluation = match args.cv {
        Some(k) if k < 3 => usage_bail!("--cv needs at least 3 folds, got {k}"),
        Some(k) => Evaluation::CrossValidation(k),
        None => Evaluation::Split(args.split.clone()),
    };
    if args.hidden == 0 || args.batch_size == 0 || args.epochs == 0 {
        usage_bail!("--hidden, --batch-size and --epochs must be at least 1");
    }
    if !(args.lr > 0.0 && args.lr.is_finite() && args.weight_decay >= 0.0 && args.weight_decay.is_finite()) {
        usage_bail!("--lr must be positive and --weight-decay non-negative");
    }
    Ok(RunConfig {
        model,
        evaluation,
        chain_start: match args.chain_start {
            ChainStartArg::Outlier => ChainStartName::Outlier,
            ChainStartArg::Best => ChainStartName::Best,
        },
        pairwise: PairwiseConfig {
            classifier: match args.classifier {
                ClassifierArg::Logreg => Classifier::LogReg,
                ClassifierArg::Mlp => Classifier::Mlp { hidden: args.hidden },
            },
            epochs: args.epochs,
            batch_size: args.batch_size,
            learning_rate: args.lr,
            weight_decay: args.weight_decay,
            patience: args.patience,
            max_dim: args.max_dim,
            seed: args.seed,
        },
        seed: args.seed,
        train_only: TrainOnly::new(args.train_only.clone())?,
    })
}

fn run_one(
    args: &Args,
    instances: &[SequencingInstance],
    loaded: &SequencingFeatures,
    config: RunConfig,
) -> anyhow::Result<()> {
    if args.output.exists() && !args.force {
        usage_bail!("{}: output exists; choose another path or pass --force to replace it", args.output.display());
    }
    if !config.model.needs_features() && !args.features.is_empty() {
        tracing::warn!("the {} model reads no features; --features ignored", config.model.as_str());
    }
    let out = sequencer::run(instances, &loaded.set(), &config)?;
    let run = TableRun { model: config.model, kind: loaded.set().kind().filter(|_| config.model.needs_features()) };
    let kind = run.features();
    write_order_predictions(&args.output, &out.predictions, Some(&run.label()))?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{} predictions ({}, features {kind}) → {}",
            out.predictions.len(),
            config.model.as_str(),
            args.output.display()
        );
        if let Some(n) = training_note(config.model.as_str(), kind, &out) {
            eprintln!("{n}");
        }
    }
    if args.evaluate {
        let dataset = args.instances.as_ref().map_or(String::new(), |p| p.display().to_string());
        let row = score_row(&dataset, run, instances, &out.predictions, &config, args.seed)?;
        let results = Results { rows: vec![row], notes: vec![] };
        print!("{}", table::markdown(&results));
    }
    Ok(())
}

/// Where and how a table run writes.
struct TableOutput {
    dir: PathBuf,
    force: bool,
    seed: u64,
}

fn run_table(
    args: &TableOutput,
    path: &std::path::Path,
    name: &str,
    instances: &[SequencingInstance],
    loaded: &SequencingFeatures,
    base: RunConfig,
) -> anyhow::Result<Results> {
    let out_dir = OutputDir::create(&args.dir, args.force)?;
    std::fs::create_dir_all(out_dir.path().join("predictions"))?;
    let mut rows = Vec::new();
    let mut notes = vec![protocol_note(name, &base.evaluation)];
    let extra = instances.iter().filter(|i| base.train_only.contains(&i.procedure)).count();
    notes.extend(base.train_only.note(extra).map(|n| format!("{name}: {n}")));
    for run in table_runs(instances, loaded) {
        let done = run_table_row(name, run, instances, loaded, &base, args.seed)
            .with_context(|| format!("{} ({})", run.model.as_str(), run.features()))?;
        write_order_predictions(
            &out_dir.path().join("predictions").join(run.file_name()),
            &done.predictions,
            Some(&run.label()),
        )?;
        notes.extend(done.note);
        if !stepwise_core::progress::is_quiet() {
            let pmr = &done.row.single["pmr"];
            eprintln!(
                "{name}: {} ({}): PMR {}% {}, τ {:.3} over {} sequences (authored order)",
                run.model.as_str(),
                run.features(),
                stepwise_score::markdown::percent(pmr.value),
                stepwise_score::markdown::percent_interval(pmr.interval()),
                done.row.single["kendall_tau"].value,
                done.row.sequences
            );
        }
        rows.push(done.row);
    }
    let results = Results { rows, notes };
    results.write_files(out_dir.path(), "results")?;
    let mut m = Manifest::new("sequencing-results").with_seed(args.seed);
    let mut inputs = vec![stepwise_score::predictions::instances_file(path)];
    inputs.extend(loaded.meta_files());
    m.add_inputs(&inputs)?;
    m.count("rows", results.rows.len() as u64);
    m.count("instances", instances.len() as u64);
    m.param("dataset", name);
    m.param("run", &base);
    m.param("features", loaded.sources.iter().map(|(k, _, enc)| format!("{k}:{enc}")).collect::<BTreeSet<_>>());
    m.write(out_dir.path())?;
    out_dir.commit()?;
    Ok(results)
}

fn run_merge(args: &Args) -> anyhow::Result<()> {
    let all = Results::merge(&args.merge)?;
    let out_dir = OutputDir::create(&args.output, args.force)?;
    all.write_files(out_dir.path(), "results")?;
    let mut m = Manifest::new("sequencing-results");
    let inputs: Vec<PathBuf> = args.merge.iter().map(|d| d.join("results.json")).collect();
    m.add_inputs(&inputs)?;
    m.count("rows", all.rows.len() as u64);
    m.write(out_dir.path())?;
    out_dir.commit()?;
    print!("{}", table::markdown(&all));
    Ok(())
}
