//! Suites (`stepwise sweep`): questions per knob setting and task, splits, and questions skipped by reason —
//! the Meta-RecipeQA benchmark's counts table.

use std::collections::{BTreeMap, BTreeSet};

use stepwise_core::Result;

use super::{Ctx, count, setting_label, setting_order};
use crate::doc::{Block, Section, Table};
use crate::plots::BarChart;
use crate::read::JsonFile;
use crate::scan::Artefact;

/// One row of `counts.json`.
pub struct CountRow {
    pub setting: String,
    pub task: String,
    pub questions: u64,
    pub splits: BTreeMap<String, u64>,
    pub procedures_used: Option<u64>,
    pub skipped: BTreeMap<String, u64>,
}

pub struct SuiteInfo {
    pub rel: String,
    pub rows: Vec<CountRow>,
}

pub fn read(a: &Artefact) -> Result<SuiteInfo> {
    let f = JsonFile::read(&a.path)?;
    let mut rows = Vec::new();
    for r in f.root().items()? {
        let mut splits = BTreeMap::new();
        if let Some(s) = r.get("questions_by_split")? {
            for (k, v) in s.entries()? {
                splits.insert(k.to_string(), v.u64()?);
            }
        }
        let mut skipped = BTreeMap::new();
        if let Some(s) = r.get("questions_skipped")? {
            for (k, v) in s.entries()? {
                skipped.insert(k.to_string(), v.u64()?);
            }
        }
        rows.push(CountRow {
            setting: r.req_str("setting")?.to_string(),
            task: r.req_str("task")?.to_string(),
            questions: r.req_u64("questions")?,
            splits,
            procedures_used: r.opt_u64("procedures_used")?,
            skipped,
        });
    }
    rows.sort_by(|a, b| (setting_order(&a.setting), &a.task).cmp(&(setting_order(&b.setting), &b.task)));
    let rel = a.rel.strip_suffix("/counts.json").unwrap_or(&a.rel).to_string();
    Ok(SuiteInfo { rel, rows })
}

pub fn section(ctx: &Ctx, suites: &[SuiteInfo]) -> Result<Option<Section>> {
    if suites.iter().all(|s| s.rows.is_empty()) {
        return Ok(None);
    }
    let mut s = Section::new("suite", "Knob sweep: questions per setting");
    s.para(
        "Each suite holds every task under RecipeQA's original recipe and under the 8 Meta-RecipeQA control-knob \
         settings (k1,k2,k3): k1 question overlap (1 = fewer questions per procedure, answered steps removed), k2 \
         hard negatives (0 = from the ball closest to the answer, 1 = from the shell around it), k3 negatives near \
         the question (1 = one negative at least as close to the question as the answer). A question whose \
         constraint cannot be met is skipped and counted, never relaxed.",
    );
    for (si, suite) in suites.iter().enumerate() {
        if suites.len() > 1 {
            s.push(Block::Heading(format!("`{}`", suite.rel)));
        }
        let tasks: BTreeSet<&str> = suite.rows.iter().map(|r| r.task.as_str()).collect();
        let mut settings: Vec<&str> =
            suite.rows.iter().map(|r| r.setting.as_str()).collect::<BTreeSet<_>>().into_iter().collect();
        settings.sort_by_key(|x| setting_order(x));
        let get = |set: &str, task: &str| suite.rows.iter().find(|r| r.setting == set && r.task == task);
        // The pivot: settings down, tasks across.
        let mut cols = vec!["setting".to_string()];
        cols.extend(tasks.iter().map(|t| format!(">{t}")));
        let mut pivot = Table::new(&cols);
        for set in &settings {
            let mut row = vec![setting_label(set)];
            row.extend(tasks.iter().map(|t| get(set, t).map_or("–".into(), |r| count(r.questions))));
            pivot.row(row);
        }
        s.para(format!("Questions per setting and task (`{}`):", suite.rel));
        s.table(pivot);
        let mut chart = BarChart::new(
            "Questions per knob setting",
            "setting",
            "questions",
            settings.iter().map(|x| setting_label(x)).collect(),
        );
        for t in &tasks {
            chart = chart.with_series(
                *t,
                settings.iter().map(|set| get(set, t).map(|r| r.questions as f64)).collect(),
                None,
            );
        }
        let fig = ctx.plot(&format!("suite-questions-{si}"), "Questions per setting and task. Settings with k3 = 1 can lose most visual questions when few negatives are as close to the question as the answer.", &chart)?;
        s.push(Block::Figures(vec![fig]));
        // The detailed table.
        let reasons: BTreeSet<&str> = suite.rows.iter().flat_map(|r| r.skipped.keys().map(String::as_str)).collect();
        let mut cols: Vec<String> =
            ["setting", "task", ">questions", ">train", ">val", ">test", ">procedures used"].map(String::from).to_vec();
        cols.extend(reasons.iter().map(|r| format!(">skipped: {}", r.replace('_', " "))));
        let mut t = Table::new(&cols);
        for r in &suite.rows {
            let split = |k: &str| r.splits.get(k).map_or("–".into(), |n| count(*n));
            let mut row = vec![
                setting_label(&r.setting),
                r.task.clone(),
                count(r.questions),
                split("train"),
                split("val"),
                split("test"),
                r.procedures_used.map_or("–".into(), count),
            ];
            row.extend(reasons.iter().map(|x| r.skipped.get(*x).map_or("0".into(), |n| count(*n))));
            t.row(row);
        }
        s.push(Block::Details {
            summary: "Splits, procedures used and skipped questions by reason".into(),
            blocks: vec![Block::Table(t)],
        });
    }
    Ok(Some(s))
}
