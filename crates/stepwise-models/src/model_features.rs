//! The features a model reads (`train`, `predict`, `study`, the sequencer): one text store and/or one image store
//! (told apart by the modality their encoder records), the extra distractor pool, and texts encoded on the fly
//! (bodies and titles that are no store item, e.g. of RecipeQA files) — with the identity of each source, which a
//! trained model records and `predict` checks.

use std::path::Path;

use stepwise_core::Question;
use stepwise_core::manifest::InputHash;
use stepwise_features::items::str_id;
use stepwise_features::registry::{self, EncoderContext};
use stepwise_features::store::encode_strings;
use stepwise_features::stores::{LoadedStores, load_pool};
use stepwise_features::{Encoder, FeatureError, FeatureStore, Modality, PatchGrids, TokenVectors, Vectors};

use crate::m3c::FeatureSources;
use crate::m3c::inputs::strings_needed;
use crate::m3c::saved::FeatureIdentity;
use crate::question_vectors::FeatureResolver;

/// What else the features are made of, beside the opened stores.
#[derive(Debug, Clone, Copy)]
pub struct ModelFeatureOptions<'a> {
    /// Extra distractor images the task set used (a feature store or a folder of images).
    pub distractor_pool: Option<&'a Path>,
    /// The feature store of the embedded distractor pool.
    pub pool_features: Option<&'a Path>,
    /// Encode texts that are no store item with this encoder (default: the text store's own encoder).
    pub text_encoder: Option<&'a str>,
    /// Pretrained models folder.
    pub models: &'a Path,
}

/// Loaded features and where they came from.
pub struct ModelFeatures {
    pub text: Option<Vectors>,
    /// Token-level vectors of the text store, when it has them (`stepwise embed --tokens`).
    pub tokens: Option<TokenVectors>,
    pub image: Option<Vectors>,
    /// Patch grids of the image store, when it has them (`stepwise embed --patches`; sequencing models).
    pub patches: Option<PatchGrids>,
    pub patches_identity: Option<(FeatureIdentity, String)>,
    pub strings: Option<Vectors>,
    /// `(identity, origin)` per role, for the model folder and the check in `predict`.
    pub identities: Vec<(FeatureIdentity, String)>,
    pub input_hashes: Vec<InputHash>,
}

impl ModelFeatures {
    pub fn sources(&self) -> FeatureSources<'_> {
        FeatureSources {
            text: self.text.as_ref(),
            tokens: self.tokens.as_ref().map(|t| t as &dyn crate::m3c::inputs::TokenRows),
            image: self.image.as_ref(),
            strings: self.strings.as_ref(),
        }
    }

    /// The Hasty Student's view of the same vectors.
    pub fn resolver(&self) -> FeatureResolver<'_> {
        FeatureResolver::new(self.image.as_ref(), self.text.as_ref(), self.strings.as_ref())
    }

    /// One string naming every identity (a cache key).
    pub fn key(&self) -> String {
        serde_json::to_string(&self.identities.iter().map(|(i, _)| i).collect::<Vec<_>>()).unwrap_or_default()
    }

    /// Take the opened stores (one text and/or one image store) and encode the texts `questions` need that no
    /// store holds.
    pub fn load<'q>(
        mut loaded: LoadedStores,
        args: &ModelFeatureOptions<'_>,
        questions: impl Iterator<Item = &'q Question>,
    ) -> Result<Self, FeatureError> {
        let (mut text_i, mut image_i) = (None, None);
        for (i, (path, store)) in loaded.stores.iter().enumerate() {
            let slot = match store.info().modality {
                Modality::Text => &mut text_i,
                Modality::Image => &mut image_i,
            };
            if slot.is_some() {
                return Err(FeatureError::usage(format!(
                    "two {} feature stores given ({}); pass one text and/or one image store",
                    if store.info().modality == Modality::Text { "text" } else { "image" },
                    path.display()
                )));
            }
            *slot = Some(i);
        }
        for i in [text_i, image_i].into_iter().flatten() {
            loaded.load(i)?;
        }
        let mut identities = Vec::new();
        for (i, role) in [(text_i, "text"), (image_i, "image")] {
            if let Some(i) = i {
                let (path, store) = &loaded.stores[i];
                identities.push((identity(role, store), path.display().to_string()));
            }
        }
        let pool = match args.distractor_pool {
            Some(p) => Some(load_pool(p, image_i.map(|i| &loaded.stores[i].1), args.models, args.pool_features)?),
            None => None,
        };
        let image = match (image_i.map(|i| loaded.get(i)), pool) {
            (Some(a), Some(p)) => Some(concat(a, &p)?),
            (Some(a), None) => Some(a.clone()),
            (None, Some(_)) => return Err(FeatureError::usage("--distractor-pool needs an image store in --features")),
            (None, None) => None,
        };
        let text = text_i.map(|i| loaded.get(i).clone());
        let tokens = match text_i {
            Some(i) => TokenVectors::from_store(&loaded.stores[i].1)?,
            None => None,
        };
        let patches = match image_i {
            Some(i) => PatchGrids::from_store(&loaded.stores[i].1)?,
            None => None,
        };
        // Only sequencing models read patch grids; they record this identity themselves.
        let patches_identity = match (&patches, image_i) {
            (Some(p), Some(i)) => {
                let mut id =
                    FeatureIdentity { role: "patches".into(), dim: p.dim, ..identity("image", &loaded.stores[i].1) };
                id.options.insert("grid".into(), p.grid().to_string());
                Some((id, loaded.stores[i].0.display().to_string()))
            }
            _ => None,
        };
        if let (Some(t), Some(i)) = (&tokens, text_i) {
            identities.push((
                FeatureIdentity { role: "tokens".into(), dim: t.dim, ..identity("text", &loaded.stores[i].1) },
                loaded.stores[i].0.display().to_string(),
            ));
        }

        // Texts that no store holds are encoded now, with --text-encoder or the text store's encoder.
        let todo: Vec<String> = strings_needed(questions)
            .into_iter()
            .filter(|t| text.as_ref().is_none_or(|v| v.get(&str_id(t)).is_none()))
            .collect();
        let encoder: Option<(Box<dyn Encoder>, FeatureIdentity)> = match (args.text_encoder, text_i) {
            _ if todo.is_empty() => None,
            (Some(name), _) => {
                let ctx = EncoderContext { models_dir: args.models.to_path_buf(), ..Default::default() };
                let enc = registry::build_encoder(name, &ctx)?;
                if enc.info().modality != Modality::Text {
                    return Err(FeatureError::usage(format!("--text-encoder {name}: not a text encoder")));
                }
                let info = enc.info().clone();
                let id = FeatureIdentity {
                    role: "strings".into(),
                    encoder: info.name,
                    version: info.version,
                    dim: info.dim,
                    options: Default::default(),
                    seed: 0,
                    fitted_on: None,
                };
                Some((enc, id))
            }
            (None, Some(i)) => {
                let ctx = EncoderContext { models_dir: args.models.to_path_buf(), ..Default::default() };
                let store = &loaded.stores[i].1;
                let enc = store.encoder(&ctx)?;
                Some((enc, FeatureIdentity { role: "strings".into(), ..identity("text", store) }))
            }
            (None, None) => None,
        };
        let strings = match &encoder {
            Some((enc, id)) => {
                let pb = stepwise_core::progress::spinner(&format!("encoding {} texts", todo.len()));
                let v = encode_strings(enc.as_ref(), &todo)?;
                pb.finish_and_clear();
                identities.push((id.clone(), format!("texts encoded with `{}`", id.encoder)));
                Some(v)
            }
            None => None,
        };
        let mut input_hashes = loaded.input_hashes()?;
        if let Some(p) = args.pool_features {
            input_hashes.push(InputHash::of(&p.join(stepwise_features::store::IDS_FILE))?);
        }
        Ok(ModelFeatures { text, tokens, image, patches, patches_identity, strings, identities, input_hashes })
    }
}

/// The identity of a store's vectors (see [`FeatureIdentity`]).
pub fn identity(role: &str, store: &FeatureStore) -> FeatureIdentity {
    let meta = store.meta();
    let fitted_on = meta.fitted.then(|| {
        let mut h = blake3::Hasher::new();
        for i in &meta.inputs {
            h.update(i.blake3.as_bytes());
        }
        h.finalize().to_hex().to_string()
    });
    FeatureIdentity {
        role: role.to_string(),
        encoder: meta.encoder.name.clone(),
        version: meta.encoder.version.clone(),
        dim: meta.encoder.dim,
        options: meta.options.clone(),
        seed: meta.seed,
        fitted_on,
    }
}

/// Rows of `a` then rows of `b` (same dimension).
pub fn concat(a: &Vectors, b: &Vectors) -> Result<Vectors, FeatureError> {
    if a.dim != b.dim {
        return Err(FeatureError::usage(format!(
            "the distractor pool's vectors ({}-d) do not match the image features ({}-d)",
            b.dim, a.dim
        )));
    }
    let mut ids = a.ids.clone();
    ids.extend(b.ids.iter().cloned());
    let mut data = a.data.clone();
    data.extend_from_slice(&b.data);
    Ok(Vectors::new(a.dim, ids, data))
}
