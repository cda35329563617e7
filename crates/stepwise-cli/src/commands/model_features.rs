//! The feature options of the model commands (`train`, `predict`, `study`, `pretrain`, `train-seq`,
//! `seq-study`); the loading itself is `stepwise_models::model_features`.

use std::path::PathBuf;

use stepwise_core::Question;
use stepwise_features::registry::DEFAULT_MODELS_DIR;
use stepwise_models::model_features::{ModelFeatureOptions, ModelFeatures};

use super::generate::open_stores;
use crate::cli_util::feature_error;

/// Feature options shared by `train`, `predict` and `study`.
#[derive(clap::Args, Debug, Clone)]
pub struct FeatureArgs {
    /// Feature store(s) from `stepwise embed`: a text store (context steps; titles of textual cloze) and/or an
    /// image store (question and choice images).
    #[arg(long, value_name = "DIR")]
    pub features: Vec<PathBuf>,
    /// Extra distractor images the task set used (a feature store or a folder of images, as for generate).
    #[arg(long, value_name = "DIR")]
    pub distractor_pool: Option<PathBuf>,
    /// The feature store of the embedded distractor pool (see generate's --pool-features).
    #[arg(long, value_name = "DIR", requires = "distractor_pool")]
    pub pool_features: Option<PathBuf>,
    /// Encode texts that are no store item (step bodies, titles of RecipeQA files) with this encoder (default:
    /// the text store's own encoder).
    #[arg(long, value_name = "NAME")]
    pub text_encoder: Option<String>,
    /// Pretrained models folder (for --text-encoder and pretrained stores).
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
}

impl FeatureArgs {
    /// Open the stores and load what a model reads for `questions` (see [`ModelFeatures::load`]).
    pub fn load<'q>(&self, questions: impl Iterator<Item = &'q Question>) -> anyhow::Result<ModelFeatures> {
        let stores = open_stores(&self.features)?;
        let options = ModelFeatureOptions {
            distractor_pool: self.distractor_pool.as_deref(),
            pool_features: self.pool_features.as_deref(),
            text_encoder: self.text_encoder.as_deref(),
            models: &self.models,
        };
        ModelFeatures::load(stores, &options, questions).map_err(feature_error)
    }
}
