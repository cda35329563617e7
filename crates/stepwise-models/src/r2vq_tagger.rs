//! A cooking-role tagger for recipes without annotation: it writes the inline-tagged layout (events, TOOL
//! mentions, which event each participant takes part in, and the events' hidden tools, habitats, elided objects
//! and results), which `stepwise_ingest::readers::r2vq_inline` rebuilds into the SemEval layout the programs read.
//!
//! Trained on the inline-tagged train recipes, with averaged perceptrons over hashed features:
//! - a left-to-right token tagger (greedy, previous two labels as features) over eight labels: outside, event,
//!   TOOL begin/inside, and participant of the previous / next event (a TOOL mention may be a participant too);
//!   a participant points at the nearest event before (or after) it, as the inline reader reads `participant`;
//! - per event, its hidden tool: one of the tools seen at least [`MIN_VALUE_COUNT`] times in training, or none;
//! - per event, its hidden habitat or none, ranked among the previous event's habitat, the latest place named
//!   (a participant after in/into/on/onto/to), the latest participants and the habitats
//!   seen at least [`MIN_VALUE_COUNT`] times in training;
//! - per event, whether it has an elided object (Drop), whose value is the previous event's participants;
//! - per event, its result (RES) or none, ranked among the result names seen at least [`MIN_VALUE_COUNT`] times in
//!   training ("mixture", "dough", "batter", ...) and the participants first named after the event, in its step
//!   or the next two ("cut ... add the chopped vegetables").
//!
//! Shadows and coreference are not predicted (the inline reader rebuilds same-name coreference).
//! Deterministic: one thread, the recipe order shuffled by a seeded generator.

use std::collections::BTreeMap;
use std::path::Path;

use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use stepwise_core::Result;
use stepwise_core::r2vq::{EntityKind, EntityRef, EntityTag, HiddenArg, HiddenRole, InlineToken, R2vqDocument};
use stepwise_ingest::readers::r2vq_inline;

use crate::hashed::{Perceptron, dense, read_model, score, slot, sparse, word_hash, write_model};

/// A hidden tool, habitat or result name is a candidate when training shows it this often.
pub const MIN_VALUE_COUNT: usize = 3;
const FORMAT: &str = "stepwise-r2vq-tagger-v2";

/// Token labels.
const LABELS: [&str; 8] = ["O", "EV", "TB", "TI", "P<", "P>", "TB+P<", "TB+P>"];
const O: usize = 0;
const EV: usize = 1;
const TB: usize = 2;
const TI: usize = 3;
const P_PREV: usize = 4;
const P_NEXT: usize = 5;
const TB_PREV: usize = 6;
const TB_NEXT: usize = 7;

/// Prepositions before a place.
const PLACE_PREPS: [&str; 5] = ["in", "into", "on", "onto", "to"];

/// Training settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaggerConfig {
    pub epochs: usize,
    pub seed: u64,
}

impl Default for TaggerConfig {
    fn default() -> Self {
        TaggerConfig { epochs: 8, seed: 0 }
    }
}

/// A trained tagger (saved as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaggerModel {
    pub format: String,
    pub epochs: usize,
    pub seed: u64,
    /// The recipes it was trained on.
    pub fitted_on: Vec<String>,
    /// The hidden tools it can predict.
    pub tools: Vec<String>,
    /// The habitats training knew (candidates besides the recipe's own places).
    pub habitats: Vec<String>,
    /// The result names training knew (candidates besides the participants named after an event).
    #[serde(default)]
    pub results: Vec<String>,
    weights: Vec<(u32, f32)>,
    #[serde(skip)]
    dense: Vec<f32>,
}

/// A step's words, lower-cased, with their hashes.
struct Words {
    forms: Vec<String>,
    hashes: Vec<u64>,
}

impl Words {
    fn of(forms: Vec<String>) -> Words {
        let hashes = forms.iter().map(|w| word_hash(w)).collect();
        Words { forms, hashes }
    }

    fn hash(&self, i: isize) -> u64 {
        if i < 0 {
            return 1;
        }
        self.hashes.get(i as usize).copied().unwrap_or(2)
    }
}

fn suffix(w: &str, n: usize) -> u64 {
    let chars: Vec<char> = w.chars().collect();
    word_hash(&chars[chars.len().saturating_sub(n)..].iter().collect::<String>())
}

/// Features of token `i` with the labels before it, each conjoined with `label`.
fn token_features(words: &Words, i: usize, prev: &[usize], label: usize, out: &mut Vec<u32>) {
    out.clear();
    let i_ = i as isize;
    let p1 = prev.last().copied().map_or(99, |l| l as u64);
    let p2 = if prev.len() >= 2 { prev[prev.len() - 2] as u64 } else { 99 };
    let since_event = prev.iter().rev().position(|&l| l == EV).map_or(99, |d| d.min(8) as u64);
    let w0 = words.hash(i_);
    let l = label as u64;
    let form = &words.forms[i];
    let digit = u64::from(form.chars().any(|c| c.is_ascii_digit()));
    for f in [
        [0, l, 0, 0],
        [1, l, w0, 0],
        [2, l, words.hash(i_ - 1), 0],
        [3, l, words.hash(i_ + 1), 0],
        [4, l, words.hash(i_ - 2), 0],
        [5, l, words.hash(i_ + 2), 0],
        [6, l, suffix(form, 3), 0],
        [7, l, p1, 0],
        [8, l, p1, p2],
        [9, l, p1, w0],
        [10, l, since_event, 0],
        [11, l, u64::from(i == 0), 0],
        [12, l, words.hash(i_ - 1), w0],
        [13, l, w0, words.hash(i_ + 1)],
        [14, l, digit, 0],
        [15, l, suffix(form, 2), p1],
    ] {
        out.push(slot(&f));
    }
}

/// The gold label of each token of a step.
fn gold_labels(tokens: &[InlineToken]) -> Vec<usize> {
    let events: Vec<usize> = (0..tokens.len()).filter(|&i| is_event(&tokens[i])).collect();
    tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let tool = match t.entity {
                Some(EntityTag::Begin(EntityKind::Event)) | Some(EntityTag::Inside(EntityKind::Event)) => return EV,
                Some(EntityTag::Begin(EntityKind::Tool)) => true,
                Some(EntityTag::Inside(EntityKind::Tool)) => return TI,
                _ => false,
            };
            let Some(v) = &t.participant else { return if tool { TB } else { O } };
            let first = v.split_whitespace().next().unwrap_or("");
            // The nearest event with those words, the earlier on a tie (as the inline reader resolves it).
            let target = events
                .iter()
                .filter(|&&e| tokens[e].form == first)
                .min_by_key(|&&e| (e.abs_diff(i), e))
                .copied()
                .or_else(|| events.iter().rev().find(|&&e| e < i).copied());
            let before = target.is_none_or(|e| e < i);
            match (tool, before) {
                (false, true) => P_PREV,
                (false, false) => P_NEXT,
                (true, true) => TB_PREV,
                (true, false) => TB_NEXT,
            }
        })
        .collect()
}

fn is_event(t: &InlineToken) -> bool {
    matches!(t.entity, Some(EntityTag::Begin(EntityKind::Event) | EntityTag::Inside(EntityKind::Event)))
}

fn tag_step(w: &[f32], words: &Words) -> Vec<usize> {
    let mut labels = Vec::with_capacity(words.forms.len());
    let mut buf = Vec::new();
    for i in 0..words.forms.len() {
        let mut best = (O, f32::NEG_INFINITY);
        for label in 0..LABELS.len() {
            token_features(words, i, &labels, label, &mut buf);
            let s = score(w, &buf);
            if s > best.1 {
                best = (label, s);
            }
        }
        labels.push(best.0);
    }
    labels
}

/// An event as the hidden-argument decisions see it.
struct EventView {
    word: u64,
    prev_word: u64,
    next_word: u64,
    /// The event starts its step.
    first: bool,
    /// Participants labelled for it.
    participants: usize,
    /// The step names a place (a participant after a place preposition) before the event.
    place_before: bool,
    /// The previous event had a habitat.
    prev_habitat: bool,
}

fn event_features(e: &EventView, decision: u64, class: u64, bag: &[u64], out: &mut Vec<u32>) {
    out.clear();
    for f in [
        [decision, class, 0, 0],
        [decision, class, 1, e.word],
        [decision, class, 2, e.prev_word],
        [decision, class, 3, e.next_word],
        [decision, class, 4, u64::from(e.first)],
        [decision, class, 5, e.participants.min(4) as u64],
        [decision, class, 6, u64::from(e.place_before)],
        [decision, class, 7, u64::from(e.prev_habitat)],
        [decision, class, 8, e.word ^ u64::from(e.prev_habitat)],
        [decision, class, 9, e.word ^ (e.participants.min(2) as u64)],
    ] {
        out.push(slot(&f));
    }
    for &b in bag {
        out.push(slot(&[decision, class, 10, b]));
    }
}

/// A hidden habitat's candidate values: the previous event's habitat, the latest place named, the latest
/// participants, the habitats training knew; with where each came from.
fn habitat_candidates(e: &EventContext, prev: Option<&str>, known: &[String]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut add = |name: &str, source: u64| {
        if !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_string(), source));
        }
    };
    if let Some(p) = prev {
        add(p, 1);
    }
    if let Some(p) = &e.place {
        add(p, 2);
    }
    for (k, m) in e.mentions.iter().enumerate() {
        add(m, 10 + k as u64);
    }
    for h in known {
        add(h, 20);
    }
    out
}

/// Features of a habitat candidate (`None`: no hidden habitat).
fn habitat_features(e: &EventView, candidate: Option<&(String, u64)>, bag: &[u64], out: &mut Vec<u32>) {
    out.clear();
    let h = DECIDE_HABITAT;
    match candidate {
        None => {
            for f in
                [[h, 0, 0, 0], [h, 0, 1, e.word], [h, 0, 2, u64::from(e.prev_habitat)], [h, 0, 3, u64::from(e.first)]]
            {
                out.push(slot(&f));
            }
            for &b in bag {
                out.push(slot(&[h, 0, 4, b]));
            }
        }
        Some((name, source)) => {
            let last = word_hash(name.rsplit(' ').next().unwrap_or(""));
            let whole = word_hash(name);
            for f in [
                [h, 1, *source, 0],
                [h, 2, *source, e.word],
                [h, 3, last, 0],
                [h, 4, last, e.word],
                [h, 5, whole, 0],
                [h, 6, *source, u64::from(e.place_before)],
                [h, 7, *source, e.participants.min(3) as u64],
            ] {
                out.push(slot(&f));
            }
        }
    }
}

/// The best habitat candidate (`None`: no hidden habitat) and its index among the candidates.
fn best_habitat(w: &[f32], e: &EventContext, candidates: &[(String, u64)], buf: &mut Vec<u32>) -> Option<usize> {
    habitat_features(&e.view, None, e.bag, buf);
    let mut best = (None, score(w, buf));
    for (k, c) in candidates.iter().enumerate() {
        habitat_features(&e.view, Some(c), e.bag, buf);
        let s = score(w, buf);
        if s > best.1 {
            best = (Some(k), s);
        }
    }
    best.0
}

/// The best hidden-tool class: an index into the tools, `n_tools` for none.
fn best_tool(w: &[f32], e: &EventContext, n_tools: usize, buf: &mut Vec<u32>) -> usize {
    let mut best = (n_tools, f32::NEG_INFINITY);
    for k in 0..=n_tools {
        event_features(&e.view, DECIDE_TOOL, k as u64, e.bag, buf);
        let s = score(w, buf);
        if s > best.1 {
            best = (k, s);
        }
    }
    best.0
}

/// A result's candidate names: the result names training knew, and the participants first named after the event
/// (source 10 + steps ahead); with where each came from.
fn result_candidates(e: &EventContext, known: &[String]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = e.named_after.iter().map(|(n, ahead)| (n.clone(), 10 + ahead)).collect();
    for r in known {
        if !out.iter().any(|(n, _)| n == r) {
            out.push((r.clone(), 1));
        }
    }
    out
}

/// Features of a result candidate: its name and source with the event.
fn result_features(e: &EventView, (name, source): &(String, u64), bag: &[u64], out: &mut Vec<u32>) {
    out.clear();
    let r = DECIDE_RESULT;
    let first = name.split(' ').next().unwrap_or("");
    let last = word_hash(name.rsplit(' ').next().unwrap_or(""));
    let whole = word_hash(name);
    let participle = u64::from(first.ends_with("ed"));
    for f in [
        [r, 1, *source, 0],
        [r, 2, *source, e.word],
        [r, 3, last, 0],
        [r, 4, last, e.word],
        [r, 5, whole, 0],
        [r, 6, whole, e.word],
        [r, 7, *source, participle],
        [r, 8, *source, e.participants.min(4) as u64],
        [r, 9, word_hash(first), *source],
    ] {
        out.push(slot(&f));
    }
    let which = if *source == 1 { whole } else { *source };
    for &b in bag {
        out.push(slot(&[r, 10, which, b]));
    }
}

/// The best-named result candidate, given that the event has a result ([`has_result`]).
fn best_result(w: &[f32], e: &EventContext, candidates: &[(String, u64)], buf: &mut Vec<u32>) -> Option<usize> {
    let mut best = (None, f32::NEG_INFINITY);
    for (k, c) in candidates.iter().enumerate() {
        result_features(&e.view, c, e.bag, buf);
        let s = score(w, buf);
        if s > best.1 {
            best = (Some(k), s);
        }
    }
    best.0
}

const DECIDE_TOOL: u64 = 1000;
const DECIDE_HABITAT: u64 = 1001;
const DECIDE_DROP: u64 = 1002;
const DECIDE_RESULT: u64 = 1003;
const DECIDE_HAS_RESULT: u64 = 1004;

/// Whether the event has a result (a binary decision on the event's features, as for Drop).
fn has_result(w: &[f32], e: &EventContext, buf: &mut Vec<u32>) -> bool {
    event_features(&e.view, DECIDE_HAS_RESULT, 1, e.bag, buf);
    score(w, buf) > 0.0
}

/// How many steps after an event a participant may be named and still be taken for its result.
const RESULT_STEPS_AHEAD: usize = 2;

/// A recipe's steps read for the event decisions, given its token labels.
struct RecipeRead {
    words: Vec<Words>,
    labels: Vec<Vec<usize>>,
}

/// Per event of a recipe (step, token): its view, the step's word bag, the place named latest before it, and the
/// previous event's participants (names).
struct EventContext<'a> {
    at: (usize, usize),
    /// `prev_habitat` is left false: whoever decides habitats in order sets it.
    view: EventView,
    bag: &'a [u64],
    place: Option<String>,
    /// Participant names before the event in the recipe, the latest first (distinct, at most four).
    mentions: Vec<String>,
    prev_participants: Vec<String>,
    /// Participant names not named before the event, first named after it in its step or the next
    /// [`RESULT_STEPS_AHEAD`]: each with how many steps ahead (distinct, at most four, the nearest first).
    named_after: Vec<(String, u64)>,
}

fn is_participant(l: usize) -> bool {
    matches!(l, P_PREV | P_NEXT | TB_PREV | TB_NEXT)
}

/// The event a participant label points at in its step.
fn event_of(labels: &[usize], i: usize) -> Option<usize> {
    let before = (0..i).rev().find(|&k| labels[k] == EV);
    let after = (i + 1..labels.len()).find(|&k| labels[k] == EV);
    match labels[i] {
        P_PREV | TB_PREV => before.or(after),
        P_NEXT | TB_NEXT => after.or(before),
        _ => None,
    }
}

/// A participant's name: its word and the plain words after it that extend it, by the rule the inline reader
/// names mentions with ([`r2vq_inline::extends_mention`]), so that names the tagger writes (drops, results) are
/// the mentions' own.
fn mention_name(words: &Words, labels: &[usize], i: usize) -> String {
    let mut name = words.forms[i].clone();
    let after = words.forms.iter().zip(labels).skip(i + 1).take(r2vq_inline::MENTION_EXTENSION);
    for (form, _) in after.take_while(|(form, label)| **label == O && r2vq_inline::extends_mention(form)) {
        name.push(' ');
        name.push_str(form);
    }
    name
}

impl RecipeRead {
    fn events(&self) -> Vec<EventContext<'_>> {
        // Every participant mention in text order: (step, token, the event it points at, name).
        let all: Vec<(usize, usize, Option<usize>, String)> = self
            .words
            .iter()
            .zip(&self.labels)
            .enumerate()
            .flat_map(|(s, (words, labels))| {
                (0..labels.len())
                    .filter(|&i| is_participant(labels[i]))
                    .map(move |i| (s, i, event_of(labels, i), mention_name(words, labels, i)))
            })
            .collect();
        // An event's result is named after it, not among its own inputs, and not by a name used before it.
        let named_after = |at: (usize, usize)| -> Vec<(String, u64)> {
            let before: std::collections::BTreeSet<&str> =
                all.iter().filter(|m| (m.0, m.1) < at).map(|m| m.3.as_str()).collect();
            let mut out: Vec<(String, u64)> = Vec::new();
            let after = all
                .iter()
                .filter(|m| (m.0, m.1) > at && m.0 <= at.0 + RESULT_STEPS_AHEAD && !(m.0 == at.0 && m.2 == Some(at.1)));
            for (s, _, _, name) in after {
                if !before.contains(name.as_str()) && !out.iter().any(|(n, _)| n == name) && out.len() < 4 {
                    out.push((name.clone(), (s - at.0) as u64));
                }
            }
            out
        };
        let mut out = Vec::new();
        let mut place: Option<String> = None;
        let mut prev_participants: Vec<String> = Vec::new();
        let mut mentions: Vec<String> = Vec::new();
        for (s, (words, labels)) in self.words.iter().zip(&self.labels).enumerate() {
            for i in 0..labels.len() {
                if is_participant(labels[i]) {
                    let name = mention_name(words, labels, i);
                    mentions.retain(|m| *m != name);
                    mentions.insert(0, name);
                    mentions.truncate(4);
                }
                if is_participant(labels[i])
                    && i > 0
                    && PLACE_PREPS.contains(&words.forms[i - 1].as_str())
                    && event_of(labels, i).is_none_or(|e| e > i)
                {
                    place = Some(mention_name(words, labels, i));
                }
                if labels[i] != EV {
                    continue;
                }
                let participants: Vec<String> = (0..labels.len())
                    .filter(|&k| is_participant(labels[k]) && event_of(labels, k) == Some(i))
                    .map(|k| mention_name(words, labels, k))
                    .collect();
                let view = EventView {
                    word: words.hash(i as isize),
                    prev_word: words.hash(i as isize - 1),
                    next_word: words.hash(i as isize + 1),
                    first: i == 0,
                    participants: participants.len(),
                    place_before: place.is_some(),
                    prev_habitat: false,
                };
                out.push(EventContext {
                    at: (s, i),
                    view,
                    bag: &words.hashes,
                    place: place.clone(),
                    mentions: mentions.clone(),
                    prev_participants: prev_participants.clone(),
                    named_after: named_after((s, i)),
                });
                // A place named after the event in its step (its participant) is where later events happen.
                for k in i + 1..labels.len() {
                    if is_participant(labels[k])
                        && k > 0
                        && PLACE_PREPS.contains(&words.forms[k - 1].as_str())
                        && event_of(labels, k) == Some(i)
                    {
                        place = Some(mention_name(words, labels, k));
                    }
                }
                if !participants.is_empty() {
                    prev_participants = participants;
                }
            }
        }
        out
    }
}

/// What training saw.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct TaggerTrainReport {
    pub recipes: usize,
    pub steps: usize,
    pub tokens: usize,
    pub events: usize,
    pub tools: usize,
    /// Gold results (RES) of the training events, and how many of them a candidate names (the rest cannot be
    /// learned: their name is neither a known result name nor a participant named soon after).
    pub results: usize,
    pub results_in_view: usize,
    /// Token label accuracy (%) on the training recipes.
    pub train_label_accuracy: f64,
}

fn lower_words(tokens: &[InlineToken]) -> Words {
    Words::of(tokens.iter().map(|t| t.form.to_lowercase()).collect())
}

fn hidden_value(t: &InlineToken, role: HiddenRole) -> Option<String> {
    t.hidden.iter().find(|h| h.role == role).and_then(|h| h.values.first()).map(|v| v.name.replace('_', " "))
}

/// The values of a hidden role that training shows at least [`MIN_VALUE_COUNT`] times, in name order.
fn frequent_values(recipes: &[(String, Vec<Vec<InlineToken>>)], role: HiddenRole) -> Vec<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for t in recipes.iter().flat_map(|(_, steps)| steps.iter().flatten()) {
        if let Some(v) = hidden_value(t, role) {
            *counts.entry(v).or_default() += 1;
        }
    }
    counts.into_iter().filter(|(_, n)| *n >= MIN_VALUE_COUNT).map(|(v, _)| v).collect()
}

/// Train on parsed inline-tagged recipes.
pub fn train(recipes: &[(String, Vec<Vec<InlineToken>>)], cfg: &TaggerConfig) -> (TaggerModel, TaggerTrainReport) {
    let (tools, habitats, results) = (
        frequent_values(recipes, HiddenRole::Tool),
        frequent_values(recipes, HiddenRole::Habitat),
        frequent_values(recipes, HiddenRole::Result),
    );
    let reads: Vec<(RecipeRead, Vec<Vec<InlineToken>>)> = recipes
        .iter()
        .map(|(_, steps)| {
            let read = RecipeRead {
                words: steps.iter().map(|s| lower_words(s)).collect(),
                labels: steps.iter().map(|s| gold_labels(s)).collect(),
            };
            (read, steps.clone())
        })
        .collect();
    let mut p = Perceptron::default();
    let mut order: Vec<usize> = (0..reads.len()).collect();
    let mut rng = stepwise_core::rng::rng_for(cfg.seed, "r2vq-tagger/order");
    let (mut gold_f, mut guess_f) = (Vec::new(), Vec::new());
    let (mut gold_results, mut results_in_view) = (0, 0);
    for epoch in 0..cfg.epochs {
        order.shuffle(&mut rng);
        for &r in &order {
            let (read, steps) = &reads[r];
            // Token labels, greedy with the gold history (the history the tagger will have when it is right).
            for (words, gold) in read.words.iter().zip(&read.labels) {
                for i in 0..gold.len() {
                    let mut best = (O, f32::NEG_INFINITY);
                    for label in 0..LABELS.len() {
                        token_features(words, i, &gold[..i], label, &mut guess_f);
                        let s = score(&p.w, &guess_f);
                        if s > best.1 {
                            best = (label, s);
                        }
                    }
                    if best.0 != gold[i] {
                        token_features(words, i, &gold[..i], gold[i], &mut gold_f);
                        token_features(words, i, &gold[..i], best.0, &mut guess_f);
                        p.update(&gold_f, 1.0);
                        p.update(&guess_f, -1.0);
                    }
                    p.tick();
                }
            }
            // Event decisions on the gold labels (the gold events are the events the labels mark, in order).
            let gold_events: Vec<&InlineToken> = steps.iter().flatten().filter(|t| is_event(t)).collect();
            let (mut prev_habitat, mut prev_had_habitat): (Option<String>, bool) = (None, false);
            for (mut e, t) in read.events().into_iter().zip(gold_events) {
                e.view.prev_habitat = prev_had_habitat;
                let e = &e;
                let gold_tool = hidden_value(t, HiddenRole::Tool)
                    .and_then(|v| tools.iter().position(|x| *x == v))
                    .unwrap_or(tools.len());
                let guess_tool = best_tool(&p.w, e, tools.len(), &mut guess_f);
                if guess_tool != gold_tool {
                    event_features(&e.view, DECIDE_TOOL, gold_tool as u64, e.bag, &mut gold_f);
                    event_features(&e.view, DECIDE_TOOL, guess_tool as u64, e.bag, &mut guess_f);
                    p.update(&gold_f, 1.0);
                    p.update(&guess_f, -1.0);
                }
                let gold_habitat = hidden_value(t, HiddenRole::Habitat);
                let candidates = habitat_candidates(e, prev_habitat.as_deref(), &habitats);
                let target = gold_habitat.as_ref().map(|g| candidates.iter().position(|(n, _)| n == g));
                // A habitat no candidate names cannot be learned from here (the value is not in view).
                if target != Some(None) {
                    let target = target.flatten();
                    let guess = best_habitat(&p.w, e, &candidates, &mut guess_f);
                    if guess != target {
                        habitat_features(&e.view, target.map(|k| &candidates[k]), e.bag, &mut gold_f);
                        habitat_features(&e.view, guess.map(|k| &candidates[k]), e.bag, &mut guess_f);
                        p.update(&gold_f, 1.0);
                        p.update(&guess_f, -1.0);
                    }
                }
                prev_had_habitat = gold_habitat.is_some();
                prev_habitat = gold_habitat.or(prev_habitat);
                let gold = hidden_value(t, HiddenRole::Drop).is_some();
                event_features(&e.view, DECIDE_DROP, 1, e.bag, &mut gold_f);
                if (score(&p.w, &gold_f) > 0.0) != gold {
                    p.update(&gold_f, if gold { 1.0 } else { -1.0 });
                }
                let gold_result = hidden_value(t, HiddenRole::Result);
                event_features(&e.view, DECIDE_HAS_RESULT, 1, e.bag, &mut gold_f);
                if (score(&p.w, &gold_f) > 0.0) != gold_result.is_some() {
                    p.update(&gold_f, if gold_result.is_some() { 1.0 } else { -1.0 });
                }
                // Its name is learned where a candidate names it (as for habitats, a result no candidate names is
                // not in view).
                let candidates = gold_result.as_ref().map(|_| result_candidates(e, &results)).unwrap_or_default();
                let target = gold_result.map(|g| candidates.iter().position(|(n, _)| *n == g));
                if epoch == 0 && target.is_some() {
                    gold_results += 1;
                    results_in_view += usize::from(target != Some(None));
                }
                if let Some(Some(target)) = target {
                    let guess = best_result(&p.w, e, &candidates, &mut guess_f);
                    if guess != Some(target) {
                        result_features(&e.view, &candidates[target], e.bag, &mut gold_f);
                        p.update(&gold_f, 1.0);
                        if let Some(k) = guess {
                            result_features(&e.view, &candidates[k], e.bag, &mut guess_f);
                            p.update(&guess_f, -1.0);
                        }
                    }
                }
                p.tick();
            }
        }
    }
    let dense = p.averaged();
    let weights = sparse(&dense);
    let model = TaggerModel {
        format: FORMAT.into(),
        epochs: cfg.epochs,
        seed: cfg.seed,
        fitted_on: recipes.iter().map(|(id, _)| id.clone()).collect(),
        tools,
        habitats,
        results,
        weights,
        dense,
    };
    let (mut right, mut tokens) = (0, 0);
    for (read, _) in &reads {
        for (words, gold) in read.words.iter().zip(&read.labels) {
            let guess = tag_step(&model.dense, words);
            right += guess.iter().zip(gold).filter(|(a, b)| a == b).count();
            tokens += gold.len();
        }
    }
    let report = TaggerTrainReport {
        recipes: recipes.len(),
        steps: recipes.iter().map(|(_, s)| s.len()).sum(),
        tokens,
        events: reads.iter().flat_map(|(r, _)| r.labels.iter().flatten()).filter(|&&l| l == EV).count(),
        tools: model.tools.len(),
        results: gold_results,
        results_in_view,
        train_label_accuracy: 100.0 * right as f64 / tokens.max(1) as f64,
    };
    (model, report)
}

/// Tag every step of `doc`'s recipes from their words alone and rebuild them as the inline reader does
/// ([`stepwise_ingest::readers::r2vq_inline::document_of_inline`]: one sentence per step, the ingredient list
/// dropped); each recipe keeps its header (questions, answers, metadata).
pub fn tag_document(doc: &R2vqDocument, model: &TaggerModel) -> R2vqDocument {
    let words = doc.recipes.iter().map(|r| {
        let steps = r
            .steps()
            .map(|p| p.sentences.iter().flat_map(|s| s.tokens.iter().map(|t| t.form.clone())).collect())
            .collect();
        (r.id.clone(), steps)
    });
    let mut out = tag_words(words, model);
    for (made, source) in out.recipes.iter_mut().zip(&doc.recipes) {
        made.header = source.header.clone();
    }
    out
}

/// Tag a procedure corpus's step texts (tokenized into words and punctuation): recipes without questions, ids
/// from the procedures' (whitespace replaced by `_`).
pub fn tag_procedures(procedures: &[stepwise_core::procedure::Procedure], model: &TaggerModel) -> R2vqDocument {
    let words = procedures.iter().map(|p| {
        let steps = p
            .steps
            .iter()
            .map(|s| {
                let text = s.text.as_deref().unwrap_or("");
                stepwise_core::r2vq::word_tokens(text).into_iter().map(|(_, _, w)| w).collect()
            })
            .collect();
        (p.id.split_whitespace().collect::<Vec<_>>().join("_"), steps)
    });
    tag_words(words, model)
}

/// Tag recipes given as (id, steps of words); steps without words are left out.
fn tag_words(recipes: impl Iterator<Item = (String, Vec<Vec<String>>)>, model: &TaggerModel) -> R2vqDocument {
    let tagged: Vec<(String, Vec<Vec<InlineToken>>)> = recipes
        .map(|(id, steps)| {
            let steps: Vec<Vec<String>> = steps.into_iter().filter(|w: &Vec<String>| !w.is_empty()).collect();
            (id, model.tag(&steps))
        })
        .collect();
    r2vq_inline::document_of_inline(tagged)
}

impl TaggerModel {
    /// Tag a recipe's steps (each a list of words): the inline-tagged tokens.
    pub fn tag(&self, steps: &[Vec<String>]) -> Vec<Vec<InlineToken>> {
        let words: Vec<Words> = steps.iter().map(|s| Words::of(s.iter().map(|w| w.to_lowercase()).collect())).collect();
        let labels: Vec<Vec<usize>> = words.iter().map(|w| tag_step(&self.dense, w)).collect();
        let read = RecipeRead { words, labels };
        let mut out: Vec<Vec<InlineToken>> = steps
            .iter()
            .zip(&read.labels)
            .map(|(s, labels)| {
                s.iter()
                    .zip(labels)
                    .enumerate()
                    .map(|(i, (form, &l))| InlineToken {
                        form: form.to_lowercase(),
                        entity: match l {
                            EV => Some(EntityTag::Begin(EntityKind::Event)),
                            TB | TB_PREV | TB_NEXT => Some(EntityTag::Begin(EntityKind::Tool)),
                            TI => Some(EntityTag::Inside(EntityKind::Tool)),
                            _ => None,
                        },
                        participant: event_of(labels, i).map(|e| s[e].to_lowercase()),
                        hidden: Vec::new(),
                    })
                    .collect()
            })
            .collect();
        // Event decisions in text order; whether the previous event got a habitat is set as they are made.
        let mut buf = Vec::new();
        let mut last_habitat: Option<String> = None;
        let mut prev_had_habitat = false;
        for mut e in read.events() {
            e.view.prev_habitat = prev_had_habitat;
            let e = &e;
            let mut hidden = Vec::new();
            if let Some(tool) = self.tools.get(best_tool(&self.dense, e, self.tools.len(), &mut buf)) {
                hidden.push(HiddenArg { role: HiddenRole::Tool, values: vec![EntityRef::named(tool, None)] });
            }
            let candidates = habitat_candidates(e, last_habitat.as_deref(), &self.habitats);
            let habitat = best_habitat(&self.dense, e, &candidates, &mut buf).map(|k| candidates[k].0.clone());
            if let Some(h) = &habitat {
                hidden.push(HiddenArg { role: HiddenRole::Habitat, values: vec![EntityRef::named(h, None)] });
                last_habitat = Some(h.clone());
            }
            prev_had_habitat = habitat.is_some();
            event_features(&e.view, DECIDE_DROP, 1, e.bag, &mut buf);
            if score(&self.dense, &buf) > 0.0 && !e.prev_participants.is_empty() {
                let values = e.prev_participants.iter().map(|p| EntityRef::named(p, None)).collect();
                hidden.push(HiddenArg { role: HiddenRole::Drop, values });
            }
            if has_result(&self.dense, e, &mut buf) {
                let candidates = result_candidates(e, &self.results);
                if let Some(k) = best_result(&self.dense, e, &candidates, &mut buf) {
                    let value = EntityRef::named(&candidates[k].0, None);
                    hidden.push(HiddenArg { role: HiddenRole::Result, values: vec![value] });
                }
            }
            out[e.at.0][e.at.1].hidden = hidden;
        }
        out
    }

    /// The recipes it was trained on, as a set.
    pub fn fitted_recipes(&self) -> std::collections::BTreeSet<&str> {
        self.fitted_on.iter().map(String::as_str).collect()
    }

    /// Write the model as JSON (atomically).
    pub fn write(&self, path: &Path) -> Result<()> {
        write_model(path, self)
    }

    /// Read a tagger written by [`TaggerModel::write`].
    pub fn read(path: &Path) -> Result<TaggerModel> {
        let what = "an R2VQ tagger (from `stepwise r2vq train-tagger`)";
        let mut m: TaggerModel = read_model(path, FORMAT, |m: &TaggerModel| m.format.as_str(), what)?;
        m.dense = dense(path, &m.weights)?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::r2vq::inline_step_string;

    fn step(text: &str) -> Vec<InlineToken> {
        // A tiny inline parser for the tests (the real one is the ingest crate's).
        let mut out: Vec<InlineToken> = Vec::new();
        for w in text.split_whitespace() {
            if let Some(v) = w.strip_prefix("EV:") {
                out.push(InlineToken {
                    form: v.into(),
                    entity: Some(EntityTag::Begin(EntityKind::Event)),
                    ..Default::default()
                });
            } else if let Some(rest) = w.strip_prefix("P:") {
                let (form, event) = rest.split_once('@').unwrap();
                out.push(InlineToken { form: form.into(), participant: Some(event.into()), ..Default::default() });
            } else if let Some(v) = w.strip_prefix("TOOL:") {
                let last = out.last_mut().unwrap();
                last.hidden.push(HiddenArg { role: HiddenRole::Tool, values: vec![EntityRef::named(v, None)] });
            } else if let Some(v) = w.strip_prefix("RES:") {
                let last = out.last_mut().unwrap();
                last.hidden.push(HiddenArg { role: HiddenRole::Result, values: vec![EntityRef::named(v, None)] });
            } else {
                out.push(InlineToken { form: w.into(), ..Default::default() });
            }
        }
        out
    }

    fn corpus() -> Vec<(String, Vec<Vec<InlineToken>>)> {
        let foods = ["onion", "carrot", "leek", "potato", "pepper", "celery"];
        (0..30)
            .map(|k| {
                let (a, b) = (foods[k % 6], foods[(k + 2) % 6]);
                (
                    format!("r-{k}"),
                    vec![
                        step(&format!("EV:chop TOOL:knife the P:{a}@chop finely .")),
                        step(&format!("EV:fry the P:{b}@fry for 5 minutes .")),
                    ],
                )
            })
            .collect()
    }

    #[test]
    fn learns_results_named_later_and_results_by_their_usual_name() {
        // The held-out recipes chop foods training never saw, so their results can only be named from the text.
        let foods = ["onion", "carrot", "leek", "potato", "pepper", "celery", "garlic", "squash"];
        let data: Vec<(String, Vec<Vec<InlineToken>>)> = (0..30)
            .map(|k| {
                let (a, b) = (if k < 20 { foods[k % 6] } else { foods[6 + k % 2] }, foods[(k + 2) % 6]);
                (
                    format!("r-{k}"),
                    vec![
                        step(&format!("EV:chop RES:chopped_{a} the P:{a}@chop finely .")),
                        step(&format!("EV:stir RES:mixture the P:{b}@stir and the P:salt@stir .")),
                        step(&format!("EV:add the P:chopped@add {a} to the pot .")),
                    ],
                )
            })
            .collect();
        let (model, _) = train(&data[..20], &TaggerConfig::default());
        assert!(model.results.contains(&"mixture".to_string()), "a name seen in training is a candidate");
        assert!(!model.results.iter().any(|r| r.contains("garlic") || r.contains("squash")));
        for (id, steps) in &data[20..] {
            let words: Vec<Vec<String>> = steps.iter().map(|s| s.iter().map(|t| t.form.clone()).collect()).collect();
            let tagged = model.tag(&words);
            let result = |s: &[InlineToken], i: usize| hidden_value(&s[i], HiddenRole::Result);
            assert_eq!(result(&tagged[0], 0), result(&steps[0], 0), "{id}: named by the later participant");
            assert_eq!(result(&tagged[1], 0).as_deref(), Some("mixture"), "{id}: the usual name");
            assert_eq!(result(&tagged[2], 0), None, "{id}: no result");
        }
    }

    #[test]
    fn learns_events_participants_and_tools_and_is_deterministic() {
        let data = corpus();
        let (model, report) = train(&data[..20], &TaggerConfig::default());
        assert!(report.train_label_accuracy > 99.0, "{report:?}");
        assert_eq!(model.tools, vec!["knife".to_string()]);
        for (_, steps) in &data[20..] {
            let words: Vec<Vec<String>> = steps.iter().map(|s| s.iter().map(|t| t.form.clone()).collect()).collect();
            let tagged = model.tag(&words);
            let strip = |s: &[InlineToken]| {
                s.iter().map(|t| (t.form.clone(), t.entity, t.participant.clone())).collect::<Vec<_>>()
            };
            assert_eq!(strip(&tagged[0]), strip(&steps[0]), "{}", inline_step_string(&tagged[0]));
            assert_eq!(tagged[0][0].hidden, steps[0][0].hidden, "the chopping knife");
            assert_eq!(strip(&tagged[1]), strip(&steps[1]));
        }
        let (again, _) = train(&data[..20], &TaggerConfig::default());
        assert_eq!(serde_json::to_string(&model).unwrap(), serde_json::to_string(&again).unwrap());
        let td = tempfile::tempdir().unwrap();
        let path = td.path().join("t.json");
        model.write(&path).unwrap();
        assert_eq!(TaggerModel::read(&path).unwrap().dense, model.dense);
    }
}
