//! `stepwise bench train`: training speed of the M3C model with the HTRN scorer against the same architecture in
//! PyTorch on CPU (`scripts/bench/htrn_torch.py`), run in the same invocation with the same shapes and threads.
//!
//! Measured: one training step (forward, loss, backward, Adam) on a batch of random questions — the median of
//! `--steps` timed steps after `--warmup` — and one epoch over `--epoch-questions` questions; the peak memory
//! of each process. The whole measurement is repeated `--repeats` times, stepwise and PyTorch in turn (a fresh
//! model each time), and the median over repeats is compared, with the range printed. Target: stepwise's time /
//! PyTorch's time ≤ 1.0 for both. Inputs are random normal vectors made before timing (both sides), one vector
//! per context step (the flat context encoder) and no padding.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use rand::Rng;
use stepwise_core::Task;
use stepwise_models::item_features::ItemMatrix;
use stepwise_models::m3c::inputs::{ContextKind, QueryKind};
use stepwise_models::m3c::model::Batch;
use stepwise_models::m3c::train::Stepper;
use stepwise_models::m3c::{HtrnConfig, InputSpec, M3cModel, ModelConfig, QuestionInput, ScorerKind};

use crate::process;

pub const TARGET_RATIO: f64 = 1.0;

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  stepwise bench train --python /tmp/torch-venv/bin/python\n  \
    stepwise bench train --epoch-questions 2000 --steps 3\n\n\
    The reference needs a Python with torch and numpy (scripts/bench/requirements-torch.txt).")]
pub struct Args {
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    #[arg(long, default_value_t = 4)]
    pub candidates: usize,
    #[arg(long, default_value_t = 20)]
    pub context_steps: usize,
    #[arg(long, default_value_t = 4)]
    pub query_len: usize,
    #[arg(long, default_value_t = 384)]
    pub dim_context: usize,
    #[arg(long, default_value_t = 1280)]
    pub dim_query: usize,
    #[arg(long, default_value_t = 256)]
    pub hidden: usize,
    #[arg(long, default_value_t = 512)]
    pub model_dim: usize,
    #[arg(long, default_value_t = 4)]
    pub layers: usize,
    #[arg(long, default_value_t = 8)]
    pub heads: usize,
    /// Untimed steps first.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Timed single steps (the median is compared).
    #[arg(long, default_value_t = 5)]
    pub steps: usize,
    /// Questions of the timed epoch (0: no epoch).
    #[arg(long, default_value_t = 2_000)]
    pub epoch_questions: usize,
    /// Repeats of the whole measurement, stepwise and PyTorch in turn (medians compared, ranges printed).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Python for the PyTorch reference (default: $STEPWISE_BENCH_PYTHON, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The reference script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench/htrn_torch.py"))]
    pub reference: PathBuf,
    /// Exit with status 1 when a target is missed.
    #[arg(long)]
    pub check: bool,
}

fn random_questions(a: &Args, n: usize, key: &str) -> Vec<QuestionInput> {
    let mut rng = stepwise_core::rng::rng_for(0, key);
    let mut normal = move || -> f32 {
        let u1: f32 = rng.random_range(f32::EPSILON..1.0);
        let u2: f32 = rng.random();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    };
    (0..n)
        .map(|i| QuestionInput {
            qid: i.to_string(),
            recipe_id: i.to_string(),
            context: (0..a.context_steps)
                .map(|_| ItemMatrix { dim: a.dim_context, data: (0..a.dim_context).map(|_| normal()).collect() })
                .collect(),
            candidates: (0..a.candidates)
                .map(|_| ItemMatrix {
                    dim: a.dim_query,
                    data: (0..a.query_len * a.dim_query).map(|_| normal()).collect(),
                })
                .collect(),
            // HTRN, the benchmarked scorer, reads no candidate item rows.
            candidate_items: None,
            answer: i % a.candidates,
        })
        .collect()
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.batch == 0 || a.candidates < 2 || a.context_steps == 0 || a.query_len == 0 || a.steps == 0 || a.repeats == 0 {
        stepwise_cli::usage_bail!(
            "--batch, --context-steps, --query-len, --steps and --repeats must be at least 1, --candidates 2"
        );
    }
    // Layers without width, or attention heads that do not divide it, fail inside the model: refuse them here.
    stepwise_cli::cli_util::require_at_least_one(&[
        ("--dim-context", a.dim_context),
        ("--dim-query", a.dim_query),
        ("--hidden", a.hidden),
        ("--model-dim", a.model_dim),
        ("--heads", a.heads),
    ])?;
    stepwise_cli::cli_util::require_heads_divide(("--model-dim", a.model_dim), ("--heads", a.heads))?;
    let threads = rayon::current_num_threads();
    let spec = InputSpec {
        task: Task::VisualCloze,
        context: ContextKind::Text,
        query: QueryKind::Images,
        tokens: false,
        max_context_steps: a.context_steps,
        max_rows_per_step: 1,
    };
    let mut cfg = ModelConfig::new(ScorerKind::Htrn, spec, a.dim_context, a.dim_query);
    cfg.hidden = a.hidden;
    cfg.htrn =
        HtrnConfig { layers: a.layers, dim: a.model_dim, heads: a.heads, ff: 4 * a.model_dim, max_positions: 128 };
    let model = M3cModel::new(cfg.clone(), 0)?;
    println!(
        "HTRN training benchmark: {threads} threads; batch {} × {} candidates, {} context steps ({}-d), {} query \
         items ({}-d); LSTM hidden {}, transformer {} × {} × {} heads; {} parameters; {} repeat(s)",
        a.batch,
        a.candidates,
        a.context_steps,
        a.dim_context,
        a.query_len,
        a.dim_query,
        a.hidden,
        a.layers,
        a.model_dim,
        a.heads,
        model.parameter_count(),
        a.repeats
    );
    let parameters = model.parameter_count() as u64;
    drop(model);
    let step_questions = random_questions(&a, a.batch * (a.warmup + a.steps).clamp(1, 4), "bench-train/steps");
    let epoch_questions = random_questions(&a, a.epoch_questions, "bench-train/epoch");
    let (ours, theirs) =
        in_turn(a.repeats, || measure(&a, &cfg, &step_questions, &epoch_questions), || reference(&a, threads))?;
    let steps: Vec<f64> = ours.iter().map(|m| m.step).collect();
    let epochs: Option<Vec<f64>> = ours.iter().map(|m| m.epoch).collect();
    let peak = ours.iter().filter_map(|m| m.peak).fold(f64::NAN, f64::max);
    println!("\nstepwise (candle):");
    println!("  training step        {}", Repeated(&steps).describe(3, &format!("median of {} steps", a.steps)));
    if let Some(e) = &epochs {
        let r = Repeated(e);
        let rate = format!("{:.1} questions/s", a.epoch_questions as f64 / r.median());
        println!("  epoch of {:>6} q.   {}", a.epoch_questions, r.describe(1, &rate));
    }
    println!("  peak memory          {peak:>9.0} MiB (inputs included; the largest over repeats)");
    let epoch_label = format!("epoch of {:>6} q.", a.epoch_questions);
    let ok = compare(&theirs, &steps, epochs.as_deref(), &epoch_label, parameters, "");
    if a.check && !ok {
        anyhow::bail!("a training-speed target was missed");
    }
    Ok(())
}

/// `repeats` measurements of stepwise (`ours`) and of the reference (`theirs`) in turn. The reference runs beside
/// stepwise until it fails once; its error is then what [`compare`] reports.
pub fn in_turn<M>(
    repeats: usize,
    mut ours: impl FnMut() -> anyhow::Result<M>,
    mut theirs: impl FnMut() -> Result<Reference, String>,
) -> anyhow::Result<(Vec<M>, References)> {
    let (mut mine, mut refs) = (Vec::new(), Ok(Vec::new()));
    for _ in 0..repeats {
        mine.push(ours()?);
        if let Ok(done) = &mut refs {
            match theirs() {
                Ok(r) => done.push(r),
                Err(e) => refs = Err(e),
            }
        }
    }
    Ok((mine, refs))
}

/// One repeat of stepwise's measurement.
struct Measurement {
    /// The median of the timed steps.
    step: f64,
    epoch: Option<f64>,
    peak: Option<f64>,
}

/// Time `--steps` training steps and one epoch on a fresh model and optimiser.
fn measure(
    a: &Args,
    cfg: &ModelConfig,
    step_questions: &[QuestionInput],
    epoch_questions: &[QuestionInput],
) -> anyhow::Result<Measurement> {
    let model = M3cModel::new(cfg.clone(), 0)?;
    let batches = |qs: &[QuestionInput]| -> anyhow::Result<Vec<Batch>> {
        qs.chunks(a.batch)
            .map(|c| Batch::new(&c.iter().collect::<Vec<_>>(), &model.config).map_err(anyhow::Error::msg))
            .collect()
    };
    process::reset_peak_rss();
    let step_batches = batches(step_questions)?;
    let mut stepper = Stepper::new(&model, 5e-4)?;
    let times =
        time_steps(a.warmup, a.steps, |i| stepper.step(&model, &step_batches[i % step_batches.len()]).map(drop))?;
    let epoch = if epoch_questions.is_empty() {
        None
    } else {
        let eb = batches(epoch_questions)?;
        let t = Instant::now();
        for b in &eb {
            stepper.step(&model, b)?;
        }
        Some(t.elapsed().as_secs_f64())
    };
    Ok(Measurement { step: times[times.len() / 2], epoch, peak: process::peak_rss_mib() })
}

/// Seconds measured once per repeat.
pub struct Repeated<'a>(pub &'a [f64]);

impl Repeated<'_> {
    pub fn median(&self) -> f64 {
        let mut v = self.0.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
    }

    /// `1.029 s (…; median of 3 repeats, range 1.021–1.050 s)`, or without the repeats part for one value.
    pub fn describe(&self, digits: usize, what: &str) -> String {
        let (lo, hi) = self.0.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)));
        let mut parts: Vec<String> = Vec::new();
        if !what.is_empty() {
            parts.push(what.to_string());
        }
        if self.0.len() > 1 {
            parts.push(format!("median of {} repeats, range {lo:.digits$}–{hi:.digits$} s", self.0.len()));
        }
        let tail = if parts.is_empty() { String::new() } else { format!(" ({})", parts.join("; ")) };
        format!("{:>9.digits$} s{tail}", self.median())
    }
}

/// Print the reference's measurements and the ratios of the medians over repeats against stepwise's step and
/// epoch times (one value per repeat on each side); whether every ratio meets the target. `params_note` explains
/// an expected difference in parameter counts.
pub fn compare(
    reference: &References,
    steps: &[f64],
    epochs: Option<&[f64]>,
    epoch_label: &str,
    parameters: u64,
    params_note: &str,
) -> bool {
    let refs = match reference {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => return true,
        Err(e) => {
            println!("\nreference unavailable: {e}");
            return true;
        }
    };
    let first = &refs[0];
    let ref_steps: Vec<f64> = refs.iter().map(|r| r.step).collect();
    let ref_epochs: Option<Vec<f64>> = refs.iter().map(|r| r.epoch).collect();
    let mut ok = true;
    println!("\nPyTorch {} (reference, same run):", first.version);
    println!("  training step        {}", Repeated(&ref_steps).describe(3, "median"));
    if let Some(e) = &ref_epochs {
        println!("  {epoch_label:<20} {}", Repeated(e).describe(1, ""));
    }
    let peak = refs.iter().filter_map(|r| r.peak).fold(f64::NAN, f64::max);
    println!(
        "  peak memory          {peak:>9.0} MiB{}",
        if refs.len() > 1 { " (the largest over repeats)" } else { "" }
    );
    println!("  parameters           {:>9}", first.parameters);
    if first.parameters != parameters {
        println!("  parameter counts differ: stepwise {parameters} vs {}{params_note}", first.parameters);
    }
    let ratio = Repeated(steps).median() / Repeated(&ref_steps).median();
    println!("\nratio stepwise / PyTorch (medians; lower is faster; target <= {TARGET_RATIO}):");
    println!("  training step        {ratio:>9.2}   {}", verdict(ratio <= TARGET_RATIO));
    ok &= ratio <= TARGET_RATIO;
    if let (Some(e), Some(re)) = (epochs, &ref_epochs) {
        let ratio = Repeated(e).median() / Repeated(re).median();
        println!("  epoch                {ratio:>9.2}   {}", verdict(ratio <= TARGET_RATIO));
        ok &= ratio <= TARGET_RATIO;
    }
    ok
}

/// Run `step(i)` for `warmup + steps` indices and return the timed ones' seconds, sorted (the warm-up untimed).
pub fn time_steps<E>(warmup: usize, steps: usize, mut step: impl FnMut(usize) -> Result<(), E>) -> Result<Vec<f64>, E> {
    let mut times = Vec::new();
    for i in 0..warmup + steps {
        let t = Instant::now();
        step(i)?;
        if i >= warmup {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times)
}

pub fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

/// The reference's measurements, one per repeat, or why it could not run.
pub type References = Result<Vec<Reference>, String>;

/// What a PyTorch reference script printed (its last JSON line).
pub struct Reference {
    pub step: f64,
    /// The pretraining step's median (seq_torch.py with --pretrain-steps).
    pub pretrain_step: Option<f64>,
    pub epoch: Option<f64>,
    pub peak: Option<f64>,
    pub parameters: u64,
    pub version: String,
}

fn reference(a: &Args, threads: usize) -> Result<Reference, String> {
    let n = |x: usize| x.to_string();
    let args: Vec<String> = [
        "--batch",
        &n(a.batch),
        "--candidates",
        &n(a.candidates),
        "--context-steps",
        &n(a.context_steps),
        "--query-len",
        &n(a.query_len),
        "--dim-context",
        &n(a.dim_context),
        "--dim-query",
        &n(a.dim_query),
        "--hidden",
        &n(a.hidden),
        "--model-dim",
        &n(a.model_dim),
        "--layers",
        &n(a.layers),
        "--heads",
        &n(a.heads),
        "--warmup",
        &n(a.warmup),
        "--steps",
        &n(a.steps),
        "--epoch-questions",
        &n(a.epoch_questions),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    torch_reference(a.python.as_ref(), &a.reference, threads, &args)
}

/// Run a PyTorch reference script of scripts/bench with `--json --threads N` and `args`.
pub fn torch_reference(
    python: Option<&PathBuf>,
    script: &std::path::Path,
    threads: usize,
    args: &[String],
) -> Result<Reference, String> {
    if !script.is_file() {
        return Err(format!("{} not found", script.display()));
    }
    let python = python
        .cloned()
        .or_else(|| std::env::var_os("STEPWISE_BENCH_PYTHON").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("python3"));
    let out = Command::new(&python)
        .arg(script)
        .args(["--json", "--threads", &threads.to_string()])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
        return Err(format!("{} failed: {last}", python.display()));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("no JSON in the reference's output: {stdout}"))?;
    Ok(Reference {
        step: v
            .get("step_seconds_median")
            .and_then(|x| x.as_f64())
            .ok_or("reference output lacks step_seconds_median")?,
        pretrain_step: v.get("pretrain_step_seconds_median").and_then(|x| x.as_f64()),
        epoch: v.get("epoch_seconds").and_then(|x| x.as_f64()),
        peak: v.get("peak_rss_mib").and_then(|x| x.as_f64()),
        parameters: v.get("parameters").and_then(|x| x.as_u64()).unwrap_or(0),
        version: v.pointer("/versions/torch").and_then(|x| x.as_str()).unwrap_or("?").to_string(),
    })
}
