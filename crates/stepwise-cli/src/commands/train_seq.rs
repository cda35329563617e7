//! `stepwise pretrain SEQ --features ... --objectives mlm,isp,smrm -o ENCODER_DIR` and
//! `stepwise train-seq SEQ --features ... [--encoder ENCODER_DIR] -o MODEL_DIR`: the sequencing paper's model
//! (multimodal step encoder, BERSON-style decoder) pretrained with sequence-aware objectives and fine-tuned on
//! orders; `stepwise predict MODEL_DIR SEQ` writes the orders `stepwise eval` scores.

use std::path::{Path, PathBuf};

use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::OutputDir;
use stepwise_models::item_features::FeatureKind;
use stepwise_models::m3c::saved::FeatureIdentity;
use stepwise_models::optim::Checkpointing;
use stepwise_models::seq::saved::{self, SavedSeqConfig};
use stepwise_models::seq::train::{OrderTargets, SeqTrainReport};
use stepwise_models::seq::{DecoderKind, Objective, PretrainConfig, SeqConfig, SeqInput, SeqModel, SeqTrainConfig};
use stepwise_report::plots::{LineChart, write_line_chart};

use stepwise_models::seq::data::SeqData;

use super::model_features::FeatureArgs;
use super::train::checkpoint_path;
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

/// Which orders fine-tuning learns from (train-seq and seq-study; pretraining reads the authored order).
#[derive(clap::Args, Debug, Clone)]
pub struct TargetsArgs {
    /// Fine-tuning learns from every valid order an instance lists, or from its authored order only (the
    /// sequencing paper's training; free steps then carry the authored order as their label).
    #[arg(long, value_enum, default_value_t = TargetsArg::AllReferences)]
    pub targets: TargetsArg,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetsArg {
    /// Every valid order: soft pairwise labels and any valid next step for the pointer.
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

    /// The training options; fine-tuning reads `targets` (pretraining ignores them).
    pub fn train_config(&self, targets: &TargetsArgs) -> SeqTrainConfig {
        SeqTrainConfig {
            learning_rate: self.lr,
            batch_size: self.batch_size,
            max_epochs: self.epochs,
            patience: self.patience,
            seed: self.seed,
            targets: targets.targets.into(),
        }
    }
}

/// Read the instances and features; items without vectors leave their instance out (counted, with examples).
pub fn load_data(
    instances: &Path,
    features: &FeatureArgs,
    modality: Option<FeatureKind>,
    max_tokens: usize,
) -> anyhow::Result<SeqData> {
    let file = stepwise_score::predictions::instances_file(instances);
    let insts = stepwise_score::predictions::read_instances(instances)?;
    Ok(SeqData::new(file, insts, features.load(std::iter::empty())?, modality, max_tokens)?)
}

fn objectives(list: &str) -> anyhow::Result<Vec<Objective>> {
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

/// Pretrain the sequencing encoder with sequence-aware objectives on the ordered train sequences.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise embed corpus/ --encoder w2v --tokens -o feats/w2v\n  \
    stepwise pretrain seq/ --features feats/w2v --features feats/descriptor --objectives mlm,isp,smrm -o enc/\n  \
    stepwise train-seq seq/ --features feats/w2v --features feats/descriptor --encoder enc/ -o m/\n\n\
    Objectives (the sequencing paper §4): mlm (masked text tokens → their vocabulary ids; needs a text store \
    embedded with --tokens), isp (two steps' images swapped with probability 0.5: in order or not?), pisp (1..w \
    patches swapped between two images), smrm (15% of each image's patches zeroed, each to be matched to its \
    original among the batch's masked patches). Per mini-batch one objective is drawn uniformly; MLM, when \
    chosen, is added to every batch. Sequences are the train split in authored order, sub-sampled to 2 or more \
    steps. ENCODER_DIR holds the encoder and pretraining heads (weights.safetensors, config.json, features.json, \
    training.json, the loss curve, manifest.json); a killed run resumes from its checkpoint.")]
pub struct PretrainArgs {
    /// Sequencing instances (a folder from `stepwise generate --task sequencing`, or its instances.jsonl).
    pub instances: PathBuf,
    #[command(flatten)]
    pub features: FeatureArgs,
    /// Comma-separated objectives.
    #[arg(long, default_value = "mlm,isp,smrm")]
    pub objectives: String,
    /// ISP / PISP: probability of a swap (δ).
    #[arg(long, default_value_t = 0.5)]
    pub swap_probability: f64,
    /// PISP: at most this many patches swapped (w).
    #[arg(long, default_value_t = 3)]
    pub pisp_max_patches: usize,
    #[command(flatten)]
    pub hyper: SeqHyper,
    /// The split to pretrain on.
    #[arg(long, default_value = "train")]
    pub train_split: String,
    #[arg(short, long, value_name = "ENCODER_DIR")]
    pub output: PathBuf,
    #[arg(long)]
    pub force: bool,
}

pub fn run_pretrain(args: PretrainArgs) -> anyhow::Result<()> {
    args.hyper.check()?;
    let objectives = objectives(&args.objectives)?;
    if !(0.0..=1.0).contains(&args.swap_probability) || args.pisp_max_patches == 0 {
        usage_bail!("--swap-probability must be in [0, 1] and --pisp-max-patches at least 1");
    }
    let data =
        load_data(&args.instances, &args.features, args.hyper.modality.map(FeatureKind::from), args.hyper.max_tokens)?;
    let train = data.split(&args.train_split);
    if train.is_empty() {
        usage_bail!("{}: no usable instance in split `{}`", data.file.display(), args.train_split);
    }
    let config = args.hyper.config(&data, DecoderKind::Berson);
    let pcfg = PretrainConfig {
        objectives,
        swap_probability: args.swap_probability,
        pisp_max_patches: args.pisp_max_patches,
        ..PretrainConfig::default()
    };
    if pcfg.objectives.contains(&Objective::Mlm) && config.vocab == 0 {
        usage_bail!(
            "--objectives mlm needs token ids: embed the text with `stepwise embed --tokens` (this text store has \
             pooled vectors only), or leave mlm out"
        );
    }
    if pcfg.objectives.iter().any(|o| !o.needs_text()) && !config.uses_image() {
        usage_bail!("--objectives isp, pisp and smrm need an image feature store");
    }
    let tcfg = args.hyper.train_config(&TargetsArgs { targets: TargetsArg::AllReferences });
    let out = OutputDir::create(&args.output, args.force)?;
    let model = SeqModel::new(config, tcfg.seed)?.with_pretraining_heads()?;
    let checkpoint = Checkpointing { path: checkpoint_path(&args.output), stop_after_epochs: None };
    let names: Vec<&str> = pcfg.objectives.iter().map(|o| o.as_str()).collect();
    let label = format!("pretraining ({})", names.join("+"));
    let report =
        with_bar(&label, |p| stepwise_models::seq::pretrain(&model, &train, &tcfg, &pcfg, Some(&checkpoint), p))?;
    let saved = SavedSeqConfig {
        sequencing: model.config.clone(),
        train: tcfg.clone(),
        pretrain: Some(pcfg),
        encoder_from: None,
    };
    finish(out, &model, &saved, &report, &data, "pretrained encoder", &label)?;
    let _ = std::fs::remove_file(&checkpoint.path);
    Ok(())
}

/// Train the sequencing model (encoder + order decoder) on the orders of the train split.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise train-seq seq/ --features feats/w2v --features feats/descriptor -o m/\n  \
    stepwise train-seq seq/ --features feats/w2v --features feats/descriptor --encoder enc/ -o m-pre/\n  \
    stepwise predict m/ seq/ --features feats/w2v --features feats/descriptor --split test -o orders.jsonl\n  \
    stepwise eval seq/ -p orders.jsonl --split test\n\n\
    The model (the sequencing paper §4; BERSON, Cui et al. 2020): one transformer over the concatenated steps \
    ([CLS], text tokens, image patches; position, step-index and modality embeddings), a step's [CLS] output as \
    its representation; a pairwise relative-order head and a pointer network (beam search at prediction) trained \
    jointly, or --decoder pairwise (topological sort). Without token-level text features a step's text is its \
    pooled vector; without patch grids an image is its pooled vector. --encoder starts from a pretrained encoder \
    (`stepwise pretrain`; same features and sizes). Early stopping on the validation loss.")]
pub struct TrainSeqArgs {
    /// Sequencing instances (a folder from `stepwise generate --task sequencing`, or its instances.jsonl).
    pub instances: PathBuf,
    #[command(flatten)]
    pub features: FeatureArgs,
    /// A pretrained encoder from `stepwise pretrain`.
    #[arg(long, value_name = "ENCODER_DIR")]
    pub encoder: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "berson")]
    pub decoder: DecoderArg,
    #[command(flatten)]
    pub hyper: SeqHyper,
    #[command(flatten)]
    pub targets: TargetsArgs,
    #[arg(long, default_value = "train")]
    pub train_split: String,
    /// The split that selects the epoch (none: all epochs run, the last weights are kept).
    #[arg(long, default_value = "val")]
    pub val_split: String,
    #[arg(short, long, value_name = "MODEL_DIR")]
    pub output: PathBuf,
    #[arg(long)]
    pub force: bool,
}

pub fn run_train_seq(args: TrainSeqArgs) -> anyhow::Result<()> {
    args.hyper.check()?;
    let data =
        load_data(&args.instances, &args.features, args.hyper.modality.map(FeatureKind::from), args.hyper.max_tokens)?;
    let (train, val) = (data.split(&args.train_split), data.split(&args.val_split));
    if train.is_empty() {
        usage_bail!("{}: no usable instance in split `{}`", data.file.display(), args.train_split);
    }
    let decoder = match args.decoder {
        DecoderArg::Berson => DecoderKind::Berson,
        DecoderArg::Pairwise => DecoderKind::Pairwise,
    };
    let mut config = args.hyper.config(&data, decoder);
    let pretrained = match &args.encoder {
        Some(dir) => {
            let p = saved::load(dir)?;
            if p.config.pretrain.is_none() {
                usage_bail!("{}: not a pretrained encoder (make one with `stepwise pretrain`)", dir.display());
            }
            check_identities(&p.features, &data.features.identities, dir)?;
            let pc = &p.config.sequencing;
            if (pc.modality, pc.text_dim, pc.image_dim, pc.dim, pc.layers, pc.heads)
                != (config.modality, config.text_dim, config.image_dim, config.dim, config.layers, config.heads)
            {
                usage_bail!(
                    "{}: the encoder was pretrained as {} {}×{} with {} heads ({}-d text, {}-d image); this run asks \
                     for {} {}×{} with {} heads ({}-d text, {}-d image)",
                    dir.display(),
                    pc.modality.as_str(),
                    pc.layers,
                    pc.dim,
                    pc.heads,
                    pc.text_dim,
                    pc.image_dim,
                    config.modality.as_str(),
                    config.layers,
                    config.dim,
                    config.heads,
                    config.text_dim,
                    config.image_dim
                );
            }
            // Position and step tables keep the pretrained shapes.
            config.max_patches = pc.max_patches;
            config.max_tokens = pc.max_tokens;
            config.max_steps = pc.max_steps;
            config.vocab = pc.vocab;
            Some(p)
        }
        None => None,
    };
    let tcfg = args.hyper.train_config(&args.targets);
    let out = OutputDir::create(&args.output, args.force)?;
    let model = SeqModel::new(config, tcfg.seed)?;
    if let Some(p) = &pretrained {
        stepwise_models::seq::load_encoder(&model, &p.model)?;
    }
    let checkpoint = Checkpointing { path: checkpoint_path(&args.output), stop_after_epochs: None };
    let label = format!("{} sequencer ({})", data.kind.as_str(), decoder.as_str());
    let report =
        with_bar(&label, |p| stepwise_models::seq::train_orders(&model, &train, &val, &tcfg, Some(&checkpoint), p))?;
    let saved = SavedSeqConfig {
        sequencing: model.config.clone(),
        train: tcfg.clone(),
        pretrain: None,
        encoder_from: args.encoder.as_ref().map(|p| p.display().to_string()),
    };
    finish(out, &model, &saved, &report, &data, "sequencing model", &label)?;
    let _ = std::fs::remove_file(&checkpoint.path);
    Ok(())
}

fn check_identities(
    trained: &[FeatureIdentity],
    given: &[(FeatureIdentity, String)],
    dir: &Path,
) -> anyhow::Result<()> {
    if let Err(e) = stepwise_models::m3c::saved::check_features(trained, given) {
        return Err(anyhow::Error::new(crate::cli_util::UsageError(format!("{e} (model {})", dir.display()))));
    }
    Ok(())
}

type Trained = stepwise_core::Result<Option<SeqTrainReport>>;

fn with_bar(
    label: &str,
    f: impl FnOnce(&mut dyn FnMut(usize, usize, usize, f64)) -> Trained,
) -> anyhow::Result<SeqTrainReport> {
    let pb = stepwise_core::progress::bar(0, label);
    let r = f(&mut |epoch, b, n, loss| {
        pb.set_length(n as u64);
        pb.set_position(b as u64);
        pb.set_message(format!("epoch {epoch}: loss {loss:.4}"));
    })?;
    pb.finish_and_clear();
    r.ok_or_else(|| anyhow::anyhow!("training stopped before its end"))
}

fn finish(
    out: OutputDir,
    model: &SeqModel,
    saved_cfg: &SavedSeqConfig,
    report: &SeqTrainReport,
    data: &SeqData,
    what: &str,
    label: &str,
) -> anyhow::Result<()> {
    let identities: Vec<FeatureIdentity> = data.features.identities.iter().map(|(i, _)| i.clone()).collect();
    saved::save(out.path(), model, saved_cfg, report, &identities)?;
    let pts = |f: &dyn Fn(&stepwise_models::optim::CurvePoint) -> Option<f64>| -> Vec<(f64, f64)> {
        report.curve.iter().filter_map(|r| f(r).map(|v| (r.epoch as f64, v))).collect()
    };
    let mut chart = LineChart::new(format!("Training curve: {label}"), "epoch", "loss")
        .with_series("train loss", pts(&|r| Some(r.train_loss)));
    let val = pts(&|r| r.val);
    if !val.is_empty() {
        chart = chart.with_series("val loss", val);
    }
    write_line_chart(&chart, &out.path().join("training_curve.svg"), &out.path().join("training_curve.png"))?;
    let mut m = Manifest::new("sequencing-model").with_seed(saved_cfg.train.seed);
    m.inputs.push(InputHash::of(&data.file)?);
    m.inputs.extend(data.features.input_hashes.iter().cloned());
    m.param("modality", data.kind.as_str());
    m.param("decoder", model.config.decoder.as_str());
    m.count("train_sequences", report.train_sequences as u64);
    m.count("val_sequences", report.val_sequences as u64);
    m.count("skipped_instances", data.skipped.len() as u64);
    m.count("parameters", report.parameters as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{what} ({label}): {} parameters, {} train / {} val sequences, {} epochs (best {}{}){}",
            report.parameters,
            report.train_sequences,
            report.val_sequences,
            report.epochs_run,
            report.best_epoch,
            report.best_val_loss.map_or(String::new(), |v| format!(", val loss {v:.4}")),
            if report.resumed_from_epoch > 0 {
                format!("; resumed after epoch {}", report.resumed_from_epoch)
            } else {
                String::new()
            }
        );
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// `stepwise predict` for a sequencing model: one `{"id", "order"}` line per instance of the split.
pub fn predict(
    model_dir: &Path,
    instances: &Path,
    features: &FeatureArgs,
    split: Option<&str>,
    beam: usize,
    output: &Path,
) -> anyhow::Result<()> {
    let loaded = saved::load(model_dir)?;
    if loaded.config.pretrain.is_some() {
        usage_bail!(
            "{}: a pretrained encoder has no order decoder; fine-tune it with `stepwise train-seq --encoder`",
            model_dir.display()
        );
    }
    let cfg = &loaded.config.sequencing;
    let data = load_data(instances, features, Some(cfg.modality), cfg.max_tokens)?;
    check_identities(&loaded.features, &data.features.identities, model_dir)?;
    let wanted: Vec<SeqInput> = data.inputs.iter().filter(|s| split.is_none_or(|sp| sp == s.split)).cloned().collect();
    let pb = stepwise_core::progress::spinner(&format!("ordering {} sequences", wanted.len()));
    let orders = stepwise_models::seq::predict_orders(&loaded.model, &wanted, loaded.config.train.batch_size, beam)?;
    pb.finish_and_clear();
    let mut by_id: std::collections::HashMap<&str, &Vec<usize>> =
        wanted.iter().zip(&orders).map(|(s, o)| (s.id.as_str(), o)).collect();
    let mut missing = 0usize;
    let mut written = 0usize;
    let model_name = format!(
        "sequencer ({}){}",
        cfg.modality.as_str(),
        if loaded.config.encoder_from.is_some() { " + pretraining" } else { "" }
    );
    stepwise_core::output::write_file_atomic(output, |w| {
        for inst in data.instances.iter().filter(|i| split.is_none_or(|sp| sp == i.split)) {
            // An instance without vectors gets no line (eval counts it as missing).
            let Some(o) = by_id.remove(inst.id.as_str()) else {
                missing += 1;
                continue;
            };
            let line = serde_json::json!({"id": inst.id, "order": o, "model": model_name});
            written += 1;
            serde_json::to_writer(&mut *w, &line).map_err(std::io::Error::other)?;
            std::io::Write::write_all(w, b"\n")?;
        }
        Ok(())
    })?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{written} orders ({missing} instances without vectors left out){}",
            data.skipped.first().map_or(String::new(), |e| format!("; e.g. {e}"))
        );
        eprintln!("wrote {}", output.display());
    }
    Ok(())
}
