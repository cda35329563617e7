//! The data a sequencer trains and predicts on: the instances of a file, the features they are read with and
//! each instance's model input, with the instances left out for lack of vectors.

use std::path::{Path, PathBuf};

use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Error, Result};

use crate::item_features::FeatureKind;
use crate::model_features::ModelFeatures;
use crate::seq::text_tower::{self, TextTowerConfig, TowerValues};
use crate::seq::{DecoderKind, SeqConfig, SeqInput, SeqModel, SeqSources, seq_input};
use stepwise_features::Encoder;
use stepwise_features::pretrained::minilm::{self, MiniLm};

/// Instances, their inputs and the features they came from.
pub struct SeqData {
    pub instances: Vec<SequencingInstance>,
    pub inputs: Vec<SeqInput>,
    pub kind: FeatureKind,
    pub features: ModelFeatures,
    pub skipped: Vec<String>,
    pub file: PathBuf,
    /// With a fine-tuned text encoder ([`SeqData::tune_text`]): its layers and their pretrained values; the
    /// inputs' text rows are then its frozen layers' outputs.
    pub text_tower: Option<(TextTowerConfig, TowerValues)>,
}

impl SeqData {
    pub fn sources(&self) -> SeqSources<'_> {
        SeqSources {
            text: self.features.text.as_ref(),
            tokens: self.features.tokens.as_ref().map(|t| t as &dyn crate::m3c::inputs::TokenRows),
            image: self.features.image.as_ref(),
            patches: self.features.patches.as_ref().map(|p| p as &dyn crate::seq::PatchRows),
        }
    }

    pub fn split(&self, name: &str) -> Vec<SeqInput> {
        self.inputs.iter().filter(|s| s.split == name).cloned().collect()
    }

    /// The model configuration for these inputs: widths from the features, sequence limits from the data.
    pub fn config(
        &self,
        dim: usize,
        layers: usize,
        heads: usize,
        max_tokens: usize,
        decoder: DecoderKind,
    ) -> SeqConfig {
        let s = self.sources();
        let mut c = SeqConfig::new(self.kind, s.text_dim(), s.image_dim());
        c.dim = dim;
        c.layers = layers;
        c.heads = heads;
        c.ff = 4 * dim;
        c.max_tokens = max_tokens;
        c.max_patches = self
            .inputs
            .iter()
            .flat_map(|i| i.steps.iter().map(|st| st.image.as_ref().map_or(0, |m| m.len())))
            .max()
            .unwrap_or(1)
            .max(1);
        c.max_steps = self.inputs.iter().map(|i| i.steps.len()).max().unwrap_or(2).max(16);
        c.vocab = if self.kind != FeatureKind::Image { s.vocab_size().unwrap_or(0) } else { 0 };
        c.decoder = decoder;
        if let Some((tower, _)) = &self.text_tower {
            // Token ids are in the frozen rows: MLM would read the answer.
            c.vocab = 0;
            c.text_tower = Some(tower.clone());
        }
        c
    }

    /// Fine-tune the upper `tuned` layers of the text store's pretrained encoder (MiniLM, from `models_dir`): the
    /// inputs' text rows become the frozen lower layers' outputs ([`text_tower::frozen_inputs`]) and models made
    /// from [`SeqData::config`] carry the upper layers, initialised by [`SeqData::init_text_tower`]. The text store
    /// must be that encoder's token store (token ids) and the models folder must hold the same weights.
    pub fn tune_text(&mut self, models_dir: &Path, tuned: usize, max_tokens: usize) -> Result<()> {
        let store = self.features.identities.iter().map(|(i, _)| i).find(|i| i.role == "tokens");
        let Some(store) = store.filter(|i| i.encoder == minilm::NAME) else {
            return Err(Error::usage(format!(
                "fine-tuning the text encoder needs a text store embedded with `--encoder {} --tokens`",
                minilm::NAME
            )));
        };
        let encoder = MiniLm::from_models_dir(models_dir).map_err(|e| Error::bad_input(e.to_string()))?;
        let version = encoder.info().version.clone();
        if store.version != version {
            return Err(Error::bad_input(format!(
                "the text store was embedded with {} version {}, {} holds version {version}",
                minilm::NAME,
                store.version,
                models_dir.display()
            )));
        }
        let tower = TextTowerConfig::of(encoder.bert(), minilm::NAME, &version, tuned).map_err(Error::usage)?;
        text_tower::frozen_inputs(&mut self.inputs, &encoder, &tower, max_tokens).map_err(Error::bad_input)?;
        let values = text_tower::pretrained_values(encoder.bert(), &tower).map_err(crate::optim::cerr)?;
        self.text_tower = Some((tower, values));
        Ok(())
    }

    /// Start `model`'s fine-tuned text layers from the pretrained encoder (nothing without [`SeqData::tune_text`]).
    pub fn init_text_tower(&self, model: &SeqModel) -> Result<()> {
        let values = self.text_tower.as_ref().map(|(_, values)| values);
        text_tower::init_from(&model.params, values).map_err(crate::optim::cerr)
    }
}

impl SeqData {
    /// The instances read from `file` with their inputs made from `features` in `modality` (default: what the
    /// features give); items without vectors leave their instance out (counted, with examples).
    pub fn new(
        file: PathBuf,
        insts: Vec<SequencingInstance>,
        mut features: ModelFeatures,
        modality: Option<FeatureKind>,
        max_tokens: usize,
    ) -> Result<SeqData> {
        if let Some(id) = features.patches_identity.clone() {
            features.identities.push(id);
        }
        let mut data = SeqData {
            instances: insts,
            inputs: Vec::new(),
            kind: FeatureKind::Text,
            features,
            skipped: Vec::new(),
            file,
            text_tower: None,
        };
        let available = match data.sources().kind() {
            Some(k) => k,
            None => return Err(Error::usage("give a text and/or an image feature store with --features")),
        };
        let kind = match modality {
            None => available,
            Some(k) if k == available || available == FeatureKind::Multimodal => k,
            Some(k) => {
                return Err(Error::usage(format!(
                    "--modality {}: the features given are {} only",
                    k.as_str(),
                    available.as_str()
                )));
            }
        };
        data.kind = kind;
        let mut inputs = Vec::new();
        let mut skipped = Vec::new();
        {
            let sources = data.sources();
            for inst in &data.instances {
                match seq_input(inst, &sources, kind, max_tokens) {
                    Ok(i) => inputs.push(i),
                    Err(e) => skipped.push(e),
                }
            }
        }
        data.inputs = inputs;
        data.skipped = skipped;
        if !data.skipped.is_empty() {
            tracing::warn!("{} instances left out, e.g. {}", data.skipped.len(), data.skipped[0]);
        }
        Ok(data)
    }
}
