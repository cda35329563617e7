//! `stepwise generate CORPUS --task sequencing ...`: step-sequencing instances with exact multi-references.
//!
//! The `generate` command flattens [`SequencingArgs`] into its own `Args` (`#[command(flatten)]`) and, for
//! `--task sequencing`, fills the four `#[arg(skip)]` fields from its own arguments (corpus, output, seed,
//! force) and calls [`run_sequencing`]. Option names are chosen not to clash with the other tasks' options.

use std::path::PathBuf;

use anyhow::Context;
use stepwise_core::Corpus;
use stepwise_core::split::SplitFractions;
use stepwise_tasks::sequencing::{self, AltOrders, GenerationStats, SeqModality, SequencingConfig, Windows};

use crate::usage_bail;

/// Options of `--task sequencing` (ignored by the other tasks).
#[derive(clap::Args, Debug, Clone)]
pub struct SequencingArgs {
    /// Sequencing: what each item shows: `text` (title + text), `image` (step images only) or `multimodal`
    /// (both). For image and multimodal only steps with at least one image are used; a step with several
    /// images lists them all (baselines average their vectors).
    #[arg(long, value_enum, default_value = "text", help_heading = "Sequencing")]
    pub modality: ModalityArg,
    /// Sequencing: steps per instance (the paper's cap is 5).
    #[arg(long = "seq-steps", value_name = "N", default_value_t = 5, help_heading = "Sequencing")]
    pub seq_steps: usize,
    /// Sequencing: procedures with fewer usable steps than --seq-steps but at least this many give one shorter
    /// instance with all their usable steps (default: --seq-steps, i.e. such procedures are skipped).
    #[arg(long = "seq-min-steps", value_name = "N", help_heading = "Sequencing")]
    pub seq_min_steps: Option<usize>,
    /// Sequencing: contiguous windows of usable steps per procedure: a number (start positions sampled without
    /// replacement, seeded), `all`, or `first` (the first steps only, as the paper's released code does).
    #[arg(long, value_name = "K|all|first", default_value = "1", help_heading = "Sequencing")]
    pub windows: String,
    /// Sequencing: keep at most this many sentences of each step text (0 = no limit).
    #[arg(long = "max-sentences", value_name = "N", default_value_t = 5, help_heading = "Sequencing")]
    pub max_sentences: usize,
    /// Sequencing: keep at most this many tokens of each step text (0 = no limit). Tokens are whitespace-separated
    /// words; each CJK character counts as one token.
    #[arg(long = "max-tokens", value_name = "N", default_value_t = 60, help_heading = "Sequencing")]
    pub max_tokens: usize,
    /// Sequencing: human-annotated alternative orders, JSONL `{"id": PROCEDURE_ID, "orders": [[step, ...], ...]}`
    /// with 0-based step indices of the procedure. They replace the procedure's own order annotations.
    #[arg(long = "alt-orders", value_name = "FILE", help_heading = "Sequencing")]
    pub alt_orders: Option<PathBuf>,
    /// Sequencing: at most this many references per instance drawn from a procedure's order constraints; when a
    /// window has more valid orders, a seeded uniform sample is kept (the authored order always first) with the
    /// window's precedence constraints, so that `eval` scores every valid order as valid, sampled or not. A
    /// procedure's own list of valid orders is kept whole.
    #[arg(long = "max-references", value_name = "N", default_value_t = 1000, help_heading = "Sequencing")]
    pub max_references: usize,
    /// Sequencing: train,val,test fractions of procedures (split by procedure, stratified by category).
    #[arg(long = "seq-split", value_name = "T,V,E", default_value = "0.8,0.1,0.1", help_heading = "Sequencing")]
    pub seq_split: String,
    /// Sequencing: also write `inputs.jsonl`, the file to give a model or annotator: the same instances with
    /// items in the same shuffled order but identified by opaque keys, without step indices or references
    /// (`instances.jsonl` is the gold file the evaluator reads). Predictions are `{"id", "order"}` with item
    /// indices, as for the gold file.
    #[arg(long, help_heading = "Sequencing")]
    pub blind: bool,

    /// Set by `generate`: the corpus folder or procedure-JSONL file.
    #[arg(skip)]
    pub corpus: PathBuf,
    /// Set by `generate`: the output folder.
    #[arg(skip)]
    pub output: PathBuf,
    /// Set by `generate`: the seed.
    #[arg(skip)]
    pub seed: u64,
    /// Set by `generate`: replace an existing output folder.
    #[arg(skip)]
    pub force: bool,
}

impl SequencingArgs {
    /// The options with their defaults, plus `extra` command-line options (e.g. `["--modality", "image"]`), for
    /// tests. The `#[arg(skip)]` fields are left for the caller to set.
    #[cfg(test)]
    pub fn with_defaults(extra: &[&str]) -> anyhow::Result<SequencingArgs> {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            args: SequencingArgs,
        }
        let argv = std::iter::once("generate").chain(extra.iter().copied());
        Ok(Wrap::try_parse_from(argv)?.args)
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModalityArg {
    Text,
    Image,
    Multimodal,
}

impl From<ModalityArg> for SeqModality {
    fn from(m: ModalityArg) -> Self {
        match m {
            ModalityArg::Text => SeqModality::Text,
            ModalityArg::Image => SeqModality::Image,
            ModalityArg::Multimodal => SeqModality::Multimodal,
        }
    }
}

/// Generate the instances folder (`instances.jsonl`, `instances.parquet`, `manifest.json`) and print a summary.
pub fn run_sequencing(args: &SequencingArgs) -> anyhow::Result<()> {
    let (dest, stats) = make_sequencing(args)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!("{}", stats.summary());
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// [`run_sequencing`] without printing: the folder written and what generation did.
fn make_sequencing(args: &SequencingArgs) -> anyhow::Result<(PathBuf, GenerationStats)> {
    let config = config_from_args(args)?;
    let corpus = Corpus::load(&args.corpus)?;
    let alt = match &args.alt_orders {
        Some(p) => Some(AltOrders::read(p, &corpus.procedures)?),
        None => None,
    };
    let source = Corpus::procedures_file(&args.corpus);
    let generated = sequencing::generate(&corpus.procedures, &source, alt.as_ref(), &config)?;
    if generated.instances.is_empty() {
        anyhow::bail!(stepwise_core::Error::bad_input(format!(
            "{}: no procedure has enough usable steps for {}-step {} instances ({})",
            args.corpus.display(),
            config.steps,
            config.modality.as_str(),
            generated.stats.skipped_summary()
        )));
    }
    let mut inputs = vec![args.corpus.clone()];
    if let Some(p) = &args.alt_orders {
        inputs.push(p.clone());
    }
    let dest = sequencing::write_instances_dir(&args.output, args.force, &generated, &config, &inputs)
        .with_context(|| format!("writing {}", args.output.display()))?;
    if config.blind_inputs && !stepwise_core::progress::is_quiet() {
        let leaky = sequencing::blind::leaky_image_names(&generated.instances);
        if leaky > 0 {
            eprintln!(
                "warning: {leaky} items of {} have an image file name containing their step number; such names \
                 still reveal the order in {}",
                generated.instances.iter().map(|i| i.items.len()).sum::<usize>(),
                sequencing::blind::INPUTS_JSONL
            );
        }
    }
    Ok((dest, generated.stats))
}

/// Check the options and turn them into the library's configuration (usage errors exit with code 2).
pub fn config_from_args(args: &SequencingArgs) -> anyhow::Result<SequencingConfig> {
    if args.seq_steps < 2 || args.seq_steps > sequencing::MAX_STEPS {
        usage_bail!("--seq-steps must be between 2 and {} (got {})", sequencing::MAX_STEPS, args.seq_steps);
    }
    let min_steps = args.seq_min_steps.unwrap_or(args.seq_steps);
    if min_steps < 2 || min_steps > args.seq_steps {
        usage_bail!("--seq-min-steps must be between 2 and --seq-steps ({}), got {min_steps}", args.seq_steps);
    }
    let windows = match args.windows.trim() {
        "all" => Windows::All,
        "first" => Windows::First,
        s => match s.parse::<usize>() {
            Ok(k) if k >= 1 => Windows::Count(k),
            _ => usage_bail!("--windows must be a positive number, `all` or `first`, got {s:?}"),
        },
    };
    if args.max_references == 0 {
        usage_bail!("--max-references must be at least 1");
    }
    let fractions = parse_fractions(&args.seq_split)?;
    Ok(SequencingConfig {
        modality: args.modality.into(),
        steps: args.seq_steps,
        min_steps,
        windows,
        max_sentences: (args.max_sentences > 0).then_some(args.max_sentences),
        max_tokens: (args.max_tokens > 0).then_some(args.max_tokens),
        max_references: args.max_references,
        fractions,
        seed: args.seed,
        blind_inputs: args.blind,
    })
}

fn parse_fractions(s: &str) -> anyhow::Result<SplitFractions> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let nums: Option<Vec<f64>> =
        parts.iter().map(|p| p.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0)).collect();
    match nums.as_deref() {
        Some([t, v, e]) if t + v + e > 0.0 => Ok(SplitFractions { train: *t, val: *v, test: *e }),
        _ => usage_bail!(
            "--seq-split must be three non-negative numbers `train,val,test` with a positive sum, got {s:?}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blind_inputs_are_opt_in() {
        let default = config_from_args(&SequencingArgs::with_defaults(&[]).unwrap()).unwrap();
        assert!(!default.blind_inputs);
        let blind = config_from_args(&SequencingArgs::with_defaults(&["--blind"]).unwrap()).unwrap();
        assert!(blind.blind_inputs);
    }
}
