//! stepwise-eval: dataset audits and the studies that need models to measure a dataset (the scoring itself is
//! `stepwise-score`).
//!
//! - [`audit`]: bias audit of task sets (Hasty Student, distance probe, shortcut panel, overlap, position, lengths)
//! - [`aflite`]: adversarial filtering (AFLite) of the questions the distance probe answers from surface features
//! - [`study`]: the Meta-RecipeQA model study over a suite (train, select, test every model on every setting)

pub mod aflite;
pub mod audit;
pub mod study;
