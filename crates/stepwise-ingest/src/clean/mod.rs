//! Cleaning a corpus (Meta-RecipeQA's cleaning of RecipeQA, appendix D, made general).
//!
//! The pipeline, over every text field (procedure title, step titles and texts, ingredients):
//! 1. normalise: strip markup → NFKC → ASCII folding (optional) → missing sentence spaces;
//! 2. metadata filters (id/title patterns, categories, language);
//! 3. learn word frequencies from the normalised corpus (tokens that occur standalone, plus `--dictionary`);
//! 4. split tokens: numbers fused with units or words, then fused words (maximum likelihood, [`crate::segment`]);
//!    collapse whitespace;
//! 5. drop empty steps, then procedures outside the step-count bounds.
//!
//! Procedures are processed in parallel chunks and the report is merged in corpus order, so the output and the
//! report are identical for any thread count.

pub mod config;
pub mod filters;
pub mod report;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use stepwise_core::corpus::{Corpus, TASKSET_DIR, write_corpus_files};
use stepwise_core::json::to_pretty_sorted;
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::{IoResultExt, Manifest, Procedure, Result};

pub use config::CleanConfig;
pub use report::CleanReport;
use report::{FilterReport, RuleAcc, SegmenterReport, VocabReport, excerpt};

use crate::counts::{FastMap, TokenCounts};
use crate::segment::{WordModel, cut_by_letters, has_camel_boundary, is_alphabetic_word};
use crate::text::markup::{MarkupCounts, strip_markup};
use crate::text::normalize::{ascii_fold, collapse_whitespace, fix_sentence_spacing, nfkc};
use crate::text::tokenize::{for_each_token, lowercase};
use crate::text::units::split_number_unit;
use crate::vocab::{VocabCounter, Vocabulary};

pub const CLEAN_REPORT_JSON: &str = "clean_report.json";
pub const CLEAN_REPORT_MD: &str = "clean_report.md";

/// Word lists the cleaner may use.
#[derive(Debug, Clone, Copy, Default)]
pub struct CleanResources<'a> {
    /// Extra known words for the segmenter (`--dictionary`).
    pub dictionary: Option<&'a Vocabulary>,
    /// The reference vocabulary (`--vocab`): in-vocabulary rates, and words the segmenter never splits.
    pub vocab: Option<&'a Vocabulary>,
}

/// The text rules, in pipeline order.
const RULES: [&str; 7] =
    ["markup", "nfkc", "ascii_fold", "sentence_spacing", "number_unit", "segmentation", "whitespace"];
const MARKUP: usize = 0;
const NFKC: usize = 1;
const ASCII: usize = 2;
const SENTENCE: usize = 3;
const UNITS: usize = 4;
const SEGMENT: usize = 5;
const WHITESPACE: usize = 6;

/// Procedures per parallel work item.
const CHUNK: usize = 256;
/// Token rewrites listed per rule in the report.
const TOP_CHANGES: usize = 25;

/// The name of a text field, for report examples.
#[derive(Debug, Clone, Copy)]
enum Field {
    Title,
    StepTitle(usize),
    StepText(usize),
    Ingredient(usize),
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Title => write!(f, "title"),
            Field::StepTitle(i) => write!(f, "steps[{i}].title"),
            Field::StepText(i) => write!(f, "steps[{i}].text"),
            Field::Ingredient(i) => write!(f, "ingredients[{i}]"),
        }
    }
}

/// Visit every text field of a procedure.
fn for_each_field(p: &mut Procedure, mut f: impl FnMut(&str, Field, &mut String)) {
    let Procedure { id, title, steps, ingredients, .. } = p;
    if let Some(t) = title {
        f(id, Field::Title, t);
    }
    for (i, s) in steps.iter_mut().enumerate() {
        if let Some(t) = &mut s.title {
            f(id, Field::StepTitle(i), t);
        }
        if let Some(t) = &mut s.text {
            f(id, Field::StepText(i), t);
        }
    }
    for (i, t) in ingredients.iter_mut().flatten().enumerate() {
        f(id, Field::Ingredient(i), t);
    }
}

/// What one chunk of procedures contributes to the report.
#[derive(Default)]
struct ChunkAcc {
    rules: [RuleAcc; 7],
    vocab: VocabCounter,
    /// Segmentation edits of tokens in the reference vocabulary (0 unless the keep-whole rule has a hole).
    in_vocab_splits: u64,
}

impl ChunkAcc {
    #[allow(clippy::too_many_arguments)] // one call shape for every rule; a struct would only rename the fields
    fn record(&mut self, rule: usize, id: &str, field: Field, before: &str, after: &str, edits: u64, max: usize) {
        let r = &mut self.rules[rule].report;
        r.fields_changed += 1;
        r.edits += edits;
        if r.examples.len() < max {
            let (b, a) = excerpt(before, after);
            r.examples.push(report::Example {
                procedure: id.to_string(),
                field: field.to_string(),
                before: b,
                after: a,
            });
        }
    }

    fn merge(&mut self, other: ChunkAcc, max: usize) {
        for (mine, theirs) in self.rules.iter_mut().zip(other.rules) {
            mine.merge(theirs, max);
        }
        self.vocab.merge(other.vocab);
        self.in_vocab_splits += other.in_vocab_splits;
    }
}

fn merge_chunks(chunks: Vec<ChunkAcc>, max: usize) -> ChunkAcc {
    let mut acc = ChunkAcc::default();
    for c in chunks {
        acc.merge(c, max);
    }
    acc
}

/// Stage 1 on one field: markup, NFKC, ASCII folding, sentence spacing.
fn normalize_field(text: &mut String, id: &str, field: Field, cfg: &CleanConfig, acc: &mut ChunkAcc) {
    let max = cfg.examples;
    if cfg.strip_markup {
        let mut mc = MarkupCounts::default();
        if let Some(new) = strip_markup(text, &mut mc) {
            acc.record(MARKUP, id, field, text, &new, mc.total() as u64, max);
            let d = &mut acc.rules[MARKUP].report.details;
            for (k, v) in [
                ("html_tags", mc.html_tags),
                ("html_blocks", mc.html_blocks),
                ("entities", mc.entities),
                ("markdown", mc.markdown),
                ("bbcode", mc.bbcode),
            ] {
                if v > 0 {
                    *d.entry(k.to_string()).or_insert(0) += v as u64;
                }
            }
            *text = new;
        }
    }
    if cfg.nfkc
        && let Some(new) = nfkc(text)
    {
        acc.record(NFKC, id, field, text, &new, 1, max);
        *text = new;
    }
    if cfg.ascii_fold
        && let Some(new) = ascii_fold(text)
    {
        acc.record(ASCII, id, field, text, &new, 1, max);
        *text = new;
    }
    if cfg.fix_sentence_spacing
        && let Some((new, n)) = fix_sentence_spacing(text)
    {
        acc.record(SENTENCE, id, field, text, &new, n as u64, max);
        *text = new;
    }
}

/// The word model and the split decisions for every candidate token type.
struct Splitter {
    model: WordModel,
    /// Lowercase token → letter counts of its pieces (only tokens that split).
    decisions: FastMap<String, Vec<usize>>,
    candidates: usize,
    /// Candidate types of the reference vocabulary that the corpus model alone would split, kept whole, most
    /// frequent first.
    kept_whole: Vec<(String, u64)>,
}

impl Splitter {
    fn learn(procedures: &[Procedure], cfg: &CleanConfig, res: CleanResources<'_>) -> Self {
        let counts = procedures
            .par_iter()
            .fold(
                || (TokenCounts::default(), String::new()),
                |(mut c, mut buf), p| {
                    let mut p_texts = |t: &str| c.add_text(t, &mut buf);
                    if let Some(t) = &p.title {
                        p_texts(t);
                    }
                    for s in &p.steps {
                        for t in [&s.title, &s.text].into_iter().flatten() {
                            p_texts(t);
                        }
                    }
                    for t in p.ingredients.iter().flatten() {
                        p_texts(t);
                    }
                    (c, buf)
                },
            )
            .map(|(c, _)| c)
            .reduce(TokenCounts::default, |mut a, b| {
                a.merge(b);
                a
            });
        let mut model = WordModel::new(&counts, res.dictionary, cfg.segment_params);
        if let Some(v) = res.vocab {
            model = model.keep_whole(v);
        }
        let mut candidates: Vec<&str> = counts
            .counts
            .keys()
            .map(String::as_str)
            .filter(|w| {
                is_alphabetic_word(w) && w.chars().count() >= cfg.segment_params.min_len && !model.is_protected(w)
            })
            .collect();
        candidates.sort_unstable();
        let decisions: FastMap<String, Vec<usize>> = if cfg.segment {
            candidates.par_iter().filter_map(|w| model.segment(w).map(|d| (w.to_string(), d))).collect()
        } else {
            FastMap::default()
        };
        let mut kept_whole: Vec<(String, u64)> = if cfg.segment {
            candidates
                .par_iter()
                .filter(|w| model.is_kept_whole(w) && model.segment_ignoring_keep(w).is_some())
                .map(|w| (w.to_string(), counts.counts.get(*w).copied().unwrap_or(0)))
                .collect()
        } else {
            Vec::new()
        };
        kept_whole.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Splitter { candidates: candidates.len(), model, decisions, kept_whole }
    }

    /// The replacement of one token, and which rule made it.
    fn replace(&self, token: &str, cfg: &CleanConfig, buf: &mut String) -> Option<(String, usize)> {
        let first = token.as_bytes()[0];
        if cfg.split_units && first.is_ascii_digit() {
            let at = split_number_unit(token, |w| self.model.is_known(w))?;
            return Some((format!("{} {}", &token[..at], &token[at..]), UNITS));
        }
        if !cfg.segment || token.len() < cfg.segment_params.min_len {
            return None;
        }
        if has_camel_boundary(token) {
            // Decided with its case (cuts at case changes are cheaper), so not from the lowercase table.
            let pieces = self.model.split_token(token)?;
            return Some((pieces.join(" "), SEGMENT));
        }
        let lower = lowercase(token, buf);
        let lens = self.decisions.get(lower)?;
        if lower.chars().count() != token.chars().count() {
            return None;
        }
        Some((cut_by_letters(token, lens).join(" "), SEGMENT))
    }
}

/// Stage 4 on one field: token splits, then whitespace.
fn split_field(text: &mut String, id: &str, field: Field, cfg: &CleanConfig, sp: &Splitter, acc: &mut ChunkAcc) {
    let max = cfg.examples;
    if cfg.split_units || cfg.segment {
        let mut out: Option<String> = None;
        let mut last = 0;
        let mut edits = [0u64; 7];
        let mut buf = String::new();
        for_each_token(text, |t| {
            if let Some((rep, rule)) = sp.replace(t.text, cfg, &mut buf) {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
                o.push_str(&text[last..t.start]);
                o.push_str(&rep);
                last = t.end();
                edits[rule] += 1;
                if rule == SEGMENT && sp.model.is_kept_whole(lowercase(t.text, &mut buf)) {
                    acc.in_vocab_splits += 1;
                }
                acc.rules[rule].top.entry(t.text.to_string()).or_insert((rep, 0)).1 += 1;
            }
        });
        if let Some(mut new) = out {
            new.push_str(&text[last..]);
            for rule in [UNITS, SEGMENT] {
                if edits[rule] > 0 {
                    acc.record(rule, id, field, text, &new, edits[rule], max);
                }
            }
            *text = new;
        }
    }
    if cfg.collapse_whitespace
        && let Some(new) = collapse_whitespace(text, cfg.keep_newlines)
    {
        acc.record(WHITESPACE, id, field, text, &new, 1, max);
        *text = new;
    }
}

/// Clean procedures in memory (the library entry point `stepwise demo` and the benchmark use).
pub fn clean_procedures(
    mut procedures: Vec<Procedure>,
    cfg: &CleanConfig,
    res: CleanResources<'_>,
) -> Result<(Vec<Procedure>, CleanReport)> {
    let patterns = cfg.compile()?;
    let max = cfg.examples;
    let procedures_in = procedures.len() as u64;
    let steps_in: u64 = procedures.iter().map(|p| p.steps.len() as u64).sum();

    // 1. Normalise (and measure the input's vocabulary rate first).
    let pb = stepwise_core::progress::bar(procedures.len() as u64, "normalise");
    let chunks: Vec<ChunkAcc> = procedures
        .par_chunks_mut(CHUNK)
        .map(|chunk| {
            let mut acc = ChunkAcc::default();
            let mut buf = String::new();
            for p in chunk.iter_mut() {
                if let Some(v) = res.vocab {
                    acc.vocab.add_steps(p, v, &mut buf);
                }
                for_each_field(p, |id, field, text| normalize_field(text, id, field, cfg, &mut acc));
            }
            pb.inc(chunk.len() as u64);
            acc
        })
        .collect();
    pb.finish_and_clear();
    let mut acc = merge_chunks(chunks, max);
    let vocab_before = std::mem::take(&mut acc.vocab);

    // 2. Metadata filters.
    let mut filters: BTreeMap<String, FilterReport> = BTreeMap::new();
    let drop_proc = |name: &str, id: &str, filters: &mut BTreeMap<String, FilterReport>| {
        let f = filters.entry(name.to_string()).or_default();
        f.procedures += 1;
        if f.examples.len() < max {
            f.examples.push(id.to_string());
        }
    };
    let verdicts: Vec<Option<&'static str>> =
        procedures.par_iter().map(|p| filters::metadata_filter(p, cfg, &patterns)).collect();
    let mut kept = Vec::with_capacity(procedures.len());
    for (p, v) in procedures.into_iter().zip(verdicts) {
        match v {
            Some(name) => drop_proc(name, &p.id, &mut filters),
            None => kept.push(p),
        }
    }
    let mut procedures = kept;

    // 3. Learn the word model; 4. split tokens and collapse whitespace.
    let spinner = stepwise_core::progress::spinner("learning word frequencies");
    let splitter = Splitter::learn(&procedures, cfg, res);
    spinner.finish_and_clear();
    let pb = stepwise_core::progress::bar(procedures.len() as u64, "split tokens");
    let chunks: Vec<ChunkAcc> = procedures
        .par_chunks_mut(CHUNK)
        .map(|chunk| {
            let mut acc = ChunkAcc::default();
            for p in chunk.iter_mut() {
                for_each_field(p, |id, field, text| split_field(text, id, field, cfg, &splitter, &mut acc));
            }
            pb.inc(chunk.len() as u64);
            acc
        })
        .collect();
    pb.finish_and_clear();
    acc.merge(merge_chunks(chunks, max), max);

    // 5. Structural filters.
    let mut kept = Vec::with_capacity(procedures.len());
    for mut p in procedures {
        if cfg.drop_empty_steps {
            let before = p.steps.len();
            p.steps.retain(|s| !filters::is_empty_step(s));
            let removed = (before - p.steps.len()) as u64;
            if removed > 0 {
                filters.entry("empty_steps".to_string()).or_default().steps += removed;
            }
        }
        match filters::structure_filter(&p, cfg) {
            Some(name) => drop_proc(name, &p.id, &mut filters),
            None => kept.push(p),
        }
    }
    let procedures = kept;

    let vocab = res.vocab.map(|v| {
        let after = procedures
            .par_iter()
            .fold(
                || (VocabCounter::default(), String::new()),
                |(mut r, mut buf), p| {
                    r.add_steps(p, v, &mut buf);
                    (r, buf)
                },
            )
            .map(|(r, _)| r)
            .reduce(VocabCounter::default, |mut a, b| {
                a.merge(b);
                a
            })
            .finish();
        VocabReport {
            vocab: v.source.as_ref().map_or_else(|| "(in memory)".to_string(), |p| p.display().to_string()),
            vocab_words: v.len(),
            before: vocab_before.finish().into(),
            after: after.into(),
        }
    });

    let mut rules = BTreeMap::new();
    for (name, r) in RULES.iter().zip(acc.rules) {
        rules.insert(name.to_string(), r.finish(TOP_CHANGES));
    }
    let report = CleanReport {
        procedures_in,
        procedures_out: procedures.len() as u64,
        steps_in,
        steps_out: procedures.iter().map(|p| p.steps.len() as u64).sum(),
        rules,
        filters,
        segmenter: SegmenterReport {
            corpus_words: splitter.model.corpus_words,
            dictionary_words: splitter.model.dictionary_words,
            candidates: splitter.candidates,
            split_types: splitter.decisions.len(),
            vocab_kept_whole: res.vocab.map(|_| splitter.kept_whole.len()),
            vocab_kept_whole_examples: splitter.kept_whole.iter().take(TOP_CHANGES).map(|(w, _)| w.clone()).collect(),
            vocab_words_split: res.vocab.map(|_| acc.in_vocab_splits),
        },
        vocab,
        config: cfg.clone(),
    };
    Ok((procedures, report))
}

/// The segmenter's word model learned from `procedures` as `clean` learns it (after normalisation), for inspecting
/// the segmenter (`stepwise clean --segment-tokens`) and comparing it with other tools. Split tokens with
/// [`WordModel::split_token`].
pub fn learn_word_model(mut procedures: Vec<Procedure>, cfg: &CleanConfig, res: CleanResources<'_>) -> WordModel {
    procedures.par_iter_mut().for_each(|p| {
        let mut acc = ChunkAcc::default();
        for_each_field(p, |id, field, text| normalize_field(text, id, field, cfg, &mut acc));
    });
    Splitter::learn(&procedures, cfg, res).model
}

/// Clean the corpus folder (or procedure-JSONL file) `input` into the corpus folder `output`, atomically.
/// The output references the input's images (image root relative to `output`) and carries its task set unchanged.
pub fn clean_corpus_dir(
    input: &Path,
    output: &Path,
    cfg: &CleanConfig,
    res: CleanResources<'_>,
    overwrite: bool,
) -> Result<CleanReport> {
    cfg.compile()?;
    let spinner = stepwise_core::progress::spinner("loading corpus");
    let corpus = Corpus::load(input)?;
    spinner.finish_and_clear();
    let image_root = stepwise_core::paths::image_root_for(output, &corpus.image_root)?;
    let taskset = corpus.taskset_dir();
    let source_file: PathBuf =
        if input.is_file() { input.to_path_buf() } else { input.join(stepwise_core::corpus::PROCEDURES_JSONL) };
    let (procedures, report) = clean_procedures(corpus.procedures, cfg, res)?;

    let out = OutputDir::create(output, overwrite)?;
    let mut manifest = Manifest::new("corpus");
    manifest.add_inputs(&[source_file])?;
    manifest.image_root = Some(image_root);
    manifest.param("clean", cfg);
    if let Some(v) = res.vocab.and_then(|v| v.source.as_ref()) {
        manifest.param("vocab", v.to_string_lossy());
    }
    if let Some(d) = res.dictionary.and_then(|v| v.source.as_ref()) {
        manifest.param("dictionary", d.to_string_lossy());
    }
    manifest.count("procedures_dropped", report.procedures_in - report.procedures_out);
    write_corpus_files(out.path(), &procedures, &mut manifest)?;
    if let Some(ts) = taskset {
        copy_dir(&ts, &out.path().join(TASKSET_DIR))?;
    }
    write_string_atomic(&out.path().join(CLEAN_REPORT_JSON), &to_pretty_sorted(&report))?;
    write_string_atomic(&out.path().join(CLEAN_REPORT_MD), &report.to_markdown())?;
    out.commit()?;
    Ok(report)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    copy_dir_within(from, to, &mut stepwise_core::paths::WalkAncestors::default())
}

fn copy_dir_within(from: &Path, to: &Path, ancestors: &mut stepwise_core::paths::WalkAncestors) -> Result<()> {
    if let Some(ancestor) = ancestors.enter(from)? {
        return Err(stepwise_core::Error::bad_input(format!(
            "{}: a symlink loop (it leads back to {}); remove the link",
            from.display(),
            ancestor.display()
        )));
    }
    std::fs::create_dir_all(to).at(to)?;
    let mut entries: Vec<_> = std::fs::read_dir(from).at(from)?.collect::<std::io::Result<_>>().at(from)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir_within(&src, &dst, ancestors)?;
        } else if src.is_file() {
            std::fs::copy(&src, &dst).at(&src)?;
        } else {
            // A FIFO would block the copy forever, a device never end it; a dangling link has nothing to copy.
            return Err(stepwise_core::Error::bad_input(format!(
                "{}: not a regular file or folder (a pipe, a device or a broken link?); remove it",
                src.display()
            )));
        }
    }
    ancestors.leave();
    Ok(())
}

#[cfg(test)]
mod tests;
