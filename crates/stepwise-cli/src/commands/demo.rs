//! `stepwise demo`: the main pipeline on the built-in world corpus, as a list of named stages.
//!
//! Each stage runs public `stepwise` command lines in this process (the same parser and dispatch as the binary,
//! through [`crate::run_in_process`]), so the demo exercises exactly what a user types and survives internal
//! refactors. A stage returns a one-line summary with its key number, read back from the files it wrote. A
//! failing stage stops the demo with its name in the error (nothing is skipped silently) and, because the
//! folder is built as an [`OutputDir`], nothing half-made is left behind.
//!
//! The stages run with the working directory set to the folder being built and pass relative paths, so the
//! manifests, reports and summaries name `clean/procedures.jsonl`, not a temporary folder: two runs with the
//! same seed give identical files wherever the demo folder is.

mod corpus_stages;
mod hasty;
mod sequencing_stages;
mod study_stages;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::Value;
use stepwise_core::json::{read_json, to_pretty_sorted};
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Corpus, Manifest, Procedure, Task};

use self::corpus_stages::{audit, clean, embed_image, embed_text, sheet, stats, sweep, tasks, world};
use self::sequencing_stages::{baselines, eval_baselines, sequencing};
use self::study_stages::{annotate, eval_hasty, r2vq, report, seq_study, study};
use crate::usage_bail;

/// Run the whole pipeline on a generated world corpus (no downloads, no model weights) and write a report.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  stepwise demo                      # ./stepwise-demo/\n  \
    stepwise demo -o /tmp/demo --force\n  stepwise demo --domain assembly -n 200\n\n\
    Stages (each a public stepwise command): world generate → clean → stats → world sheet (contact sheet) → \
    embed (w2v text, descriptor image) → generate the four RecipeQA tasks → sweep (RecipeQA mode and the 8 \
    knob settings) → audit every task set of the sweep → sequencing instances with exact multi-references → \
    baseline table (random, text-position, image-chain, pairwise + topological sort; text, image, multimodal) → \
    eval of baseline predictions → eval of Hasty Student predictions → GM3C study (HTRN, 3 seeds) → sequencing study → an \
    annotation study of the test instances, ready for `stepwise annotate serve` → R2VQ questions from the \
    world's annotation, answered by the text baseline and the programs → report.\n\
    Outputs: report.html (self-contained) and report.md, demo.json (the stages and their summaries), and one \
    folder per stage (corpus/, clean/, features/, tasks/, suite/, audit/, sequencing/, sequencing-results/, \
    predictions/, eval/, study/, seq-study/, annotation/, r2vq/).")]
pub struct Args {
    /// The demo folder.
    #[arg(short, long, default_value = "stepwise-demo")]
    pub output: PathBuf,
    /// Procedures in the generated corpus.
    #[arg(short, long, default_value_t = 300)]
    pub n: u64,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    #[arg(long, default_value = "cooking", value_parser = ["cooking", "assembly"])]
    pub domain: String,
    /// Sequencing instances per procedure (contiguous windows of steps).
    #[arg(long, default_value_t = 2)]
    pub windows: u64,
    /// Shared visual styles ("kitchens") of the world (`stepwise world generate --styles`). A few shared
    /// kitchens, as in a real recipe site, make the RecipeQA-mode shortcut visible (the answer shares the
    /// question's kitchen) while leaving other procedures' images in the same kitchen for the knobs to choose
    /// as negatives; 0 gives every procedure its own style.
    #[arg(long, default_value_t = DEFAULT_STYLES)]
    pub styles: u64,
    /// Replace the demo folder if it exists.
    #[arg(long)]
    pub force: bool,
}

/// The demo world's shared styles (see `Args::styles`). Chosen by auditing the default demo's suite (300
/// procedures, seed 7): with one style per procedure RecipeQA mode is all shortcut (Hasty Student 99.5% on visual
/// cloze) but almost no question can meet knob 3 (10 of 709 survive in every k1 = 0 setting); with 8 kitchens
/// RecipeQA mode stays clearly biased (Hasty 82% cloze, 77% coherence), the knob settings bring the distance
/// probe down to 33–46% (cloze) and 34–60% (coherence), and 268 / 221 questions remain in each k1 = 0 setting.
/// 2–6 kitchens weaken the RecipeQA bias; 12–16 leave fewer questions for the same reduction.
pub const DEFAULT_STYLES: u64 = 8;

/// What the stages share.
struct Demo {
    n: u64,
    seed: u64,
    domain: String,
    windows: u64,
    /// Shared world styles (0: one per procedure).
    styles: u64,
    /// Stage name → summary, in order, for demo.json and the report.
    done: Vec<(&'static str, String)>,
}

type Stage = fn(&mut Demo) -> anyhow::Result<String>;

/// The pipeline, in order.
const STAGES: &[(&str, Stage)] = &[
    ("world", world),
    ("clean", clean),
    ("stats", stats),
    ("contact-sheet", sheet),
    ("embed-text", embed_text),
    ("embed-image", embed_image),
    ("tasks", tasks),
    ("sweep", sweep),
    ("audit", audit),
    ("sequencing", sequencing),
    ("baselines", baselines),
    ("eval-baselines", eval_baselines),
    ("eval-hasty", eval_hasty),
    ("study", study),
    ("seq-study", seq_study),
    ("annotate", annotate),
    ("r2vq", r2vq),
    ("report", report),
];

// Folder layout (relative to the demo folder).
const CORPUS: &str = "corpus";
const CLEAN: &str = "clean";
const TEXT_FEATURES: &str = "features/w2v";
const IMAGE_FEATURES: &str = "features/descriptor";
const TASKS: &str = "tasks/recipeqa";
const SUITE: &str = "suite";
const SEQUENCING: &str = "sequencing";
const SEQ_RESULTS: &str = "sequencing-results";
const HASTY_PREDICTIONS: &str = "predictions/hasty-student.jsonl";
const STUDY: &str = "study";
const TOKEN_FEATURES: &str = "features/w2v-tokens";
const PATCH_FEATURES: &str = "features/descriptor-patches";
const SEQ_STUDY: &str = "seq-study";
/// Training seeds of the demo's model and sequencing studies.
const DEMO_SEEDS: &str = "3";
const ANNOTATION: &str = "annotation";
const R2VQ: &str = "r2vq";

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.n == 0 || args.windows == 0 {
        usage_bail!("-n and --windows must be at least 1");
    }
    let dest = std::env::current_dir()?.join(&args.output);
    let out = OutputDir::create(&dest, args.force)?;
    let quiet = stepwise_core::progress::is_quiet();
    let mut demo = Demo {
        n: args.n,
        seed: args.seed,
        domain: args.domain.clone(),
        windows: args.windows,
        styles: args.styles,
        done: Vec::new(),
    };
    let t_all = Instant::now();
    {
        let _cwd = WorkingDir::enter(out.path())?;
        for (i, (name, stage)) in STAGES.iter().enumerate() {
            let t = Instant::now();
            // The commands' own summaries would drown the demo's: keep them quiet while a stage runs.
            stepwise_core::progress::set_quiet(true);
            let result = stage(&mut demo);
            stepwise_core::progress::set_quiet(quiet);
            let summary = result.with_context(|| format!("demo stage {}/{} `{name}` failed", i + 1, STAGES.len()))?;
            if !quiet {
                eprintln!("[{:>2}/{}] {name:<15} {:>6.1} s  {summary}", i + 1, STAGES.len(), t.elapsed().as_secs_f64());
            }
            demo.done.push((name, summary));
        }
    }
    let dest = out.commit()?;
    println!(
        "stepwise demo: {} {} procedures, seed {}, {:.1} s",
        args.n,
        args.domain,
        args.seed,
        t_all.elapsed().as_secs_f64()
    );
    for (name, summary) in &demo.done {
        println!("  {name:<15} {summary}");
    }
    println!("report: {}", dest.join("report.html").display());
    let study = dest.join(ANNOTATION);
    println!(
        "annotation app: stepwise annotate serve --study {}   (admin password in {}; open http://127.0.0.1:8080/admin)",
        study.display(),
        study.join(stepwise_annotate::study::ADMIN_PASSWORD_FILE).display()
    );
    Ok(())
}

/// Sets the working directory for the stages and restores it when dropped (also on errors).
struct WorkingDir {
    previous: PathBuf,
}

impl WorkingDir {
    fn enter(dir: &Path) -> anyhow::Result<Self> {
        let previous = std::env::current_dir()?;
        std::env::set_current_dir(dir).with_context(|| format!("entering {}", dir.display()))?;
        Ok(WorkingDir { previous })
    }
}

impl Drop for WorkingDir {
    fn drop(&mut self) {
        let _ = std::env::set_current_dir(&self.previous);
    }
}

/// Run a stepwise command line in this process; the error names the command.
fn stepwise(argv: &[&str]) -> anyhow::Result<()> {
    crate::run_in_process(argv).with_context(|| format!("`stepwise {}`", argv.join(" ")))
}

fn json(path: &str) -> anyhow::Result<Value> {
    Ok(read_json(Path::new(path))?)
}

/// A number at a JSON pointer, or an error naming the file and the field.
fn number(v: &Value, file: &str, pointer: &str) -> anyhow::Result<f64> {
    v.pointer(pointer).and_then(Value::as_f64).with_context(|| format!("{file}: no number at `{pointer}`"))
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// A share with its interval, `62.5% [40.0%, 85.0%]`, from a value and an interval written as `[low, high]` or
/// `{low, high}`; bare when there is none (a single test procedure or sequence resamples to itself); `None` for a
/// malformed interval.
fn pct_interval(value: f64, ci: Option<&Value>) -> Option<String> {
    let bounds = match ci {
        None | Some(Value::Null) => return Some(pct(value)),
        Some(Value::Array(a)) => (a.first()?.as_f64()?, a.get(1)?.as_f64()?),
        Some(o) => (o.get("low")?.as_f64()?, o.get("high")?.as_f64()?),
    };
    Some(format!("{} [{}, {}]", pct(value), pct(bounds.0), pct(bounds.1)))
}

/// The estimate at a JSON pointer (an object with `value` and an optional `ci`) as [`pct_interval`]; `None` when
/// there is none there.
fn pct_at(v: &Value, pointer: &str) -> Option<String> {
    let e = v.pointer(pointer)?;
    pct_interval(e.get("value")?.as_f64()?, e.get("ci"))
}

/// [`pct_at`], or an error naming the file and the field.
fn pct_estimate(v: &Value, file: &str, pointer: &str) -> anyhow::Result<String> {
    pct_at(v, pointer).with_context(|| format!("{file}: no estimate (value and interval) at `{pointer}`"))
}

/// The world's parameters as the demo passes them to `stepwise world generate`.
fn world_args(d: &Demo) -> Vec<String> {
    let mut a: Vec<String> = ["-n", &d.n.to_string(), "--seed", &d.seed.to_string(), "--domain", &d.domain]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if d.styles > 0 {
        a.extend(["--styles".to_string(), d.styles.to_string()]);
    }
    a
}
