//! `stepwise bench r2vq`: reading an R2VQ file in the SemEval layout, answering its questions with the family
//! programs, and generating every family's questions for many recipes, each timed against a stated target.
//!
//! Timed: (1) reading and parsing the file (`--file`, e.g. the 3,442-question SemEval test file); (2) answering
//! all its questions from the annotation; (3) question generation (`stepwise generate --task r2vq`'s library
//! call) for `--recipes` recipes — the file's recipes repeated under new ids, or, without `--file`, the built-in
//! world's annotated procedures (made first, not timed).

use std::path::PathBuf;
use std::time::Instant;

use stepwise_core::r2vq::{AnnotationGraph, R2vqDocument, R2vqRecipe};
use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
use stepwise_tasks::r2vq::annotate::recipe_of_procedure;
use stepwise_tasks::r2vq::generate::{R2vqGenConfig, generate_r2vq};
use stepwise_tasks::r2vq::programs::answer_question;

use stepwise_cli::usage_bail;

/// Time R2VQ reading, answering and question generation.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise bench r2vq --file ../shared/data/r2vq/semeval2022_task9/test_crl_srl.csv\n  \
    stepwise bench r2vq                     # generation on 1,000 world procedures")]
pub struct Args {
    /// An annotated R2VQ file in the SemEval layout (read and answered; its recipes, repeated, are generated from).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Recipes to generate questions for.
    #[arg(long, default_value_t = 1000)]
    pub recipes: usize,
    /// Timed repetitions (the best is reported).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Target for reading the file, in seconds.
    #[arg(long, default_value_t = 1.0)]
    pub target_read: f64,
    /// Target for generating every family's questions for --recipes recipes, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub target_generate: f64,
}

fn best_of<T>(repeats: usize, mut f: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<(f64, T)> {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..repeats {
        let t = Instant::now();
        let v = f()?;
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(v);
    }
    Ok((best, out.expect("repeats >= 1")))
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.repeats == 0 || a.recipes == 0 {
        usage_bail!("--repeats and --recipes must be at least 1");
    }
    let mut failures = Vec::new();
    let mut check = |what: &str, secs: f64, target: f64| {
        let pass = secs < target;
        println!("  target < {target:.2} s: {}", if pass { "PASS" } else { "FAIL" });
        if !pass {
            failures.push(format!("{what}: {secs:.3} s ≥ {target:.2} s"));
        }
    };
    println!("R2VQ benchmark ({} threads)", rayon::current_num_threads());
    let base: Vec<R2vqRecipe> = match &a.file {
        Some(path) => {
            let (secs, doc) = best_of(a.repeats, || Ok(read_r2vq_conllu(path)?))?;
            let questions: usize = doc.recipes.iter().map(|r| r.questions().len()).sum();
            let tokens: usize =
                doc.recipes.iter().flat_map(|r| &r.paragraphs).flat_map(|p| &p.sentences).map(|s| s.tokens.len()).sum();
            println!(
                "read {}: {} recipes, {questions} questions, {tokens} tokens in {secs:.3} s (best of {})",
                path.display(),
                doc.recipes.len(),
                a.repeats
            );
            check("reading", secs, a.target_read);
            let (secs, answered) = best_of(a.repeats, || {
                let mut answered = 0usize;
                for r in &doc.recipes {
                    let g = AnnotationGraph::of(r);
                    for q in r.questions() {
                        answered += usize::from(answer_question(r, &g, &q.question).is_ok_and(|x| x.answer.is_some()));
                    }
                }
                Ok(answered)
            })?;
            println!("answered {questions} questions from the annotation ({answered} with an answer) in {secs:.3} s");
            doc.recipes
        }
        None => {
            let params = stepwise_world::WorldParams::new(0, stepwise_world::Domain::Cooking, a.recipes as u64);
            let procedures = stepwise_world::generate(&params)?;
            println!("made {} world procedures (not timed)", procedures.len());
            procedures.iter().filter_map(recipe_of_procedure).collect()
        }
    };
    if base.is_empty() {
        usage_bail!("no annotated recipe to generate from");
    }
    let doc = R2vqDocument {
        recipes: (0..a.recipes)
            .map(|i| {
                let r = &base[i % base.len()];
                R2vqRecipe { id: format!("{}#{}", r.id, i / base.len()), ..r.clone() }
            })
            .collect(),
        final_newline: true,
    };
    let cfg = R2vqGenConfig::default();
    let (secs, made) = best_of(a.repeats, || Ok(generate_r2vq(&doc, &cfg)))?;
    let families = made.questions.iter().map(|q| q.family).collect::<std::collections::BTreeSet<_>>().len();
    println!(
        "generated {} questions in {families} families for {} recipes in {secs:.3} s (best of {}), {:.0} recipes/s",
        made.questions.len(),
        a.recipes,
        a.repeats,
        a.recipes as f64 / secs
    );
    check("generation", secs, a.target_generate);
    if !failures.is_empty() {
        anyhow::bail!("R2VQ benchmark missed its targets: {}", failures.join("; "));
    }
    Ok(())
}
