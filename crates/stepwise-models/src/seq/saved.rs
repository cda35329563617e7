//! A sequencing model on disk (`MODEL_DIR` of `stepwise train-seq` or `ENCODER_DIR` of `stepwise pretrain`):
//! `weights.safetensors`, `config.json` (`{"sequencing": model config, "train": ..., "pretrain": ...}`, which
//! tells it from a multiple-choice model), `features.json` and `training.json`, as for [`crate::m3c::saved`].

use std::path::Path;

use serde::{Deserialize, Serialize};
use stepwise_core::json::{read_json, to_pretty_sorted};
use stepwise_core::output::{write_file_atomic, write_string_atomic};
use stepwise_core::{Error, Result};

use super::model::{SeqConfig, SeqModel};
use super::pretrain::PretrainConfig;
use super::train::{SeqTrainConfig, SeqTrainReport};
use crate::m3c::saved::{CONFIG_FILE, FEATURES_FILE, FeatureIdentity, TRAINING_FILE, WEIGHTS_FILE};
use crate::optim::{load_weights, weights_bytes};

/// `config.json` of a sequencing model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedSeqConfig {
    pub sequencing: SeqConfig,
    pub train: SeqTrainConfig,
    /// Set for a pretrained encoder (its objectives); `None` for a fine-tuned model.
    #[serde(default)]
    pub pretrain: Option<PretrainConfig>,
    /// For a fine-tuned model: the pretrained encoder it started from (its folder as given).
    #[serde(default)]
    pub encoder_from: Option<String>,
}

/// Write the model files into `dir` (an output folder the caller commits).
pub fn save(
    dir: &Path,
    model: &SeqModel,
    config: &SavedSeqConfig,
    report: &SeqTrainReport,
    features: &[FeatureIdentity],
) -> Result<()> {
    let bytes = weights_bytes(&model.params)?;
    write_file_atomic(&dir.join(WEIGHTS_FILE), |w| std::io::Write::write_all(w, &bytes))?;
    write_string_atomic(&dir.join(CONFIG_FILE), &to_pretty_sorted(config))?;
    write_string_atomic(&dir.join(FEATURES_FILE), &to_pretty_sorted(&features))?;
    write_string_atomic(&dir.join(TRAINING_FILE), &to_pretty_sorted(report))
}

/// Whether `dir` holds a sequencing model (its config.json has a `sequencing` section).
pub fn is_sequencing_model(dir: &Path) -> bool {
    read_json(&dir.join(CONFIG_FILE)).is_ok_and(|v| v.get("sequencing").is_some())
}

/// A sequencing model read back from `dir`.
pub struct LoadedSeq {
    pub model: SeqModel,
    pub config: SavedSeqConfig,
    pub features: Vec<FeatureIdentity>,
}

/// Read a sequencing model folder (with its pretraining heads when it is a pretrained encoder); errors name the
/// file.
pub fn load(dir: &Path) -> Result<LoadedSeq> {
    if !dir.join(WEIGHTS_FILE).exists() {
        return Err(Error::bad_input(format!(
            "{}: not a model folder (no {WEIGHTS_FILE}; make one with `stepwise pretrain` or `stepwise train-seq`)",
            dir.display()
        )));
    }
    let file = dir.join(CONFIG_FILE);
    let config: SavedSeqConfig =
        serde_json::from_value(read_json(&file)?).map_err(|e| Error::bad_input(format!("{}: {e}", file.display())))?;
    let ffile = dir.join(FEATURES_FILE);
    let features: Vec<FeatureIdentity> = serde_json::from_value(read_json(&ffile)?)
        .map_err(|e| Error::bad_input(format!("{}: {e}", ffile.display())))?;
    let bad = |e: candle_core::Error| Error::bad_input(format!("{}: {e}", file.display()));
    let mut model = SeqModel::new(config.sequencing.clone(), 0).map_err(bad)?;
    if config.pretrain.is_some() {
        model = model.with_pretraining_heads().map_err(bad)?;
    }
    load_weights(&model.params, &dir.join(WEIGHTS_FILE))?;
    Ok(LoadedSeq { model, config, features })
}
