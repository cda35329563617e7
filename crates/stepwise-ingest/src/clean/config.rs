//! What `stepwise clean` does: text rules, the fused-word segmenter and the procedure filters, all switchable.
//! Defaults follow Meta-RecipeQA's cleaning of RecipeQA (appendix D), made general: markup stripped, NFKC,
//! whitespace collapsed, fused tokens split, procedures outside 3–25 steps dropped.

use regex::Regex;
use serde::{Deserialize, Serialize};
use stepwise_core::{Error, Result};

use crate::segment::SegmentParams;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CleanConfig {
    /// Strip HTML/CSS tags, comments, entities, Markdown and BBCode markup.
    pub strip_markup: bool,
    /// Unicode NFKC normalisation.
    pub nfkc: bool,
    /// Fold to ASCII where a character has an ASCII form (accents, typographic punctuation).
    pub ascii_fold: bool,
    /// Insert the missing space after a sentence end ("mix.Next" → "mix. Next").
    pub fix_sentence_spacing: bool,
    /// Split numbers fused with units or words ("350F", "2cups").
    pub split_units: bool,
    /// Split fused words with the learned unigram model ("preheatoven").
    pub segment: bool,
    pub segment_params: SegmentParams,
    /// Collapse whitespace (runs of spaces, blank lines, invisible characters).
    pub collapse_whitespace: bool,
    /// Keep line breaks inside a step when collapsing whitespace.
    pub keep_newlines: bool,

    /// Drop steps with no title, no text and no image (after cleaning).
    pub drop_empty_steps: bool,
    /// Procedures with fewer steps are dropped (RecipeQA: 3).
    pub min_steps: Option<usize>,
    /// Procedures with more steps are dropped (RecipeQA: 25).
    pub max_steps: Option<usize>,
    /// Regular expressions: procedures whose id matches any are dropped.
    pub exclude_id: Vec<String>,
    /// Regular expressions: procedures whose title matches any are dropped (e.g. non-food entries).
    pub exclude_title: Vec<String>,
    /// Categories to drop.
    pub exclude_category: Vec<String>,
    /// When not empty, only these categories are kept.
    pub include_category: Vec<String>,
    /// When not empty, only procedures in these languages are kept (declared `lang`, else guessed from the text).
    pub languages: Vec<String>,

    /// Examples kept per rule in the report.
    pub examples: usize,
}

impl Default for CleanConfig {
    fn default() -> Self {
        CleanConfig {
            strip_markup: true,
            nfkc: true,
            ascii_fold: false,
            fix_sentence_spacing: true,
            split_units: true,
            segment: true,
            segment_params: SegmentParams::default(),
            collapse_whitespace: true,
            keep_newlines: true,
            drop_empty_steps: true,
            min_steps: Some(3),
            max_steps: Some(25),
            exclude_id: Vec::new(),
            exclude_title: Vec::new(),
            exclude_category: Vec::new(),
            include_category: Vec::new(),
            languages: Vec::new(),
            examples: 5,
        }
    }
}

/// The configuration's regular expressions, compiled.
#[derive(Debug, Clone)]
pub struct CompiledPatterns {
    pub exclude_id: Vec<Regex>,
    pub exclude_title: Vec<Regex>,
}

impl CleanConfig {
    /// Compile the id/title patterns; a bad pattern is a usage error naming the option.
    pub fn compile(&self) -> Result<CompiledPatterns> {
        let compile = |opt: &str, pats: &[String]| -> Result<Vec<Regex>> {
            pats.iter()
                .map(|p| {
                    Regex::new(p).map_err(|e| Error::usage(format!("{opt} {p:?}: invalid regular expression: {e}")))
                })
                .collect()
        };
        if let (Some(lo), Some(hi)) = (self.min_steps, self.max_steps)
            && lo > hi
        {
            return Err(Error::usage(format!("--min-steps {lo} is larger than --max-steps {hi}")));
        }
        Ok(CompiledPatterns {
            exclude_id: compile("--exclude-id", &self.exclude_id)?,
            exclude_title: compile("--exclude-title", &self.exclude_title)?,
        })
    }
}
