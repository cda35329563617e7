//! stepwise-ingest: reading procedure corpora, cleaning them, and their statistics.
//!
//! Reading
//! - [`format`]: the [`Format`] trait and [`Registry`] of input formats (the extension point for new formats)
//! - [`readers`]: the built-in formats (procedure JSONL, RecipeQA questions, RecipeQA recipes)
//! - [`images`]: image path rebasing, missing-image policy, copying images into a corpus
//! - [`ingest`](mod@ingest): `stepwise ingest` as a library call (inputs → corpus folder)
//!
//! Cleaning
//! - [`clean`]: the cleaning pipeline (`stepwise clean`): text rules, filters, report
//! - [`text`]: tokenizer, markup stripping, Unicode/whitespace normalisation, number–unit splitting, language guess
//! - [`segment`]: the maximum-likelihood splitter of fused words
//!
//! Measuring
//! - [`stats`]: corpus and task-set statistics (`stepwise stats`)
//! - [`vocab`]: word lists (reference vocabularies, dictionaries) and in-vocabulary rates
//! - [`counts`]: fast token counting
//! - [`synth`]: seeded synthetic procedure JSONL (the ingest benchmark's input)

pub mod clean;
pub mod counts;
pub mod format;
pub mod images;
pub mod ingest;
pub mod readers;
pub mod segment;
pub mod stats;
pub mod synth;
pub mod text;
pub mod vocab;

pub use clean::{CleanConfig, CleanReport, CleanResources, clean_corpus_dir, clean_procedures};
pub use format::{Format, Ingested, Origin, ReadOptions, Registry, Sniff};
pub use images::OnMissingImage;
pub use ingest::{IngestOptions, IngestReport, ingest};
pub use stats::{GroupBy, Stats, corpus_stats};
pub use vocab::Vocabulary;
