//! A trained model on disk (`MODEL_DIR`): `weights.safetensors`, `config.json` (model and training
//! configuration), `features.json` (the identity of every feature store it was trained on), `training.json` (the
//! training report and curve). The CLI adds the curve plot and a manifest.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use stepwise_core::json::{read_json, to_pretty_sorted};
use stepwise_core::output::{write_file_atomic, write_string_atomic};
use stepwise_core::{Error, Result};

use super::model::{M3cModel, ModelConfig};
use super::train::{TrainConfig, TrainReport, load_weights, weights_bytes};

pub const WEIGHTS_FILE: &str = "weights.safetensors";
pub const CONFIG_FILE: &str = "config.json";
pub const FEATURES_FILE: &str = "features.json";
pub const TRAINING_FILE: &str = "training.json";

/// What makes two feature stores interchangeable for a model: the same encoder (name, version, dimension,
/// options, seed) and, for encoders fitted on a corpus (word2vec, TF-IDF), the same fitting input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureIdentity {
    /// `text`, `tokens`, `image`, or `strings` (texts encoded on the fly).
    pub role: String,
    pub encoder: String,
    pub version: String,
    pub dim: usize,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    pub seed: u64,
    /// BLAKE3 of what a fitted encoder was fitted on (None for pretrained and training-free encoders).
    #[serde(default)]
    pub fitted_on: Option<String>,
}

/// `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedConfig {
    pub model: ModelConfig,
    pub train: TrainConfig,
}

/// Write the model files into `dir` (an output folder the caller commits).
pub fn save(
    dir: &Path,
    model: &M3cModel,
    train: &TrainConfig,
    report: &TrainReport,
    features: &[FeatureIdentity],
) -> Result<()> {
    let bytes = weights_bytes(model)?;
    write_file_atomic(&dir.join(WEIGHTS_FILE), |w| std::io::Write::write_all(w, &bytes))?;
    let cfg = SavedConfig { model: model.config.clone(), train: train.clone() };
    write_string_atomic(&dir.join(CONFIG_FILE), &to_pretty_sorted(&cfg))?;
    write_string_atomic(&dir.join(FEATURES_FILE), &to_pretty_sorted(&features))?;
    write_string_atomic(&dir.join(TRAINING_FILE), &to_pretty_sorted(report))
}

/// A model read back from `dir`, with the feature identities it was trained on.
pub struct Loaded {
    pub model: M3cModel,
    pub config: SavedConfig,
    pub features: Vec<FeatureIdentity>,
}

/// Read a model folder; errors name the file.
pub fn load(dir: &Path) -> Result<Loaded> {
    if !dir.join(WEIGHTS_FILE).exists() {
        return Err(Error::bad_input(format!(
            "{}: not a model folder (no {WEIGHTS_FILE}; train one with `stepwise train`)",
            dir.display()
        )));
    }
    let parse = |file: &str| -> Result<serde_json::Value> { read_json(&dir.join(file)) };
    let config: SavedConfig = serde_json::from_value(parse(CONFIG_FILE)?)
        .map_err(|e| Error::bad_input(format!("{}: {e}", dir.join(CONFIG_FILE).display())))?;
    let features: Vec<FeatureIdentity> = serde_json::from_value(parse(FEATURES_FILE)?)
        .map_err(|e| Error::bad_input(format!("{}: {e}", dir.join(FEATURES_FILE).display())))?;
    let model = M3cModel::new(config.model.clone(), 0)
        .map_err(|e| Error::bad_input(format!("{}: {e}", dir.join(CONFIG_FILE).display())))?;
    load_weights(&model, &dir.join(WEIGHTS_FILE))?;
    Ok(Loaded { model, config, features })
}

/// Whether the stores given now match those the model was trained on, role by role; the error says which store
/// differs and how.
pub fn check_features(
    trained: &[FeatureIdentity],
    given: &[(FeatureIdentity, String)],
) -> std::result::Result<(), String> {
    for t in trained {
        let Some((g, origin)) = given.iter().find(|(g, _)| g.role == t.role) else {
            return Err(format!(
                "the model was trained with {} features from `{}` ({}-d) but none were given",
                t.role, t.encoder, t.dim
            ));
        };
        let mut diffs = Vec::new();
        if g.encoder != t.encoder {
            diffs.push(format!("encoder `{}` instead of `{}`", g.encoder, t.encoder));
        }
        if g.version != t.version {
            diffs.push(format!("encoder version {} instead of {}", g.version, t.version));
        }
        if g.dim != t.dim {
            diffs.push(format!("dimension {} instead of {}", g.dim, t.dim));
        }
        if g.options != t.options {
            diffs.push(format!("options {:?} instead of {:?}", g.options, t.options));
        }
        if g.fitted_on != t.fitted_on || (t.fitted_on.is_some() && g.seed != t.seed) {
            diffs.push(
                "the encoder was fitted on other data or with another seed (its vectors are not comparable)".into(),
            );
        }
        if !diffs.is_empty() {
            return Err(format!(
                "{origin}: these {} features do not match the ones the model was trained on: {}",
                t.role,
                diffs.join("; ")
            ));
        }
    }
    Ok(())
}
