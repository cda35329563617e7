//! `stepwise sweep CORPUS --features F --task T -o SUITE`: the Meta-RecipeQA benchmark — every knob setting (and
//! RecipeQA mode) × task as separate task sets with train/val/test splits by procedure, one manifest and the
//! counts table.

use std::path::PathBuf;

use stepwise_core::Task;
use stepwise_tasks::Mode;
use stepwise_tasks::catalog::FeatureSources;
use stepwise_tasks::merge::merge_suites;
use stepwise_tasks::suite::{SuiteConfig, counts_markdown, counts_warnings, write_suite_summary, write_suite_tasksets};

use super::generate::{GenOptions, Prepared, parse_tasks};
use crate::usage_bail;

/// Generate a suite of graded difficulty: all knob settings and RecipeQA mode, every task.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise sweep corpus/ --features feats/minilm --features feats/descriptor -o suite\n  \
    stepwise sweep corpus/ --features feats/descriptor --task visual_cloze --distractor-pool grocery/ -o suite-vc\n  \
    stepwise sweep corpus/ --features feats/descriptor --shard 0/2 -o parts/0   (then 1/2, e.g. on another machine)\n  \
    stepwise sweep --merge parts/0 parts/1 -o suite\n\n\
    Layout: SUITE/manifest.json, SUITE/counts.json, SUITE/counts.md (questions, train/val/test, procedures used, \
    skips by reason), SUITE/<setting>/<task>/{questions.json, questions.parquet, manifest.json} with <setting> \
    `recipeqa` or `knobs-K1-K2-K3`. A procedure is in the same split in every task set. Settings sharing k1 ask \
    the same questions (qids, question items, answers) and differ only in their negatives: a question is kept in \
    all four (k2, k3) settings or in none, the search widening beyond the K neighbours when a constraint needs it \
    (counted per setting as `widened`). Visual ordering has no knob 3: it is written once per (k1, k2) under \
    knobs-K1-K2-0/, and counts.json / the manifest's params.same_as map its k3 = 1 settings there.\n\n\
    --shard I/N writes the questions of part I of N contiguous slices of the procedures (every part reads the \
    whole corpus and features: negatives come from everywhere); --merge joins the parts into the suite a single run \
    writes, byte for byte. scripts/ray/ runs the parts on a Ray cluster.")]
pub struct Args {
    /// Corpus folder or procedure-JSONL file.
    #[arg(required_unless_present = "merge")]
    pub corpus: Option<PathBuf>,
    /// Task(s): textual_cloze, visual_cloze, visual_coherence, visual_ordering (comma-separated or repeated) or
    /// `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    pub task: Vec<String>,
    /// Settings to include (comma-separated): `recipeqa` and/or knob settings like `0,1,1` written `knobs-0-1-1`;
    /// default all nine.
    #[arg(long, value_delimiter = ',')]
    pub settings: Vec<String>,
    /// Output suite folder.
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
    /// Write only the questions of part I (0-based) of N contiguous slices of the procedures: a suite part that
    /// `--merge` joins with the others.
    #[arg(long, value_name = "I/N", conflicts_with = "merge")]
    pub shard: Option<stepwise_core::shard::Shard>,
    /// Join suite parts written with `--shard I/N` (any order, every shard once) into one suite; no corpus is
    /// read.
    #[arg(long, value_name = "PART", num_args = 1.., conflicts_with = "corpus")]
    pub merge: Vec<PathBuf>,
    #[command(flatten)]
    pub options: GenOptions,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.merge.is_empty() {
        let (report, rows) = merge_suites(&args.merge, &args.output, args.force)?;
        if !stepwise_core::progress::is_quiet() {
            eprint!("{}", counts_markdown(&rows));
            eprintln!(
                "\nwrote {}: {} task sets, {} questions, from {} parts",
                args.output.display(),
                report.tasksets,
                report.questions,
                report.parts
            );
        }
        for w in counts_warnings(&rows) {
            crate::cli_util::warn_user(&w);
        }
        return Ok(());
    }
    let Some(corpus_path) = &args.corpus else { usage_bail!("a corpus is needed (or --merge PART...)") };
    let tasks = parse_tasks(&args.task)?;
    let modes: Vec<Mode> = if args.settings.is_empty() {
        Mode::suite()
    } else {
        let mut m = Vec::new();
        for s in &args.settings {
            match Mode::parse_label(s.trim()) {
                Some(x) if !m.contains(&x) => m.push(x),
                Some(_) => {}
                None => {
                    usage_bail!("--settings: unknown setting {s:?} (recipeqa or knobs-K1-K2-K3)")
                }
            }
        }
        m
    };
    let Prepared { cfg, fractions, out, corpus, features, store_of, pool, base } =
        Prepared::new(&args.options, corpus_path, &args.output, args.force, args.seed, &tasks)?;
    // Tasks grouped by store: one suite write per store, each task with the store that holds its items.
    let mut rows = Vec::new();
    let mut groups: Vec<(usize, Vec<Task>)> = Vec::new();
    for (&t, &s) in tasks.iter().zip(&store_of) {
        match groups.iter_mut().find(|g| g.0 == s) {
            Some(g) => g.1.push(t),
            None => groups.push((s, vec![t])),
        }
    }
    for (si, group) in groups {
        let suite = SuiteConfig {
            generate: cfg.clone(),
            tasks: group,
            modes: modes.clone(),
            split_fractions: fractions,
            shard: args.shard,
        };
        let sources = FeatureSources {
            features: features.get(si),
            extra_pool: pool.as_ref(),
            allow_missing: args.options.allow_missing_features,
        };
        rows.extend(write_suite_tasksets(out.path(), &corpus.procedures, sources, &suite, &base)?);
    }
    // One manifest and counts table for every task, whichever store it read.
    let all = SuiteConfig {
        generate: cfg.clone(),
        tasks: tasks.clone(),
        modes,
        split_fractions: fractions,
        shard: args.shard,
    };
    rows.sort_by_key(|r| (tasks.iter().position(|t| *t == r.task), Mode::parse_label(&r.setting)));
    write_suite_summary(out.path(), &corpus.procedures, &all, &base, &rows)?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprint!("{}", counts_markdown(&rows));
        eprintln!("\nwrote {}", dest.display());
    }
    // A part's counts cover its own procedures only: warnings about too few questions belong to the merged suite.
    if args.shard.is_none() {
        for w in counts_warnings(&rows) {
            crate::cli_util::warn_user(&w);
        }
    }
    Ok(())
}
