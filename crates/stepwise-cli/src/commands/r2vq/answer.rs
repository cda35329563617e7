//! `stepwise r2vq answer`: questions answered by route (a family's program, a text method, or N/A).

use std::path::PathBuf;

use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
use stepwise_ingest::readers::r2vq_json::read_question_list;
use stepwise_models::r2vq_answer::{Asked, Fallback, Method, NO_ANSWER, Route, RouteTable, Routed, answer_all};
use stepwise_models::r2vq_span::SpanModel;
use stepwise_models::r2vq_text::{RecipeText, answer_from_text};
use stepwise_score::r2vq::question_key;

/// Which routes `r2vq answer` may take (see `stepwise_models::r2vq_answer`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerMethod {
    /// The family programs where the recipe has the layer they read, else the text method, else N/A.
    Fallbacks,
    /// The family programs on the annotation only.
    #[value(alias = "annotation")]
    Programs,
    /// The text-only baseline (sentence retrieval and a rule per template; reads no annotation).
    Text,
}

impl From<AnswerMethod> for Method {
    fn from(m: AnswerMethod) -> Method {
        match m {
            AnswerMethod::Fallbacks => Method::Fallbacks,
            AnswerMethod::Programs => Method::Programs,
            AnswerMethod::Text => Method::Text,
        }
    }
}

/// Answer R2VQ questions: each question is parsed into its template; the candidate families' programs run on the
/// recipe's annotation where it carries the layer they read; where it does not, the text method answers; a
/// question neither answers is unanswerable (N/A).
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq answer train_sample_1recipe_srpol.csv -o answers.jsonl\n  \
    stepwise eval train_sample_1recipe_srpol.csv -p answers.jsonl\n\n\
    Writes one JSON line per question: {id, answer, route, family, template, program, evidence}. `route` is \
    program, text, unanswerable or not_understood; `answer` is \"N/A\" for the last two (null with \
    --null-for-unanswerable). `family` is the family whose program answered; the question id's own family is \
    never read to answer, only to group the summary, which counts per family the questions each route took.")]
pub struct AnswerArgs {
    /// An annotated R2VQ file in the SemEval layout.
    pub input: PathBuf,
    /// Ask these questions instead of the file's own: a JSON list of {q_id, question, doc_id}.
    #[arg(long)]
    pub questions: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "fallbacks")]
    pub method: AnswerMethod,
    /// Write `null` instead of "N/A" for an unanswerable question (files made before the N/A answer).
    #[arg(long)]
    pub null_for_unanswerable: bool,
    /// The text method: this span model (`r2vq train-text`) for the semantic-role templates, the rules for the
    /// rest. Without it, the rules answer every template.
    #[arg(long)]
    pub text_model: Option<PathBuf>,
    /// The answers to write (JSONL).
    #[arg(short, long)]
    pub output: PathBuf,
}

pub(super) fn run_answer(a: AnswerArgs) -> anyhow::Result<()> {
    let doc = read_r2vq_conllu(&a.input)?;
    let asked: Vec<Asked> = match &a.questions {
        Some(path) => {
            let listed = read_question_list(path)?;
            if let Some(q) = listed.iter().find(|q| !doc.recipes.iter().any(|r| r.id == q.recipe)) {
                anyhow::bail!(
                    "{}: question {} names recipe {:?}, which {} does not hold",
                    path.display(),
                    q.id,
                    q.recipe,
                    a.input.display()
                );
            }
            listed.into_iter().map(|q| Asked { recipe: q.recipe, id: q.id, question: q.question }).collect()
        }
        None => doc
            .recipes
            .iter()
            .flat_map(|r| {
                r.questions().into_iter().map(|q| Asked { recipe: r.id.clone(), id: q.id, question: q.question })
            })
            .collect(),
    };
    let model = a.text_model.as_deref().map(SpanModel::read).transpose()?;
    let routed = match &model {
        Some(m) => {
            let text = |t: &RecipeText, q: &str| m.answer(t, q);
            let fallback = Fallback { text: &text, after_empty_program: &m.text_after_empty_program };
            answer_all(&doc, &asked, a.method.into(), fallback)
        }
        None => answer_all(&doc, &asked, a.method.into(), Fallback::text(&answer_from_text)),
    };
    let mut lines = String::new();
    for (q, r) in asked.iter().zip(&routed) {
        let answer = match (&r.answer, a.null_for_unanswerable) {
            (Some(answer), _) => serde_json::Value::from(answer.as_str()),
            (None, true) => serde_json::Value::Null,
            (None, false) => serde_json::Value::from(NO_ANSWER),
        };
        let line = serde_json::json!({
            "id": question_key(&q.recipe, q.id),
            "answer": answer,
            "route": r.route,
            "family": r.family,
            "template": r.template,
            "program": r.program,
            "evidence": r.evidence,
        });
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    stepwise_core::output::write_string_atomic(&a.output, &lines)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!("{}", answer_summary(&asked, &routed, &a.output));
        if let Some(m) = &model {
            let fitted = m.fitted_recipes();
            let seen = asked.iter().filter(|q| fitted.contains(q.recipe.as_str())).count();
            if seen > 0 {
                eprintln!(
                    "warning: {seen} of {} questions are of recipes the text model was fitted on: their scores \
                     are not held-out scores",
                    asked.len()
                );
            }
        }
    }
    Ok(())
}

/// The summary `r2vq answer` prints: per family of the question ids, the route each question took, and the
/// questions no template understood.
fn answer_summary(asked: &[Asked], routed: &[Routed], output: &std::path::Path) -> String {
    let unparsed: Vec<String> = asked
        .iter()
        .zip(routed)
        .filter(|(_, r)| r.route == Route::NotUnderstood)
        .map(|(q, _)| format!("{}: {:?}", question_key(&q.recipe, q.id), q.question))
        .collect();
    let mut s = format!("{} questions, {} not understood (answered {NO_ANSWER})\n", asked.len(), unparsed.len());
    s.push_str(&RouteTable::of(asked, routed).markdown());
    for u in unparsed.iter().take(20) {
        s.push_str(&format!("not understood: {u}\n"));
    }
    if unparsed.len() > 20 {
        s.push_str(&format!("... and {} more not understood\n", unparsed.len() - 20));
    }
    s.push_str(&format!("answers written to {}", output.display()));
    s
}
