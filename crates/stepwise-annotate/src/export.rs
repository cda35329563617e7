//! `stepwise annotate export`: a study's judgements as files the rest of stepwise reads.
//!
//! **Ordering studies**
//!
//! - `predictions/MODALITY-K.jsonl` (`{"id", "order"}`): each instance's K-th counted judgement in that modality
//!   (submission order), so every file is one human "system" that `stepwise eval STUDY/instances.jsonl -p FILE`
//!   scores — the paper's human rows (†), per modality.
//! - `annotations/MODALITY.jsonl` (`{"id", "annotator", "order"}`): for `stepwise eval … --agreement`.
//!
//! **Alternative-order studies**
//!
//! - `alternatives.jsonl` (`{"id", "annotator", "order", "alternatives"}`): for `--agreement` (appendix B.3).
//! - `references.jsonl` (`{"id": PROCEDURE, "orders": [[step, …], …]}`): per-person agreement (best-matched
//!   alternative κ, Algorithm 1), people below `--min-agreement` dropped, then a majority vote per instance
//!   (an order stays when more than half of the remaining people who judged the instance gave it); this is the
//!   file `stepwise generate --task sequencing --alt-orders` takes as multiple references.
//!
//! **Both**: `judgements.jsonl` (every submitted judgement, counted or withdrawn by censoring), `workers.jsonl`
//! (per-person numbers), `summary.md`, `manifest.json`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};
use stepwise_core::manifest::Manifest;
use stepwise_core::output::write_string_atomic;
use stepwise_core::{Error, Result};

use crate::db::{AssignmentRow, WorkerRow};
use crate::judgements::Judgement;
use crate::pages::{num, pct};
use crate::progress::Progress;
use crate::study::{Modality, Study, StudyKind};
use crate::tables::{StudyTables, study_tables};

#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// People whose mean alternative-order κ is below this are left out of the vote (alternative studies).
    pub min_agreement: f64,
}

impl Default for ExportOptions {
    fn default() -> Self {
        // 0.4: "moderate" agreement on the Landis–Koch scale.
        ExportOptions { min_agreement: 0.4 }
    }
}

/// What an export wrote (for the command's summary).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exported {
    pub judgements: usize,
    pub files: Vec<String>,
    pub summary: String,
}

/// Write the export into `dir` (normally an `OutputDir` the caller commits).
pub fn export(
    study: &Study,
    workers: &[WorkerRow],
    assignments: &[AssignmentRow],
    dir: &Path,
    options: &ExportOptions,
) -> Result<Exported> {
    if !(-1.0..=1.0).contains(&options.min_agreement) {
        return Err(Error::usage(format!("--min-agreement {}: must be between -1 and 1", options.min_agreement)));
    }
    let progress = Progress::of(study, workers, assignments);
    let label: BTreeMap<i64, &str> = workers.iter().map(|w| (w.id, w.label.as_str())).collect();
    let who = |id: i64| label.get(&id).copied().unwrap_or("?").to_string();
    let mut files = vec!["tables.json".to_string()];
    let tables = study_tables(study, &progress.judgements, assignments);
    write_string_atomic(&dir.join("tables.json"), &(stepwise_core::json::to_pretty_sorted(&tables) + "\n"))?;
    let mut lines = |name: &str, rows: &[Value]| -> Result<()> {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        stepwise_core::json::write_jsonl_atomic(&path, rows)?;
        files.push(name.to_string());
        Ok(())
    };
    let all: Vec<Value> = progress
        .judgements
        .iter()
        .map(|j| {
            let inst = &study.instances[j.instance];
            json!({
                "assignment": j.assignment,
                "id": inst.id,
                "procedure": inst.procedure,
                "modality": j.modality.as_str(),
                "annotator": who(j.worker),
                "qualification": j.qualification,
                "counted": j.counted,
                "submitted_ms": j.submitted_ms,
                "answer": serde_json::to_value(&j.answer).unwrap_or(Value::Null),
            })
        })
        .collect();
    lines("judgements.jsonl", &all)?;
    let counted: Vec<&Judgement> = progress.judgements.iter().filter(|j| j.counted && !j.qualification).collect();
    let mut summary = format!(
        "# Annotation export\n\n{} study, {} instances, {} people, {} judgements submitted ({} counted study \
         judgements).\n\n",
        study.rules.kind.as_str(),
        study.instances.len(),
        workers.len(),
        progress.judgements.len(),
        counted.len()
    );
    let mut kept_workers = Vec::new();
    match study.rules.kind {
        StudyKind::Ordering => {
            summary.push_str("| modality | judgements | people | perfect-match ratio (any reference) | files |\n|---|---:|---:|---:|---|\n");
            for m in Modality::ALL.into_iter().filter(|m| study.rules.modalities.contains(m)) {
                let of_m: Vec<&&Judgement> = counted.iter().filter(|j| j.modality == m).collect();
                // K-th judgement of each instance, in submission order.
                let mut rounds: Vec<Vec<Value>> = Vec::new();
                let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
                for j in &of_m {
                    let k = seen.entry(j.instance).or_default();
                    if rounds.len() <= *k {
                        rounds.push(Vec::new());
                    }
                    rounds[*k].push(json!({"id": study.instances[j.instance].id, "order": j.answer.order}));
                    *k += 1;
                }
                let round_files: Vec<String> =
                    (1..=rounds.len()).map(|k| format!("predictions/{}-{k}.jsonl", m.as_str())).collect();
                for (rows, name) in rounds.iter().zip(&round_files) {
                    lines(name, rows)?;
                }
                let annotations: Vec<Value> = of_m
                    .iter()
                    .map(|j| json!({"id": study.instances[j.instance].id, "annotator": who(j.worker), "order": j.answer.order}))
                    .collect();
                if !annotations.is_empty() {
                    lines(&format!("annotations/{}.jsonl", m.as_str()), &annotations)?;
                }
                // The same counted judgements the tables summarise.
                let (people, pmr) =
                    tables.modalities.iter().find(|t| t.modality == m).map_or((0, None), |t| (t.people, t.pmr));
                let _ = writeln!(
                    summary,
                    "| {} | {} | {} | {} | {} |",
                    m.as_str(),
                    of_m.len(),
                    people,
                    pct(pmr),
                    if round_files.is_empty() { "–".to_string() } else { round_files.join(", ") }
                );
            }
            summary.push_str(&tables_markdown(&tables));
            summary.push_str(
                "\nScore a predictions file with `stepwise eval STUDY/instances.jsonl -p OUT/predictions/FILE \
                 --skip-missing` (all six metrics, multi-reference; a round covers only the instances judged); agreement with `stepwise eval STUDY/instances.jsonl \
                 --agreement OUT/annotations/MODALITY.jsonl`.\n",
            );
        }
        StudyKind::Alternatives => {
            let rows: Vec<Value> = counted
                .iter()
                .map(|j| {
                    json!({
                        "id": study.instances[j.instance].id,
                        "annotator": who(j.worker),
                        "order": study.references(j.instance)[0],
                        "alternatives": j.answer.alternatives.clone().unwrap_or_default(),
                    })
                })
                .collect();
            if !rows.is_empty() {
                lines("alternatives.jsonl", &rows)?;
            }
            let kept: BTreeSet<i64> = progress
                .workers
                .iter()
                .filter(|w| w.agreement.is_none_or(|k| k >= options.min_agreement))
                .map(|w| w.worker)
                .collect();
            kept_workers = progress.workers.iter().map(|w| (w.worker, kept.contains(&w.worker))).collect();
            let references = majority_references(study, &counted, &kept);
            let n_orders: usize = references.values().map(Vec::len).sum();
            let refs: Vec<Value> = references.iter().map(|(p, orders)| json!({"id": p, "orders": orders})).collect();
            if !refs.is_empty() {
                lines("references.jsonl", &refs)?;
            }
            let _ = writeln!(
                summary,
                "People kept for the vote (mean alternative κ ≥ {}, or no co-judged item): {} of {}.\n\
                 Alternative orders kept by majority: {} over {} procedures (`references.jsonl`, for \
                 `stepwise generate --task sequencing --alt-orders`).\n",
                options.min_agreement,
                kept.len(),
                progress.workers.len(),
                n_orders,
                references.len()
            );
        }
    }
    summary.push_str("\n| person | status | qualification | judgements | accuracy (PMR) | agreement (κ) | items for κ |\n|---|---|---:|---:|---:|---:|---:|\n");
    for w in &progress.workers {
        let _ = writeln!(
            summary,
            "| {} | {} | {} | {} | {} | {} | {} |",
            w.label,
            w.status,
            pct(w.qualification_score),
            w.judgements,
            pct(w.accuracy),
            num(w.agreement),
            w.agreement_items
        );
    }
    let worker_rows: Vec<Value> = progress
        .workers
        .iter()
        .map(|w| {
            let mut v = serde_json::to_value(w).unwrap_or(Value::Null);
            if let Some((_, kept)) = kept_workers.iter().find(|(id, _)| *id == w.worker) {
                v["kept_for_vote"] = Value::Bool(*kept);
            }
            v
        })
        .collect();
    lines("workers.jsonl", &worker_rows)?;
    write_string_atomic(&dir.join("summary.md"), &summary)?;
    let mut m = Manifest::new("annotation-export");
    m.count("judgements", progress.judgements.len() as u64);
    m.count("counted_study_judgements", counted.len() as u64);
    m.count("people", workers.len() as u64);
    m.param("kind", study.rules.kind.as_str());
    m.param("min_agreement", options.min_agreement);
    m.write(dir)?;
    files.push("summary.md".into());
    Ok(Exported { judgements: progress.judgements.len(), files, summary })
}

/// The same export as one zip file (the dashboard's download): the files [`export`] writes, stored uncompressed
/// under `stepwise-export/`, in name order with a fixed timestamp, so the same judgements give the same bytes.
/// Its `manifest.json` records the command that made it, here the server's (credentials in URLs masked).
pub fn export_zip(
    study: &Study,
    workers: &[WorkerRow],
    assignments: &[AssignmentRow],
    options: &ExportOptions,
) -> Result<Vec<u8>> {
    use std::io::Write as _;
    use zip::write::SimpleFileOptions;
    let td = tempfile::tempdir().map_err(|e| Error::io(&std::env::temp_dir(), e))?;
    export(study, workers, assignments, td.path(), options)?;
    let files = stepwise_core::output::read_tree(td.path())?;
    let zip_error = |e: zip::result::ZipError| Error::runtime(format!("export zip: {e}"));
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let file_options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (name, bytes) in &files {
        zip.start_file(format!("{ZIP_FOLDER}/{name}"), file_options).map_err(zip_error)?;
        zip.write_all(bytes).map_err(|e| Error::runtime(format!("export zip: {e}")))?;
    }
    Ok(zip.finish().map_err(zip_error)?.into_inner())
}

/// The folder every file of [`export_zip`] sits in (unzipping gives one folder, not loose files).
pub const ZIP_FOLDER: &str = "stepwise-export";

/// Procedure → orders over its step indices: for each instance, the alternatives that more than half of the kept
/// people who judged it gave; instances judged by kept people but with no such order contribute the procedure
/// with no orders (annotated: only the authored order).
fn majority_references(
    study: &Study,
    counted: &[&Judgement],
    kept: &BTreeSet<i64>,
) -> BTreeMap<String, Vec<Vec<usize>>> {
    let mut by_instance: BTreeMap<usize, Vec<&Judgement>> = BTreeMap::new();
    for j in counted.iter().filter(|j| kept.contains(&j.worker)) {
        by_instance.entry(j.instance).or_default().push(j);
    }
    let mut out: BTreeMap<String, Vec<Vec<usize>>> = BTreeMap::new();
    for (instance, js) in by_instance {
        let inst = &study.instances[instance];
        let mut votes: BTreeMap<&Vec<usize>, usize> = BTreeMap::new();
        for j in &js {
            for a in j.answer.alternatives.iter().flatten() {
                *votes.entry(a).or_default() += 1;
            }
        }
        let orders = out.entry(inst.procedure.clone()).or_default();
        for (order, n) in votes {
            if 2 * n > js.len() {
                let steps: Vec<usize> = order.iter().map(|&i| inst.items[i].step).collect();
                if !orders.contains(&steps) {
                    orders.push(steps);
                }
            }
        }
    }
    out
}

/// Agreement, the paper's Tables 8 and 9, and time per HIT, as Markdown.
fn tables_markdown(t: &StudyTables) -> String {
    let mut s =
        String::from("\n| modality | order κ (instances with ≥ 2 judgements) | mean confidence |\n|---|---:|---:|\n");
    for m in &t.modalities {
        let _ = writeln!(
            s,
            "| {} | {} ({}) | {} |",
            m.modality.as_str(),
            num(m.kappa),
            m.kappa_instances,
            num(m.mean_confidence)
        );
    }
    if !t.helped.is_empty() {
        s.push_str("\nWhich modality helped (multimodal items; the paper's Table 8):\n\n| answer | judgements | share | PMR |\n|---|---:|---:|---:|\n");
        for r in &t.helped {
            let _ = writeln!(s, "| {} | {} | {} | {} |", r.level, r.count, pct(r.share), pct(r.pmr));
        }
    }
    s.push_str("\nConfidence levels (the paper's Table 9): share of judgements (PMR at that level)\n\n| modality | 1 | 2 | 3 | 4 | 5 |\n|---|---:|---:|---:|---:|---:|\n");
    for m in &t.modalities {
        let cells: Vec<String> = m.confidence.iter().map(|r| format!("{} ({})", pct(r.share), pct(r.pmr))).collect();
        let _ = writeln!(s, "| {} | {} |", m.modality.as_str(), cells.join(" | "));
    }
    let h = &t.hits;
    let _ = writeln!(
        s,
        "\nTime per HIT (handed out → last answer), {} completed study HITs: median {} min, mean {} min, 90th percentile {} min.",
        h.completed,
        num(h.median_minutes),
        num(h.mean_minutes),
        num(h.p90_minutes)
    );
    s
}
