//! Capacity tests (issue 49): can each GM3C scorer see a signal that is plainly in its inputs? Three generated
//! visual-cloze-shaped question sets, each decidable by one rule:
//! - `nearest`: the answer is the choice nearest the question's other images (what the Hasty Student reads);
//! - `farthest`: the answer is the choice farthest from them;
//! - `context`: the question's images say nothing; only the context steps name the answer.
//!
//! Every scorer must reach ≥ 95% on held-out questions within a fixed budget (training questions, epochs). A
//! model that cannot see the signal (saturated inputs, a broken mask, a candidate that never reaches the score)
//! fails here in a minute instead of in a study.

use rand::Rng;
use stepwise_core::Task;
use stepwise_core::rng::rng_for;
use stepwise_models::item_features::ItemMatrix;
use stepwise_models::m3c::inputs::{ContextKind, QueryKind};
use stepwise_models::m3c::train::{self, TrainConfig};
use stepwise_models::m3c::{HtrnConfig, InputScaling, InputSpec, M3cModel, ModelConfig, QuestionInput, ScorerKind};

const IMAGE_DIM: usize = 16;
const TEXT_DIM: usize = 12;
const SHOWN: usize = 3;
const CHOICES: usize = 4;
const KINDS: usize = 12;

/// Item vectors, one per row.
type Rows = Vec<Vec<f32>>;

#[derive(Clone, Copy, Debug)]
enum Rule {
    Nearest,
    Farthest,
    Context,
}

fn unit(rng: &mut impl Rng, dim: usize) -> Vec<f32> {
    let v: Vec<f32> = (0..dim).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.into_iter().map(|x| x / n).collect()
}

fn around(rng: &mut impl Rng, centre: &[f32], noise: f32) -> Vec<f32> {
    centre.iter().map(|c| c + noise * rng.random_range(-1.0f32..1.0)).collect()
}

/// A vector as the feature stores hold it: unit length, sharing most of its direction with every other item
/// (unrelated items have cosine ≈ 0.64, as the descriptor and w2v stores' ≈ 0.6).
fn as_stored(v: &[f32], common: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    let mixed: Vec<f32> = common.iter().zip(v).map(|(c, x)| c + 0.75 * x / n).collect();
    let m = mixed.iter().map(|x| x * x).sum::<f32>().sqrt();
    mixed.into_iter().map(|x| x / m).collect()
}

/// Questions for `rule`: context steps (one text vector each) and, per choice, the query sequence of the
/// shown images with the choice in the blank's place (last position).
fn questions(rule: Rule, count: usize, seed: u64) -> Vec<QuestionInput> {
    let image_common = unit(&mut rng_for(0, "capacity/image-common"), IMAGE_DIM);
    let text_common = unit(&mut rng_for(0, "capacity/text-common"), TEXT_DIM);
    let kinds: Vec<Vec<f32>> =
        (0..KINDS).map(|k| unit(&mut rng_for(0, &format!("capacity/kind/{k}")), IMAGE_DIM)).collect();
    (0..count)
        .map(|i| {
            let mut rng = rng_for(seed, &format!("capacity/{i}"));
            let answer = rng.random_range(0..CHOICES);
            let (shown, choices, context): (Rows, Rows, Rows) = match rule {
                Rule::Nearest | Rule::Farthest => {
                    // Items come from a few kinds (as the world's images from dishes and styles): the shown
                    // images and one choice side share a kind, the other side is of other kinds.
                    let kind = rng.random_range(0..KINDS);
                    let other = |rng: &mut rand_chacha::ChaCha8Rng| (kind + 1 + rng.random_range(0..KINDS - 1)) % KINDS;
                    let shown = (0..SHOWN).map(|_| around(&mut rng, &kinds[kind], 0.3)).collect();
                    let choices = (0..CHOICES)
                        .map(|c| match (rule, c == answer) {
                            (Rule::Nearest, true) => around(&mut rng, &kinds[kind], 0.3),
                            (Rule::Nearest, false) | (Rule::Farthest, true) => {
                                let k = other(&mut rng);
                                around(&mut rng, &kinds[k], 0.3)
                            }
                            // Nearer the question than the answer, yet farther than its own images.
                            _ => around(&mut rng, &kinds[kind], 0.45),
                        })
                        .collect();
                    let context = (0..4).map(|_| unit(&mut rng, TEXT_DIM)).collect();
                    (shown, choices, context)
                }
                Rule::Context => {
                    // Every choice is equally related to the shown images; the context carries a code that
                    // only the answer's image shares (its first TEXT_DIM coordinates).
                    let shown = (0..SHOWN).map(|_| unit(&mut rng, IMAGE_DIM)).collect();
                    let choices: Vec<Vec<f32>> = (0..CHOICES).map(|_| unit(&mut rng, IMAGE_DIM)).collect();
                    let code = &choices[answer][..TEXT_DIM];
                    let context = (0..4).map(|_| around(&mut rng, code, 0.1)).collect();
                    (shown, choices, context)
                }
            };
            let (shown, choices): (Vec<_>, Vec<_>) = (
                shown.iter().map(|v| as_stored(v, &image_common)).collect(),
                choices.iter().map(|v| as_stored(v, &image_common)).collect(),
            );
            let candidates = choices
                .iter()
                .map(|c| ItemMatrix {
                    dim: IMAGE_DIM,
                    data: shown.iter().chain(std::iter::once(c)).flatten().copied().collect(),
                })
                .collect();
            let context =
                context.iter().map(|v| ItemMatrix { dim: TEXT_DIM, data: as_stored(v, &text_common) }).collect();
            let candidate_items = Some(ItemMatrix { dim: IMAGE_DIM, data: choices.concat() });
            QuestionInput {
                qid: format!("q{i}"),
                recipe_id: format!("p{i}"),
                context,
                candidates,
                candidate_items,
                answer,
            }
        })
        .collect()
}

fn model(scorer: ScorerKind, train: &[QuestionInput]) -> M3cModel {
    let spec = InputSpec {
        task: Task::VisualCloze,
        context: ContextKind::Text,
        query: QueryKind::Images,
        tokens: false,
        max_context_steps: 25,
        max_rows_per_step: 32,
    };
    let mut c = ModelConfig::new(scorer, spec, TEXT_DIM, IMAGE_DIM);
    c.hidden = 32;
    c.attention = 32;
    c.htrn = HtrnConfig { layers: 2, dim: 64, heads: 4, ff: 128, max_positions: 32 };
    M3cModel::new(c.scaled_on(InputScaling::Centered, train), 1).unwrap()
}

/// Test accuracy of `scorer` trained on 800 questions of `rule` for at most 40 epochs (Adam with a larger step
/// than the paper's for the small model; inputs centred, `--inputs centered`: as stored, the same budget leaves
/// several scorers below 95%), selected on 100 validation questions, tested on 200 others.
fn capacity(scorer: ScorerKind, rule: Rule) -> f64 {
    let (tr, va, te) = (questions(rule, 800, 1), questions(rule, 100, 2), questions(rule, 200, 3));
    let m = model(scorer, &tr);
    let cfg = TrainConfig { learning_rate: 2e-3, batch_size: 32, max_epochs: 40, patience: 8, seed: 1 };
    train::train(&m, &tr, &va, &cfg, None, &mut |_, _, _, _, _| {}).unwrap().unwrap();
    let pred = train::predict(&m, &te, 64).unwrap();
    pred.iter().zip(&te).filter(|((p, _), q)| *p == q.answer).count() as f64 / te.len() as f64
}

/// How often the Hasty Student's rule (the choice nearest the shown images) is right: checks the generator.
fn hasty_accuracy(set: &[QuestionInput]) -> f64 {
    let right = set
        .iter()
        .filter(|q| {
            let shown: Vec<&[f32]> = (0..SHOWN).map(|r| q.candidates[0].row(r)).collect();
            let choices: Vec<&[f32]> = q.candidates.iter().map(|c| c.row(SHOWN)).collect();
            stepwise_models::hasty::cloze(&shown, &choices) == q.answer
        })
        .count();
    right as f64 / set.len() as f64
}

fn check(rule: Rule) {
    let hasty = hasty_accuracy(&questions(rule, 200, 3));
    let expected = match rule {
        Rule::Nearest => hasty >= 0.99,
        Rule::Farthest => hasty <= 0.01,
        Rule::Context => (0.15..=0.35).contains(&hasty),
    };
    assert!(expected, "{rule:?}: the generator's questions give the Hasty Student {hasty}");
    let mut failures = Vec::new();
    for scorer in ScorerKind::ALL {
        let acc = capacity(scorer, rule);
        eprintln!("{rule:?} {scorer:?}: {:.1}%", 100.0 * acc);
        if acc < 0.95 {
            failures.push(format!("{}: {:.1}%", scorer.display(), 100.0 * acc));
        }
    }
    assert!(failures.is_empty(), "{rule:?}: below 95% test accuracy: {}", failures.join(", "));
}

#[test]
fn every_scorer_finds_the_choice_nearest_the_question() {
    check(Rule::Nearest);
}

#[test]
fn every_scorer_finds_the_choice_farthest_from_the_question() {
    check(Rule::Farthest);
}

#[test]
fn every_scorer_reads_the_context_when_only_the_context_decides() {
    check(Rule::Context);
}
