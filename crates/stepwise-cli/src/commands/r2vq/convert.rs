//! `stepwise r2vq convert`: other R2VQ releases written in the SemEval layout.

use std::path::PathBuf;

use stepwise_ingest::readers::r2vq_2021::read_r2vq_2021;
use stepwise_ingest::readers::r2vq_inline::read_inline_tagged;
use stepwise_tasks::r2vq::questions::family_of_answered;

use crate::usage_bail;

/// The R2VQ layouts `convert` reads.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum R2vqSource {
    /// HIT-QMUL's inline-tagged train recipes (`inline_tagged/entity_*.json`); --qa attaches the gold QA strings.
    InlineTagged,
    /// The 2021 release (recipe2video's `r2vq.jsonl`): text, offset annotation and questions in one file.
    #[value(name = "release-2021")]
    Release2021,
}

/// Convert an R2VQ release to the SemEval layout. What a lossy source cannot say is rebuilt as documented in
/// `stepwise_ingest::readers` (inline-tagged: one sentence per step, mentions extended from their first word,
/// same-name coreference, families of id-less questions read off the answer's form).
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq convert inline_tagged/entity_train3.json --from inline-tagged \\\n    \
    --qa train_text_qa_baseline_10_28.json -o train800.csv\n  \
    stepwise r2vq answer train800.csv -o answers.jsonl\n  \
    stepwise eval train800.csv -p answers.jsonl")]
pub struct ConvertArgs {
    pub input: PathBuf,
    #[arg(long, value_enum)]
    pub from: R2vqSource,
    /// Gold questions and answers to attach (inline-tagged: `{" recipe": {"question": ["q     a", ...]}}`).
    #[arg(long)]
    pub qa: Option<PathBuf>,
    /// The SemEval-layout file to write.
    #[arg(short, long)]
    pub output: PathBuf,
}

pub(super) fn run_convert(a: ConvertArgs) -> anyhow::Result<()> {
    let (doc, unlabelled) = match a.from {
        R2vqSource::InlineTagged => read_inline_tagged(&a.input, a.qa.as_deref(), &family_of_answered)?,
        R2vqSource::Release2021 => {
            if a.qa.is_some() {
                usage_bail!("--qa applies to --from inline-tagged (the 2021 release holds its questions)");
            }
            read_r2vq_2021(&a.input, &family_of_answered)?
        }
    };
    stepwise_core::output::write_string_atomic(&a.output, &doc.to_conllu_string())?;
    if !stepwise_core::progress::is_quiet() {
        let questions: usize = doc.recipes.iter().map(|r| r.questions().len()).sum();
        eprintln!(
            "{} recipes, {questions} questions ({unlabelled} left out: no template matches) written to {}",
            doc.recipes.len(),
            a.output.display()
        );
    }
    Ok(())
}
