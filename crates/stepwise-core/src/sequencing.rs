//! Step-sequencing instances: shuffled steps of one procedure and the orders that put them right.
//!
//! Conventions (used by generators, models and metrics alike): `items` are in *shuffled* order; an order (a
//! reference or a prediction) is a permutation of `0..items.len()` listing item indices in procedural order.
//! `references[0]` is the authored order; further references are alternative valid orders.

use serde::{Deserialize, Serialize};

/// The instances file inside a sequencing folder (`stepwise generate --task sequencing`).
pub const INSTANCES_JSONL: &str = "instances.jsonl";
/// Its Parquet copy.
pub const INSTANCES_PARQUET: &str = "instances.parquet";

/// One step shown to a sequencing model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequencingItem {
    /// Index of the step in its procedure.
    pub step: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequencingInstance {
    pub id: String,
    pub procedure: String,
    pub split: String,
    /// `text`, `image` or `multimodal`.
    pub modality: String,
    pub items: Vec<SequencingItem>,
    /// Valid orders (permutations of item indices); the first is the authored order.
    pub references: Vec<Vec<usize>>,
}

/// A multiple-choice prediction: `{"qid": ..., "answer": i}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChoicePrediction {
    pub qid: String,
    pub answer: i64,
}

/// A sequencing prediction: `{"id": ..., "order": [...]}` (item indices in predicted procedural order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPrediction {
    pub id: String,
    pub order: Vec<usize>,
}

/// True when `order` is a permutation of `0..n`.
pub fn is_permutation(order: &[usize], n: usize) -> bool {
    if order.len() != n {
        return false;
    }
    let mut seen = vec![false; n];
    for &i in order {
        if i >= n || seen[i] {
            return false;
        }
        seen[i] = true;
    }
    true
}
