//! stepwise-eval: the field's metrics computed the way the papers computed them, and dataset audits.
//!
//! - [`bootstrap`]: percentile bootstrap confidence intervals (seeded, thread-count independent), reusable
//! - [`predictions`]: reading prediction, annotation and sequencing-instance files with precise errors
//! - [`accuracy`]: multiple-choice accuracy per task (missing = wrong, invalid, extra, refusal of foreign files)
//! - [`sequence_metrics`]: position accuracy, PMR, distance, L_q, L_r, Kendall's τ, and pooled variants
//! - [`multiref`]: picking the best of several valid reference orders
//! - [`agreement`]: Cohen's κ between orderings (pair one-hot) and over alternative orders
//! - [`sequencing_eval`]: scoring a predictions file against sequencing instances; agreement reports
//! - [`sequencing_table`]: the sequencing results table (paper Table 2 layout) and its Table 4 breakdown
//! - [`markdown`]: number formatting of the reports
//! - [`r2vq`]: R2VQ answers scored by exact match and token F1 per question family
//! - [`study`]: the Meta-RecipeQA model study over a suite (train, select, test every model on every setting)
//! - [`audit`]: bias audit of task sets (Hasty Student, distance probe, shortcut panel, overlap, position, lengths)
//! - [`aflite`]: adversarial filtering (AFLite) of the questions the distance probe answers from surface features

pub mod accuracy;
pub mod aflite;
pub mod agreement;
pub mod audit;
pub mod bootstrap;
pub mod markdown;
pub mod multiref;
pub mod predictions;
pub mod r2vq;
pub mod sequence_metrics;
pub mod sequencing_eval;
pub mod sequencing_table;
pub mod study;
