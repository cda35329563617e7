//! `stepwise bench ...`: benchmarks that print throughput and ratios against a reference measured in the same run.
//! Each benchmark lives with the command family it measures; this module only dispatches.

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Exact k-NN vs faiss IndexFlatIP (target ratio <= 1.0), HNSW recall, feature-store throughput (< 30 s).
    Features(super::bench_features::Args),
    /// Sequencing metrics on 1,000,000 random five-step predictions (target < 1 s).
    Metrics(super::bench_metrics::Args),
    /// MiniLM sentences/s and EfficientNet-Lite0 images/s against onnxruntime (targets: >= 0.5x, >= 20 img/s).
    Encoders(super::bench_encoders::Args),
    /// Ingest + clean + stats of 100,000 generated procedures (targets: < 30 s, < 1 GB peak memory).
    Ingest(super::bench_ingest::Args),
    /// Built-in world: 100,000 procedures without images (target < 120 s), and images/s with stored images.
    World(super::bench_world::Args),
    /// Full suite (9 settings × 4 tasks) over 20,000 world procedures / ~233,000 images (targets: < 60 s, < 2 GiB).
    Sweep(super::bench_sweep::Args),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Features(a) => super::bench_features::run(a),
        BenchCommand::Metrics(a) => super::bench_metrics::run(a),
        BenchCommand::Encoders(a) => super::bench_encoders::run(a),
        BenchCommand::Ingest(a) => super::bench_ingest::run(a),
        BenchCommand::World(a) => super::bench_world::run(a),
        BenchCommand::Sweep(a) => super::bench_sweep::run(a),
    }
}
