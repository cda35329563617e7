//! The feature stores a sequencing command reads (`baseline`, `select-golden`): one text store and/or one image
//! store (told apart by the encoder modality recorded in each store), restricted to the items the instances use.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Error, Result};
use stepwise_features::items::{image_id, text_id};
use stepwise_features::{FeatureStore, Modality, Vectors};

use crate::item_features::FeatureSet;

/// The loaded stores and where they came from.
#[derive(Default)]
pub struct SequencingFeatures {
    pub text: Option<Vectors>,
    pub image: Option<Vectors>,
    /// `(modality, store folder, encoder name)` for reports and manifests.
    pub sources: Vec<(String, PathBuf, String)>,
}

impl SequencingFeatures {
    pub fn set(&self) -> FeatureSet<'_> {
        FeatureSet { text: self.text.as_ref(), image: self.image.as_ref() }
    }

    /// The `vectors.npy`/`meta.json` files of the stores, for manifests.
    pub fn meta_files(&self) -> Vec<PathBuf> {
        self.sources.iter().map(|(_, dir, _)| dir.join("meta.json")).filter(|p| p.exists()).collect()
    }
}

/// Open each store and copy the rows the instances need (`text:{procedure}#{step}` for a text store, `image:{path}`
/// for an image store). At most one store per modality.
pub fn load_features(paths: &[PathBuf], instances: &[SequencingInstance]) -> Result<SequencingFeatures> {
    let mut out = SequencingFeatures::default();
    for path in paths {
        let store = open(path)?;
        let info = store.info().clone();
        match info.modality {
            Modality::Text => {
                if out.text.is_some() {
                    return Err(Error::usage(format!(
                        "two text feature stores given ({}); pass one text and/or one image store",
                        path.display()
                    )));
                }
                let ids: BTreeSet<String> = instances
                    .iter()
                    .flat_map(|i| i.items.iter().map(move |it| text_id(&i.procedure, it.step)))
                    .collect();
                out.text = Some(store.load_ids(&ids.into_iter().collect::<Vec<_>>()));
            }
            Modality::Image => {
                if out.image.is_some() {
                    return Err(Error::usage(format!(
                        "two image feature stores given ({}); pass one text and/or one image store",
                        path.display()
                    )));
                }
                let ids: BTreeSet<String> = instances
                    .iter()
                    .flat_map(|i| i.items.iter().flat_map(|it| it.images.iter().map(|p| image_id(p))))
                    .collect();
                out.image = Some(store.load_ids(&ids.into_iter().collect::<Vec<_>>()));
            }
        }
        let modality = match info.modality {
            Modality::Text => "text",
            Modality::Image => "image",
        };
        out.sources.push((modality.to_string(), path.clone(), info.name.clone()));
    }
    Ok(out)
}

fn open(path: &Path) -> Result<FeatureStore> {
    FeatureStore::open(path).map_err(|e| match e {
        stepwise_features::FeatureError::Core(c) => c,
        other => Error::bad_input(other.to_string()),
    })
}
