//! stepwise-models: baselines and trainable models over precomputed features (CPU).
//!
//! Step sequencing:
//! - [`item_features`]: the feature vector of each item of a sequencing instance (text, image, multimodal)
//! - [`sequencing_features`]: one text and/or image store, restricted to the items of the instances
//! - [`random_order`]: the random baseline
//! - [`text_position`]: the text-position heuristic (position cue words)
//! - [`image_chain`]: the image-chain heuristic (nearest-neighbour chaining)
//! - [`pairwise`]: the pairwise order classifier (candle) — trained on pairs, decoded by topological sort
//! - [`topo_decode`]: topological-sort decoding of pairwise probabilities, breaking cycles
//! - [`sequencer`]: running a baseline over an instances file (split or cross-validation)
//! - [`sequencer_table`]: the paper-style baselines table — every baseline on every feature view, scored
//! - [`seq`]: the sequencing paper's models — multimodal step encoder, BERSON-style decoder, pretraining
//! - [`order_evidence`]: training-free order evidence of a modality's features (golden-set selection)
//!
//! Trainable models (candle):
//! - [`ops`]: ops with one-pass backward on the packed GEMM (matmul, linear, softmax, layer norm, GELU)
//! - [`nn`]: layers with gradients (seeded parameters, linear, layer norm, masked BiLSTM, attention, transformer)
//! - [`optim`]: Adam and kill-safe checkpoints (weights, optimiser moments, best weights, run state)
//!
//! Multiple choice (the RecipeQA tasks):
//! - [`model_features`]: the stores a model reads, the distractor pool, texts encoded on the fly, their identities
//! - [`m3c`]: the GM3C framework — Impatient Reader, BiDAF and HTRN over modality encoders, trained with candle
//! - [`hasty`]: the Hasty Student (RecipeQA §4.2): answers from choice–question similarity alone
//! - [`question_vectors`]: the vectors of a question's items, found from its provenance, file names or texts
//! - [`logreg`]: L2 logistic regression by Newton's method (the distance probe's classifier)
//!
//! Question answering (R2VQ):
//! - [`hashed`]: linear models over hashed features trained by the averaged perceptron (span ranker, tagger)
//! - [`r2vq_text`]: the text-only baseline (sentence retrieval and a rule per question template)
//! - [`r2vq_span`]: the learned text method — a span ranker for the semantic-role templates
//! - [`r2vq_tagger`]: a cooking-role tagger for recipes without annotation (writes the inline-tagged layout)
//! - [`r2vq_answer`]: answering by route — a family's program, else the text method, else unanswerable

pub mod hashed;
pub mod hasty;
pub mod image_chain;
pub mod item_features;
pub mod logreg;
pub mod m3c;
pub mod model_features;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod order_evidence;
pub mod pairwise;
pub mod question_vectors;
pub mod r2vq_answer;
pub mod r2vq_span;
pub mod r2vq_tagger;
pub mod r2vq_text;
pub mod random_order;
pub mod seq;
pub mod sequencer;
pub mod sequencer_table;
pub mod sequencing_features;
pub mod text_position;
pub mod topo_decode;
