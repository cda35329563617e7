//! `stepwise pretrain SEQ --features ... --objectives mlm,isp,smrm -o ENCODER_DIR` and
//! `stepwise train-seq SEQ --features ... [--encoder ENCODER_DIR] -o MODEL_DIR`: the sequencing paper's model
//! (multimodal step encoder, BERSON-style decoder) pretrained with sequence-aware objectives and fine-tuned on
//! orders; `stepwise predict MODEL_DIR SEQ` writes the orders `stepwise eval` scores.

mod args;

use std::path::{Path, PathBuf};

use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::OutputDir;
use stepwise_models::item_features::FeatureKind;
use stepwise_models::m3c::saved::FeatureIdentity;
use stepwise_models::optim::Checkpointing;
use stepwise_models::seq::data::SeqData;
use stepwise_models::seq::saved::{self, SavedSeqConfig};
use stepwise_models::seq::train::SeqTrainReport;
use stepwise_models::seq::{DecoderKind, Objective, PretrainConfig, SeqModel};
use stepwise_report::plots::{LineChart, write_line_chart};

use self::args::objectives;
pub use self::args::{DecoderArg, FineTuneArgs, SeqHyper, TargetsArg, load_data};
use super::model_features::FeatureArgs;
use super::train::checkpoint_path;
use crate::usage_bail;

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
    let data = load_data(
        &args.instances,
        &args.features,
        args.hyper.modality.map(FeatureKind::from),
        args.hyper.max_tokens,
        0,
    )?;
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
    let tcfg = args.hyper.train_config(&FineTuneArgs {
        targets: TargetsArg::AllReferences,
        dropout: 0.0,
        tune_text_layers: 0,
        text_lr: None,
    });
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
    pub fine_tune: FineTuneArgs,
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
    args.fine_tune.check()?;
    if args.encoder.is_some() && args.fine_tune.tune_text_layers > 0 {
        usage_bail!(
            "--encoder and --tune-text-layers: a pretrained encoder read fixed text features, not the text \
             encoder's frozen layers; give one of them"
        );
    }
    let data = load_data(
        &args.instances,
        &args.features,
        args.hyper.modality.map(FeatureKind::from),
        args.hyper.max_tokens,
        args.fine_tune.tune_text_layers,
    )?;
    let (train, val) = (data.split(&args.train_split), data.split(&args.val_split));
    if train.is_empty() {
        usage_bail!("{}: no usable instance in split `{}`", data.file.display(), args.train_split);
    }
    let decoder = args.decoder.into();
    let mut config = args.hyper.config(&data, decoder);
    let pretrained = match &args.encoder {
        Some(dir) => {
            let p = saved::load(dir)?;
            p.require_encoder(dir)?;
            check_identities(&p.features, &data.features.identities, dir)?;
            p.adopt_as_encoder(&mut config, dir)?;
            Some(p)
        }
        None => None,
    };
    let tcfg = args.hyper.train_config(&args.fine_tune);
    let out = OutputDir::create(&args.output, args.force)?;
    let model = SeqModel::new(config, tcfg.seed)?;
    data.init_text_tower(&model)?;
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
        eprintln!("{what} ({label}): {}", report.summary());
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
    decoding: stepwise_models::seq::Decoding,
    output: &Path,
) -> anyhow::Result<()> {
    let loaded = saved::load(model_dir)?;
    loaded.require_decoder(model_dir)?;
    let cfg = &loaded.config.sequencing;
    let tuned = cfg.text_tower.as_ref().map_or(0, |t| t.tuned_layers);
    let data = load_data(instances, features, Some(cfg.modality), cfg.max_tokens, tuned)?;
    check_identities(&loaded.features, &data.features.identities, model_dir)?;
    if data.text_tower.as_ref().map(|(t, _)| t) != cfg.text_tower.as_ref() {
        usage_bail!(
            "{}: the model's fine-tuned text encoder does not match the one in {} (another version of the weights?)",
            model_dir.display(),
            features.models.display()
        );
    }
    let wanted = data.inputs.iter().filter(|s| split.is_none_or(|sp| sp == s.split)).count();
    let pb = stepwise_core::progress::spinner(&format!("ordering {wanted} sequences"));
    let ordered = loaded.predict(&data, split, decoding, model_dir)?;
    pb.finish_and_clear();
    stepwise_score::predictions::write_order_predictions(
        output,
        &ordered.predictions,
        Some(&loaded.name_decoded(decoding)),
    )?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{} orders ({} instances without vectors left out){}",
            ordered.predictions.len(),
            ordered.missing,
            data.skipped.first().map_or(String::new(), |e| format!("; e.g. {e}"))
        );
        eprintln!("wrote {}", output.display());
    }
    Ok(())
}
