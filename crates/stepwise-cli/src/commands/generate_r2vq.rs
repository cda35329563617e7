//! `stepwise generate INPUT --task r2vq -o OUT`: R2VQ questions generated from an annotated file in the SemEval
//! layout, or from a corpus whose steps carry span annotation such as the built-in world (see
//! `stepwise_tasks::r2vq::generate` and `stepwise_tasks::r2vq::annotate`).

use std::collections::BTreeMap;
use std::path::Path;

use stepwise_core::Corpus;
use stepwise_core::Manifest;
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::r2vq::R2vqDocument;
use stepwise_core::r2vq::family_name;
use stepwise_ingest::readers::r2vq_conllu::{is_r2vq_conllu, read_r2vq_conllu};
use stepwise_tasks::r2vq::annotate::recipe_of_procedure;
use stepwise_tasks::r2vq::generate::{R2vqGenConfig, R2vqGenerated, document_with_questions, generate_r2vq};

use super::generate::parse_split;
use crate::usage_bail;

/// Options of `--task r2vq` (ignored by the other tasks).
#[derive(clap::Args, Debug, Clone)]
pub struct R2vqGenArgs {
    /// R2VQ: unanswerable distractors per answerable question of a recipe ("N/A" answers, family 18).
    #[arg(long, value_name = "RATE", default_value_t = 0.11, help_heading = "R2VQ")]
    pub distractor_rate: f64,
    /// R2VQ: the largest share of a family's questions its most frequent answer may have (0.5 to 1).
    #[arg(long, value_name = "SHARE", default_value_t = 0.5, help_heading = "R2VQ")]
    pub max_answer_share: f64,
    /// R2VQ: at most this many questions per family (seeded sample).
    #[arg(long, value_name = "N", help_heading = "R2VQ")]
    pub per_family: Option<usize>,
}

pub fn run_r2vq(
    input: &Path,
    output: &Path,
    seed: u64,
    force: bool,
    split: &str,
    a: &R2vqGenArgs,
) -> anyhow::Result<()> {
    if !(0.0..=10.0).contains(&a.distractor_rate) {
        usage_bail!("--distractor-rate must be between 0 and 10 (got {})", a.distractor_rate);
    }
    if !(0.5..=1.0).contains(&a.max_answer_share) {
        usage_bail!(
            "--max-answer-share must be between 0.5 and 1 (two-answer families such as event ordering cannot go \
             lower; got {})",
            a.max_answer_share
        );
    }
    // An annotated file in the SemEval layout, or a corpus whose procedures carry span annotation (the world).
    let (doc, skipped) = if is_r2vq_conllu(input) {
        (read_r2vq_conllu(input)?, 0)
    } else {
        let corpus = Corpus::load(input)?;
        let recipes: Vec<_> = corpus.procedures.iter().filter_map(recipe_of_procedure).collect();
        let skipped = corpus.procedures.len() - recipes.len();
        if recipes.is_empty() {
            usage_bail!(
                "{}: no procedure has EVENT spans in its step annotations (R2VQ questions need them)",
                input.display()
            );
        }
        (R2vqDocument { recipes, final_newline: true }, skipped)
    };
    let cfg = R2vqGenConfig {
        seed,
        fractions: parse_split(split)?,
        distractor_rate: a.distractor_rate,
        max_answer_share: a.max_answer_share,
        per_family: a.per_family,
    };
    let made = generate_r2vq(&doc, &cfg);
    let out = OutputDir::create(output, force)?;
    let mut lines = String::new();
    for q in &made.questions {
        lines.push_str(&serde_json::to_string(q)?);
        lines.push('\n');
    }
    write_string_atomic(&out.path().join("questions.jsonl"), &lines)?;
    for split in ["train", "val", "test"] {
        let part = document_with_questions(&doc, &made.questions, split);
        if !part.recipes.is_empty() {
            write_string_atomic(&out.path().join(format!("{split}.csv")), &part.to_conllu_string())?;
        }
    }
    let mut m = Manifest::new(stepwise_core::TaskFamily::R2vq.manifest_kind()).with_seed(seed);
    m.add_inputs(&[Corpus::procedures_file(input)])?;
    m.param("split", split);
    m.param("distractor_rate", a.distractor_rate);
    m.param("max_answer_share", a.max_answer_share);
    if let Some(n) = a.per_family {
        m.param("per_family", n);
    }
    m.count("recipes", doc.recipes.len() as u64);
    m.count("procedures_without_events", skipped as u64);
    m.count("questions", made.questions.len() as u64);
    for (family, n) in per_family(&made) {
        m.count(&format!("family_{family:02}"), n[0] as u64);
    }
    m.count("duplicates", made.duplicates as u64);
    m.count("balanced_away", made.balanced_away as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!("{}", summary(&made, doc.recipes.len(), &dest));
    }
    Ok(())
}

/// Per family: [questions kept, train, val, test, candidates, rejected].
fn per_family(made: &R2vqGenerated) -> BTreeMap<u32, [usize; 6]> {
    let mut t: BTreeMap<u32, [usize; 6]> = BTreeMap::new();
    for q in &made.questions {
        let row = t.entry(q.family).or_default();
        row[0] += 1;
        row[match q.split.as_str() {
            "train" => 1,
            "val" => 2,
            _ => 3,
        }] += 1;
    }
    for (f, n) in &made.candidates {
        t.entry(*f).or_default()[4] = *n;
    }
    for (f, n) in &made.rejected {
        t.entry(*f).or_default()[5] = *n;
    }
    t
}

/// The table `generate --task r2vq` prints.
pub fn summary(made: &R2vqGenerated, recipes: usize, dest: &Path) -> String {
    let mut s = format!(
        "{} questions from {recipes} recipes ({} repeated texts dropped, {} dropped to balance answers)\n",
        made.questions.len(),
        made.duplicates,
        made.balanced_away
    );
    s.push_str(
        "| family | questions | train | val | test | candidates | rejected |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (f, [n, tr, va, te, c, r]) in per_family(made) {
        s.push_str(&format!("| {f} {} | {n} | {tr} | {va} | {te} | {c} | {r} |\n", family_name(f)));
    }
    s.push_str(&format!("written to {}", dest.display()));
    s
}
