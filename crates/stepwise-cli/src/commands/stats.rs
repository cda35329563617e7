//! `stepwise stats`: the corpus tables of the papers (procedures, steps, images, tokens and sentences per step,
//! type–token ratio, in-vocabulary rate) and, for a corpus with a task set, questions per task and answer balance.

use std::path::PathBuf;

use stepwise_core::TaskSet;
use stepwise_core::corpus::Corpus;
use stepwise_core::json::to_pretty_sorted;
use stepwise_core::output::write_string_atomic;
use stepwise_ingest::{GroupBy, Vocabulary, corpus_stats};

/// Print corpus statistics (Markdown tables or JSON).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise stats corpora/recipeqa\n  \
    stepwise stats corpora/procedures --by category --format json -o stats.json\n  \
    stepwise stats corpora/recipeqa-clean --vocab models/glove-6b-50d/vocab.txt\n\n\
    Tokens: words and numbers split at punctuation, each CJK character one token. Tokens and sentences per step are \
    over step texts (titles separately); std is the population standard deviation.")]
pub struct Args {
    /// The corpus folder (or a procedure-JSONL file).
    #[arg(value_name = "CORPUS")]
    pub corpus: PathBuf,
    /// Also give the statistics per split or per category.
    #[arg(long, value_name = "FIELD", value_parser = ["split", "category"])]
    pub by: Option<String>,
    /// Output format.
    #[arg(long, value_name = "FORMAT", default_value = "md", value_parser = ["md", "json"])]
    pub format: String,
    /// Reference vocabulary for the in-vocabulary rate (one word per line).
    #[arg(long, value_name = "FILE")]
    pub vocab: Option<PathBuf>,
    /// A task set to describe instead of the corpus's own taskset/ (a folder or RecipeQA JSON file).
    #[arg(long, value_name = "PATH")]
    pub taskset: Option<PathBuf>,
    /// Write to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let vocab = args.vocab.as_deref().map(Vocabulary::load).transpose()?;
    let spinner = stepwise_core::progress::spinner("loading corpus");
    let corpus = Corpus::load(&args.corpus)?;
    let taskset = match args.taskset.clone().or_else(|| corpus.taskset_dir()) {
        Some(p) => Some(TaskSet::load(&p)?),
        None => None,
    };
    spinner.finish_and_clear();
    let by = match args.by.as_deref() {
        Some("split") => Some(GroupBy::Split),
        Some("category") => Some(GroupBy::Category),
        _ => None,
    };
    let stats = corpus_stats(&corpus.procedures, taskset.as_ref(), by, vocab.as_ref());
    let text = if args.format == "json" {
        to_pretty_sorted(&stats)
    } else {
        format!("# Statistics of {}\n\n{}", args.corpus.display(), stats.to_markdown())
    };
    match &args.output {
        Some(path) => write_string_atomic(path, &text)?,
        None => print!("{text}"),
    }
    Ok(())
}
