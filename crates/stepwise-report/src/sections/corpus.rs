//! Corpus folders: what the manifest says, the step-count distribution, categories, and the ground truth of
//! order annotations (procedures with several valid orders — the built-in world's DAGs).

use std::collections::BTreeMap;

use stepwise_core::corpus::{PROCEDURES_JSONL, read_procedures_jsonl};
use stepwise_core::{Manifest, Result};

use super::{Ctx, count};
use crate::doc::{Block, Figure, Section, Table};
use crate::plots::BarChart;
use crate::scan::Artefact;

/// What the report shows of one corpus.
pub struct CorpusInfo {
    pub rel: String,
    pub manifest: Manifest,
    pub procedures: u64,
    pub steps: u64,
    pub step_images: u64,
    pub steps_per_procedure: BTreeMap<usize, u64>,
    pub categories: BTreeMap<String, u64>,
    /// Procedures with order annotations, of which with more than one valid order, and the mean log10 of the
    /// number of valid orders.
    pub orders: Option<(u64, u64, f64)>,
}

pub fn read(a: &Artefact) -> Result<CorpusInfo> {
    let manifest = Manifest::read(&a.path)?;
    let procs = read_procedures_jsonl(&a.path.join(PROCEDURES_JSONL))?;
    let mut info = CorpusInfo {
        rel: a.rel.clone(),
        manifest,
        procedures: procs.len() as u64,
        steps: 0,
        step_images: 0,
        steps_per_procedure: BTreeMap::new(),
        categories: BTreeMap::new(),
        orders: None,
    };
    let (mut annotated, mut multi, mut log_sum) = (0u64, 0u64, 0f64);
    for p in &procs {
        info.steps += p.steps.len() as u64;
        info.step_images += p.steps.iter().map(|s| s.images.len() as u64).sum::<u64>();
        *info.steps_per_procedure.entry(p.steps.len()).or_default() += 1;
        *info.categories.entry(p.category.clone().unwrap_or_else(|| "(none)".into())).or_default() += 1;
        if let Some(v) = p.annotations.as_ref().and_then(|a| a.valid_orders.as_ref()) {
            annotated += 1;
            multi += u64::from(v.count > 1);
            log_sum += (v.count.max(1) as f64).log10();
        }
    }
    if annotated > 0 {
        info.orders = Some((annotated, multi, log_sum / annotated as f64));
    }
    Ok(info)
}

pub fn section(ctx: &Ctx, corpora: &[CorpusInfo]) -> Result<Option<Section>> {
    if corpora.is_empty() {
        return Ok(None);
    }
    let mut s = Section::new("corpus", "Corpus");
    let mut t =
        Table::new(&["corpus", ">procedures", ">steps", ">steps / procedure", ">step images", "categories", "made by"]);
    for c in corpora {
        let cats: Vec<String> = c.categories.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let cats = if cats.len() > 8 { format!("{} categories", cats.len()) } else { cats.join(", ") };
        t.row(vec![
            format!("`{}`", c.rel),
            count(c.procedures),
            count(c.steps),
            format!("{:.1}", c.steps as f64 / c.procedures.max(1) as f64),
            count(c.step_images),
            cats,
            command(&c.manifest),
        ]);
    }
    s.table(t);
    let mut ot =
        Table::new(&["corpus", ">annotated procedures", ">with several valid orders", ">mean log10(valid orders)"]);
    for c in corpora {
        if let Some((n, m, l)) = c.orders {
            ot.row(vec![
                format!("`{}`", c.rel),
                count(n),
                format!("{} ({:.0}%)", count(m), 100.0 * m as f64 / n as f64),
                format!("{l:.2}"),
            ]);
        }
    }
    if !ot.is_empty() {
        s.para(
            "Order ground truth: the number of step orders consistent with each procedure's dependency graph. A \
             procedure with several valid orders is one where the authored order is not the only correct answer — \
             the reason sequencing is also scored against multiple references below.",
        );
        s.table(ot);
    }
    // One plot per distinct distribution (a cleaned copy of a corpus usually has the same one).
    let mut shown: Vec<&BTreeMap<usize, u64>> = Vec::new();
    let mut figs = Vec::new();
    for (i, c) in corpora.iter().enumerate() {
        if c.steps_per_procedure.is_empty() || shown.contains(&&c.steps_per_procedure) {
            continue;
        }
        shown.push(&c.steps_per_procedure);
        figs.push(steps_plot(ctx, i, c)?);
    }
    if !figs.is_empty() {
        s.push(Block::Figures(figs));
    }
    Ok(Some(s))
}

fn steps_plot(ctx: &Ctx, i: usize, c: &CorpusInfo) -> Result<Figure> {
    let lo = *c.steps_per_procedure.keys().next().expect("checked: not empty");
    let hi = *c.steps_per_procedure.keys().last().expect("checked: not empty");
    let cats: Vec<String> = (lo..=hi).map(|k| k.to_string()).collect();
    let values = (lo..=hi).map(|k| Some(c.steps_per_procedure.get(&k).copied().unwrap_or(0) as f64)).collect();
    let chart = BarChart::new(format!("Steps per procedure — {}", c.rel), "steps", "procedures", cats).with_series(
        "procedures",
        values,
        None,
    );
    ctx.plot(
        &format!("steps-per-procedure-{i}"),
        format!("Steps per procedure in `{}` ({} procedures).", c.rel, count(c.procedures)),
        &chart,
    )
}

/// The manifest's command line, in code quotes.
pub fn command(m: &Manifest) -> String {
    if m.command.is_empty() { "–".into() } else { format!("`{}`", m.command.join(" ")) }
}
