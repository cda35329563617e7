//! stepwise-score: the field's metrics computed the way the papers computed them, with their intervals. It
//! depends on `stepwise-core` only, so whatever scores (the annotation app, `eval`, the studies) builds without
//! the models.
//!
//! - [`bootstrap`]: percentile bootstrap confidence intervals (seeded, thread-count independent), reusable
//! - [`predictions`]: reading prediction, annotation and sequencing-instance files with precise errors
//! - [`accuracy`]: multiple-choice accuracy per task (missing = wrong, invalid, extra, refusal of foreign files)
//! - [`choice_eval`]: predictions (a file, a folder per set, or one file routed by qid) scored against task sets
//! - [`sequence_metrics`]: position accuracy, PMR, distance, L_q, L_r, Kendall's τ, and pooled variants
//! - [`multiref`]: picking the best of several valid reference orders
//! - [`agreement`]: Cohen's κ between orderings (pair one-hot) and over alternative orders
//! - [`sequencing_eval`]: scoring a predictions file against sequencing instances; agreement reports
//! - [`compare`]: two methods (each one predictions file or several, e.g. seeds) compared on the same items, paired
//! - [`eval_outcome`]: what an evaluation produced (tables, results JSON, per-item lines) and its results folder
//! - [`sequencing_table`]: the sequencing results table (paper Table 2 layout) and its Table 4 breakdown
//! - [`markdown`]: number formatting of the reports
//! - [`r2vq`]: R2VQ answers scored by exact match and token F1 per question family

pub mod accuracy;
pub mod agreement;
pub mod bootstrap;
pub mod choice_eval;
pub mod compare;
pub mod eval_outcome;
pub mod markdown;
pub mod multiref;
pub mod predictions;
pub mod r2vq;
pub mod sequence_metrics;
pub mod sequencing_eval;
pub mod sequencing_table;
