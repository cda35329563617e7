//! `stepwise train`'s arguments, and the model hyperparameters `train` and `study` share.

use std::path::PathBuf;

use stepwise_models::m3c::train::TrainConfig;
use stepwise_models::m3c::{CandidateEmbedding, HtrnConfig, InputScaling, InputSpec, Loss, ModelConfig, ScorerKind};

use crate::commands::model_features::FeatureArgs;
use crate::usage_bail;

/// Train a multiple-choice model (Impatient Reader, BiDAF or HTRN) on one task of a task set.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise train suite/recipeqa/visual_cloze --features feats/w2v --features feats/descriptor --model htrn -o m/\n  \
    stepwise predict m/ suite/recipeqa/visual_cloze -o preds.jsonl --features feats/w2v --features feats/descriptor\n  \
    stepwise eval suite/recipeqa/visual_cloze -p preds.jsonl --split test\n\n\
    The model (GM3C, Meta-RecipeQA §3): a hierarchical BiLSTM over the context steps (tokens within a step when \
    token-level features exist, then steps), a BiLSTM over each candidate's query sequence (appendix C: the \
    candidate in the placeholder, the question without one element for coherence, each order for ordering), and \
    a scoring function. Adam, early stopping on validation accuracy. MODEL_DIR: weights.safetensors, \
    config.json, features.json (identities of the stores, checked by predict), training.json and \
    training_curve.svg/.png, manifest.json. A killed run resumes from its checkpoint (a hidden file next to \
    MODEL_DIR) when started again with the same arguments.")]
pub struct Args {
    /// A task-set folder (with questions.json) or a RecipeQA-layout JSON file.
    pub taskset: PathBuf,
    #[command(flatten)]
    pub features: FeatureArgs,
    /// The scoring function.
    #[arg(long, value_enum)]
    pub model: ModelArg,
    /// The task to train on (default: the only task of the set).
    #[arg(long)]
    pub task: Option<String>,
    #[command(flatten)]
    pub hyper: ModelHyper,
    /// The split to train on.
    #[arg(long, default_value = "train")]
    pub train_split: String,
    /// The split that selects the epoch (none: all epochs run and the last weights are kept).
    #[arg(long, default_value = "val")]
    pub val_split: String,
    #[arg(short, long, value_name = "MODEL_DIR")]
    pub output: PathBuf,
    /// Replace an existing output.
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelArg {
    Impatient,
    Bidaf,
    Htrn,
}

impl From<ModelArg> for ScorerKind {
    fn from(m: ModelArg) -> Self {
        match m {
            ModelArg::Impatient => ScorerKind::Impatient,
            ModelArg::Bidaf => ScorerKind::Bidaf,
            ModelArg::Htrn => ScorerKind::Htrn,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossArg {
    /// The model's default: hinge for the Impatient Reader (margin --margin), cross-entropy otherwise.
    Default,
    Hinge,
    Ce,
}

/// Model sizes and training options (shared with `stepwise study`).
#[derive(clap::Args, Debug, Clone)]
pub struct ModelHyper {
    /// LSTM hidden units per direction.
    #[arg(long, default_value_t = 256)]
    pub hidden: usize,
    /// Impatient Reader: attention width.
    #[arg(long, default_value_t = 256)]
    pub attention: usize,
    /// HTRN: transformer layers.
    #[arg(long, default_value_t = 4)]
    pub htrn_layers: usize,
    /// HTRN: transformer width.
    #[arg(long, default_value_t = 512)]
    pub htrn_dim: usize,
    /// HTRN: attention heads.
    #[arg(long, default_value_t = 8)]
    pub htrn_heads: usize,
    #[arg(long, value_enum, default_value = "default")]
    pub loss: LossArg,
    /// Hinge loss margin (RecipeQA's value).
    #[arg(long, default_value_t = 1.5)]
    pub margin: f64,
    /// Adam learning rate.
    #[arg(long, default_value_t = 5e-4)]
    pub lr: f64,
    /// Questions per mini-batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Maximum training epochs.
    #[arg(long, default_value_t = 100)]
    pub epochs: usize,
    /// Stop after this many epochs without a better validation accuracy.
    #[arg(long, default_value_t = 20)]
    pub patience: usize,
    /// At most this many context steps per question.
    #[arg(long, default_value_t = 25)]
    pub max_context_steps: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How feature rows enter the encoders (mean and spread from the training questions' rows): as stored (the
    /// papers), centred and scaled by one factor, or standardised per dimension.
    #[arg(long, value_enum, default_value = "raw")]
    pub inputs: InputsArg,
    /// Dropout rate on the encoders' inputs and outputs while training (0: none, as the papers state it).
    #[arg(long, default_value_t = 0.0)]
    pub dropout: f64,
    /// What the Impatient Reader compares its joint embedding with: the summary of the query with the candidate
    /// in its place (GM3C's), or the candidate's own item (RecipeQA §4.2's baseline; orderings, whose candidates
    /// are sequences, keep the query summary).
    #[arg(long, value_enum, default_value = "query-summary")]
    pub candidate_embedding: CandidateEmbeddingArg,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateEmbeddingArg {
    QuerySummary,
    Item,
}

impl From<CandidateEmbeddingArg> for CandidateEmbedding {
    fn from(a: CandidateEmbeddingArg) -> Self {
        match a {
            CandidateEmbeddingArg::Item => CandidateEmbedding::Item,
            CandidateEmbeddingArg::QuerySummary => CandidateEmbedding::QuerySummary,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputsArg {
    Raw,
    Centered,
    Standardized,
}

impl From<InputsArg> for InputScaling {
    fn from(a: InputsArg) -> Self {
        match a {
            InputsArg::Raw => InputScaling::Raw,
            InputsArg::Centered => InputScaling::Centered,
            InputsArg::Standardized => InputScaling::Standardized,
        }
    }
}

impl ModelHyper {
    pub fn check(&self) -> anyhow::Result<()> {
        crate::cli_util::require_at_least_one(&[
            ("--hidden", self.hidden),
            ("--attention", self.attention),
            ("--htrn-layers", self.htrn_layers),
            ("--htrn-dim", self.htrn_dim),
            ("--htrn-heads", self.htrn_heads),
            ("--batch-size", self.batch_size),
            ("--epochs", self.epochs),
            ("--max-context-steps", self.max_context_steps),
        ])?;
        crate::cli_util::require_heads_divide(("--htrn-dim", self.htrn_dim), ("--htrn-heads", self.htrn_heads))?;
        if !(self.lr.is_finite() && self.lr > 0.0 && self.margin.is_finite() && self.margin >= 0.0) {
            usage_bail!("--lr must be positive and --margin non-negative");
        }
        crate::cli_util::require_dropout_rate("--dropout", self.dropout)?;
        Ok(())
    }

    pub fn htrn(&self) -> HtrnConfig {
        HtrnConfig {
            layers: self.htrn_layers,
            dim: self.htrn_dim,
            heads: self.htrn_heads,
            ff: 4 * self.htrn_dim,
            max_positions: (self.max_context_steps + 64).max(128),
        }
    }

    pub fn train_config(&self) -> TrainConfig {
        TrainConfig {
            learning_rate: self.lr,
            batch_size: self.batch_size,
            max_epochs: self.epochs,
            patience: self.patience,
            seed: self.seed,
        }
    }

    /// The model configuration for `scorer` over inputs `spec` of the given dimensions.
    pub fn model_config(&self, scorer: ScorerKind, mut spec: InputSpec, dims: (usize, usize)) -> ModelConfig {
        spec.max_context_steps = self.max_context_steps;
        let mut c = ModelConfig::new(scorer, spec, dims.0, dims.1);
        c.hidden = self.hidden;
        c.attention = self.attention;
        c.htrn = self.htrn();
        c.dropout = self.dropout;
        let mut c = c.with_candidate_embedding(self.candidate_embedding.into());
        c.loss = match self.loss {
            LossArg::Default => c.loss,
            LossArg::Hinge => Loss::Hinge { margin: self.margin },
            LossArg::Ce => Loss::CrossEntropy,
        };
        if let Loss::Hinge { .. } = c.loss {
            c.loss = Loss::Hinge { margin: self.margin };
        }
        c
    }
}
