//! `stepwise stats --format json` outputs: counts and the distributions (steps per procedure, tokens per
//! step, ...), overall and per group. Read generically: every number is a count, every `{n, mean, std, min,
//! max}` object a distribution, so new statistics appear without changes here.

use stepwise_core::Result;

use crate::doc::{Section, Table};
use crate::read::{JsonFile, Node};
use crate::scan::Artefact;

pub struct StatsInfo {
    pub rel: String,
    pub counts: Vec<(String, f64)>,
    /// name → (n, mean, std, min, max)
    pub distributions: Vec<(String, [f64; 5])>,
    pub group_by: Option<String>,
    pub groups: Vec<GroupRow>,
}

/// One group of a grouped statistics file (`--by split|category`).
pub struct GroupRow {
    pub name: String,
    pub procedures: Option<f64>,
    pub steps: Option<f64>,
    pub steps_per_procedure: Option<f64>,
    pub tokens_per_step: Option<f64>,
}

/// Counts and distributions (n, mean, std, min, max) of one statistics object.
type Split = (Vec<(String, f64)>, Vec<(String, [f64; 5])>);

fn split(node: &Node<'_>) -> Result<Split> {
    let (mut counts, mut dists) = (Vec::new(), Vec::new());
    for (k, v) in node.entries()? {
        if v.v.is_number() {
            counts.push((k.to_string(), v.f64()?));
        } else if v.is_object() && v.has("mean") {
            let f = |key: &str| v.req_f64(key);
            dists.push((k.to_string(), [f("n")?, f("mean")?, f("std")?, f("min")?, f("max")?]));
        }
    }
    Ok((counts, dists))
}

pub fn read(a: &Artefact) -> Result<StatsInfo> {
    let f = JsonFile::read(&a.path)?;
    let root = f.root();
    let (counts, distributions) = split(&root.req("all")?)?;
    let mut groups = Vec::new();
    if let Some(g) = root.get("groups")? {
        for (name, v) in g.entries()? {
            let mean = |key: &str| -> Result<Option<f64>> { v.get(key)?.map(|d| d.req_f64("mean")).transpose() };
            groups.push(GroupRow {
                name: name.to_string(),
                procedures: v.opt_f64("procedures")?,
                steps: v.opt_f64("steps")?,
                steps_per_procedure: mean("steps_per_procedure")?,
                tokens_per_step: mean("tokens_per_step")?,
            });
        }
    }
    Ok(StatsInfo {
        rel: a.rel.clone(),
        counts,
        distributions,
        group_by: root.opt_str("group_by")?.map(str::to_string),
        groups,
    })
}

fn label(key: &str) -> String {
    key.replace('_', " ")
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { super::count(v as u64) } else { format!("{v:.3}") }
}

pub fn section(stats: &[StatsInfo]) -> Option<Section> {
    if stats.is_empty() {
        return None;
    }
    let mut s = Section::new("statistics", "Corpus statistics");
    for st in stats {
        if stats.len() > 1 {
            s.push(crate::doc::Block::Heading(format!("`{}`", st.rel)));
        }
        let mut t = Table::new(&["statistic", ">n", ">mean", ">std", ">min", ">max"]);
        for (k, [n, mean, std, min, max]) in &st.distributions {
            t.row(vec![label(k), num(*n), format!("{mean:.2}"), format!("{std:.2}"), num(*min), num(*max)]);
        }
        s.para(format!("Distributions (from `{}`; std is the population standard deviation):", st.rel));
        s.table(t);
        let mut c = Table::new(&["count", ">value"]);
        for (k, v) in &st.counts {
            c.row(vec![label(k), num(*v)]);
        }
        s.table(c);
        if !st.groups.is_empty() {
            let by = st.group_by.clone().unwrap_or_else(|| "group".into());
            let mut g = Table::new(&[by.as_str(), ">procedures", ">steps", ">steps / procedure", ">tokens / step"]);
            let o = |v: &Option<f64>, d: usize| {
                v.map_or("–".to_string(), |x| if d == 0 { num(x) } else { format!("{x:.d$}") })
            };
            for r in &st.groups {
                g.row(vec![
                    r.name.clone(),
                    o(&r.procedures, 0),
                    o(&r.steps, 0),
                    o(&r.steps_per_procedure, 1),
                    o(&r.tokens_per_step, 1),
                ]);
            }
            s.table(g);
        }
    }
    Some(s)
}
