//! Synthetic procedure JSONL for the ingest benchmark: recipe-like text (Zipf-distributed words) with the artefacts
//! the cleaner removes (HTML tags and entities, numbers fused with units, and words fused in pairs, each pair rare
//! as in scraped text), seeded and identical for any thread count.

use std::io::Write;
use std::path::Path;

use rand::Rng;
use rayon::prelude::*;
use stepwise_core::json::write_canonical;
use stepwise_core::output::write_file_atomic;
use stepwise_core::rng::rng_for;
use stepwise_core::{Procedure, Result, Step};

const WORDS: &[&str] = &[
    "the",
    "and",
    "a",
    "to",
    "of",
    "in",
    "with",
    "for",
    "it",
    "until",
    "is",
    "on",
    "your",
    "into",
    "add",
    "mix",
    "stir",
    "bowl",
    "flour",
    "sugar",
    "butter",
    "salt",
    "pepper",
    "oven",
    "heat",
    "minutes",
    "water",
    "eggs",
    "cook",
    "pan",
    "bake",
    "dough",
    "then",
    "over",
    "cream",
    "milk",
    "chocolate",
    "cheese",
    "sauce",
    "place",
    "cut",
    "pour",
    "medium",
    "large",
    "small",
    "mixture",
    "together",
    "top",
    "well",
    "about",
    "from",
    "cake",
    "make",
    "chicken",
    "onion",
    "garlic",
    "oil",
    "remove",
    "set",
    "aside",
    "cover",
    "simmer",
    "boil",
    "slice",
    "chop",
    "whisk",
    "fold",
    "knead",
    "rest",
    "serve",
    "warm",
    "hot",
    "cold",
    "fresh",
    "sweet",
    "golden",
    "brown",
    "crispy",
    "smooth",
    "thick",
    "thin",
    "spoon",
    "cup",
    "sheet",
    "tray",
    "skillet",
    "pot",
    "lid",
    "knife",
    "board",
    "fridge",
    "freezer",
    "hour",
    "night",
    "bread",
    "rice",
    "pasta",
    "tomato",
    "lemon",
    "vanilla",
    "cinnamon",
    "honey",
    "yeast",
    "bacon",
    "beef",
    "pork",
    "potato",
    "carrot",
    "celery",
    "parsley",
    "basil",
    "oregano",
    "thyme",
    "ginger",
    "juice",
    "zest",
    "peel",
    "seeds",
    "nuts",
    "almonds",
    "raisins",
    "apple",
    "banana",
    "berries",
    "strawberries",
    "cookies",
    "muffin",
    "pie",
    "crust",
    "filling",
    "frosting",
    "glaze",
    "syrup",
    "batter",
    "layer",
    "edges",
    "center",
    "side",
    "each",
    "all",
    "some",
    "more",
    "less",
    "half",
    "whole",
    "gently",
    "carefully",
    "quickly",
    "slowly",
    "evenly",
    "completely",
    "lightly",
    "finally",
    "next",
    "first",
    "once",
    "when",
    "while",
    "before",
    "after",
    "again",
    "just",
    "enough",
    "little",
    "bit",
    "few",
    "you",
    "will",
    "can",
    "should",
    "want",
    "need",
    "get",
    "let",
    "keep",
    "turn",
    "use",
    "put",
    "take",
    "leave",
    "roll",
    "shape",
];

const ARTEFACTS: &[&str] = &["350F", "2cups", "1/2tsp", "10-15min", "&amp;", "<b>", "</b>"];

/// Sizes of the synthetic corpus.
#[derive(Debug, Clone, Copy)]
pub struct SynthSpec {
    pub procedures: usize,
    pub steps: usize,
    pub tokens_per_step: usize,
    pub seed: u64,
}

/// One synthetic procedure (its own seeded stream: `bench/<i>`).
pub fn synthetic_procedure(i: usize, spec: &SynthSpec, cumulative: &[f64]) -> Procedure {
    let mut rng = rng_for(spec.seed, &format!("bench/{i}"));
    let total = *cumulative.last().expect("non-empty word list");
    let mut steps = Vec::with_capacity(spec.steps);
    for _ in 0..spec.steps {
        let mut text = String::with_capacity(spec.tokens_per_step * 7);
        let mut sentence_start = true;
        for k in 0..spec.tokens_per_step {
            if k > 0 {
                text.push(' ');
            }
            if rng.random_bool(0.01) {
                let a = ARTEFACTS[rng.random_range(0..ARTEFACTS.len())];
                text.push_str(a);
                if matches!(a, "<b>" | "</b>" | "&amp;") {
                    // Tags and entities are not tokens: add a word so the step keeps its token count.
                    text.push_str(if a == "&amp;" { " well" } else { "well" });
                }
            } else {
                let first = draw_word(&mut rng, cumulative, total);
                let fused;
                let w = if first.len() >= 3 && rng.random_bool(0.004) {
                    fused = format!("{first}{}", draw_word(&mut rng, cumulative, total));
                    fused.as_str()
                } else {
                    first
                };
                if sentence_start {
                    let mut cs = w.chars();
                    if let Some(c) = cs.next() {
                        text.extend(c.to_uppercase());
                        text.push_str(cs.as_str());
                    }
                } else {
                    text.push_str(w);
                }
            }
            sentence_start = rng.random_bool(0.08);
            if sentence_start {
                text.push('.');
            }
        }
        if !text.ends_with('.') {
            text.push('.');
        }
        steps.push(Step { text: Some(text), ..Default::default() });
    }
    Procedure {
        id: format!("synth/{i:07}"),
        title: Some(format!("Synthetic recipe {i}")),
        source: Some(format!("stepwise-bench@seed={}", spec.seed)),
        license: Some("CC0-1.0".into()),
        lang: Some("en".into()),
        steps,
        ..Default::default()
    }
}

fn draw_word(rng: &mut impl Rng, cumulative: &[f64], total: f64) -> &'static str {
    let u = rng.random::<f64>() * total;
    WORDS[cumulative.partition_point(|&c| c < u).min(WORDS.len() - 1)]
}

/// Zipf-like cumulative weights of [`WORDS`] (rank r has weight 1 / (r + 1)).
fn cumulative_weights() -> Vec<f64> {
    let mut acc = 0.0;
    WORDS
        .iter()
        .enumerate()
        .map(|(r, _)| {
            acc += 1.0 / (r as f64 + 1.0);
            acc
        })
        .collect()
}

/// Write the synthetic corpus as procedure JSONL (generated in parallel, written in order). Returns the bytes.
pub fn write_synthetic_jsonl(path: &Path, spec: &SynthSpec) -> Result<u64> {
    let cumulative = cumulative_weights();
    let mut written = 0u64;
    write_file_atomic(path, |w| {
        for start in (0..spec.procedures).step_by(4096) {
            let end = (start + 4096).min(spec.procedures);
            let block: Vec<Vec<u8>> = (start..end)
                .into_par_iter()
                .map(|i| {
                    let mut line = Vec::with_capacity(4096);
                    write_canonical(&mut line, &synthetic_procedure(i, spec, &cumulative).to_json())
                        .expect("writing to a Vec cannot fail");
                    line.push(b'\n');
                    line
                })
                .collect();
            for line in block {
                written += line.len() as u64;
                w.write_all(&line)?;
            }
        }
        Ok(())
    })?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::tokenize::count_tokens;

    #[test]
    fn deterministic_and_sized() {
        let spec = SynthSpec { procedures: 3, steps: 6, tokens_per_step: 80, seed: 7 };
        let c = cumulative_weights();
        let a = synthetic_procedure(1, &spec, &c);
        assert_eq!(a, synthetic_procedure(1, &spec, &c));
        assert_ne!(a, synthetic_procedure(2, &spec, &c));
        assert_eq!(a.steps.len(), 6);
        for s in &a.steps {
            let n = count_tokens(s.text.as_deref().unwrap());
            assert!((80..=90).contains(&n), "{n}");
        }
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("s.jsonl");
        let bytes = write_synthetic_jsonl(&f, &spec).unwrap();
        assert_eq!(bytes, std::fs::metadata(&f).unwrap().len());
        assert_eq!(stepwise_core::corpus::read_procedures_jsonl(&f).unwrap().len(), 3);
    }
}
