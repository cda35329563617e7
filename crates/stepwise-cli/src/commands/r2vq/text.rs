//! `stepwise r2vq split` and `stepwise r2vq train-text`: a held-out split by recipe, and the learned text method.

use std::path::PathBuf;

use stepwise_core::Manifest;
use stepwise_core::output::OutputDir;
use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
use stepwise_models::r2vq_span::{SpanConfig, route_policy_table, train as train_span};

use crate::usage_bail;

/// Split by recipe: a seeded draw of recipes is held out, the rest is for fitting; both keep file order.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq split train800.csv --held-out 0.2 --seed 0 -o split\n  \
    stepwise r2vq train-text split/fit.csv -o span.json\n  \
    stepwise r2vq answer split/held-out.csv --text-model span.json -o answers.jsonl\n  \
    stepwise eval split/held-out.csv -p answers.jsonl\n\n\
    Writes OUT/fit.csv, OUT/held-out.csv (SemEval layout) and OUT/manifest.json (the held-out recipe ids).")]
pub struct SplitArgs {
    /// An R2VQ file in the SemEval layout.
    pub input: PathBuf,
    /// The share of recipes held out.
    #[arg(long, default_value_t = 0.2)]
    pub held_out: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The folder to write (fit.csv, held-out.csv, manifest.json).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
}

pub(super) fn run_split(a: SplitArgs) -> anyhow::Result<()> {
    if !(a.held_out > 0.0 && a.held_out < 1.0) {
        usage_bail!("--held-out {} must be between 0 and 1 (exclusive)", a.held_out);
    }
    let doc = read_r2vq_conllu(&a.input)?;
    let (fit, held) = doc.split_by_recipe(a.held_out, a.seed);
    let out = OutputDir::create(&a.output, a.force)?;
    stepwise_core::output::write_string_atomic(&out.path().join("fit.csv"), &fit.to_conllu_string())?;
    stepwise_core::output::write_string_atomic(&out.path().join("held-out.csv"), &held.to_conllu_string())?;
    let mut m = Manifest::new("r2vq-split").with_seed(a.seed);
    m.add_inputs(std::slice::from_ref(&a.input))?;
    m.param("held_out", a.held_out);
    m.param("held_out_recipes", held.recipes.iter().map(|r| r.id.clone()).collect::<Vec<_>>());
    m.count("fit_recipes", fit.recipes.len() as u64);
    m.count("held_out_recipes", held.recipes.len() as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{} recipes to fit on, {} held out (seed {}) into {}",
            fit.recipes.len(),
            held.recipes.len(),
            a.seed,
            dest.display()
        );
    }
    Ok(())
}

/// Train the span ranker (`stepwise_models::r2vq_span`) on every answered question of a span template; the model
/// records the recipes it was fitted on, and `r2vq answer` says when it is asked about one of them.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq train-text split/fit.csv -o span.json\n  \
    stepwise r2vq answer split/held-out.csv --text-model span.json -o answers.jsonl")]
pub struct TrainTextArgs {
    /// Answered recipes in the SemEval layout.
    pub input: PathBuf,
    #[arg(long, default_value_t = 10)]
    pub epochs: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The model file to write (JSON).
    #[arg(short, long)]
    pub output: PathBuf,
}

pub(super) fn run_train_text(a: TrainTextArgs) -> anyhow::Result<()> {
    let doc = read_r2vq_conllu(&a.input)?;
    let (model, report) = train_span(&doc, &SpanConfig { epochs: a.epochs, seed: a.seed });
    if report.questions == 0 {
        anyhow::bail!(
            "{}: no answered question of a span template (To what extent / For how long / Where / Why / From \
             where / What ... with / How do you ...?) to train on",
            a.input.display()
        );
    }
    model.write(&a.output)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "when the programs find nothing on a recipe with their layer (training questions):\n{}",
            route_policy_table(&report.route_policy)
        );
        eprintln!(
            "{} recipes, {} span-template questions ({} answered N/A; {} left out: no span of the text reaches F1 \
             0.5); best reachable EM {:.1} / F1 {:.1}; on its own training questions EM {:.1} / F1 {:.1}; \
             model written to {}",
            report.recipes,
            report.questions,
            report.no_answer,
            report.unreachable,
            report.oracle_em,
            report.oracle_f1,
            report.train_em,
            report.train_f1,
            a.output.display()
        );
    }
    Ok(())
}
