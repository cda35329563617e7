//! Bias audits (`stepwise audit`): how much of each task set is answerable without reading — the Hasty
//! Student and the distance probe against chance, per knob setting when the audited task sets come from a
//! suite — with the distance histograms of correct and incorrect choices.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use stepwise_core::{Manifest, Result};

use super::{Ctx, count, is_setting, setting_label, setting_order};
use crate::doc::{Block, Figure, Section, Table, pct, pct_ci};
use crate::plots::BarChart;
use crate::read::{Estimate, JsonFile};
use crate::scan::Artefact;

/// One task of one audit.
pub struct AuditRow {
    /// The knob setting of the audited task set (`recipeqa`, `knobs-0-1-1`), from the task set's manifest.
    pub setting: Option<String>,
    /// What was audited: the task-set folder relative to the run folder, or the file as given (an external
    /// RecipeQA file).
    pub audited: String,
    /// The audited task set belongs to a suite (its rows are compared across the suite's settings).
    pub in_suite: bool,
    /// The audit's path relative to the run folder.
    pub rel: String,
    pub task: String,
    pub questions: u64,
    pub with_vectors: Option<u64>,
    pub chance: f64,
    pub hasty: Option<Estimate>,
    pub probe: Option<Estimate>,
    pub extreme: Option<f64>,
    pub correct_mean: Option<f64>,
    pub incorrect_mean: Option<f64>,
    pub overlap_same_task: Option<Estimate>,
    /// The shortcut panel's verdict (`None`: not judged) and its worst entry (name and accuracy).
    pub shortcut_free: Option<bool>,
    pub worst: Option<(String, Estimate)>,
    /// The knob mode of the audited task set (`paper`, `calibrated`) and, for calibrated knobs, how they depart
    /// from the papers (from the task set's manifest).
    pub knobs_mode: Option<String>,
    pub departures: Vec<String>,
    /// The distance histogram picture of this task, if the audit folder has it.
    pub histogram: Option<PathBuf>,
}

impl AuditRow {
    /// The row's name in tables: the setting within a suite; else the audited task set (with its setting) or file.
    pub fn label(&self) -> String {
        match (&self.setting, self.in_suite) {
            (Some(s), true) => setting_label(s),
            (Some(s), false) => format!("`{}` ({})", self.audited, setting_label(s)),
            (None, _) => format!("`{}`", self.audited),
        }
    }
}

/// What an audit audited.
struct Audited {
    setting: Option<String>,
    name: String,
    in_suite: bool,
    knobs_mode: Option<String>,
    departures: Vec<String>,
}

/// What an audit audited. The audit manifest's first input is the task set's `questions.json` (or an external
/// file); a task set's own manifest gives its setting and knob mode. An input that is not a stepwise task set (a
/// RecipeQA file) has no setting, whatever its path contains.
fn audited_of(audit_dir: &Path, run_dir: &Path, rel: &str) -> Audited {
    let plain = |setting: Option<String>, name: String| Audited {
        setting,
        name,
        in_suite: false,
        knobs_mode: None,
        departures: Vec::new(),
    };
    let Some(input) = Manifest::read(audit_dir).ok().and_then(|m| m.inputs.first().map(|i| i.path.clone())) else {
        // No manifest: only the audit's own path can say anything.
        let setting = rel.split('/').find(|c| is_setting(c)).map(str::to_string);
        return plain(setting, rel.to_string());
    };
    let given = Path::new(&input);
    let candidates = [given.to_path_buf(), run_dir.join(given)];
    for file in candidates {
        let Some(set_dir) = file.parent() else { continue };
        let Ok(m) = Manifest::read(set_dir) else { continue };
        if m.kind != "taskset" {
            continue;
        }
        let setting = m.params.get("setting").and_then(|v| v.as_str()).map(str::to_string);
        let knobs_mode = m.params.get("knobs_mode").and_then(|v| v.as_str()).map(str::to_string);
        let departures = m
            .params
            .get("knobs_departures")
            .and_then(|v| v.as_array())
            .map_or_else(Vec::new, |a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect());
        let abs = super::absolute(set_dir);
        let name = abs
            .strip_prefix(run_dir)
            .map_or_else(|_| set_dir.display().to_string(), |r| r.to_string_lossy().replace('\\', "/"));
        // Suites lay task sets out as <suite>/<setting>/<task>.
        let in_suite = abs
            .parent()
            .and_then(Path::parent)
            .and_then(|suite| Manifest::read(suite).ok())
            .is_some_and(|m| m.kind == "suite");
        return Audited { setting, name, in_suite, knobs_mode, departures };
    }
    plain(None, input)
}

pub fn read(a: &Artefact) -> Result<Vec<AuditRow>> {
    let dir = a.path.parent().map(Path::to_path_buf).unwrap_or_default();
    let rel = a.rel.strip_suffix("/audit.json").unwrap_or(&a.rel).to_string();
    let run_dir = strip_rel(&a.path, &a.rel);
    let Audited { setting, name: audited, in_suite, knobs_mode, departures } = audited_of(&dir, &run_dir, &rel);
    let f = JsonFile::read(&a.path)?;
    let mut rows = Vec::new();
    for t in f.root().req("tasks")?.items()? {
        let task = t.req_str("task")?.to_string();
        let probe = match t.get("distance_probe")? {
            Some(p) => Some(p.req("accuracy")?.estimate()?),
            None => None,
        };
        let d = t.get("distances")?;
        let df = |k: &str| -> Result<Option<f64>> { d.as_ref().map_or(Ok(None), |d| d.opt_f64(k)) };
        let overlap = match t.get("overlap")? {
            Some(o) => o.opt_estimate("same_task")?,
            None => None,
        };
        let (shortcut_free, worst) = match t.get("shortcuts")? {
            Some(p) => {
                let worst = match p.get("worst")? {
                    Some(w) => Some((w.req_str("name")?.to_string(), w.req("accuracy")?.estimate()?)),
                    None => None,
                };
                (p.opt_bool("shortcut_free")?, worst)
            }
            None => (None, None),
        };
        let svg = dir.join(format!("distances-{task}.svg"));
        rows.push(AuditRow {
            setting: setting.clone(),
            audited: audited.clone(),
            in_suite,
            rel: rel.clone(),
            questions: t.req_u64("questions")?,
            with_vectors: t.opt_u64("with_vectors")?,
            chance: t.req_f64("chance")?,
            hasty: t.opt_estimate("hasty_student")?,
            probe,
            extreme: df("answer_is_extreme")?,
            correct_mean: df("correct_mean")?,
            incorrect_mean: df("incorrect_mean")?,
            overlap_same_task: overlap,
            shortcut_free,
            worst,
            knobs_mode: knobs_mode.clone(),
            departures: departures.clone(),
            histogram: svg.is_file().then_some(svg),
            task,
        });
    }
    Ok(rows)
}

/// The run folder of an artefact: its path without its run-relative part.
fn strip_rel(path: &Path, rel: &str) -> PathBuf {
    let depth = rel.split('/').filter(|c| !c.is_empty() && *c != ".").count();
    let mut p = path.to_path_buf();
    for _ in 0..depth {
        p.pop();
    }
    p
}

fn sort_key(r: &AuditRow) -> ((u8, String), String) {
    (setting_order(r.setting.as_deref().unwrap_or("~")), r.rel.clone())
}

/// Headline numbers: per task, the probe in RecipeQA mode and its lowest value over knob settings.
pub fn headlines(rows: &[AuditRow]) -> Vec<String> {
    let tasks: BTreeSet<&str> = rows.iter().map(|r| r.task.as_str()).collect();
    let mut out = Vec::new();
    for task in tasks {
        let of =
            |pred: &dyn Fn(&AuditRow) -> bool| rows.iter().filter(|r| r.task == task && pred(r)).collect::<Vec<_>>();
        let rq = of(&|r| r.in_suite && r.setting.as_deref() == Some("recipeqa"));
        let knobs = of(&|r| r.in_suite && r.setting.as_deref().is_some_and(|s| s.starts_with("knobs-")));
        let (Some(rq), Some(low)) = (
            rq.first().and_then(|r| r.probe.map(|p| (r, p))),
            knobs.iter().filter_map(|r| r.probe.map(|p| (*r, p))).min_by(|a, b| a.1.value.total_cmp(&b.1.value)),
        ) else {
            continue;
        };
        out.push(format!(
            "{task}: distance probe {}% in RecipeQA mode ({} questions); lowest over the knob settings {}% with knobs {} ({} questions); chance {}%.",
            pct_ci(rq.1.value, rq.1.ci),
            count(rq.0.questions),
            pct_ci(low.1.value, low.1.ci),
            low.0.label(),
            count(low.0.questions),
            pct(rq.0.chance)
        ));
        let judged: Vec<&&AuditRow> = knobs.iter().filter(|r| r.shortcut_free.is_some()).collect();
        if !judged.is_empty() {
            let free = judged.iter().filter(|r| r.shortcut_free == Some(true)).count();
            let worst = judged
                .iter()
                .filter_map(|r| r.worst.as_ref().map(|w| (r, w)))
                .max_by(|a, b| (a.1.1.value - a.0.chance).abs().total_cmp(&(b.1.1.value - b.0.chance).abs()));
            out.push(format!(
                "{task}: shortcut-free in {free} of {} knob settings{}.",
                judged.len(),
                worst.map_or(String::new(), |(r, (name, e))| format!(
                    "; the worst shortcut over them: {name} {}% with knobs {} ({} questions)",
                    pct_ci(e.value, e.ci),
                    r.label(),
                    count(r.questions)
                ))
            ));
        }
    }
    out
}

pub fn section(ctx: &Ctx, rows: &[AuditRow]) -> Result<Option<Section>> {
    if rows.is_empty() {
        return Ok(None);
    }
    let mut s = Section::new("audit", "Bias audit: answering without reading");
    s.para(
        "Hasty Student (RecipeQA §4.2): picks an answer from the choices alone — cloze: the choice most similar to \
         the question items; coherence: the item least similar to the others; ordering: the order with the closest \
         consecutive images. Distance probe (Meta-RecipeQA fig. 2): a cross-validated logistic regression on each \
         choice's distance to the question. Accuracies in % with 95% bootstrap intervals; chance is 1 / choices. \
         The question the control knobs answer: does the probe fall to chance once the knobs remove the shortcuts? \
         Settings with only a handful of questions have wide intervals — read them with their counts. \
         Shortcut-free: every entry of the audit's shortcut panel (each distance-rank pick — nearest, 2nd, …, \
         farthest —, a probe on distances and ranks, and a choice-only probe that never sees the question, the answer \
         rank most common at the question's spread and level of distances, all three fitted on half of the \
         procedures and scored on the other half, and for ordering \"not one of a reversed \
         pair\") has an interval containing chance, at 95% \
         Bonferroni-corrected over the panel's entries (so a set without any shortcut passes at least 95% of the \
         time), and none lies more than 5 points above it; the worst shortcut is the entry farthest from chance \
         (each task set's audit.md lists the whole panel).",
    );
    let mut modes: Vec<&str> = rows.iter().filter_map(|r| r.knobs_mode.as_deref()).collect();
    modes.sort();
    modes.dedup();
    if !modes.is_empty() {
        s.para(format!("Knob settings made with --knobs-mode {}.", modes.join(" and ")));
    }
    if let Some(r) = rows.iter().find(|r| !r.departures.is_empty()) {
        s.para("Calibrated knobs depart from the papers' rules (Meta-RecipeQA §3.2, appendix B):");
        for d in &r.departures {
            s.para(format!("- {d}"));
        }
    }
    let tasks: BTreeSet<&str> = rows.iter().map(|r| r.task.as_str()).collect();
    pivots(&mut s, rows, &tasks);
    for (ti, task) in tasks.iter().enumerate() {
        let mut rs: Vec<&AuditRow> = rows.iter().filter(|r| r.task == *task).collect();
        rs.sort_by_key(|r| sort_key(r));
        s.push(Block::Heading(task.to_string()));
        let mut t = Table::new(&[
            "setting",
            ">questions",
            ">chance",
            "Hasty Student",
            "distance probe",
            ">answer is the extreme choice",
            ">mean distance correct / incorrect",
            "answer step shown in another question",
            "shortcut-free",
            "worst shortcut",
        ]);
        for r in &rs {
            let est = |e: &Option<Estimate>| e.map_or("–".into(), |e| pct_ci(e.value, e.ci));
            let questions = match r.with_vectors {
                Some(w) if w != r.questions => {
                    format!("{} ({} with vectors)", count(r.questions), count(w))
                }
                _ => count(r.questions),
            };
            t.row(vec![
                r.label(),
                questions,
                pct(r.chance),
                est(&r.hasty),
                est(&r.probe),
                r.extreme.map_or("–".into(), pct),
                match (r.correct_mean, r.incorrect_mean) {
                    (Some(c), Some(i)) => format!("{c:.3} / {i:.3}"),
                    _ => "–".into(),
                },
                est(&r.overlap_same_task),
                match r.shortcut_free {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "–".into(),
                },
                r.worst.as_ref().map_or("–".into(), |(name, e)| format!("{name} {}", pct_ci(e.value, e.ci))),
            ]);
        }
        s.table(t);
        let plotted: Vec<&&AuditRow> = rs.iter().filter(|r| r.hasty.is_some() || r.probe.is_some()).collect();
        if !plotted.is_empty() {
            let cats =
                plotted.iter().map(|r| format!("{}\nn = {}", r.label().replace('`', ""), count(r.questions))).collect();
            let series = |f: &dyn Fn(&AuditRow) -> Option<Estimate>| -> super::SeriesData {
                plotted.iter().map(|r| f(r).map_or((None, None), |e| (Some(e.value), e.ci))).unzip()
            };
            let (hv, hc) = series(&|r| r.hasty);
            let (pv, pc) = series(&|r| r.probe);
            let mut chart = BarChart::new(format!("{task}: accuracy without reading"), "setting", "accuracy", cats)
                .with_series("Hasty Student", hv, Some(hc))
                .with_series("distance probe", pv, Some(pc));
            chart.reference = Some((plotted[0].chance, "chance".into()));
            chart.y_range = Some((0.0, 1.0));
            let fig = ctx.plot(
                &format!("audit-{ti}-{task}"),
                format!("{task}: Hasty Student and distance-probe accuracy per setting, with 95% intervals; the dashed line is chance."),
                &chart,
            )?;
            s.push(Block::Figures(vec![fig]));
        }
        let hist: Vec<Figure> = rs
            .iter()
            .filter_map(|r| {
                r.histogram.as_ref().map(|p| {
                    let svg = std::fs::metadata(p)
                        .ok()
                        .filter(|m| m.len() <= 512 << 10)
                        .and_then(|_| std::fs::read_to_string(p).ok());
                    Figure::SvgFile {
                        caption: format!("{task}, {}: distances of correct and incorrect choices", r.label()),
                        path: ctx.link(p),
                        svg,
                    }
                })
            })
            .collect();
        if !hist.is_empty() {
            s.push(Block::Details {
                summary: format!("{task}: distance histograms (correct vs incorrect choices)"),
                blocks: vec![Block::Figures(hist)],
            });
        }
    }
    Ok(Some(s))
}

/// Picks one estimate of an audit row.
type Pick = fn(&AuditRow) -> Option<Estimate>;

/// Settings down, tasks across: the distance probe and the Hasty Student at a glance.
fn pivots(s: &mut Section, rows: &[AuditRow], tasks: &BTreeSet<&str>) {
    let mut labels: Vec<((u8, String), String)> = Vec::new();
    for r in rows {
        let key = (setting_order(r.setting.as_deref().unwrap_or("~")), r.label());
        if !labels.contains(&key) {
            labels.push(key);
        }
    }
    labels.sort();
    if labels.len() < 2 {
        return;
    }
    let find = |label: &str, task: &str| rows.iter().find(|r| r.label() == label && r.task == task);
    for (what, pick) in
        [("Distance probe", (|r: &AuditRow| r.probe) as Pick), ("Hasty Student", |r: &AuditRow| r.hasty)]
    {
        let mut cols = vec!["setting".to_string()];
        cols.extend(tasks.iter().map(|t| t.to_string()));
        let mut t = Table::new(&cols);
        for (_, label) in &labels {
            let mut row = vec![label.clone()];
            row.extend(tasks.iter().map(|task| match find(label, task) {
                Some(r) => {
                    pick(r).map_or("–".into(), |e| format!("{} (n = {})", pct_ci(e.value, e.ci), count(r.questions)))
                }
                None => "–".into(),
            }));
            t.row(row);
        }
        s.para(format!("{what} accuracy (%) per setting and task, 95% intervals and question counts:"));
        s.table(t);
    }
}
