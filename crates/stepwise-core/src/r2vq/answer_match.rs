//! Answer matching as the SemEval-2022 Task 9 scorer does it (SQuAD v1.1's `normalize_answer`, exact match and
//! token F1), with "N/A" read as no answer. Scoring (`stepwise_score::r2vq`) and the learned text method (which
//! picks its training targets by F1) share it.

use std::collections::HashMap;

/// SQuAD's normalisation: lower case, ASCII punctuation dropped, a/an/the replaced by a space (`\b(a|an|the)\b`),
/// whitespace collapsed.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower.chars().filter(|c| !c.is_ascii_punctuation()).collect();
    // `\b(a|an|the)\b` → " ": an article is a whole run of word characters (Python's `\w`: alphanumerics and _).
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut no_articles = String::with_capacity(no_punct.len());
    let mut rest = no_punct.as_str();
    while let Some(start) = rest.find(is_word) {
        no_articles.push_str(&rest[..start]);
        let run = &rest[start..];
        let end = run.find(|c: char| !is_word(c)).unwrap_or(run.len());
        let word = &run[..end];
        no_articles.push_str(if matches!(word, "a" | "an" | "the") { " " } else { word });
        rest = &run[end..];
    }
    no_articles.push_str(rest);
    no_articles.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// "N/A" (any case, surrounding whitespace) stands for no answer.
pub fn is_no_answer(s: &str) -> bool {
    s.trim().eq_ignore_ascii_case("n/a")
}

/// 1 when the normalised strings are equal, else 0; `None` (no answer) equals only `None`.
pub fn exact_match(prediction: Option<&str>, gold: Option<&str>) -> f64 {
    match (answer_of(prediction), answer_of(gold)) {
        (Some(p), Some(g)) => f64::from(u8::from(normalize_answer(p) == normalize_answer(g))),
        (p, g) => f64::from(u8::from(p.is_none() && g.is_none())),
    }
}

/// Token F1 of the normalised strings (0 when nothing is shared); `None` scores 1 against `None` only.
pub fn token_f1(prediction: Option<&str>, gold: Option<&str>) -> f64 {
    let (p, g) = match (answer_of(prediction), answer_of(gold)) {
        (Some(p), Some(g)) => (normalize_answer(p), normalize_answer(g)),
        (p, g) => return f64::from(u8::from(p.is_none() && g.is_none())),
    };
    let (p, g): (Vec<&str>, Vec<&str>) = (p.split_whitespace().collect(), g.split_whitespace().collect());
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for w in &g {
        *counts.entry(w).or_default() += 1;
    }
    let mut common = 0;
    for w in &p {
        if let Some(c) = counts.get_mut(w).filter(|c| **c > 0) {
            *c -= 1;
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / p.len() as f64;
    let recall = common as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// An answer with "N/A" read as no answer.
fn answer_of(a: Option<&str>) -> Option<&str> {
    a.filter(|a| !is_no_answer(a))
}

/// The best score of a prediction over a question's gold answers (the official scorer's rule for several answers).
pub fn best_over(score: fn(Option<&str>, Option<&str>) -> f64, prediction: Option<&str>, gold: &[String]) -> f64 {
    gold.iter().map(|g| score(prediction, Some(g))).fold(0.0, f64::max)
}
