//! `stepwise ingest`: read procedure corpora (procedure JSONL, RecipeQA questions or recipes, any format in the
//! registry) into a corpus folder.

use std::path::PathBuf;

use stepwise_ingest::{IngestOptions, OnMissingImage, Registry, ingest};

use crate::usage_bail;

/// Read procedure corpora into a corpus folder (procedures.jsonl + .parquet + manifest.json; RecipeQA questions
/// are kept verbatim under taskset/).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise ingest ../shared/data/procedures/*.jsonl -o corpora/procedures\n  \
    stepwise ingest --format recipeqa ../shared/data/recipeqa/val-dev.json -o corpora/recipeqa\n  \
    stepwise ingest my.jsonl --on-missing-image drop --copy-images -o corpora/mine\n  \
    stepwise ingest --list-formats\n\n\
    Formats are detected from the content unless --format is given. Image paths are relative to each input's folder \
    (or --image-root); inputs in different folders are rebased onto their common folder. Missing image files are \
    counted and listed in ingest_report.json; --on-missing-image says whether they are an error, a warning \
    (default) or dropped. Nothing is written unless the whole ingest succeeds.")]
pub struct Args {
    /// Input files.
    #[arg(value_name = "INPUT", required_unless_present = "list_formats")]
    pub inputs: Vec<PathBuf>,
    /// The corpus folder to create.
    #[arg(short, long, value_name = "CORPUS", required_unless_present = "list_formats")]
    pub output: Option<PathBuf>,
    /// Input format (see --list-formats); `auto` detects it per input from the content.
    #[arg(short, long, value_name = "FORMAT", default_value = "auto")]
    pub format: String,
    /// What to do when an image file is missing.
    #[arg(long, value_name = "MODE", default_value = "warn", value_parser = ["error", "warn", "drop"])]
    pub on_missing_image: String,
    /// Copy the images into CORPUS/images/ (a self-contained corpus) instead of referencing the input folder.
    #[arg(long)]
    pub copy_images: bool,
    /// Resolve image paths against this folder instead of each input file's folder.
    #[arg(long, value_name = "DIR")]
    pub image_root: Option<PathBuf>,
    /// Put PREFIX before every procedure id (e.g. `r2vq/`): a namespace per source, so corpora merged later cannot
    /// clash and commands can select a source by its ids (`seq-study --train-only r2vq/`). Not for question files.
    #[arg(long, value_name = "PREFIX")]
    pub id_prefix: Option<String>,
    /// Replace CORPUS if it exists.
    #[arg(long)]
    pub force: bool,
    /// List the input formats and exit.
    #[arg(long)]
    pub list_formats: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let registry = Registry::builtin();
    if args.list_formats {
        for f in registry.formats() {
            println!("{:<18} {}", f.name(), f.describe());
        }
        return Ok(());
    }
    let Some(output) = args.output else { usage_bail!("-o/--output is required") };
    if let Some(root) = &args.image_root
        && !root.is_dir()
    {
        usage_bail!("--image-root {}: not a folder", root.display());
    }
    let on_missing_image: OnMissingImage = args.on_missing_image.parse().map_err(anyhow::Error::msg)?;
    let opts = IngestOptions {
        format: (args.format != "auto").then(|| args.format.clone()),
        on_missing_image,
        copy_images: args.copy_images,
        image_root: args.image_root,
        overwrite: args.force,
        id_prefix: args.id_prefix,
    };
    let report = ingest(&args.inputs, &output, &registry, &opts)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "ingested {} procedures ({} steps with {} step images; {} distinct image files referenced, galleries \
             included) into {}",
            report.procedures,
            report.steps,
            report.step_images,
            report.images.referenced,
            output.display()
        );
        if !report.images.missing.is_empty() {
            eprintln!(
                "  missing images: {} distinct, {} references ({}; listed in ingest_report.json)",
                report.images.missing.len(),
                report.images.missing_refs,
                if report.images.dropped_refs > 0 { "dropped" } else { "kept" }
            );
        }
        if !report.questions_by_task.is_empty() {
            let tasks: Vec<String> = report.questions_by_task.iter().map(|(t, n)| format!("{t} {n}")).collect();
            eprintln!("  task set: {} (taskset/)", tasks.join(", "));
        }
        for n in &report.notes {
            eprintln!("  note: {n}");
        }
    }
    Ok(())
}
