//! Human judgements (`stepwise annotate export`): accuracy, agreement κ, confidence and "which modality helped"
//! per modality (the sequencing paper's human rows and its Tables 8 and 9), and time per HIT, from `tables.json`.

use stepwise_core::Result;

use super::{command_of, count};
use crate::doc::{Section, Table, pct};
use crate::read::{JsonFile, Node};
use crate::scan::Artefact;

pub struct LevelRow {
    pub level: String,
    pub count: u64,
    pub share: Option<f64>,
    pub pmr: Option<f64>,
}

pub struct ModalityRow {
    pub modality: String,
    pub judgements: u64,
    pub people: u64,
    pub pmr: Option<f64>,
    pub kappa: Option<f64>,
    pub kappa_instances: u64,
    pub mean_confidence: Option<f64>,
    pub confidence: Vec<LevelRow>,
}

pub struct AnnotationInfo {
    pub rel: String,
    pub command: Option<String>,
    pub kind: String,
    pub modalities: Vec<ModalityRow>,
    pub helped: Vec<LevelRow>,
    pub hits_completed: u64,
    pub hit_median_minutes: Option<f64>,
    pub hit_p90_minutes: Option<f64>,
}

fn levels(n: Node<'_>) -> Result<Vec<LevelRow>> {
    n.items()?
        .into_iter()
        .map(|r| {
            Ok(LevelRow {
                level: r.req_str("level")?.to_string(),
                count: r.req_u64("count")?,
                share: r.opt_f64("share")?,
                pmr: r.opt_f64("pmr")?,
            })
        })
        .collect()
}

/// `a.path` is the export's `tables.json`.
pub fn read(a: &Artefact) -> Result<AnnotationInfo> {
    let file = JsonFile::read(&a.path)?;
    let root = file.root();
    let modalities = root
        .req("modalities")?
        .items()?
        .into_iter()
        .map(|m| {
            Ok(ModalityRow {
                modality: m.req_str("modality")?.to_string(),
                judgements: m.req_u64("judgements")?,
                people: m.req_u64("people")?,
                pmr: m.opt_f64("pmr")?,
                kappa: m.opt_f64("kappa")?,
                kappa_instances: m.req_u64("kappa_instances")?,
                mean_confidence: m.opt_f64("mean_confidence")?,
                confidence: {
                    let rows = levels(m.req("confidence")?)?;
                    if rows.len() != 5 {
                        return Err(m
                            .req("confidence")?
                            .error(format!("expected the 5 confidence levels, found {}", rows.len())));
                    }
                    rows
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let hits = root.req("hits")?;
    let dir = a.path.parent().unwrap_or(&a.path);
    Ok(AnnotationInfo {
        rel: a.rel.trim_end_matches("/tables.json").to_string(),
        command: command_of(dir),
        kind: root.req_str("kind")?.to_string(),
        modalities,
        helped: levels(root.req("helped")?)?,
        hits_completed: hits.req_u64("completed")?,
        hit_median_minutes: hits.opt_f64("median_minutes")?,
        hit_p90_minutes: hits.opt_f64("p90_minutes")?,
    })
}

fn p(v: Option<f64>) -> String {
    v.map(pct).unwrap_or_else(|| "–".into())
}

fn n3(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into())
}

pub fn section(exports: &[AnnotationInfo]) -> Option<Section> {
    if exports.is_empty() {
        return None;
    }
    let mut s = Section::new("annotation", "Human judgements");
    s.para(
        "Judgements collected with `stepwise annotate` (counted study items only: qualification items and the \
         items of censored people are left out). PMR: share of orders equal to one of the instance's references. \
         κ: mean pairwise order agreement per instance (the paper's appendix B.3.1), averaged over instances with \
         at least two judgements.",
    );
    for e in exports {
        s.para(format!(
            "`{}` ({} study){}: {} completed HITs, median {} min per HIT (90th percentile {} min).",
            e.rel,
            e.kind,
            e.command.as_ref().map_or(String::new(), |c| format!(", exported by `{c}`")),
            count(e.hits_completed),
            n3(e.hit_median_minutes),
            n3(e.hit_p90_minutes)
        ));
        if e.kind != "ordering" {
            continue;
        }
        let mut t =
            Table::new(&["modality", ">judgements", ">people", ">PMR %", ">κ", ">κ instances", ">mean confidence"]);
        for m in &e.modalities {
            t.row(vec![
                m.modality.clone(),
                count(m.judgements),
                count(m.people),
                p(m.pmr),
                n3(m.kappa),
                count(m.kappa_instances),
                n3(m.mean_confidence),
            ]);
        }
        s.table(t);
        if !e.helped.is_empty() {
            s.para("Which modality helped (multimodal items; the paper's Table 8):");
            let mut t = Table::new(&["answer", ">judgements", ">share %", ">PMR %"]);
            for r in &e.helped {
                t.row(vec![r.level.clone(), count(r.count), p(r.share), p(r.pmr)]);
            }
            s.table(t);
        }
        s.para("Confidence levels (the paper's Table 9): share of judgements % (PMR % at that level).");
        let mut t = Table::new(&["modality", ">1", ">2", ">3", ">4", ">5"]);
        for m in &e.modalities {
            let mut row = vec![m.modality.clone()];
            row.extend(m.confidence.iter().map(|r| format!("{} ({})", p(r.share), p(r.pmr))));
            t.row(row);
        }
        s.table(t);
    }
    Some(s)
}
