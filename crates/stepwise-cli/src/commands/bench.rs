//! `stepwise bench ...`: benchmarks that print throughput and ratios against a reference measured in the same run.
//! Each benchmark lives with the command family it measures; this module only dispatches.

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Exact k-NN vs faiss IndexFlatIP (target ratio <= 1.0), HNSW recall, feature-store throughput (< 30 s).
    Features(super::bench_features::Args),
    /// Sequencing metrics on 1,000,000 random five-step predictions (target < 1 s).
    Metrics(super::bench_metrics::Args),
    /// MiniLM and EfficientNet-Lite0/2 against onnxruntime (targets: >= 1x; photo files >= 1.5x PIL + onnxruntime).
    Encoders(super::bench_encoders::Args),
    /// Ingest + clean + stats of 100,000 generated procedures (targets: < 30 s, < 1 GB peak memory).
    Ingest(super::bench_ingest::Args),
    /// Built-in world: 100,000 procedures without images (target < 120 s), and images/s with stored images.
    World(super::bench_world::Args),
    /// Full suite (9 settings × 4 tasks) over 20,000 world procedures / ~233,000 images (targets: < 60 s, < 2 GiB).
    Sweep(super::bench_sweep::Args),
    /// HTRN training step and epoch against the same model in PyTorch on CPU (target ratio <= 1.0), peak memory.
    Train(super::bench_train::Args),
    /// Sequencing model (encoder + BERSON decoder) training step and epoch against PyTorch on CPU (target ratio
    /// <= 1.0), the pretraining step, peak memory.
    SeqTrain(super::bench_seq_train::Args),
    /// R2VQ: reading the SemEval test file (target < 1 s), answering it, generating questions for 1,000 recipes
    /// (target < 10 s).
    R2vq(super::bench_r2vq::Args),
    /// The annotation server: 100 simulated people, 10,000 HITs, kill -9 mid-way; 0 lost or duplicated answers.
    Annotate(super::bench_annotate::Args),
    /// Guarantees in one place: --threads 1 vs 2 byte-identical, kill -9 then re-run, hostile inputs per reader.
    Reliability(super::bench_reliability::Args),
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Features(a) => super::bench_features::run(a),
        BenchCommand::Metrics(a) => super::bench_metrics::run(a),
        BenchCommand::Encoders(a) => super::bench_encoders::run(a),
        BenchCommand::Ingest(a) => super::bench_ingest::run(a),
        BenchCommand::World(a) => super::bench_world::run(a),
        BenchCommand::Sweep(a) => super::bench_sweep::run(a),
        BenchCommand::Train(a) => super::bench_train::run(a),
        BenchCommand::SeqTrain(a) => super::bench_seq_train::run(a),
        BenchCommand::R2vq(a) => super::bench_r2vq::run(a),
        BenchCommand::Annotate(a) => super::bench_annotate::run(a),
        BenchCommand::Reliability(a) => super::bench_reliability::run(a),
    }
}

/// What the benchmarks measure about this process (Linux /proc; `None` elsewhere).
pub mod process {
    /// VmHWM (peak resident set) of this process, in MiB.
    pub fn peak_rss_mib() -> Option<f64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    }

    /// User + system CPU time of this process so far (all threads), from /proc/self/stat.
    pub fn cpu_seconds() -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which is in parentheses and may hold spaces): utime is the 14th field.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
        Some(ticks / 100.0) // USER_HZ is 100 on Linux
    }

    /// Reset the peak-RSS counter (Linux: writing 5 to /proc/self/clear_refs), so VmHWM covers what follows.
    /// Before resetting, hand glibc's free heap back to the system (the reset peak would start from it). The
    /// binary's global allocator is mimalloc, whose retained pages are not trimmed here: the measured peak can
    /// only be an overestimate.
    pub fn reset_peak_rss() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            unsafe extern "C" {
                fn malloc_trim(pad: usize) -> i32;
            }
            // SAFETY: glibc's malloc_trim only releases free heap pages; it has no preconditions.
            unsafe {
                malloc_trim(0);
            }
        }
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    }
}
