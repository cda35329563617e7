//! The feature stores a command reads (`--features`, repeated): opened once, each loaded into memory when a task
//! needs it, found by the item kind they hold; and the extra distractor pool (`--distractor-pool`), a store of
//! images or a folder of images embedded with the encoder of the image store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stepwise_core::manifest::InputHash;

use crate::embed::{EmbedOptions, embed_items, encode_images};
use crate::image_source::{FsImageSource, image_files};
use crate::items::{ItemContent, ItemSpec, image_id};
use crate::registry::EncoderContext;
use crate::store::{FAILURES_FILE, IDS_FILE, META_FILE};
use crate::{FeatureError, FeatureStore, Modality, Vectors};

/// Opened feature stores, loaded into memory on demand.
#[derive(Default)]
pub struct LoadedStores {
    pub stores: Vec<(PathBuf, FeatureStore)>,
    loaded: BTreeMap<usize, Vectors>,
}

impl LoadedStores {
    /// Add an opened store. A shard part of a sharded embedding is a usage error: it holds a slice of the items,
    /// so questions and audits made from it would silently miss the rest.
    pub fn add(&mut self, path: &Path, store: FeatureStore) -> Result<(), FeatureError> {
        if let Some(part) = &store.meta().shard {
            return Err(FeatureError::usage(format!(
                "{}: shard {} of a sharded embedding, not a whole store; join the parts with `stepwise features \
                 merge` first",
                path.display(),
                part.shard
            )));
        }
        self.stores.push((path.to_path_buf(), store));
        Ok(())
    }

    /// Index of the first store holding ids starting with `prefix`.
    pub fn find(&self, prefix: &str) -> Option<usize> {
        self.stores.iter().position(|(_, s)| s.ids().iter().any(|id| id.starts_with(prefix)))
    }

    /// The store holding the `prefix` items that `needed_by` (a task, named in errors) reads; the usage error
    /// says what to embed, or that the store of the right kind holds nothing.
    pub fn holding(&self, prefix: &str, needed_by: &str) -> Result<usize, FeatureError> {
        if self.stores.is_empty() {
            return Err(FeatureError::usage(format!(
                "--features is required for {needed_by}: embed the corpus with `stepwise embed` first"
            )));
        }
        if let Some(i) = self.find(prefix) {
            return Ok(i);
        }
        let modality = if prefix == "image:" { Modality::Image } else { Modality::Text };
        let kind = if modality == Modality::Image { "an image" } else { "a text" };
        // A store of the right kind that holds nothing: say so instead of asking for what the user already did.
        if let Some((path, store)) = self.stores.iter().find(|(_, s)| s.info().modality == modality && s.is_empty()) {
            let failures = store.failures().map(|f| f.len()).unwrap_or(0);
            return Err(FeatureError::usage(format!(
                "{}: the `{}` store holds no vectors ({failures} inputs failed to encode; see {}), so {needed_by} has \
                 no {} to work with",
                path.display(),
                store.info().name,
                path.join(FAILURES_FILE).display(),
                if modality == Modality::Image { "images" } else { "texts" }
            )));
        }
        Err(FeatureError::usage(format!(
            "none of the --features stores has `{prefix}` items, which {needed_by} needs; embed the corpus with {kind} \
             encoder"
        )))
    }

    /// Load the vectors of store `i` into memory (once).
    pub fn load(&mut self, i: usize) -> Result<(), FeatureError> {
        if !self.loaded.contains_key(&i) {
            let v = self.stores[i].1.load()?;
            self.loaded.insert(i, v);
        }
        Ok(())
    }

    /// The vectors of store `i`, which must have been loaded.
    pub fn get(&self, i: usize) -> &Vectors {
        self.loaded.get(&i).expect("feature stores are loaded before use")
    }

    /// Fingerprints of the stores (their `ids` and `meta.json`) for manifests.
    pub fn input_hashes(&self) -> Result<Vec<InputHash>, FeatureError> {
        let mut out = Vec::new();
        for (p, _) in &self.stores {
            out.push(InputHash::of(&p.join(IDS_FILE))?);
            out.push(InputHash::of(&p.join(META_FILE))?);
        }
        Ok(out)
    }
}

/// The extra distractor pool at `path`: a feature store of images (made by the same encoder as `image_store`),
/// or a folder of images embedded now with `image_store`'s encoder, into the store `cache` when given (incremental,
/// resumable) or in memory. Unreadable images of a folder are left out with a warning.
pub fn load_pool(
    path: &Path,
    image_store: Option<&FeatureStore>,
    models: &Path,
    cache: Option<&Path>,
) -> Result<Vectors, FeatureError> {
    if path.join(META_FILE).exists() {
        let s = FeatureStore::open(path)?;
        if let Some(main) = image_store.map(FeatureStore::info)
            && s.info() != main
        {
            return Err(FeatureError::usage(format!(
                "{}: the distractor pool was embedded with `{}` ({}-d) but the features with `{}` ({}-d); embed both \
                 with the same encoder",
                path.display(),
                s.info().name,
                s.info().dim,
                main.name,
                main.dim
            )));
        }
        return s.load();
    }
    if !path.is_dir() {
        return Err(FeatureError::usage(format!(
            "--distractor-pool {}: not a feature store or a folder of images",
            path.display()
        )));
    }
    let Some(main) = image_store else {
        return Err(FeatureError::usage(
            "--distractor-pool with a folder of images needs an image feature store in --features".to_string(),
        ));
    };
    let files = image_files(path)?;
    if files.is_empty() {
        return Err(FeatureError::usage(format!(
            "--distractor-pool {}: no .jpg/.jpeg/.png images found",
            path.display()
        )));
    }
    let source = FsImageSource::new(path);
    let ctx = EncoderContext {
        models_dir: models.to_path_buf(),
        seed: main.meta().seed,
        options: main.meta().options.clone(),
        ..Default::default()
    };
    if let Some(cache) = cache {
        // The feature store's own pipeline: incremental (only new or changed images are encoded), resumable.
        let items: Vec<ItemSpec> =
            files.iter().map(|f| ItemSpec { id: image_id(f), content: ItemContent::Image(f.clone()) }).collect();
        let opts = EmbedOptions { ctx, label: "pool images".into(), ..EmbedOptions::new(&main.info().name) };
        embed_items(cache, &items, &source, &opts)?;
        return FeatureStore::open(cache)?.load();
    }
    let encoder = main.encoder(&ctx)?;
    let (pool, failed) = encode_images(&files, &source, encoder.as_ref(), "pool images")?;
    if failed > 0 {
        tracing::warn!("{failed} distractor-pool images could not be read and were left out");
    }
    Ok(pool)
}
