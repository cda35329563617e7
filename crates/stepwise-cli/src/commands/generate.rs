//! `stepwise generate CORPUS --features F --task T [--mode recipeqa | --knobs a,b,c] -o OUT`: multiple-choice
//! questions of RecipeQA's four tasks (RecipeQA's recipe or a Meta-RecipeQA knob setting), or step-sequencing
//! instances (`--task sequencing`, see `generate_sequencing`), or R2VQ questions (`--task r2vq`, see
//! `generate_r2vq`). What `sweep` and `audit` share with it is in [`setup`].

mod setup;

use std::path::PathBuf;

use stepwise_core::{Task, TaskSelection};
use stepwise_tasks::suite::{TaskSetInputs, counts_markdown, generate_taskset, procedure_splits, write_taskset};
use stepwise_tasks::{KnobSetting, Mode};

pub use self::setup::{GenOptions, Prepared, open_stores, parse_split, parse_tasks};
use super::generate_r2vq::{R2vqGenArgs, run_r2vq};
use super::generate_sequencing::{SequencingArgs, run_sequencing};
use crate::usage_bail;

/// Generate benchmark questions from a corpus and its features.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise generate corpus/ --features feats/minilm --task textual_cloze --mode recipeqa -o tc-recipeqa\n  \
    stepwise generate corpus/ --features feats/descriptor --task visual_cloze --knobs 0,1,1 -o vc-011\n  \
    stepwise generate corpus/ --features feats/minilm --features feats/descriptor --task all -o all-tasks\n  \
    stepwise generate corpus/ --features feats/descriptor --task visual_cloze --distractor-pool grocery/ -o vc\n  \
    stepwise generate corpus/ --task sequencing --modality text -o seq\n  \
    stepwise generate test_crl_srl.csv --task r2vq -o r2vq-questions\n\n\
    Output: OUT/questions.json (the official RecipeQA layout: qid, recipe_id, task, split, context, \
    context_modality, question with @placeholder, question_modality, question_text, choice_list, 0-based answer; \
    plus `meta` with each question's provenance), OUT/questions.parquet and OUT/manifest.json (parameters, counts, \
    questions skipped by reason). Splits are by procedure (category-stratified).\n\
    Knobs (Meta-RecipeQA): k1 question overlap (0: ⌊n/2⌋ questions per procedure, 1: ⌊n/3⌋ and a further step \
    removed), k2 hard negatives (0: ball (0, m−s), 1: shell (m−s, m+s) around the answer), k3 (1: a negative as \
    close to the question as the answer). Settings sharing k1 ask the same questions: a knob setting is built \
    with its three partners and keeps a question only if all four can make it (the search widens beyond the K \
    neighbours when the region reaches past them); a question no candidate can serve is skipped and counted. \
    Visual ordering has no knob 3 (k3 = 1 gives the k3 = 0 questions).\n\
    --knobs-mode calibrated (the default) keeps knob 2's regions but tries negatives giving the answer every rank \
    of distance to the question it can take, and keeps, question by question, the draw that best balances what the \
    shortcut probes read between answers and negatives (distance to the question and to the other choices, their \
    z-scores and ranks), so that every shortcut of the audit's panel is at chance; questions no draw can balance \
    are skipped as calibrated_balance. --knobs-mode paper applies the papers' rules, \
    knob 3 on a coin flip's half of the questions as the paper's implementation did. `stepwise audit` says which \
    settings are shortcut-free.")]
pub struct Args {
    /// Corpus folder or procedure-JSONL file.
    pub corpus: PathBuf,
    /// Task(s): textual_cloze, visual_cloze, visual_coherence, visual_ordering (comma-separated or repeated),
    /// `all` for the four, `sequencing`, or `r2vq` (CORPUS is then an annotated R2VQ file in the SemEval layout).
    #[arg(long, value_delimiter = ',', required = true)]
    pub task: Vec<String>,
    /// RecipeQA's original recipe (the default unless --knobs is given).
    #[arg(long, value_enum, conflicts_with = "knobs")]
    pub mode: Option<ModeArg>,
    /// A Meta-RecipeQA knob setting k1,k2,k3 with each 0 or 1, e.g. `0,1,1`.
    #[arg(long, value_name = "K1,K2,K3")]
    pub knobs: Option<String>,
    /// Output folder.
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub options: GenOptions,
    #[command(flatten)]
    pub sequencing: SequencingArgs,
    #[command(flatten)]
    pub r2vq: R2vqGenArgs,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeArg {
    Recipeqa,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let selection = match TaskSelection::parse(&args.task) {
        Ok(s) => s,
        Err(e) => usage_bail!("{e}"),
    };
    match selection {
        TaskSelection::Sequencing => {
            if args.knobs.is_some() || args.mode.is_some() {
                usage_bail!("--mode and --knobs do not apply to --task sequencing");
            }
            let mut s = args.sequencing.clone();
            s.corpus = args.corpus.clone();
            s.output = args.output.clone();
            s.seed = args.seed;
            s.force = args.force;
            run_sequencing(&s)
        }
        TaskSelection::R2vq => {
            if args.knobs.is_some() || args.mode.is_some() {
                usage_bail!("--mode and --knobs do not apply to --task r2vq");
            }
            run_r2vq(&args.corpus, &args.output, args.seed, args.force, &args.options.split, &args.r2vq)
        }
        TaskSelection::RecipeQa(tasks) => run_recipeqa(&args, &tasks),
    }
}

/// RecipeQA's question types in one setting, as one task set.
fn run_recipeqa(args: &Args, tasks: &[Task]) -> anyhow::Result<()> {
    let mode = match &args.knobs {
        Some(k) => match k.parse::<KnobSetting>() {
            Ok(k) => Mode::Knobs(k),
            Err(e) => usage_bail!("--knobs: {e}"),
        },
        None => Mode::RecipeQa,
    };
    let Prepared { cfg, fractions, out, corpus, features, store_of, pool, base } =
        Prepared::new(&args.options, &args.corpus, &args.output, args.force, args.seed, tasks)?;
    let splits = procedure_splits(&corpus.procedures, fractions, args.seed);
    let inputs = TaskSetInputs {
        corpus: &args.corpus,
        procedures: &corpus.procedures,
        tasks: tasks.iter().zip(&store_of).map(|(&t, &si)| (t, features.get(si))).collect(),
        splits: &splits,
        split_fractions: fractions,
        pool: pool.as_ref(),
        allow_missing: args.options.allow_missing_features,
    };
    let set = generate_taskset(&inputs, &cfg, mode, &base)?;
    write_taskset(out.path(), set.questions, &set.manifest)?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprint!("{}", counts_markdown(&set.rows).split_once('\n').map_or("", |x| x.1));
        eprintln!("\nwrote {}", dest.display());
    }
    for w in &set.warnings {
        crate::cli_util::warn_user(w);
    }
    Ok(())
}
