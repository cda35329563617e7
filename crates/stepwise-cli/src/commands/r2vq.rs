//! `stepwise r2vq ...`: tasks from R2VQ annotation (SemEval-2022 Task 9 layout), one file per subcommand.

mod answer;
mod convert;
mod order;
mod tagger;
mod text;

pub use self::answer::AnswerArgs;
use self::answer::run_answer;
pub use self::convert::ConvertArgs;
use self::convert::run_convert;
pub use self::order::OrderArgs;
use self::order::run_order;
pub use self::tagger::{TagArgs, TrainTaggerArgs};
use self::tagger::{run_tag, run_train_tagger};
pub use self::text::{SplitArgs, TrainTextArgs};
use self::text::{run_split, run_train_text};

#[derive(clap::Subcommand, Debug)]
pub enum R2vqCommand {
    /// Event-ordering instances (R2VQ §4.2): sentences of one ingredient (EVENT) versus consecutive sentences (SENT).
    Order(OrderArgs),
    /// Answer questions: the family's program where the recipe has the layer it reads, else a text method, else N/A.
    Answer(AnswerArgs),
    /// Write other R2VQ releases in the SemEval layout (so `answer`, `order` and `eval` read them).
    Convert(ConvertArgs),
    /// Split an R2VQ file by recipe into a part to fit on and a held-out part to score on.
    Split(SplitArgs),
    /// Train the learned text method (a span ranker for the semantic-role questions) on answered recipes.
    TrainText(TrainTextArgs),
    /// Train the cooking-role tagger on inline-tagged recipes (HIT-QMUL's `inline_tagged/entity_*.json`).
    TrainTagger(TrainTaggerArgs),
    /// Annotate recipes with the trained tagger: the cooking-role layer the programs read.
    Tag(TagArgs),
}

pub fn run(c: R2vqCommand) -> anyhow::Result<()> {
    match c {
        R2vqCommand::Order(a) => run_order(a),
        R2vqCommand::Answer(a) => run_answer(a),
        R2vqCommand::Convert(a) => run_convert(a),
        R2vqCommand::Split(a) => run_split(a),
        R2vqCommand::TrainText(a) => run_train_text(a),
        R2vqCommand::TrainTagger(a) => run_train_tagger(a),
        R2vqCommand::Tag(a) => run_tag(a),
    }
}
