//! The instances folder: `instances.jsonl` (one `SequencingInstance` per line, canonical JSON), `instances.parquet`
//! (the same rows; `items`, `references` and `constraints` as canonical JSON strings), `manifest.json` (kind `sequencing`) and,
//! when asked, the blind `inputs.jsonl` for models ([`super::blind`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use stepwise_core::json::{to_canonical_string, write_canonical};
use stepwise_core::output::{OutputDir, write_file_atomic};
use stepwise_core::parquet::{Column, write_table};
use stepwise_core::sequencing::{INSTANCES_JSONL, INSTANCES_PARQUET, SequencingInstance};
use stepwise_core::{Manifest, Result, TaskFamily};

use super::{Generated, SequencingConfig, Windows};

/// Write `instances.jsonl` (canonical JSON, one instance per line).
pub fn write_instances_jsonl(path: &Path, instances: &[SequencingInstance]) -> Result<()> {
    write_file_atomic(path, |w| {
        for inst in instances {
            write_canonical(w, &serde_json::to_value(inst).expect("instances serialize"))?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// Write the Parquet copy of the instances.
pub fn write_instances_parquet(path: &Path, instances: &[SequencingInstance]) -> Result<()> {
    let s = |f: &dyn Fn(&SequencingInstance) -> String| Column::Str(instances.iter().map(|i| Some(f(i))).collect());
    let json = |v: serde_json::Value| to_canonical_string(&v);
    let n =
        |f: &dyn Fn(&SequencingInstance) -> usize| Column::Int(instances.iter().map(|i| Some(f(i) as i64)).collect());
    write_table(
        path,
        &[
            ("id", s(&|i| i.id.clone())),
            ("procedure", s(&|i| i.procedure.clone())),
            ("split", s(&|i| i.split.clone())),
            ("modality", s(&|i| i.modality.clone())),
            ("n_items", n(&|i| i.items.len())),
            ("n_references", n(&|i| i.references.len())),
            ("items", s(&|i| to_canonical_string(&serde_json::to_value(&i.items).expect("items serialize")))),
            ("references", s(&|i| to_canonical_string(&serde_json::to_value(&i.references).expect("serialize")))),
            // Null when the references are complete.
            (
                "constraints",
                Column::Str(
                    instances
                        .iter()
                        .map(|i| i.constraints.as_ref().map(|c| json(serde_json::to_value(c).expect("serialize"))))
                        .collect(),
                ),
            ),
        ],
    )
}

/// Write the whole folder atomically to `dest` and return its final path. `inputs` are the files read (their
/// hashes go into the manifest; a corpus folder stands for its `procedures.jsonl`).
pub fn write_instances_dir(
    dest: &Path,
    overwrite: bool,
    generated: &Generated,
    cfg: &SequencingConfig,
    inputs: &[PathBuf],
) -> Result<PathBuf> {
    let out = OutputDir::create(dest, overwrite)?;
    write_instances_jsonl(&out.path().join(INSTANCES_JSONL), &generated.instances)?;
    write_instances_parquet(&out.path().join(INSTANCES_PARQUET), &generated.instances)?;
    if cfg.blind_inputs {
        super::blind::write_inputs_jsonl(&out.path().join(super::blind::INPUTS_JSONL), &generated.instances, cfg.seed)?;
    }
    let mut m = Manifest::new(TaskFamily::Sequencing.manifest_kind()).with_seed(cfg.seed);
    let files: Vec<PathBuf> = inputs.iter().map(|p| stepwise_core::Corpus::procedures_file(p)).collect();
    m.add_inputs(&files)?;
    let st = &generated.stats;
    m.count("instances", generated.instances.len() as u64);
    for (split, n) in &st.instances_per_split {
        m.count(&format!("instances_{split}"), *n as u64);
    }
    m.count("procedures", st.procedures as u64);
    m.count("procedures_used", st.procedures_used as u64);
    m.count("references", st.references_total as u64);
    m.count("instances_multi_reference", st.multi_reference as u64);
    m.count("instances_sampled_references", st.sampled_references as u64);
    m.count("truncated_texts", st.truncated_texts as u64);
    m.param("skipped", &st.skipped);
    m.param("reference_sources", &st.reference_sources);
    m.param("modality", cfg.modality);
    m.param("steps", cfg.steps);
    m.param("min_steps", cfg.min_steps);
    m.param(
        "windows",
        match cfg.windows {
            Windows::All => serde_json::json!("all"),
            Windows::First => serde_json::json!("first"),
            Windows::Count(k) => serde_json::json!(k),
        },
    );
    m.param("max_sentences", cfg.max_sentences);
    m.param("max_tokens", cfg.max_tokens);
    m.param("max_references", cfg.max_references);
    m.param("split_fractions", cfg.fractions);
    if cfg.blind_inputs {
        m.param("blind_inputs", super::blind::INPUTS_JSONL);
        // Image file names that number the steps still tell the order in the blind file (a warning, not an error).
        m.count("blind_items_with_step_numbered_images", super::blind::leaky_image_names(&generated.instances) as u64);
    }
    m.write(out.path())?;
    out.commit()
}
