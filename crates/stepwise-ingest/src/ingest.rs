//! `stepwise ingest` as a library call: read inputs with their formats, check ids and images, and write a corpus
//! folder atomically (procedures JSONL + Parquet + manifest, the ingest report, the task set if any, and the
//! images when copied).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;
use stepwise_core::corpus::{TASKSET_DIR, write_corpus_files};
use stepwise_core::json::to_pretty_sorted;
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Error, Manifest, Result, TaskSet};

use crate::format::{Ingested, ReadOptions, Registry};
use crate::images::{ImageCheck, OnMissingImage, check_images, copy_images, rebase_images};

pub const INGEST_REPORT_JSON: &str = "ingest_report.json";
pub const INGEST_REPORT_MD: &str = "ingest_report.md";

#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// A format name, or `None` to detect each input's format from its content.
    pub format: Option<String>,
    pub on_missing_image: OnMissingImage,
    pub copy_images: bool,
    /// Resolve image paths against this folder instead of each input's folder.
    pub image_root: Option<PathBuf>,
    /// Replace an existing output folder.
    pub overwrite: bool,
    /// Put this before every procedure id (`--id-prefix`): a namespace for a source, so that corpora merged later
    /// cannot clash and commands can tell the source by its ids (e.g. `--train-only`).
    pub id_prefix: Option<String>,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            format: None,
            on_missing_image: OnMissingImage::Warn,
            copy_images: false,
            image_root: None,
            overwrite: false,
            id_prefix: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct InputReport {
    pub path: String,
    pub format: String,
    pub procedures: usize,
    pub questions: usize,
}

/// What ingest did (written as `ingest_report.json` / `.md`).
#[derive(Debug, Clone, Serialize)]
pub struct IngestReport {
    pub inputs: Vec<InputReport>,
    pub procedures: usize,
    pub steps: usize,
    pub step_images: usize,
    pub images: ImageCheck,
    pub image_root: String,
    pub copied_images: Option<usize>,
    pub on_missing_image: OnMissingImage,
    /// Questions per task of the ingested task set (empty when there is none).
    pub questions_by_task: BTreeMap<String, usize>,
    pub notes: Vec<String>,
}

impl IngestReport {
    pub fn to_markdown(&self) -> String {
        let mut s =
            String::from("# Ingest report\n\n| input | format | procedures | questions |\n|---|---|---:|---:|\n");
        for i in &self.inputs {
            s += &format!("| {} | {} | {} | {} |\n", i.path, i.format, i.procedures, i.questions);
        }
        s += &format!(
            "\n- procedures: {}\n- steps: {}\n- step image references: {}\n- distinct image files referenced (step images and procedure galleries): {}\n- image root: {}\n",
            self.procedures, self.steps, self.step_images, self.images.referenced, self.image_root
        );
        s += &format!(
            "- missing images: {} distinct, {} references ({}: {})\n",
            self.images.missing.len(),
            self.images.missing_refs,
            "--on-missing-image",
            self.on_missing_image.as_str()
        );
        if self.images.dropped_refs > 0 {
            s += &format!("- dropped image references: {}\n", self.images.dropped_refs);
        }
        if let Some(n) = self.copied_images {
            s += &format!("- images copied into the corpus: {n}\n");
        }
        if !self.questions_by_task.is_empty() {
            s += "\n| task | questions |\n|---|---:|\n";
            for (t, n) in &self.questions_by_task {
                s += &format!("| {t} | {n} |\n");
            }
        }
        if !self.images.missing.is_empty() {
            s += "\n## Missing images (first 50)\n\n";
            for m in self.images.missing.iter().take(50) {
                s += &format!("- `{m}`\n");
            }
        }
        if !self.notes.is_empty() {
            s += "\n## Notes\n\n";
            for n in &self.notes {
                s += &format!("- {n}\n");
            }
        }
        s
    }
}

/// Read `inputs` and write the corpus folder `output`. Nothing is written unless everything succeeds.
pub fn ingest(inputs: &[PathBuf], output: &Path, registry: &Registry, opts: &IngestOptions) -> Result<IngestReport> {
    if inputs.is_empty() {
        return Err(Error::usage("no input files given"));
    }
    let read_opts = ReadOptions { image_root: opts.image_root.clone() };
    let mut all = Ingested::default();
    let mut input_reports = Vec::new();
    for input in inputs {
        let format = match &opts.format {
            Some(name) => registry.get(name)?,
            None => registry.detect(input)?,
        };
        let spinner = stepwise_core::progress::spinner(&format!("reading {}", input.display()));
        let mut got = format.read(std::slice::from_ref(input), &read_opts)?;
        spinner.finish_and_clear();
        if let Some(prefix) = &opts.id_prefix {
            // Questions name their recipes by id: renaming the recipes alone would cut them loose.
            if !got.tasksets.is_empty() {
                return Err(Error::usage(format!(
                    "{}: --id-prefix renames procedures, and this input holds questions that name them; ingest it without --id-prefix",
                    input.display()
                )));
            }
            for p in &mut got.procedures {
                p.id = format!("{prefix}{}", p.id);
            }
        }
        tracing::info!("{}: {} procedures ({})", input.display(), got.procedures.len(), format.name());
        input_reports.push(InputReport {
            path: input.to_string_lossy().into_owned(),
            format: format.name().to_string(),
            procedures: got.procedures.len(),
            questions: got.tasksets.iter().map(|(_, t)| t.questions.len()).sum(),
        });
        all.extend(got);
    }
    if all.procedures.is_empty() {
        return Err(Error::Empty { path: inputs[0].clone(), what: "no procedures in any input".into() });
    }
    check_unique(&all)?;
    let taskset = merge_tasksets(&all.tasksets)?;

    let root = rebase_images(&mut all.procedures, &all.origins)?;
    let images = check_images(&mut all.procedures, &root, opts.on_missing_image)?;

    let out = OutputDir::create(output, opts.overwrite)?;
    let (image_root, copied) = if opts.copy_images {
        let n = copy_images(&mut all.procedures, &root, out.path())?;
        ("images".to_string(), Some(n))
    } else {
        (stepwise_core::paths::image_root_for(output, &root)?, None)
    };

    let mut manifest = Manifest::new("corpus");
    manifest.add_inputs(inputs)?;
    manifest.image_root = Some(image_root.clone());
    let formats: Vec<&str> = input_reports.iter().map(|i| i.format.as_str()).collect();
    manifest.param("formats", &formats);
    manifest.param("on_missing_image", opts.on_missing_image);
    manifest.param("copy_images", opts.copy_images);
    if let Some(prefix) = &opts.id_prefix {
        manifest.param("id_prefix", prefix);
    }
    manifest.count("missing_images", images.missing.len() as u64);
    manifest.count("missing_image_refs", images.missing_refs as u64);
    let spinner = stepwise_core::progress::spinner("writing corpus");
    write_corpus_files(out.path(), &all.procedures, &mut manifest)?;
    spinner.finish_and_clear();

    let questions_by_task = match &taskset {
        Some((ts, sources)) => {
            write_taskset(&out.path().join(TASKSET_DIR), ts, sources)?;
            ts.counts_by_task()
        }
        None => BTreeMap::new(),
    };

    let report = IngestReport {
        inputs: input_reports,
        procedures: all.procedures.len(),
        steps: all.procedures.iter().map(|p| p.steps.len()).sum(),
        step_images: all.procedures.iter().map(|p| p.step_images().count()).sum(),
        images,
        image_root,
        copied_images: copied,
        on_missing_image: opts.on_missing_image,
        questions_by_task,
        notes: all.notes,
    };
    write_string_atomic(&out.path().join(INGEST_REPORT_JSON), &to_pretty_sorted(&report))?;
    write_string_atomic(&out.path().join(INGEST_REPORT_MD), &report.to_markdown())?;
    out.commit()?;
    Ok(report)
}

/// Procedure ids must be unique across all inputs; the error names both records.
fn check_unique(all: &Ingested) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(all.procedures.len());
    for (i, p) in all.procedures.iter().enumerate() {
        if let Some(first) = seen.insert(p.id.as_str(), i) {
            return Err(Error::Duplicate {
                id: p.id.clone(),
                first: all.origins[first].to_string(),
                second: all.origins[i].to_string(),
            });
        }
    }
    Ok(())
}

/// One task set from several files: questions concatenated in input order, qids unique across files.
fn merge_tasksets(sets: &[(PathBuf, TaskSet)]) -> Result<Option<(TaskSet, Vec<PathBuf>)>> {
    let Some((_, first)) = sets.first() else {
        return Ok(None);
    };
    let mut merged = TaskSet { questions: Vec::new(), extra: first.extra.clone() };
    let mut seen: HashMap<String, String> = HashMap::new();
    for (path, ts) in sets {
        for (i, q) in ts.questions.iter().enumerate() {
            let here = format!("{}:data[{i}]", path.display());
            if let Some(first) = seen.insert(q.qid.clone(), here.clone()) {
                return Err(Error::Duplicate { id: q.qid.clone(), first, second: here });
            }
            merged.questions.push(q.clone());
        }
    }
    Ok(Some((merged, sets.iter().map(|(p, _)| p.clone()).collect())))
}

fn write_taskset(dir: &Path, ts: &TaskSet, sources: &[PathBuf]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    ts.write_json(&dir.join(stepwise_core::taskset::QUESTIONS_JSON))?;
    ts.write_parquet(&dir.join(stepwise_core::taskset::QUESTIONS_PARQUET))?;
    let mut m = Manifest::new("taskset");
    m.add_inputs(sources)?;
    m.count("questions", ts.questions.len() as u64);
    for (task, n) in ts.counts_by_task() {
        m.count(&format!("questions_{task}"), n as u64);
    }
    m.param("origin", "ingested verbatim");
    m.write(dir)
}
