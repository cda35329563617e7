//! `stepwise eval`: score predictions the way the papers scored them.
//!
//! - Multiple-choice task sets (a RecipeQA JSON file, a task-set folder, several of them, or a suite folder):
//!   accuracy per task (and per set) with percentile bootstrap intervals; missing predictions count as wrong.
//! - Sequencing instances (`instances.jsonl` or its folder): position accuracy, PMR, distance, L_q, L_r,
//!   Kendall's τ against the best reference (optionally the pooled variants), or, with `--agreement`, Cohen's κ
//!   among annotators.
//! - R2VQ questions with gold answers (a SemEval-layout file with `# answer` lines; detected from its content or
//!   named by `--task r2vq`): exact match and token F1 per question family and overall.
//! - `--versus`: two methods' predictions (each one file or several, e.g. seeds) on the same task sets or
//!   instances, A − B per metric with a paired bootstrap interval and whether it is outside noise.
//!
//! The Markdown table goes to stdout; `--json FILE` writes the results as JSON; `-o DIR` writes a folder with
//! `results.json`, `results.md`, the per-question or per-instance JSONL and `manifest.json`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use stepwise_score::accuracy::{self, MatchOptions, ResampleUnit, ScoreOptions};
use stepwise_score::bootstrap::BootstrapConfig;
use stepwise_score::choice_eval::{self, ChoiceEvalOptions, ChoiceSet, EvalTargets};
use stepwise_score::eval_outcome::EvalOutcome;
use stepwise_score::predictions::ChoiceFormat;
use stepwise_score::sequencing_eval::{self, SequencingOptions};

use crate::usage_bail;

/// Score predictions: multiple-choice accuracy with bootstrap CIs, or the sequencing metrics.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise eval val.json -p preds.jsonl          # one {\"qid\", \"answer\"} per line\n  \
    stepwise eval val.json -p official.json        # {\"textual_cloze\": [i, ...], ...}\n  \
    stepwise eval val.json -p tc.json --task textual_cloze\n  \
    stepwise eval SUITE -p PREDS -o results        # PREDS/<set>/predictions.jsonl\n  \
    stepwise eval SEQ -p orders.jsonl --split test --pooled\n  \
    stepwise eval SEQ --agreement annotations.jsonl\n  \
    stepwise eval SEQ -p a1.jsonl -p a2.jsonl --versus b1.jsonl --versus b2.jsonl --split test\n  \
    stepwise eval r2vq.csv -p answers.jsonl --task r2vq   # one {\"id\": \"<recipe>/<q>\", \"answer\"} per line\n\n\
    Multiple choice: missing predictions count as wrong; invalid indices are wrong and counted; \
    unknown qids are counted, and the file is refused when fewer than --min-overlap of them are \
    known.\n\
    Sequencing (JSONL {\"id\", \"order\"}): the multimodal sequencing paper's metrics (per-sequence \
    averages; distance is a sum over items; L_q/L_r are raw lengths), each against the best \
    reference; --pooled adds the topological-sort paper's micro averages. Agreement (JSONL \
    {\"id\", \"annotator\", \"order\", \"alternatives\"}): Cohen's kappa. \
    --versus: the paired difference A − B on the items every file scored, resampled by the same unit.")]
pub struct Args {
    /// Task sets (RecipeQA JSON file, task-set folder, suite folder) or sequencing instances (JSONL or folder).
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<PathBuf>,
    /// Predictions: a file, or for several task sets a folder with one file per set
    /// (`DIR/<set>/predictions.jsonl` or `DIR/<set>.jsonl`, `<set>` as named in the report). With --versus, may be
    /// given several times (e.g. one file per seed: each item's mean over them is compared).
    #[arg(short, long, value_name = "FILE|DIR", required_unless_present = "agreement")]
    pub predictions: Vec<PathBuf>,
    /// Compare with these predictions (method B; repeat for several files, e.g. seeds): A − B per metric on the
    /// same items, with a paired bootstrap interval and whether it is outside noise.
    #[arg(long, value_name = "FILE|DIR", requires = "predictions")]
    pub versus: Vec<PathBuf>,
    /// Annotators' orders of sequencing instances: report agreement (Cohen's κ) instead of scoring predictions.
    #[arg(long, value_name = "FILE", conflicts_with = "predictions")]
    pub agreement: Option<PathBuf>,
    /// Layout of multiple-choice predictions.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: FormatArg,
    /// Score only this task's questions (also names the task of a bare official answer list).
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
    /// Bootstrap resamples for the confidence intervals (0: no intervals).
    #[arg(long, value_name = "N", default_value_t = stepwise_score::bootstrap::DEFAULT_RESAMPLES)]
    pub bootstrap: usize,
    /// Confidence level of the intervals.
    #[arg(long, value_name = "C", default_value_t = stepwise_score::bootstrap::DEFAULT_CONFIDENCE)]
    pub confidence: f64,
    /// Seed of the bootstrap.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// What the bootstrap resamples: multiple choice `question` (default) or `recipe` (all its questions
    /// together); sequencing `instance` (default) or `procedure` (all its instances together).
    #[arg(long, value_enum)]
    pub bootstrap_unit: Option<UnitArg>,
    /// Refuse predictions when fewer than this share of their ids exist in the evaluated data.
    #[arg(long, value_name = "SHARE", default_value_t = accuracy::DEFAULT_MIN_OVERLAP)]
    pub min_overlap: f64,
    /// Evaluate only the questions / instances of this split.
    #[arg(long)]
    pub split: Option<String>,
    /// Sequencing: leave out instances without a prediction (counted) instead of failing.
    #[arg(long)]
    pub skip_missing: bool,
    /// Sequencing: also report the pooled (micro) variants of the topological-sort paper.
    #[arg(long)]
    pub pooled: bool,
    /// Sequencing: also report groups by number of items, e.g. `2,3-5,6-10` (R2VQ's event-ordering buckets)
    /// or `11+`.
    #[arg(long, value_name = "BUCKETS")]
    pub by_length: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a results folder (results.json, results.md, per-item JSONL, manifest.json).
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatArg {
    Auto,
    Jsonl,
    Official,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitArg {
    Question,
    Recipe,
    Instance,
    Procedure,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = BootstrapConfig { resamples: args.bootstrap, confidence: args.confidence, seed: args.seed };
    if let Err(m) = config.validate() {
        usage_bail!("--confidence: {m}");
    }
    if !(0.0..=1.0).contains(&args.min_overlap) {
        usage_bail!("--min-overlap must be between 0 and 1, got {}", args.min_overlap);
    }
    let out = if let Some(gold) = r2vq_target(&args)? {
        eval_r2vq(&args, &gold, &config)?
    } else {
        match choice_eval::resolve_targets(&args.targets)? {
            EvalTargets::Choice(sets) => eval_choice(&args, &sets, &config)?,
            EvalTargets::Sequencing(path) => match &args.agreement {
                Some(ann) => {
                    if args.split.is_some()
                        || args.skip_missing
                        || args.pooled
                        || args.by_length.is_some()
                        || args.bootstrap_unit.is_some()
                    {
                        usage_bail!(
                            "--split, --skip-missing, --pooled, --by-length and --bootstrap-unit do not apply to --agreement"
                        );
                    }
                    EvalOutcome::agreement(&path, ann, &config)?
                }
                None => eval_sequencing(&args, &path, &config)?,
            },
        }
    };
    // With --quiet the tables go only to the output files (when there are any).
    if !(stepwise_core::progress::is_quiet() && (args.output.is_some() || args.json.is_some())) {
        print!("{}", out.markdown);
    }
    let params = Params {
        bootstrap: config.resamples,
        confidence: config.confidence,
        min_overlap: args.min_overlap,
        task: &args.task,
        split: &args.split,
    };
    let written = out.write(args.json.as_deref(), args.output.as_deref(), args.force, config.seed, params)?;
    if let (Some(dest), false) = (written, stepwise_core::progress::is_quiet()) {
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// The R2VQ gold file when the target is one (`--task r2vq`, or a file in the SemEval layout).
fn r2vq_target(args: &Args) -> anyhow::Result<Option<PathBuf>> {
    let named = args.task.as_deref() == Some("r2vq");
    let sniffed = stepwise_ingest::readers::r2vq_conllu::is_r2vq_conllu;
    match args.targets.as_slice() {
        [p] if !named && args.task.is_some() && sniffed(p) => {
            usage_bail!("{}: an R2VQ file is scored with --task r2vq (or no --task)", p.display())
        }
        [p] if named || sniffed(p) => Ok(Some(p.clone())),
        _ if named => usage_bail!("--task r2vq scores one gold file (SemEval layout with `# answer` lines)"),
        _ if args.targets.iter().any(|p| sniffed(p)) => usage_bail!("give one R2VQ gold file at a time"),
        _ => Ok(None),
    }
}

/// R2VQ: exact match and token F1 per family against the `# answer` lines of a SemEval-layout file.
fn eval_r2vq(args: &Args, gold_path: &Path, config: &BootstrapConfig) -> anyhow::Result<EvalOutcome> {
    if args.agreement.is_some() || args.split.is_some() || args.skip_missing || args.pooled || args.by_length.is_some()
    {
        usage_bail!("--agreement, --split, --skip-missing, --pooled and --by-length do not apply to R2VQ answers");
    }
    if !matches!(args.bootstrap_unit, None | Some(UnitArg::Recipe)) {
        usage_bail!("R2VQ answers are resampled by recipe (--bootstrap-unit recipe)");
    }
    if !args.versus.is_empty() {
        usage_bail!("--versus compares sequencing orders or multiple-choice answers, not R2VQ answers");
    }
    let pred_path = one_predictions(args)?;
    let doc = stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu(gold_path)?;
    Ok(EvalOutcome::r2vq(&doc, gold_path, pred_path, config)?)
}

fn eval_choice(args: &Args, sets: &[ChoiceSet], config: &BootstrapConfig) -> anyhow::Result<EvalOutcome> {
    if args.skip_missing || args.pooled || args.by_length.is_some() {
        usage_bail!("--skip-missing, --pooled and --by-length apply to sequencing instances, not task sets");
    }
    if args.predictions.is_empty() {
        usage_bail!("--agreement applies to sequencing instances");
    }
    let opts = ChoiceEvalOptions {
        format: match args.format {
            FormatArg::Auto => ChoiceFormat::Auto,
            FormatArg::Jsonl => ChoiceFormat::Jsonl,
            FormatArg::Official => ChoiceFormat::Official,
        },
        score: ScoreOptions {
            matching: MatchOptions { task: args.task.clone(), min_overlap: args.min_overlap },
            unit: match args.bootstrap_unit {
                None | Some(UnitArg::Question) => ResampleUnit::Question,
                Some(UnitArg::Recipe) => ResampleUnit::Recipe,
                Some(_) => usage_bail!("task sets resample by --bootstrap-unit question or recipe"),
            },
            bootstrap: *config,
        },
        split: args.split.clone(),
        per_question: args.output.is_some(),
    };
    if !args.versus.is_empty() {
        return Ok(EvalOutcome::compare_choices(sets, &args.predictions, &args.versus, &opts)?);
    }
    Ok(EvalOutcome::choice(sets, one_predictions(args)?, &opts)?)
}

fn eval_sequencing(args: &Args, path: &Path, config: &BootstrapConfig) -> anyhow::Result<EvalOutcome> {
    if args.task.is_some() || args.format != FormatArg::Auto {
        usage_bail!("--task and --format apply to multiple-choice task sets");
    }
    let resample_procedures = match args.bootstrap_unit {
        None | Some(UnitArg::Instance) => false,
        Some(UnitArg::Procedure) => true,
        Some(_) => {
            usage_bail!("sequencing instances resample by --bootstrap-unit instance or procedure")
        }
    };
    if args.predictions.is_empty() {
        usage_bail!("give --predictions or --agreement");
    }
    if !args.versus.is_empty() && (args.pooled || args.by_length.is_some()) {
        usage_bail!("--pooled and --by-length do not apply to --versus (it compares the per-sequence metrics)");
    }
    let options = SequencingOptions {
        split: args.split.clone(),
        skip_missing: args.skip_missing,
        min_overlap: args.min_overlap,
        bootstrap: *config,
        resample_procedures,
        length_buckets: match &args.by_length {
            None => Vec::new(),
            Some(b) => match sequencing_eval::parse_length_buckets(b) {
                Ok(b) => b,
                Err(m) => usage_bail!("--by-length: {m}"),
            },
        },
    };
    if !args.versus.is_empty() {
        return Ok(EvalOutcome::compare_orders(path, &args.predictions, &args.versus, &options)?);
    }
    Ok(EvalOutcome::sequencing(path, one_predictions(args)?, &options, args.pooled, args.output.is_some())?)
}

/// The one predictions file (or folder) scored when nothing is compared.
fn one_predictions(args: &Args) -> anyhow::Result<&Path> {
    match args.predictions.as_slice() {
        [p] => Ok(p),
        [] => usage_bail!("--predictions is required"),
        _ => usage_bail!("several --predictions are compared with --versus; without it, score one at a time"),
    }
}

/// The manifest's record of how `eval` scored.
#[derive(Serialize)]
struct Params<'a> {
    bootstrap: usize,
    confidence: f64,
    min_overlap: f64,
    task: &'a Option<String>,
    split: &'a Option<String>,
}
