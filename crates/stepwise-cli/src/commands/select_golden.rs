//! `stepwise select-golden`: choose a golden test subset of sequencing instances for human evaluation, by
//! explicit, measurable rules (the sequencing paper's golden sets were hand-picked: "procedural in both texts
//! and images", "images complement the textual descriptions"; appendix B.1).
//!
//! Rules (all given ones must hold):
//! - `--split S`: instances of that split (default `test`; `all` for every split);
//! - `--categories a,b`: the procedure's category (from `--corpus`) is one of them;
//! - `--min-images K`: the instance's steps have at least K images in all (counted from the procedures of
//!   `--corpus` when given, so text-only instances can be chosen by their images too; else from the items);
//! - `--complementary`: the images carry order evidence that the text lacks, measured without training by the
//!   *path support* of the authored order (`stepwise_models::order_evidence`: the share of all orders whose
//!   consecutive-item cosine similarity is lower than the authored order's): image support ≥
//!   `--min-image-support` (default 0.75) and text support ≤ `--max-text-support` (default 0.5). Needs one text
//!   and one image feature store.
//!
//! Then `-n N` instances are drawn at random (seeded) from those passing, and written in file order.
//! Output folder: `instances.jsonl` (the subset, same format as the input), `selection.jsonl` (per selected
//! instance: category, images, supports), `manifest.json` (counts rejected per rule, parameters).

use std::io::Write;
use std::path::PathBuf;

use stepwise_core::json::write_canonical;
use stepwise_core::output::{OutputDir, write_file_atomic};
use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Corpus, Manifest};
use stepwise_models::item_features::{FeatureKind, item_matrix};
use stepwise_models::order_evidence::path_support;
use stepwise_models::sequencing_features::load_features;
use stepwise_tasks::sequencing::golden::{self, GoldenRules};

use crate::usage_bail;

/// Select a golden test subset of sequencing instances by rules, for human evaluation.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  stepwise select-golden seq/ --corpus corpus/ --categories cake,soup --min-images 4 \\\n    \
    --complementary --features feats-text --features feats-image -n 100 --seed 1 -o golden/\n\n\
    Complementary = image path support >= --min-image-support and text path support <= --max-text-support, where \
    the path support of a modality is the share of all orders of the items whose mean consecutive cosine \
    similarity is below the authored order's (1 = the authored order is the smoothest path, 0.5 = no preference)."
)]
pub struct Args {
    /// Sequencing instances (folder or instances.jsonl).
    #[arg(value_name = "INSTANCES")]
    pub instances: PathBuf,
    /// The corpus the instances come from (for categories).
    #[arg(long, value_name = "CORPUS")]
    pub corpus: Option<PathBuf>,
    /// Keep procedures of these categories (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub categories: Vec<String>,
    /// Keep instances whose steps have at least this many images in all (from --corpus when given).
    #[arg(long, value_name = "K")]
    pub min_images: Option<usize>,
    /// Keep instances whose images carry order evidence the text lacks (needs a text and an image store).
    #[arg(long)]
    pub complementary: bool,
    /// Feature stores (one text, one image) for --complementary.
    #[arg(long, value_name = "DIR")]
    pub features: Vec<PathBuf>,
    #[arg(long, default_value_t = 0.75, value_name = "S")]
    pub min_image_support: f64,
    #[arg(long, default_value_t = 0.5, value_name = "S")]
    pub max_text_support: f64,
    /// The split to select from (`train`, `val`, `test` or `all`).
    #[arg(long, default_value = "test")]
    pub split: String,
    /// How many instances to keep (default: all that pass).
    #[arg(short = 'n', long, value_name = "N")]
    pub count: Option<usize>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    #[arg(long)]
    pub force: bool,
}

/// Select by the rules and write the subset, what was measured of it and the manifest.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.categories.is_empty() && args.corpus.is_none() {
        usage_bail!("--categories needs --corpus (categories are read from the procedures)");
    }
    for (name, v) in [("--min-image-support", args.min_image_support), ("--max-text-support", args.max_text_support)] {
        if !(0.0..=1.0).contains(&v) {
            usage_bail!("{name} must be between 0 and 1, got {v}");
        }
    }
    let instances = stepwise_score::predictions::read_instances(&args.instances)?;
    let procedures = match &args.corpus {
        Some(c) => golden::procedure_info(Corpus::load(c)?.procedures),
        None => golden::ProcedureInfo::new(),
    };
    if let Some(c) = &args.corpus
        && let Some(i) = instances.iter().find(|i| !procedures.contains_key(&i.procedure))
    {
        anyhow::bail!(stepwise_core::Error::bad_input(format!(
            "instance {:?}: procedure {:?} is not in the corpus {}",
            i.id,
            i.procedure,
            c.display()
        )));
    }
    let loaded = if args.complementary {
        let l = load_features(&args.features, &instances)?;
        if l.set().restrict(FeatureKind::Multimodal).is_none() {
            usage_bail!(
                "--complementary needs one text and one image feature store (--features TEXT --features IMAGE)"
            );
        }
        Some(l)
    } else {
        None
    };
    let rules = GoldenRules {
        split: args.split.clone(),
        categories: args.categories.iter().map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect(),
        min_images: args.min_images,
        complementary: args.complementary.then_some((args.min_image_support, args.max_text_support)),
        count: args.count,
        seed: args.seed,
    };
    // Path support of the authored order in each modality (training-free order evidence).
    let supports = |inst: &SequencingInstance| -> stepwise_core::Result<(f64, f64)> {
        let l = loaded.as_ref().expect("complementary rules load the features");
        let support = |kind: FeatureKind| -> stepwise_core::Result<f64> {
            let set = l.set().restrict(kind).expect("checked above");
            let x = item_matrix(inst, &set)?;
            Ok(path_support(&x, &inst.references[0], args.seed, &inst.id))
        };
        Ok((support(FeatureKind::Image)?, support(FeatureKind::Text)?))
    };
    let selection = golden::select(&instances, &procedures, &rules, loaded.as_ref().map(|_| &supports as _))?;
    if let Some(n) = args.count
        && n > selection.passed
        && !stepwise_core::progress::is_quiet()
    {
        eprintln!("warning: only {} instances pass the rules (asked for {n})", selection.passed);
    }
    let selection = selection.require_some()?;
    let (passing, passed, rejected) = (selection.selected, selection.passed, selection.rejected);
    let wanted = &rules.categories;

    let out = OutputDir::create(&args.output, args.force)?;
    let chosen: Vec<&SequencingInstance> = passing.iter().map(|(k, _)| &instances[*k]).collect();
    let jsonl = |name: &str, values: Vec<serde_json::Value>| -> anyhow::Result<()> {
        write_file_atomic(&out.path().join(name), |w| {
            for v in &values {
                write_canonical(w, v)?;
                w.write_all(b"\n")?;
            }
            Ok(())
        })?;
        Ok(())
    };
    jsonl(
        stepwise_core::sequencing::INSTANCES_JSONL,
        chosen.iter().map(|i| serde_json::to_value(i).expect("instances serialize")).collect(),
    )?;
    jsonl("selection.jsonl", passing.iter().map(|(_, s)| serde_json::to_value(s).expect("serialize")).collect())?;
    let mut m = Manifest::new("sequencing-golden").with_seed(args.seed);
    let mut inputs = vec![stepwise_score::predictions::instances_file(&args.instances)];
    if let Some(c) = &args.corpus {
        inputs.push(stepwise_core::Corpus::procedures_file(c));
    }
    if let Some(l) = &loaded {
        inputs.extend(l.meta_files());
    }
    m.add_inputs(&inputs)?;
    m.count("instances", instances.len() as u64);
    m.count("passed", passed as u64);
    m.count("selected", chosen.len() as u64);
    for (rule, n) in &rejected {
        m.count(&format!("rejected_{rule}"), *n);
    }
    m.param("split", &args.split);
    m.param("categories", wanted);
    m.param("min_images", args.min_images);
    m.param("complementary", args.complementary);
    if args.complementary {
        m.param("min_image_support", args.min_image_support);
        m.param("max_text_support", args.max_text_support);
    }
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "selected {} of {} passing instances ({} read; rejected: {}) → {}",
            chosen.len(),
            passed,
            instances.len(),
            if rejected.is_empty() {
                "none".to_string()
            } else {
                rejected.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
            },
            dest.display()
        );
    }
    Ok(())
}
