//! `stepwise demo`: the main pipeline on the built-in world corpus, as a list of named stages.
//!
//! Each stage reads what earlier stages left in the demo folder and returns a one-line summary; a failing
//! stage stops the demo with its name in the error (nothing is skipped silently) and, because the folder is
//! built as an [`OutputDir`], nothing half-made is left behind. Later stages (clean, stats, embed, tasks,
//! sequencing, baselines, audit, eval, report) plug in by adding an entry to [`STAGES`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Corpus, Procedure};
use stepwise_world::contact_sheet::contact_sheet;
use stepwise_world::corpus::save_image;
use stepwise_world::truth::parse_image_path;
use stepwise_world::{Domain, WorldParams, render_procedure_images, write_corpus};

use crate::usage_bail;

/// Run the main pipeline on a generated world corpus (no downloads, no model weights).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  stepwise demo                      # ./stepwise-demo/\n  \
    stepwise demo -o /tmp/demo --force\n  stepwise demo --domain assembly -n 200\n\n\
    Outputs: corpus/ (procedures with exact ground truth and step images), contact_sheet.png (one procedure's \
    steps side by side), report.md (what each stage made).")]
pub struct Args {
    /// The demo folder.
    #[arg(short, long, default_value = "stepwise-demo")]
    pub output: PathBuf,
    /// Procedures in the generated corpus.
    #[arg(short, long, default_value_t = 300)]
    pub n: u64,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    #[arg(long, default_value = "cooking", value_parser = ["cooking", "assembly"])]
    pub domain: String,
    /// Replace the demo folder if it exists.
    #[arg(long)]
    pub force: bool,
}

/// What the stages share: the folder being built and what earlier stages reported.
struct Demo {
    /// The (temporary) folder being written; renamed into place when every stage succeeded.
    dir: PathBuf,
    params: WorldParams,
    /// Stage name → summary, for the report.
    done: BTreeMap<usize, (&'static str, String)>,
}

impl Demo {
    fn corpus_dir(&self) -> PathBuf {
        self.dir.join("corpus")
    }
}

type Stage = fn(&mut Demo) -> anyhow::Result<String>;

/// The pipeline, in order.
const STAGES: &[(&str, Stage)] = &[("world", world), ("contact-sheet", sheet), ("report", report)];

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.n == 0 {
        usage_bail!("-n must be at least 1");
    }
    let domain = Domain::parse(&args.domain).expect("clap checks the domain");
    let out = OutputDir::create(&args.output, args.force)?;
    let mut demo = Demo { dir: out.path().to_path_buf(), params: WorldParams::new(args.seed, domain, args.n), done: BTreeMap::new() };
    let quiet = stepwise_core::progress::is_quiet();
    let t_all = Instant::now();
    for (i, (name, stage)) in STAGES.iter().enumerate() {
        let t = Instant::now();
        let summary = stage(&mut demo).with_context(|| format!("demo stage {}/{} `{name}` failed", i + 1, STAGES.len()))?;
        if !quiet {
            eprintln!("[{}/{}] {name:<14} {:>6.1} s  {summary}", i + 1, STAGES.len(), t.elapsed().as_secs_f64());
        }
        demo.done.insert(i, (name, summary));
    }
    let dest = out.commit()?;
    println!("demo finished in {:.1} s: {}", t_all.elapsed().as_secs_f64(), dest.display());
    println!("  corpus:        {}", dest.join("corpus").display());
    println!("  contact sheet: {}", dest.join("contact_sheet.png").display());
    println!("report: {}", dest.join("report.md").display());
    Ok(())
}

/// Stage `world`: generate the corpus with stored images.
fn world(d: &mut Demo) -> anyhow::Result<String> {
    let bar = stepwise_core::progress::bar(d.params.procedures, "world");
    let s = write_corpus(&d.params, &d.corpus_dir(), false, &|k| bar.set_position(k))?;
    bar.finish_and_clear();
    Ok(format!(
        "{} {} procedures, {} steps, {} images ({:.1} MB) in corpus/",
        s.procedures,
        d.params.domain.as_str(),
        s.steps,
        s.images_written,
        s.image_bytes as f64 / 1e6
    ))
}

/// The procedure shown on the contact sheet: the first with 8 to 12 steps (else the first).
fn showcase(procs: &[Procedure]) -> &Procedure {
    procs.iter().find(|p| (8..=12).contains(&p.steps.len())).unwrap_or(&procs[0])
}

/// Stage `contact-sheet`: one procedure's step images side by side with captions.
fn sheet(d: &mut Demo) -> anyhow::Result<String> {
    let corpus = Corpus::load(&d.corpus_dir())?;
    let p = showcase(&corpus.procedures);
    let first = p.steps.first().and_then(|s| s.images.first()).map(String::as_str).unwrap_or("");
    let (index, _) = parse_image_path(d.params.domain, first).context("the showcase procedure has no world image path")?;
    let images = render_procedure_images(&d.params, index)?;
    save_image(&contact_sheet(p, &images, 4), &d.dir.join("contact_sheet.png"))?;
    Ok(format!("contact_sheet.png: {} ({} steps)", p.id, p.steps.len()))
}

/// Stage `report`: what the corpus holds and what each stage made (deterministic: no timings).
fn report(d: &mut Demo) -> anyhow::Result<String> {
    let corpus = Corpus::load(&d.corpus_dir())?;
    let md = report_markdown(&corpus.procedures, &d.params, &d.done);
    write_string_atomic(&d.dir.join("report.md"), &md)?;
    Ok("report.md".into())
}

fn report_markdown(procs: &[Procedure], params: &WorldParams, done: &BTreeMap<usize, (&'static str, String)>) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# stepwise demo\n");
    let _ = writeln!(md, "Built-in world corpus: {} {} procedures, seed {}.\n", procs.len(), params.domain.as_str(), params.seed);
    let steps: usize = procs.iter().map(|p| p.steps.len()).sum();
    let mut cats: BTreeMap<&str, usize> = BTreeMap::new();
    let mut multi = 0usize;
    let mut log_orders = 0f64;
    let mut complete = 0usize;
    for p in procs {
        *cats.entry(p.category.as_deref().unwrap_or("-")).or_default() += 1;
        if let Some(v) = p.annotations.as_ref().and_then(|a| a.valid_orders.as_ref()) {
            multi += usize::from(v.count > 1);
            log_orders += (v.count as f64).log10();
            complete += usize::from(v.complete);
        }
    }
    let n = procs.len().max(1) as f64;
    let _ = writeln!(md, "| what | value |\n|---|---|");
    let _ = writeln!(md, "| steps | {steps} ({:.1} per procedure) |", steps as f64 / n);
    let _ = writeln!(md, "| procedures with more than one valid order | {multi} ({:.0}%) |", 100.0 * multi as f64 / n);
    let _ = writeln!(md, "| mean log10(valid orders) | {:.2} |", log_orders / n);
    let _ = writeln!(md, "| procedures whose valid orders are all listed | {complete} |");
    let cats: Vec<String> = cats.iter().map(|(c, k)| format!("{c} {k}")).collect();
    let _ = writeln!(md, "| categories | {} |\n", cats.join(", "));
    let _ = writeln!(md, "## Stages\n");
    for (i, (name, summary)) in done {
        let _ = writeln!(md, "{}. `{name}`: {summary}", i + 1);
    }
    let _ = writeln!(md, "\n![contact sheet](contact_sheet.png)");
    md
}
