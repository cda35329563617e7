//! `stepwise export SUITE_OR_TASKSET --to hf|vlmevalkit|lmms-eval -o OUT`: a suite or task set in the formats
//! vision-language benchmarks are run and shared with (see `stepwise_tasks::export`).

use std::path::PathBuf;

use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::OutputDir;
use stepwise_tasks::export::{Format, hf, lmms_eval, load_source, vlmevalkit};

use crate::usage_bail;

/// Export a suite or a task set as a Hugging Face dataset, VLMEvalKit TSVs or lmms-eval tasks.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise export suite/ --to hf -o suite-hf\n  \
    stepwise export suite/ --to vlmevalkit -o suite-vlmeval\n  \
    stepwise export suite/ --to lmms-eval -o suite-lmms   # then: lmms-eval --include_path suite-lmms/tasks --tasks stepwise\n  \
    stepwise export suite/recipeqa/visual_cloze --to hf --split train,validation -o vc-hf\n\n\
    One config per (setting, task) of a suite (`recipeqa-visual_cloze`, `knobs-0-1-1-textual_cloze`, ...) or per \
    task of a task set. Images are embedded from the corpus the suite was made from (its manifest's input, or \
    --corpus). hf: README.md (dataset card with the configs header) + data/<config>/<split>-00000-of-00001.parquet. \
    vlmevalkit: <config>.tsv. lmms-eval: hf/ (as above) + tasks/stepwise/ (a YAML per config, the group \
    `stepwise`, utils.py). The card documents the prompt layout of multi-image questions.")]
pub struct Args {
    /// A suite folder (from `stepwise sweep`), a task-set folder or a RecipeQA-layout JSON file.
    pub source: PathBuf,
    /// hf, vlmevalkit or lmms-eval.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub to: Format,
    /// Output folder.
    #[arg(short, long)]
    pub output: PathBuf,
    /// The corpus the questions' images come from (default: the one the source's manifest names).
    #[arg(long, value_name = "DIR")]
    pub corpus: Option<PathBuf>,
    /// Splits to export (train, validation, test). Default: all for hf; for vlmevalkit and lmms-eval, test when
    /// the source has a test split, else all.
    #[arg(long, value_delimiter = ',', value_name = "SPLITS")]
    pub split: Vec<String>,
    /// lmms-eval: how the YAMLs name the dataset (default: the absolute path of OUT/hf; e.g. a Hub repository id
    /// once OUT/hf is uploaded).
    #[arg(long, value_name = "PATH_OR_REPO")]
    pub dataset_path: Option<String>,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
}

fn parse_format(s: &str) -> Result<Format, String> {
    Format::parse(s)
        .ok_or_else(|| format!("unknown format {s:?}; expected one of {}", Format::ALL.map(Format::as_str).join(", ")))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    for s in &args.split {
        if !["train", "validation", "test"].contains(&s.as_str()) {
            usage_bail!("--split {s}: expected train, validation or test");
        }
    }
    if args.dataset_path.is_some() && args.to != Format::LmmsEval {
        usage_bail!("--dataset-path is for --to lmms-eval");
    }
    let keep = (!args.split.is_empty()).then_some(args.split.as_slice());
    let mut source = load_source(&args.source, args.corpus.as_deref(), keep)?;
    if keep.is_none() && args.to != Format::Hf {
        source.keep_test_split_if_any();
    }
    let out = OutputDir::create(&args.output, args.force)?;
    let summary = match args.to {
        Format::Hf => hf::write(&source, out.path())?,
        Format::VlmEvalKit => vlmevalkit::write(&source, out.path())?,
        Format::LmmsEval => {
            let dataset_path = match &args.dataset_path {
                Some(p) => p.clone(),
                None => stepwise_core::paths::absolute_normalized(&out.dest().join("hf"))?.display().to_string(),
            };
            lmms_eval::write(&source, out.path(), &dataset_path)?
        }
    };
    let input = if source.path.is_dir() {
        source.path.join(stepwise_core::manifest::MANIFEST_FILE)
    } else {
        source.path.clone()
    };
    let mut m = Manifest::new("export");
    if input.is_file() {
        m.inputs.push(InputHash::of(&input)?);
    }
    m.params.insert("format".into(), args.to.as_str().into());
    m.params.insert("source_kind".into(), source.kind.into());
    m.params.insert("configs".into(), serde_json::to_value(&summary.configs)?);
    m.counts.insert("questions".into(), summary.questions() as u64);
    m.counts.insert("images".into(), summary.images as u64);
    m.counts.insert("configs".into(), summary.configs.len() as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "export ({}): {} questions in {} configs, {} images embedded → {}",
            args.to.as_str(),
            summary.questions(),
            summary.configs.len(),
            summary.images,
            dest.display()
        );
    }
    Ok(())
}
