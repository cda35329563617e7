//! `stepwise report`: find the outputs of a run folder, read them, and write `report.html` (self-contained),
//! `report.md` and the plot files the Markdown links to (`report_files/`). Deterministic: sorted walk, no
//! timestamps, plots drawn with the embedded font.

use std::path::{Path, PathBuf};

use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{Error, Result};

use crate::doc::Document;
use crate::scan::{Kind, scan};
use crate::sections::{self, Ctx, absolute, count};
use crate::{html, markdown};

/// Options of a report.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The report's title (default: `stepwise report: <run folder name>`).
    pub title: Option<String>,
    /// PNG pictures up to this size are embedded in the HTML; larger ones are linked.
    pub max_embed_bytes: u64,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions { title: None, max_embed_bytes: 8 << 20 }
    }
}

/// What [`write_report`] wrote.
#[derive(Debug, Clone)]
pub struct Written {
    pub html: PathBuf,
    pub markdown: PathBuf,
    /// The plot files' folder (absent when there was nothing to plot).
    pub assets: Option<PathBuf>,
    /// Outputs recognised in the run folder.
    pub artefacts: usize,
    /// Section titles, in order.
    pub sections: Vec<String>,
}

/// The Markdown report and plot folder that go with an HTML report path.
pub fn companion_paths(html: &Path) -> (PathBuf, PathBuf) {
    let stem = html.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "report".into());
    (html.with_extension("md"), html.with_file_name(format!("{stem}_files")))
}

/// True when every existing file of the report at `html` (the HTML and its Markdown companion) was written by
/// `stepwise report`: a re-run may replace its own derived output, never a file of someone else's.
pub fn is_own_report(html: &Path) -> bool {
    let (md, _) = companion_paths(html);
    let starts_with_marker = |p: &Path, marker: &str| -> bool {
        use std::io::Read;
        let Ok(f) = std::fs::File::open(p) else { return !p.exists() };
        let mut head = Vec::new();
        if f.take(4096).read_to_end(&mut head).is_err() {
            return false;
        }
        String::from_utf8_lossy(&head).contains(marker)
    };
    starts_with_marker(html, html::GENERATOR_HTML) && starts_with_marker(&md, markdown::GENERATOR_MARKDOWN)
}

/// Build the report of `run_dir` into `html_path` (and its companions, see [`companion_paths`]).
pub fn write_report(run_dir: &Path, html_path: &Path, opts: &ReportOptions) -> Result<Written> {
    let run_dir = absolute(run_dir);
    let html_path = absolute(html_path);
    let (md_path, assets) = companion_paths(&html_path);
    let report_dir = html_path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
    let found = scan(&run_dir, &[html_path.clone(), md_path.clone(), assets.clone()])?;
    let assets_dir = OutputDir::create(&assets, true)?;
    let ctx = Ctx {
        run_dir: run_dir.clone(),
        report_dir,
        assets_tmp: assets_dir.path().to_path_buf(),
        assets_rel: assets.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        max_embed_bytes: opts.max_embed_bytes,
    };
    let doc = build(&ctx, &found, opts)?;
    let plotted = std::fs::read_dir(assets_dir.path()).map(|mut d| d.next().is_some()).unwrap_or(false);
    let assets = if plotted { Some(assets_dir.commit()?) } else { None };
    write_string_atomic(&md_path, &markdown::render(&doc))?;
    write_string_atomic(&html_path, &html::render(&doc))?;
    Ok(Written {
        html: html_path,
        markdown: md_path,
        assets,
        artefacts: found.artefacts.len(),
        sections: doc.sections.iter().map(|s| s.title.clone()).collect(),
    })
}

/// Read every recognised output and lay out the document.
pub fn build(ctx: &Ctx, found: &crate::scan::Found, opts: &ReportOptions) -> Result<Document> {
    let all = |k: Kind| found.of(k).collect::<Vec<_>>();
    let mut stages = Vec::new();
    for a in all(Kind::Demo) {
        stages.extend(sections::overview::read_stages(&a.path)?);
    }
    let corpora = all(Kind::Corpus).into_iter().map(sections::corpus::read).collect::<Result<Vec<_>>>()?;
    let stats = all(Kind::Stats).into_iter().map(sections::stats::read).collect::<Result<Vec<_>>>()?;
    let cleans = all(Kind::CleanReport).into_iter().map(sections::clean::read).collect::<Result<Vec<_>>>()?;
    let stores = all(Kind::Features).into_iter().map(sections::features::read).collect::<Result<Vec<_>>>()?;
    let tasksets = all(Kind::TaskSet).into_iter().map(sections::tasksets::read).collect::<Result<Vec<_>>>()?;
    let suites = all(Kind::Suite).into_iter().map(sections::suite::read).collect::<Result<Vec<_>>>()?;
    let mut audits = Vec::new();
    for a in all(Kind::Audit) {
        audits.extend(sections::audit::read(a)?);
    }
    let instances =
        all(Kind::Sequencing).into_iter().map(sections::sequencing::read_instances).collect::<Result<Vec<_>>>()?;
    let results =
        all(Kind::SequencingResults).into_iter().map(sections::sequencing::read_results).collect::<Result<Vec<_>>>()?;
    let evals = all(Kind::Eval).into_iter().map(sections::eval::read).collect::<Result<Vec<_>>>()?;
    let r2vq = all(Kind::R2vqQuestions).into_iter().map(sections::r2vq::read).collect::<Result<Vec<_>>>()?;
    let tagging = all(Kind::R2vqTagging).into_iter().map(sections::r2vq::read_tagging).collect::<Result<Vec<_>>>()?;
    let studies = all(Kind::Study).into_iter().map(sections::study::read).collect::<Result<Vec<_>>>()?;
    let models = all(Kind::Model).into_iter().map(sections::study::read_model).collect::<Result<Vec<_>>>()?;
    let annotations = all(Kind::Annotation).into_iter().map(sections::annotation::read).collect::<Result<Vec<_>>>()?;
    let pictures = all(Kind::Picture);

    let mut headlines = Vec::new();
    for c in &corpora {
        headlines.push(format!(
            "Corpus `{}`: {} procedures, {} steps, {} step images.",
            c.rel,
            count(c.procedures),
            count(c.steps),
            count(c.step_images)
        ));
    }
    headlines.extend(sections::tasksets::headlines(&tasksets));
    headlines.extend(sections::audit::headlines(&audits));
    headlines.extend(sections::sequencing::headlines(&results));

    let mut secs = vec![sections::overview::section(found, &stages, &headlines)];
    secs.extend(sections::corpus::section(ctx, &corpora)?);
    secs.extend(sections::pictures::section(ctx, &pictures)?);
    secs.extend(sections::stats::section(&stats));
    secs.extend(sections::clean::section(&cleans));
    secs.extend(sections::features::section(&stores));
    secs.extend(sections::tasksets::section(&tasksets));
    secs.extend(sections::suite::section(ctx, &suites)?);
    secs.extend(sections::audit::section(ctx, &audits)?);
    secs.extend(sections::sequencing::section(ctx, &instances, &results)?);
    secs.extend(sections::r2vq::section(&r2vq));
    secs.extend(sections::r2vq::tagging_section(&tagging));
    secs.extend(sections::eval::section(ctx, &evals)?);
    secs.extend(sections::study::section(ctx, &studies, &models)?);
    secs.extend(sections::annotation::section(&annotations));
    if found.artefacts.is_empty() {
        return Err(Error::bad_input(format!(
            "{}: no stepwise outputs found (corpus, feature store, task set, suite, audit, sequencing or eval \
             folders with a manifest.json, or stats/eval JSON files)",
            ctx.run_dir.display()
        )));
    }
    let name = ctx.run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let title = opts.title.clone().unwrap_or_else(|| format!("stepwise report: {name}"));
    let summary = vec![format!(
        "{} outputs found in the run folder; {} sections below. Numbers come from the files themselves (paths \
         relative to the run folder); nothing is recomputed.",
        found.artefacts.len(),
        secs.len()
    )];
    Ok(Document { title, summary, sections: secs })
}
