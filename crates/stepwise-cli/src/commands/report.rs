//! `stepwise report RUN_DIR [-o report.html]`: one self-contained HTML report (and `report.md`) of whatever a run
//! folder holds.

use std::path::PathBuf;

use stepwise_report::{ReportOptions, write_report};

use crate::usage_bail;

/// Write an HTML + Markdown report of a run folder: corpus statistics, cleaning, features, task sets, knob sweep
/// counts, bias audits, sequencing tables, evaluations and pictures.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  stepwise report stepwise-demo            # stepwise-demo/report.html + report.md\n  \
    stepwise report runs/world -o /tmp/world.html --title \"World, seed 7\"\n\n\
    The folder is walked (sorted, hidden entries skipped) and outputs are recognised by their manifest.json kind \
    (corpus, features, taskset, suite, audit, sequencing, sequencing-results, eval), loose JSON files by their \
    shape (`stepwise stats --format json`, `stepwise eval --json`, clean_report.json) and PNG pictures by \
    extension. Parts that are absent are left out; a malformed file is an error naming the file and field.\n\
    Outputs: the HTML (inline CSS and SVG plots, PNGs embedded as base64 up to --max-embed-mb), the Markdown \
    next to it (same name, .md) and the plot files it links (<name>_files/). No timestamps: the same folder \
    gives the same bytes."
)]
pub struct Args {
    /// The run folder (e.g. the demo's output).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// The HTML report (default RUN_DIR/report.html); the Markdown report goes next to it.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Title of the report (default: `stepwise report: <folder name>`).
    #[arg(long)]
    pub title: Option<String>,
    /// Embed PNG pictures up to this many megabytes in the HTML; larger ones are linked.
    #[arg(long, value_name = "MB", default_value_t = 8.0)]
    pub max_embed_mb: f64,
    /// Replace existing files that `stepwise report` did not write (its own previous report is always replaced).
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.run_dir.is_dir() {
        usage_bail!("{}: not a folder", args.run_dir.display());
    }
    if !(args.max_embed_mb >= 0.0 && args.max_embed_mb.is_finite()) {
        usage_bail!("--max-embed-mb must be a non-negative number");
    }
    let html = args.output.clone().unwrap_or_else(|| args.run_dir.join("report.html"));
    if html.extension().is_none_or(|e| e != "html" && e != "htm") {
        usage_bail!("{}: the report file must end in .html", html.display());
    }
    let (md, _) = stepwise_report::report::companion_paths(&html);
    // A report is derived: a re-run replaces its own previous output, but never a file stepwise did not write.
    if !args.force && (html.exists() || md.exists()) && !stepwise_report::report::is_own_report(&html) {
        usage_bail!(
            "{}: exists and was not written by `stepwise report`; choose another path or pass --force to replace it",
            html.display()
        );
    }
    let opts = ReportOptions { title: args.title.clone(), max_embed_bytes: (args.max_embed_mb * 1048576.0) as u64 };
    let w = write_report(&args.run_dir, &html, &opts)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!("{} outputs found; sections: {}", w.artefacts, w.sections.join(", "));
        eprintln!("wrote {} and {}", w.html.display(), w.markdown.display());
    }
    Ok(())
}
