//! Answering R2VQ questions by route: each question goes to its family's program when the recipe carries the
//! annotation layer that program reads, else to a text method, else it is unanswerable.
//!
//! The order per question: parse the template ([`stepwise_tasks::r2vq::questions`]); run the candidate families'
//! programs whose layer the recipe has ([`answer_question`]); the first defined answer is the program's. When no
//! program answered and a candidate was skipped for a missing layer (the inline-tagged layout has no semantic
//! roles; plain text has no layer at all), the annotation cannot tell, so the text method answers. When every
//! candidate ran and none answered, the annotation says there is no answer, and the question is unanswerable
//! (family 18's distractors) — unless a fitted policy names the template as one where the text method is right
//! more often than "no answer" after the programs found nothing (a lossy layer: the inline-tagged one). The question id's family is never read: it is the gold label the summary groups by.

use std::collections::BTreeMap;

use serde::Serialize;
use stepwise_core::r2vq::{AnnotationGraph, QuestionId, R2vqDocument, R2vqRecipe};
use stepwise_tasks::r2vq::programs::{Program, answer_question};
use stepwise_tasks::r2vq::questions::{Template, parse_question};

use crate::r2vq_text::RecipeText;

/// What the release's scorer expects for an unanswerable question.
pub const NO_ANSWER: &str = "N/A";

/// Which routes a question may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Programs on the annotation only (a question they cannot answer is unanswerable).
    Programs,
    /// The text method only (reads no annotation).
    Text,
    /// Programs where the recipe has their layer, else the text method, else unanswerable.
    Fallbacks,
}

/// How a question was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// A family's program on the recipe's annotation.
    Program,
    /// The text method (no program could read the recipe's annotation for this question).
    Text,
    /// No answer: the programs ran and found none, or the text method found none.
    Unanswerable,
    /// No question template matches: not understood, answered as unanswerable.
    NotUnderstood,
}

/// A question to answer: its recipe, id and text.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub recipe: String,
    pub id: QuestionId,
    pub question: String,
}

/// One question's answer and how it was reached.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Routed {
    /// `None` for unanswerable (written as [`NO_ANSWER`] or `null`).
    pub answer: Option<String>,
    pub route: Route,
    pub template: Option<Template>,
    /// The family whose program answered.
    pub family: Option<u32>,
    pub program: Option<Program>,
    /// What the program read.
    pub evidence: Vec<String>,
}

/// A text method: an answer from the recipe's text alone, `None` for none.
pub type TextMethod<'a> = &'a (dyn Fn(&RecipeText, &str) -> Option<String> + Sync);

/// The text method and when it answers besides a missing layer.
#[derive(Clone, Copy)]
pub struct Fallback<'a> {
    pub text: TextMethod<'a>,
    /// Templates the text method also answers when the programs found nothing on a recipe with their layer (a
    /// fitted policy: [`crate::r2vq_span::fit_route_policy`]); empty: such questions are unanswerable.
    pub after_empty_program: &'a [Template],
}

impl<'a> Fallback<'a> {
    /// The text method alone, for a missing layer only.
    pub fn text(text: TextMethod<'a>) -> Self {
        Fallback { text, after_empty_program: &[] }
    }
}

/// Answer each question of `asked` (every recipe named must be in `doc`) by `method`.
pub fn answer_all(doc: &R2vqDocument, asked: &[Asked], method: Method, fallback: Fallback<'_>) -> Vec<Routed> {
    struct Read<'a> {
        recipe: &'a R2vqRecipe,
        graph: AnnotationGraph,
        text: RecipeText,
    }
    let read: BTreeMap<&str, Read> = doc
        .recipes
        .iter()
        .map(|r| (r.id.as_str(), Read { recipe: r, graph: AnnotationGraph::of(r), text: RecipeText::of(r) }))
        .collect();
    asked
        .iter()
        .map(|q| match read.get(q.recipe.as_str()) {
            Some(r) => answer_one(r.recipe, &r.graph, &r.text, &q.question, method, fallback),
            None => unanswered(Route::NotUnderstood, None),
        })
        .collect()
}

/// Answer one question of a recipe by `method`.
pub fn answer_one(
    recipe: &R2vqRecipe,
    graph: &AnnotationGraph,
    recipe_text: &RecipeText,
    question: &str,
    method: Method,
    fallback: Fallback<'_>,
) -> Routed {
    let Some(parsed) = parse_question(question) else { return unanswered(Route::NotUnderstood, None) };
    let by_text = || match (fallback.text)(recipe_text, question) {
        Some(answer) => Routed {
            answer: Some(answer),
            route: Route::Text,
            template: Some(parsed.template),
            family: None,
            program: None,
            evidence: Vec::new(),
        },
        None => unanswered(Route::Unanswerable, Some(parsed.template)),
    };
    if method == Method::Text {
        return by_text();
    }
    // The template parsed, so the programs understand the question too.
    let Ok(answered) = answer_question(recipe, graph, question) else {
        return unanswered(Route::NotUnderstood, Some(parsed.template));
    };
    if answered.answer.is_some() {
        return Routed {
            answer: answered.answer,
            route: Route::Program,
            template: Some(answered.template),
            family: Some(answered.family),
            program: answered.program,
            evidence: answered.evidence,
        };
    }
    if method == Method::Fallbacks
        && (!answered.unread.is_empty() || fallback.after_empty_program.contains(&answered.template))
    {
        return by_text();
    }
    unanswered(Route::Unanswerable, Some(parsed.template))
}

fn unanswered(route: Route, template: Option<Template>) -> Routed {
    Routed { answer: None, route, template, family: None, program: None, evidence: Vec::new() }
}

/// Per family of the question ids: how many questions took each route, and how many programs that answered
/// belong to the id's family.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct RouteTable {
    pub families: BTreeMap<u32, FamilyRoutes>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct FamilyRoutes {
    pub questions: usize,
    pub routes: BTreeMap<Route, usize>,
    /// Questions answered by a program of the id's own family.
    pub same_family: usize,
}

impl RouteTable {
    pub fn of(asked: &[Asked], routed: &[Routed]) -> RouteTable {
        let mut t = RouteTable::default();
        for (q, r) in asked.iter().zip(routed) {
            let row = t.families.entry(q.id.family).or_default();
            row.questions += 1;
            *row.routes.entry(r.route).or_default() += 1;
            row.same_family += usize::from(r.family == Some(q.id.family));
        }
        t
    }

    /// A Markdown table: per family, its name, the questions and each route's count.
    pub fn markdown(&self) -> String {
        let mut s = String::from(
            "| family | questions | program | text | unanswerable | not understood | program of the id's family |\n",
        );
        s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        let mut total = FamilyRoutes::default();
        for (family, row) in &self.families {
            s.push_str(&row_line(&format!("{family} {}", stepwise_core::r2vq::family_name(*family)), row));
            total.questions += row.questions;
            total.same_family += row.same_family;
            for (route, n) in &row.routes {
                *total.routes.entry(*route).or_default() += n;
            }
        }
        s.push_str(&row_line("**all**", &total));
        s
    }
}

fn row_line(name: &str, row: &FamilyRoutes) -> String {
    let n = |r: Route| row.routes.get(&r).copied().unwrap_or(0);
    format!(
        "| {name} | {} | {} | {} | {} | {} | {} |\n",
        row.questions,
        n(Route::Program),
        n(Route::Text),
        n(Route::Unanswerable),
        n(Route::NotUnderstood),
        row.same_family
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::r2vq::{HeaderLine, Paragraph, Sentence, Token};

    /// A recipe of plain tokens (no layer at all) with one step.
    fn plain_recipe(step: &str) -> R2vqRecipe {
        let tokens: Vec<Token> = step.split_whitespace().map(Token::plain).collect();
        R2vqRecipe {
            id: "r-1".into(),
            header: vec![HeaderLine::Metadata { key: "url".into(), value: "x".into() }],
            paragraphs: vec![Paragraph {
                id: "r-1::step01".into(),
                sentences: vec![Sentence {
                    id: "r-1::step01::sent01".into(),
                    text: step.into(),
                    tokens,
                    blank_lines_after: 1,
                    ..Sentence::default()
                }],
            }],
        }
    }

    fn routed(recipe: &R2vqRecipe, q: &str, method: Method) -> Routed {
        let text: TextMethod<'_> = &crate::r2vq_text::answer_from_text;
        answer_one(recipe, &AnnotationGraph::of(recipe), &RecipeText::of(recipe), q, method, Fallback::text(text))
    }

    #[test]
    fn without_a_layer_the_text_answers_and_what_it_cannot_is_unanswerable() {
        let r = plain_recipe("Fry the onion in a pan for 5 minutes .");
        let a = routed(&r, "For how long do you fry the onion?", Method::Fallbacks);
        assert_eq!((a.route, a.answer.as_deref()), (Route::Text, Some("for 5 minutes")));
        // Programs alone cannot read a recipe without annotation.
        let p = routed(&r, "For how long do you fry the onion?", Method::Programs);
        assert_eq!((p.route, p.answer), (Route::Unanswerable, None));
        let none = routed(&r, "For how long do you bake the cake?", Method::Fallbacks);
        assert_eq!((none.route, none.answer), (Route::Unanswerable, None));
        let odd = routed(&r, "Is this a question the templates know?", Method::Fallbacks);
        assert_eq!(odd.route, Route::NotUnderstood);
    }

    #[test]
    fn route_table_counts_each_route_per_family() {
        let r = plain_recipe("Fry the onion in a pan for 5 minutes .");
        let doc = R2vqDocument { recipes: vec![r], final_newline: true };
        let ask = |family, question: &str| Asked {
            recipe: "r-1".into(),
            id: QuestionId { family, index: 0 },
            question: question.into(),
        };
        let asked = vec![
            ask(7, "For how long do you fry the onion?"),
            ask(18, "For how long do you bake the cake?"),
            ask(18, "Who knows?"),
            ask(7, "For how long do you fry the onion?"),
        ];
        let routed = answer_all(&doc, &asked, Method::Fallbacks, Fallback::text(&crate::r2vq_text::answer_from_text));
        let t = RouteTable::of(&asked, &routed);
        assert_eq!(t.families[&7].routes[&Route::Text], 2);
        assert_eq!(t.families[&18].routes[&Route::Unanswerable], 1);
        assert_eq!(t.families[&18].routes[&Route::NotUnderstood], 1);
        assert!(t.markdown().contains("| **all** | 4 | 0 | 2 | 1 | 1 | 0 |"), "{}", t.markdown());
    }
}
