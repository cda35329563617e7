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

mod hasty;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::Value;
use stepwise_core::json::{read_json, to_pretty_sorted};
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Corpus, Manifest, Procedure, Task};

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

/// Stage `world`: generate the corpus with stored images.
fn world(d: &mut Demo) -> anyhow::Result<String> {
    let args = world_args(d);
    let mut argv: Vec<&str> = vec!["world", "generate"];
    argv.extend(args.iter().map(String::as_str));
    argv.extend(["-o", CORPUS]);
    stepwise(&argv)?;
    let m = Manifest::read(Path::new(CORPUS))?;
    let c = |k: &str| m.counts.get(k).copied().unwrap_or(0);
    let styles = if d.styles > 0 {
        format!("{} shared kitchen styles", d.styles)
    } else {
        "one visual style per procedure".to_string()
    };
    Ok(format!(
        "{} {} procedures, {} steps, {} step images in {CORPUS}/; world parameters: `{}` ({styles})",
        c("procedures"),
        d.domain,
        c("steps"),
        c("step_images"),
        args.join(" ")
    ))
}

/// Stage `clean`: the default cleaning (Meta-RecipeQA's 3–25 steps, markup, spacing, fused words).
fn clean(_: &mut Demo) -> anyhow::Result<String> {
    stepwise(&["clean", CORPUS, "-o", CLEAN])?;
    let r = json(&format!("{CLEAN}/clean_report.json"))?;
    let f = |p: &str| number(&r, "clean_report.json", p);
    let edits: f64 = r
        .get("rules")
        .and_then(Value::as_object)
        .map(|rules| rules.values().filter_map(|x| x.get("edits").and_then(Value::as_f64)).sum())
        .unwrap_or(0.0);
    Ok(format!(
        "{} → {} procedures, {} → {} steps, {edits} text edits",
        f("/procedures_in")?,
        f("/procedures_out")?,
        f("/steps_in")?,
        f("/steps_out")?
    ))
}

/// Stage `stats`: corpus statistics as JSON (read by the report).
fn stats(_: &mut Demo) -> anyhow::Result<String> {
    stepwise(&["stats", CLEAN, "--format", "json", "-o", "stats.json"])?;
    let s = json("stats.json")?;
    let f = |p: &str| number(&s, "stats.json", p);
    Ok(format!(
        "{:.1} steps per procedure, {:.1} tokens per step, {} word types",
        f("/all/steps_per_procedure/mean")?,
        f("/all/tokens_per_step/mean")?,
        f("/all/types")?
    ))
}

/// The procedure shown on the contact sheet: the first with 8 to 12 steps (else the first).
fn showcase(procs: &[Procedure]) -> Option<&Procedure> {
    procs.iter().find(|p| (8..=12).contains(&p.steps.len())).or(procs.first())
}

/// Stage `contact-sheet`: one procedure's step images side by side with captions.
fn sheet(_: &mut Demo) -> anyhow::Result<String> {
    let corpus = Corpus::load(Path::new(CORPUS))?;
    let p = showcase(&corpus.procedures).context("the corpus has no procedures")?;
    stepwise(&["world", "sheet", CORPUS, "--procedure", &p.id, "--columns", "4", "-o", "contact_sheet.png"])?;
    Ok(format!("contact_sheet.png: {} ({} steps)", p.id, p.steps.len()))
}

fn embed_summary(store: &str) -> anyhow::Result<String> {
    let m = json(&format!("{store}/meta.json"))?;
    let f = |p: &str| number(&m, "meta.json", p);
    Ok(format!(
        "{} items → {}-d `{}` vectors in {store}/ ({} failures)",
        f("/count")?,
        f("/encoder/dim")?,
        m.pointer("/encoder/name").and_then(Value::as_str).unwrap_or("?"),
        f("/failures")?
    ))
}

/// Stage `embed-text`: word2vec trained on the corpus's own step texts (no weights to download).
fn embed_text(d: &mut Demo) -> anyhow::Result<String> {
    stepwise(&["embed", CLEAN, "--encoder", "w2v", "--seed", &d.seed.to_string(), "-o", TEXT_FEATURES])?;
    embed_summary(TEXT_FEATURES)
}

/// Stage `embed-image`: the classical colour + gradient descriptor.
fn embed_image(_: &mut Demo) -> anyhow::Result<String> {
    stepwise(&["embed", CLEAN, "--encoder", "descriptor", "-o", IMAGE_FEATURES])?;
    embed_summary(IMAGE_FEATURES)
}

/// Stage `tasks`: the four RecipeQA tasks, made the way RecipeQA made them.
fn tasks(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    stepwise(&[
        "generate",
        CLEAN,
        "--features",
        TEXT_FEATURES,
        "--features",
        IMAGE_FEATURES,
        "--task",
        "all",
        "--mode",
        "recipeqa",
        "--seed",
        &seed,
        "-o",
        TASKS,
    ])?;
    let m = Manifest::read(Path::new(TASKS))?;
    let parts: Vec<String> = Task::ALL
        .iter()
        .map(|t| format!("{t} {}", m.counts.get(&format!("{t}.questions")).copied().unwrap_or(0)))
        .collect();
    Ok(format!("RecipeQA-mode questions: {}", parts.join(", ")))
}

/// `counts.json` of the suite: (setting, task) → questions, for the task sets the suite wrote (a row with
/// `same_as` — visual ordering with k3 = 1 — is the task set of another setting and is left out).
fn suite_counts() -> anyhow::Result<BTreeMap<(String, String), u64>> {
    let v = json(&format!("{SUITE}/counts.json"))?;
    let rows = v.as_array().context("suite/counts.json: expected an array")?;
    let mut out = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.get("same_as").is_some() {
            continue;
        }
        let s = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .with_context(|| format!("suite/counts.json: [{i}].{k}"))
        };
        let q = r
            .get("questions")
            .and_then(Value::as_u64)
            .with_context(|| format!("suite/counts.json: [{i}].questions"))?;
        out.insert((s("setting")?, s("task")?), q);
    }
    Ok(out)
}

/// Stage `sweep`: RecipeQA mode and the 8 knob settings, every task.
fn sweep(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    stepwise(&[
        "sweep",
        CLEAN,
        "--features",
        TEXT_FEATURES,
        "--features",
        IMAGE_FEATURES,
        "--seed",
        &seed,
        "-o",
        SUITE,
    ])?;
    let counts = suite_counts()?;
    let settings: std::collections::BTreeSet<&str> = counts.keys().map(|(s, _)| s.as_str()).collect();
    let tasks: std::collections::BTreeSet<&str> = counts.keys().map(|(_, t)| t.as_str()).collect();
    let vc = |s: &str| counts.get(&(s.to_string(), "visual_cloze".to_string())).copied().unwrap_or(0);
    Ok(format!(
        "{} task sets ({} settings × {} tasks, visual ordering once per (k1, k2)), {} questions; visual cloze: {} \
         in RecipeQA mode, {} in each knob setting with k1 = 0 (paired: the same questions in all four)",
        counts.len(),
        settings.len(),
        tasks.len(),
        counts.values().sum::<u64>(),
        vc("recipeqa"),
        vc("knobs-0-1-1")
    ))
}

/// Stage `audit`: the Hasty Student and the distance probe on every non-empty task set of the sweep.
fn audit(d: &mut Demo) -> anyhow::Result<String> {
    let counts = suite_counts()?;
    let seed = d.seed.to_string();
    let (mut audited, mut empty) = (0, Vec::new());
    for ((setting, task), n) in &counts {
        if *n == 0 {
            // Nothing to audit; named in the summary rather than skipped silently.
            empty.push(format!("{setting}/{task}"));
            continue;
        }
        let input = format!("{SUITE}/{setting}/{task}");
        let out = format!("audit/{setting}/{task}");
        stepwise(&[
            "audit",
            &input,
            "--features",
            TEXT_FEATURES,
            "--features",
            IMAGE_FEATURES,
            "--seed",
            &seed,
            "-o",
            &out,
        ])?;
        audited += 1;
    }
    // The probe needs enough questions for its cross-validation; with too few the audit leaves it out.
    let value = |setting: &str, task: &str, pointer: &str| -> anyhow::Result<Option<f64>> {
        let file = format!("audit/{setting}/{task}/audit.json");
        if !Path::new(&file).is_file() {
            return Ok(None);
        }
        Ok(json(&file)?.pointer(pointer).and_then(Value::as_f64))
    };
    let knob_settings: Vec<String> = counts.keys().map(|(s, _)| s.clone()).filter(|s| s != "recipeqa").collect();
    let mut parts = Vec::new();
    for task in ["visual_cloze", "visual_coherence"] {
        for (name, pointer) in [
            ("Hasty Student", "/tasks/0/hasty_student/value"),
            ("distance probe", "/tasks/0/distance_probe/accuracy/value"),
        ] {
            let rq = value("recipeqa", task, pointer)?.map_or("–".into(), pct);
            let mut knobs = Vec::new();
            for s in &knob_settings {
                knobs.extend(value(s, task, pointer)?);
            }
            let range = match (knobs.iter().copied().reduce(f64::min), knobs.iter().copied().reduce(f64::max)) {
                (Some(lo), Some(hi)) => format!("{}–{}", pct(lo), pct(hi)),
                _ => "–".into(),
            };
            parts.push(format!("{task} {name} {rq} in RecipeQA mode, {range} in the knob settings"));
        }
    }
    // The shortcut panel's verdict over the knob settings (calibrated knobs, the default): how many are
    // shortcut-free, and the worst shortcut left.
    let (mut judged, mut free, mut worst): (usize, usize, Option<(f64, String)>) = (0, 0, None);
    for ((setting, task), n) in &counts {
        if *n == 0 || setting == "recipeqa" {
            continue;
        }
        let file = format!("audit/{setting}/{task}/audit.json");
        if !Path::new(&file).is_file() {
            continue;
        }
        let j = json(&file)?;
        let Some(verdict) = j.pointer("/tasks/0/shortcuts/shortcut_free").and_then(Value::as_bool) else { continue };
        judged += 1;
        free += usize::from(verdict);
        let w = j.pointer("/tasks/0/shortcuts/worst");
        let chance = j.pointer("/tasks/0/chance").and_then(Value::as_f64).unwrap_or(0.25);
        if let (Some(name), Some(v)) = (
            w.and_then(|w| w.pointer("/name")).and_then(Value::as_str),
            w.and_then(|w| w.pointer("/accuracy/value")).and_then(Value::as_f64),
        ) && worst.as_ref().is_none_or(|(d, _)| (v - chance).abs() > *d)
        {
            let ci = w
                .and_then(|w| w.pointer("/accuracy/ci"))
                .and_then(|c| Some((c.get("low")?.as_f64()?, c.get("high")?.as_f64()?)))
                .map_or(String::new(), |(lo, hi)| format!(" [{}, {}]", pct(lo), pct(hi)));
            worst = Some(((v - chance).abs(), format!("{task} {setting}: {name} {}{ci}", pct(v))));
        }
    }
    if judged > 0 {
        parts.push(format!(
            "shortcut-free (shortcut panel) in {free} of {judged} knob task sets{}",
            worst.map_or(String::new(), |(_, w)| format!(", worst {w}"))
        ));
    }
    let mut s = format!("{audited} task sets audited (chance 25%): {}", parts.join("; "));
    if !empty.is_empty() {
        s.push_str(&format!("; empty, not audited: {}", empty.join(", ")));
    }
    Ok(s)
}

/// Stage `sequencing`: multimodal instances (text and image per step) with every valid order as a reference.
fn sequencing(d: &mut Demo) -> anyhow::Result<String> {
    let (seed, windows) = (d.seed.to_string(), d.windows.to_string());
    stepwise(&[
        "generate",
        CLEAN,
        "--task",
        "sequencing",
        "--modality",
        "multimodal",
        "--windows",
        &windows,
        "--seed",
        &seed,
        "-o",
        SEQUENCING,
    ])?;
    let m = Manifest::read(Path::new(SEQUENCING))?;
    let c = |k: &str| m.counts.get(k).copied().unwrap_or(0);
    Ok(format!(
        "{} five-step instances (train {}, val {}, test {}); {} with several valid orders, {} references in all",
        c("instances"),
        c("instances_train"),
        c("instances_val"),
        c("instances_test"),
        c("instances_multi_reference"),
        c("references")
    ))
}

/// The multi-reference PMR of a (method, features) row of the baseline table.
fn table_pmr(results: &Value, method: &str, features: &str) -> Option<f64> {
    results
        .get("rows")?
        .as_array()?
        .iter()
        .find(|r| r["method"] == method && r["features"] == features)?
        .pointer("/multi/pmr/value")?
        .as_f64()
}

/// Stage `baselines`: every baseline with text, image and multimodal features, scored on the test split.
fn baselines(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    stepwise(&[
        "baseline",
        SEQUENCING,
        "--table",
        "world",
        "--features",
        TEXT_FEATURES,
        "--features",
        IMAGE_FEATURES,
        "--seed",
        &seed,
        "-o",
        SEQ_RESULTS,
    ])?;
    let r = json(&format!("{SEQ_RESULTS}/results.json"))?;
    let rows = r.get("rows").and_then(Value::as_array).map_or(0, Vec::len);
    let pmr = |m: &str, f: &str| table_pmr(&r, m, f).map_or("–".into(), pct);
    Ok(format!(
        "{rows} baseline runs; multi-reference PMR: pairwise text {}, image {}, multimodal {}; random {}",
        pmr("pairwise", "text"),
        pmr("pairwise", "image"),
        pmr("pairwise", "multimodal"),
        pmr("random", "-")
    ))
}

/// Stage `eval-baselines`: score two of the baselines' prediction files with `stepwise eval`.
fn eval_baselines(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    let mut parts = Vec::new();
    for name in ["pairwise-multimodal", "random"] {
        let preds = format!("{SEQ_RESULTS}/predictions/{name}.jsonl");
        let out = format!("eval/{name}");
        stepwise(&["eval", SEQUENCING, "-p", &preds, "--split", "test", "--seed", &seed, "-o", &out])?;
        let file = format!("{out}/results.json");
        let r = json(&file)?;
        parts.push(format!(
            "{name}: PMR {}, τ {:.3}",
            pct(number(&r, &file, "/groups/0/metrics/pmr/value")?),
            number(&r, &file, "/groups/0/metrics/kendall_tau/value")?
        ));
    }
    Ok(format!("{} (test split, best valid order)", parts.join("; ")))
}

/// Stage `eval-hasty`: Hasty Student predictions for the RecipeQA-mode task set, scored by `stepwise eval` —
/// how a user's predictions file is scored, and a cross-check of the audit's Hasty Student numbers.
fn eval_hasty(d: &mut Demo) -> anyhow::Result<String> {
    let n = hasty::write_predictions(
        Path::new(TASKS),
        &[Path::new(TEXT_FEATURES), Path::new(IMAGE_FEATURES)],
        Path::new(HASTY_PREDICTIONS),
    )?;
    stepwise(&["eval", TASKS, "-p", HASTY_PREDICTIONS, "--seed", &d.seed.to_string(), "-o", "eval/hasty-student"])?;
    let file = "eval/hasty-student/results.json";
    let r = json(file)?;
    let tasks =
        r.pointer("/sets/0/tasks").and_then(Value::as_array).with_context(|| format!("{file}: no sets[0].tasks"))?;
    let mut parts = Vec::new();
    let mut disagree = Vec::new();
    for t in tasks {
        let (Some(task), Some(acc)) = (t["task"].as_str(), t.pointer("/accuracy/value").and_then(Value::as_f64)) else {
            bail!("{file}: a task without `task` or `accuracy.value`");
        };
        parts.push(format!("{task} {}", pct(acc)));
        // The RecipeQA-mode task set and the suite's RecipeQA setting hold the same questions, so the audit's
        // Hasty Student must agree.
        let audit = format!("audit/recipeqa/{task}/audit.json");
        if Path::new(&audit).is_file() {
            let a = number(&json(&audit)?, &audit, "/tasks/0/hasty_student/value")?;
            if (a - acc).abs() > 1e-9 {
                disagree.push(format!("{task}: eval {} vs audit {}", pct(acc), pct(a)));
            }
        }
    }
    let check = if disagree.is_empty() {
        "equal to the audit's Hasty Student".to_string()
    } else {
        format!("DIFFERS from the audit ({})", disagree.join("; "))
    };
    Ok(format!("{n} predictions; accuracy {} ({check})", parts.join(", ")))
}

/// The demo study: one trained model, HTRN (the papers' best), small, trained with 3 seeds on every setting of the
/// visual cloze suite in about two and a half minutes on 2 cores. It needs its epochs: with a few hundred training
/// questions per setting it is still learning after 8 (about 30% in RecipeQA mode against 72% after 40), so the
/// budget goes to one model trained long enough to show the papers' drop from RecipeQA mode to the knob settings
/// rather than three that have not learned; `stepwise study` with its defaults is the real study.
const STUDY_ARGS: &[&str] = &[
    "--task",
    "visual_cloze",
    "--model",
    "htrn",
    "--hidden",
    "32",
    "--attention",
    "32",
    "--htrn-layers",
    "1",
    "--htrn-dim",
    "64",
    "--htrn-heads",
    "4",
    "--epochs",
    "40",
    "--patience",
    "10",
];

/// Stage `study`: HTRN trained and tested on every setting of the suite's visual cloze (Meta-RecipeQA Fig. 4 and
/// Table 2 in miniature), next to the Hasty Student, each with its drop from RecipeQA mode to the knob settings.
fn study(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    let mut argv = vec!["study", SUITE, "--features", TEXT_FEATURES, "--features", IMAGE_FEATURES];
    argv.extend_from_slice(STUDY_ARGS);
    argv.extend(["--seeds", DEMO_SEEDS, "--seed", &seed, "-o", STUDY]);
    stepwise(&argv)?;
    let file = format!("{STUDY}/study.json");
    let v = json(&file)?;
    let rows = v.get("summary").and_then(Value::as_array).with_context(|| format!("{file}: no `summary` array"))?;
    let with_ci = |r: &Value, k: &str| -> Option<String> {
        let value = pct(r.get(k)?.as_f64()?);
        let ci = r.get(format!("{k}_ci"))?.as_array()?;
        Some(format!("{value} [{}, {}]", pct(ci.first()?.as_f64()?), pct(ci.get(1)?.as_f64()?)))
    };
    let signed = stepwise_score::markdown::signed_percent;
    let parts: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let model = r.get("model")?.as_str()?;
            let d = r.get("difference")?;
            Some(format!(
                "{model} {} → {}, {} [{}, {}] ({})",
                with_ci(r, "recipeqa")?,
                with_ci(r, "knob_mean")?,
                signed(d.get("value")?.as_f64()?),
                signed(d.get("low")?.as_f64()?),
                signed(d.get("high")?.as_f64()?),
                r.get("verdict")?.as_str()?
            ))
        })
        .collect();
    if parts.len() != rows.len() {
        bail!("{file}: a summary row without its intervals or verdict");
    }
    let n = |setting: &str| -> u64 {
        v.get("cells").and_then(Value::as_array).map_or(0, |cells| {
            cells
                .iter()
                .filter(|c| c["setting"] == setting && c["model"] == stepwise_models::m3c::study::HASTY)
                .filter_map(|c| c["test_questions"].as_u64())
                .sum()
        })
    };
    let knob_questions: Vec<u64> = stepwise_models::m3c::study::SETTINGS[1..].iter().map(|s| n(s)).collect();
    Ok(format!(
        "visual cloze test accuracy, RecipeQA mode ({} questions) → mean of the 8 knob settings ({}–{} questions \
         each), difference [95% CI over procedures], models mean of {DEMO_SEEDS} seeds (a small HTRN, at most 40 \
         epochs): {}",
        n("recipeqa"),
        knob_questions.iter().min().unwrap_or(&0),
        knob_questions.iter().max().unwrap_or(&0),
        parts.join("; ")
    ))
}

/// Stage `seq-study`: the sequencing paper's models in miniature — per-token w2v vectors (with ids, for MLM) and
/// 3×3 descriptor patch grids, then image-only, text-only and multimodal sequencers without and with
/// sequence-aware pretraining (Table 2; a small encoder, at most 10 epochs, so it stays within a few minutes).
fn seq_study(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    stepwise(&["embed", CLEAN, "--encoder", "w2v", "--seed", &seed, "--tokens", "-o", TOKEN_FEATURES])?;
    stepwise(&["embed", CLEAN, "--encoder", "descriptor", "--patches", "--grid", "3", "-o", PATCH_FEATURES])?;
    stepwise(&[
        "seq-study",
        SEQUENCING,
        "--features",
        TOKEN_FEATURES,
        "--features",
        PATCH_FEATURES,
        "--dim",
        "32",
        "--layers",
        "1",
        "--heads",
        "2",
        "--epochs",
        "10",
        "--patience",
        "3",
        "--pretrain-epochs",
        "2",
        "--no-ablation",
        "--seeds",
        DEMO_SEEDS,
        "--name",
        "world",
        "--seed",
        &seed,
        "-o",
        SEQ_STUDY,
    ])?;
    let r = json(&format!("{SEQ_STUDY}/seeds.json"))?;
    let rows = r.as_array().map_or(&[][..], Vec::as_slice);
    let interval = |v: &Value| -> Option<String> {
        let ci = v.get("ci")?.as_array()?;
        Some(format!(
            "{} [{}, {}]",
            pct(v.get("value")?.as_f64()?),
            pct(ci.first()?.as_f64()?),
            pct(ci.get(1)?.as_f64()?)
        ))
    };
    let signed = |x: f64| format!("{}{:.1}", if x >= 0.0 { "+" } else { "−" }, x.abs() * 100.0);
    let n = rows.first().and_then(|r| r["sequences"].as_u64()).unwrap_or(0);
    let parts: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let mut s = format!("{} {} {}", row["features"].as_str()?, row["method"].as_str()?, interval(&row["pmr"])?);
            if let Some(d) = row.get("versus").and_then(|v| v.get(1)) {
                let ci = d.get("ci")?.as_array()?;
                let (lo, hi) = (ci.first()?.as_f64()?, ci.get(1)?.as_f64()?);
                let verdict = stepwise_score::bootstrap::noise_verdict(lo, hi);
                s.push_str(&format!(
                    " (vs pairwise {} [{}, {}], {verdict})",
                    signed(d.get("value")?.as_f64()?),
                    signed(lo),
                    signed(hi)
                ));
            }
            Some(s)
        })
        .collect();
    Ok(format!(
        "multi-reference PMR on {n} test sequences, mean of {DEMO_SEEDS} seeds [95% CI over sequences] (small encoder, \
         at most 10 epochs): {}",
        parts.join("; ")
    ))
}

/// Stage `annotate`: the sequencing paper's human half, ready to serve — a study of the test instances in every
/// modality under the paper's rules (HITs of 5, 3 people per item, censoring below 20%). The admin password is a
/// fresh secret each run (`admin-password.txt`, `admin.hash`); every other file is the same for a seed.
fn annotate(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    stepwise(&["annotate", "create", SEQUENCING, "--split", "test", "--seed", &seed, "-o", ANNOTATION])?;
    let study = stepwise_annotate::Study::read(Path::new(ANNOTATION))?;
    let modalities: Vec<&str> = study.rules.modalities.iter().map(|m| m.as_str()).collect();
    Ok(format!(
        "a study of {} test instances, {} items ({}) × {} judgements; serve it with \
         `stepwise annotate serve --study {ANNOTATION}`",
        study.instances.len(),
        study.tasks.len(),
        modalities.join(", "),
        study.rules.judgements
    ))
}

/// Stage `r2vq`: R2VQ questions from the world's exact annotation (every family the world's annotation carries),
/// answered by the text-only baseline and by the family programs, both scored on the test recipes.
fn r2vq(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    // The raw world corpus: cleaning may change step texts, and the annotation's offsets refer to the raw text.
    stepwise(&["generate", CORPUS, "--task", "r2vq", "--seed", &seed, "-o", R2VQ])?;
    // The test split's file; a tiny world may have no test recipes, then the validation or train split's.
    let Some(gold) =
        ["test", "val", "train"].iter().map(|s| format!("{R2VQ}/{s}.csv")).find(|p| Path::new(p).is_file())
    else {
        return Ok("no R2VQ questions could be made from this world".into());
    };
    let mut scores = Vec::new();
    for method in ["text", "annotation"] {
        let answers = format!("predictions/r2vq-{method}.jsonl");
        stepwise(&["r2vq", "answer", &gold, "--method", method, "-o", &answers])?;
        let out = format!("eval/r2vq-{method}");
        stepwise(&["eval", &gold, "-p", &answers, "--seed", &seed, "-o", &out])?;
        let file = format!("{out}/results.json");
        let r = json(&file)?;
        scores.push(format!(
            "{method}: EM {}, F1 {}",
            pct(number(&r, &file, "/overall/em/value")?),
            pct(number(&r, &file, "/overall/f1/value")?)
        ));
    }
    let m = Manifest::read(Path::new(R2VQ))?;
    let families = m.counts.keys().filter(|k| k.starts_with("family_")).count();
    Ok(format!(
        "{} questions in {families} families from {} procedures; {gold} answered by {}",
        m.counts.get("questions").copied().unwrap_or(0),
        m.counts.get("recipes").copied().unwrap_or(0),
        scores.join("; ")
    ))
}

/// Stage `report`: write demo.json (the stages so far) and the HTML + Markdown report of the whole folder.
fn report(d: &mut Demo) -> anyhow::Result<String> {
    let stages: Vec<Value> = d.done.iter().map(|(n, s)| serde_json::json!({"name": n, "summary": s})).collect();
    let demo = serde_json::json!({
        "kind": "demo",
        "procedures": d.n,
        "seed": d.seed,
        "domain": d.domain,
        "world": world_args(d).join(" "),
        "stages": stages,
    });
    write_string_atomic(Path::new("demo.json"), &to_pretty_sorted(&demo))?;
    let mut m = Manifest::new("demo").with_seed(d.seed);
    m.param("domain", &d.domain);
    m.param("windows", d.windows);
    m.param("world", world_args(d).join(" "));
    m.count("procedures", d.n);
    m.count("stages", STAGES.len() as u64);
    m.write(Path::new("."))?;
    let title = format!("stepwise demo: {} {} procedures, seed {}", d.n, d.domain, d.seed);
    stepwise(&["report", ".", "-o", "report.html", "--title", &title])?;
    let html = std::fs::metadata("report.html").context("report.html was not written")?.len();
    let md = std::fs::read_to_string("report.md").context("report.md was not written")?;
    let sections = md.lines().filter(|l| l.starts_with("## ")).count();
    Ok(format!("report.html ({:.1} MB, self-contained) and report.md: {sections} sections", html as f64 / 1e6))
}
