//! `stepwise predict MODEL_DIR TASKSET -o predictions.jsonl`: answer the questions of a task set with a trained
//! model, in the JSONL layout `stepwise eval` reads. Features must match those the model was trained on.

use std::io::Write;
use std::path::PathBuf;

use stepwise_core::TaskSet;
use stepwise_core::output::write_file_atomic;
use stepwise_models::m3c::dataset::task_inputs;
use stepwise_models::m3c::{saved, train};
use stepwise_models::seq::Decoding;

use super::model_features::FeatureArgs;
use super::train::pick_task;
use crate::cli_util::UsageError;
use crate::usage_bail;

/// Predict the answers of a task set's questions with a model from `stepwise train`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise predict m/ suite/knobs-0-1-1/visual_cloze --features feats/w2v --features feats/descriptor -o p.jsonl\n  \
    stepwise eval suite/knobs-0-1-1/visual_cloze -p p.jsonl --split test\n\n\
    Output: one {\"qid\", \"answer\", \"scores\"} line per question (answer = the best-scoring choice). The feature \
    stores must be made by the same encoders (and, for word2vec/TF-IDF, fitted on the same corpus) as those the \
    model was trained on; otherwise nothing is written and the exit code is 2. Questions whose items have no \
    vector get \"answer\": null (scored as missing by eval) and are counted.")]
pub struct Args {
    /// A model folder from `stepwise train` (or `stepwise train-seq`).
    pub model: PathBuf,
    /// A task-set folder or a RecipeQA-layout JSON file (for a sequencing model: sequencing instances).
    pub taskset: PathBuf,
    #[command(flatten)]
    pub features: FeatureArgs,
    /// Only questions (instances) of this split (default: all).
    #[arg(long)]
    pub split: Option<String>,
    /// Sequencing models: beam width of the order decoder (1 = greedy).
    #[arg(long, default_value_t = 4)]
    pub beam: usize,
    /// Sequencing models: `own` decodes with the model's decoder (BERSON: beam search of --beam; a pairwise
    /// model: topological sort); `pairwise-head` with the pairwise head alone, by topological sort (for a BERSON
    /// model, the ablation that leaves its pointer network out; --beam is then unused).
    #[arg(long, value_enum, default_value_t = OrderDecoder::Own)]
    pub decoder: OrderDecoder,
    #[arg(short, long, value_name = "PREDICTIONS.jsonl")]
    pub output: PathBuf,
    /// Replace an existing output.
    #[arg(long)]
    pub force: bool,
}

/// `predict --decoder`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderDecoder {
    Own,
    PairwiseHead,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.output.exists() && !args.force {
        usage_bail!("{} exists; pass --force to replace it", args.output.display());
    }
    if stepwise_models::seq::saved::is_sequencing_model(&args.model) {
        return super::train_seq::predict(
            &args.model,
            &args.taskset,
            &args.features,
            args.split.as_deref(),
            match args.decoder {
                OrderDecoder::Own => Decoding::Own { beam: args.beam },
                OrderDecoder::PairwiseHead => Decoding::PairwiseHead,
            },
            &args.output,
        );
    }
    let loaded = saved::load(&args.model)?;
    let spec = loaded.config.model.input;
    let set = TaskSet::load(&args.taskset)?;
    let task = pick_task(&set, Some(spec.task.as_str()), &args.taskset)?;
    let features = args.features.load(set.of_task(task.as_str()))?;
    if let Err(e) = saved::check_features(&loaded.features, &features.identities) {
        return Err(anyhow::Error::new(UsageError(format!("{e} (model {})", args.model.display()))));
    }
    let sources = features.sources();
    let inputs = task_inputs(&set, task, &spec, &sources);
    let wanted = |split: &str| args.split.as_deref().is_none_or(|s| s == split);
    let pb = stepwise_core::progress::spinner(&format!("predicting {task}"));
    let mut answers = std::collections::HashMap::new();
    for (_, qs) in inputs.by_split.iter().filter(|(s, _)| wanted(s)) {
        let pred = train::predict(&loaded.model, qs, loaded.config.train.batch_size)?;
        for (q, (choice, scores)) in qs.iter().zip(pred) {
            answers.insert(q.qid.clone(), (choice, scores));
        }
    }
    pb.finish_and_clear();
    let mut written = 0usize;
    let mut missing = 0usize;
    let model_name = loaded.config.model.scorer.as_str();
    write_file_atomic(&args.output, |w| {
        for q in set.of_task(task.as_str()).filter(|q| wanted(q.split.as_deref().unwrap_or("none"))) {
            let line = match answers.get(&q.qid) {
                Some((choice, scores)) => {
                    let scores: Vec<f64> = scores.iter().map(|&s| (s as f64 * 1e6).round() / 1e6).collect();
                    serde_json::json!({"qid": q.qid, "answer": choice, "scores": scores, "model": model_name})
                }
                None => {
                    missing += 1;
                    serde_json::json!({"qid": q.qid, "answer": null, "model": model_name})
                }
            };
            written += 1;
            serde_json::to_writer(&mut *w, &line).map_err(std::io::Error::other)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{written} {task} predictions ({missing} without vectors: answer null){}",
            inputs.skipped.examples.first().map_or(String::new(), |e| format!("; e.g. {e}"))
        );
        eprintln!("wrote {}", args.output.display());
    }
    Ok(())
}
