//! The cleaning report: per rule how many fields and edits, examples, the most frequent token rewrites, per filter
//! how many procedures went, and in-vocabulary rates before and after. Written as `clean_report.json` and `.md`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::config::CleanConfig;
use crate::counts::FastMap;
use crate::vocab::VocabRate;

/// A before/after excerpt around the first change of a field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    pub procedure: String,
    pub field: String,
    pub before: String,
    pub after: String,
}

/// A token rewrite and how often it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenChange {
    pub token: String,
    pub replacement: String,
    pub count: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RuleReport {
    /// Text fields (titles, step texts, ingredients) the rule changed.
    pub fields_changed: u64,
    /// Individual edits (tags removed, tokens split, ...).
    pub edits: u64,
    /// Edits by kind, where a rule has several (markup: html_tags, entities, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub details: BTreeMap<String, u64>,
    pub examples: Vec<Example>,
    /// The most frequent rewrites (token rules only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<TokenChange>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FilterReport {
    /// Procedures dropped by this filter (each dropped procedure is counted under the first filter it fails).
    pub procedures: u64,
    /// Steps removed (step-level filters).
    #[serde(skip_serializing_if = "is_zero")]
    pub steps: u64,
    /// Ids of the first dropped procedures.
    pub examples: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SegmenterReport {
    /// Known words learned from the corpus (seen at least `trust_count` times).
    pub corpus_words: usize,
    /// Words from `--dictionary`.
    pub dictionary_words: usize,
    /// Distinct tokens that were candidates (unknown, long enough).
    pub candidates: usize,
    /// Distinct candidates split.
    pub split_types: usize,
    /// With `--vocab`: distinct candidates of the vocabulary that the corpus model alone would split, kept whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vocab_kept_whole: Option<usize>,
    /// The most frequent of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vocab_kept_whole_examples: Vec<String>,
    /// With `--vocab`: segmentation edits of vocabulary words in the output (the goal is 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vocab_words_split: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VocabReport {
    pub vocab: String,
    pub vocab_words: usize,
    /// Over the input corpus (step titles and texts).
    pub before: VocabRateReport,
    /// Over the cleaned corpus.
    pub after: VocabRateReport,
}

impl VocabReport {
    /// One line: the four in-vocabulary rates before → after, in percent.
    pub fn rates_line(&self) -> String {
        let (b, a) = (&self.before, &self.after);
        format!(
            "tokens {:.2}% → {:.2}%, word tokens {:.2}% → {:.2}%, whitespace tokens {:.2}% → {:.2}%, types {:.2}% → \
             {:.2}%",
            100.0 * b.rate,
            100.0 * a.rate,
            100.0 * b.word_rate,
            100.0 * a.word_rate,
            100.0 * b.ws_rate,
            100.0 * a.ws_rate,
            100.0 * b.type_rate,
            100.0 * a.type_rate
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VocabRateReport {
    #[serde(flatten)]
    pub counts: VocabRate,
    pub rate: f64,
    pub word_rate: f64,
    pub ws_rate: f64,
    pub type_rate: f64,
}

impl From<VocabRate> for VocabRateReport {
    fn from(counts: VocabRate) -> Self {
        VocabRateReport {
            rate: counts.rate(),
            word_rate: counts.word_rate(),
            ws_rate: counts.ws_rate(),
            type_rate: counts.type_rate(),
            counts,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CleanReport {
    pub procedures_in: u64,
    pub procedures_out: u64,
    pub steps_in: u64,
    pub steps_out: u64,
    /// Text rules by name, in pipeline order names: markup, nfkc, ascii_fold, sentence_spacing, number_unit,
    /// segmentation, whitespace.
    pub rules: BTreeMap<String, RuleReport>,
    pub filters: BTreeMap<String, FilterReport>,
    pub segmenter: SegmenterReport,
    pub vocab: Option<VocabReport>,
    pub config: CleanConfig,
}

/// Accumulates one rule's counts within a chunk of procedures.
#[derive(Debug, Default)]
pub(crate) struct RuleAcc {
    pub report: RuleReport,
    pub top: FastMap<String, (String, u64)>,
}

impl RuleAcc {
    pub fn merge(&mut self, other: RuleAcc, max_examples: usize) {
        let r = &mut self.report;
        r.fields_changed += other.report.fields_changed;
        r.edits += other.report.edits;
        for (k, v) in other.report.details {
            *r.details.entry(k).or_insert(0) += v;
        }
        let room = max_examples.saturating_sub(r.examples.len());
        r.examples.extend(other.report.examples.into_iter().take(room));
        for (tok, (rep, n)) in other.top {
            self.top.entry(tok).or_insert((rep, 0)).1 += n;
        }
    }

    /// Finish: the `keep` most frequent rewrites, by count then token.
    pub fn finish(mut self, keep: usize) -> RuleReport {
        let mut top: Vec<TokenChange> = self
            .top
            .into_iter()
            .map(|(token, (replacement, count))| TokenChange { token, replacement, count })
            .collect();
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.token.cmp(&b.token)));
        top.truncate(keep);
        self.report.top = top;
        self.report
    }
}

/// An excerpt of `before` and `after` around their first difference (about 100 characters each).
pub(crate) fn excerpt(before: &str, after: &str) -> (String, String) {
    let prefix = before.chars().zip(after.chars()).take_while(|(a, b)| a == b).count();
    let start = prefix.saturating_sub(40);
    let cut = |s: &str| {
        let total = s.chars().count();
        let body: String = s.chars().skip(start).take(100).collect();
        let mut out = String::new();
        if start > 0 {
            out.push('…');
        }
        out.push_str(&body);
        if start + 100 < total {
            out.push('…');
        }
        out
    };
    (cut(before), cut(after))
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', "⏎")
}

impl CleanReport {
    pub fn to_markdown(&self) -> String {
        let mut s = String::from("# Cleaning report\n\n");
        s += &format!(
            "| | in | out |\n|---|---:|---:|\n| procedures | {} | {} |\n| steps | {} | {} |\n",
            self.procedures_in, self.procedures_out, self.steps_in, self.steps_out
        );
        if let Some(v) = &self.vocab {
            s += &format!(
                "\n## In-vocabulary rate ({} words from `{}`)\n\nTokens: stepwise's tokenizer (split at punctuation); \
                 word tokens: those with a letter; whitespace tokens: space-separated chunks with end punctuation \
                 trimmed (fused tokens such as `mix.Next` count as one); types: distinct lowercase tokens.\n\n| | \
                 tokens | rate | word tokens | word rate | whitespace tokens | whitespace rate | types | type rate |\n\
                 |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                v.vocab_words, v.vocab
            );
            for (name, r) in [("before", &v.before), ("after", &v.after)] {
                s += &format!(
                    "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                    r.counts.tokens,
                    pct(r.rate),
                    r.counts.word_tokens,
                    pct(r.word_rate),
                    r.counts.ws_tokens,
                    pct(r.ws_rate),
                    r.counts.types,
                    pct(r.type_rate)
                );
            }
        }
        s += "\n## Text rules\n\n| rule | fields changed | edits |\n|---|---:|---:|\n";
        for (name, r) in &self.rules {
            s += &format!("| {name} | {} | {} |\n", r.fields_changed, r.edits);
        }
        s += "\n## Filters\n\n| filter | procedures dropped | steps dropped | examples |\n|---|---:|---:|---|\n";
        for (name, f) in &self.filters {
            s += &format!("| {name} | {} | {} | {} |\n", f.procedures, f.steps, md_cell(&f.examples.join(", ")));
        }
        let g = &self.segmenter;
        s += &format!(
            "\n## Segmenter\n\n- known words learned from the corpus: {}\n- dictionary words: {}\n- candidate token \
             types: {}\n- token types split: {}\n",
            g.corpus_words, g.dictionary_words, g.candidates, g.split_types
        );
        if let (Some(kept), Some(split)) = (g.vocab_kept_whole, g.vocab_words_split) {
            s += &format!(
                "- words of the reference vocabulary kept whole (the corpus model alone would split them): {kept}{}\n                 - words of the reference vocabulary split: {split}\n",
                if g.vocab_kept_whole_examples.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", md_cell(&g.vocab_kept_whole_examples.join(", ")))
                }
            );
        }
        for (name, r) in &self.rules {
            if r.examples.is_empty() && r.top.is_empty() {
                continue;
            }
            s += &format!("\n## {name}\n");
            if !r.details.is_empty() {
                s += "\n";
                for (k, v) in &r.details {
                    s += &format!("- {k}: {v}\n");
                }
            }
            if !r.top.is_empty() {
                s += "\n| token | becomes | count |\n|---|---|---:|\n";
                for t in &r.top {
                    s += &format!("| {} | {} | {} |\n", md_cell(&t.token), md_cell(&t.replacement), t.count);
                }
            }
            if !r.examples.is_empty() {
                s += "\n| procedure | field | before | after |\n|---|---|---|---|\n";
                for e in &r.examples {
                    s += &format!(
                        "| {} | {} | {} | {} |\n",
                        md_cell(&e.procedure),
                        e.field,
                        md_cell(&e.before),
                        md_cell(&e.after)
                    );
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_centres_on_the_first_change() {
        let before = format!("{}saltand pepper", "x".repeat(200));
        let after = format!("{}salt and pepper", "x".repeat(200));
        let (b, a) = excerpt(&before, &after);
        assert!(b.starts_with('…') && b.ends_with("saltand pepper"), "{b}");
        assert!(a.ends_with("salt and pepper"), "{a}");
    }
}
