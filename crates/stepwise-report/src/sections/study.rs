//! Model studies (`stepwise study`) and trained models (`stepwise train`): test accuracy per knob setting and
//! model with intervals, RecipeQA mode against the knob settings' mean ± std (Meta-RecipeQA Fig. 4), the knob
//! effects (Fig. 5), and each trained model's curve.

use std::path::{Path, PathBuf};

use stepwise_core::Result;

use super::{Ctx, setting_label, setting_order};
use stepwise_score::markdown::signed_percent_interval;

use crate::doc::{Block, Figure, Section, Table, pct, pct_ci};
use crate::plots::BarChart;
use crate::read::JsonFile;
use crate::scan::Artefact;

/// A value with its optional 95% interval.
pub type WithCi = (f64, Option<(f64, f64)>);

pub struct StudyCell {
    pub task: String,
    pub setting: String,
    pub model: String,
    pub test_questions: u64,
    pub accuracy: Option<WithCi>,
}

pub struct StudySummary {
    pub task: String,
    pub model: String,
    pub recipeqa: Option<WithCi>,
    pub knob_mean: Option<WithCi>,
    pub knob_std: Option<f64>,
    /// RecipeQA mode − knob mean with its interval, the study's verdict and the sd over seeds (newer studies).
    pub difference: Option<WithCi>,
    pub verdict: Option<String>,
    pub difference_sd: Option<f64>,
}

/// A trained model − the Hasty Student in one cell, paired by question (newer studies).
pub struct VersusHasty {
    pub task: String,
    pub setting: String,
    pub model: String,
    pub difference: WithCi,
    pub verdict: Option<String>,
    /// Test questions both answered.
    pub questions: u64,
}

pub struct StudyInfo {
    pub rel: String,
    pub dir: PathBuf,
    pub config_line: String,
    pub cells: Vec<StudyCell>,
    pub summary: Vec<StudySummary>,
    pub versus_hasty: Vec<VersusHasty>,
    pub effects: Vec<(String, u64, String, [Option<f64>; 2])>,
}

pub fn read(a: &Artefact) -> Result<StudyInfo> {
    let f = JsonFile::read(&a.path)?;
    let root = f.root();
    let cfg = root.req("config")?;
    let train = cfg.req("train")?;
    let htrn = cfg.req("htrn")?;
    let config_line = format!(
        "LSTM hidden {}, HTRN {} layers × {} wide × {} heads; Adam lr {}, batch {}, at most {} epochs, patience {}.",
        cfg.req_u64("hidden")?,
        htrn.req_u64("layers")?,
        htrn.req_u64("dim")?,
        htrn.req_u64("heads")?,
        train.req_f64("learning_rate")?,
        train.req_u64("batch_size")?,
        train.req_u64("max_epochs")?,
        train.req_u64("patience")?
    );
    // Studies written before these fields were recorded trained on raw inputs without dropout.
    let inputs = match cfg.get("inputs")? {
        Some(n) => n.str()?.to_string(),
        None => "raw".to_string(),
    };
    let dropout = cfg.opt_f64("dropout")?.unwrap_or(0.0);
    // Written only when it is not GM3C's query summary.
    let candidate = cfg.opt_str("candidate_embedding")?;
    let mut departures = Vec::new();
    if inputs != "raw" {
        departures.push(format!("inputs {inputs}"));
    }
    if dropout > 0.0 {
        departures.push(format!("dropout {dropout}"));
    }
    if let Some(c) = candidate {
        departures.push(format!("Impatient Reader candidate embedding {c} (RecipeQA §4.2's baseline)"));
    }
    let config_line = if departures.is_empty() {
        config_line
    } else {
        format!("{config_line} Departures from the papers: {}.", departures.join(", "))
    };
    let seeds = cfg.opt_u64("seeds")?.unwrap_or(1);
    let config_line = if seeds > 1 {
        format!(
            "{config_line} Every model trained with {seeds} seeds: values are means over seeds, intervals over \
             procedures of each question's seed-mean."
        )
    } else {
        config_line
    };
    // `{"value", "low", "high"}` as the study writes an estimate.
    let record = |n: Option<crate::read::Node<'_>>| -> Result<Option<WithCi>> {
        match n {
            Some(a) if a.is_object() => {
                let (lo, hi) = (a.opt_f64("low")?, a.opt_f64("high")?);
                Ok(Some((a.req_f64("value")?, lo.zip(hi))))
            }
            _ => Ok(None),
        }
    };
    // A value with its interval written beside it as `key_ci: [low, high]`.
    let with_ci = |r: &crate::read::Node<'_>, key: &str| -> Result<Option<WithCi>> {
        let Some(v) = r.opt_f64(key)? else { return Ok(None) };
        let ci = r.get(&format!("{key}_ci"))?.map(|c| c.low_high()).transpose()?;
        Ok(Some((v, ci)))
    };
    let mut cells = Vec::new();
    for c in root.req("cells")?.items()? {
        let accuracy = record(c.get("accuracy")?)?;
        cells.push(StudyCell {
            task: c.req_str("task")?.to_string(),
            setting: c.req_str("setting")?.to_string(),
            model: c.req_str("model")?.to_string(),
            test_questions: c.req_u64("test_questions")?,
            accuracy,
        });
    }
    let mut summary = Vec::new();
    for r in root.req("summary")?.items()? {
        summary.push(StudySummary {
            task: r.req_str("task")?.to_string(),
            model: r.req_str("model")?.to_string(),
            recipeqa: with_ci(&r, "recipeqa")?,
            knob_mean: with_ci(&r, "knob_mean")?,
            knob_std: r.opt_f64("knob_std")?,
            difference: record(r.get("difference")?)?,
            verdict: r.opt_str("verdict")?.map(str::to_string),
            difference_sd: r.opt_f64("difference_sd")?,
        });
    }
    let mut versus_hasty = Vec::new();
    for v in root.get("versus_hasty")?.map(|n| n.items()).transpose()?.unwrap_or_default() {
        let Some(difference) = record(Some(v.req("difference")?))? else { continue };
        versus_hasty.push(VersusHasty {
            questions: v.req_u64("questions")?,
            task: v.req_str("task")?.to_string(),
            setting: v.req_str("setting")?.to_string(),
            model: v.req_str("model")?.to_string(),
            difference,
            verdict: v.opt_str("verdict")?.map(str::to_string),
        });
    }
    let mut effects = Vec::new();
    for e in root.req("knob_effects")?.items()? {
        let at = e.req("at")?.items()?;
        let v = |i: usize| at.get(i).and_then(|n| n.f64().ok());
        effects.push((
            e.req_str("task")?.to_string(),
            e.req_u64("knob")?,
            e.req_str("model")?.to_string(),
            [v(0), v(1)],
        ));
    }
    let dir = a.path.parent().map(Path::to_path_buf).unwrap_or_default();
    let rel = a.rel.strip_suffix("/study.json").unwrap_or(&a.rel).to_string();
    Ok(StudyInfo { rel, dir, config_line, cells, summary, versus_hasty, effects })
}

fn ordered<T: Clone + PartialEq>(xs: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in xs {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

pub fn section(ctx: &Ctx, studies: &[StudyInfo], models: &[ModelInfo]) -> Result<Option<Section>> {
    if studies.is_empty() && models.is_empty() {
        return Ok(None);
    }
    let mut s = Section::new("models", "Models: GM3C study");
    s.para(
        "Models of the GM3C framework (Meta-RecipeQA §3): a hierarchical BiLSTM context encoder and a BiLSTM over \
         each candidate's query sequence, scored by the Impatient Reader, BiDAF or HTRN; trained on the `train` \
         split, epoch chosen on `val`, test accuracy with 95% bootstrap intervals over procedures. The Hasty Student \
         is the no-training row. The paper finds HTRN > BiDAF ≈ Impatient Reader > Hasty Student and a drop from \
         RecipeQA mode to the knob settings for every model. RecipeQA − knobs is that drop with a 95% interval from \
         one bootstrap over procedures that resamples a procedure's questions in every setting together; the \
         verdict says whether the interval excludes 0. With several training seeds a value is the mean over seeds \
         and the sd over seeds is the spread of each seed's own drop.",
    );
    for (si, st) in studies.iter().enumerate() {
        if studies.len() > 1 {
            s.push(Block::Heading(format!("`{}`", st.rel)));
        }
        s.para(st.config_line.clone());
        let tasks = ordered(st.cells.iter().map(|c| c.task.clone()));
        let models = ordered(st.cells.iter().map(|c| c.model.clone()));
        for task in &tasks {
            s.push(Block::Heading(task.clone()));
            let mut cols = vec!["setting".to_string(), "test questions".to_string()];
            cols.extend(models.iter().cloned());
            let mut t = Table::new(&cols);
            let mut settings = ordered(st.cells.iter().filter(|c| &c.task == task).map(|c| c.setting.clone()));
            settings.sort_by_key(|x| setting_order(x));
            for setting in &settings {
                let row: Vec<&StudyCell> =
                    st.cells.iter().filter(|c| &c.task == task && &c.setting == setting).collect();
                let mut cells =
                    vec![setting_label(setting), row.iter().map(|c| c.test_questions).max().unwrap_or(0).to_string()];
                for m in &models {
                    cells.push(
                        row.iter()
                            .find(|c| &c.model == m)
                            .and_then(|c| c.accuracy)
                            .map_or("–".into(), |(v, ci)| pct_ci(v, ci)),
                    );
                }
                t.row(cells);
            }
            s.table(t);
            let versus: Vec<&VersusHasty> = st.versus_hasty.iter().filter(|v| &v.task == task).collect();
            if !versus.is_empty() {
                s.para(
                    "Each model − the Hasty Student on the same test questions (points), with a 95% interval from a \
                     paired bootstrap over procedures; within noise when it contains 0; the pairs in parentheses.",
                );
                let trained: Vec<&String> = models.iter().filter(|m| versus.iter().any(|v| &&v.model == m)).collect();
                let mut cols = vec!["setting".to_string()];
                cols.extend(trained.iter().map(|m| format!("{m} − Hasty")));
                let mut t = Table::new(&cols);
                for setting in settings.iter().filter(|x| versus.iter().any(|v| &v.setting == *x)) {
                    let mut cells = vec![setting_label(setting)];
                    for m in &trained {
                        cells.push(versus.iter().find(|v| &v.setting == setting && &&v.model == m).map_or(
                            "–".into(),
                            |v| {
                                let (d, ci) = v.difference;
                                let verdict = v.verdict.as_deref().unwrap_or("no interval");
                                format!("{} {verdict} ({})", signed_percent_interval(d, ci), v.questions)
                            },
                        ));
                    }
                    t.row(cells);
                }
                s.table(t);
            }
            let rows: Vec<&StudySummary> = st.summary.iter().filter(|r| &r.task == task).collect();
            let mut t = Table::new(&[
                "model",
                ">RecipeQA mode",
                ">knob settings: mean",
                ">std over settings",
                ">RecipeQA − knobs",
                ">sd over seeds",
                "verdict",
            ]);
            let est = |e: Option<WithCi>| e.map_or("–".into(), |(v, ci)| pct_ci(v, ci));
            for r in &rows {
                t.row(vec![
                    r.model.clone(),
                    est(r.recipeqa),
                    est(r.knob_mean),
                    r.knob_std.map_or("–".into(), pct),
                    r.difference.map_or("–".into(), |(v, ci)| signed_percent_interval(v, ci)),
                    r.difference_sd.map_or("–".into(), pct),
                    r.verdict.clone().unwrap_or_else(|| "–".into()),
                ]);
            }
            s.table(t);
            let mut figs = Vec::new();
            if rows.iter().any(|r| r.recipeqa.is_some() || r.knob_mean.is_some()) {
                let chart = BarChart::new(
                    format!("{task}: RecipeQA mode vs knob settings"),
                    "model",
                    "test accuracy",
                    rows.iter().map(|r| r.model.clone()).collect(),
                )
                .with_series("RecipeQA mode", rows.iter().map(|r| r.recipeqa.map(|x| x.0)).collect(), None)
                .with_series(
                    "knob settings (mean ± std)",
                    rows.iter().map(|r| r.knob_mean.map(|x| x.0)).collect(),
                    Some(
                        rows.iter()
                            .map(|r| {
                                r.knob_mean.map(|(m, _)| (m - r.knob_std.unwrap_or(0.0), m + r.knob_std.unwrap_or(0.0)))
                            })
                            .collect(),
                    ),
                );
                let chart = BarChart { y_range: Some((0.0, 1.0)), ..chart };
                figs.push(ctx.plot(&format!("study-{si}-{task}-fig4"), format!("{task}: Fig. 4 view"), &chart)?);
            }
            for knob in 1..=3 {
                let p = st.dir.join(format!("fig5-{task}-knob{knob}.svg"));
                if p.is_file() {
                    let svg = std::fs::read_to_string(&p).ok().filter(|x| x.len() <= 512 << 10);
                    figs.push(Figure::SvgFile {
                        caption: format!("{task}: accuracy at each value of knob {knob} (mean over the other two)"),
                        path: ctx.link(&p),
                        svg,
                    });
                }
            }
            if !figs.is_empty() {
                s.push(Block::Figures(figs));
            }
        }
    }
    if !models.is_empty() {
        s.push(Block::Heading("Trained models".into()));
        let mut t = Table::new(&[
            "model folder",
            "task",
            "model",
            "parameters",
            "train / val",
            "epochs (best)",
            "val accuracy",
        ]);
        let mut figs = Vec::new();
        for m in models {
            t.row(vec![
                format!("`{}`", m.rel),
                m.task.clone(),
                m.model.clone(),
                m.parameters.to_string(),
                format!("{} / {}", m.train, m.val),
                format!("{} ({})", m.epochs, m.best_epoch),
                m.val_accuracy.map_or("–".into(), pct),
            ]);
            let p = m.dir.join("training_curve.svg");
            if p.is_file() {
                let svg = std::fs::read_to_string(&p).ok().filter(|x| x.len() <= 512 << 10);
                figs.push(Figure::SvgFile { caption: format!("`{}`: training curve", m.rel), path: ctx.link(&p), svg });
            }
        }
        s.table(t);
        if !figs.is_empty() {
            s.push(Block::Details { summary: "Training curves".into(), blocks: vec![Block::Figures(figs)] });
        }
    }
    Ok(Some(s))
}

/// A model folder from `stepwise train`.
pub struct ModelInfo {
    pub rel: String,
    pub dir: PathBuf,
    pub task: String,
    pub model: String,
    pub parameters: u64,
    pub train: u64,
    pub val: u64,
    pub epochs: u64,
    pub best_epoch: u64,
    pub val_accuracy: Option<f64>,
}

pub fn read_model(a: &Artefact) -> Result<ModelInfo> {
    let training = JsonFile::read(&a.path.join("training.json"))?;
    let config = JsonFile::read(&a.path.join("config.json"))?;
    let t = training.root();
    let model = config.root().req("model")?;
    Ok(ModelInfo {
        rel: a.rel.clone(),
        dir: a.path.clone(),
        task: model.req("input")?.req_str("task")?.to_string(),
        model: model.req_str("scorer")?.to_string(),
        parameters: t.req_u64("parameters")?,
        train: t.req_u64("train_questions")?,
        val: t.req_u64("val_questions")?,
        epochs: t.req_u64("epochs_run")?,
        best_epoch: t.req_u64("best_epoch")?,
        val_accuracy: t.opt_f64("best_val_accuracy")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::Kind;

    /// The model line names every departure a study.json records, and nothing for a study made the papers' way.
    #[test]
    fn the_config_line_names_each_departure_the_study_records() {
        let dir = tempfile::tempdir().unwrap();
        let line = |extra: &str| {
            let path = dir.path().join("study.json");
            let json = format!(
                r#"{{"config": {{"hidden": 64, "htrn": {{"layers": 2, "dim": 128, "heads": 4}},
                   "train": {{"learning_rate": 0.0005, "batch_size": 32, "max_epochs": 20, "patience": 5}}{extra}}},
                   "cells": [], "summary": [], "knob_effects": []}}"#
            );
            std::fs::write(&path, json).unwrap();
            read(&Artefact { kind: Kind::Study, path, rel: "study/study.json".into() }).unwrap().config_line
        };
        assert!(!line("").contains("Departures"), "{}", line(""));
        assert!(line(r#", "inputs": "raw", "dropout": 0.0"#).ends_with("patience 5."));
        assert!(
            line(r#", "inputs": "centered", "dropout": 0.2"#)
                .ends_with("Departures from the papers: inputs centered, dropout 0.2.")
        );
        let item = line(r#", "inputs": "raw", "candidate_embedding": "item""#);
        assert!(
            item.ends_with(
                "Departures from the papers: Impatient Reader candidate embedding item (RecipeQA §4.2's baseline)."
            ),
            "{item}"
        );
    }
}
