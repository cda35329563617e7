//! Word lists: the reference vocabulary of in-vocabulary rates (`--vocab`, e.g. GloVe's) and the user dictionary
//! of the segmenter (`--dictionary`).
//!
//! A file holds one entry per line; the entry is the line's first whitespace-separated field, so a plain word list,
//! a `word count` list and a GloVe/word2vec text vector file all load. Words are lowercased (lookups are by the
//! lowercase token). Line order is kept as a frequency rank (GloVe's vocabulary is sorted by frequency), and a
//! second field that is the last one and an integer is read as the word's count.

use std::path::{Path, PathBuf};

use serde::Serialize;
use stepwise_core::{Error, Result};

use crate::counts::FastMap;
use crate::text::tokenize::{for_each_token, lowercase};

#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    /// Lowercase word → 0-based rank (first occurrence in the file).
    ranks: FastMap<String, u32>,
    /// Counts by rank, when every entry had one.
    counts: Option<Vec<u64>>,
    pub source: Option<PathBuf>,
}

impl Vocabulary {
    /// Load a word list (see the module docs). An empty list is an error.
    pub fn load(path: &Path) -> Result<Self> {
        let mut words = Vec::new();
        let mut counts: Option<Vec<u64>> = Some(Vec::new());
        let hint = "one word per line, optionally followed by a count or a vector; is this a word list?";
        stepwise_core::json::for_each_line_within(path, stepwise_core::json::MAX_LINE, hint, |_, line| {
            let mut fields = line.split_whitespace();
            let Some(word) = fields.next() else { return Ok(()) };
            let second = fields.next();
            let count = match (second, fields.next()) {
                (Some(c), None) => c.parse::<u64>().ok(),
                _ => None,
            };
            match (count, counts.as_mut()) {
                (Some(c), Some(v)) => v.push(c),
                _ => counts = None,
            }
            words.push(word.to_string());
            Ok(())
        })?;
        if words.is_empty() {
            return Err(Error::Empty { path: path.to_path_buf(), what: "no words".into() });
        }
        let mut v = Self::from_words(words.iter().map(String::as_str));
        if let Some(c) = counts {
            // Counts follow file lines; re-index them by rank (duplicates after lowercasing keep the first).
            let mut by_rank = vec![0u64; v.ranks.len()];
            let mut buf = String::new();
            for (w, c) in words.iter().zip(c) {
                if let Some(&r) = v.ranks.get(lowercase(w, &mut buf)) {
                    by_rank[r as usize] += c;
                }
            }
            v.counts = Some(by_rank);
        }
        v.source = Some(path.to_path_buf());
        Ok(v)
    }

    /// A vocabulary from words in rank order.
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Self {
        let mut ranks = FastMap::default();
        let mut buf = String::new();
        for w in words {
            let lw = lowercase(w, &mut buf);
            if !ranks.contains_key(lw) {
                let r = ranks.len() as u32;
                ranks.insert(lw.to_string(), r);
            }
        }
        Vocabulary { ranks, counts: None, source: None }
    }

    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// True when the lowercase `word` is in the list.
    pub fn contains(&self, word: &str) -> bool {
        self.ranks.contains_key(word)
    }

    /// 0-based frequency rank of a lowercase word.
    pub fn rank(&self, word: &str) -> Option<u32> {
        self.ranks.get(word).copied()
    }

    /// The word's count, when the file gave counts.
    pub fn count(&self, word: &str) -> Option<u64> {
        let r = self.rank(word)?;
        self.counts.as_ref().map(|c| c[r as usize])
    }

    pub fn has_counts(&self) -> bool {
        self.counts.is_some()
    }

    pub fn total_count(&self) -> u64 {
        self.counts.as_ref().map_or(0, |c| c.iter().sum())
    }

    /// The words and ranks (unordered).
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.ranks.iter().map(|(w, r)| (w.as_str(), *r))
    }
}

/// Token-level in-vocabulary counts of some text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct VocabRate {
    /// All tokens (words, numbers, CJK characters).
    pub tokens: u64,
    pub in_vocab: u64,
    /// Tokens with at least one letter.
    pub word_tokens: u64,
    pub word_in_vocab: u64,
    /// Whitespace-separated chunks with punctuation trimmed from both ends ("Fork." → "fork", but "mix.Next",
    /// "2cups" and "cupBowl" stay whole): the cruder tokenization behind rates such as Meta-RecipeQA's, where fused
    /// tokens show up as out of vocabulary.
    pub ws_tokens: u64,
    pub ws_in_vocab: u64,
    /// Distinct lowercase tokens (filled by [`VocabCounter::finish`]).
    pub types: u64,
    pub types_in_vocab: u64,
}

impl VocabRate {
    pub fn add_text(&mut self, text: &str, vocab: &Vocabulary, buf: &mut String) {
        for_each_token(text, |t| {
            let known = vocab.contains(lowercase(t.text, buf));
            let word = t.has_letter();
            self.tokens += 1;
            self.in_vocab += u64::from(known);
            self.word_tokens += u64::from(word);
            self.word_in_vocab += u64::from(word && known);
        });
        for chunk in text.split_whitespace() {
            let w = chunk.trim_matches(|c: char| !c.is_alphanumeric());
            if !w.is_empty() {
                self.ws_tokens += 1;
                self.ws_in_vocab += u64::from(vocab.contains(lowercase(w, buf)));
            }
        }
    }

    /// Add the step titles and texts of a procedure: the text the cleaning report and statistics measure.
    pub fn add_steps(&mut self, p: &stepwise_core::Procedure, vocab: &Vocabulary, buf: &mut String) {
        for s in &p.steps {
            for t in [&s.title, &s.text].into_iter().flatten() {
                self.add_text(t, vocab, buf);
            }
        }
    }

    pub fn merge(&mut self, o: &VocabRate) {
        self.tokens += o.tokens;
        self.in_vocab += o.in_vocab;
        self.word_tokens += o.word_tokens;
        self.word_in_vocab += o.word_in_vocab;
        self.ws_tokens += o.ws_tokens;
        self.ws_in_vocab += o.ws_in_vocab;
    }

    /// The share of tokens in the vocabulary (0 for no tokens).
    pub fn rate(&self) -> f64 {
        ratio(self.in_vocab, self.tokens)
    }

    pub fn word_rate(&self) -> f64 {
        ratio(self.word_in_vocab, self.word_tokens)
    }

    pub fn ws_rate(&self) -> f64 {
        ratio(self.ws_in_vocab, self.ws_tokens)
    }

    /// The share of distinct tokens in the vocabulary (type level, where rare junk weighs as much as "the").
    pub fn type_rate(&self) -> f64 {
        ratio(self.types_in_vocab, self.types)
    }
}

/// Token- and type-level in-vocabulary counts of step texts, mergeable across parallel chunks.
#[derive(Debug, Clone, Default)]
pub struct VocabCounter {
    rate: VocabRate,
    /// Distinct lowercase tokens → in the vocabulary.
    types: FastMap<String, bool>,
}

impl VocabCounter {
    /// Add the step titles and texts of a procedure.
    pub fn add_steps(&mut self, p: &stepwise_core::Procedure, vocab: &Vocabulary, buf: &mut String) {
        self.rate.add_steps(p, vocab, buf);
        for s in &p.steps {
            for t in [&s.title, &s.text].into_iter().flatten() {
                for_each_token(t, |tok| {
                    let w = lowercase(tok.text, buf);
                    if !self.types.contains_key(w) {
                        let known = vocab.contains(w);
                        self.types.insert(w.to_string(), known);
                    }
                });
            }
        }
    }

    pub fn merge(&mut self, mut other: VocabCounter) {
        self.rate.merge(&other.rate);
        if self.types.len() < other.types.len() {
            std::mem::swap(&mut self.types, &mut other.types);
        }
        self.types.extend(other.types);
    }

    pub fn finish(self) -> VocabRate {
        VocabRate {
            types: self.types.len() as u64,
            types_in_vocab: self.types.values().filter(|k| **k).count() as u64,
            ..self.rate
        }
    }
}

pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_plain_counted_and_vector_files() {
        let td = tempfile::tempdir().unwrap();
        let plain = td.path().join("plain.txt");
        std::fs::write(&plain, "the\nOf\n\nthe\n").unwrap();
        let v = Vocabulary::load(&plain).unwrap();
        assert_eq!((v.len(), v.rank("of"), v.has_counts()), (2, Some(1), false));

        let counted = td.path().join("counted.txt");
        std::fs::write(&counted, "the 10\nsalt 3\n").unwrap();
        let v = Vocabulary::load(&counted).unwrap();
        assert_eq!((v.count("salt"), v.total_count()), (Some(3), 13));

        let vectors = td.path().join("glove.txt");
        std::fs::write(&vectors, "the 0.1 0.2 0.3\nsalt -0.1 0.5 0.2\n").unwrap();
        let v = Vocabulary::load(&vectors).unwrap();
        assert!(v.contains("salt") && !v.has_counts());
    }

    #[test]
    fn empty_and_non_utf8_lists_are_errors() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("v.txt");
        std::fs::write(&f, "\n \n").unwrap();
        assert!(matches!(Vocabulary::load(&f), Err(Error::Empty { .. })));
        std::fs::write(&f, b"ok\nb\xffad\n").unwrap();
        assert!(matches!(Vocabulary::load(&f), Err(Error::Utf8 { offset: 4, line: 2, .. })));
    }

    #[test]
    fn type_rates_count_distinct_tokens_across_merges() {
        let v = Vocabulary::from_words(["salt", "and"]);
        let proc_with = |t: &str| stepwise_core::Procedure {
            id: "p".into(),
            steps: vec![stepwise_core::Step { text: Some(t.into()), ..Default::default() }],
            ..Default::default()
        };
        let mut buf = String::new();
        let mut a = VocabCounter::default();
        a.add_steps(&proc_with("Salt and salt saltand"), &v, &mut buf);
        let mut b = VocabCounter::default();
        b.add_steps(&proc_with("and pepper"), &v, &mut buf);
        a.merge(b);
        let r = a.finish();
        assert_eq!((r.tokens, r.in_vocab, r.types, r.types_in_vocab), (6, 4, 4, 2));
        assert!((r.type_rate() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn rates() {
        let v = Vocabulary::from_words(["salt", "and"]);
        let mut r = VocabRate::default();
        r.add_text("Salt and 2 peppers, saltand.And", &v, &mut String::new());
        assert_eq!((r.tokens, r.in_vocab, r.word_tokens, r.word_in_vocab), (6, 3, 5, 3));
        assert_eq!((r.ws_tokens, r.ws_in_vocab), (5, 2));
        assert!((r.rate() - 0.5).abs() < 1e-12);
    }
}
