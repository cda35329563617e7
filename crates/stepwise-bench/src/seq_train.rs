//! `stepwise bench seq-train`: training speed of the sequencing model (multimodal encoder + BERSON pointer and
//! pairwise heads) against the same architecture in PyTorch on CPU (`scripts/bench/seq_torch.py`), in the same
//! invocation with the same shapes and threads, and the pretraining step (MLM + ISP / PISP / SMRM batches) against
//! the same heads in PyTorch.
//!
//! Inputs are random normal vectors made before timing (both sides): `n` steps of `S` text rows and `P` image
//! rows each, no padding, a random gold order per sequence. The whole measurement is repeated `--repeats` times,
//! stepwise and PyTorch in turn (fresh models each time), and the medians over repeats are compared, with the
//! ranges printed (as `bench train`).

use std::path::PathBuf;
use std::time::Instant;

use rand::Rng;
use rand::seq::SliceRandom;
use stepwise_models::item_features::{FeatureKind, ItemMatrix};
use stepwise_models::optim::Adam;
use stepwise_models::seq::text_tower::TextTowerConfig;
use stepwise_models::seq::train::{pretrain_batch, pretrain_loss};
use stepwise_models::seq::{Objective, OrderLabels, PretrainConfig, SeqBatch, SeqConfig, SeqModel, StepInput};

use crate::process;
use crate::train::{Repeated, TARGET_RATIO, compare, in_turn, time_steps, torch_reference, verdict};

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  stepwise bench seq-train --python /tmp/torch-venv/bin/python\n  \
    stepwise bench seq-train --epoch-sequences 500 --steps 3\n\n\
    The reference needs a Python with torch and numpy (scripts/bench/requirements-torch.txt).")]
pub struct Args {
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Steps per sequence (n).
    #[arg(long, default_value_t = 5)]
    pub seq_steps: usize,
    /// Text rows per step (S).
    #[arg(long, default_value_t = 60)]
    pub text_tokens: usize,
    /// Image rows per step (P).
    #[arg(long, default_value_t = 49)]
    pub patches: usize,
    #[arg(long, default_value_t = 384)]
    pub dim_text: usize,
    #[arg(long, default_value_t = 320)]
    pub dim_image: usize,
    #[arg(long, default_value_t = 256)]
    pub model_dim: usize,
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// Fine-tuned text-encoder layers before the text projection (`train-seq --tune-text-layers`): MiniLM's
    /// shape (width --dim-text, 12 heads, feed-forward 4 × --dim-text), run per step over its text rows; random
    /// weights (speed only). 0: none.
    #[arg(long, default_value_t = 0)]
    pub text_tower: usize,
    /// MLM vocabulary of the pretraining step.
    #[arg(long, default_value_t = 30522)]
    pub vocab: usize,
    /// Untimed steps first.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Timed single steps (the median is compared).
    #[arg(long, default_value_t = 5)]
    pub steps: usize,
    /// Sequences of the timed epoch (0: no epoch).
    #[arg(long, default_value_t = 1000)]
    pub epoch_sequences: usize,
    /// Repeats of the whole measurement, stepwise and PyTorch in turn (medians compared, ranges printed).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Python for the PyTorch reference (default: $STEPWISE_BENCH_PYTHON, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The reference script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench/seq_torch.py"))]
    pub reference: PathBuf,
    /// Exit with status 1 when a target is missed.
    #[arg(long)]
    pub check: bool,
}

/// all-MiniLM-L6-v2's attention heads.
const TOWER_HEADS: usize = 12;

fn random_sequences(a: &Args, count: usize, key: &str) -> Vec<(Vec<StepInput>, Vec<usize>)> {
    let mut rng = stepwise_core::rng::rng_for(0, key);
    let normal = |rng: &mut dyn rand::RngCore| -> f32 {
        let u1: f32 = rng.random_range(f32::EPSILON..1.0);
        let u2: f32 = rng.random();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    };
    (0..count)
        .map(|_| {
            let steps = (0..a.seq_steps)
                .map(|_| StepInput {
                    text: Some(ItemMatrix {
                        dim: a.dim_text,
                        data: (0..a.text_tokens * a.dim_text).map(|_| normal(&mut rng)).collect(),
                    }),
                    ids: Some((0..a.text_tokens).map(|_| rng.random_range(0..a.vocab as i64)).collect()),
                    image: Some(ItemMatrix {
                        dim: a.dim_image,
                        data: (0..a.patches * a.dim_image).map(|_| normal(&mut rng)).collect(),
                    }),
                })
                .collect();
            let mut order: Vec<usize> = (0..a.seq_steps).collect();
            order.shuffle(&mut rng);
            (steps, order)
        })
        .collect()
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.batch == 0
        || a.seq_steps < 2
        || a.text_tokens == 0
        || a.patches == 0
        || a.steps == 0
        || a.vocab == 0
        || a.repeats == 0
    {
        stepwise_cli::usage_bail!(
            "--batch, --text-tokens, --patches, --steps, --vocab and --repeats must be at least 1, --seq-steps at \
             least 2"
        );
    }
    // A transformer without width, layers or heads has no parameters to train (the fused layers refuse it late).
    stepwise_cli::cli_util::require_at_least_one(&[
        ("--dim-text", a.dim_text),
        ("--dim-image", a.dim_image),
        ("--model-dim", a.model_dim),
        ("--layers", a.layers),
        ("--heads", a.heads),
    ])?;
    stepwise_cli::cli_util::require_heads_divide(("--model-dim", a.model_dim), ("--heads", a.heads))?;
    let threads = rayon::current_num_threads();
    let mut cfg = SeqConfig::new(FeatureKind::Multimodal, a.dim_text, a.dim_image);
    cfg.dim = a.model_dim;
    cfg.layers = a.layers;
    cfg.heads = a.heads;
    cfg.ff = 4 * a.model_dim;
    cfg.max_tokens = a.text_tokens;
    cfg.max_patches = a.patches;
    cfg.max_steps = a.seq_steps.max(16);
    if a.text_tower > 0 {
        if !a.dim_text.is_multiple_of(TOWER_HEADS) {
            stepwise_cli::usage_bail!(
                "--text-tower: --dim-text {} is not a multiple of {TOWER_HEADS} heads",
                a.dim_text
            );
        }
        cfg.text_tower = Some(TextTowerConfig {
            encoder: "random".into(),
            version: "bench".into(),
            frozen_layers: 0,
            tuned_layers: a.text_tower,
            hidden: a.dim_text,
            heads: TOWER_HEADS,
            ff: 4 * a.dim_text,
        });
    }
    let model = SeqModel::new(cfg.clone(), 0)?;
    println!(
        "Sequencing-model training benchmark: {threads} threads; batch {} sequences × {} steps × ({} text rows \
         {}-d + {} image rows {}-d); transformer {} × {} × {} heads; {} fine-tuned text-encoder layers; {} \
         parameters; {} repeat(s)",
        a.batch,
        a.seq_steps,
        a.text_tokens,
        a.dim_text,
        a.patches,
        a.dim_image,
        a.layers,
        a.model_dim,
        a.heads,
        a.text_tower,
        model.parameter_count(),
        a.repeats
    );
    let parameters = model.parameter_count() as u64;
    drop(model);
    // Batches are made once, before any timing; the raw sequences they come from are dropped.
    let data = Inputs {
        steps: batches(&a, &cfg, &random_sequences(&a, a.batch * (a.warmup + a.steps).clamp(1, 4), "bench-seq/steps"))?,
        epoch: batches(&a, &cfg, &random_sequences(&a, a.epoch_sequences, "bench-seq/epoch"))?,
        pretrain: random_sequences(&a, a.batch, "bench-seq/pretrain").into_iter().map(|(s, _)| s).collect(),
    };
    let n = |x: usize| x.to_string();
    let args: Vec<String> = [
        "--batch",
        &n(a.batch),
        "--seq-steps",
        &n(a.seq_steps),
        "--text-tokens",
        &n(a.text_tokens),
        "--patches",
        &n(a.patches),
        "--dim-text",
        &n(a.dim_text),
        "--dim-image",
        &n(a.dim_image),
        "--model-dim",
        &n(a.model_dim),
        "--layers",
        &n(a.layers),
        "--heads",
        &n(a.heads),
        "--max-positions",
        &n(cfg.positions()),
        "--max-steps",
        &n(cfg.max_steps),
        "--warmup",
        &n(a.warmup),
        "--steps",
        &n(a.steps),
        "--epoch-sequences",
        &n(a.epoch_sequences),
        "--vocab",
        &n(a.vocab),
        "--text-tower",
        &n(a.text_tower),
        "--pretrain-steps",
        &n(PRETRAIN_TIMED),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (ours, theirs) = in_turn(
        a.repeats,
        || measure(&a, &cfg, &data),
        || torch_reference(a.python.as_ref(), &a.reference, threads, &args),
    )?;
    let steps: Vec<f64> = ours.iter().map(|m| m.step).collect();
    let epochs: Option<Vec<f64>> = ours.iter().map(|m| m.epoch).collect();
    let pretrain: Vec<f64> = ours.iter().map(|m| m.pretrain_step).collect();
    // Later repeats start with the previous pretraining's memory still held by the allocator: the first is the
    // fine-tuning's own peak.
    let peak = ours.first().and_then(|m| m.peak).unwrap_or(f64::NAN);
    println!("\nstepwise (candle):");
    println!("  training step        {}", Repeated(&steps).describe(3, &format!("median of {} steps", a.steps)));
    if let Some(e) = &epochs {
        let r = Repeated(e);
        let rate = format!("{:.1} sequences/s", a.epoch_sequences as f64 / r.median());
        println!("  epoch of {:>5} seq.  {}", a.epoch_sequences, r.describe(1, &rate));
    }
    let what = format!("median of {} steps: MLM + ISP / PISP / SMRM, vocabulary {}", PRETRAIN_TIMED, a.vocab);
    println!("  pretraining step     {}", Repeated(&pretrain).describe(3, &what));
    println!("  peak memory          {peak:>9.0} MiB (fine-tuning, first repeat; inputs included)");
    let mut ok = compare(
        &theirs,
        &steps,
        epochs.as_deref(),
        &format!("epoch of {:>5} seq.", a.epoch_sequences),
        parameters,
        " (the reference model also holds the pretraining heads; stepwise's fine-tuned model only the [MASK] vector)",
    );
    let ref_pretrain: Option<Vec<f64>> =
        theirs.as_ref().ok().filter(|r| !r.is_empty()).and_then(|r| r.iter().map(|r| r.pretrain_step).collect());
    if let Some(rp) = ref_pretrain {
        let rp = Repeated(&rp).median();
        let ratio = Repeated(&pretrain).median() / rp;
        println!("  pretraining step     {ratio:>9.2}   {}   (PyTorch {rp:.3} s)", verdict(ratio <= TARGET_RATIO));
        ok &= ratio <= TARGET_RATIO;
    }
    if a.check && !ok {
        anyhow::bail!("a training-speed target was missed");
    }
    Ok(())
}

/// A batch of sequences and each sequence's gold order.
type Labelled = (SeqBatch, Vec<Vec<usize>>);

/// The benchmark's inputs, made once before any timing.
struct Inputs {
    steps: Vec<Labelled>,
    epoch: Vec<Labelled>,
    pretrain: Vec<Vec<StepInput>>,
}

/// `seqs` in batches of `--batch`, as the model reads them.
fn batches(a: &Args, cfg: &SeqConfig, seqs: &[(Vec<StepInput>, Vec<usize>)]) -> anyhow::Result<Vec<Labelled>> {
    seqs.chunks(a.batch)
        .map(|c| {
            let steps: Vec<&[StepInput]> = c.iter().map(|(s, _)| s.as_slice()).collect();
            let b = SeqBatch::new(&steps, cfg).map_err(anyhow::Error::msg)?;
            Ok((b, c.iter().map(|(_, o)| o.clone()).collect()))
        })
        .collect()
}

/// One repeat of stepwise's measurement.
struct Measurement {
    /// The median of the timed fine-tuning steps.
    step: f64,
    epoch: Option<f64>,
    /// The median of the timed pretraining steps.
    pretrain_step: f64,
    peak: Option<f64>,
}

/// Timed pretraining steps (after 2 untimed ones).
const PRETRAIN_TIMED: usize = 4;

/// Time `--steps` fine-tuning steps, one epoch and the pretraining steps on fresh models and optimisers.
fn measure(a: &Args, cfg: &SeqConfig, data: &Inputs) -> anyhow::Result<Measurement> {
    let model = SeqModel::new(cfg.clone(), 0)?;
    process::reset_peak_rss();
    let step_batches = &data.steps;
    let mut adam = Adam::new(&model.params, 5e-4)?;
    let mut step = |b: &Labelled| -> anyhow::Result<()> {
        // One reference per sequence, as the PyTorch reference trains.
        let refs: Vec<OrderLabels<'_>> =
            b.1.iter().map(|r| OrderLabels::of_references(std::slice::from_ref(r))).collect();
        let loss = model.order_loss(&b.0, &refs)?;
        adam.step(&model.params, &loss)?;
        Ok(())
    };
    let times = time_steps(a.warmup, a.steps, |i| step(&step_batches[i % step_batches.len()]))?;
    let step_median = times[times.len() / 2];
    let epoch = if a.epoch_sequences > 0 {
        let t = Instant::now();
        for b in &data.epoch {
            step(b)?;
        }
        Some(t.elapsed().as_secs_f64())
    } else {
        None
    };
    let peak = process::peak_rss_mib();

    // The pretraining step: a batch of each objective in turn (MLM added to each), timed on its own model (without
    // a text tower: fine-tuning alone trains one).
    let mut pcfg = cfg.clone();
    pcfg.vocab = a.vocab;
    pcfg.text_tower = None;
    let pre = SeqModel::new(pcfg, 0)?.with_pretraining_heads()?;
    let mut pre_adam = Adam::new(&pre.params, 5e-4)?;
    let objectives = PretrainConfig { objectives: Objective::ALL.to_vec(), ..PretrainConfig::default() };
    // Batches are made before timing (as the fine-tuning ones): 2 untimed steps, then the timed ones.
    let pre_batches =
        [Objective::Isp, Objective::Smrm, Objective::Isp, Objective::Pisp, Objective::Smrm, Objective::Isp]
            .into_iter()
            .enumerate()
            .map(|(i, obj)| {
                let mut rng = stepwise_core::rng::rng_for(0, &format!("bench-seq/pretrain/{i}"));
                pretrain_batch(&pre, &data.pretrain, obj, &objectives, &mut rng)
            })
            .collect::<Result<Vec<_>, _>>()?;
    let pre_times = time_steps(2, PRETRAIN_TIMED, |i| -> anyhow::Result<()> {
        if let Some(loss) = pretrain_loss(&pre, &pre_batches[i % pre_batches.len()])? {
            pre_adam.step(&pre.params, &loss)?;
        }
        Ok(())
    })?;
    let pre_median = pre_times[pre_times.len() / 2];
    Ok(Measurement { step: step_median, epoch, pretrain_step: pre_median, peak })
}
