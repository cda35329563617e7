//! `stepwise bench ingest`: ingest + clean + stats of a generated corpus (default 100,000 procedures of 6 steps of
//! 80 tokens), through the same library calls as the commands, against a reference measured in the same run.
//!
//! Timed: `ingest` (read JSONL, check ids and images, write JSONL + Parquet + manifest), `clean` (load, normalise,
//! learn word frequencies, split tokens, filter, write the cleaned corpus and report) and `stats` (load, compute,
//! render). Not timed: generating the input. The reference is the least any reader must do: parse every line of
//! the same file with serde_json into a value, single-threaded. Peak memory is the process's VmHWM.

use crate::process::{cpu_seconds, peak_rss_mib};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use stepwise_core::corpus::Corpus;
use stepwise_ingest::synth::{SynthSpec, write_synthetic_jsonl};
use stepwise_ingest::{CleanConfig, CleanResources, IngestOptions, Registry, clean_corpus_dir, corpus_stats, ingest};

use stepwise_cli::usage_bail;

/// Time ingest + clean + stats on a generated corpus.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  stepwise bench ingest                  # 100,000 procedures × 6 steps × 80 tokens; \
                        targets < 30 s and < 1 GB peak\n  stepwise bench ingest -n 20000 --keep /tmp/bench-ingest"
)]
pub struct Args {
    /// Procedures to generate.
    #[arg(short, long, default_value_t = 100_000)]
    pub n: usize,
    /// Steps per procedure.
    #[arg(long, default_value_t = 6)]
    pub steps: usize,
    /// Tokens per step.
    #[arg(long, default_value_t = 80)]
    pub tokens: usize,
    /// Seed of the generated text.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Work in this folder and keep the files (default: a temporary folder, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Pass/fail target for the timed pipeline, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub target_seconds: f64,
    /// Pass/fail target for peak resident memory, in MiB.
    #[arg(long, default_value_t = 1024.0)]
    pub target_mib: f64,
}

/// Removes the work folder on drop (unless kept).
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.n == 0 || args.steps == 0 || args.tokens == 0 {
        usage_bail!("-n, --steps and --tokens must be at least 1");
    }
    let work = match &args.keep {
        Some(dir) => {
            if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
                usage_bail!("--keep {}: folder exists and is not empty", dir.display());
            }
            WorkDir { path: dir.clone(), keep: true }
        }
        None => WorkDir {
            path: std::env::temp_dir().join(format!("stepwise-bench-ingest-{}", std::process::id())),
            keep: false,
        },
    };
    std::fs::create_dir_all(&work.path)?;
    let input = work.path.join("synthetic.jsonl");
    let spec = SynthSpec { procedures: args.n, steps: args.steps, tokens_per_step: args.tokens, seed: args.seed };
    let t = Instant::now();
    let bytes = write_synthetic_jsonl(&input, &spec)?;
    let mb = bytes as f64 / 1e6;
    eprintln!(
        "generated {} procedures × {} steps × {} tokens: {mb:.1} MB in {:.2} s (not timed)",
        args.n,
        args.steps,
        args.tokens,
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let lines = reference_parse(&input)?;
    let reference = t.elapsed().as_secs_f64();
    if lines != args.n {
        anyhow::bail!("reference parse saw {lines} records, expected {}", args.n);
    }

    let corpus_dir = work.path.join("corpus");
    let clean_dir = work.path.join("clean");
    let load =
        std::fs::read_to_string("/proc/loadavg").ok().and_then(|l| l.split_whitespace().next().map(str::to_string));
    let cpu_start = cpu_seconds();
    let t_all = Instant::now();
    let t = Instant::now();
    let ingested = ingest(std::slice::from_ref(&input), &corpus_dir, &Registry::builtin(), &IngestOptions::default())?;
    let t_ingest = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let cleaned = clean_corpus_dir(&corpus_dir, &clean_dir, &CleanConfig::default(), CleanResources::default(), false)?;
    let t_clean = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let corpus = Corpus::load(&clean_dir)?;
    let stats = corpus_stats(&corpus.procedures, None, None, None);
    let table = stats.to_markdown();
    drop(corpus);
    let t_stats = t.elapsed().as_secs_f64();
    let total = t_all.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu_start).map(|(b, a)| b - a);
    let peak_mib = peak_rss_mib();

    println!(
        "ingest benchmark: {} procedures × {} steps × {} tokens ({mb:.1} MB JSONL), {} threads",
        args.n,
        args.steps,
        args.tokens,
        rayon::current_num_threads()
    );
    println!("  ingest  {t_ingest:>7.2} s  ({} procedures, {} steps)", ingested.procedures, ingested.steps);
    println!(
        "  clean   {t_clean:>7.2} s  ({} → {} procedures; {} unit splits, {} word splits, {} markup edits)",
        cleaned.procedures_in,
        cleaned.procedures_out,
        cleaned.rules.get("number_unit").map_or(0, |r| r.edits),
        cleaned.rules.get("segmentation").map_or(0, |r| r.edits),
        cleaned.rules.get("markup").map_or(0, |r| r.edits)
    );
    println!(
        "  stats   {t_stats:>7.2} s  ({} tokens, {:.1} tokens per step, table {} bytes)",
        stats.all.tokens,
        stats.all.tokens_per_step.mean,
        table.len()
    );
    println!("  total   {total:>7.2} s  = {:.0} procedures/s, {:.1} MB/s", args.n as f64 / total, mb / total);
    println!(
        "reference (serde_json parse of every line, single-threaded, same run): {reference:.2} s = {:.1} MB/s",
        mb / reference
    );
    println!("pipeline / reference: {:.1}×", total / reference);
    if let Some(c) = cpu {
        // Wall time on a shared machine depends on its load; CPU time says what the pipeline itself costs.
        println!(
            "cpu time of the timed stages (user+sys, all threads): {c:.2} s; load average at start: {}",
            load.as_deref().unwrap_or("?")
        );
    }
    match peak_mib {
        Some(p) => println!("peak resident memory (VmHWM): {p:.0} MiB"),
        None => println!("peak resident memory: unavailable (no /proc/self/status)"),
    }
    let time_ok = total < args.target_seconds;
    let mem_ok = peak_mib.is_none_or(|p| p < args.target_mib);
    println!("target < {:.0} s: {}", args.target_seconds, if time_ok { "PASS" } else { "FAIL" });
    println!("target < {:.0} MiB peak: {}", args.target_mib, if mem_ok { "PASS" } else { "FAIL" });
    if work.keep {
        eprintln!("files kept in {}", work.path.display());
    }
    if !(time_ok && mem_ok) {
        anyhow::bail!("ingest benchmark missed its target");
    }
    Ok(())
}

/// Parse every line of the file into a JSON value (values dropped at once); returns the number of records.
fn reference_parse(path: &Path) -> anyhow::Result<usize> {
    let reader = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let mut n = 0;
    for line in reader.lines() {
        let line = line?;
        if !line.trim().is_empty() {
            let v: serde_json::Value = serde_json::from_str(&line)?;
            n += usize::from(v.is_object());
        }
    }
    Ok(n)
}
