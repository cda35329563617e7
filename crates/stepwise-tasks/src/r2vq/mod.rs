//! Tasks from R2VQ annotation (Pustejovsky et al., SemEval-2022 Task 9).
//!
//! - [`annotate`]: procedures with span annotation (the built-in world) as R2VQ recipes
//! - [`event_ordering`]: the paper's event-ordering study (§4.2): sentences that mention one ingredient (EVENT)
//!   versus consecutive sentences (SENT), as sequencing instances
//! - [`generate`]: question generation from annotation (candidates asked through the programs, distractors,
//!   balance, split by recipe)
//! - [`programs`]: the families' programs over the annotation graph, and answering a question with them
//! - [`questions`]: the release's question templates, their arguments and candidate families

pub mod annotate;
pub mod event_ordering;
pub mod generate;
pub mod programs;
pub mod questions;
