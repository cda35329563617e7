//! `stepwise train TASKSET --features F... --model impatient|bidaf|htrn -o MODEL_DIR`: train a GM3C model on one
//! task of a task set (train split, epoch selected on val), with a checkpoint after every epoch so a killed run
//! resumes to the same weights.

use std::path::{Path, PathBuf};

use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Task, TaskSet, taskset::QUESTIONS_JSON};
use stepwise_models::m3c::dataset::{task_inputs, tasks_in};
use stepwise_models::m3c::saved;
use stepwise_models::m3c::train::{self, Checkpointing, TrainConfig, TrainReport};
use stepwise_models::m3c::{HtrnConfig, InputScaling, InputSpec, Loss, M3cModel, ModelConfig, ScorerKind};
use stepwise_report::plots::{LineChart, write_line_chart};

use super::model_features::FeatureArgs;
use crate::usage_bail;

/// Train a multiple-choice model (Impatient Reader, BiDAF or HTRN) on one task of a task set.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise train suite/recipeqa/visual_cloze --features feats/w2v --features feats/descriptor --model htrn -o m/\n  \
    stepwise predict m/ suite/recipeqa/visual_cloze -o preds.jsonl --features feats/w2v --features feats/descriptor\n  \
    stepwise eval suite/recipeqa/visual_cloze -p preds.jsonl --split test\n\n\
    The model (GM3C, Meta-RecipeQA §3): a hierarchical BiLSTM over the context steps (tokens within a step when \
    token-level features exist, then steps), a BiLSTM over each candidate's query sequence (appendix C: the \
    candidate in the placeholder, the question without one element for coherence, each order for ordering), and \
    a scoring function. Adam, early stopping on validation accuracy. MODEL_DIR: weights.safetensors, \
    config.json, features.json (identities of the stores, checked by predict), training.json and \
    training_curve.svg/.png, manifest.json. A killed run resumes from its checkpoint (a hidden file next to \
    MODEL_DIR) when started again with the same arguments.")]
pub struct Args {
    /// A task-set folder (with questions.json) or a RecipeQA-layout JSON file.
    pub taskset: PathBuf,
    #[command(flatten)]
    pub features: FeatureArgs,
    /// The scoring function.
    #[arg(long, value_enum)]
    pub model: ModelArg,
    /// The task to train on (default: the only task of the set).
    #[arg(long)]
    pub task: Option<String>,
    #[command(flatten)]
    pub hyper: ModelHyper,
    /// The split to train on.
    #[arg(long, default_value = "train")]
    pub train_split: String,
    /// The split that selects the epoch (none: all epochs run and the last weights are kept).
    #[arg(long, default_value = "val")]
    pub val_split: String,
    #[arg(short, long, value_name = "MODEL_DIR")]
    pub output: PathBuf,
    /// Replace an existing output.
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelArg {
    Impatient,
    Bidaf,
    Htrn,
}

impl From<ModelArg> for ScorerKind {
    fn from(m: ModelArg) -> Self {
        match m {
            ModelArg::Impatient => ScorerKind::Impatient,
            ModelArg::Bidaf => ScorerKind::Bidaf,
            ModelArg::Htrn => ScorerKind::Htrn,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossArg {
    /// The model's default: hinge for the Impatient Reader (margin --margin), cross-entropy otherwise.
    Default,
    Hinge,
    Ce,
}

/// Model sizes and training options (shared with `stepwise study`).
#[derive(clap::Args, Debug, Clone)]
pub struct ModelHyper {
    /// LSTM hidden units per direction.
    #[arg(long, default_value_t = 256)]
    pub hidden: usize,
    /// Impatient Reader: attention width.
    #[arg(long, default_value_t = 256)]
    pub attention: usize,
    /// HTRN: transformer layers.
    #[arg(long, default_value_t = 4)]
    pub htrn_layers: usize,
    /// HTRN: transformer width.
    #[arg(long, default_value_t = 512)]
    pub htrn_dim: usize,
    /// HTRN: attention heads.
    #[arg(long, default_value_t = 8)]
    pub htrn_heads: usize,
    #[arg(long, value_enum, default_value = "default")]
    pub loss: LossArg,
    /// Hinge loss margin (RecipeQA's value).
    #[arg(long, default_value_t = 1.5)]
    pub margin: f64,
    /// Adam learning rate.
    #[arg(long, default_value_t = 5e-4)]
    pub lr: f64,
    /// Questions per mini-batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Maximum training epochs.
    #[arg(long, default_value_t = 100)]
    pub epochs: usize,
    /// Stop after this many epochs without a better validation accuracy.
    #[arg(long, default_value_t = 20)]
    pub patience: usize,
    /// At most this many context steps per question.
    #[arg(long, default_value_t = 25)]
    pub max_context_steps: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How feature rows enter the encoders (mean and spread from the training questions' rows): as stored (the
    /// papers), centred and scaled by one factor, or standardised per dimension.
    #[arg(long, value_enum, default_value = "raw")]
    pub inputs: InputsArg,
    /// Dropout rate on the encoders' inputs and outputs while training (0: none, as the papers state it).
    #[arg(long, default_value_t = 0.0)]
    pub dropout: f64,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputsArg {
    Raw,
    Centered,
    Standardized,
}

impl From<InputsArg> for InputScaling {
    fn from(a: InputsArg) -> Self {
        match a {
            InputsArg::Raw => InputScaling::Raw,
            InputsArg::Centered => InputScaling::Centered,
            InputsArg::Standardized => InputScaling::Standardized,
        }
    }
}

impl ModelHyper {
    pub fn check(&self) -> anyhow::Result<()> {
        crate::cli_util::require_at_least_one(&[
            ("--hidden", self.hidden),
            ("--attention", self.attention),
            ("--htrn-layers", self.htrn_layers),
            ("--htrn-dim", self.htrn_dim),
            ("--htrn-heads", self.htrn_heads),
            ("--batch-size", self.batch_size),
            ("--epochs", self.epochs),
            ("--max-context-steps", self.max_context_steps),
        ])?;
        crate::cli_util::require_heads_divide(("--htrn-dim", self.htrn_dim), ("--htrn-heads", self.htrn_heads))?;
        if !(self.lr.is_finite() && self.lr > 0.0) || !(self.margin.is_finite() && self.margin >= 0.0) {
            usage_bail!("--lr must be positive and --margin non-negative");
        }
        if !(0.0..1.0).contains(&self.dropout) {
            usage_bail!("--dropout must be at least 0 and below 1");
        }
        Ok(())
    }

    pub fn htrn(&self) -> HtrnConfig {
        HtrnConfig {
            layers: self.htrn_layers,
            dim: self.htrn_dim,
            heads: self.htrn_heads,
            ff: 4 * self.htrn_dim,
            max_positions: (self.max_context_steps + 64).max(128),
        }
    }

    pub fn train_config(&self) -> TrainConfig {
        TrainConfig {
            learning_rate: self.lr,
            batch_size: self.batch_size,
            max_epochs: self.epochs,
            patience: self.patience,
            seed: self.seed,
        }
    }

    /// The model configuration for `scorer` over inputs `spec` of the given dimensions.
    pub fn model_config(&self, scorer: ScorerKind, mut spec: InputSpec, dims: (usize, usize)) -> ModelConfig {
        spec.max_context_steps = self.max_context_steps;
        let mut c = ModelConfig::new(scorer, spec, dims.0, dims.1);
        c.hidden = self.hidden;
        c.attention = self.attention;
        c.htrn = self.htrn();
        c.dropout = self.dropout;
        c.loss = match self.loss {
            LossArg::Default => c.loss,
            LossArg::Hinge => Loss::Hinge { margin: self.margin },
            LossArg::Ce => Loss::CrossEntropy,
        };
        if let Loss::Hinge { .. } = c.loss {
            c.loss = Loss::Hinge { margin: self.margin };
        }
        c
    }
}

/// The task to use: `--task`, or the only one in the set.
pub fn pick_task(set: &TaskSet, task: Option<&str>, path: &Path) -> anyhow::Result<Task> {
    let present = tasks_in(set);
    match task {
        Some(t) => match Task::parse(t) {
            Some(t) if present.contains(&t) => Ok(t),
            Some(t) => usage_bail!("{}: no {t} questions in this task set", path.display()),
            None => {
                usage_bail!("--task {t}: not one of {}", Task::names())
            }
        },
        None => match present.as_slice() {
            [t] => Ok(*t),
            [] => usage_bail!("{}: no question of a RecipeQA task", path.display()),
            many => usage_bail!(
                "{}: several tasks ({}); choose one with --task",
                path.display(),
                many.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
            ),
        },
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    args.hyper.check()?;
    let set = TaskSet::load(&args.taskset)?;
    let task = pick_task(&set, args.task.as_deref(), &args.taskset)?;
    let questions = || set.of_task(task.as_str());
    let features = args.features.load(questions())?;
    let sources = features.sources();
    let spec = InputSpec::for_task(task, &sources, true);
    let dims = match spec.dims(&sources) {
        Ok(d) => d,
        Err(e) => usage_bail!("{task}: {e}"),
    };
    let inputs =
        task_inputs(&set, task, &InputSpec { max_context_steps: args.hyper.max_context_steps, ..spec }, &sources);
    let train_set = inputs.split(&args.train_split);
    let val_set = inputs.split(&args.val_split);
    if train_set.is_empty() {
        let why = inputs.skipped.examples.first().map_or(String::new(), |e| format!(" (e.g. {e})"));
        usage_bail!(
            "{}: no usable {task} question in split `{}` ({} left out for missing vectors{why})",
            args.taskset.display(),
            args.train_split,
            inputs.skipped.count
        );
    }
    if inputs.skipped.count > 0 {
        tracing::warn!(
            "{} {task} questions left out for missing vectors, e.g. {}",
            inputs.skipped.count,
            inputs.skipped.examples.join("; ")
        );
    }
    let out = OutputDir::create(&args.output, args.force)?;
    let scorer: ScorerKind = args.model.into();
    let config = args.hyper.model_config(scorer, spec, dims).scaled_on(args.hyper.inputs.into(), train_set);
    let tcfg = args.hyper.train_config();
    let model = M3cModel::new(config, tcfg.seed)?;
    let checkpoint = Checkpointing { path: checkpoint_path(&args.output), stop_after_epochs: None };
    let pb = stepwise_core::progress::bar(0, &format!("{} on {task}", scorer.display()));
    let report = train::train(&model, train_set, val_set, &tcfg, Some(&checkpoint), &mut |epoch, b, n, loss, best| {
        pb.set_length(n as u64);
        pb.set_position(b as u64);
        let best = best.map_or(String::new(), |v| format!(", best val acc {:.1}%", 100.0 * v));
        pb.set_message(format!("epoch {epoch}: loss {loss:.4}{best}"));
    })?;
    pb.finish_and_clear();
    let Some(report) = report else { anyhow::bail!("training stopped before its end") };
    let identities: Vec<_> = features.identities.iter().map(|(i, _)| i.clone()).collect();
    saved::save(out.path(), &model, &tcfg, &report, &identities)?;
    write_curve(out.path(), &report, &format!("{} on {task}", scorer.display()))?;
    let mut m = Manifest::new("model").with_seed(tcfg.seed);
    let file = if args.taskset.is_dir() { args.taskset.join(QUESTIONS_JSON) } else { args.taskset.clone() };
    m.inputs.push(InputHash::of(&file)?);
    m.inputs.extend(features.input_hashes.iter().cloned());
    m.param("task", task.as_str());
    m.param("model", scorer.as_str());
    m.count("train_questions", report.train_questions as u64);
    m.count("val_questions", report.val_questions as u64);
    m.count("skipped_questions", inputs.skipped.count as u64);
    m.count("parameters", report.parameters as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    let _ = std::fs::remove_file(&checkpoint.path);
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{} on {task}: {} parameters, {} train / {} val questions, {} epochs (best {}{}){}",
            scorer.display(),
            report.parameters,
            report.train_questions,
            report.val_questions,
            report.epochs_run,
            report.best_epoch,
            report.best_val_accuracy.map_or(String::new(), |v| format!(", val accuracy {:.1}%", 100.0 * v)),
            if report.resumed_from_epoch > 0 {
                format!("; resumed after epoch {}", report.resumed_from_epoch)
            } else {
                String::new()
            }
        );
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// The checkpoint of a training run writing `output`: a hidden file beside it, stable across restarts.
pub fn checkpoint_path(output: &Path) -> PathBuf {
    let name = output.file_name().map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
    output.with_file_name(format!(".{name}.checkpoint.safetensors"))
}

/// The training curve as JSON (in training.json) and a plot: loss and accuracies per epoch.
pub fn write_curve(dir: &Path, report: &TrainReport, title: &str) -> anyhow::Result<()> {
    let pts = |f: &dyn Fn(&train::EpochRecord) -> Option<f64>| -> Vec<(f64, f64)> {
        report.curve.iter().filter_map(|r| f(r).map(|v| (r.epoch as f64, v))).collect()
    };
    let mut chart = LineChart::new(format!("Training curve: {title}"), "epoch", "accuracy / loss")
        .with_series("train loss", pts(&|r| Some(r.train_loss)))
        .with_series("train accuracy", pts(&|r| Some(r.train_accuracy)));
    let val = pts(&|r| r.val_accuracy);
    if !val.is_empty() {
        chart = chart.with_series("val accuracy", val);
    }
    write_line_chart(&chart, &dir.join("training_curve.svg"), &dir.join("training_curve.png"))?;
    write_string_atomic(&dir.join("training_curve.json"), &stepwise_core::json::to_pretty_sorted(&report.curve))?;
    Ok(())
}
