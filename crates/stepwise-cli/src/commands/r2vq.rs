//! `stepwise r2vq ...`: tasks from R2VQ annotation (SemEval-2022 Task 9 layout).

use std::path::PathBuf;

use stepwise_core::Manifest;

use crate::usage_bail;
use stepwise_core::output::OutputDir;
use stepwise_core::r2vq::Layer;
use stepwise_core::sequencing::{INSTANCES_JSONL, INSTANCES_PARQUET, SequencingInstance};
use stepwise_ingest::readers::r2vq_2021::read_r2vq_2021;
use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
use stepwise_ingest::readers::r2vq_inline::{read_inline_steps, read_inline_tagged};
use stepwise_ingest::readers::r2vq_json::read_question_list;
use stepwise_models::r2vq_answer::{Asked, Fallback, Method, NO_ANSWER, Route, RouteTable, Routed, answer_all};
use stepwise_models::r2vq_span::{SpanConfig, SpanModel, route_policy_table, train as train_span};
use stepwise_models::r2vq_tagger::{TaggerConfig, TaggerModel, tag_document, tag_procedures, train as train_tagger};
use stepwise_models::r2vq_text::{RecipeText, answer_from_text};
use stepwise_score::r2vq::{question_key, tagging_scores, tagging_table};
use stepwise_tasks::r2vq::event_ordering::event_ordering;
use stepwise_tasks::r2vq::questions::family_of_answered;
use stepwise_tasks::sequencing::write::{write_instances_jsonl, write_instances_parquet};

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

/// Train the tagger (`stepwise_models::r2vq_tagger`): events, TOOL mentions, participants and hidden tools,
/// habitats and elided objects, from the inline-tagged layout.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq train-tagger inline_tagged/entity_train3.json --exclude split/held-out.csv -o tagger.json\n  \
    stepwise r2vq tag split/held-out.csv --model tagger.json -o tagged.csv")]
pub struct TrainTaggerArgs {
    /// Inline-tagged recipes (`{recipe: [step, ...]}`).
    pub input: PathBuf,
    /// Leave out the recipes of these SemEval-layout files (held out for scoring).
    #[arg(long)]
    pub exclude: Vec<PathBuf>,
    #[arg(long, default_value_t = 8)]
    pub epochs: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The model file to write (JSON).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Tag every step of an R2VQ file's recipes (their words only: any annotation the file has is not read to tag)
/// and write them with the predicted cooking-role layer in the SemEval layout, questions and answers kept. When
/// the input carries the layer, the tagging is scored against it per label.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq tag split/held-out.csv --model tagger.json -o tagged.csv\n  \
    stepwise r2vq answer tagged.csv -o answers.jsonl\n  \
    stepwise eval tagged.csv -p answers.jsonl\n  \
    stepwise generate tagged.csv --task r2vq -o questions/")]
pub struct TagArgs {
    /// Recipes in the SemEval layout (`.csv`), or a procedure corpus (folder or procedure JSONL).
    pub input: PathBuf,
    /// A tagger from `r2vq train-tagger`.
    #[arg(long)]
    pub model: PathBuf,
    /// The SemEval-layout file to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Also write the per-label scores against the input's own layer as JSON (`stepwise report` shows them).
    #[arg(long)]
    pub scores: Option<PathBuf>,
}

/// Split by recipe: a seeded draw of recipes is held out, the rest is for fitting; both keep file order.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq split train800.csv --held-out 0.2 --seed 0 -o split\n  \
    stepwise r2vq train-text split/fit.csv -o span.json\n  \
    stepwise r2vq answer split/held-out.csv --text-model span.json -o answers.jsonl\n  \
    stepwise eval split/held-out.csv -p answers.jsonl\n\n\
    Writes OUT/fit.csv, OUT/held-out.csv (SemEval layout) and OUT/manifest.json (the held-out recipe ids).")]
pub struct SplitArgs {
    /// An R2VQ file in the SemEval layout.
    pub input: PathBuf,
    /// The share of recipes held out.
    #[arg(long, default_value_t = 0.2)]
    pub held_out: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The folder to write (fit.csv, held-out.csv, manifest.json).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
}

/// Train the span ranker (`stepwise_models::r2vq_span`) on every answered question of a span template; the model
/// records the recipes it was fitted on, and `r2vq answer` says when it is asked about one of them.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq train-text split/fit.csv -o span.json\n  \
    stepwise r2vq answer split/held-out.csv --text-model span.json -o answers.jsonl")]
pub struct TrainTextArgs {
    /// Answered recipes in the SemEval layout.
    pub input: PathBuf,
    #[arg(long, default_value_t = 10)]
    pub epochs: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The model file to write (JSON).
    #[arg(short, long)]
    pub output: PathBuf,
}

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

/// Write the event-ordering study's inputs: a sentence corpus and two sequencing folders.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq order test_crl_srl.csv -o r2vq-order\n  \
    stepwise embed r2vq-order/sentences -e tfidf -o r2vq-order/features\n  \
    stepwise baseline r2vq-order/event --model pairwise --features r2vq-order/features -o event.jsonl\n  \
    stepwise eval r2vq-order/event -p event.jsonl --split test --by-length 2,3-5,6-10\n\n\
    OUT/sentences is a corpus with one procedure per recipe whose steps are its sentences; OUT/event and \
    OUT/sent are sequencing folders over it (items are sentences, `step` their index), split by recipe. EVENT: \
    for each ingredient entity, the sentences with a mention carrying its COREF id (explicit or coreferent), in \
    document order; an entity with the same sentences as another gives no second instance. SENT: for each EVENT \
    instance of N sentences, N consecutive sentences of the same recipe from a seeded random start.")]
pub struct OrderArgs {
    /// An annotated R2VQ file in the SemEval layout.
    pub input: PathBuf,
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Train, val and test fractions of the recipes.
    #[arg(long, value_name = "T,V,T", default_value = "0.6,0.2,0.2")]
    pub split: String,
    /// Also count a sentence whose event has the entity as a hidden argument (HIDDEN Drop=, Shadow=, ...).
    #[arg(long)]
    pub with_hidden: bool,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
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

fn run_order(a: OrderArgs) -> anyhow::Result<()> {
    let doc = read_r2vq_conllu(&a.input)?;
    let fractions = super::generate::parse_split(&a.split)?;
    let made = event_ordering(&doc, fractions, a.seed, a.with_hidden);
    let out = OutputDir::create(&a.output, a.force)?;
    let mut corpus_manifest = Manifest::new("r2vq-sentences").with_seed(a.seed);
    corpus_manifest.add_inputs(std::slice::from_ref(&a.input))?;
    let sentences = out.path().join("sentences");
    std::fs::create_dir_all(&sentences).map_err(|e| stepwise_core::Error::io(&sentences, e))?;
    stepwise_core::corpus::write_corpus_files(&sentences, &made.sentences, &mut corpus_manifest)?;
    for (name, instances) in [("event", &made.event), ("sent", &made.sent)] {
        let dir = out.path().join(name);
        std::fs::create_dir_all(&dir).map_err(|e| stepwise_core::Error::io(&dir, e))?;
        write_instances_jsonl(&dir.join(INSTANCES_JSONL), instances)?;
        write_instances_parquet(&dir.join(INSTANCES_PARQUET), instances)?;
        let mut m = Manifest::new("sequencing").with_seed(a.seed);
        m.add_inputs(std::slice::from_ref(&a.input))?;
        m.count("instances", instances.len() as u64);
        for (split, n) in per_split(instances) {
            m.count(&format!("instances_{split}"), n as u64);
        }
        m.param("study", format!("r2vq event ordering: {name}"));
        m.write(&dir)?;
    }
    let mut m = Manifest::new("r2vq-order").with_seed(a.seed);
    m.add_inputs(std::slice::from_ref(&a.input))?;
    m.param("with_hidden", a.with_hidden);
    m.count("recipes", doc.recipes.len() as u64);
    m.count("ingredient_entities", made.entities as u64);
    m.count("single_sentence_entities", made.single_sentence as u64);
    m.count("duplicate_sentence_sets", made.duplicates as u64);
    m.count("event_instances", made.event.len() as u64);
    m.count("sent_instances", made.sent.len() as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        let buckets = length_buckets(&made.event);
        eprintln!(
            "{} recipes, {} ingredient entities ({} in one sentence, {} repeating another's sentences): {} EVENT and \
             {} SENT instances (N = 2: {}, 3-5: {}, 6-10: {}, 11+: {}) into {}",
            doc.recipes.len(),
            made.entities,
            made.single_sentence,
            made.duplicates,
            made.event.len(),
            made.sent.len(),
            buckets[0],
            buckets[1],
            buckets[2],
            buckets[3],
            dest.display()
        );
    }
    Ok(())
}

fn per_split(instances: &[SequencingInstance]) -> std::collections::BTreeMap<&str, usize> {
    let mut m = std::collections::BTreeMap::new();
    for i in instances {
        *m.entry(i.split.as_str()).or_default() += 1;
    }
    m
}

/// Instances with N = 2, 3–5, 6–10 and 11 or more items (the paper's buckets, and the rest).
fn length_buckets(instances: &[SequencingInstance]) -> [usize; 4] {
    let mut b = [0; 4];
    for i in instances {
        b[match i.items.len() {
            0..=2 => 0,
            3..=5 => 1,
            6..=10 => 2,
            _ => 3,
        }] += 1;
    }
    b
}

fn run_answer(a: AnswerArgs) -> anyhow::Result<()> {
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

fn run_split(a: SplitArgs) -> anyhow::Result<()> {
    if !(a.held_out > 0.0 && a.held_out < 1.0) {
        usage_bail!("--held-out {} must be between 0 and 1 (exclusive)", a.held_out);
    }
    let doc = read_r2vq_conllu(&a.input)?;
    let (fit, held) = doc.split_by_recipe(a.held_out, a.seed);
    let out = OutputDir::create(&a.output, a.force)?;
    stepwise_core::output::write_string_atomic(&out.path().join("fit.csv"), &fit.to_conllu_string())?;
    stepwise_core::output::write_string_atomic(&out.path().join("held-out.csv"), &held.to_conllu_string())?;
    let mut m = Manifest::new("r2vq-split").with_seed(a.seed);
    m.add_inputs(std::slice::from_ref(&a.input))?;
    m.param("held_out", a.held_out);
    m.param("held_out_recipes", held.recipes.iter().map(|r| r.id.clone()).collect::<Vec<_>>());
    m.count("fit_recipes", fit.recipes.len() as u64);
    m.count("held_out_recipes", held.recipes.len() as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{} recipes to fit on, {} held out (seed {}) into {}",
            fit.recipes.len(),
            held.recipes.len(),
            a.seed,
            dest.display()
        );
    }
    Ok(())
}

fn run_train_text(a: TrainTextArgs) -> anyhow::Result<()> {
    let doc = read_r2vq_conllu(&a.input)?;
    let (model, report) = train_span(&doc, &SpanConfig { epochs: a.epochs, seed: a.seed });
    if report.questions == 0 {
        anyhow::bail!(
            "{}: no answered question of a span template (To what extent / For how long / Where / Why / From \
             where / What ... with / How do you ...?) to train on",
            a.input.display()
        );
    }
    model.write(&a.output)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "when the programs find nothing on a recipe with their layer (training questions):\n{}",
            route_policy_table(&report.route_policy)
        );
        eprintln!(
            "{} recipes, {} span-template questions ({} answered N/A; {} left out: no span of the text reaches F1 \
             0.5); best reachable EM {:.1} / F1 {:.1}; on its own training questions EM {:.1} / F1 {:.1}; \
             model written to {}",
            report.recipes,
            report.questions,
            report.no_answer,
            report.unreachable,
            report.oracle_em,
            report.oracle_f1,
            report.train_em,
            report.train_f1,
            a.output.display()
        );
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

fn run_convert(a: ConvertArgs) -> anyhow::Result<()> {
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

fn run_train_tagger(a: TrainTaggerArgs) -> anyhow::Result<()> {
    let mut recipes = read_inline_steps(&a.input)?;
    let mut excluded = std::collections::BTreeSet::new();
    for path in &a.exclude {
        excluded.extend(read_r2vq_conllu(path)?.recipes.into_iter().map(|r| r.id));
    }
    let before = recipes.len();
    recipes.retain(|(id, _)| !excluded.contains(id));
    if recipes.is_empty() {
        anyhow::bail!("{}: no recipe left to train on after --exclude", a.input.display());
    }
    let (model, report) = train_tagger(&recipes, &TaggerConfig { epochs: a.epochs, seed: a.seed });
    model.write(&a.output)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "{} recipes ({} excluded), {} steps, {} tokens, {} events, {} hidden tools known; token labels right on \
             the training recipes: {:.1}%; model written to {}",
            report.recipes,
            before - recipes.len(),
            report.steps,
            report.tokens,
            report.events,
            report.tools,
            report.train_label_accuracy,
            a.output.display()
        );
    }
    Ok(())
}

fn run_tag(a: TagArgs) -> anyhow::Result<()> {
    let model = TaggerModel::read(&a.model)?;
    // The input's own recipes (a SemEval file: scored against when they carry the layer), and the tagged ones.
    let (doc, tagged) = if a.input.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) {
        let doc = read_r2vq_conllu(&a.input)?;
        let tagged = tag_document(&doc, &model);
        (doc, tagged)
    } else {
        let corpus = stepwise_core::corpus::Corpus::load(&a.input)?;
        (Default::default(), tag_procedures(&corpus.procedures, &model))
    };
    if tagged.recipes.is_empty() {
        anyhow::bail!("{}: no recipe to tag", a.input.display());
    }
    let has_layer = doc.recipes.iter().any(|r| r.has_layer(Layer::CookingRoles));
    if a.scores.is_some() && !has_layer {
        usage_bail!("--scores: {} has no cooking-role layer to score the tagging against", a.input.display());
    }
    let fitted = model.fitted_recipes();
    let seen = doc.recipes.iter().filter(|r| fitted.contains(r.id.as_str())).count();
    let scores = has_layer.then(|| tagging_scores(&doc, &tagged));
    stepwise_core::output::write_string_atomic(&a.output, &tagged.to_conllu_string())?;
    if let (Some(path), Some(labels)) = (&a.scores, &scores) {
        let json = serde_json::json!({
            "kind": "r2vq-tagging",
            "input": a.input.display().to_string(),
            "model": a.model.display().to_string(),
            "recipes": doc.recipes.len(),
            "recipes_fitted_on": seen,
            "labels": labels,
        });
        stepwise_core::output::write_string_atomic(path, &format!("{json:#}\n"))?;
    }
    if !stepwise_core::progress::is_quiet() {
        eprintln!("{} recipes tagged into {}", tagged.recipes.len(), a.output.display());
        if let Some(labels) = &scores {
            eprintln!("against the input's own annotation:\n{}", tagging_table(labels));
        }
        if seen > 0 {
            eprintln!("warning: {seen} recipes were in the tagger's training data: these are not held-out scores");
        }
    }
    Ok(())
}
