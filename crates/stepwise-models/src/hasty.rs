//! The Hasty Student (RecipeQA §4.2): answers without reading the context, from the similarity of the choices
//! to the question alone — a measure of how much a question set can be answered by shortcut.
//!
//! - cloze (textual and visual): the choice most similar to the question items (mean cosine similarity to the
//!   non-placeholder items);
//! - coherence: the item least similar to the others (mean cosine similarity to the other items);
//! - ordering: the ordering whose consecutive items are closest (smallest mean cosine distance).
//!
//! Ties go to the lowest index, so the baseline is deterministic.

use stepwise_core::{Question, Task};

use crate::item_features::cosine;
use crate::question_vectors::{ItemResolver, QuestionVectors, question_vectors};

/// The Hasty Student's choice for question `q` of `task`, its item vectors found by `resolver`, or why its
/// items have no vectors.
pub fn choose(q: &Question, task: Task, resolver: &dyn ItemResolver) -> Result<usize, String> {
    Ok(match question_vectors(q, task, resolver)? {
        QuestionVectors::Cloze { question, choices } => cloze(&question, &choices),
        QuestionVectors::Coherence { items } => coherence(&items),
        QuestionVectors::Ordering { choices } => ordering(&choices),
    })
}

/// The cloze choice with the highest mean cosine similarity to the question items.
pub fn cloze(question: &[&[f32]], choices: &[&[f32]]) -> usize {
    argmax(choices.iter().map(|c| mean(question.iter().map(|q| cosine(q, c)))))
}

/// The coherence item with the lowest mean cosine similarity to the other items.
pub fn coherence(items: &[&[f32]]) -> usize {
    argmax(
        items
            .iter()
            .enumerate()
            .map(|(i, x)| -mean(items.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, y)| cosine(x, y)))),
    )
}

/// The ordering (each a sequence of item vectors) with the smallest mean cosine distance between consecutive
/// items.
pub fn ordering(choices: &[Vec<&[f32]>]) -> usize {
    argmax(choices.iter().map(|seq| -mean(seq.windows(2).map(|w| 1.0 - cosine(w[0], w[1])))))
}

fn mean(xs: impl Iterator<Item = f32>) -> f32 {
    let (s, n) = xs.fold((0.0f64, 0usize), |(s, n), x| (s + x as f64, n + 1));
    if n == 0 { 0.0 } else { (s / n as f64) as f32 }
}

/// Index of the largest score; the first one on ties; NaN scores never win.
fn argmax(scores: impl Iterator<Item = f32>) -> usize {
    let mut best: Option<(usize, f32)> = None;
    for (i, s) in scores.enumerate() {
        if s.is_nan() {
            continue;
        }
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    best.map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloze_picks_the_choice_closest_to_the_question() {
        let q: Vec<&[f32]> = vec![&[1.0, 0.0], &[0.9, 0.1]];
        let choices: Vec<&[f32]> = vec![&[0.0, 1.0], &[1.0, 0.05], &[-1.0, 0.0]];
        assert_eq!(cloze(&q, &choices), 1);
    }

    #[test]
    fn ties_go_to_the_lowest_index() {
        let q: Vec<&[f32]> = vec![&[1.0, 0.0]];
        let choices: Vec<&[f32]> = vec![&[0.0, 1.0], &[2.0, 0.0], &[1.0, 0.0]];
        assert_eq!(cloze(&q, &choices), 1);
        let items: Vec<&[f32]> = vec![&[1.0, 0.0], &[1.0, 0.0], &[1.0, 0.0]];
        assert_eq!(coherence(&items), 0);
    }

    #[test]
    fn coherence_picks_the_odd_one() {
        let items: Vec<&[f32]> = vec![&[1.0, 0.1], &[1.0, 0.0], &[0.0, 1.0], &[0.9, 0.2]];
        assert_eq!(coherence(&items), 2);
    }

    #[test]
    fn ordering_picks_the_smoothest_sequence() {
        let a: &[f32] = &[1.0, 0.0];
        let b: &[f32] = &[0.7, 0.7];
        let c: &[f32] = &[0.0, 1.0];
        let choices = vec![vec![a, c, b], vec![a, b, c], vec![b, a, c]];
        assert_eq!(ordering(&choices), 1);
    }
}
