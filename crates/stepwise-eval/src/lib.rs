//! stepwise-eval: dataset audits (the scoring itself is `stepwise-score`; the model studies live beside their
//! models in `stepwise-models`).
//!
//! - [`audit`]: bias audit of task sets (Hasty Student, distance probe, shortcut panel, overlap, position, lengths)
//! - [`aflite`]: adversarial filtering (AFLite) of the questions the distance probe answers from surface features

pub mod aflite;
pub mod audit;
