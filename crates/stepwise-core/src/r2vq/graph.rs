//! A recipe's annotation as a graph: entity mentions (ENTITY spans), cooking events with the mentions that
//! participate in them (PART) or result from them (RES), their hidden arguments (HIDDEN), their semantic roles
//! (the predicate's ARG column), and coreference chains (mentions sharing a COREF id).
//!
//! Positions follow the COREF column's convention: 1-based step, sentence within the step, token within the
//! sentence. A headerless continuation group (see [`super::Sentence::continues`]) keeps its sentence's number.

use std::collections::BTreeMap;

use super::{EntityKind, EntityRef, EntityTag, HiddenArg, R2vqRecipe, SrlTag, TokenPos};

/// Where a sentence is in the document: indices into `paragraphs` and their `sentences`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SentenceRef {
    pub paragraph: usize,
    pub sentence: usize,
}

/// An ENTITY span.
#[derive(Debug, Clone, PartialEq)]
pub struct Mention {
    pub kind: EntityKind,
    /// The span's first token.
    pub at: TokenPos,
    /// Its last token (same step and sentence).
    pub last: u32,
    pub sentence: SentenceRef,
    /// Forms joined by spaces ("olive oil").
    pub text: String,
    /// Lemmas joined by spaces.
    pub lemma: String,
    /// The COREF id of its first token: mentions with the same id are one entity.
    pub coref: Option<EntityRef>,
    /// The event (index into [`AnnotationGraph::events`]) it participates in (PART).
    pub participant_of: Option<usize>,
    /// The event it is the result of (RES).
    pub result_of: Option<usize>,
    /// A prop's orientation when the source records it (`upright`, `not_upright`, `tilted`; sentence metadata
    /// [`super::ORIENTATION_KEY`]).
    pub orientation: Option<String>,
}

/// A semantic-role span of one predicate.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSpan {
    /// VerbAtlas role: Patient, Location, Time, Result, ...
    pub role: String,
    /// First and last token (1-based) of the span.
    pub first: u32,
    pub last: u32,
    pub text: String,
}

/// A cooking event: an EVENT mention with its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its EVENT mention (index into [`AnnotationGraph::mentions`]).
    pub mention: usize,
    /// The VerbAtlas frame of its head when the head is a predicate.
    pub frame: Option<String>,
    /// Mentions with PART pointing at its head, in text order.
    pub participants: Vec<usize>,
    /// Mentions with RES pointing at its head, in text order.
    pub results: Vec<usize>,
    /// Unmentioned arguments (Drop, Shadow, Tool, Habitat, Result).
    pub hidden: Vec<HiddenArg>,
    /// The semantic roles of its predicate (not `V`), in text order.
    pub roles: Vec<RoleSpan>,
}

/// The annotation graph of one recipe. Mentions and events are in text order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AnnotationGraph {
    pub recipe: String,
    pub mentions: Vec<Mention>,
    pub events: Vec<Event>,
    /// Coreference chains: the mentions (in text order) of each COREF id.
    pub chains: BTreeMap<EntityRef, Vec<usize>>,
    /// The annotation layers the recipe carries ([`R2vqRecipe::has_layer`]).
    pub layers: Vec<super::Layer>,
}

impl AnnotationGraph {
    /// Build the graph of a recipe's step paragraphs (the ingredient list carries no annotation).
    pub fn of(recipe: &R2vqRecipe) -> AnnotationGraph {
        let layers = [super::Layer::CookingRoles, super::Layer::SemanticRoles]
            .into_iter()
            .filter(|l| recipe.has_layer(*l))
            .collect();
        let mut g = AnnotationGraph { recipe: recipe.id.clone(), layers, ..AnnotationGraph::default() };
        for (pi, paragraph) in recipe.paragraphs.iter().enumerate() {
            let Some(step) = paragraph.step_number() else { continue };
            let mut number = 0u32;
            for (si, sentence) in paragraph.sentences.iter().enumerate() {
                if !sentence.continues {
                    number += 1;
                }
                let sref = SentenceRef { paragraph: pi, sentence: si };
                let tokens = &sentence.tokens;
                let words = |first: u32, last: u32, f: fn(&super::Token) -> &str| -> String {
                    (first..=last).map(|t| f(&tokens[t as usize - 1])).collect::<Vec<_>>().join(" ")
                };
                // Prop orientations recorded for this sentence, by token ID.
                let orientations: BTreeMap<u32, &str> = sentence
                    .metadata
                    .iter()
                    .filter(|(k, _)| k == super::ORIENTATION_KEY)
                    .flat_map(|(_, v)| v.split_whitespace())
                    .filter_map(|pair| pair.split_once('=').and_then(|(t, o)| Some((t.parse().ok()?, o))))
                    .collect();
                // Mentions: a B- token and the I- tokens of the same kind after it.
                let first_mention = g.mentions.len();
                let mut head_of = BTreeMap::new();
                let mut i = 0;
                while i < tokens.len() {
                    let EntityTag::Begin(kind) = tokens[i].entity else {
                        i += 1;
                        continue;
                    };
                    let mut j = i + 1;
                    while j < tokens.len() && tokens[j].entity == EntityTag::Inside(kind) {
                        j += 1;
                    }
                    let (first, last) = (i as u32 + 1, j as u32);
                    head_of.insert(first, g.mentions.len());
                    g.mentions.push(Mention {
                        kind,
                        at: TokenPos { step, sentence: number, token: first },
                        last,
                        sentence: sref,
                        text: words(first, last, |t| &t.form),
                        lemma: words(first, last, |t| &t.lemma),
                        coref: tokens[i].coref.clone(),
                        participant_of: None,
                        result_of: None,
                        orientation: orientations.get(&first).map(|o| o.to_string()),
                    });
                    i = j;
                }
                // Events, and the links pointing at their heads.
                let mut event_of_head = BTreeMap::new();
                for m in first_mention..g.mentions.len() {
                    if g.mentions[m].kind != EntityKind::Event {
                        continue;
                    }
                    let head = g.mentions[m].at.token;
                    let head_token = &tokens[head as usize - 1];
                    let column = predicate_column(tokens, head, g.mentions[m].last);
                    let frame = column.and_then(|(_, t)| tokens[t as usize - 1].predicate.clone());
                    let roles = column.map(|(c, _)| role_spans(tokens, c)).unwrap_or_default();
                    event_of_head.insert(head, g.events.len());
                    g.events.push(Event {
                        mention: m,
                        frame,
                        participants: Vec::new(),
                        results: Vec::new(),
                        hidden: head_token.hidden.clone(),
                        roles,
                    });
                }
                for (&first, &m) in &head_of {
                    let token = &tokens[first as usize - 1];
                    if let Some(e) = token.part.and_then(|h| event_of_head.get(&(h as u32))) {
                        g.mentions[m].participant_of = Some(*e);
                        g.events[*e].participants.push(m);
                    }
                    if let Some(e) = token.res.and_then(|h| event_of_head.get(&(h as u32))) {
                        g.mentions[m].result_of = Some(*e);
                        g.events[*e].results.push(m);
                    }
                }
            }
        }
        for (m, mention) in g.mentions.iter().enumerate() {
            if let Some(c) = &mention.coref {
                g.chains.entry(c.clone()).or_default().push(m);
            }
        }
        g
    }

    /// The event's mention.
    pub fn event_mention(&self, event: usize) -> &Mention {
        &self.mentions[self.events[event].mention]
    }

    /// The mentions of the entity `m` belongs to (itself alone when it has no COREF id).
    pub fn chain_of(&self, m: usize) -> Vec<usize> {
        match &self.mentions[m].coref {
            Some(c) => self.chains.get(c).cloned().unwrap_or_else(|| vec![m]),
            None => vec![m],
        }
    }
}

/// The ARG column of the predicate whose `B-V` lies on the event span `first..=last`, and that token: predicates
/// are numbered by their order in the sentence, so the column of a predicate token is its rank among them.
fn predicate_column(tokens: &[super::Token], first: u32, last: u32) -> Option<(usize, u32)> {
    let predicates: Vec<u32> =
        tokens.iter().enumerate().filter(|(_, t)| t.predicate.is_some()).map(|(i, _)| i as u32 + 1).collect();
    let is_v = |t: u32, c: usize| tokens[t as usize - 1].args[c] == SrlTag::Begin("V".into());
    (first..=last)
        .find_map(|t| {
            let column = predicates.iter().position(|&p| p == t)?;
            (column < super::ARG_COLUMNS && is_v(t, column)).then_some((column, t))
        })
        // Some sentences number their columns differently (a predicate without a column shifts the rest): then
        // the column is the one whose `B-V` is on the head.
        .or_else(|| (first..=last).find_map(|t| (0..super::ARG_COLUMNS).find(|&c| is_v(t, c)).map(|c| (c, t))))
}

/// The role spans of ARG column `c`: a `B-` token and the `I-` tokens of the same role after it (`V` left out).
fn role_spans(tokens: &[super::Token], c: usize) -> Vec<RoleSpan> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let SrlTag::Begin(role) = &tokens[i].args[c] else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < tokens.len() && matches!(&tokens[j].args[c], SrlTag::Inside(r) if r == role) {
            j += 1;
        }
        if role != "V" {
            let text = tokens[i..j].iter().map(|t| t.form.as_str()).collect::<Vec<_>>().join(" ");
            out.push(RoleSpan { role: role.clone(), first: i as u32 + 1, last: j as u32, text });
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{HiddenRole, Paragraph, Sentence, Token};
    use super::*;

    fn token(
        form: &str,
        entity: &str,
        part: Option<usize>,
        coref: Option<&str>,
        pred: Option<&str>,
        args: &[&str],
    ) -> Token {
        let mut a: [SrlTag; super::super::ARG_COLUMNS] = Default::default();
        for (k, v) in args.iter().enumerate() {
            a[k] = v.parse().unwrap();
        }
        Token {
            form: form.into(),
            lemma: form.to_lowercase(),
            upos: "X".into(),
            entity: entity.parse().unwrap(),
            part,
            res: None,
            hidden: Vec::new(),
            coref: coref.map(|c| c.parse().unwrap()),
            predicate: pred.map(str::to_string),
            args: a,
        }
    }

    #[test]
    fn events_gather_their_participants_roles_and_hidden_arguments_and_chains_join_mentions() {
        let mut cut = token("Cut", "B-EVENT", None, None, Some("CUT"), &["B-V"]);
        cut.hidden = vec![HiddenArg { role: HiddenRole::Tool, values: vec!["knife.1.1.1".parse().unwrap()] }];
        let s1 = Sentence {
            id: "r::step01::sent01".into(),
            text: "Cut olive oil into pieces .".into(),
            tokens: vec![
                cut,
                token("olive", "B-EXPLICITINGREDIENT", Some(1), Some("olive_oil.1.1.2"), None, &["B-Patient"]),
                token("oil", "I-EXPLICITINGREDIENT", None, None, None, &["I-Patient"]),
                token("into", "O", None, None, None, &["B-Result"]),
                token("pieces", "O", None, None, None, &["I-Result"]),
                token(".", "O", None, None, None, &[]),
            ],
            ..Sentence::default()
        };
        let s2 = Sentence {
            id: "r::step02::sent01".into(),
            text: "Stir it .".into(),
            tokens: vec![
                token("Stir", "B-EVENT", None, None, Some("MOVE"), &["B-V"]),
                token("it", "B-EXPLICITINGREDIENT", Some(1), Some("olive_oil.1.1.2"), None, &["B-Patient"]),
                token(".", "O", None, None, None, &[]),
            ],
            ..Sentence::default()
        };
        let recipe = R2vqRecipe {
            id: "r".into(),
            header: vec![],
            paragraphs: vec![
                Paragraph { id: "r::ingredients".into(), sentences: vec![] },
                Paragraph { id: "r::step01".into(), sentences: vec![s1] },
                Paragraph { id: "r::step02".into(), sentences: vec![s2] },
            ],
        };
        let g = AnnotationGraph::of(&recipe);
        assert_eq!(g.mentions.len(), 4);
        assert_eq!(g.events.len(), 2);
        let e0 = &g.events[0];
        assert_eq!(g.event_mention(0).text, "Cut");
        assert_eq!(e0.frame.as_deref(), Some("CUT"));
        assert_eq!(e0.participants.iter().map(|&m| g.mentions[m].text.as_str()).collect::<Vec<_>>(), ["olive oil"]);
        assert_eq!(e0.hidden[0].role, HiddenRole::Tool);
        let roles: Vec<(&str, &str)> = e0.roles.iter().map(|r| (r.role.as_str(), r.text.as_str())).collect();
        assert_eq!(roles, [("Patient", "olive oil"), ("Result", "into pieces")]);
        assert_eq!(g.mentions[3].at, TokenPos { step: 2, sentence: 1, token: 2 });
        assert_eq!(g.chain_of(3), vec![1, 3], "\"it\" corefers with \"olive oil\"");
        assert_eq!(g.mentions[3].participant_of, Some(1));
    }
}
