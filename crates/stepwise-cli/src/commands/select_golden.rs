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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;

use rand::Rng;
use stepwise_core::json::write_canonical;
use stepwise_core::output::{OutputDir, write_file_atomic};
use stepwise_core::rng::rng_for;
use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Corpus, Manifest};
use stepwise_models::item_features::{FeatureKind, item_matrix};
use stepwise_models::order_evidence::path_support;

use super::baseline::features::load_features;
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

/// What the selection measured for one kept instance.
#[derive(serde::Serialize)]
struct Selected<'a> {
    id: &'a str,
    procedure: &'a str,
    category: Option<&'a str>,
    /// Images of the instance's steps.
    images: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    image_support: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text_support: Option<f64>,
}

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
    // Procedure id → (category, image count of each step).
    let procedures: HashMap<String, (Option<String>, Vec<usize>)> = match &args.corpus {
        Some(c) => Corpus::load(c)?
            .procedures
            .into_iter()
            .map(|p| (p.id, (p.category, p.steps.iter().map(|s| s.images.len()).collect())))
            .collect(),
        None => HashMap::new(),
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
    let wanted: BTreeSet<&str> = args.categories.iter().map(|c| c.trim()).filter(|c| !c.is_empty()).collect();

    let mut rejected: BTreeMap<&str, u64> = BTreeMap::new();
    let mut passing: Vec<(usize, Selected)> = Vec::new();
    for (k, inst) in instances.iter().enumerate() {
        if args.split != "all" && inst.split != args.split {
            *rejected.entry("split").or_default() += 1;
            continue;
        }
        let proc_info = procedures.get(&inst.procedure);
        let category = proc_info.and_then(|(c, _)| c.as_deref());
        if !wanted.is_empty() && !category.is_some_and(|c| wanted.contains(c)) {
            *rejected.entry("category").or_default() += 1;
            continue;
        }
        let images: usize = inst
            .items
            .iter()
            .map(|i| proc_info.and_then(|(_, counts)| counts.get(i.step).copied()).unwrap_or(i.images.len()))
            .sum();
        if args.min_images.is_some_and(|m| images < m) {
            *rejected.entry("min_images").or_default() += 1;
            continue;
        }
        let (mut image_support, mut text_support) = (None, None);
        if let Some(l) = &loaded {
            let support = |kind: FeatureKind| -> anyhow::Result<f64> {
                let set = l.set().restrict(kind).expect("checked above");
                let x = item_matrix(inst, &set)?;
                Ok(path_support(&x, &inst.references[0], args.seed, &inst.id))
            };
            let (is, ts) = (support(FeatureKind::Image)?, support(FeatureKind::Text)?);
            image_support = Some(is);
            text_support = Some(ts);
            if is < args.min_image_support || ts > args.max_text_support {
                *rejected.entry("complementary").or_default() += 1;
                continue;
            }
        }
        passing.push((
            k,
            Selected { id: &inst.id, procedure: &inst.procedure, category, images, image_support, text_support },
        ));
    }
    let passed = passing.len();
    if let Some(n) = args.count {
        if n < passing.len() {
            // Partial Fisher–Yates with one seeded stream, then back to file order.
            let mut rng = rng_for(args.seed, "select-golden");
            for j in 0..n {
                let r = rng.random_range(j..passing.len());
                passing.swap(j, r);
            }
            passing.truncate(n);
            passing.sort_by_key(|(k, _)| *k);
        } else if n > passing.len() && !stepwise_core::progress::is_quiet() {
            eprintln!("warning: only {} instances pass the rules (asked for {n})", passing.len());
        }
    }
    if passing.is_empty() {
        anyhow::bail!(stepwise_core::Error::bad_input(format!(
            "no instance passes the rules (rejected: {})",
            rejected.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        )));
    }

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
    m.param("categories", &wanted);
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
