//! The options `pretrain`, `train-seq` and `seq-study` share: modality, decoder, encoder size and training,
//! fine-tuning's own (the orders it learns from, its dropout); and reading instances with their features.

use std::path::Path;

use stepwise_models::item_features::FeatureKind;
use stepwise_models::seq::data::SeqData;
use stepwise_models::seq::train::OrderTargets;
use stepwise_models::seq::{DecoderKind, Objective, SeqConfig, SeqTrainConfig};

use crate::commands::model_features::FeatureArgs;
use crate::usage_bail;

/// The modality arguments.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModalityArg {
    Text,
    Image,
    Multimodal,
}

impl From<ModalityArg> for FeatureKind {
    fn from(m: ModalityArg) -> Self {
        match m {
            ModalityArg::Text => FeatureKind::Text,
            ModalityArg::Image => FeatureKind::Image,
            ModalityArg::Multimodal => FeatureKind::Multimodal,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecoderArg {
    /// Pointer network + pairwise head (BERSON), beam search.
    Berson,
    /// Pairwise head + topological sort.
    Pairwise,
}

impl From<DecoderArg> for DecoderKind {
    fn from(d: DecoderArg) -> Self {
        match d {
            DecoderArg::Berson => DecoderKind::Berson,
            DecoderArg::Pairwise => DecoderKind::Pairwise,
        }
    }
}

/// Encoder size and training options (shared by pretrain, train-seq and seq-study).
#[derive(clap::Args, Debug, Clone)]
pub struct SeqHyper {
    /// Streams the encoder reads (default: every modality the features give).
    #[arg(long, value_enum)]
    pub modality: Option<ModalityArg>,
    /// Transformer width.
    #[arg(long, default_value_t = 128)]
    pub dim: usize,
    /// Transformer layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// At most this many text tokens per step (the paper: 60).
    #[arg(long, default_value_t = 60)]
    pub max_tokens: usize,
    /// Adam learning rate.
    #[arg(long, default_value_t = 5e-4)]
    pub lr: f64,
    /// Sequences per mini-batch.
    #[arg(long, default_value_t = 16)]
    pub batch_size: usize,
    /// Epochs (pretraining: all run; fine-tuning: at most).
    #[arg(long, default_value_t = 40)]
    pub epochs: usize,
    /// Fine-tuning: stop after this many epochs without a lower validation loss.
    #[arg(long, default_value_t = 8)]
    pub patience: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Fine-tuning's own options (train-seq and seq-study): which orders it learns from (pretraining reads the
/// authored order) and its dropout (pretraining uses none).
#[derive(clap::Args, Debug, Clone)]
pub struct FineTuneArgs {
    /// Fine-tuning learns from every valid order an instance lists, or from its authored order only (the
    /// sequencing paper's training; free steps then carry the authored order as their label).
    #[arg(long, value_enum, default_value_t = TargetsArg::AllReferences)]
    pub targets: TargetsArg,
    /// Fine-tuning: dropout rate in [0, 1) on the encoder's input rows and output rows (0: none, the default;
    /// a departure from the paper when set).
    #[arg(long, default_value_t = 0.0)]
    pub dropout: f64,
    /// Fine-tune the upper N layers of the text store's pretrained encoder with the sequencer (as the paper
    /// fine-tunes RoBERTa); its lower layers run once per step, frozen. Needs a text store from `stepwise embed
    /// --encoder minilm --tokens` and the models folder it came from. 0: the text rows are fixed features.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub tune_text_layers: usize,
    /// With --tune-text-layers: the fine-tuned encoder layers' learning rate (default: --lr, as every other
    /// parameter).
    #[arg(long, value_name = "LR")]
    pub text_lr: Option<f64>,
}

impl FineTuneArgs {
    pub fn check(&self) -> anyhow::Result<()> {
        if self.text_lr.is_some_and(|lr| !(lr.is_finite() && lr > 0.0)) {
            usage_bail!("--text-lr must be positive");
        }
        if self.text_lr.is_some() && self.tune_text_layers == 0 {
            usage_bail!("--text-lr is the learning rate of the layers --tune-text-layers fine-tunes: give both");
        }
        crate::cli_util::require_dropout_rate("--dropout", self.dropout)
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetsArg {
    /// Every valid order: soft pairwise labels and any valid next step for the pointer (all that the
    /// instance's precedence constraints allow, when its references are a sample).
    AllReferences,
    /// The authored order only.
    Authored,
}

impl From<TargetsArg> for OrderTargets {
    fn from(t: TargetsArg) -> Self {
        match t {
            TargetsArg::AllReferences => OrderTargets::AllReferences,
            TargetsArg::Authored => OrderTargets::Authored,
        }
    }
}

impl SeqHyper {
    /// The model configuration for `data` with these widths.
    pub fn config(&self, data: &SeqData, decoder: DecoderKind) -> SeqConfig {
        data.config(self.dim, self.layers, self.heads, self.max_tokens, decoder)
    }

    pub fn check(&self) -> anyhow::Result<()> {
        crate::cli_util::require_at_least_one(&[
            ("--dim", self.dim),
            ("--layers", self.layers),
            ("--heads", self.heads),
            ("--max-tokens", self.max_tokens),
            ("--batch-size", self.batch_size),
            ("--epochs", self.epochs),
        ])?;
        crate::cli_util::require_heads_divide(("--dim", self.dim), ("--heads", self.heads))?;
        if !(self.lr.is_finite() && self.lr > 0.0) {
            usage_bail!("--lr must be positive");
        }
        Ok(())
    }

    /// The training options; fine-tuning reads `fine_tune`'s targets and dropout (pretraining ignores both).
    pub fn train_config(&self, targets: &FineTuneArgs) -> SeqTrainConfig {
        SeqTrainConfig {
            learning_rate: self.lr,
            batch_size: self.batch_size,
            max_epochs: self.epochs,
            patience: self.patience,
            seed: self.seed,
            targets: targets.targets.into(),
            dropout: targets.dropout,
            text_tower_learning_rate: targets.text_lr.filter(|_| targets.tune_text_layers > 0),
        }
    }
}

/// Read the instances and features; items without vectors leave their instance out (counted, with examples).
/// With `tune_text_layers` > 0 the text rows are the frozen lower layers of the text store's encoder
/// ([`SeqData::tune_text`]).
pub fn load_data(
    instances: &Path,
    features: &FeatureArgs,
    modality: Option<FeatureKind>,
    max_tokens: usize,
    tune_text_layers: usize,
) -> anyhow::Result<SeqData> {
    let file = stepwise_score::predictions::instances_file(instances);
    let insts = stepwise_score::predictions::read_instances(instances)?;
    let mut data = SeqData::new(file, insts, features.load(std::iter::empty())?, modality, max_tokens)?;
    if tune_text_layers > 0 && data.kind != FeatureKind::Image {
        data.tune_text(&features.models, tune_text_layers, max_tokens)?;
    }
    Ok(data)
}

pub fn objectives(list: &str) -> anyhow::Result<Vec<Objective>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match Objective::parse(name) {
            Some(o) if !out.contains(&o) => out.push(o),
            Some(_) => {}
            None => usage_bail!("--objectives: unknown objective `{name}` (mlm, isp, pisp, smrm)"),
        }
    }
    if out.is_empty() {
        usage_bail!("--objectives: name at least one of mlm, isp, pisp, smrm");
    }
    out.sort();
    Ok(out)
}
