//! `stepwise train TASKSET --features F... --model impatient|bidaf|htrn -o MODEL_DIR`: train a GM3C model on one
//! task of a task set (train split, epoch selected on val), with a checkpoint after every epoch so a killed run
//! resumes to the same weights.

mod args;

use std::path::{Path, PathBuf};

use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Task, TaskSet, taskset::QUESTIONS_JSON};
use stepwise_models::m3c::dataset::{task_inputs, tasks_in};
use stepwise_models::m3c::saved;
use stepwise_models::m3c::train::{self, Checkpointing, TrainReport};
use stepwise_models::m3c::{InputSpec, M3cModel, ScorerKind};
use stepwise_report::plots::{LineChart, write_line_chart};

pub use self::args::{Args, ModelHyper};
use crate::usage_bail;

/// The task to use: `--task`, or the only one in the set.
pub fn pick_task(set: &TaskSet, task: Option<&str>, path: &Path) -> anyhow::Result<Task> {
    let present = tasks_in(set);
    match task {
        Some(t) => match Task::parse(t) {
            Some(t) if present.contains(&t) => Ok(t),
            Some(t) => usage_bail!("{}: no {t} questions in this task set", path.display()),
            None => {
                usage_bail!("--task {t}: not one of {}", Task::names())
            }
        },
        None => match present.as_slice() {
            [t] => Ok(*t),
            [] => usage_bail!("{}: no question of a RecipeQA task", path.display()),
            many => usage_bail!(
                "{}: several tasks ({}); choose one with --task",
                path.display(),
                many.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
            ),
        },
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    args.hyper.check()?;
    let set = TaskSet::load(&args.taskset)?;
    let task = pick_task(&set, args.task.as_deref(), &args.taskset)?;
    let questions = || set.of_task(task.as_str());
    let features = args.features.load(questions())?;
    let sources = features.sources();
    let spec = InputSpec::for_task(task, &sources, true);
    let dims = match spec.dims(&sources) {
        Ok(d) => d,
        Err(e) => usage_bail!("{task}: {e}"),
    };
    let inputs =
        task_inputs(&set, task, &InputSpec { max_context_steps: args.hyper.max_context_steps, ..spec }, &sources);
    let train_set = inputs.split(&args.train_split);
    let val_set = inputs.split(&args.val_split);
    if train_set.is_empty() {
        let why = inputs.skipped.examples.first().map_or(String::new(), |e| format!(" (e.g. {e})"));
        usage_bail!(
            "{}: no usable {task} question in split `{}` ({} left out for missing vectors{why})",
            args.taskset.display(),
            args.train_split,
            inputs.skipped.count
        );
    }
    if inputs.skipped.count > 0 {
        tracing::warn!(
            "{} {task} questions left out for missing vectors, e.g. {}",
            inputs.skipped.count,
            inputs.skipped.examples.join("; ")
        );
    }
    let out = OutputDir::create(&args.output, args.force)?;
    let scorer: ScorerKind = args.model.into();
    let config = args.hyper.model_config(scorer, spec, dims).scaled_on(args.hyper.inputs.into(), train_set);
    let tcfg = args.hyper.train_config();
    let model = M3cModel::new(config, tcfg.seed)?;
    let checkpoint = Checkpointing { path: checkpoint_path(&args.output), stop_after_epochs: None };
    let pb = stepwise_core::progress::bar(0, &format!("{} on {task}", scorer.display()));
    let report = train::train(&model, train_set, val_set, &tcfg, Some(&checkpoint), &mut |epoch, b, n, loss, best| {
        pb.set_length(n as u64);
        pb.set_position(b as u64);
        let best = best.map_or(String::new(), |v| format!(", best val acc {:.1}%", 100.0 * v));
        pb.set_message(format!("epoch {epoch}: loss {loss:.4}{best}"));
    })?;
    pb.finish_and_clear();
    let Some(report) = report else { anyhow::bail!("training stopped before its end") };
    let identities: Vec<_> = features.identities.iter().map(|(i, _)| i.clone()).collect();
    saved::save(out.path(), &model, &tcfg, &report, &identities)?;
    write_curve(out.path(), &report, &format!("{} on {task}", scorer.display()))?;
    let mut m = Manifest::new("model").with_seed(tcfg.seed);
    let file = if args.taskset.is_dir() { args.taskset.join(QUESTIONS_JSON) } else { args.taskset.clone() };
    m.inputs.push(InputHash::of(&file)?);
    m.inputs.extend(features.input_hashes.iter().cloned());
    m.param("task", task.as_str());
    m.param("model", scorer.as_str());
    m.count("train_questions", report.train_questions as u64);
    m.count("val_questions", report.val_questions as u64);
    m.count("skipped_questions", inputs.skipped.count as u64);
    m.count("parameters", report.parameters as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    let _ = std::fs::remove_file(&checkpoint.path);
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{} on {task}: {} parameters, {} train / {} val questions, {} epochs (best {}{}){}",
            scorer.display(),
            report.parameters,
            report.train_questions,
            report.val_questions,
            report.epochs_run,
            report.best_epoch,
            report.best_val_accuracy.map_or(String::new(), |v| format!(", val accuracy {:.1}%", 100.0 * v)),
            if report.resumed_from_epoch > 0 {
                format!("; resumed after epoch {}", report.resumed_from_epoch)
            } else {
                String::new()
            }
        );
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// The checkpoint of a training run writing `output`: a hidden file beside it, stable across restarts.
pub fn checkpoint_path(output: &Path) -> PathBuf {
    let name = output.file_name().map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
    output.with_file_name(format!(".{name}.checkpoint.safetensors"))
}

/// The training curve as JSON (in training.json) and a plot: loss and accuracies per epoch.
pub fn write_curve(dir: &Path, report: &TrainReport, title: &str) -> anyhow::Result<()> {
    let pts = |f: &dyn Fn(&train::EpochRecord) -> Option<f64>| -> Vec<(f64, f64)> {
        report.curve.iter().filter_map(|r| f(r).map(|v| (r.epoch as f64, v))).collect()
    };
    let mut chart = LineChart::new(format!("Training curve: {title}"), "epoch", "accuracy / loss")
        .with_series("train loss", pts(&|r| Some(r.train_loss)))
        .with_series("train accuracy", pts(&|r| Some(r.train_accuracy)));
    let val = pts(&|r| r.val_accuracy);
    if !val.is_empty() {
        chart = chart.with_series("val accuracy", val);
    }
    write_line_chart(&chart, &dir.join("training_curve.svg"), &dir.join("training_curve.png"))?;
    write_string_atomic(&dir.join("training_curve.json"), &stepwise_core::json::to_pretty_sorted(&report.curve))?;
    Ok(())
}
