//! stepwise-core: the data model every stepwise crate shares.
//!
//! - [`procedure`]: procedures, steps and their annotations (the procedure-JSONL interchange format)
//! - [`corpus`]: a corpus folder on disk (JSONL + Parquet + manifest)
//! - [`taskset`]: multiple-choice task sets in RecipeQA's JSON layout
//! - [`family`]: task families (RecipeQA's question types, sequencing, R2VQ) as one typed value
//! - [`provenance`]: the provenance stepwise's generators record with each question, read in one place
//! - [`sequencing`]: step-sequencing instances and predictions
//! - [`r2vq`]: R2VQ recipes with their token-level annotation (SemEval-2022 Task 9 layout) and questions
//! - [`split`]: train/val/test splits by procedure
//! - [`shortcut`]: the per-choice features the shortcut probes read (and calibrated knobs balance)
//! - [`manifest`]: the `manifest.json` file (what an output holds and how it was made)
//! - [`json`]: JSON/JSONL reading with precise errors, canonical writing
//! - [`parquet`]: Parquet copies of tables
//! - [`output`]: atomic output folders and files
//! - [`paths`]: lexical path arithmetic (absolute, normalised, relative)
//! - [`shard`]: one part of a job split over machines (`--shard I/N`) and the check that parts are complete
//! - [`html`]: HTML escaping
//! - [`error`]: the error type and exit codes
//! - [`rng`], [`hash`], [`progress`]: seeded randomness, content hashes, progress bars

pub mod corpus;
pub mod error;
pub mod family;
pub mod hash;
pub mod html;
pub mod json;
pub mod manifest;
pub mod output;
pub mod parquet;
pub mod paths;
pub mod procedure;
pub mod progress;
pub mod provenance;
pub mod r2vq;
pub mod rng;
pub mod sequencing;
pub mod shard;
pub mod shortcut;
pub mod split;
pub mod taskset;

pub use corpus::Corpus;
pub use error::{Error, IoResultExt, Location, Result};
pub use family::{TaskFamily, TaskSelection};
pub use manifest::Manifest;
pub use procedure::{Procedure, ProcedureAnnotations, Step, StepAnnotations};
pub use provenance::QuestionProvenance;
pub use sequencing::{OrderPrediction, SequencingInstance};
pub use split::Split;
pub use taskset::{Choice, ItemModality, Question, Task, TaskSet, TaskShape};
