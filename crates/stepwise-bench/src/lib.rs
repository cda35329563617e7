//! stepwise's benchmarks, beside the product (as ruff keeps `ruff_benchmark`): each measures a target against a
//! reference run in the same invocation (faiss, onnxruntime, PyTorch on CPU, PIL) or checks a guarantee end to
//! end. The `stepwise-bench` binary runs them; `stepwise bench ...` forwards to it under the same names.
//!
//! - [`features`]: exact k-NN against faiss, HNSW recall, feature-store throughput
//! - [`metrics`]: sequencing metrics on a million predictions
//! - [`encoders`]: MiniLM and EfficientNet-Lite against onnxruntime, photo files against PIL + onnxruntime
//! - [`ingest`]: ingest + clean + stats of 100,000 procedures
//! - [`world`]: the built-in world at 100,000 procedures, images per second
//! - [`sweep`]: the full knob suite over 20,000 world procedures
//! - [`train`], [`seq_train`]: GM3C and sequencing training steps and epochs against PyTorch
//! - [`r2vq`]: reading, answering and generating R2VQ
//! - [`annotate`]: the annotation server under simulated people, killed mid-way
//! - [`reliability`]: threads, kill -9 and hostile inputs
//! - [`process`]: what a benchmark measures about its own process (peak memory, CPU time)

pub mod annotate;
pub mod encoders;
pub mod features;
pub mod ingest;
pub mod metrics;
pub mod process;
pub mod r2vq;
pub mod reliability;
pub mod seq_train;
pub mod sweep;
pub mod train;
pub mod world;

use std::path::PathBuf;

use stepwise_cli::cli_util::STEPWISE_EXE;

/// The `stepwise` program the end-to-end benchmarks run (`annotate serve`, the demo, the killed commands):
/// `$STEPWISE_EXE` (set by `stepwise bench`, which forwards here), else the `stepwise` next to this program
/// (where cargo builds and installs both).
pub fn stepwise_exe() -> anyhow::Result<PathBuf> {
    stepwise_cli::cli_util::companion_program("stepwise", STEPWISE_EXE).map_err(|looked_at| {
        anyhow::anyhow!(
            "this benchmark runs the stepwise program, which is not at {} (build it with `cargo build --release`, \
             or name it in ${STEPWISE_EXE})",
            looked_at.display()
        )
    })
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Exact k-NN vs faiss IndexFlatIP (target ratio <= 1.0), HNSW recall, feature-store throughput (< 30 s).
    Features(features::Args),
    /// Sequencing metrics on 1,000,000 random five-step predictions (target < 1 s).
    Metrics(metrics::Args),
    /// MiniLM and EfficientNet-Lite0/2 against onnxruntime (targets: >= 1x; photo files >= 1.5x PIL + onnxruntime).
    Encoders(encoders::Args),
    /// Ingest + clean + stats of 100,000 generated procedures (targets: < 30 s, < 1 GB peak memory).
    Ingest(ingest::Args),
    /// Built-in world: 100,000 procedures without images (target < 120 s), and images/s with stored images.
    World(world::Args),
    /// Full suite (9 settings × 4 tasks) over 20,000 world procedures / ~233,000 images (targets: < 60 s, < 2 GiB).
    Sweep(sweep::Args),
    /// HTRN training step and epoch against the same model in PyTorch on CPU (target ratio <= 1.0), peak memory.
    Train(train::Args),
    /// Sequencing model (encoder + BERSON decoder) training step and epoch against PyTorch on CPU (target ratio
    /// <= 1.0), the pretraining step, peak memory.
    SeqTrain(seq_train::Args),
    /// R2VQ: reading the SemEval test file (target < 1 s), answering it, generating questions for 1,000 recipes
    /// (target < 10 s).
    R2vq(r2vq::Args),
    /// The annotation server: 100 simulated people, 10,000 HITs, kill -9 mid-way; 0 lost or duplicated answers.
    Annotate(annotate::Args),
    /// Guarantees in one place: --threads 1 vs 2 byte-identical, kill -9 then re-run, hostile inputs per reader.
    Reliability(reliability::Args),
}

/// Run one benchmark.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Features(a) => features::run(a),
        BenchCommand::Metrics(a) => metrics::run(a),
        BenchCommand::Encoders(a) => encoders::run(a),
        BenchCommand::Ingest(a) => ingest::run(a),
        BenchCommand::World(a) => world::run(a),
        BenchCommand::Sweep(a) => sweep::run(a),
        BenchCommand::Train(a) => train::run(a),
        BenchCommand::SeqTrain(a) => seq_train::run(a),
        BenchCommand::R2vq(a) => r2vq::run(a),
        BenchCommand::Annotate(a) => annotate::run(a),
        BenchCommand::Reliability(a) => reliability::run(a),
    }
}
