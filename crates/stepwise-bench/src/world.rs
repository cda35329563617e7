//! `stepwise bench world`: generating the built-in world at scale.
//!
//! Part 1 (target < 120 s on 2 cores): 100,000 procedures without stored images — generation (plans, text,
//! exact valid-order counts, ground truth) plus writing JSONL, Parquet and the manifest, exactly as
//! `stepwise world generate --no-images` does. Reference, measured in the same run: parsing the written JSONL
//! and serialising it again in canonical form, one thread (the pure JSON cost of a corpus this size).
//! Part 2: a smaller corpus with stored images (render + JPEG + write), in images/s; reference: rendering the
//! same images without encoding or writing.

use crate::process::peak_rss_mib;
use std::path::PathBuf;
use std::time::Instant;

use std::io::BufRead;

use rayon::prelude::*;
use stepwise_core::json::write_canonical;
use stepwise_world::{Domain, WorldParams, render_procedure_images, write_corpus};

use stepwise_cli::usage_bail;

/// Time world generation: 100,000 procedures without images, and a corpus with images.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  stepwise bench world                 # 100,000 procedures (< 120 s) + 500 with images\n  \
                        stepwise bench world -n 20000 --with-images 200 --domain assembly"
)]
pub struct Args {
    /// Procedures generated without images.
    #[arg(short, long, default_value_t = 100_000)]
    pub n: u64,
    /// Procedures generated with stored images (0 skips part 2).
    #[arg(long, default_value_t = 500)]
    pub with_images: u64,
    #[arg(long, default_value = "cooking", value_parser = ["cooking", "assembly"])]
    pub domain: String,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Pass/fail target for part 1, in seconds.
    #[arg(long, default_value_t = 120.0)]
    pub target_seconds: f64,
    /// Work folder (default: a temporary folder, removed afterwards).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.n == 0 {
        usage_bail!("-n must be at least 1");
    }
    let domain = Domain::parse(&args.domain).expect("clap checks the domain");
    let work = match &args.work_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            tempfile_in(d)?
        }
        None => tempfile_in(&std::env::temp_dir())?,
    };
    let threads = rayon::current_num_threads();

    // Part 1: no images, exactly what `stepwise world generate --no-images` does.
    let mut params = WorldParams::new(args.seed, domain, args.n);
    params.images_stored = false;
    let corpus_dir = work.path().join("corpus");
    let t = Instant::now();
    let summary = write_corpus(&params, &corpus_dir, false, &|_| {})?;
    let total = t.elapsed().as_secs_f64();
    let peak_mib = peak_rss_mib();
    let jsonl = corpus_dir.join("procedures.jsonl");
    let jsonl_mb = std::fs::metadata(&jsonl)?.len() as f64 / 1e6;
    let parquet_mb = std::fs::metadata(corpus_dir.join("procedures.parquet"))?.len() as f64 / 1e6;
    let t = Instant::now();
    let (records, complete) = reference_reserialize(&jsonl)?;
    let t_ref = t.elapsed().as_secs_f64();
    if records as u64 != args.n {
        anyhow::bail!("{}: {records} records, expected {}", jsonl.display(), args.n);
    }

    println!("world benchmark ({} domain, {threads} threads)", domain.as_str());
    println!(
        "part 1: {} procedures without images ({} steps; JSONL {jsonl_mb:.0} MB, Parquet {parquet_mb:.0} MB; {complete} with every valid order listed)",
        args.n, summary.steps
    );
    println!(
        "  generate + write JSONL/Parquet/manifest: {total:.2} s = {:.0} procedures/s, {:.0} steps/s",
        args.n as f64 / total,
        summary.steps as f64 / total
    );
    println!("  reference (parse + canonical re-serialisation of the same JSONL, one thread, same run): {t_ref:.2} s");
    println!("  total / reference: {:.2}×", total / t_ref);
    match peak_mib {
        Some(p) => println!("  peak resident memory (VmHWM): {p:.0} MiB"),
        None => println!("  peak resident memory: unavailable"),
    }
    let time_ok = total < args.target_seconds;
    println!("  target < {:.0} s: {}", args.target_seconds, if time_ok { "PASS" } else { "FAIL" });

    // Part 2: with images.
    if args.with_images > 0 {
        let mut params = WorldParams::new(args.seed, domain, args.with_images);
        params.images_stored = true;
        let dir = work.path().join("with-images");
        let t = Instant::now();
        let s = write_corpus(&params, &dir, false, &|_| {})?;
        let t_img = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let rendered: usize = (0..args.with_images)
            .into_par_iter()
            .map(|i| render_procedure_images(&params, i).map(|v| v.len()))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .sum();
        let t_render = t.elapsed().as_secs_f64();
        println!(
            "part 2: {} procedures with {} stored {}×{} JPEG images ({:.1} MB, {:.1} KB/image)",
            s.procedures,
            s.images_written,
            params.image_size,
            params.image_size,
            s.image_bytes as f64 / 1e6,
            s.image_bytes as f64 / 1e3 / s.images_written.max(1) as f64
        );
        println!(
            "  corpus with images  {t_img:>7.2} s  = {:.0} images/s (render + JPEG + write, plus text and ground truth)",
            s.images_written as f64 / t_img
        );
        println!(
            "  reference (render only, same images): {t_render:.2} s = {:.0} images/s",
            rendered as f64 / t_render
        );
        println!("  corpus / render-only: {:.2}×", t_img / t_render);
        // On demand, one image path at a time (how `stepwise embed` loads a --no-images world corpus).
        let paths: Vec<String> = stepwise_world::generate(&params)?
            .iter()
            .flat_map(|p| p.step_images().map(str::to_string).collect::<Vec<_>>())
            .collect();
        let world = stepwise_world::WorldImages::new(params.clone());
        let t = Instant::now();
        let on_demand = paths
            .par_iter()
            .map(|p| world.render(p).map(|img| img.width() as usize))
            .collect::<Result<Vec<_>, _>>()?
            .len();
        let t_demand = t.elapsed().as_secs_f64();
        println!(
            "  on demand (WorldImages::render per image path, as `stepwise embed` does): {t_demand:.2} s = {:.0} images/s ({:.2}× render-only)",
            on_demand as f64 / t_demand,
            t_demand / t_render
        );
    }
    if args.work_dir.is_some() {
        eprintln!("files kept in {}", work.keep().display());
    }
    if !time_ok {
        anyhow::bail!("world benchmark missed its target");
    }
    Ok(())
}

/// Parse every line of the JSONL and write it again in canonical form (to a sink): the pure JSON cost of the
/// corpus, one thread. Returns the records and how many list every valid order.
fn reference_reserialize(path: &std::path::Path) -> anyhow::Result<(usize, usize)> {
    let reader = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
    let mut sink = std::io::sink();
    let (mut n, mut complete) = (0, 0);
    for line in reader.lines() {
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        write_canonical(&mut sink, &v)?;
        complete += usize::from(v["annotations"]["valid_orders"]["complete"] == serde_json::Value::Bool(true));
        n += 1;
    }
    Ok((n, complete))
}

/// A work folder removed on drop unless kept.
struct Work(Option<PathBuf>);

impl Work {
    fn path(&self) -> &std::path::Path {
        self.0.as_deref().expect("work folder is set until kept")
    }
    fn keep(mut self) -> PathBuf {
        self.0.take().expect("work folder is set until kept")
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

fn tempfile_in(parent: &std::path::Path) -> anyhow::Result<Work> {
    let p = parent.join(format!("stepwise-bench-world-{}", std::process::id()));
    if p.exists() {
        std::fs::remove_dir_all(&p)?;
    }
    std::fs::create_dir_all(&p)?;
    Ok(Work(Some(p)))
}
