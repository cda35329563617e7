//! The question families' programs: small functions over a recipe's [`AnnotationGraph`] whose execution gives a
//! question's answer, CLEVR-style, so every answer can be explained by the program and the annotation it read.
//!
//! [`answer_question`] parses a question into its template ([`super::questions`]), tries the programs of the
//! template's candidate families in order, and answers with the first that is defined; when none is, the question
//! is an unanswerable distractor (family 18, answer `None`, written "N/A" in the release).
//!
//! Answer forms follow the release's answered train recipe (`train_sample_1recipe_srpol.csv`: "by using a knife",
//! "pan", "by adding the chopped vegetables to the pan", "the first event", "saute onion in 2 tablespoons of olive
//! oil", ...). Where the release shows no answer for a family (10, 14, 17 and the rarer SRL families), the form is
//! the nearest shown one; the program check (`stepwise r2vq answer` scored by `stepwise eval`) measures how well
//! these forms match.

use std::collections::BTreeSet;

use serde::Serialize;
use stepwise_core::r2vq::{AnnotationGraph, EntityKind, EntityRef, HiddenRole, Layer, R2vqRecipe, TokenPos, join_list};

use super::questions::{Template, parse_question};

/// The family of unanswerable distractors.
pub const UNANSWERABLE: u32 = 18;

/// The answer to "How do you ...?" when the tool is the hands.
const BY_HAND: &str = "by hand";

/// How the release answers "How do you ...?" with a tool: "by using a knife" (family 2). The hands are a manner,
/// "by hand" (family 6): the train QA has 72 answers "by hand" and none "by using a hand(s)" in the 640 fitting
/// recipes.
pub fn tool_answer(tool: &str) -> String {
    if matches!(tool, "hand" | "hands" | "your hands") { BY_HAND.to_string() } else { format!("by using a {tool}") }
}

/// A question's program: what it reads from the annotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Program {
    /// Family 0: the events that mentions by this name take part in (PART, else the event whose role span holds
    /// them), and those that have it as a dropped or shadow argument.
    CountEvents { entity: String },
    /// Family 0: the events that use a tool or habitat of this name (mentioned or hidden).
    CountUses { prop: String },
    /// Family 0: the distinct tools or habitats of this name.
    CountProps { prop: String },
    /// Family 1: the objects of the event, the elided (Drop) ones included.
    ElidedObjects { clause: String },
    /// Family 2: the event's hidden tool ("by using a ...", [`tool_answer`]; "by hand" is family 6).
    HiddenTool { clause: String },
    /// Family 2: the event's hidden habitat.
    HiddenHabitat { clause: String },
    /// Family 3: the event whose result the entity is ("by V-ing the ... with the ...").
    Origin { entity: String },
    /// Family 3: the participants of the event whose result the entity is.
    Contents { entity: String },
    /// Family 3: the first result of an event the entity takes part in ("the chopped onion").
    Becomes { entity: String },
    /// Family 3: the habitat of the entity's last event up to a step (from 1).
    WhereAfter { entity: String, step: u32 },
    /// Family 4: which of two events comes first in the text.
    WhichFirst { first: String, second: String },
    /// Families 5–16: the event's semantic-role span; `with_clause` answers with the predicate and its
    /// patient/theme too ("saute onion in 2 tablespoons of olive oil").
    Role { clause: String, roles: Vec<String>, with_clause: bool },
    /// Family 17: the habitat of the last earlier event of the entity before the named event.
    LocationBefore { entity: String, verb: String },
    /// Family 19: the recorded orientation of a prop named in the event's sentence.
    OrientationOf { prop: String, clause: String },
    /// Family 2 (2021 release): the event's tool, hidden or written, by name.
    ToolOf { clause: String },
    /// Family 0 (2021 release): whether there is more than one tool or habitat of this name.
    MoreThanOne { prop: String },
    /// Family 3 (2021 release): whether mentions of the entity in two steps (from 0) are the same entity.
    SameEntity { entity: String, step_a: u32, step_b: u32 },
}

impl Program {
    /// The annotation layer the program reads.
    pub fn layer(&self) -> Layer {
        match self {
            Program::Role { .. } => Layer::SemanticRoles,
            _ => Layer::CookingRoles,
        }
    }
}

/// A question's answer with its explanation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answered {
    pub template: Template,
    /// The family whose program answered ([`UNANSWERABLE`] when none did).
    pub family: u32,
    /// The program that answered (`None` for an unanswerable question).
    pub program: Option<Program>,
    pub answer: Option<String>,
    /// What the program read: events and mentions as "step.sentence.token text".
    pub evidence: Vec<String>,
    /// Another event fit the question as well as the one read (the earliest was taken), or several events made
    /// the named result: the answer is not unique. Question generation drops such questions.
    pub ambiguous: bool,
    /// Candidate families whose programs did not run because the recipe lacks their layer: a `None` answer then
    /// says "the annotation cannot tell", not "unanswerable".
    pub unread: Vec<(u32, Layer)>,
}

/// Answer a question from a recipe's annotation; `Err` names why the question was not understood (no template).
pub fn answer_question(recipe: &R2vqRecipe, graph: &AnnotationGraph, question: &str) -> Result<Answered, String> {
    let parsed = parse_question(question).ok_or_else(|| "no question template matches".to_string())?;
    let ctx = Context::new(recipe, graph);
    let mut unread = Vec::new();
    for (family, program) in candidates(parsed.template, &parsed.args) {
        if !graph.layers.contains(&program.layer()) {
            unread.push((family, program.layer()));
            continue;
        }
        let mut evidence = Vec::new();
        ctx.ambiguous.set(false);
        if let Some(answer) = ctx.run(&program, &mut evidence) {
            let family = if answer == BY_HAND { 6 } else { family };
            return Ok(Answered {
                template: parsed.template,
                family,
                program: Some(program),
                answer: Some(answer),
                evidence,
                ambiguous: ctx.ambiguous.get(),
                unread,
            });
        }
    }
    Ok(Answered {
        template: parsed.template,
        family: UNANSWERABLE,
        program: None,
        answer: None,
        evidence: vec![],
        ambiguous: false,
        unread,
    })
}

/// The programs to try for a template, in order, with their families.
fn candidates(template: Template, args: &[String]) -> Vec<(u32, Program)> {
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    let role = |family: u32, roles: &[&str], with_clause: bool| {
        (family, Program::Role { clause: a(0), roles: roles.iter().map(|r| r.to_string()).collect(), with_clause })
    };
    match template {
        Template::CountActions => vec![(0, Program::CountEvents { entity: a(0) })],
        Template::CountUses => vec![(0, Program::CountUses { prop: a(0) })],
        Template::CountProps => vec![(0, Program::CountProps { prop: a(0) })],
        Template::WhatShouldBe => vec![(1, Program::ElidedObjects { clause: a(0) })],
        Template::WhereShould => vec![(2, Program::HiddenHabitat { clause: a(0) })],
        Template::HowDoYou => vec![
            (2, Program::HiddenTool { clause: a(0) }),
            role(6, &["Instrument"], true),
            role(10, &["Attribute"], true),
            role(14, &["Goal"], true),
        ],
        Template::HowDidYouGet => vec![(3, Program::Origin { entity: a(0) })],
        Template::WhatsIn => vec![(3, Program::Contents { entity: a(0) })],
        Template::WhichFirst => vec![(4, Program::WhichFirst { first: a(0), second: a(1) })],
        Template::ToWhatExtent => vec![role(5, &["Result", "Extent"], false)],
        Template::ForHowLong => vec![role(7, &["Time"], false)],
        Template::WhereDoYou => {
            vec![
                role(8, &["Location", "Destination"], false),
                role(12, &["Co-Patient"], false),
                role(13, &["Co-Theme"], false),
            ]
        }
        Template::ByHowMuch => vec![role(9, &["Extent", "Value"], false)],
        Template::WhyDoYou => vec![role(15, &["Purpose"], false), role(11, &["Result", "Cause"], false)],
        Template::WhatWith => vec![role(13, &["Co-Theme"], false), role(12, &["Co-Patient", "Material"], false)],
        Template::WhatDoYou => vec![
            role(5, &["Result"], false),
            role(12, &["Co-Patient", "Destination"], false),
            role(13, &["Co-Theme"], false),
            role(14, &["Goal"], false),
        ],
        Template::FromWhere => vec![role(16, &["Source"], false)],
        Template::WhereWasBefore => vec![(17, Program::LocationBefore { entity: a(0), verb: a(1) })],
        Template::WhatIsUsedTo => vec![(2, Program::ToolOf { clause: a(0) })],
        Template::Orientation => vec![(19, Program::OrientationOf { prop: a(0), clause: a(1) })],
        Template::WhatBecome => vec![(3, Program::Becomes { entity: a(0) })],
        Template::WhereAfterStep => {
            vec![(3, Program::WhereAfter { entity: a(0), step: a(1).parse().unwrap_or(u32::MAX) })]
        }
        Template::AreThereMore => vec![(0, Program::MoreThanOne { prop: a(0) })],
        Template::AreIdentical => {
            let step = |i: usize| a(i).parse().unwrap_or(u32::MAX);
            vec![(3, Program::SameEntity { entity: a(0), step_a: step(1), step_b: step(2) })]
        }
    }
}

/// One use of a prop: an event, or a mention of it outside any event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Use {
    Event(usize),
    Mention(usize),
}

/// A recipe and its annotation graph: what programs (and the generator's candidates) read.
pub(crate) struct Context<'a> {
    pub(crate) recipe: &'a R2vqRecipe,
    pub(crate) graph: &'a AnnotationGraph,
    /// Set when a program had to choose between equally good events (see [`Answered::ambiguous`]).
    ambiguous: std::cell::Cell<bool>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(recipe: &'a R2vqRecipe, graph: &'a AnnotationGraph) -> Self {
        Context { recipe, graph, ambiguous: std::cell::Cell::new(false) }
    }
}

impl Context<'_> {
    fn run(&self, program: &Program, evidence: &mut Vec<String>) -> Option<String> {
        let g = self.graph;
        match program {
            Program::CountEvents { entity } => {
                // Mentions by that name, not their coreference chains (the release counts one action for "the
                // minced meat" although "the meat" it corefers with is transferred later: train sample), and
                // events that have it as a dropped or shadow argument.
                let want = content_words(entity);
                let mut events: BTreeSet<usize> =
                    self.named_mentions(entity).into_iter().filter_map(|m| self.event_of_argument(m)).collect();
                for (e, event) in g.events.iter().enumerate() {
                    let hidden =
                        event.hidden.iter().filter(|h| matches!(h.role, HiddenRole::Drop | HiddenRole::Shadow));
                    if hidden.flat_map(|h| &h.values).any(|v| content_words(&entity_name(v)) == want) {
                        events.insert(e);
                    }
                }
                self.cite_events(&events, evidence);
                (!events.is_empty()).then(|| events.len().to_string())
            }
            Program::CountUses { prop } => {
                let uses: BTreeSet<Use> = self.prop_uses(prop).into_iter().map(|(u, _)| u).collect();
                evidence.extend(uses.iter().map(|u| self.describe_use(*u)));
                (!uses.is_empty()).then(|| uses.len().to_string())
            }
            Program::CountProps { prop } => {
                let ids = self.distinct_props(prop);
                evidence.extend(ids.iter().cloned());
                (!ids.is_empty()).then(|| ids.len().to_string())
            }
            Program::ElidedObjects { clause } => {
                let (verb, rest) = split_verb(clause);
                let candidates = self.events_of_verb(&verb_lemmas(verb));
                let e = self.best_event(&candidates, &rest, |e| {
                    g.events[e].hidden.iter().any(|h| h.role == HiddenRole::Drop)
                })?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                let objects = self.objects(e);
                (!objects.is_empty()).then(|| format!("the {}", join_list(&objects)))
            }
            Program::HiddenTool { clause } => {
                let e = self.match_clause(clause)?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                let value = g.events[e].hidden.iter().find(|h| h.role == HiddenRole::Tool)?.values.first()?;
                Some(tool_answer(&entity_name(value)))
            }
            Program::HiddenHabitat { clause } => {
                // The hidden habitats (all of them: "bowl and pan"), else a written one (the 2021 release asks
                // "Where should you ...?" of written habitats too).
                let e = self.match_clause(clause)?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                let hidden: Vec<String> = g.events[e]
                    .hidden
                    .iter()
                    .filter(|h| h.role == HiddenRole::Habitat)
                    .flat_map(|h| h.values.iter().map(entity_name))
                    .collect();
                if hidden.is_empty() { self.habitat_of(e) } else { Some(join_list(&hidden)) }
            }
            Program::Origin { entity } | Program::Contents { entity } => {
                let e = self.producer(entity)?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                let objects = self.objects(e);
                if objects.is_empty() {
                    return None;
                }
                let objects = format!("the {}", join_list(&objects));
                if matches!(program, Program::Contents { .. }) {
                    return Some(objects);
                }
                let verb = self.event_lemma(e);
                let mut answer = format!("by {} {objects}", gerund(&verb));
                // Habitat, then tool: "by combining the ... in the medium bowl with the spatula" (train QA).
                if let Some(habitat) = self.habitat_of(e) {
                    answer.push_str(&format!(" {} the {habitat}", habitat_preposition(&verb)));
                }
                if let Some(tool) = self.prop_of(e, HiddenRole::Tool, EntityKind::Tool) {
                    answer.push_str(&format!(" with the {tool}"));
                }
                Some(answer)
            }
            Program::WhichFirst { first, second } => {
                let a = self.clause_position(first)?;
                let b = self.clause_position(second)?;
                if a.0 == b.0 {
                    return None;
                }
                evidence.extend([a.1, b.1]);
                Some(if a.0 < b.0 { "the first event" } else { "the second event" }.to_string())
            }
            Program::Role { clause, roles, with_clause } => {
                let e = self.match_clause(clause)?;
                let event = &g.events[e];
                let span = roles.iter().find_map(|r| event.roles.iter().find(|s| &s.role == r))?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                if !with_clause {
                    return Some(span.text.clone());
                }
                // The predicate, its patient or theme, and the span, in text order.
                let head = g.event_mention(e);
                let mut parts: Vec<(u32, String)> = vec![(head.at.token, head.text.to_lowercase())];
                parts.extend(
                    event
                        .roles
                        .iter()
                        .filter(|s| s.role == "Patient" || s.role == "Theme" || std::ptr::eq(*s, span))
                        .map(|s| (s.first, s.text.clone())),
                );
                parts.sort();
                Some(parts.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(" "))
            }
            Program::Becomes { entity } => {
                let want = content_words(entity);
                let results = |e: usize| -> Vec<String> {
                    let ev = &g.events[e];
                    let hidden = ev
                        .hidden
                        .iter()
                        .filter(|h| h.role == HiddenRole::Result)
                        .flat_map(|h| h.values.iter().map(entity_name));
                    hidden.chain(ev.results.iter().map(|&m| mention_name(&g.mentions[m].text))).collect()
                };
                // The first event of the entity with a result other than the entity itself.
                let (e, made) = self.entity_events(entity).into_iter().find_map(|e| {
                    let other: Vec<String> = results(e).into_iter().filter(|r| content_words(r) != want).collect();
                    other.into_iter().next().map(|r| (e, r))
                })?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                Some(format!("the {made}"))
            }
            Program::WhereAfter { entity, step } => {
                let (e, h) = self
                    .entity_events(entity)
                    .into_iter()
                    .filter(|&e| g.event_mention(e).at.step <= *step)
                    .filter_map(|e| self.habitat_of(e).map(|h| (e, h)))
                    .next_back()?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                Some(h)
            }
            Program::OrientationOf { prop, clause } => {
                let e = self.match_clause(clause)?;
                let sentence = g.event_mention(e).sentence;
                // The prop taking part in the event, else one in its sentence; its orientation written as words.
                let named = self.named_mentions(prop);
                let in_sentence = named.iter().copied().filter(|&m| g.mentions[m].sentence == sentence);
                let m = named
                    .iter()
                    .copied()
                    .find(|&m| g.mentions[m].participant_of == Some(e))
                    .or_else(|| in_sentence.clone().find(|&m| g.mentions[m].orientation.is_some()))?;
                let o = g.mentions[m].orientation.as_ref()?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                Some(o.replace('_', " "))
            }
            Program::ToolOf { clause } => {
                let e = self.match_clause(clause)?;
                self.cite_events(&BTreeSet::from([e]), evidence);
                self.prop_of(e, HiddenRole::Tool, EntityKind::Tool)
            }
            Program::MoreThanOne { prop } => {
                let ids = self.distinct_props(prop);
                evidence.extend(ids.iter().cloned());
                (!ids.is_empty()).then(|| (ids.len() > 1).to_string())
            }
            Program::SameEntity { entity, step_a, step_b } => {
                // The first mention by that name in each step (the second one when both steps are the same).
                let in_step = |s: u32| -> Vec<usize> {
                    self.named_mentions(entity)
                        .into_iter()
                        .filter(|&m| s.checked_add(1) == Some(g.mentions[m].at.step))
                        .collect()
                };
                let (a, b) = (in_step(*step_a), in_step(*step_b));
                let (x, y) = if step_a == step_b { (*a.first()?, *a.get(1)?) } else { (*a.first()?, *b.first()?) };
                evidence.extend([x, y].map(|m| format!("{} {}", pos(g.mentions[m].at), g.mentions[m].text)));
                let same = g.mentions[x].coref.is_some() && g.mentions[x].coref == g.mentions[y].coref;
                Some(same.to_string())
            }
            Program::LocationBefore { entity, verb } => {
                // The entity's events: it takes part in them, or is their hidden (dropped, shadow) argument.
                let events = self.entity_events(entity);
                let (v, rest) = split_verb(verb);
                let lemmas = verb_lemmas(v);
                let of_verb: Vec<usize> = events.iter().copied().filter(|&e| self.is_verb(e, &lemmas)).collect();
                let target = self.best_event(&of_verb, &rest, |_| false)?;
                // Where it is at the target (the target's habitat, else the last one before), and the latest earlier
                // habitat that differs: where it was before it moved.
                let habitats: Vec<(usize, String)> =
                    events.range(..=target).filter_map(|&e| self.habitat_of(e).map(|h| (e, h))).collect();
                let current = self.habitat_of(target).or_else(|| habitats.last().map(|(_, h)| h.clone()));
                for (e, h) in habitats.iter().rev().filter(|(e, _)| *e < target) {
                    if Some(h) != current.as_ref() {
                        self.cite_events(&BTreeSet::from([*e, target]), evidence);
                        return Some(h.clone());
                    }
                }
                None
            }
        }
    }

    fn cite_events(&self, events: &BTreeSet<usize>, evidence: &mut Vec<String>) {
        for &e in events {
            let m = self.graph.event_mention(e);
            evidence.push(format!("{} {}", pos(m.at), m.text));
        }
    }

    /// The habitat of an event: hidden, or a HABITAT mention taking part in it.
    pub(crate) fn habitat_of(&self, e: usize) -> Option<String> {
        self.prop_of(e, HiddenRole::Habitat, EntityKind::Habitat)
    }

    /// An event's hidden argument of `role`, else its participant of `kind`.
    pub(crate) fn prop_of(&self, e: usize, role: HiddenRole, kind: EntityKind) -> Option<String> {
        let g = self.graph;
        if let Some(v) = g.events[e].hidden.iter().find(|h| h.role == role).and_then(|h| h.values.first()) {
            return Some(entity_name(v));
        }
        g.events[e]
            .participants
            .iter()
            .find(|&&m| g.mentions[m].kind == kind)
            .map(|&m| mention_name(&g.mentions[m].text))
    }

    /// What an event acts on: its ingredient participants (text order), then its dropped arguments.
    pub(crate) fn objects(&self, e: usize) -> Vec<String> {
        let g = self.graph;
        let mut out: Vec<String> = g.events[e]
            .participants
            .iter()
            .filter(|&&m| matches!(g.mentions[m].kind, EntityKind::ExplicitIngredient | EntityKind::ImplicitIngredient))
            .map(|&m| mention_name(&g.mentions[m].text))
            .collect();
        for h in g.events[e].hidden.iter().filter(|h| h.role == HiddenRole::Drop) {
            for name in h.values.iter().map(entity_name) {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// Where in the text a clause's event is, and what was matched: an EVENT, else a predicate of the SRL
    /// annotation (some sentences of the release carry predicates but no EVENT tags).
    fn clause_position(&self, clause: &str) -> Option<((usize, usize, u32), String)> {
        if let Some(e) = self.match_clause(clause) {
            let m = self.graph.event_mention(e);
            return Some((
                (m.sentence.paragraph, m.sentence.sentence, m.at.token),
                format!("{} {}", pos(m.at), m.text),
            ));
        }
        let (verb, rest) = split_verb(clause);
        let lemmas = verb_lemmas(verb);
        for (p, paragraph) in self.recipe.paragraphs.iter().enumerate() {
            if paragraph.step_number().is_none() {
                continue;
            }
            for (si, sentence) in paragraph.sentences.iter().enumerate() {
                let words: BTreeSet<String> =
                    sentence.tokens.iter().flat_map(|t| [normalize_word(&t.form), normalize_word(&t.lemma)]).collect();
                if !rest.iter().all(|w| contains_word(&words, w)) {
                    continue;
                }
                if let Some(t) = sentence.tokens.iter().position(|t| {
                    t.predicate.is_some() && (same_verb(&lemmas, &t.lemma) || same_verb(&lemmas, &t.form))
                }) {
                    let form = &sentence.tokens[t].form;
                    return Some(((p, si, t as u32 + 1), format!("predicate {form} in {}", sentence.id)));
                }
            }
        }
        None
    }

    /// The lower-case lemma of an event's head.
    pub(crate) fn event_lemma(&self, e: usize) -> String {
        let m = self.graph.event_mention(e);
        m.lemma.split(' ').next().unwrap_or("").to_lowercase()
    }

    /// The (non-event) mentions whose text or lemma is `name`.
    fn named_mentions(&self, name: &str) -> Vec<usize> {
        let want = content_words(name);
        if want.is_empty() {
            return Vec::new();
        }
        let g = self.graph;
        (0..g.mentions.len())
            .filter(|&m| {
                let mention = &g.mentions[m];
                mention.kind != EntityKind::Event
                    && (content_words(&mention.text) == want || content_words(&mention.lemma) == want)
            })
            .collect()
    }

    /// Every mention of the entities one of whose mentions, or whose COREF name, is `name`.
    fn entity_mentions(&self, name: &str) -> Vec<usize> {
        let g = self.graph;
        let want = content_words(name);
        let mut out: BTreeSet<usize> = self.named_mentions(name).into_iter().flat_map(|m| g.chain_of(m)).collect();
        for (m, mention) in g.mentions.iter().enumerate() {
            if mention.coref.as_ref().is_some_and(|c| !want.is_empty() && content_words(&entity_name(c)) == want) {
                out.extend(g.chain_of(m));
            }
        }
        out.into_iter().collect()
    }

    /// The events of the entity named `name`: those a mention of its chain takes part in, and those with one of its
    /// ids as a hidden argument.
    pub(crate) fn entity_events(&self, name: &str) -> BTreeSet<usize> {
        let g = self.graph;
        let chain = self.entity_mentions(name);
        let ids: BTreeSet<&EntityRef> = chain.iter().filter_map(|&m| g.mentions[m].coref.as_ref()).collect();
        let want = content_words(name);
        let mut events: BTreeSet<usize> = chain.iter().filter_map(|&m| g.mentions[m].participant_of).collect();
        for (e, event) in g.events.iter().enumerate() {
            // By id, or by name (bare-name sources spell "ball" and "balls" apart).
            let of_entity = |v: &EntityRef| ids.contains(v) || content_words(&entity_name(v)) == want;
            if event.hidden.iter().flat_map(|h| &h.values).any(of_entity) {
                events.insert(e);
            }
        }
        events
    }

    /// The event a mention is an argument of: the one it participates in (PART), else the event of the same
    /// sentence whose semantic-role span holds it.
    fn event_of_argument(&self, m: usize) -> Option<usize> {
        let g = self.graph;
        let mention = &g.mentions[m];
        mention.participant_of.or_else(|| {
            (0..g.events.len()).find(|&e| {
                g.event_mention(e).sentence == mention.sentence
                    && g.events[e].roles.iter().any(|r| r.first <= mention.at.token && mention.last <= r.last)
            })
        })
    }

    /// The distinct tools or habitats named `name`: their ids, where an unplaced (bare-name) one counts only when
    /// no placed one has its name (an unwritten "pan" is the pan the text names elsewhere).
    fn distinct_props(&self, name: &str) -> BTreeSet<String> {
        let ids: BTreeSet<String> = self.prop_uses(name).into_iter().map(|(_, id)| id).collect();
        let placed = ids.iter().any(|id| id.contains('.'));
        ids.into_iter().filter(|id| !placed || id.contains('.')).collect()
    }

    /// The uses of tools and habitats named `name`, with the entity id used: every hidden Tool/Habitat value (its
    /// event), and every mention by that name (the event it is an argument of, else the mention itself).
    fn prop_uses(&self, name: &str) -> Vec<(Use, String)> {
        let g = self.graph;
        let want = content_words(name);
        let mut out = Vec::new();
        let id_of = |r: &EntityRef| match r.at {
            Some(_) => r.to_string(),
            // A bare name (sources without positions): one entity per name.
            None => content_words(&entity_name(r)).join(" "),
        };
        for (e, event) in g.events.iter().enumerate() {
            for h in event.hidden.iter().filter(|h| matches!(h.role, HiddenRole::Tool | HiddenRole::Habitat)) {
                for v in h.values.iter().filter(|v| content_words(&entity_name(v)) == want) {
                    out.push((Use::Event(e), id_of(v)));
                }
            }
        }
        // Mentions by that name, of any kind: the question says it is a prop, and lossy sources do not always.
        for m in self.named_mentions(name) {
            let mention = &g.mentions[m];
            let used = self.event_of_argument(m).map_or(Use::Mention(m), Use::Event);
            out.push((used, mention.coref.as_ref().map_or_else(|| pos(mention.at), id_of)));
        }
        out
    }

    fn describe_use(&self, u: Use) -> String {
        match u {
            Use::Event(e) => {
                let m = self.graph.event_mention(e);
                format!("{} {}", pos(m.at), m.text)
            }
            Use::Mention(m) => format!("{} {}", pos(self.graph.mentions[m].at), self.graph.mentions[m].text),
        }
    }

    /// The event whose result `name` is: a hidden Result value or a RES mention of that name.
    fn producer(&self, name: &str) -> Option<usize> {
        let g = self.graph;
        let want = content_words(name);
        let mut producers = g.events.iter().enumerate().filter_map(|(e, event)| {
            let hidden = event
                .hidden
                .iter()
                .filter(|h| h.role == HiddenRole::Result)
                .flat_map(|h| &h.values)
                .any(|v| content_words(&entity_name(v)) == want);
            let mentioned = event
                .results
                .iter()
                .any(|&m| content_words(&g.mentions[m].text) == want || content_words(&g.mentions[m].lemma) == want);
            (hidden || mentioned).then_some(e)
        });
        let first = producers.next();
        if producers.next().is_some() {
            self.ambiguous.set(true);
        }
        first
    }

    fn events_of_verb(&self, lemmas: &[String]) -> Vec<usize> {
        (0..self.graph.events.len()).filter(|&e| self.is_verb(e, lemmas)).collect()
    }

    /// Whether event `e` is the verb with base-form candidates `lemmas`.
    fn is_verb(&self, e: usize, lemmas: &[String]) -> bool {
        let m = self.graph.event_mention(e);
        same_verb(lemmas, &self.event_lemma(e)) || same_verb(lemmas, m.text.split(' ').next().unwrap_or(""))
    }

    /// The event a clause ("cut the carrots and zucchini", "sauting minced meat in a separate pan") describes.
    fn match_clause(&self, clause: &str) -> Option<usize> {
        let (verb, rest) = split_verb(clause);
        let candidates = self.events_of_verb(&verb_lemmas(verb));
        self.best_event(&candidates, &rest, |_| false)
    }

    /// Among `candidates`, the event whose context holds every content word of `rest` (the clause without its
    /// verb), preferring `preferred` events, then the most words among the event's own arguments, then the earliest.
    fn best_event(&self, candidates: &[usize], rest: &[String], preferred: impl Fn(usize) -> bool) -> Option<usize> {
        let mut best: Option<(bool, usize, std::cmp::Reverse<usize>)> = None;
        let mut tied = false;
        for &e in candidates {
            let sentence = self.sentence_words(e);
            let arguments = self.argument_words(e);
            let found = |w: &String| contains_word(&sentence, w) || contains_word(&arguments, w);
            if !rest.iter().all(found) {
                continue;
            }
            let own = rest.iter().filter(|w| contains_word(&arguments, w)).count();
            let key = (preferred(e), own, std::cmp::Reverse(e));
            // Candidates come in text order: an equal (preferred, own) means an equally good earlier event.
            tied |= best.is_some_and(|b| (b.0, b.1) == (key.0, key.1));
            if best.is_none_or(|b| key > b) {
                tied &= best.is_some_and(|b| (b.0, b.1) == (key.0, key.1));
                best = Some(key);
            }
        }
        if tied {
            self.ambiguous.set(true);
        }
        best.map(|(_, _, std::cmp::Reverse(e))| e)
    }

    /// Normalised forms and lemmas of the event's sentence.
    fn sentence_words(&self, e: usize) -> BTreeSet<String> {
        let s = self.graph.event_mention(e).sentence;
        let Some(sentence) = self.recipe.paragraphs.get(s.paragraph).and_then(|p| p.sentences.get(s.sentence)) else {
            return BTreeSet::new();
        };
        sentence.tokens.iter().flat_map(|t| [normalize_word(&t.form), normalize_word(&t.lemma)]).collect()
    }

    /// Normalised words of the event's arguments: its participants and their coreference chains, results,
    /// hidden arguments and role spans.
    fn argument_words(&self, e: usize) -> BTreeSet<String> {
        let g = self.graph;
        let event = &g.events[e];
        let mut texts: Vec<String> = Vec::new();
        for &m in event.participants.iter().chain(&event.results) {
            for c in g.chain_of(m) {
                texts.push(g.mentions[c].text.clone());
                texts.push(g.mentions[c].lemma.clone());
            }
            if let Some(c) = &g.mentions[m].coref {
                texts.push(entity_name(c));
            }
        }
        texts.extend(event.hidden.iter().flat_map(|h| &h.values).map(entity_name));
        texts.extend(event.roles.iter().map(|r| r.text.clone()));
        texts.iter().flat_map(|t| content_words(t)).collect()
    }
}

/// "step.sentence.token".
fn pos(p: TokenPos) -> String {
    format!("{}.{}.{}", p.step, p.sentence, p.token)
}

/// An entity reference's name with spaces: `chopped_vegetables.1.1.1` → "chopped vegetables".
pub(crate) fn entity_name(r: &EntityRef) -> String {
    r.name.replace('_', " ")
}

/// A mention's text without a leading article or count ("the onion" → "onion", "2 tomatoes" → "tomatoes").
pub(crate) fn mention_name(s: &str) -> String {
    let mut words: Vec<&str> = s.split_whitespace().collect();
    if words.len() > 1 && ["the", "a", "an"].contains(&words[0].to_ascii_lowercase().as_str()) {
        words.remove(0);
    }
    while words.len() > 1 && words[0].chars().all(|c| c.is_ascii_digit() || c == '/' || c == '.') {
        words.remove(0);
    }
    words.join(" ")
}

/// Words that do not identify an entity or event.
const STOPWORDS: &[&str] = &[
    "the", "a", "an", "of", "and", "or", "to", "in", "into", "on", "onto", "with", "for", "from", "at", "by", "it",
    "them", "some", "all", "your", "you", "is", "be", "are", "was", "until", "over", "up",
];

/// Lower case, and a crude plural-to-singular so "tomatoes", "potato" and "spatulas" meet their lemmas.
fn normalize_word(w: &str) -> String {
    let w = w.to_lowercase();
    if w.len() > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..w.len() - 3]);
    }
    if w.len() > 4 && ["oes", "ches", "shes", "xes", "sses"].iter().any(|s| w.ends_with(s)) {
        return w[..w.len() - 2].to_string();
    }
    if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
        return w[..w.len() - 1].to_string();
    }
    w
}

/// Normalised alphanumeric words of a text, stopwords left out.
fn content_words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(normalize_word)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect()
}

/// Whether `words` holds `w`, or a word sharing all but its last two letters with it (at least five): the
/// release's questions spell some names through a lemmatiser ("gremolatum" for the text's "gremolata").
fn contains_word(words: &BTreeSet<String>, w: &str) -> bool {
    words.contains(w)
        || words.iter().any(|x| {
            let common = x.bytes().zip(w.bytes()).take_while(|(a, b)| a == b).count();
            common >= 5 && common + 2 >= x.len().min(w.len()) && x.len().abs_diff(w.len()) <= 2
        })
}

/// The clause's first word (its verb, any inflection) and the content words after it.
fn split_verb(clause: &str) -> (&str, Vec<String>) {
    let clause = clause.trim();
    let (verb, rest) = clause.split_once(' ').unwrap_or((clause, ""));
    (verb, content_words(rest))
}

/// Irregular participles of cooking verbs (questions say "What should be left ...?", "blent", "beaten").
const IRREGULAR: &[(&str, &str)] = &[
    ("left", "leave"),
    ("blent", "blend"),
    ("beaten", "beat"),
    ("frozen", "freeze"),
    ("ground", "grind"),
    ("torn", "tear"),
    ("shaken", "shake"),
    ("taken", "take"),
    ("kept", "keep"),
    ("brought", "bring"),
    ("held", "hold"),
    ("laid", "lay"),
    ("made", "make"),
    ("done", "do"),
    ("got", "get"),
    ("gotten", "get"),
    ("risen", "rise"),
    ("thrown", "throw"),
    ("spun", "spin"),
    ("stuck", "stick"),
    ("hung", "hang"),
    ("chosen", "choose"),
    ("given", "give"),
    ("driven", "drive"),
    ("fed", "feed"),
    ("sold", "sell"),
];

/// Candidate base forms of an inflected verb: itself, and with -ing / -ed / -en / -s undone ("cutting" → "cut",
/// "sauting" → "saute", "fried" → "fry", "chopped" → "chop"), or its irregular base form.
fn verb_lemmas(verb: &str) -> Vec<String> {
    let v = verb.to_lowercase();
    let mut out = vec![v.clone()];
    if let Some((_, base)) = IRREGULAR.iter().find(|(form, _)| *form == v) {
        out.push(base.to_string());
    }
    for suffix in ["ing", "ed", "en", "es", "s"] {
        if let Some(stem) = v.strip_suffix(suffix)
            && stem.len() >= 2
        {
            out.push(stem.to_string());
            out.push(format!("{stem}e"));
            let b = stem.as_bytes();
            if b.len() >= 3 && b[b.len() - 1] == b[b.len() - 2] && b[b.len() - 1].is_ascii_alphabetic() {
                out.push(stem[..stem.len() - 1].to_string());
            }
            if suffix == "ed"
                && let Some(s) = stem.strip_suffix('i')
            {
                out.push(format!("{s}y"));
            }
        }
    }
    let mut seen = BTreeSet::new();
    out.retain(|x| seen.insert(x.clone()));
    out
}

/// Whether two inflected verbs can be the same verb: their candidate base forms meet (sources without lemmas
/// spell events inflected: "beaten" for "beat").
fn same_verb(a: &[String], b: &str) -> bool {
    verb_lemmas(b).iter().any(|x| a.contains(x))
}

/// "add" → "adding", "saute" → "sauting", "cut" → "cutting", "mix" → "mixing".
pub(crate) fn gerund(lemma: &str) -> String {
    let b = lemma.as_bytes();
    let vowel = |c: u8| b"aeiou".contains(&c);
    if lemma.ends_with('e') && !lemma.ends_with("ee") && lemma.len() > 2 {
        return format!("{}ing", &lemma[..lemma.len() - 1]);
    }
    // One-syllable consonant-vowel-consonant verbs double the consonant (not w, x, y); so do verbs stressed on a
    // final -er ("transferring").
    let n = b.len();
    if lemma.ends_with("fer") {
        return format!("{lemma}ring");
    }
    if (3..=4).contains(&n)
        && b.is_ascii()
        && !vowel(b[n - 1])
        && !b"wxy".contains(&b[n - 1])
        && vowel(b[n - 2])
        && !vowel(b[n - 3])
        && b.iter().filter(|&&c| vowel(c)).count() == 1
    {
        return format!("{lemma}{}ing", b[n - 1] as char);
    }
    format!("{lemma}ing")
}

/// "to the pan" after add and transfer, "in the pan" otherwise: the release's "How did you get" answers (800 train
/// recipes: "adding ... to" 158 times, "in" 3; every other verb mostly "in").
fn habitat_preposition(verb: &str) -> &'static str {
    match verb {
        "add" | "transfer" => "to",
        _ => "in",
    }
}

/// Small annotated recipes for tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use stepwise_core::r2vq::R2vqRecipe;

    /// A recipe in the SemEval layout from its steps (one sentence each: text and rows); each row lists the
    /// columns after ID, the rest are `_`.
    pub(crate) fn recipe_from(id: &str, steps: &[(&str, &[&[&str]])]) -> R2vqRecipe {
        let mut text = format!("# newdoc id = {id}\n");
        for (k, (sentence, rows)) in steps.iter().enumerate() {
            let step = k + 1;
            text.push_str(&format!(
                "# newpar id = {id}::step{step:02}\n# sent_id = {id}::step{step:02}::sent01\n# text = {sentence}\n"
            ));
            for (i, row) in rows.iter().enumerate() {
                let mut cols: Vec<String> = vec![(i + 1).to_string()];
                cols.extend(row.iter().map(|c| c.to_string()));
                cols.resize(20, "_".into());
                text.push_str(&cols.join("\t"));
                text.push('\n');
            }
            text.push('\n');
        }
        let doc =
            stepwise_ingest::readers::r2vq_conllu::parse_r2vq_conllu(std::path::Path::new("r.csv"), &text).unwrap();
        doc.recipes.into_iter().next().unwrap()
    }

    /// Cut the onion with a knife; fry it in a pan for 5 minutes; serve.
    pub(crate) fn onion(id: &str) -> R2vqRecipe {
        recipe_from(
            id,
            &[
                (
                    "Cut the onion with a knife.",
                    &[
                        &[
                            "Cut",
                            "cut",
                            "VERB",
                            "B-EVENT",
                            "_",
                            "_",
                            "Result=chopped_onion.1.1.1|Habitat=board.1.1.1",
                            "_",
                            "CUT",
                            "B-V",
                        ],
                        &["the", "the", "DET", "O", "_", "_", "_", "_", "_", "B-Patient"],
                        &[
                            "onion",
                            "onion",
                            "NOUN",
                            "B-EXPLICITINGREDIENT",
                            "1",
                            "_",
                            "_",
                            "onion.1.1.3",
                            "_",
                            "I-Patient",
                        ],
                        &["with", "with", "ADP", "O", "_", "_", "_", "_", "_", "B-Instrument"],
                        &["a", "a", "DET", "O", "_", "_", "_", "_", "_", "I-Instrument"],
                        &["knife", "knife", "NOUN", "B-TOOL", "1", "_", "_", "knife.1.1.6", "_", "I-Instrument"],
                        &[".", ".", "PUNCT", "O"],
                    ],
                ),
                (
                    "Fry it in a pan for 5 minutes.",
                    &[
                        &["Fry", "fry", "VERB", "B-EVENT", "_", "_", "_", "_", "COOK", "B-V"],
                        &[
                            "it",
                            "it",
                            "PRON",
                            "B-IMPLICITINGREDIENT",
                            "1",
                            "_",
                            "_",
                            "chopped_onion.1.1.1",
                            "_",
                            "B-Patient",
                        ],
                        &["in", "in", "ADP", "O", "_", "_", "_", "_", "_", "B-Location"],
                        &["a", "a", "DET", "O", "_", "_", "_", "_", "_", "I-Location"],
                        &["pan", "pan", "NOUN", "B-HABITAT", "1", "_", "_", "pan.2.1.5", "_", "I-Location"],
                        &["for", "for", "ADP", "O", "_", "_", "_", "_", "_", "B-Time"],
                        &["5", "5", "NUM", "O", "_", "_", "_", "_", "_", "I-Time"],
                        &["minutes", "minute", "NOUN", "O", "_", "_", "_", "_", "_", "I-Time"],
                        &[".", ".", "PUNCT", "O"],
                    ],
                ),
                (
                    "Serve.",
                    &[
                        &[
                            "Serve",
                            "serve",
                            "VERB",
                            "B-EVENT",
                            "_",
                            "_",
                            "Drop=chopped_onion.1.1.1|Habitat=plate.3.1.1",
                            "_",
                            "NOURISH_FEED",
                            "B-V",
                        ],
                        &[".", ".", "PUNCT", "O"],
                    ],
                ),
            ],
        )
    }

    /// Boil the pasta in a pot; drain it with a colander.
    pub(crate) fn pasta(id: &str) -> R2vqRecipe {
        recipe_from(
            id,
            &[
                (
                    "Boil the pasta.",
                    &[
                        &["Boil", "boil", "VERB", "B-EVENT", "_", "_", "Habitat=pot.1.1.1", "_", "COOK", "B-V"],
                        &["the", "the", "DET", "O", "_", "_", "_", "_", "_", "B-Patient"],
                        &[
                            "pasta",
                            "pasta",
                            "NOUN",
                            "B-EXPLICITINGREDIENT",
                            "1",
                            "_",
                            "_",
                            "pasta.1.1.3",
                            "_",
                            "I-Patient",
                        ],
                        &[".", ".", "PUNCT", "O"],
                    ],
                ),
                (
                    "Drain it.",
                    &[
                        &[
                            "Drain",
                            "drain",
                            "VERB",
                            "B-EVENT",
                            "_",
                            "_",
                            "Tool=colander.2.1.1|Habitat=sink.2.1.1",
                            "_",
                            "EMPTY_UNLOAD",
                            "B-V",
                        ],
                        &["it", "it", "PRON", "B-EXPLICITINGREDIENT", "1", "_", "_", "pasta.1.1.3", "_", "B-Patient"],
                        &[".", ".", "PUNCT", "O"],
                    ],
                ),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe() -> R2vqRecipe {
        fixtures::onion("r")
    }

    #[test]
    fn a_hidden_hand_is_answered_by_hand() {
        let knead: &[&[&str]] = &[
            &["Knead", "knead", "VERB", "B-EVENT", "_", "_", "Tool=hands.1.1.1", "_", "_", "B-V"],
            &["the", "the", "DET", "O"],
            &["dough", "dough", "NOUN", "B-EXPLICITINGREDIENT", "1", "_", "_", "_", "_", "B-Patient"],
        ];
        let beat: &[&[&str]] = &[
            &["Beat", "beat", "VERB", "B-EVENT", "_", "_", "Tool=whisk.2.1.1", "_", "_", "B-V"],
            &["the", "the", "DET", "O"],
            &["egg", "egg", "NOUN", "B-EXPLICITINGREDIENT", "2", "_", "_", "_", "_", "B-Patient"],
        ];
        let r = fixtures::recipe_from("hands", &[("Knead the dough", knead), ("Beat the egg", beat)]);
        let g = AnnotationGraph::of(&r);
        let ask = |q: &str| {
            let a = answer_question(&r, &g, q).unwrap();
            (a.family, a.answer)
        };
        assert_eq!(ask("How do you knead the dough?"), (6, Some("by hand".into())), "a manner, family 6");
        assert_eq!(ask("How do you beat the egg?"), (2, Some("by using a whisk".into())));
    }

    #[test]
    fn a_question_two_events_fit_equally_is_ambiguous_and_not_generated() {
        let step = |habitat: &'static str| -> (&'static str, &'static [&'static [&'static str]]) {
            let rows: &'static [&'static [&'static str]] = if habitat == "bowl" {
                &[
                    &["Add", "add", "VERB", "B-EVENT", "_", "_", "Habitat=bowl.1.1.1", "_", "ADD", "B-V"],
                    &["sugar", "sugar", "NOUN", "B-EXPLICITINGREDIENT", "1", "_", "_", "sugar.1.1.2", "_", "B-Patient"],
                ]
            } else {
                &[
                    &["Add", "add", "VERB", "B-EVENT", "_", "_", "Habitat=pan.2.1.1", "_", "ADD", "B-V"],
                    &["sugar", "sugar", "NOUN", "B-EXPLICITINGREDIENT", "1", "_", "_", "sugar.1.1.2", "_", "B-Patient"],
                ]
            };
            ("Add sugar", rows)
        };
        let r = fixtures::recipe_from("two", &[step("bowl"), step("pan")]);
        let g = AnnotationGraph::of(&r);
        let a = answer_question(&r, &g, "Where should you add the sugar?").unwrap();
        assert_eq!((a.answer.as_deref(), a.ambiguous), (Some("bowl"), true), "two add-sugar events fit equally");
        let doc = stepwise_core::r2vq::R2vqDocument { recipes: vec![r], final_newline: true };
        let made = super::super::generate::generate_r2vq(&doc, &Default::default());
        assert!(
            made.questions.iter().all(|q| q.question != "Where should you add the sugar?"),
            "dropped: {:?}",
            made.questions
        );
        let unique = answer_question(
            &fixtures::onion("o"),
            &AnnotationGraph::of(&fixtures::onion("o")),
            "Where should you cut the onion?",
        );
        assert!(!unique.unwrap().ambiguous);
    }

    #[test]
    fn every_family_program_answers_from_the_annotation_and_unanswerable_questions_get_none() {
        let r = recipe();
        let g = AnnotationGraph::of(&r);
        let ask = |q: &str| {
            let a = answer_question(&r, &g, q).unwrap();
            (a.family, a.answer)
        };
        let some = |f: u32, s: &str| (f, Some(s.to_string()));
        assert_eq!(ask("How many times is the knife used?"), some(0, "1"));
        assert_eq!(ask("How many actions does it take to process the onion?"), some(0, "1"));
        assert_eq!(ask("How many pans are used?"), some(0, "1"));
        assert_eq!(ask("What should be served?"), some(1, "the chopped onion"));
        assert_eq!(ask("Where should you cut the onion?"), some(2, "board"));
        assert_eq!(
            ask("How do you cut the onion?"),
            some(6, "cut the onion with a knife"),
            "no hidden tool: the instrument role"
        );
        assert_eq!(ask("What's in the chopped onion?"), some(3, "the onion"));
        assert_eq!(
            ask("How did you get the chopped onion?"),
            some(3, "by cutting the onion in the board with the knife")
        );
        assert_eq!(ask("Frying it in a pan and cutting the onion, which comes first?"), some(4, "the second event"));
        assert_eq!(
            ask("For how long do you fry the chopped onion?"),
            some(7, "for 5 minutes"),
            "through its COREF name"
        );
        assert_eq!(ask("Where do you fry the chopped onion?"), some(8, "in a pan"));
        assert_eq!(
            ask("Where was the chopped onion before it was served?"),
            some(17, "pan"),
            "served as a dropped argument"
        );
        assert_eq!(ask("What does the onion become?"), some(3, "the chopped onion"));
        assert_eq!(ask("Where is the onion after step 1?"), some(3, "board"));
        assert_eq!(ask("Where is the chopped onion after step 2?"), some(3, "pan"));
        assert_eq!(ask("Where is the chopped onion after step 0?"), (UNANSWERABLE, None));
        // Distractors: arguments the recipe does not have.
        assert_eq!(ask("What's in the ingred mix?"), (UNANSWERABLE, None));
        assert_eq!(ask("Where should you bake the cake?"), (UNANSWERABLE, None));
        assert_eq!(ask("Boiling the pasta and cutting the onion, which comes first?"), (UNANSWERABLE, None));
        assert_eq!(ask("How many spoons are used?"), (UNANSWERABLE, None));
        assert!(answer_question(&r, &g, "Is this about onions").is_err(), "no template");
        // The explanation names the program and the events it read.
        let a = answer_question(&r, &g, "How did you get the chopped onion?").unwrap();
        assert_eq!(a.program, Some(Program::Origin { entity: "chopped onion".into() }));
        assert_eq!(a.evidence, ["1.1.1 Cut"]);
    }

    #[test]
    fn verb_forms_are_undone_and_made() {
        assert!(verb_lemmas("Cutting").contains(&"cut".to_string()));
        assert!(verb_lemmas("sauting").contains(&"saute".to_string()));
        assert!(verb_lemmas("fried").contains(&"fry".to_string()));
        assert!(verb_lemmas("served").contains(&"serve".to_string()));
        assert!(verb_lemmas("chopped").contains(&"chop".to_string()));
        assert!(verb_lemmas("left").contains(&"leave".to_string()));
        assert!(same_verb(&verb_lemmas("beat"), "beaten"));
        assert!(same_verb(&verb_lemmas("stir"), "stirring"));
        assert!(!same_verb(&verb_lemmas("stir"), "sift"));
        // Multi-byte characters are never cut: U+0FFF ends in two equal bytes.
        for w in ["\u{fff}\u{fff}ing", "a\u{fff}ed", "\u{fff}"] {
            let _ = (verb_lemmas(w), gerund(w), normalize_word(w), mention_name(w));
        }
        assert_eq!(gerund("add"), "adding");
        assert_eq!(gerund("cut"), "cutting");
        assert_eq!(gerund("saute"), "sauting");
        assert_eq!(gerund("mix"), "mixing");
        assert_eq!(gerund("boil"), "boiling");
        assert_eq!(gerund("transfer"), "transferring");
        assert_eq!(mention_name("the 2 tomatoes"), "tomatoes");
        assert_eq!(mention_name("2"), "2");
        assert_eq!(normalize_word("Tomatoes"), "tomato");
        assert_eq!(normalize_word("spatulas"), "spatula");
        assert_eq!(normalize_word("glass"), "glass");
    }
}
