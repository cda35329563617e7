//! Question generation from annotation, CLEVR-style: for each recipe, candidate questions are built from its
//! annotation graph in the release's templates (every entity, prop, event with a hidden argument, result, event
//! pair and semantic role gives candidates), and each candidate is then *asked*: parsed and answered by the
//! family programs ([`super::programs`]). A candidate is kept only when it parses back to the family it was
//! made for, its answer is defined and unique (no other event fits the question as well, no second event makes
//! the named result), and the program read the event the question was made from, when it was made from one.
//! Unanswerable distractors (family 18) are questions made from other recipes that have no answer in this one. The set is deduplicated per recipe, split by recipe, and balanced
//! so that no family's most frequent answer exceeds a share of its questions.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::Serialize;
use stepwise_core::r2vq::{AnnotationGraph, EntityKind, HiddenRole, R2vqDocument, R2vqRecipe};
use stepwise_core::rng::rng_for;
use stepwise_core::split::{SplitFractions, assign_splits};

use super::programs::{Context, Program, UNANSWERABLE, answer_question, entity_name, gerund, mention_name};
use super::questions::Template;

/// Generation parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct R2vqGenConfig {
    pub seed: u64,
    pub fractions: SplitFractions,
    /// Distractors per answerable question of a recipe (the SemEval test split has 352 in 3,442: about 0.11).
    pub distractor_rate: f64,
    /// The largest share a family's most frequent answer may have (questions of that answer are dropped, seeded,
    /// until it holds), so that no family is answerable by its majority answer; in [0.5, 1] (two-answer families
    /// cannot go below a half).
    pub max_answer_share: f64,
    /// At most this many questions per family (seeded sample), to balance families; `None`: all.
    pub per_family: Option<usize>,
}

impl Default for R2vqGenConfig {
    fn default() -> Self {
        R2vqGenConfig {
            seed: 0,
            fractions: SplitFractions::default(),
            distractor_rate: 0.11,
            max_answer_share: 0.5,
            per_family: None,
        }
    }
}

/// A generated question with its answer and the program that gives it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GeneratedQuestion {
    /// `<recipe>/<family>-<index>` (the scorer's key).
    pub id: String,
    pub recipe: String,
    pub split: String,
    pub family: u32,
    pub index: u32,
    pub template: Template,
    pub question: String,
    /// `None` for distractors ("N/A").
    pub answer: Option<String>,
    pub program: Option<Program>,
    pub evidence: Vec<String>,
}

/// The generated set and what happened to the candidates.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct R2vqGenerated {
    pub questions: Vec<GeneratedQuestion>,
    /// Candidates built, per family they were made for.
    pub candidates: BTreeMap<u32, usize>,
    /// Candidates dropped: the programs answered another family, gave no answer, an ambiguous one, or read another
    /// event.
    pub rejected: BTreeMap<u32, usize>,
    /// Repeated question texts within a recipe.
    pub duplicates: usize,
    /// Dropped to keep each family's most frequent answer under the share, and by the per-family cap.
    pub balanced_away: usize,
}

/// A candidate before it is asked: the family it is made for, its text, and the event it was made from (the
/// program must read it).
struct Candidate {
    family: u32,
    question: String,
    sources: Vec<String>,
}

/// What one recipe's candidates gave.
#[derive(Default)]
struct RecipeCandidates {
    questions: Vec<GeneratedQuestion>,
    candidates: BTreeMap<u32, usize>,
    rejected: BTreeMap<u32, usize>,
    duplicates: usize,
}

/// Generate questions for every recipe of `doc`.
pub fn generate_r2vq(doc: &R2vqDocument, cfg: &R2vqGenConfig) -> R2vqGenerated {
    let mut out = R2vqGenerated::default();
    let splits = assign_splits(doc.recipes.iter().map(|r| (r.id.as_str(), None)), cfg.fractions, cfg.seed);
    let graphs: Vec<AnnotationGraph> = doc.recipes.par_iter().map(AnnotationGraph::of).collect();
    let split_of = |id: &str| splits.get(id).map_or("train", |s| s.as_str()).to_string();
    // Each recipe on its own (in parallel; merged in recipe order, so the result does not depend on threads).
    let per_recipe: Vec<RecipeCandidates> = doc
        .recipes
        .par_iter()
        .zip(&graphs)
        .map(|(recipe, graph)| {
            let ctx = Context::new(recipe, graph);
            let mut made = RecipeCandidates::default();
            let mut seen = BTreeSet::new();
            for c in candidates(&ctx, cfg.seed) {
                *made.candidates.entry(c.family).or_default() += 1;
                let ok = answer_question(recipe, graph, &c.question).ok().filter(|a| {
                    a.family == c.family
                        && a.answer.is_some()
                        && !a.ambiguous
                        && c.sources.iter().all(|s| a.evidence.contains(s))
                });
                // A one-word time, location or source span ("then", "in") is a fragment, not an answer to ask for.
                let ok = ok.filter(|a| {
                    ![7, 8, 16].contains(&a.family)
                        || a.answer.as_deref().is_some_and(|s| s.split_whitespace().count() >= 2)
                });
                let Some(a) = ok else {
                    *made.rejected.entry(c.family).or_default() += 1;
                    continue;
                };
                if !seen.insert(c.question.to_lowercase()) {
                    made.duplicates += 1;
                    continue;
                }
                made.questions.push(GeneratedQuestion {
                    id: String::new(),
                    recipe: recipe.id.clone(),
                    split: split_of(&recipe.id),
                    family: a.family,
                    index: 0,
                    template: a.template,
                    question: c.question,
                    answer: a.answer,
                    program: a.program,
                    evidence: a.evidence,
                });
            }
            made
        })
        .collect();
    let mut kept: Vec<Vec<GeneratedQuestion>> = Vec::with_capacity(per_recipe.len());
    for made in per_recipe {
        for (f, n) in made.candidates {
            *out.candidates.entry(f).or_default() += n;
        }
        for (f, n) in made.rejected {
            *out.rejected.entry(f).or_default() += n;
        }
        out.duplicates += made.duplicates;
        kept.push(made.questions);
    }
    // (recipe, question) of every kept question: the distractors' pool.
    let pool: Vec<(usize, &str)> =
        kept.iter().enumerate().flat_map(|(r, qs)| qs.iter().map(move |q| (r, q.question.as_str()))).collect();
    // Distractors: questions of other recipes with no answer here.
    let distractors: Vec<Vec<GeneratedQuestion>> = doc
        .recipes
        .par_iter()
        .zip(&graphs)
        .enumerate()
        .map(|(r, (recipe, graph))| {
            let want = (kept[r].len() as f64 * cfg.distractor_rate).round() as usize;
            let mut added = Vec::new();
            if want == 0 || pool.is_empty() {
                return added;
            }
            let mut rng = rng_for(cfg.seed, &format!("r2vq/distractors/{}", recipe.id));
            let mut seen: BTreeSet<String> = kept[r].iter().map(|q| q.question.to_lowercase()).collect();
            for _ in 0..want * 20 {
                if added.len() == want {
                    break;
                }
                let (from, q) = pool[rng.random_range(0..pool.len())];
                if from == r || !seen.insert(q.to_lowercase()) {
                    continue;
                }
                let Ok(a) = answer_question(recipe, graph, q) else { continue };
                if a.answer.is_some() {
                    continue;
                }
                added.push(GeneratedQuestion {
                    id: String::new(),
                    recipe: recipe.id.clone(),
                    split: split_of(&recipe.id),
                    family: UNANSWERABLE,
                    index: 0,
                    template: a.template,
                    question: q.to_string(),
                    answer: None,
                    program: None,
                    evidence: Vec::new(),
                });
            }
            added
        })
        .collect();
    for (questions, extra) in kept.iter_mut().zip(distractors) {
        questions.extend(extra);
    }
    let mut all: Vec<GeneratedQuestion> = kept.into_iter().flatten().collect();
    let before = all.len();
    balance(&mut all, cfg);
    out.balanced_away = before - all.len();
    // Ids: per recipe and family, in generation order.
    let mut next: BTreeMap<(String, u32), u32> = BTreeMap::new();
    for q in &mut all {
        let n = next.entry((q.recipe.clone(), q.family)).or_default();
        q.index = *n;
        *n += 1;
        q.id = format!("{}/{}-{}", q.recipe, q.family, q.index);
    }
    out.questions = all;
    out
}

/// Drop (seeded) questions of each family's most frequent answer until it holds at most `max_answer_share` of
/// the family, then sample each family down to `per_family`. Order is kept.
fn balance(all: &mut Vec<GeneratedQuestion>, cfg: &R2vqGenConfig) {
    let mut drop: BTreeSet<usize> = BTreeSet::new();
    let families: BTreeSet<u32> = all.iter().map(|q| q.family).collect();
    for &family in &families {
        let members: Vec<usize> = (0..all.len()).filter(|&i| all[i].family == family).collect();
        let mut by_answer: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for &i in &members {
            let key = all[i].answer.as_deref().map(normalize_key).unwrap_or_default();
            by_answer.entry(key).or_default().push(i);
        }
        // Families with one possible answer (the distractors) are not balanced by answer.
        if family != UNANSWERABLE && by_answer.len() > 1 && cfg.max_answer_share < 1.0 {
            let mut rng = rng_for(cfg.seed, &format!("r2vq/balance/{family}"));
            loop {
                let total: usize = by_answer.values().map(Vec::len).sum();
                if by_answer.len() < 2 {
                    break;
                }
                let Some((top_key, top)) = by_answer.iter().max_by_key(|(k, v)| (v.len(), std::cmp::Reverse(*k)))
                else {
                    break;
                };
                if (top.len() as f64) <= cfg.max_answer_share * total as f64 {
                    break;
                }
                let others = total - top.len();
                let allowed = ((cfg.max_answer_share * others as f64) / (1.0 - cfg.max_answer_share)).floor() as usize;
                let key = top_key.clone();
                let list = by_answer.get_mut(&key).expect("present");
                list.shuffle(&mut rng);
                drop.extend(list.drain(allowed.min(list.len())..));
                if allowed == 0 {
                    by_answer.remove(&key);
                }
            }
        }
        if let Some(cap) = cfg.per_family {
            let mut left: Vec<usize> = members.into_iter().filter(|i| !drop.contains(i)).collect();
            if left.len() > cap {
                left.shuffle(&mut rng_for(cfg.seed, &format!("r2vq/per-family/{family}")));
                drop.extend(left.drain(cap..));
            }
        }
    }
    let mut i = 0;
    all.retain(|_| {
        i += 1;
        !drop.contains(&(i - 1))
    });
}

/// Answers compared for balance: lower case, articles and punctuation dropped.
fn normalize_key(a: &str) -> String {
    a.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !["a", "an", "the"].contains(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The candidates of one recipe, in a fixed order.
fn candidates(ctx: &Context<'_>, seed: u64) -> Vec<Candidate> {
    let g = ctx.graph;
    let mut out = Vec::new();
    let cite = |e: usize| {
        let m = g.event_mention(e);
        vec![format!("{}.{}.{} {}", m.at.step, m.at.sentence, m.at.token, m.text)]
    };
    let push = |out: &mut Vec<Candidate>, family: u32, question: String, sources: Vec<String>| {
        out.push(Candidate { family, question, sources })
    };
    // Family 0: ingredients processed, props used and counted.
    let mut ingredients = BTreeSet::new();
    let mut props = BTreeSet::new();
    for m in &g.mentions {
        let name = mention_name(&m.text).to_lowercase();
        match m.kind {
            EntityKind::ExplicitIngredient | EntityKind::ImplicitIngredient => ingredients.insert(name),
            EntityKind::Tool | EntityKind::Habitat => props.insert(name),
            EntityKind::Event => false,
        };
    }
    for e in &g.events {
        for h in e.hidden.iter().filter(|h| matches!(h.role, HiddenRole::Tool | HiddenRole::Habitat)) {
            props.extend(h.values.iter().map(entity_name));
        }
    }
    for name in &ingredients {
        push(&mut out, 0, format!("How many actions does it take to process the {name}?"), vec![]);
    }
    for name in &props {
        push(&mut out, 0, format!("How many times is the {name} used?"), vec![]);
        push(&mut out, 0, format!("How many {} are used?", plural(name)), vec![]);
    }
    // Results: how they were made and what is in them.
    let mut results = BTreeSet::new();
    for e in &g.events {
        for h in e.hidden.iter().filter(|h| h.role == HiddenRole::Result) {
            results.extend(h.values.iter().map(entity_name));
        }
        results.extend(e.results.iter().map(|&m| mention_name(&g.mentions[m].text).to_lowercase()));
    }
    for name in &results {
        push(&mut out, 3, format!("How did you get the {name}?"), vec![]);
        push(&mut out, 3, format!("What's in the {name}?"), vec![]);
    }
    // Per event: elided objects, hidden tool and habitat, semantic roles.
    let events_with_objects: Vec<(usize, String, String)> = (0..g.events.len())
        .filter_map(|e| {
            let verb = ctx.event_lemma(e);
            let object = ctx.objects(e).into_iter().next()?;
            (!verb.is_empty()).then_some((e, verb, object))
        })
        .collect();
    for e in 0..g.events.len() {
        let event = &g.events[e];
        let verb = ctx.event_lemma(e);
        if verb.is_empty() {
            continue;
        }
        if event.hidden.iter().any(|h| h.role == HiddenRole::Drop) {
            push(&mut out, 1, format!("What should be {}?", participle(&verb)), cite(e));
        }
        let Some(object) = ctx.objects(e).into_iter().next() else { continue };
        let has = |role: HiddenRole| event.hidden.iter().any(|h| h.role == role);
        if has(HiddenRole::Tool) {
            push(&mut out, 2, format!("How do you {verb} the {object}?"), cite(e));
        }
        if has(HiddenRole::Habitat) {
            push(&mut out, 2, format!("Where should you {verb} the {object}?"), cite(e));
        }
        // Orientation of the props taking part in it, where the source records one.
        for &m in &event.participants {
            let mention = &g.mentions[m];
            if matches!(mention.kind, EntityKind::Tool | EntityKind::Habitat) && mention.orientation.is_some() {
                let prop = mention_name(&mention.text).to_lowercase();
                push(
                    &mut out,
                    19,
                    format!("What is the orientation of the {prop} when you {verb} the {object}?"),
                    cite(e),
                );
            }
        }
        let role = |r: &str| event.roles.iter().any(|s| s.role == r);
        if role("Result") {
            push(&mut out, 5, format!("To what extent do you {verb} the {object}?"), cite(e));
        }
        // "How do you ...?" belongs to the first of hidden tool (2), instrument (6), attribute (10), goal (14).
        let how = [(6, role("Instrument")), (10, role("Attribute")), (14, role("Goal"))];
        if !has(HiddenRole::Tool)
            && let Some((family, _)) = how.iter().find(|(_, present)| *present)
        {
            push(&mut out, *family, format!("How do you {verb} the {object}?"), cite(e));
        }
        if role("Time") {
            push(&mut out, 7, format!("For how long do you {verb} the {object}?"), cite(e));
        }
        if role("Location") || role("Destination") {
            push(&mut out, 8, format!("Where do you {verb} the {object}?"), cite(e));
        } else if role("Co-Patient") {
            push(&mut out, 12, format!("Where do you {verb} the {object}?"), cite(e));
        }
        if role("Extent") || role("Value") {
            push(&mut out, 9, format!("By how much do you {verb} the {object}?"), cite(e));
        }
        if role("Co-Theme") {
            push(&mut out, 13, format!("What do you {verb} the {object} with?"), cite(e));
        }
        if role("Purpose") {
            push(&mut out, 15, format!("Why do you {verb} the {object}?"), cite(e));
        } else if event
            .roles
            .iter()
            .any(|s| matches!(s.role.as_str(), "Result" | "Cause") && s.text.to_lowercase().starts_with("so "))
        {
            push(&mut out, 11, format!("Why do you {verb} the {object}?"), cite(e));
        }
        if role("Source") {
            push(&mut out, 16, format!("From where do you {verb} the {object}?"), cite(e));
        }
    }
    // Family 4: each event against one other (seeded), in a random order so both answers occur.
    let mut rng = rng_for(seed, &format!("r2vq/pairs/{}", g.recipe));
    if events_with_objects.len() >= 2 {
        for (i, (e, verb, object)) in events_with_objects.iter().enumerate() {
            let mut j = rng.random_range(0..events_with_objects.len() - 1);
            if j >= i {
                j += 1;
            }
            let (f, verb2, object2) = &events_with_objects[j];
            let mut clauses =
                [(*e, format!("{} the {object}", gerund(verb))), (*f, format!("{} the {object2}", gerund(verb2)))];
            if rng.random_bool(0.5) {
                clauses.swap(0, 1);
            }
            let question = format!("{} and {}, which comes first?", capitalize(&clauses[0].1), clauses[1].1);
            let sources = cite(clauses[0].0).into_iter().chain(cite(clauses[1].0)).collect();
            out.push(Candidate { family: 4, question, sources });
        }
    }
    // Family 3: what an ingredient becomes, and where it is after each step it is used in.
    for name in &ingredients {
        push(&mut out, 3, format!("What does the {name} become?"), vec![]);
        let steps: BTreeSet<u32> = ctx.entity_events(name).iter().map(|&e| g.event_mention(e).at.step).collect();
        for step in steps {
            push(&mut out, 3, format!("Where is the {name} after step {step}?"), vec![]);
        }
    }
    // Family 17: where an ingredient was before each of its later events.
    for name in &ingredients {
        let events = ctx.entity_events(name);
        for &e in events.iter().skip(1) {
            let verb = ctx.event_lemma(e);
            if !verb.is_empty() {
                push(&mut out, 17, format!("Where was the {name} before it was {}?", participle(&verb)), cite(e));
            }
        }
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// "serve" → "served", "cut" → "cut", "fry" → "fried", "chop" → "chopped", "leave" → "left".
fn participle(lemma: &str) -> String {
    const SAME: &[&str] = &["cut", "put", "set", "let", "spread", "beat", "cast", "shut", "split", "quit"];
    const IRREGULAR: &[(&str, &str)] = &[
        ("leave", "left"),
        ("freeze", "frozen"),
        ("grind", "ground"),
        ("tear", "torn"),
        ("shake", "shaken"),
        ("take", "taken"),
        ("keep", "kept"),
        ("bring", "brought"),
        ("hold", "held"),
        ("lay", "laid"),
        ("make", "made"),
        ("get", "gotten"),
        ("throw", "thrown"),
        ("stick", "stuck"),
        ("hang", "hung"),
    ];
    if SAME.contains(&lemma) {
        return lemma.to_string();
    }
    if let Some((_, p)) = IRREGULAR.iter().find(|(l, _)| *l == lemma) {
        return p.to_string();
    }
    if lemma.ends_with('e') {
        return format!("{lemma}d");
    }
    let b = lemma.as_bytes();
    let vowel = |c: u8| b"aeiou".contains(&c);
    let n = b.len();
    if n >= 2 && b[n - 1] == b'y' && !vowel(b[n - 2]) {
        return format!("{}ied", &lemma[..n - 1]);
    }
    // The gerund knows when the final consonant doubles ("chopping" → "chopped").
    let g = gerund(lemma);
    let stem = g.strip_suffix("ing").unwrap_or(lemma);
    format!("{stem}ed")
}

/// "bowl" → "bowls", "dish" → "dishes", "knife" → "knives", "cutting board" → "cutting boards".
fn plural(name: &str) -> String {
    let (head, last) = name.rsplit_once(' ').map_or(("", name), |(h, l)| (h, l));
    let p = if last.ends_with("ife") {
        format!("{}ves", &last[..last.len() - 2])
    } else if ["s", "x", "z", "ch", "sh"].iter().any(|s| last.ends_with(s)) {
        format!("{last}es")
    } else if last.len() > 1 && last.ends_with('y') && !b"aeiou".contains(&last.as_bytes()[last.len() - 2]) {
        format!("{}ies", &last[..last.len() - 1])
    } else {
        format!("{last}s")
    };
    if head.is_empty() { p } else { format!("{head} {p}") }
}

/// The document of a split, with the generated questions as its header's questions and answers (metadata kept).
pub fn document_with_questions(doc: &R2vqDocument, questions: &[GeneratedQuestion], split: &str) -> R2vqDocument {
    use stepwise_core::r2vq::{HeaderLine, QuestionId};
    let mut by_recipe: BTreeMap<&str, Vec<&GeneratedQuestion>> = BTreeMap::new();
    for q in questions.iter().filter(|q| q.split == split) {
        by_recipe.entry(q.recipe.as_str()).or_default().push(q);
    }
    let recipes: Vec<R2vqRecipe> = doc
        .recipes
        .iter()
        .filter_map(|r| {
            let qs = by_recipe.get(r.id.as_str())?;
            let mut header: Vec<HeaderLine> = Vec::new();
            for q in qs {
                let id = QuestionId { family: q.family, index: q.index };
                header.push(HeaderLine::Question { id, text: q.question.clone() });
                header.push(HeaderLine::Answer { id, text: q.answer.clone().unwrap_or_else(|| "N/A".into()) });
            }
            header.extend(
                r.header
                    .iter()
                    .filter(|h| !matches!(h, HeaderLine::Question { .. } | HeaderLine::Answer { .. }))
                    .cloned(),
            );
            Some(R2vqRecipe { header, ..r.clone() })
        })
        .collect();
    R2vqDocument { recipes, final_newline: true }
}

#[cfg(test)]
mod tests {
    use super::super::programs::fixtures::{onion, pasta};
    use super::*;

    #[test]
    fn generated_questions_answer_back_split_by_recipe_with_distractors_and_balanced_answers() {
        let doc = R2vqDocument {
            recipes: vec![onion("o1"), pasta("p1"), onion("o2"), pasta("p2"), onion("o3")],
            final_newline: true,
        };
        let cfg = R2vqGenConfig { distractor_rate: 0.3, ..R2vqGenConfig::default() };
        let made = generate_r2vq(&doc, &cfg);
        assert_eq!(made, generate_r2vq(&doc, &cfg), "deterministic");
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            assert_eq!(pool.install(|| generate_r2vq(&doc, &cfg)), made, "same with {threads} threads");
        }
        let families: BTreeSet<u32> = made.questions.iter().map(|q| q.family).collect();
        for f in [0, 1, 2, 3, 4, 7, 8, 17, UNANSWERABLE] {
            assert!(families.contains(&f), "family {f} generated: {families:?}");
        }
        let mut ids = BTreeSet::new();
        let mut split_of: BTreeMap<&str, &str> = BTreeMap::new();
        for q in &made.questions {
            assert!(ids.insert(q.id.clone()), "unique id {}", q.id);
            assert_eq!(*split_of.entry(q.recipe.as_str()).or_insert(q.split.as_str()), q.split, "split by recipe");
            let r = doc.recipes.iter().find(|r| r.id == q.recipe).unwrap();
            let a = answer_question(r, &AnnotationGraph::of(r), &q.question).unwrap();
            assert_eq!((a.family, &a.answer), (q.family, &q.answer), "{} answers back", q.question);
            if q.family == UNANSWERABLE {
                assert!(q.answer.is_none());
            }
        }
        let d = made.questions.iter().find(|q| q.family == UNANSWERABLE && q.recipe.starts_with('o')).unwrap();
        assert!(!d.question.contains("onion"), "a distractor comes from the other recipes: {}", d.question);
        // No family answerable by its majority answer beyond the share.
        for f in families.iter().filter(|&&f| f != UNANSWERABLE) {
            let answers: Vec<&str> =
                made.questions.iter().filter(|q| q.family == *f).filter_map(|q| q.answer.as_deref()).collect();
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for a in &answers {
                *counts.entry(a).or_default() += 1;
            }
            if counts.len() > 1 {
                let top = counts.values().max().unwrap();
                assert!(*top as f64 <= 0.5 * answers.len() as f64, "family {f}: {counts:?}");
            }
        }
        // Written per split in the SemEval layout: the header holds the questions and answers.
        let split = &made.questions[0].split;
        let part = document_with_questions(&doc, &made.questions, split);
        let n: usize = part.recipes.iter().map(|r| r.questions().len()).sum();
        assert_eq!(n, made.questions.iter().filter(|q| &q.split == split).count());
        let capped = generate_r2vq(&doc, &R2vqGenConfig { per_family: Some(2), ..cfg });
        assert!(families.iter().all(|f| capped.questions.iter().filter(|q| q.family == *f).count() <= 2));
    }

    #[test]
    fn word_forms() {
        assert_eq!(participle("serve"), "served");
        assert_eq!(participle("chop"), "chopped");
        assert_eq!(participle("fry"), "fried");
        assert_eq!(participle("cut"), "cut");
        assert_eq!(participle("mix"), "mixed");
        assert_eq!(participle("leave"), "left");
        assert_eq!(participle("boil"), "boiled");
        assert_eq!(plural("bowl"), "bowls");
        assert_eq!(plural("knife"), "knives");
        assert_eq!(plural("baking dish"), "baking dishes");
    }
}
