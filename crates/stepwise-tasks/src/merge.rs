//! Joining the parts of a sharded sweep (`stepwise sweep --shard I/N`, one per machine) into the suite a single
//! run writes: `stepwise sweep --merge PART... -o SUITE`.
//!
//! A part holds the questions of a contiguous slice of the procedures, made from the whole corpus's catalog,
//! plans, splits and random streams ([`crate::generate::TaskGenerator::restrict_to`]), so each task set's
//! questions follow each other in shard order exactly as in a single run, and its counts add up (the corpus's
//! procedure count, which every part carries whole, excepted). The merged files are written by the same writers
//! as a single run's: byte-identical to it (the CLI tests and the Ray check compare every file).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use stepwise_core::json::first_difference;
use stepwise_core::manifest::Manifest;
use stepwise_core::output::OutputDir;
use stepwise_core::shard::{Shard, check_complete};
use stepwise_core::{Error, Result, TaskSet};

use crate::config::Mode;
use crate::suite::{SHARD_PARAM, SuiteRow, count_rows, read_counts, taskset_folders, write_counts};
use crate::taskset_writer::TasksetWriter;

/// What a merge wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteMergeReport {
    pub parts: usize,
    /// Task-set folders written.
    pub tasksets: usize,
    /// Questions in all of them.
    pub questions: u64,
}

/// One part: its folder, shard, suite manifest and counts rows.
struct Part {
    dir: PathBuf,
    manifest: Manifest,
    rows: Vec<SuiteRow>,
}

/// Merge the suite parts in `parts` (any order) into a new suite at `out` (replaced only with `force`); returns
/// the merged counts rows too.
pub fn merge_suites(parts: &[PathBuf], out: &Path, force: bool) -> Result<(SuiteMergeReport, Vec<SuiteRow>)> {
    let mut loaded = Vec::with_capacity(parts.len());
    let mut shards = Vec::with_capacity(parts.len());
    for dir in parts {
        let manifest = Manifest::read(dir)?;
        if manifest.kind != "suite" {
            return Err(Error::bad_input(format!(
                "{}: a {:?} folder, not a suite part (written by `stepwise sweep --shard I/N`)",
                dir.display(),
                manifest.kind
            )));
        }
        shards.push(shard_of(dir, &manifest)?);
        let rows = read_counts(dir)?;
        loaded.push(Part { dir: dir.clone(), manifest, rows });
    }
    check_complete(&shards, |i| parts[i].display().to_string()).map_err(Error::bad_input)?;
    let mut order: Vec<usize> = (0..loaded.len()).collect();
    order.sort_by_key(|&i| shards[i].index);
    let mut parts: Vec<Part> = Vec::with_capacity(loaded.len());
    let mut slots: Vec<Option<Part>> = loaded.into_iter().map(Some).collect();
    for i in order {
        parts.push(slots[i].take().expect("each part once"));
    }

    // The same suite, split the same way.
    let first = &parts[0];
    let common = without_part(&first.manifest);
    for p in &parts[1..] {
        if let Some(field) = first_difference(&common, &without_part(&p.manifest)) {
            return Err(Error::bad_input(format!(
                "{} and {} are parts of different sweeps (manifest field `{field}` differs); run every shard with \
                 the same command",
                first.dir.display(),
                p.dir.display()
            )));
        }
        let same_rows = p.rows.len() == first.rows.len()
            && p.rows
                .iter()
                .zip(&first.rows)
                .all(|(a, b)| a.setting == b.setting && a.task == b.task && a.same_as == b.same_as);
        if !same_rows {
            return Err(Error::bad_input(format!(
                "{} and {}: counts.json lists different (setting, task) rows",
                first.dir.display(),
                p.dir.display()
            )));
        }
    }
    let merged_rows: Vec<SuiteRow> = (0..first.rows.len())
        .map(|r| {
            let mut row = first.rows[r].clone();
            for p in &parts[1..] {
                row.counts.merge(&p.rows[r].counts);
            }
            // Every part counts the whole corpus's procedures.
            row.counts.procedures = first.rows[r].counts.procedures;
            row
        })
        .collect();

    let out_dir = OutputDir::create(out, force)?;
    let mut tasksets = 0;
    let mut questions = 0;
    for (setting, _, r) in taskset_folders(&merged_rows) {
        let row = &merged_rows[r];
        let Some(mode) = Mode::parse_label(&setting) else {
            return Err(Error::bad_input(format!(
                "{}: unknown setting {setting:?}",
                first.dir.join("counts.json").display()
            )));
        };
        let rel = Path::new(&mode.label()).join(row.task.as_str());
        let mut writer = TasksetWriter::create(&out_dir.path().join(&rel))?;
        let mut fallbacks = 0u64;
        let mut methods: BTreeSet<String> = BTreeSet::new();
        let mut first_manifest = None;
        for p in &parts {
            let src = p.dir.join(&rel);
            let m = Manifest::read(&src)?;
            fallbacks += m.counts.get("neighbor_exact_fallbacks").copied().unwrap_or(0);
            if let Some(Value::Array(list)) = m.params.get("neighbor_search") {
                methods.extend(list.iter().filter_map(|v| v.as_str().map(str::to_string)));
            }
            let expected = p.rows[r].counts.questions;
            // Part 0's manifest is the merged one's template.
            first_manifest.get_or_insert(m);
            if expected == 0 {
                continue;
            }
            let ts = TaskSet::load(&src)?;
            if ts.questions.len() as u64 != expected {
                return Err(Error::bad_input(format!(
                    "{}: {} questions, but its counts.json says {expected}; the part was changed after it was written",
                    src.display(),
                    ts.questions.len()
                )));
            }
            writer.append(ts.questions)?;
        }
        let mut manifest = first_manifest.expect("at least one part");
        manifest.params.remove(SHARD_PARAM);
        manifest.counts = row.counts.manifest_entries();
        if manifest.params.contains_key("neighbor_search") {
            manifest.param("neighbor_search", &methods);
            manifest.count("neighbor_exact_fallbacks", fallbacks);
        }
        writer.close();
        writer.finish(&manifest)?;
        tasksets += 1;
        questions += row.counts.questions;
    }
    write_counts(out_dir.path(), &merged_rows)?;
    let mut manifest = first.manifest.clone();
    manifest.params.remove(SHARD_PARAM);
    count_rows(&mut manifest, &merged_rows);
    manifest.write(out_dir.path())?;
    out_dir.commit()?;
    Ok((SuiteMergeReport { parts: parts.len(), tasksets, questions }, merged_rows))
}

fn shard_of(dir: &Path, m: &Manifest) -> Result<Shard> {
    let Some(v) = m.params.get(SHARD_PARAM) else {
        return Err(Error::bad_input(format!(
            "{}: a whole suite, not a part (it was generated without --shard); merge the outputs of `stepwise sweep \
             --shard I/N` runs",
            dir.display()
        )));
    };
    serde_json::from_value(v.clone()).map_err(|e| {
        Error::bad_input(format!("{}: manifest.json param `{SHARD_PARAM}`: {e}", dir.join("manifest.json").display()))
    })
}

/// What the parts of one sweep share: the suite manifest without its shard and its counts.
fn without_part(m: &Manifest) -> Value {
    let mut m = m.clone();
    m.params.remove(SHARD_PARAM);
    m.counts.clear();
    serde_json::to_value(&m).expect("a manifest serializes")
}
