//! stepwise-tasks: benchmark questions from a corpus and its features — RecipeQA's four tasks made the way
//! RecipeQA made them or with Meta-RecipeQA's control knobs, suites of all settings, and sequencing instances.
//!
//! - [`config`]: tasks' parameters, modes and knob settings ([`GenerateConfig`], [`Mode`], [`KnobSetting`])
//! - [`calibrated`]: calibrated knobs: negatives that put the answer's distance rank uniformly over the choices
//! - [`catalog`]: the items of a task (titles, texts, images) with vectors and owning procedures
//! - [`plan`]: procedure filters and question positions (RecipeQA mode, knob 1)
//! - [`neighbors`]: nearest neighbours among other procedures' items
//! - [`ivf`]: inverted-file (k-means) neighbour search for large catalogs
//! - [`range`]: exact range search (every item within a distance) over the k-means lists, for knob 2's widening
//! - [`negatives`]: distractor rules (adaptive neighbourhood, knobs 2 and 3, wrong orderings)
//! - [`questions`]: one question of each task in the RecipeQA layout, with provenance
//! - [`generate`]: one task in one or more modes, in parallel and deterministic; knob settings sharing k1 built
//!   together and paired (same questions, different negatives)
//! - [`suite`]: all settings × tasks with train/val/test splits, counts table, on-disk layout and
//!   [`suite::taskset_dir`] (visual ordering is written once per (k1, k2))
//! - [`merge`]: joining the parts of a sharded sweep (`--shard I/N`) into the suite a single run writes
//! - [`taskset_writer`]: task sets streamed to JSON + Parquet as they are generated
//! - [`counts`]: skip reasons and counts
//! - [`titles`]: step-number removal and content keys
//! - [`sequencing`]: step-sequencing instances
//! - [`r2vq`]: tasks from R2VQ annotation (event ordering)
//! - [`export`]: suites and task sets as Hugging Face datasets, VLMEvalKit TSVs and lmms-eval tasks

pub mod calibrated;
pub mod catalog;
pub mod config;
pub mod counts;
pub mod export;
pub mod generate;
pub mod ivf;
pub mod merge;
pub mod negatives;
pub mod neighbors;
pub mod plan;
pub mod questions;
pub mod r2vq;
pub mod range;
pub mod sequencing;
pub mod suite;
pub mod taskset_writer;
pub mod titles;

pub use config::{
    ClozeField, GenerateConfig, ItemKind, KnobSetting, KnobsMode, Mode, NeighborSearch, QuestionsPerProcedure,
};
pub use counts::{Counts, SkipReason};
pub use generate::{Generated, Inputs, TaskGenerator, generate};
