//! A text-only baseline for R2VQ questions: it reads the recipe's sentences and nothing of the annotation. The
//! question is parsed into its template (`stepwise_tasks::r2vq::questions`); the sentence that shares the most
//! content words with the question's arguments is retrieved; a rule per template reads the answer off that
//! sentence (the phrase after a preposition, the object after the verb, a count of sentences). When no sentence
//! shares the question's words, the answer is "no answer" (the distractors' answer).
//!
//! Next to the programs on gold annotation, it shows how much of each family the text gives away and how much
//! needs the annotation (hidden arguments, coreference, results that are never named).

use std::collections::BTreeSet;

use stepwise_core::r2vq::R2vqRecipe;
use stepwise_tasks::r2vq::programs::tool_answer;
use stepwise_tasks::r2vq::questions::{ParsedQuestion, Template, parse_question};

/// What the baseline reads of a recipe: its step sentences and the 1-based step of each.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecipeText {
    pub sentences: Vec<String>,
    pub step_of: Vec<u32>,
}

impl RecipeText {
    /// The sentences of a recipe's steps (the text only: no annotation column is read).
    pub fn of(recipe: &R2vqRecipe) -> RecipeText {
        let (sentences, step_of) = recipe
            .steps()
            .flat_map(|p| {
                p.sentences.iter().filter(|s| !s.continues).map(|s| (s.text.clone(), p.step_number().unwrap_or(0)))
            })
            .unzip();
        RecipeText { sentences, step_of }
    }
}

/// Words that carry no content for retrieval.
const STOPWORDS: &[&str] = &[
    "the", "a", "an", "of", "and", "or", "to", "in", "into", "on", "onto", "with", "for", "from", "at", "by", "it",
    "them", "some", "all", "your", "you", "is", "be", "are", "was", "until", "over", "up", "do", "should", "how",
    "what", "where", "why", "which", "comes", "first", "many", "times", "used", "before", "process",
];

/// A crude stem that makes inflections meet: suffixes -ing/-ed/-es/-s and a final -e dropped, a doubled final
/// consonant undone ("cutting" and "cut", "sauting" and "saute", "served" and "serve").
pub(crate) fn stem(w: &str) -> String {
    let w = w.to_lowercase();
    let mut s = w.trim_end_matches("ing").trim_end_matches("ed").trim_end_matches("es").trim_end_matches('s');
    s = s.trim_end_matches('e');
    let b = s.as_bytes();
    // ASCII letters only: slicing one byte off a multi-byte character would cut it.
    if b.len() >= 3
        && b[b.len() - 1] == b[b.len() - 2]
        && b[b.len() - 1].is_ascii_alphabetic()
        && !b"aeiou".contains(&b[b.len() - 1])
    {
        s = &s[..s.len() - 1];
    }
    if s.len() < 2 { w } else { s.to_string() }
}

pub(crate) fn content(s: &str) -> BTreeSet<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !STOPWORDS.contains(&w.to_lowercase().as_str()))
        .map(stem)
        .filter(|w| !w.is_empty())
        .collect()
}

/// The sentence sharing the most content words with `query` (the earliest on a tie), when it shares at least
/// `min_share` of them.
fn retrieve(sentences: &[String], query: &str, min_share: f64) -> Option<usize> {
    let q = content(query);
    if q.is_empty() {
        return None;
    }
    let mut best: Option<(usize, usize)> = None;
    for (i, s) in sentences.iter().enumerate() {
        let overlap = content(s).intersection(&q).count();
        if overlap > 0 && best.is_none_or(|(_, b)| overlap > b) {
            best = Some((i, overlap));
        }
    }
    best.filter(|(_, n)| *n as f64 >= min_share * q.len() as f64).map(|(i, _)| i)
}

/// The phrase after the first of `preps` in `sentence`: up to punctuation, or a conjunction or preposition after its
/// first word; the preposition included when `keep_prep`.
fn phrase_after(sentence: &str, preps: &[&str], keep_prep: bool) -> Option<String> {
    let words: Vec<&str> = sentence.split_whitespace().collect();
    let i =
        words.iter().position(|w| preps.contains(&w.to_lowercase().trim_matches(|c: char| !c.is_alphanumeric())))?;
    let mut out = Vec::new();
    if keep_prep {
        out.push(words[i].to_lowercase());
    }
    const ENDS: &[&str] = &["and", "for", "with", "until", "over", "in", "into", "on", "to", "then", "while"];
    for w in &words[i + 1..] {
        let clean = w.trim_end_matches([',', '.', ';', ':', '!']);
        if clean.is_empty() || (out.len() > usize::from(keep_prep) && ENDS.contains(&w.to_lowercase().as_str())) {
            break;
        }
        out.push(clean.to_string());
        if clean.len() != w.len() {
            break;
        }
    }
    (out.len() > usize::from(keep_prep)).then(|| out.join(" "))
}

/// Strip a leading article.
fn bare(s: &str) -> String {
    let lower = s.to_lowercase();
    for a in ["the ", "a ", "an "] {
        if let Some(rest) = lower.strip_prefix(a) {
            return rest.to_string();
        }
    }
    lower
}

/// Answer `question` from the recipe's text alone; `None` is "no answer".
pub fn answer_from_text(text: &RecipeText, question: &str) -> Option<String> {
    let (sentences, step_of) = (text.sentences.as_slice(), text.step_of.as_slice());
    let ParsedQuestion { template, args } = parse_question(question)?;
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let find = |query: &str| retrieve(sentences, query, 0.6);
    match template {
        Template::CountActions | Template::CountUses => {
            let q = content(arg(0));
            let n = sentences.iter().filter(|s| !q.is_empty() && q.is_subset(&content(s))).count();
            (n > 0).then(|| n.to_string())
        }
        Template::CountProps => find(arg(0)).map(|_| "1".to_string()),
        Template::WhatShouldBe => {
            let s = &sentences[find(arg(0))?];
            let verb = stem(arg(0).split_whitespace().next()?);
            let words: Vec<&str> = s.split_whitespace().collect();
            let at = words.iter().position(|w| stem(w.trim_matches(|c: char| !c.is_alphanumeric())) == verb)?;
            let object: Vec<&str> = words[at + 1..]
                .iter()
                .take_while(|w| {
                    !["in", "into", "on", "with", "to", "for", "until"].contains(&w.to_lowercase().as_str())
                })
                .map(|w| w.trim_end_matches([',', '.', ';']))
                .take(6)
                .collect();
            (!object.is_empty()).then(|| format!("the {}", bare(&object.join(" "))))
        }
        Template::WhereShould => {
            phrase_after(&sentences[find(arg(0))?], &["in", "into", "on", "onto"], false).map(|p| bare(&p))
        }
        Template::HowDoYou => {
            let s = &sentences[find(arg(0))?];
            phrase_after(s, &["with", "using"], false).map(|p| tool_answer(&bare(&p)))
        }
        Template::HowDidYouGet | Template::WhatsIn => {
            // The sentence before the first one naming the result holds what made it.
            let named = find(arg(0))?;
            let s = &sentences[named.checked_sub(1)?];
            let words: Vec<&str> =
                s.split_whitespace().skip(1).take(8).map(|w| w.trim_end_matches([',', '.', ';'])).collect();
            let object = format!("the {}", bare(&words.join(" ")));
            Some(if template == Template::WhatsIn {
                object
            } else {
                let verb = s.split_whitespace().next()?.to_lowercase();
                format!("by {}ing {object}", verb.trim_end_matches('e'))
            })
        }
        Template::WhichFirst => {
            let (a, b) = (find(arg(0))?, find(arg(1))?);
            if a == b {
                return None;
            }
            Some(if a < b { "the first event" } else { "the second event" }.to_string())
        }
        Template::ToWhatExtent => phrase_after(&sentences[find(arg(0))?], &["until", "into"], true),
        Template::ForHowLong => phrase_after(&sentences[find(arg(0))?], &["for"], true),
        Template::WhereDoYou => phrase_after(&sentences[find(arg(0))?], &["in", "into", "on", "onto", "to"], true),
        Template::ByHowMuch => phrase_after(&sentences[find(arg(0))?], &["by", "at"], true),
        Template::WhyDoYou => phrase_after(&sentences[find(arg(0))?], &["to", "so"], true),
        Template::WhatWith | Template::WhatDoYou => {
            phrase_after(&sentences[find(arg(0))?], &["with", "into", "to"], true)
        }
        Template::FromWhere => phrase_after(&sentences[find(arg(0))?], &["from"], true),
        // What follows the ingredient's first sentence names what it becomes; no place is read off the text.
        Template::WhatBecome => {
            let at = find(arg(0))?;
            let next = sentences.get(at + 1)?;
            let words: Vec<&str> =
                next.split_whitespace().skip(1).take(3).map(|w| w.trim_end_matches([',', '.', ';'])).collect();
            (!words.is_empty()).then(|| format!("the {}", bare(&words.join(" "))))
        }
        Template::WhereAfterStep => {
            let step: u32 = arg(1).parse().ok()?;
            let upto = (0..sentences.len()).take_while(|&i| step_of.get(i).is_some_and(|&s| s <= step)).count();
            (0..upto)
                .rev()
                .find_map(|i| phrase_after(&sentences[i], &["in", "into", "on", "onto"], false))
                .map(|p| bare(&p))
        }
        // The text does not say how things are held.
        Template::Orientation => None,
        Template::WhatIsUsedTo => {
            let s = &sentences[find(arg(0))?];
            phrase_after(s, &["with", "using"], false).map(|p| bare(&p))
        }
        // Yes/no from the text alone: more than one sentence names the prop; the entity named in both steps.
        Template::AreThereMore => {
            let q = content(arg(0));
            let n = sentences.iter().filter(|s| !q.is_empty() && q.is_subset(&content(s))).count();
            (n > 0).then(|| (n > 1).to_string())
        }
        Template::AreIdentical => find(arg(0)).map(|_| "true".to_string()),
        Template::WhereWasBefore => {
            // The last place named before the sentence of the event.
            let at = find(&format!("{} {}", arg(0), arg(1)))?;
            (0..at)
                .rev()
                .find_map(|i| phrase_after(&sentences[i], &["in", "into", "on", "onto"], false))
                .map(|p| bare(&p))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any sentences and any question of any template (or none): an answer or none, never a panic.
        #[test]
        fn any_text_and_question_never_panic(
            sentences in prop::collection::vec("\\PC{0,40}|[a-z ,.]{0,40}", 0..5),
            head in prop_oneof![
                Just("How many actions does it take to process the "), Just("What should be "),
                Just("Where should you "), Just("How do you "), Just("How did you get the "), Just("What's in the "),
                Just("To what extent do you "), Just("Where was the "), Just("What is used to "), Just(""),
            ],
            tail in "\\PC{0,30}|[a-z ]{0,30}",
        ) {
            let step_of: Vec<u32> = (1..=sentences.len() as u32).collect();
            let half = RecipeText { sentences: sentences.clone(), step_of: step_of[..step_of.len() / 2].to_vec() };
            let _ = answer_from_text(&RecipeText { sentences, step_of }, &format!("{head}{tail}?"));
            let _ = answer_from_text(&half, &format!("{tail} and {head}, which comes first?"));
        }
    }

    #[test]
    fn answers_come_from_the_retrieved_sentence_and_unrelated_questions_get_none() {
        let s: Vec<String> =
            ["Cut the onion with a knife.", "Fry the onion in a pan for 5 minutes.", "Serve with rice."]
                .map(String::from)
                .to_vec();
        let text = RecipeText { sentences: s, step_of: vec![1, 2, 3] };
        let a = |q: &str| answer_from_text(&text, q);
        assert_eq!(a("How do you cut the onion?").as_deref(), Some("by using a knife"));
        assert_eq!(a("For how long do you fry the onion?").as_deref(), Some("for 5 minutes"));
        assert_eq!(a("Where should you fry the onion?").as_deref(), Some("pan"));
        assert_eq!(a("How many actions does it take to process the onion?").as_deref(), Some("2"));
        assert_eq!(
            a("Frying the onion and cutting the onion, which comes first?").as_deref(),
            Some("the second event")
        );
        assert_eq!(a("What do you serve with?").as_deref(), Some("with rice"));
        assert_eq!(a("Where is the onion after step 2?").as_deref(), Some("pan"));
        assert_eq!(a("Where is the onion after step 1?"), None, "step 1 names no place");
        assert_eq!(a("Where should you bake the cake?"), None);
        assert_eq!(a("not a question"), None);
    }
}
