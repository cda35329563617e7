//! The text-position heuristic: order items by the position cues their text carries — words authors use at the
//! start ("first", "preheat", "gather"), in the middle ("then", "next", "meanwhile") or at the end ("finally",
//! "serve", "enjoy") of a procedure — with no training and no features.
//!
//! Each item's score is the mean cue weight of the cues found in its title + text (early −1, middle +0.25, late
//! +1; 0 when no cue is found); items are sorted by score, ties in a seeded random order (so an instance without
//! cues gets a random order: the heuristic is at chance when the text has no cues). Cues are matched as whole
//! lower-cased words (English) or substrings (Chinese, which has no spaces). The lexicon is small and
//! written for recipes and how-to guides; it is the floor a model must beat to show it reads more than
//! discourse markers.

use rand::Rng;
use stepwise_core::rng::rng_for;
use stepwise_core::sequencing::SequencingInstance;

const EARLY: f32 = -1.0;
const MIDDLE: f32 = 0.25;
const LATE: f32 = 1.0;

/// English cues: single lower-case words, or short phrases matched on word boundaries.
const ENGLISH: &[(&str, f32)] = &[
    ("first", EARLY),
    ("firstly", EARLY),
    ("begin", EARLY),
    ("start", EARLY),
    ("initially", EARLY),
    ("preheat", EARLY),
    ("gather", EARLY),
    ("ingredients", EARLY),
    ("supplies", EARLY),
    ("materials", EARLY),
    ("you will need", EARLY),
    ("then", MIDDLE),
    ("next", MIDDLE),
    ("after", MIDDLE),
    ("afterwards", MIDDLE),
    ("meanwhile", MIDDLE),
    ("once", MIDDLE),
    ("now", MIDDLE),
    ("finally", LATE),
    ("lastly", LATE),
    ("last", LATE),
    ("finish", LATE),
    ("finished", LATE),
    ("serve", LATE),
    ("enjoy", LATE),
    ("done", LATE),
    ("garnish", LATE),
    ("store", LATE),
];

/// Chinese cues, matched as substrings.
const CHINESE: &[(&str, f32)] = &[
    ("首先", EARLY),
    ("准备", EARLY),
    ("先", EARLY),
    ("然后", MIDDLE),
    ("接着", MIDDLE),
    ("再", MIDDLE),
    ("之后", MIDDLE),
    ("最后", LATE),
    ("出锅", LATE),
    ("装盘", LATE),
    ("即可", LATE),
];

/// The cue score of a text (see module docs), or None when it has no cue.
pub fn cue_score(text: &str) -> Option<f32> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let mut sum = 0f32;
    let mut hits = 0usize;
    for &(cue, w) in ENGLISH {
        let cue_words: Vec<&str> = cue.split(' ').collect();
        let n = words.windows(cue_words.len()).filter(|win| *win == cue_words.as_slice()).count();
        sum += w * n as f32;
        hits += n;
    }
    for &(cue, w) in CHINESE {
        let n = lower.matches(cue).count();
        // "先" inside "首先" is the same cue: count the longer one only.
        let n = if cue == "先" { n.saturating_sub(lower.matches("首先").count()) } else { n };
        sum += w * n as f32;
        hits += n;
    }
    (hits > 0).then(|| sum / hits as f32)
}

/// The predicted order: items by cue score (no cue = 0), ties in a random order seeded by the instance id.
pub fn text_position_order(inst: &SequencingInstance, seed: u64) -> Vec<usize> {
    let mut rng = rng_for(seed, &format!("text-position/{}", inst.id));
    let mut keyed: Vec<(f32, u64, usize)> = inst
        .items
        .iter()
        .enumerate()
        .map(|(k, item)| {
            let text =
                [item.title.as_deref(), item.text.as_deref()].into_iter().flatten().collect::<Vec<_>>().join("\n");
            (cue_score(&text).unwrap_or(0.0), rng.random::<u64>(), k)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    keyed.into_iter().map(|(_, _, k)| k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::sequencing::SequencingItem;

    #[test]
    fn cue_scores() {
        assert_eq!(cue_score("First, preheat the oven."), Some(-1.0));
        assert_eq!(cue_score("Finally serve warm."), Some(1.0));
        assert_eq!(cue_score("Mix the flour."), None);
        assert_eq!(cue_score("Gather what you will need"), Some(-1.0));
        assert_eq!(cue_score("首先把土豆切片"), Some(-1.0));
        assert_eq!(cue_score("最后出锅"), Some(1.0));
        // "startled" is not "start".
        assert_eq!(cue_score("the cat startled"), None);
    }

    #[test]
    fn orders_by_cues() {
        let item = |t: &str| SequencingItem { step: 0, title: None, text: Some(t.into()), images: vec![] };
        let inst = SequencingInstance {
            id: "x".into(),
            procedure: "p".into(),
            split: "test".into(),
            modality: "text".into(),
            items: vec![item("Finally, serve."), item("First, gather the flour."), item("Then knead it.")],
            references: vec![vec![1, 2, 0]],
            constraints: None,
        };
        assert_eq!(text_position_order(&inst, 0), vec![1, 2, 0]);
    }
}
