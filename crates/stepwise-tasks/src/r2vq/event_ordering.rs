//! R2VQ's event-ordering study (Pustejovsky et al., R2VQ §4.2 and appendix Table 2): for each ingredient entity,
//! the sentences that mention it — explicitly or through coreference, i.e. every mention carrying its COREF id —
//! form one ordering instance (EVENT); for each EVENT instance of N sentences, N consecutive sentences of the same
//! recipe starting at a seeded random position form a SENT instance. EVENT sentences may be far apart and share
//! the entity; SENT sentences are adjacent: the contrast measures how much a model orders by the entity's
//! lifespan rather than by local coherence.
//!
//! Units are the sentences of the recipe's steps (a headerless continuation group belongs to its sentence). The
//! instances are ordinary sequencing instances (`stepwise_core::sequencing`) over a *sentence corpus*: one
//! procedure per recipe whose steps are its sentences, so `stepwise embed` features of that corpus
//! (`text:{recipe}#{sentence}`) feed the sequencing baselines. An entity whose sentences are exactly those of
//! another entity gives no second instance. With `with_hidden`, a sentence whose event names the entity as a hidden
//! argument (HIDDEN `Drop=`, `Shadow=`, ... with its COREF id) counts as mentioning it too — the paper's text
//! speaks of explicit and coreferent mentions, so it is off by default.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use stepwise_core::r2vq::{AnnotationGraph, EntityKind, R2vqDocument};
use stepwise_core::rng::rng_for;
use stepwise_core::sequencing::{SequencingInstance, SequencingItem};
use stepwise_core::split::{SplitFractions, assign_splits};
use stepwise_core::{Procedure, Step};

/// What [`event_ordering`] made.
#[derive(Debug, Clone, PartialEq)]
pub struct EventOrdering {
    /// One procedure per recipe: its step sentences as steps (the units the instances order).
    pub sentences: Vec<Procedure>,
    pub event: Vec<SequencingInstance>,
    pub sent: Vec<SequencingInstance>,
    /// Ingredient entities seen, and those mentioned in fewer than two sentences (no instance).
    pub entities: usize,
    pub single_sentence: usize,
    /// Entities whose sentence set repeated another entity's.
    pub duplicates: usize,
}

/// Build the EVENT and SENT instances of every recipe of `doc`, split by recipe (`fractions`, `seed`).
pub fn event_ordering(doc: &R2vqDocument, fractions: SplitFractions, seed: u64, with_hidden: bool) -> EventOrdering {
    let mut out = EventOrdering {
        sentences: Vec::new(),
        event: Vec::new(),
        sent: Vec::new(),
        entities: 0,
        single_sentence: 0,
        duplicates: 0,
    };
    let splits = assign_splits(doc.recipes.iter().map(|r| (r.id.as_str(), None)), fractions, seed);
    for recipe in &doc.recipes {
        let graph = AnnotationGraph::of(recipe);
        // The recipe's sentences in order: (paragraph, sentence index of the headered sentence) → unit index.
        let mut unit_of = BTreeMap::new();
        let mut texts = Vec::new();
        for (pi, p) in recipe.paragraphs.iter().enumerate() {
            if p.step_number().is_none() {
                continue;
            }
            let mut current = None;
            for (si, s) in p.sentences.iter().enumerate() {
                if !s.continues || current.is_none() {
                    current = Some(texts.len());
                    texts.push(s.text.clone());
                }
                if let Some(u) = current {
                    unit_of.insert((pi, si), u);
                }
            }
        }
        out.sentences.push(Procedure {
            id: recipe.id.clone(),
            title: Some(format!("{} (sentences)", recipe.id)),
            source: recipe.metadata("url").map(str::to_string),
            steps: texts.iter().map(|t| Step { text: Some(t.clone()), ..Step::default() }).collect(),
            ..Procedure::default()
        });
        let split = splits.get(&recipe.id).map_or("train", |s| s.as_str()).to_string();
        let mut seen: BTreeSet<Vec<usize>> = BTreeSet::new();
        for (entity, mentions) in &graph.chains {
            let is_ingredient = mentions.iter().any(|&m| {
                matches!(graph.mentions[m].kind, EntityKind::ExplicitIngredient | EntityKind::ImplicitIngredient)
            });
            if !is_ingredient {
                continue;
            }
            out.entities += 1;
            let mut units: BTreeSet<usize> = mentions
                .iter()
                .filter_map(|&m| {
                    let s = graph.mentions[m].sentence;
                    unit_of.get(&(s.paragraph, s.sentence)).copied()
                })
                .collect();
            if with_hidden {
                for e in &graph.events {
                    if e.hidden.iter().any(|h| h.values.contains(entity)) {
                        let s = graph.mentions[e.mention].sentence;
                        units.extend(unit_of.get(&(s.paragraph, s.sentence)).copied());
                    }
                }
            }
            let units: Vec<usize> = units.into_iter().collect();
            if units.len() < 2 {
                out.single_sentence += 1;
                continue;
            }
            if !seen.insert(units.clone()) {
                out.duplicates += 1;
                continue;
            }
            let name = entity.to_string();
            let id = format!("{}/event/{name}", recipe.id);
            out.event.push(instance(&id, &recipe.id, &split, &units, &texts, seed));
            let n = units.len();
            let mut rng = rng_for(seed, &format!("r2vq/sent-window/{id}"));
            let start = rng.random_range(0..=texts.len() - n);
            let window: Vec<usize> = (start..start + n).collect();
            let id = format!("{}/sent/{name}", recipe.id);
            out.sent.push(instance(&id, &recipe.id, &split, &window, &texts, seed));
        }
    }
    out
}

/// A sequencing instance over `units` (in document order), shuffled from `rng_for(seed, "r2vq/shuffle/<id>")`.
fn instance(id: &str, recipe: &str, split: &str, units: &[usize], texts: &[String], seed: u64) -> SequencingInstance {
    let n = units.len();
    let mut perm: Vec<usize> = (0..n).collect();
    let mut rng = rng_for(seed, &format!("r2vq/shuffle/{id}"));
    for j in (1..n).rev() {
        perm.swap(j, rng.random_range(0..=j));
    }
    // perm[k] = document position shown as item k; the reference lists items in document order.
    let mut item_of = vec![0; n];
    for (k, &pos) in perm.iter().enumerate() {
        item_of[pos] = k;
    }
    SequencingInstance {
        constraints: None,
        id: id.to_string(),
        procedure: recipe.to_string(),
        split: split.to_string(),
        modality: "text".into(),
        items: perm
            .iter()
            .map(|&pos| SequencingItem {
                step: units[pos],
                title: None,
                text: Some(texts[units[pos]].clone()),
                images: Vec::new(),
            })
            .collect(),
        references: vec![(0..n).map(|pos| item_of[pos]).collect()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::r2vq::{EntityTag, Paragraph, R2vqRecipe, Sentence, SrlTag, Token};

    fn tok(form: &str, entity: &str, coref: Option<&str>) -> Token {
        Token {
            form: form.into(),
            lemma: form.into(),
            upos: "X".into(),
            entity: entity.parse::<EntityTag>().unwrap(),
            part: None,
            res: None,
            hidden: vec![],
            coref: coref.map(|c| c.parse().unwrap()),
            predicate: None,
            args: std::array::from_fn(|_| SrlTag::Empty),
        }
    }

    fn sentence(step: u32, text: &str, tokens: Vec<Token>) -> Sentence {
        Sentence { id: format!("r::step{step:02}::sent01"), text: text.into(), tokens, ..Sentence::default() }
    }

    #[test]
    fn ingredient_chains_give_event_instances_and_windows_of_the_same_length_give_sent_instances() {
        let onion = Some("onion.1.1.2");
        let paragraphs = vec![
            Paragraph { id: "r::ingredients".into(), sentences: vec![] },
            Paragraph {
                id: "r::step01".into(),
                sentences: vec![sentence(
                    1,
                    "Chop onion.",
                    vec![tok("Chop", "B-EVENT", None), tok("onion", "B-EXPLICITINGREDIENT", onion)],
                )],
            },
            Paragraph {
                id: "r::step02".into(),
                sentences: vec![sentence(
                    2,
                    "Boil water.",
                    vec![tok("Boil", "B-EVENT", None), tok("water", "B-EXPLICITINGREDIENT", Some("water.2.1.2"))],
                )],
            },
            Paragraph {
                id: "r::step03".into(),
                sentences: vec![sentence(
                    3,
                    "Fry it.",
                    vec![tok("Fry", "B-EVENT", None), tok("it", "B-EXPLICITINGREDIENT", onion)],
                )],
            },
            Paragraph {
                id: "r::step04".into(),
                sentences: vec![sentence(
                    4,
                    "Serve with a spoon.",
                    vec![tok("Serve", "B-EVENT", None), tok("spoon", "B-TOOL", Some("spoon.4.1.4"))],
                )],
            },
        ];
        let doc = R2vqDocument {
            recipes: vec![R2vqRecipe { id: "r".into(), header: vec![], paragraphs }],
            final_newline: true,
        };
        let made = event_ordering(&doc, SplitFractions::default(), 7, false);
        assert_eq!(
            (made.entities, made.single_sentence),
            (2, 1),
            "onion and water; water in one sentence; the spoon is no ingredient"
        );
        assert_eq!(made.sentences[0].steps.len(), 4);
        let e = &made.event[0];
        assert_eq!(e.id, "r/event/onion.1.1.2");
        // The reference puts the items back in document order: sentences 0 then 2.
        let ordered: Vec<usize> = e.references[0].iter().map(|&i| e.items[i].step).collect();
        assert_eq!(ordered, [0, 2]);
        let s = &made.sent[0];
        let ordered: Vec<usize> = s.references[0].iter().map(|&i| s.items[i].step).collect();
        assert_eq!(ordered.len(), 2);
        assert_eq!(ordered[1], ordered[0] + 1, "consecutive sentences");
        assert_eq!(made, event_ordering(&doc, SplitFractions::default(), 7, false), "deterministic");
        // With hidden arguments: "Boil" drops the onion into the water → the onion's chain gains sentence 1.
        let mut doc = doc;
        doc.recipes[0].paragraphs[2].sentences[0].tokens[0].hidden = vec![stepwise_core::r2vq::HiddenArg {
            role: stepwise_core::r2vq::HiddenRole::Drop,
            values: vec!["onion.1.1.2".parse().unwrap()],
        }];
        let with = event_ordering(&doc, SplitFractions::default(), 7, true);
        assert_eq!(with.event[0].items.len(), 3);
        assert_eq!(event_ordering(&doc, SplitFractions::default(), 7, false).event[0].items.len(), 2);
    }
}
