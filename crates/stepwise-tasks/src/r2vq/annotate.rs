//! Procedures with span annotation (the built-in world's exact ground truth, or any corpus whose steps carry
//! `spans` and `links`) as R2VQ recipes, so question generation, the programs and event ordering run on them.
//!
//! Each step becomes one paragraph with one sentence (its text), tokenized into words and punctuation. Spans map
//! to the ENTITY column (EVENT → EVENT; INGREDIENT, PART, SUPPLY → explicit ingredient; RESULT → implicit
//! ingredient; TOOL → TOOL; CONTAINER, HABITAT → HABITAT). An event's links give its arguments: a written
//! argument points at the event (PART; RES for `result`), an unwritten one is a hidden argument of the event
//! (patients Drop, tools Tool, containers and habitats Habitat, results Result). Written tools, containers,
//! destinations and habitats also become semantic-role spans (Instrument, Location, Destination) reaching back
//! over their article and preposition, with the event as predicate. Coreference: ingredients by their entity id,
//! props by their name (the text unwritten props are named by).

use std::collections::BTreeMap;

use stepwise_core::procedure::{Procedure, Span};
use stepwise_core::r2vq::{
    ARG_COLUMNS, EntityKind, EntityRef, EntityTag, HiddenArg, HiddenRole, ORIENTATION_KEY, Paragraph, R2vqRecipe,
    Sentence, SrlTag, Token, word_tokens,
};

/// The recipe of a procedure, or `None` when no step has an EVENT span.
pub fn recipe_of_procedure(p: &Procedure) -> Option<R2vqRecipe> {
    let mut paragraphs = Vec::new();
    let mut any_event = false;
    // The world's prop orientations after each step (props that never turn are left out there: upright).
    let props =
        p.annotations.as_ref().and_then(|a| a.world.as_ref()).and_then(|w| w.get("props")).and_then(|v| v.as_array());
    let orientation = |prop: &str, step: usize| -> Option<String> {
        let truth = props?.iter().find(|x| x.get("id").and_then(|i| i.as_str()) == Some(prop))?;
        match truth.get("orientations").and_then(|o| o.as_array()) {
            Some(list) => list.get(step)?.as_str().map(str::to_string),
            None => Some("upright".into()),
        }
    };
    for (k, step) in p.steps.iter().enumerate() {
        let text = step.text.clone().unwrap_or_default();
        let (offsets, mut tokens): (Vec<(usize, usize)>, Vec<Token>) =
            word_tokens(&text).into_iter().map(|(s, e, w)| ((s, e), Token::plain(&w))).unzip();
        let mut metadata = Vec::new();
        if let Some(ann) = &step.annotations {
            any_event |= annotate_step(&ann.spans, &ann.links, &offsets, &mut tokens);
            // Orientations of the written props (tools, containers, habitats) after this step.
            let mut pairs: Vec<(usize, String)> = Vec::new();
            for s in &ann.spans {
                let (Some(prop), Some(start)) = (s.attrs.get("prop"), s.start) else { continue };
                let Some(t) = offsets.iter().position(|&(a, b)| b > start && a < s.end.unwrap_or(start + 1)) else {
                    continue;
                };
                if let (Some(o), EntityTag::Begin(_)) = (orientation(prop, k), &tokens[t].entity) {
                    pairs.push((t + 1, EntityRef::named(&o, None).name));
                }
            }
            pairs.sort();
            pairs.dedup();
            if !pairs.is_empty() {
                let v: Vec<String> = pairs.iter().map(|(t, o)| format!("{t}={o}")).collect();
                metadata.push((ORIENTATION_KEY.to_string(), v.join(" ")));
            }
        }
        if tokens.is_empty() {
            continue;
        }
        let id = format!("{}::step{:02}", p.id, k + 1);
        let sentence = Sentence {
            id: format!("{id}::sent01"),
            text: text.split_whitespace().collect::<Vec<_>>().join(" "),
            metadata,
            tokens,
            blank_lines_after: 1,
            continues: false,
        };
        paragraphs.push(Paragraph { id, sentences: vec![sentence] });
    }
    if let Some(last) = paragraphs.last_mut().and_then(|p| p.sentences.last_mut()) {
        last.blank_lines_after = 2;
    }
    any_event.then(|| R2vqRecipe { id: p.id.clone(), header: Vec::new(), paragraphs })
}

fn kind_of(label: &str) -> Option<EntityKind> {
    Some(match label {
        "EVENT" => EntityKind::Event,
        "INGREDIENT" | "PART" | "SUPPLY" => EntityKind::ExplicitIngredient,
        "RESULT" => EntityKind::ImplicitIngredient,
        "TOOL" => EntityKind::Tool,
        "CONTAINER" | "HABITAT" => EntityKind::Habitat,
        _ => return None,
    })
}

/// The coreference name of a span: ingredients by entity id, props by their text.
fn entity_ref(span: &Span, kind: EntityKind) -> EntityRef {
    let name = match kind {
        EntityKind::Tool | EntityKind::Habitat => span.text.to_lowercase(),
        _ => span.attrs.get("entity").cloned().unwrap_or_else(|| span.text.to_lowercase()),
    };
    EntityRef::named(&name, None)
}

/// Fill one step's columns from its spans and links; true when it has an event.
fn annotate_step(
    spans: &[Span],
    links: &[stepwise_core::procedure::Link],
    offsets: &[(usize, usize)],
    tokens: &mut [Token],
) -> bool {
    // Token range of each written span.
    let range = |s: &Span| -> Option<(usize, usize)> {
        let (start, end) = (s.start?, s.end?);
        let first = offsets.iter().position(|&(a, b)| b > start && a < end)?;
        let last = offsets.iter().rposition(|&(a, b)| b > start && a < end)?;
        Some((first, last))
    };
    let by_id: BTreeMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut head_of: BTreeMap<&str, usize> = BTreeMap::new();
    for s in spans {
        let (Some(kind), Some((first, last))) = (kind_of(&s.label), range(s)) else { continue };
        if tokens[first..=last].iter().any(|t| t.entity != EntityTag::Outside) {
            continue; // overlapping spans: the first one wins
        }
        tokens[first].entity = EntityTag::Begin(kind);
        for t in &mut tokens[first + 1..=last] {
            t.entity = EntityTag::Inside(kind);
        }
        if kind != EntityKind::Event {
            tokens[first].coref = Some(entity_ref(s, kind));
        }
        head_of.insert(s.id.as_str(), first);
    }
    // The written patients of each event: first and last token.
    let mut patients: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for l in links.iter().filter(|l| l.label == "patient") {
        if let Some((a, b)) =
            by_id.get(l.to.as_str()).filter(|s| head_of.contains_key(s.id.as_str())).and_then(|s| range(s))
        {
            let e = patients.entry(l.from.as_str()).or_insert((a, b));
            *e = (e.0.min(a), e.1.max(b));
        }
    }
    // Events in text order get predicate columns.
    let mut events: Vec<(usize, &Span)> = spans
        .iter()
        .filter(|s| s.label == "EVENT")
        .filter_map(|s| head_of.get(s.id.as_str()).map(|&h| (h, s)))
        .collect();
    events.sort_by_key(|(h, _)| *h);
    for (column, (head, event)) in events.iter().enumerate() {
        let frame = event.attrs.get("action").map_or_else(|| "ACT".to_string(), |a| a.to_uppercase());
        tokens[*head].predicate = Some(frame);
        if column < ARG_COLUMNS {
            tokens[*head].args[column] = SrlTag::Begin("V".into());
        }
        for link in links.iter().filter(|l| l.from == event.id) {
            let Some(arg) = by_id.get(link.to.as_str()) else { continue };
            let Some(kind) = kind_of(&arg.label) else { continue };
            let written = head_of.get(arg.id.as_str()).copied();
            let role = match (link.label.as_str(), kind) {
                ("result", _) => HiddenRole::Result,
                ("tool", _) => HiddenRole::Tool,
                ("container" | "destination" | "habitat", EntityKind::Habitat) => HiddenRole::Habitat,
                _ => HiddenRole::Drop,
            };
            match written {
                Some(h) if role == HiddenRole::Result => tokens[h].res = Some(head + 1),
                Some(h) => {
                    tokens[h].part = Some(head + 1);
                    let srl = match (link.label.as_str(), role) {
                        ("tool", _) => Some("Instrument"),
                        ("destination", _) => Some("Destination"),
                        (_, HiddenRole::Habitat) => Some("Location"),
                        ("patient", _) => Some("Patient"),
                        _ => None,
                    };
                    // The patients are one span, from the first to the last ("the eggs, the milk and the salt").
                    let span =
                        if srl == Some("Patient") { patients.get(event.id.as_str()).copied() } else { range(arg) };
                    if let (Some(srl), Some((first, last))) = (srl, span)
                        && column < ARG_COLUMNS
                    {
                        let first = if srl == "Patient" { first } else { reach_back(tokens, first) };
                        if tokens[first..=last].iter().all(|t| t.args[column] == SrlTag::Empty) {
                            tokens[first].args[column] = SrlTag::Begin(srl.into());
                            for t in &mut tokens[first + 1..=last] {
                                t.args[column] = SrlTag::Inside(srl.into());
                            }
                        }
                    }
                }
                None => {
                    let value = entity_ref(arg, kind);
                    let hidden = &mut tokens[*head].hidden;
                    match hidden.iter_mut().find(|h| h.role == role) {
                        Some(h) if !h.values.contains(&value) => h.values.push(value),
                        Some(_) => {}
                        None => hidden.push(HiddenArg { role, values: vec![value] }),
                    }
                }
            }
        }
    }
    !events.is_empty()
}

/// The first token of "into the small bowl" given that of "small bowl": back over articles and one preposition.
fn reach_back(tokens: &[Token], mut first: usize) -> usize {
    const ARTICLES: &[&str] = &["the", "a", "an", "your"];
    const PREPOSITIONS: &[&str] =
        &["in", "into", "on", "onto", "to", "with", "from", "over", "under", "inside", "using"];
    while first > 0 && ARTICLES.contains(&tokens[first - 1].lemma.as_str()) {
        first -= 1;
    }
    if first > 0 && PREPOSITIONS.contains(&tokens[first - 1].lemma.as_str()) {
        first -= 1;
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::r2vq::programs::answer_question;
    use stepwise_core::r2vq::AnnotationGraph;

    #[test]
    fn world_procedures_become_annotated_recipes_that_answer_questions() {
        let p = stepwise_world::generate_procedure(
            &stepwise_world::WorldParams::new(0, stepwise_world::Domain::Cooking, 1),
            0,
        )
        .unwrap();
        let recipe = recipe_of_procedure(&p).expect("world procedures have events");
        assert_eq!(recipe.paragraphs.len(), p.steps.len());
        // Written back and read again in the SemEval layout, the recipe is the same.
        let doc = stepwise_core::r2vq::R2vqDocument { recipes: vec![recipe.clone()], final_newline: true };
        let back = stepwise_ingest::readers::r2vq_conllu::parse_r2vq_conllu(
            std::path::Path::new("w.csv"),
            &doc.to_conllu_string(),
        )
        .unwrap();
        assert_eq!(back.recipes[0], recipe);
        let g = AnnotationGraph::of(&recipe);
        let events: usize = p
            .steps
            .iter()
            .filter_map(|s| s.annotations.as_ref())
            .map(|a| a.spans.iter().filter(|s| s.label == "EVENT" && s.start.is_some()).count())
            .sum();
        assert_eq!(g.events.len(), events, "every written event");
        assert!(g.events.iter().any(|e| !e.participants.is_empty()));
        // Props carry the world's orientation after the step, and the orientation program reads it.
        let (e, m) = (0..g.events.len())
            .find_map(|e| {
                g.events[e].participants.iter().find(|&&m| g.mentions[m].orientation.is_some()).map(|&m| (e, m))
            })
            .expect("a prop with an orientation takes part in some event");
        let clause = format!(
            "{} the {}",
            g.event_mention(e).lemma,
            crate::r2vq::programs::mention_name(&g.mentions[g.events[e].participants[0]].text)
        );
        let q = format!(
            "What is the orientation of the {} when you {clause}?",
            crate::r2vq::programs::mention_name(&g.mentions[m].text)
        );
        let a = answer_question(&recipe, &g, &q).unwrap();
        assert_eq!(a.answer.as_deref().map(|o| o.replace(' ', "_")), g.mentions[m].orientation.clone(), "{q}");
        // A question about one of its ingredients is answered.
        let e = g
            .events
            .iter()
            .position(|e| e.participants.iter().any(|&m| g.mentions[m].kind == EntityKind::ExplicitIngredient))
            .unwrap();
        let verb = g.event_mention(e).lemma.clone();
        let object = g.mentions[g.events[e]
            .participants
            .iter()
            .copied()
            .find(|&m| g.mentions[m].kind == EntityKind::ExplicitIngredient)
            .unwrap()]
        .text
        .clone();
        let a =
            answer_question(&recipe, &g, &format!("How many actions does it take to process the {object}?")).unwrap();
        assert!(a.answer.is_some(), "{verb} {object}: {a:?}");
    }
}
