//! `stepwise clean`: clean a corpus (markup, Unicode, whitespace, fused tokens, filters) into a new corpus, with a
//! report of what changed; or, with `--segment-tokens`, show how the segmenter splits given tokens.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use stepwise_core::corpus::Corpus;
use stepwise_ingest::clean::learn_word_model;
use stepwise_ingest::segment::SegmentParams;
use stepwise_ingest::{CleanConfig, CleanResources, Vocabulary, clean_corpus_dir};

use crate::usage_bail;

/// Clean a corpus into a new corpus folder and report what changed (clean_report.md / .json).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise clean corpora/recipeqa -o corpora/recipeqa-clean --vocab models/glove-6b-50d/vocab.txt\n  \
    stepwise clean corpora/mine -o corpora/mine-clean --lang en --exclude-title '(?i)soap|candle' --ascii-fold\n  \
    stepwise clean corpora/mine -o out --min-steps 0 --no-max-steps --dictionary words.txt\n  \
    stepwise clean corpora/recipeqa --segment-tokens tokens.txt > splits.tsv\n\n\
    Pipeline: strip markup → NFKC → (ASCII folding) → missing sentence spaces → metadata filters → learn word \
    frequencies from the corpus (+ --dictionary) → split numbers from units and fused words → collapse whitespace → \
    drop empty steps → step-count bounds. Defaults follow Meta-RecipeQA's cleaning of RecipeQA (3–25 steps).")]
pub struct Args {
    /// The corpus folder (or procedure-JSONL file) to clean.
    #[arg(value_name = "CORPUS")]
    pub input: PathBuf,
    /// The cleaned corpus folder to create.
    #[arg(short, long, value_name = "CORPUS2", required_unless_present = "segment_tokens")]
    pub output: Option<PathBuf>,
    /// Replace CORPUS2 if it exists.
    #[arg(long)]
    pub force: bool,

    /// Drop procedures with fewer steps (after empty steps are removed).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub min_steps: usize,
    /// Drop procedures with more steps.
    #[arg(long, value_name = "N", default_value_t = 25, conflicts_with = "no_max_steps")]
    pub max_steps: usize,
    /// No upper bound on steps.
    #[arg(long)]
    pub no_max_steps: bool,
    /// Keep steps with no title, text or image.
    #[arg(long)]
    pub keep_empty_steps: bool,
    /// Drop procedures whose id matches this regular expression (repeatable).
    #[arg(long, value_name = "REGEX")]
    pub exclude_id: Vec<String>,
    /// Drop procedures whose title matches this regular expression (repeatable), e.g. '(?i)soap|candle'.
    #[arg(long, value_name = "REGEX")]
    pub exclude_title: Vec<String>,
    /// Drop procedures of this category (repeatable).
    #[arg(long, value_name = "NAME")]
    pub exclude_category: Vec<String>,
    /// Keep only procedures of these categories (repeatable).
    #[arg(long, value_name = "NAME")]
    pub include_category: Vec<String>,
    /// Keep only procedures in these languages (declared `lang`, else guessed), e.g. `--lang en,zh`.
    #[arg(long = "lang", value_name = "CODE", value_delimiter = ',')]
    pub languages: Vec<String>,

    /// Do not strip HTML/CSS, entities, Markdown and BBCode.
    #[arg(long)]
    pub no_markup: bool,
    /// Do not apply Unicode NFKC.
    #[arg(long)]
    pub no_nfkc: bool,
    /// Fold accents and typographic punctuation to ASCII.
    #[arg(long)]
    pub ascii_fold: bool,
    /// Do not insert missing spaces after sentence ends ("mix.Next").
    #[arg(long)]
    pub no_sentence_spacing: bool,
    /// Do not split numbers from units ("350F", "2cups").
    #[arg(long)]
    pub no_split_units: bool,
    /// Do not split fused words ("preheatoven").
    #[arg(long)]
    pub no_segment: bool,
    /// Do not collapse whitespace.
    #[arg(long)]
    pub no_collapse_whitespace: bool,
    /// Turn line breaks inside steps into spaces.
    #[arg(long)]
    pub single_line: bool,

    /// Extra known words for the segmenter: one per line (`word` or `word count`; a frequency-sorted list is best).
    #[arg(long, value_name = "FILE")]
    pub dictionary: Option<PathBuf>,
    /// Reference vocabulary (e.g. GloVe's words, one per line): its words are never split, and the report gives
    /// in-vocabulary rates before and after cleaning.
    #[arg(long, value_name = "FILE")]
    pub vocab: Option<PathBuf>,
    /// Segmenter: shortest token considered for splitting, in letters.
    #[arg(long, value_name = "N", default_value_t = SegmentParams::default().min_len)]
    pub min_word_len: usize,
    /// Segmenter: corpus tokens seen this often are known words.
    #[arg(long, value_name = "N", default_value_t = SegmentParams::default().trust_count)]
    pub trust_count: u64,
    /// Segmenter: cost of each extra piece (higher splits less).
    #[arg(long, value_name = "X", default_value_t = SegmentParams::default().split_penalty)]
    pub split_penalty: f64,
    /// Segmenter: cost per letter of an unknown word (higher splits more).
    #[arg(long, value_name = "X", default_value_t = SegmentParams::default().unknown_char_cost)]
    pub unknown_char_cost: f64,
    /// Segmenter: pieces of at most three letters must be among this many most frequent known words
    /// [default: 150, or 5000 with --dictionary].
    #[arg(long, value_name = "N")]
    pub short_piece_rank: Option<usize>,
    /// Examples per rule in the report.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub examples: usize,

    /// Do not clean: print how the segmenter learned from CORPUS splits the tokens of FILE (one per line), as
    /// `token<TAB>pieces` on stdout; timing on stderr.
    #[arg(long, value_name = "FILE")]
    pub segment_tokens: Option<PathBuf>,
}

impl Args {
    fn config(&self) -> CleanConfig {
        CleanConfig {
            strip_markup: !self.no_markup,
            nfkc: !self.no_nfkc,
            ascii_fold: self.ascii_fold,
            fix_sentence_spacing: !self.no_sentence_spacing,
            split_units: !self.no_split_units,
            segment: !self.no_segment,
            segment_params: SegmentParams {
                min_len: self.min_word_len,
                trust_count: self.trust_count,
                split_penalty: self.split_penalty,
                unknown_char_cost: self.unknown_char_cost,
                short_piece_rank: self.short_piece_rank,
                ..SegmentParams::default()
            },
            collapse_whitespace: !self.no_collapse_whitespace,
            keep_newlines: !self.single_line,
            drop_empty_steps: !self.keep_empty_steps,
            min_steps: (self.min_steps > 0).then_some(self.min_steps),
            max_steps: (!self.no_max_steps).then_some(self.max_steps),
            exclude_id: self.exclude_id.clone(),
            exclude_title: self.exclude_title.clone(),
            exclude_category: self.exclude_category.clone(),
            include_category: self.include_category.clone(),
            languages: self.languages.iter().map(|l| l.trim().to_ascii_lowercase()).filter(|l| !l.is_empty()).collect(),
            examples: self.examples,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.min_word_len < 2 {
        usage_bail!("--min-word-len must be at least 2");
    }
    if !(args.split_penalty.is_finite() && args.unknown_char_cost.is_finite()) {
        usage_bail!("--split-penalty and --unknown-char-cost must be finite numbers");
    }
    let cfg = args.config();
    let dictionary = args.dictionary.as_deref().map(Vocabulary::load).transpose()?;
    let vocab = args.vocab.as_deref().map(Vocabulary::load).transpose()?;
    let res = CleanResources { dictionary: dictionary.as_ref(), vocab: vocab.as_ref() };
    if let Some(file) = &args.segment_tokens {
        return segment_tokens(&args, &cfg, res, file);
    }
    let Some(output) = &args.output else { usage_bail!("-o/--output is required") };
    let report = clean_corpus_dir(&args.input, output, &cfg, res, args.force)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!(
            "cleaned {} → {} procedures ({} → {} steps) into {}",
            report.procedures_in,
            report.procedures_out,
            report.steps_in,
            report.steps_out,
            output.display()
        );
        for (name, r) in &report.rules {
            if r.edits > 0 {
                eprintln!("  {name:<17} {:>9} edits in {:>8} fields", r.edits, r.fields_changed);
            }
        }
        for (name, f) in &report.filters {
            eprintln!("  filter {name:<17} {:>6} procedures, {:>6} steps dropped", f.procedures, f.steps);
        }
        if let Some(v) = &report.vocab {
            eprintln!("  in-vocabulary rate ({} words): {}", v.vocab_words, v.rates_line());
        }
        if let Some(kept) = report.segmenter.vocab_kept_whole {
            eprintln!("  segmenter kept {kept} vocabulary words whole that the corpus model alone would split");
        }
        eprintln!("  report: {}", output.join(stepwise_ingest::clean::CLEAN_REPORT_MD).display());
    }
    Ok(())
}

/// `--segment-tokens`: learn the model from the corpus, split each token of the file (single thread, so the time
/// compares with single-threaded tools), print `token<TAB>pieces`.
fn segment_tokens(
    args: &Args,
    cfg: &CleanConfig,
    res: CleanResources<'_>,
    file: &std::path::Path,
) -> anyhow::Result<()> {
    let text = stepwise_core::json::read_text(file)?;
    let tokens: Vec<&str> = text.lines().map(str::trim).filter(|t| !t.is_empty()).collect();
    let corpus = Corpus::load(&args.input)?;
    let t = Instant::now();
    let model = learn_word_model(corpus.procedures, cfg, res);
    let learn_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let pieces: Vec<Option<Vec<&str>>> = tokens.iter().map(|tok| model.split_token(tok)).collect();
    let seconds = t.elapsed().as_secs_f64();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (tok, p) in tokens.iter().zip(&pieces) {
        match p {
            Some(p) => writeln!(out, "{tok}\t{}", p.join(" "))?,
            None => writeln!(out, "{tok}\t{tok}")?,
        }
    }
    out.flush()?;
    let split = pieces.iter().filter(|p| p.is_some()).count();
    eprintln!(
        "{{\"tokens\": {}, \"split\": {split}, \"segment_seconds\": {seconds:.6}, \"learn_seconds\": {learn_seconds:.3}, \
         \"known_words\": {}}}",
        tokens.len(),
        model.len()
    );
    Ok(())
}
