//! `stepwise r2vq train-tagger` and `stepwise r2vq tag`: the cooking-role tagger for recipes without annotation.

use std::path::PathBuf;

use stepwise_core::r2vq::Layer;
use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
use stepwise_ingest::readers::r2vq_inline::read_inline_steps;
use stepwise_models::r2vq_tagger::{TaggerConfig, TaggerModel, tag_document, tag_procedures, train as train_tagger};
use stepwise_score::r2vq::{tagging_scores, tagging_table};

use crate::usage_bail;

/// Train the tagger (`stepwise_models::r2vq_tagger`): events, TOOL mentions, participants and hidden tools,
/// habitats, elided objects and results, from the inline-tagged layout.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq train-tagger inline_tagged/entity_train3.json --exclude split/held-out.csv -o tagger.json\n  \
    stepwise r2vq tag split/held-out.csv --model tagger.json -o tagged.csv")]
pub struct TrainTaggerArgs {
    /// Inline-tagged recipes (`{recipe: [step, ...]}`).
    pub input: PathBuf,
    /// Leave out the recipes of these SemEval-layout files (held out for scoring).
    #[arg(long)]
    pub exclude: Vec<PathBuf>,
    #[arg(long, default_value_t = 8)]
    pub epochs: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The model file to write (JSON).
    #[arg(short, long)]
    pub output: PathBuf,
}

pub(super) fn run_train_tagger(a: TrainTaggerArgs) -> anyhow::Result<()> {
    let mut recipes = read_inline_steps(&a.input)?;
    let mut excluded = std::collections::BTreeSet::new();
    for path in &a.exclude {
        excluded.extend(read_r2vq_conllu(path)?.recipes.into_iter().map(|r| r.id));
    }
    let before = recipes.len();
    recipes.retain(|(id, _)| !excluded.contains(id));
    if recipes.is_empty() {
        anyhow::bail!("{}: no recipe left to train on after --exclude", a.input.display());
    }
    let (model, report) = train_tagger(&recipes, &TaggerConfig { epochs: a.epochs, seed: a.seed });
    model.write(&a.output)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{} recipes ({} excluded), {} steps, {} tokens, {} events, {} hidden tools known, results named by a \
             candidate {} of {}; token labels right on the training recipes: {:.1}%; model written to {}",
            report.recipes,
            before - recipes.len(),
            report.steps,
            report.tokens,
            report.events,
            report.tools,
            report.results_in_view,
            report.results,
            report.train_label_accuracy,
            a.output.display()
        );
    }
    Ok(())
}

/// Tag every step of an R2VQ file's recipes (their words only: any annotation the file has is not read to tag)
/// and write them with the predicted cooking-role layer in the SemEval layout, questions and answers kept. When
/// the input carries the layer, the tagging is scored against it per label.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq tag split/held-out.csv --model tagger.json -o tagged.csv\n  \
    stepwise r2vq answer tagged.csv -o answers.jsonl\n  \
    stepwise eval tagged.csv -p answers.jsonl\n  \
    stepwise generate tagged.csv --task r2vq -o questions/")]
pub struct TagArgs {
    /// Recipes in the SemEval layout (`.csv`), or a procedure corpus (folder or procedure JSONL).
    pub input: PathBuf,
    /// A tagger from `r2vq train-tagger`.
    #[arg(long)]
    pub model: PathBuf,
    /// The SemEval-layout file to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Also write the per-label scores against the input's own layer as JSON (`stepwise report` shows them).
    #[arg(long)]
    pub scores: Option<PathBuf>,
}

pub(super) fn run_tag(a: TagArgs) -> anyhow::Result<()> {
    let model = TaggerModel::read(&a.model)?;
    // The input's own recipes (a SemEval file: scored against when they carry the layer), and the tagged ones.
    let (doc, tagged) = if a.input.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) {
        let doc = read_r2vq_conllu(&a.input)?;
        let tagged = tag_document(&doc, &model);
        (doc, tagged)
    } else {
        let corpus = stepwise_core::corpus::Corpus::load(&a.input)?;
        (Default::default(), tag_procedures(&corpus.procedures, &model))
    };
    if tagged.recipes.is_empty() {
        anyhow::bail!("{}: no recipe to tag", a.input.display());
    }
    let has_layer = doc.recipes.iter().any(|r| r.has_layer(Layer::CookingRoles));
    if a.scores.is_some() && !has_layer {
        usage_bail!("--scores: {} has no cooking-role layer to score the tagging against", a.input.display());
    }
    let fitted = model.fitted_recipes();
    let seen = doc.recipes.iter().filter(|r| fitted.contains(r.id.as_str())).count();
    let scores = has_layer.then(|| tagging_scores(&doc, &tagged));
    stepwise_core::output::write_string_atomic(&a.output, &tagged.to_conllu_string())?;
    if let (Some(path), Some(labels)) = (&a.scores, &scores) {
        let json = serde_json::json!({
            "kind": "r2vq-tagging",
            "input": a.input.display().to_string(),
            "model": a.model.display().to_string(),
            "recipes": doc.recipes.len(),
            "recipes_fitted_on": seen,
            "labels": labels,
        });
        stepwise_core::output::write_string_atomic(path, &format!("{json:#}\n"))?;
    }
    if !stepwise_core::progress::is_quiet() {
        eprintln!("{} recipes tagged into {}", tagged.recipes.len(), a.output.display());
        if let Some(labels) = &scores {
            eprintln!("against the input's own annotation:\n{}", tagging_table(labels));
        }
        if seen > 0 {
            eprintln!("warning: {seen} recipes were in the tagger's training data: these are not held-out scores");
        }
    }
    Ok(())
}
