//! Step sequencing: the instances (`stepwise generate --task sequencing`) and the baseline results table
//! (`stepwise baseline --table`), laid out like table 2 of the multimodal sequencing paper — every metric
//! against the authored order (single reference) and against the best valid order (multi-reference).

use stepwise_core::{Manifest, Result};

use super::{Ctx, count};
use crate::doc::{Block, Section, Table, num_ci, pct, pct_ci};
use crate::plots::BarChart;
use crate::read::{Estimate, JsonFile, Node};
use crate::scan::Artefact;

/// The metrics, in the paper's column order: (key, column, is a share shown in %).
pub const METRICS: [(&str, &str, bool); 6] = [
    ("position_accuracy", "Acc %", true),
    ("pmr", "PMR %", true),
    ("kendall_tau", "τ", false),
    ("distance", "Dist ↓", false),
    ("lq", "L_q", false),
    ("lr", "L_r", false),
];

pub struct InstancesInfo {
    pub rel: String,
    pub manifest: Manifest,
}

pub fn read_instances(a: &Artefact) -> Result<InstancesInfo> {
    Ok(InstancesInfo { rel: a.rel.clone(), manifest: Manifest::read(&a.path)? })
}

pub struct ResultRow {
    pub dataset: String,
    pub method: String,
    pub features: String,
    pub sequences: u64,
    pub multi_reference: u64,
    /// Training runs averaged into the values (`None` in files written before rows recorded it).
    pub seeds: Option<u64>,
    pub single: Vec<Option<Estimate>>,
    pub multi: Vec<Option<Estimate>>,
}

pub struct ResultsInfo {
    pub rel: String,
    pub rows: Vec<ResultRow>,
    pub notes: Vec<String>,
    /// `breakdown.json` beside results.json (`stepwise seq-study`: the sequencing paper's Table 4 — the rows per
    /// subset of instances with one, several or any number of references).
    pub breakdown: Vec<ResultRow>,
    /// `seeds.json` beside results.json (`stepwise seq-study --seeds`): per method, its seeds' PMRs and its
    /// paired difference from the pairwise baseline.
    pub seeds: Vec<SeedLine>,
}

/// One method of `seeds.json`.
pub struct SeedLine {
    pub method: String,
    pub features: String,
    pub sequences: u64,
    pub pmr: Estimate,
    pub per_seed: Vec<f64>,
    /// The reference's name and this method's difference from it.
    pub versus: Option<(String, Estimate)>,
}

fn read_seeds(f: &JsonFile) -> Result<Vec<SeedLine>> {
    let mut out = Vec::new();
    for row in f.root().items()? {
        let per_seed = match row.req("spread")?.req("multi")?.get("pmr")? {
            Some(v) => v.items()?.iter().map(Node::f64).collect::<Result<Vec<f64>>>()?,
            None => Vec::new(),
        };
        let versus = match row.get("versus")? {
            Some(v) => {
                let pair = v.items()?;
                match pair.as_slice() {
                    [name, d] => Some((name.str()?.to_string(), d.estimate()?)),
                    _ => None,
                }
            }
            None => None,
        };
        out.push(SeedLine {
            method: row.req_str("method")?.to_string(),
            features: row.opt_str("features")?.unwrap_or("-").to_string(),
            sequences: row.req_u64("sequences")?,
            pmr: row.req("pmr")?.estimate()?,
            per_seed,
            versus,
        });
    }
    Ok(out)
}

fn metrics(n: Option<Node<'_>>) -> Result<Vec<Option<Estimate>>> {
    METRICS.iter().map(|(k, _, _)| n.as_ref().map_or(Ok(None), |n| n.opt_estimate(k))).collect()
}

fn read_rows(r: &Node<'_>) -> Result<Vec<ResultRow>> {
    let mut rows = Vec::new();
    for row in r.req("rows")?.items()? {
        rows.push(ResultRow {
            dataset: row.opt_str("dataset")?.unwrap_or("–").to_string(),
            method: row.req_str("method")?.to_string(),
            features: row.opt_str("features")?.unwrap_or("-").to_string(),
            sequences: row.req_u64("sequences")?,
            multi_reference: row.opt_u64("multi_reference")?.unwrap_or(0),
            seeds: row.opt_u64("seeds")?,
            single: metrics(row.get("single")?)?,
            multi: metrics(row.get("multi")?)?,
        });
    }
    Ok(rows)
}

pub fn read_results(a: &Artefact) -> Result<ResultsInfo> {
    let f = JsonFile::read(&a.path)?;
    let r = f.root();
    let rows = read_rows(&r)?;
    let breakdown_file = a.path.with_file_name("breakdown.json");
    let breakdown = if breakdown_file.is_file() {
        let b = JsonFile::read(&breakdown_file)?;
        read_rows(&b.root())?
    } else {
        Vec::new()
    };
    let mut notes = Vec::new();
    if let Some(n) = r.get("notes")? {
        for x in n.items()? {
            notes.push(x.str()?.to_string());
        }
    }
    let seeds_file = a.path.with_file_name("seeds.json");
    let seeds = if seeds_file.is_file() { read_seeds(&JsonFile::read(&seeds_file)?)? } else { Vec::new() };
    let rel = a.rel.strip_suffix("/results.json").unwrap_or(&a.rel).to_string();
    Ok(ResultsInfo { rel, rows, notes, breakdown, seeds })
}

/// A metric's cell: a share always with its interval (every accuracy or PMR a reader sees carries one), the
/// other metrics with theirs only when `with_ci` (the table that shows every interval).
fn cell(e: &Option<Estimate>, share: bool, with_ci: bool) -> String {
    match e {
        None => "–".into(),
        Some(e) if share => pct_ci(e.value, e.ci),
        Some(e) => num_ci(e.value, if with_ci { e.ci } else { None }, 3),
    }
}

/// A results row's first cells: dataset, method, features, sequences and seeds.
fn lead_cells(r: &ResultRow) -> Vec<String> {
    let seeds = r.seeds.map_or("–".into(), |k| k.to_string());
    vec![r.dataset.clone(), r.method.clone(), r.features.clone(), count(r.sequences), seeds]
}

/// Headline: the best multi-reference PMR of each dataset against random, each with its interval.
pub fn headlines(results: &[ResultsInfo]) -> Vec<String> {
    let pmr = |r: &ResultRow| r.multi[1].or(r.single[1]);
    let mut out = Vec::new();
    for res in results {
        let best = res
            .rows
            .iter()
            .filter(|r| r.method != "random")
            .filter_map(|r| pmr(r).map(|e| (r, e)))
            .max_by(|a, b| a.1.value.total_cmp(&b.1.value));
        let random = res.rows.iter().find(|r| r.method == "random").and_then(pmr);
        if let Some((r, e)) = best {
            out.push(format!(
                "Sequencing (`{}`, {} test sequences): best perfect-match ratio {} % by {} ({} features{}){}.",
                res.rel,
                count(r.sequences),
                pct_ci(e.value, e.ci),
                r.method,
                r.features,
                r.seeds.filter(|&k| k > 1).map_or(String::new(), |k| format!(", mean of {k} seeds")),
                random.map_or(String::new(), |x| format!(" against {} % for random order", pct_ci(x.value, x.ci)))
            ));
        }
    }
    out
}

pub fn section(ctx: &Ctx, instances: &[InstancesInfo], results: &[ResultsInfo]) -> Result<Option<Section>> {
    if instances.is_empty() && results.is_empty() {
        return Ok(None);
    }
    let mut s = Section::new("sequencing", "Step sequencing");
    s.para(
        "Put shuffled steps back in order. Metrics as in the multimodal sequencing paper: position accuracy (Acc), \
         perfect match ratio (PMR), Kendall's τ, summed position distance (Dist, lower is better), longest common \
         subsequence (L_q) and substring (L_r) as raw lengths; all averaged over sequences. Single reference = the \
         authored order; multi-reference = per sequence the valid order that scores best, so a model is not \
         penalised for a different but correct order.",
    );
    if !instances.is_empty() {
        let mut t = Table::new(&[
            "instances",
            "modality",
            ">steps",
            ">instances",
            ">train / val / test",
            ">with several valid orders",
            ">references",
        ]);
        for i in instances {
            let c = |k: &str| i.manifest.counts.get(k).copied();
            let o = |v: Option<u64>| v.map_or("–".into(), count);
            let p =
                |k: &str| i.manifest.params.get(k).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string));
            t.row(vec![
                format!("`{}`", i.rel),
                p("modality").unwrap_or_else(|| "–".into()),
                p("steps").unwrap_or_else(|| "–".into()),
                o(c("instances")),
                format!("{} / {} / {}", o(c("instances_train")), o(c("instances_val")), o(c("instances_test"))),
                o(c("instances_multi_reference")),
                o(c("references")),
            ]);
        }
        s.table(t);
    }
    for (ri, res) in results.iter().enumerate() {
        s.push(Block::Heading(format!("Results (`{}`)", res.rel)));
        let mut cols = vec!["dataset".to_string(), "method".into(), "features".into(), ">n".into(), ">seeds".into()];
        for prefix in ["", "multi "] {
            cols.extend(METRICS.iter().map(|(_, c, _)| format!(">{prefix}{c}")));
        }
        let groups = vec![(String::new(), 5), ("single reference".to_string(), 6), ("multi-reference".to_string(), 6)];
        let mut t = Table::new(&cols).with_groups(groups.clone());
        let mut ci = Table::new(&cols).with_groups(groups);
        for r in &res.rows {
            for (table, with_ci) in [(&mut t, false), (&mut ci, true)] {
                let mut row = lead_cells(r);
                row.extend(METRICS.iter().zip(&r.single).map(|((_, _, share), e)| cell(e, *share, with_ci)));
                let multi: Vec<String> = if r.multi_reference == 0 {
                    vec!["–".into(); METRICS.len()]
                } else {
                    METRICS.iter().zip(&r.multi).map(|((_, _, share), e)| cell(e, *share, with_ci)).collect()
                };
                row.extend(multi);
                table.row(row);
            }
        }
        s.table(t);
        if !res.notes.is_empty() {
            s.push(Block::List(res.notes.clone()));
        }
        s.push(Block::Details {
            summary: "The same table with 95% bootstrap intervals".into(),
            blocks: vec![Block::Table(ci)],
        });
        if !res.seeds.is_empty() {
            let mut t = Table::new(&[
                "method",
                "features",
                ">n",
                ">seeds",
                ">multi PMR % [95% CI]",
                ">sd over seeds",
                "per seed",
                "Δ PMR vs reference [95% CI]",
            ]);
            for l in &res.seeds {
                let sd = if l.per_seed.len() > 1 {
                    let m = l.per_seed.iter().sum::<f64>() / l.per_seed.len() as f64;
                    let var = l.per_seed.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (l.per_seed.len() - 1) as f64;
                    pct(var.sqrt())
                } else {
                    "–".into()
                };
                let versus = l.versus.as_ref().map_or("–".into(), |(name, d)| {
                    let verdict = match d.ci {
                        Some((lo, hi)) if lo > 0.0 || hi < 0.0 => "outside noise",
                        Some(_) => "within noise",
                        None => "no interval",
                    };
                    format!("{} vs {name}: {verdict}", pct_ci(d.value, d.ci))
                });
                t.row(vec![
                    l.method.clone(),
                    l.features.clone(),
                    count(l.sequences),
                    l.per_seed.len().to_string(),
                    pct_ci(l.pmr.value, l.pmr.ci),
                    sd,
                    l.per_seed.iter().map(|v| pct(*v)).collect::<Vec<_>>().join(", "),
                    versus,
                ]);
            }
            s.para(
                "Seeds: each method's multi-reference PMR as the mean over its training seeds, with a 95% bootstrap \
                 interval over sequences of each sequence's seed-mean (what the test set leaves open), the standard \
                 deviation of the seeds' own PMRs (what training leaves open), and its paired difference from the \
                 pairwise baseline on the same sequences: outside noise when that interval excludes 0.",
            );
            s.table(t);
        }
        if !res.breakdown.is_empty() {
            // Table 4 of the sequencing paper: the dataset column names the subset of instances.
            let mut b = Table::new(&cols);
            for r in &res.breakdown {
                let mut row = lead_cells(r);
                row.extend(METRICS.iter().zip(&r.single).map(|((_, _, share), e)| cell(e, *share, false)));
                row.extend(METRICS.iter().zip(&r.multi).map(|((_, _, share), e)| cell(e, *share, false)));
                b.row(row);
            }
            s.push(Block::Details {
                summary: "By subset of instances: one reference (Single), several (Multi.), all".into(),
                blocks: vec![Block::Table(b)],
            });
        }
        if !res.rows.is_empty() {
            let cats: Vec<String> = res
                .rows
                .iter()
                .map(|r| if r.features == "-" { r.method.clone() } else { format!("{}\n({})", r.method, r.features) })
                .collect();
            let series = |single: bool, m: usize| -> super::SeriesData {
                res.rows
                    .iter()
                    .map(|r| {
                        let e = if single {
                            r.single[m]
                        } else if r.multi_reference > 0 {
                            r.multi[m]
                        } else {
                            None
                        };
                        e.map_or((None, None), |e| (Some(e.value), e.ci))
                    })
                    .unzip()
            };
            let mut chart =
                BarChart::new("Sequencing baselines", "method (features)", "share of sequences / positions", cats);
            for (label, single, m) in [
                ("position accuracy, single", true, 0),
                ("position accuracy, multi", false, 0),
                ("PMR, single", true, 1),
                ("PMR, multi", false, 1),
            ] {
                let (v, c) = series(single, m);
                if v.iter().any(Option::is_some) {
                    chart = chart.with_series(label, v, Some(c));
                }
            }
            chart.y_range = Some((0.0, 1.0));
            chart.size = (1000, 480);
            let fig = ctx.plot(&format!("sequencing-{ri}"), "Position accuracy and perfect match ratio per baseline, against the authored order (single) and the best valid order (multi), with 95% intervals.", &chart)?;
            s.push(Block::Figures(vec![fig]));
        }
    }
    Ok(Some(s))
}
