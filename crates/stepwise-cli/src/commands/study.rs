//! `stepwise study SUITE --features F... -o STUDY`: the Meta-RecipeQA model study — every model trained and tested
//! on RecipeQA mode and the eight knob settings of a suite, per task, with the paper's tables and plots.

use std::io::Write;
use std::path::{Path, PathBuf};

use stepwise_core::manifest::Manifest;
use stepwise_core::output::{OutputDir, write_file_atomic, write_string_atomic};
use stepwise_core::{Task, TaskSet};
use stepwise_models::m3c::ScorerKind;
use stepwise_models::m3c::dataset::tasks_in;
use stepwise_models::m3c::study::{self, StudyConfig, StudyEvent, StudyInputs, StudyReport};
use stepwise_report::plots::{BarChart, LineChart, write_bar_chart, write_line_chart};
use stepwise_score::bootstrap::BootstrapConfig;

use super::model_features::FeatureArgs;
use super::train::ModelHyper;
use crate::usage_bail;

/// Train and test every model on every setting of a suite (Meta-RecipeQA Fig. 4, Fig. 5, Table 2).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise sweep world/ --features feats/w2v --features feats/descriptor -o suite/\n  \
    stepwise study suite/ --features feats/w2v --features feats/descriptor --task visual_cloze -o study/\n  \
    stepwise study suite/ --features F1 --features F2 --hidden 64 --htrn-layers 2 --htrn-dim 128 --htrn-heads 4 \
    --epochs 30 --patience 5 -o study-small/\n  \
    stepwise study rqa/taskset/ --features feats/rqa-w2v --task textual_cloze --cv 5 -o study-rqa/\n\n\
    For each task and setting (recipeqa, knobs-<k1>-<k2>-<k3>; visual ordering has no knob 3, so its k3 = 1 \
    settings reuse the k3 = 0 questions when the suite wrote them once), each model is trained on `train`, its \
    epoch selected on `val`, and tested on `test`; the Hasty Student is the no-training row, and each model is \
    compared with it on the same test questions (a paired interval over procedures). Output: study.md, \
    study.json, predictions/<task>/<setting>/<model>.jsonl (<model>__seed<S>.jsonl per training seed with \
    --seeds above 1; what `stepwise eval` reads), fig4-<task>.svg/.png \
    (RecipeQA mode vs the knob settings' mean ± std), fig5-<task>-knob<k>.svg/.png (accuracy at each value of a \
    knob, mean over the other two), manifest.json. Finished cells are kept in a hidden work folder beside STUDY, \
    so a killed study resumes where it stopped.")]
pub struct Args {
    /// A suite folder from `stepwise sweep`, or one task set, studied under the setting its manifest names
    /// (RecipeQA's own questions, the taskset/ folder of `stepwise ingest --format recipeqa`, as RecipeQA mode;
    /// --cv for a set without a train split).
    pub suite: PathBuf,
    #[command(flatten)]
    pub features: FeatureArgs,
    /// Models to train (comma-separated scoring functions).
    #[arg(long = "model", value_delimiter = ',', default_value = "impatient,bidaf,htrn")]
    pub scorers: Vec<String>,
    /// Tasks (comma-separated; default: every task the suite and the features support).
    #[arg(long = "task", value_delimiter = ',')]
    pub tasks: Vec<String>,
    #[command(flatten)]
    pub hyper: ModelHyper,
    /// K-fold cross-validation by procedure instead of the suite's train/val/test split (for small datasets:
    /// every question is tested once; K >= 3).
    #[arg(long, value_name = "K")]
    pub cv: Option<usize>,
    /// Train every model with this many seeds (--seed, --seed + 1, ...; the split or folds stay those of --seed):
    /// values are means over seeds with intervals over procedures, and study.md gives the spread over seeds.
    #[arg(long, value_name = "K", default_value_t = 3)]
    pub seeds: usize,
    /// Train on at most N questions of each training split or fold: one point of a learning curve. Whole
    /// procedures in a seeded order, so a smaller N's training questions are part of a larger N's; the test
    /// questions stay the same.
    #[arg(long, value_name = "N")]
    pub max_train_questions: Option<usize>,
    /// Bootstrap resamples for the 95% intervals.
    #[arg(long, default_value_t = 1000)]
    pub resamples: usize,
    #[arg(short, long)]
    pub output: PathBuf,
    /// Replace an existing output.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    args.hyper.check()?;
    if args.cv.is_some_and(|k| k < 3) {
        usage_bail!("--cv needs at least 3 folds (test, val and train)");
    }
    if args.seeds == 0 || args.max_train_questions == Some(0) {
        usage_bail!("--seeds and --max-train-questions must be at least 1");
    }
    let mut models = Vec::new();
    for m in &args.scorers {
        match ScorerKind::parse(m) {
            Some(k) if !models.contains(&k) => models.push(k),
            Some(_) => {}
            None => usage_bail!("--model {m}: one of impatient, bidaf, htrn"),
        }
    }
    // The task sets of the suite (all loaded to gather the texts to encode).
    let mut tasks: Vec<Task> = Vec::new();
    for t in &args.tasks {
        match Task::parse(t) {
            Some(t) => tasks.push(t),
            None => usage_bail!("--task {t}: one of {}", Task::names()),
        }
    }
    let mut candidates = if tasks.is_empty() { Task::ALL.to_vec() } else { tasks.clone() };
    let mut sets = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for &task in &candidates {
        for (_, dir) in study::study_tasksets(&args.suite, task)? {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    for dir in &dirs {
        sets.push(TaskSet::load(dir)?);
    }
    if sets.is_empty() {
        usage_bail!(
            "{}: no task set found (expected <setting>/<task>/questions.json as `stepwise sweep` writes, or a task \
             set folder)",
            args.suite.display()
        );
    }
    if study::is_one_taskset(&args.suite) {
        // One task set: the tasks it holds (a RecipeQA file holds all four).
        let present = tasks_in(&sets[0]);
        if let Some(t) = tasks.iter().find(|t| !present.contains(t)) {
            usage_bail!("--task {t}: {} has no {t} questions", args.suite.display());
        }
        candidates.retain(|t| present.contains(t));
    }
    if let Err(e) = study::check_splits(&args.suite, &sets.iter().collect::<Vec<_>>(), &candidates, args.cv) {
        usage_bail!("{e}");
    }
    // A suite is known by its manifest; one task set by its questions and its manifest when it has one. Hashed
    // before training, so that a missing file is said before hours of work, not after.
    let mut known_by = vec![args.suite.join(stepwise_core::manifest::MANIFEST_FILE)];
    if study::is_one_taskset(&args.suite) {
        known_by.retain(|p| p.is_file());
        known_by.push(args.suite.join(stepwise_core::taskset::QUESTIONS_JSON));
    }
    let input_hashes = known_by
        .iter()
        .map(|p| stepwise_core::manifest::InputHash::of(p))
        .collect::<stepwise_core::Result<Vec<_>>>()?;
    let features = args.features.load(sets.iter().flat_map(|s| s.questions.iter()))?;
    drop(sets);
    let sources = features.sources();
    if tasks.is_empty() {
        // Every task whose inputs the features provide.
        tasks = candidates
            .into_iter()
            .filter(|&t| stepwise_models::m3c::InputSpec::for_task(t, &sources, true).dims(&sources).is_ok())
            .collect();
        if tasks.is_empty() {
            usage_bail!("the features given provide no task's inputs (give a text store and an image store)");
        }
    }
    let out = OutputDir::create(&args.output, args.force)?;
    let work = work_dir(&args.output);
    std::fs::create_dir_all(&work)?;
    let resolver = features.resolver();
    let cfg = StudyConfig {
        models,
        tasks,
        hidden: args.hyper.hidden,
        attention: args.hyper.attention,
        htrn: args.hyper.htrn(),
        tokens: true,
        inputs: args.hyper.inputs.into(),
        dropout: args.hyper.dropout,
        candidate_embedding: args.hyper.candidate_embedding.into(),
        train: args.hyper.train_config(),
        bootstrap: BootstrapConfig { resamples: args.resamples, seed: args.hyper.seed, ..Default::default() },
        cv: args.cv,
        seeds: args.seeds,
        max_train_questions: args.max_train_questions,
    };
    let inputs = StudyInputs {
        suite: &args.suite,
        sources,
        resolver: &resolver,
        features_key: features.key(),
        work_dir: Some(&work),
    };
    let pb = stepwise_core::progress::bar(0, "study");
    let report = study::run_study(&inputs, &cfg, &mut |e| match e {
        StudyEvent::CellStarted { task, setting, model, index, total } => {
            pb.set_length(total as u64);
            pb.set_position(index as u64 - 1);
            pb.set_message(format!("{task} {setting}: {model}"));
        }
        StudyEvent::Epoch { epoch, loss, best_val, .. } => {
            let best = best_val.map_or(String::new(), |v| format!(", best val {:.1}%", 100.0 * v));
            let msg = pb.message();
            let head = msg.split(" | ").next().unwrap_or("").to_string();
            pb.set_message(format!("{head} | epoch {epoch}, loss {loss:.3}{best}"));
        }
        StudyEvent::CellCached { .. } => pb.inc(1),
    })?;
    pb.finish_and_clear();
    write_outputs(out.path(), &report)?;
    let mut m = Manifest::new("study").with_seed(args.hyper.seed);
    m.inputs.extend(input_hashes);
    m.inputs.extend(features.input_hashes.iter().cloned());
    m.param("config", &report.config);
    m.count("cells", report.cells.len() as u64);
    m.count("seeds", report.config.seeds as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    let _ = std::fs::remove_dir_all(&work);
    if !stepwise_core::progress::is_quiet() {
        for r in &report.summary {
            let pct = |x: Option<f64>| x.map_or("–".into(), |v| format!("{:.1}", 100.0 * v));
            let drop = r.difference.map_or(String::new(), |d| {
                format!(
                    "  difference {}{}",
                    stepwise_score::markdown::signed_percent(d.value),
                    r.verdict.as_deref().map_or(String::new(), |v| format!(" ({v})"))
                )
            });
            eprintln!(
                "{:<17} {:<17} RecipeQA mode {:>5}  knob settings {:>5} ± {}{drop}",
                r.task.as_str(),
                r.model,
                pct(r.recipeqa),
                pct(r.knob_mean),
                pct(r.knob_std)
            );
        }
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// The cache of finished cells: a hidden folder beside the output, stable across restarts.
fn work_dir(output: &Path) -> PathBuf {
    let name = output.file_name().map_or_else(|| "study".into(), |n| n.to_string_lossy().into_owned());
    output.with_file_name(format!(".{name}.study-work"))
}

fn write_outputs(dir: &Path, report: &StudyReport) -> anyhow::Result<()> {
    let seeds = report.config.training_seeds();
    for c in &report.cells {
        let model = c.model.to_lowercase().replace(' ', "-");
        for (k, predictions) in c.predictions.iter().enumerate() {
            // One file per training seed when there are several (the Hasty Student has one).
            let name = match seeds.get(k) {
                Some(seed) if c.predictions.len() > 1 => format!("{model}__seed{seed}.jsonl"),
                _ => format!("{model}.jsonl"),
            };
            let file = dir.join("predictions").join(c.task.as_str()).join(&c.setting).join(name);
            write_file_atomic(&file, |w| {
                for (qid, choice) in predictions {
                    writeln!(w, "{}", serde_json::json!({"qid": qid, "answer": choice, "model": c.model}))?;
                }
                Ok(())
            })?;
        }
    }
    // study.json without the per-question predictions (they are in predictions/) and outcomes.
    let mut slim = report.clone();
    slim.cells.iter_mut().for_each(|c| {
        c.predictions.clear();
        c.outcomes.clear();
    });
    write_string_atomic(&dir.join("study.json"), &stepwise_core::json::to_pretty_sorted(&slim))?;
    write_string_atomic(&dir.join("study.md"), &study::markdown(report))?;
    let models: Vec<String> = report.summary.iter().map(|r| r.model.clone()).fold(Vec::new(), |mut v, m| {
        if !v.contains(&m) {
            v.push(m);
        }
        v
    });
    for &task in &report.config.tasks {
        let rows: Vec<_> = report.summary.iter().filter(|r| r.task == task).collect();
        if rows.is_empty() {
            continue;
        }
        let cats: Vec<String> = rows.iter().map(|r| r.model.clone()).collect();
        let chart = BarChart::new(format!("{task}: RecipeQA mode vs knob settings"), "model", "test accuracy", cats)
            .with_series("RecipeQA mode", rows.iter().map(|r| r.recipeqa).collect(), None)
            .with_series(
                "knob settings (mean ± std)",
                rows.iter().map(|r| r.knob_mean).collect(),
                Some(
                    rows.iter()
                        .map(|r| r.knob_mean.map(|m| (m - r.knob_std.unwrap_or(0.0), m + r.knob_std.unwrap_or(0.0))))
                        .collect(),
                ),
            );
        let chart = BarChart { y_range: Some((0.0, 1.0)), ..chart };
        write_bar_chart(&chart, &dir.join(format!("fig4-{task}.svg")), &dir.join(format!("fig4-{task}.png")))?;
        for knob in 1..=3 {
            let mut chart = LineChart::new(
                format!("{task}: knob {knob} (mean over the other two knobs)"),
                format!("knob {knob} value"),
                "test accuracy",
            );
            for m in &models {
                if let Some(e) = report.knob_effects.iter().find(|e| e.task == task && e.knob == knob && &e.model == m)
                {
                    let pts: Vec<(f64, f64)> =
                        e.at.iter().enumerate().filter_map(|(v, a)| a.map(|a| (v as f64, a))).collect();
                    if !pts.is_empty() {
                        chart = chart.with_series(m.clone(), pts);
                    }
                }
            }
            if chart.series.is_empty() {
                continue;
            }
            chart.y_range = Some((0.0, 1.0));
            write_line_chart(
                &chart,
                &dir.join(format!("fig5-{task}-knob{knob}.svg")),
                &dir.join(format!("fig5-{task}-knob{knob}.png")),
            )?;
        }
    }
    Ok(())
}
