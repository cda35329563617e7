//! Splitting fused words ("preheatoven" → "preheat oven", "saltand" → "salt and", "BowlBeef" → "Bowl Beef") by
//! maximum likelihood under a unigram model, with dynamic programming over the cut points.
//!
//! The model is learned from the corpus itself: a lowercase alphabetic token seen at least `trust_count` times is a
//! known word with probability `count / N`. A user dictionary (`--dictionary`) adds words, with their counts when the
//! file has them, else a Zipf probability from their rank, `1 / ((rank + 1) · ln |D|)` (the estimate `wordninja`
//! uses); with both sources a word's probability is the average of the two.
//!
//! Every alphabetic token of at least `min_len` letters is decided by maximum likelihood: it is split when its
//! best segmentation into known words costs less than the token itself, with `cost(w) = -ln p(w)` and each extra
//! piece adding `split_penalty`. A known token costs its own frequency, so frequent words ("together", "without")
//! stay whole while rare junk that happens to be in a large dictionary ("ofthe") is split. An unknown token costs
//! the cost of the rarest known word plus `unknown_char_cost` per letter (long unknown strings are unlikely words).
//! A cut where the original token changes from lower to upper case ("cupBowl", "BaconSalt": list items scraped
//! without separators) costs `split_penalty - camel_bonus` instead. Pieces of two or three letters must be among
//! the `short_piece_rank` most frequent words ("of", "the", "and" — not "com" or "arm"), since short rare pieces
//! are how a unigram model cuts real words ("com pound", "arm or"); the only one-letter pieces are "a" and "I".
//! Without a dictionary, unknown tokens that are inflections or prefixed forms of corpus words ("asking" from
//! "ask", "controlled" from "control", "unbaked" from "baked") are never split, so a small corpus keeps its
//! rare-but-regular words.
//!
//! Without a dictionary the model only knows the corpus, so in a small corpus compounds of two common words
//! ("cupboard", "backside") can still be cut; `--dictionary` with a large frequency-ordered word list (e.g. GloVe's
//! vocabulary) is the recommended setting.

use serde::{Deserialize, Serialize};

use crate::counts::{FastMap, TokenCounts};
use crate::vocab::Vocabulary;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SegmentParams {
    /// Candidates have at least this many letters.
    pub min_len: usize,
    /// Corpus tokens seen this often are known words (never split; usable as pieces).
    pub trust_count: u64,
    /// Cost added per extra piece (a bias towards fewer splits).
    pub split_penalty: f64,
    /// Cost per letter of an unknown word, added to the cost of the rarest known word.
    pub unknown_char_cost: f64,
    /// Longest piece considered, in letters.
    pub max_piece_len: usize,
    /// Discount on `split_penalty` for a cut at a lower→upper case change.
    pub camel_bonus: f64,
    /// Pieces of at most three letters must be among this many most frequent known words (`None`: 150 from the
    /// corpus alone, 5,000 with a dictionary, where short words are well attested).
    pub short_piece_rank: Option<usize>,
}

impl Default for SegmentParams {
    fn default() -> Self {
        SegmentParams {
            min_len: 5,
            trust_count: 3,
            split_penalty: 3.0,
            unknown_char_cost: 1.0,
            max_piece_len: 24,
            camel_bonus: 4.0,
            short_piece_rank: None,
        }
    }
}

/// The unigram word model: known words and their costs.
#[derive(Debug, Clone)]
pub struct WordModel {
    /// Known word → (cost, seen standalone in the corpus at least `trust_count` times).
    costs: FastMap<String, (f64, bool)>,
    /// Cost of the rarest known word (the base of an unknown word's cost).
    unknown_base: f64,
    /// The highest cost a piece of at most three letters may have.
    short_max_cost: f64,
    /// The cost of the most frequent word (bounds what any split can cost).
    min_cost: f64,
    pub params: SegmentParams,
    pub corpus_words: usize,
    pub dictionary_words: usize,
    /// Words never split, whatever their cost (the user's reference vocabulary, `clean --vocab`).
    keep: Option<Vocabulary>,
}

/// A lowercase alphabetic token: the only kind the segmenter learns from or splits.
pub fn is_alphabetic_word(w: &str) -> bool {
    !w.is_empty() && w.chars().all(char::is_alphabetic)
}

impl WordModel {
    /// Learn the model from corpus token counts (lowercase), optionally merged with a dictionary.
    pub fn new(counts: &TokenCounts, dictionary: Option<&Vocabulary>, params: SegmentParams) -> Self {
        let mut corpus: FastMap<&str, u64> = FastMap::default();
        let mut n_corpus = 0u64;
        for (w, &c) in &counts.counts {
            if is_alphabetic_word(w) {
                n_corpus += c;
                if c >= params.trust_count {
                    corpus.insert(w.as_str(), c);
                }
            }
        }
        let mut costs: FastMap<String, (f64, bool)> = FastMap::default();
        let dict_p = |w: &str| -> Option<f64> {
            let d = dictionary?;
            let r = d.rank(w)?;
            if d.has_counts() {
                let total = d.total_count().max(1) as f64;
                Some(d.count(w).unwrap_or(0).max(1) as f64 / total)
            } else {
                Some(1.0 / ((r as f64 + 1.0) * (d.len().max(2) as f64).ln()))
            }
        };
        let both = dictionary.is_some() && !corpus.is_empty();
        for (w, &c) in &corpus {
            let pc = c as f64 / n_corpus.max(1) as f64;
            let p = match dict_p(w) {
                Some(pd) => 0.5 * pc + 0.5 * pd,
                None if both => 0.5 * pc,
                None => pc,
            };
            costs.insert(w.to_string(), (-p.ln(), true));
        }
        let mut dictionary_words = 0;
        if let Some(d) = dictionary {
            for (w, _) in d.iter() {
                if !is_alphabetic_word(w) {
                    continue;
                }
                dictionary_words += 1;
                if !costs.contains_key(w) {
                    let pd = dict_p(w).unwrap_or(f64::MIN_POSITIVE);
                    let p = if both { 0.5 * pd } else { pd };
                    costs.insert(w.to_string(), (-p.ln(), false));
                }
            }
        }
        let unknown_base = costs.values().map(|c| c.0).fold(0.0f64, f64::max);
        let mut sorted: Vec<f64> = costs.values().map(|c| c.0).collect();
        sorted.sort_by(f64::total_cmp);
        let rank = params.short_piece_rank.unwrap_or(if dictionary_words > 0 { 5000 } else { 150 });
        let short_max_cost = match rank {
            0 => f64::NEG_INFINITY,
            r => sorted.get(r - 1).or(sorted.last()).copied().unwrap_or(f64::NEG_INFINITY),
        };
        let min_cost = sorted.first().copied().unwrap_or(0.0);
        WordModel {
            costs,
            unknown_base,
            short_max_cost,
            min_cost,
            params,
            corpus_words: corpus.len(),
            dictionary_words,
            keep: None,
        }
    }

    /// Never split a word of `vocab` (lowercase lookup): a real word the user's vocabulary lists ("forgive",
    /// "output") must not become two words because the corpus model finds the pieces cheaper.
    pub fn keep_whole(mut self, vocab: &Vocabulary) -> Self {
        self.keep = Some(vocab.clone());
        self
    }

    /// True when `lower` is in the keep-whole vocabulary.
    pub fn is_kept_whole(&self, lower: &str) -> bool {
        self.keep.as_ref().is_some_and(|k| k.contains(lower))
    }

    /// True when the lowercase word is known (from the corpus or the dictionary).
    pub fn is_known(&self, w: &str) -> bool {
        self.costs.contains_key(w)
    }

    /// True when the lowercase word was seen standalone in the corpus at least `trust_count` times.
    fn is_corpus_word(&self, w: &str) -> bool {
        self.costs.get(w).is_some_and(|c| c.1)
    }

    /// True for an unknown word that is a regular derivation of a corpus word (never split). Only without a
    /// dictionary: the protection makes up for a small vocabulary, and a dictionary lists derived forms itself.
    pub fn is_protected(&self, w: &str) -> bool {
        self.dictionary_words == 0
            && !self.is_known(w)
            && (self.is_inflection(w)
                || PREFIXES.iter().any(|p| {
                    w.strip_prefix(p)
                        .is_some_and(|rest| rest.len() >= 4 && (self.is_corpus_word(rest) || self.is_inflection(rest)))
                }))
    }

    /// The cost of keeping `lower` whole: its own cost when known, else the unknown-word cost.
    fn whole_cost(&self, lower: &str, letters: usize) -> f64 {
        match self.costs.get(lower) {
            Some(c) => c.0,
            None => self.unknown_base + self.params.unknown_char_cost * letters as f64,
        }
    }

    /// `asking` ← ask, `baking` ← bake, `controlled` ← control, `berries` ← berry, `needless` ← need.
    fn is_inflection(&self, w: &str) -> bool {
        SUFFIXES.iter().any(|suf| {
            let Some(stem) = w.strip_suffix(suf) else {
                return false;
            };
            if stem.len() < 3 || !stem.is_char_boundary(stem.len()) {
                return false;
            }
            let known = |w: &str| self.is_corpus_word(w);
            // A doubled final letter ("controll-ed"), compared as characters: bytes would cut a multi-byte letter.
            let mut last = stem.char_indices().rev();
            let doubled = match (last.next(), last.next()) {
                (Some((i, a)), Some((_, b))) if a == b => known(&stem[..i]),
                _ => false,
            };
            let y_form = matches!(*suf, "ies" | "ied" | "ier" | "iest" | "ily") && known(&format!("{stem}y"));
            known(stem) || known(&format!("{stem}e")) || doubled || y_form
        })
    }

    pub fn len(&self) -> usize {
        self.costs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.costs.is_empty()
    }

    fn piece_cost(&self, piece: &str, letters: usize) -> Option<f64> {
        // Single letters other than the words "a" and "I" are initials, units or plural endings, not words.
        if letters == 1 && piece != "a" && piece != "i" {
            return None;
        }
        let c = self.costs.get(piece)?.0;
        (letters > 3 || c <= self.short_max_cost).then_some(c)
    }

    /// Segment a lowercase token: the letter counts of the pieces (at least two), or `None` to keep it whole.
    pub fn segment(&self, lower: &str) -> Option<Vec<usize>> {
        if self.is_kept_whole(lower) {
            return None;
        }
        self.segment_with_case(lower, &[])
    }

    /// [`Self::segment`] ignoring the keep-whole vocabulary: what the corpus model alone would do (the clean
    /// report lists the vocabulary words this protected).
    pub fn segment_ignoring_keep(&self, lower: &str) -> Option<Vec<usize>> {
        self.segment_with_case(lower, &[])
    }

    /// [`Self::segment`] where `camel[i]` is true when letter `i` starts an upper-case run after a lower-case letter.
    fn segment_with_case(&self, lower: &str, camel: &[bool]) -> Option<Vec<usize>> {
        if !is_alphabetic_word(lower) || self.is_protected(lower) {
            return None;
        }
        let bounds: Vec<usize> = lower.char_indices().map(|(i, _)| i).chain([lower.len()]).collect();
        let n = bounds.len() - 1;
        if n < self.params.min_len {
            return None;
        }
        let whole = self.whole_cost(lower, n);
        // No split (two pieces at least) can cost less than this: skip frequent words without the search.
        let cheapest_cut = self.params.split_penalty - if camel.is_empty() { 0.0 } else { self.params.camel_bonus };
        if whole <= 2.0 * self.min_cost + cheapest_cut {
            return None;
        }
        // best[i]: cheapest segmentation of the first i letters, and where its last piece starts.
        let mut best: Vec<(f64, usize)> = vec![(f64::INFINITY, 0); n + 1];
        best[0] = (0.0, 0);
        for i in 1..=n {
            for j in i.saturating_sub(self.params.max_piece_len)..i {
                if !best[j].0.is_finite() || (j == 0 && i == n) {
                    continue;
                }
                if let Some(c) = self.piece_cost(&lower[bounds[j]..bounds[i]], i - j) {
                    let penalty = match j {
                        0 => 0.0,
                        j if camel.get(j).copied().unwrap_or(false) => {
                            self.params.split_penalty - self.params.camel_bonus
                        }
                        _ => self.params.split_penalty,
                    };
                    let total = best[j].0 + c + penalty;
                    if total < best[i].0 {
                        best[i] = (total, j);
                    }
                }
            }
        }
        if best[n].0.partial_cmp(&whole) != Some(std::cmp::Ordering::Less) {
            return None;
        }
        let mut pieces = Vec::new();
        let mut i = n;
        while i > 0 {
            let j = best[i].1;
            pieces.push(i - j);
            i = j;
        }
        pieces.reverse();
        Some(pieces)
    }

    /// Split `token` (any case) into its pieces with the original spelling, or `None` to keep it.
    pub fn split_token<'t>(&self, token: &'t str) -> Option<Vec<&'t str>> {
        let lower = token.to_lowercase();
        if lower.chars().count() != token.chars().count() || self.is_kept_whole(&lower) {
            return None; // case mapping changed the letter count: cuts would not map back
        }
        let letters: Vec<char> = token.chars().collect();
        let camel: Vec<bool> =
            (0..letters.len()).map(|i| i > 0 && letters[i - 1].is_lowercase() && letters[i].is_uppercase()).collect();
        let lens = self.segment_with_case(&lower, &camel)?;
        Some(cut_by_letters(token, &lens))
    }
}

/// True when a token has a lower→upper case change inside ("cupBowl").
pub fn has_camel_boundary(token: &str) -> bool {
    let mut prev_lower = false;
    for c in token.chars() {
        if prev_lower && c.is_uppercase() {
            return true;
        }
        prev_lower = c.is_lowercase();
    }
    false
}

/// Inflectional and common derivational suffixes, longest first.
const SUFFIXES: &[&str] = &[
    "ness", "ment", "less", "able", "ible", "iest", "ings", "ies", "ied", "ier", "ily", "ing", "ers", "est", "ful",
    "ion", "ish", "ity", "ive", "ize", "ise", "ed", "er", "es", "ly", "en", "al", "s", "d", "y",
];

/// Prefixes whose removal leaves a known word or inflection ("unbaked", "reheat").
const PREFIXES: &[&str] = &["over", "under", "out", "pre", "non", "sub", "un", "re", "de", "dis", "mis"];

/// Cut `s` into consecutive pieces of `lens` letters each.
pub fn cut_by_letters<'t>(s: &'t str, lens: &[usize]) -> Vec<&'t str> {
    let bounds: Vec<usize> = s.char_indices().map(|(i, _)| i).chain([s.len()]).collect();
    let mut out = Vec::with_capacity(lens.len());
    let mut at = 0;
    for &l in lens {
        let end = (at + l).min(bounds.len() - 1);
        out.push(&s[bounds[at]..bounds[end]]);
        at = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A corpus in which the words of the issue's examples occur standalone.
    fn model(dictionary: Option<&Vocabulary>) -> WordModel {
        let mut text = String::new();
        for _ in 0..40 {
            text.push_str("preheat the oven and add salt and pepper to the bowl with beef stock bacon butter fork. ");
        }
        for _ in 0..3 {
            text.push_str("tarragon oregano understand together cupboard ");
        }
        text.push_str("preheatoven saltand ");
        let mut counts = TokenCounts::default();
        counts.add_text(&text, &mut String::new());
        WordModel::new(&counts, dictionary, SegmentParams::default())
    }

    #[test]
    fn splits_the_issue_examples() {
        let m = model(None);
        assert_eq!(m.split_token("preheatoven"), Some(vec!["preheat", "oven"]));
        assert_eq!(m.split_token("saltand"), Some(vec!["salt", "and"]));
        assert_eq!(m.split_token("StockBaconButterFork"), Some(vec!["Stock", "Bacon", "Butter", "Fork"]));
    }

    #[test]
    fn keeps_known_short_and_unsplittable_tokens() {
        let m = model(None);
        for t in ["tarragon", "together", "cupboard", "oven", "xyzzyplugh", "salt2"] {
            assert_eq!(m.split_token(t), None, "{t}");
        }
    }

    #[test]
    fn dictionary_words_compete_by_frequency() {
        let mut words: Vec<String> = ["the", "and", "butterscotch", "scotch", "pie", "of"].map(String::from).to_vec();
        let letters =
            |i: usize| -> String { [i / 676, i / 26 % 26, i % 26].iter().map(|&d| (b'a' + d as u8) as char).collect() };
        words.extend((0..5000).map(|i| format!("zq{}", letters(i))));
        words.push("ofthe".into()); // rare junk in a large list, as in GloVe's
        let d = Vocabulary::from_words(words.iter().map(String::as_str));
        let m = model(Some(&d));
        assert_eq!(m.split_token("butterscotch"), None);
        assert_eq!(m.split_token("butterpie"), Some(vec!["butter", "pie"]));
        assert_eq!(m.split_token("ofthe"), Some(vec!["of", "the"]));
        assert!(m.dictionary_words > 5000 && m.corpus_words > 10);
    }

    #[test]
    fn words_of_the_keep_vocabulary_are_never_split() {
        let m = model(None);
        assert_eq!(m.split_token("saltand"), Some(vec!["salt", "and"]));
        let m = m.keep_whole(&Vocabulary::from_words(["saltand", "stockbacon"]));
        assert_eq!(m.split_token("saltand"), None);
        assert_eq!(m.split_token("SaltAnd"), None, "the lookup is by the lowercase token");
        assert_eq!(m.segment("stockbacon"), None);
        assert_eq!(m.segment_ignoring_keep("saltand"), Some(vec![4, 3]));
        assert_eq!(m.split_token("preheatoven"), Some(vec!["preheat", "oven"]), "other tokens still split");
    }

    #[test]
    fn a_multi_byte_letter_before_a_suffix_does_not_panic() {
        // U+1000 is E1 80 80: its last two bytes are equal, which a byte-wise "doubled letter" check cut in half.
        let m = model(None);
        for w in ["\u{1000}ed", "abc\u{1000}ing", "\u{a47}\u{7ca}aed"] {
            let _ = m.is_protected(w);
            let _ = m.split_token(w);
        }
        assert!(m.is_protected("bowlled"), "a doubled ASCII letter still counts (bowl → bowll-ed)");
    }

    #[test]
    fn inflections_of_corpus_words_are_kept() {
        let m = model(None);
        for t in ["stirring", "peppers", "preheated", "unsalted"] {
            assert_eq!(m.split_token(t), None, "{t}");
        }
        assert!(m.is_protected("peppered") && !m.is_protected("pepper"));
    }

    #[test]
    fn cuts_by_letters_not_bytes() {
        assert_eq!(cut_by_letters("crèmebrûlée", &[5, 6]), ["crème", "brûlée"]);
    }
}
