//! Step images at ingest: rebasing image paths onto one root, checking that the files exist (missing ones are
//! counted, listed, and then an error, a warning or dropped), and optionally copying them into the corpus.
//!
//! Paths are not rewritten when they need not be: when every input lives in one folder, image paths stay
//! byte-for-byte as written (so procedure JSONL round-trips). Absolute image paths are kept as they are.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;
use stepwise_core::{Error, IoResultExt, Procedure, Result};

use crate::format::Origin;

/// What to do about image paths whose file does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnMissingImage {
    /// Fail (exit code 2), listing the missing files; nothing is written.
    Error,
    /// Keep the references, warn, and list them in the report.
    Warn,
    /// Remove the references from the steps (and galleries), and list them in the report.
    Drop,
}

impl OnMissingImage {
    pub fn as_str(self) -> &'static str {
        match self {
            OnMissingImage::Error => "error",
            OnMissingImage::Warn => "warn",
            OnMissingImage::Drop => "drop",
        }
    }
}

impl std::str::FromStr for OnMissingImage {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "error" => Ok(OnMissingImage::Error),
            "warn" => Ok(OnMissingImage::Warn),
            "drop" => Ok(OnMissingImage::Drop),
            other => Err(format!("unknown value {other:?}: expected error, warn or drop")),
        }
    }
}

pub use stepwise_core::paths::{absolute_normalized, normalize};

fn common_ancestor(a: &Path, b: &Path) -> PathBuf {
    a.components().zip(b.components()).take_while(|(x, y)| x == y).map(|(x, _)| x.as_os_str()).collect()
}

fn to_slash(p: &Path) -> String {
    p.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// All image references of a procedure (steps, then gallery), mutable.
fn image_refs_mut(p: &mut Procedure) -> impl Iterator<Item = &mut String> {
    p.steps.iter_mut().flat_map(|s| s.images.iter_mut()).chain(p.gallery.iter_mut().flatten())
}

fn image_refs(p: &Procedure) -> impl Iterator<Item = &String> {
    p.steps.iter().flat_map(|s| s.images.iter()).chain(p.gallery.iter().flatten())
}

/// Rewrite relative image paths so they are all relative to one root: the deepest folder holding every input's
/// image base and every image (an image path with `..` may climb above its base). Returns the root.
pub fn rebase_images(procedures: &mut [Procedure], origins: &[Origin]) -> Result<PathBuf> {
    let mut bases: Vec<PathBuf> = Vec::with_capacity(origins.len());
    let mut root: Option<PathBuf> = None;
    let widen = |root: &mut Option<PathBuf>, dir: &Path| {
        *root = Some(match root.take() {
            None => dir.to_path_buf(),
            Some(r) => common_ancestor(&r, dir),
        });
    };
    let mut last: Option<(&Path, PathBuf)> = None;
    for (p, o) in procedures.iter().zip(origins) {
        let base = match &last {
            Some((raw, abs)) if *raw == o.image_base.as_path() => abs.clone(),
            _ => {
                let abs = absolute_normalized(&o.image_base)?;
                last = Some((o.image_base.as_path(), abs.clone()));
                widen(&mut root, &abs);
                abs
            }
        };
        for im in image_refs(p) {
            let rel = Path::new(im);
            if !rel.is_absolute() && rel.components().any(|c| matches!(c, Component::ParentDir)) {
                let full = normalize(&base.join(rel));
                widen(&mut root, full.parent().unwrap_or(&full));
            }
        }
        bases.push(base);
    }
    let root = root.unwrap_or_else(|| PathBuf::from("/"));
    for (p, base) in procedures.iter_mut().zip(&bases) {
        let same_base = *base == root;
        for im in image_refs_mut(p) {
            let rel = Path::new(im.as_str());
            if rel.is_absolute() {
                continue;
            }
            let escapes = rel.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir));
            if same_base && !escapes {
                continue;
            }
            let full = normalize(&base.join(rel));
            if let Ok(r) = full.strip_prefix(&root) {
                *im = to_slash(r);
            }
        }
    }
    Ok(root)
}

/// The outcome of checking image files.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImageCheck {
    /// Distinct image paths referenced.
    pub referenced: usize,
    /// Distinct paths whose file is missing, sorted.
    pub missing: Vec<String>,
    /// References (with repeats) to missing files.
    pub missing_refs: usize,
    /// References removed (`drop` only).
    pub dropped_refs: usize,
}

/// Check that every referenced image exists under `root`, then apply `mode`.
pub fn check_images(procedures: &mut [Procedure], root: &Path, mode: OnMissingImage) -> Result<ImageCheck> {
    let unique: BTreeSet<&String> = procedures.iter().flat_map(image_refs).collect();
    let pb = stepwise_core::progress::bar(unique.len() as u64, "images");
    let unique: Vec<&String> = unique.into_iter().collect();
    let missing: Vec<String> = unique
        .par_iter()
        .filter(|im| {
            pb.inc(1);
            !root.join(im.as_str()).is_file()
        })
        .map(|s| s.to_string())
        .collect();
    pb.finish_and_clear();
    let mut check = ImageCheck { referenced: unique.len(), ..Default::default() };
    if missing.is_empty() {
        return Ok(check);
    }
    let missing_set: BTreeSet<&str> = missing.iter().map(String::as_str).collect();
    check.missing_refs = procedures.iter().flat_map(image_refs).filter(|im| missing_set.contains(im.as_str())).count();
    match mode {
        OnMissingImage::Error => {
            let shown: Vec<&str> = missing.iter().take(5).map(String::as_str).collect();
            return Err(Error::bad_input(format!(
                "{} of {} image file(s) are missing under {} (e.g. {}); pass --on-missing-image warn or drop to go on, \
                 or --image-root to say where the images are",
                missing.len(),
                check.referenced,
                root.display(),
                shown.join(", ")
            )));
        }
        OnMissingImage::Warn => {
            tracing::warn!(
                "{} of {} image file(s) are missing under {} (listed in ingest_report.json), e.g. {}",
                missing.len(),
                check.referenced,
                root.display(),
                missing[0]
            );
        }
        OnMissingImage::Drop => {
            for p in procedures.iter_mut() {
                for s in &mut p.steps {
                    let before = s.images.len();
                    s.images.retain(|im| !missing_set.contains(im.as_str()));
                    check.dropped_refs += before - s.images.len();
                }
                if let Some(g) = &mut p.gallery {
                    let before = g.len();
                    g.retain(|im| !missing_set.contains(im.as_str()));
                    check.dropped_refs += before - g.len();
                }
            }
        }
    }
    check.missing = missing;
    Ok(check)
}

/// Copy every referenced image into `dest/images/` (same relative paths; absolute paths go under `images/_abs/`)
/// and rewrite the references to match. Returns the number of files copied. Missing files are skipped (they were
/// already reported).
pub fn copy_images(procedures: &mut [Procedure], root: &Path, dest: &Path) -> Result<usize> {
    let images_dir = dest.join("images");
    let mut jobs: Vec<(PathBuf, String)> = Vec::new();
    for p in procedures.iter_mut() {
        for im in image_refs_mut(p) {
            let from = PathBuf::from(im.as_str());
            if from.is_absolute() {
                let rel: PathBuf = from.components().filter(|c| matches!(c, Component::Normal(_))).collect();
                *im = format!("_abs/{}", to_slash(&rel));
                jobs.push((from, im.clone()));
            } else {
                jobs.push((root.join(&from), im.clone()));
            }
        }
    }
    jobs.sort();
    jobs.dedup();
    let pb = stepwise_core::progress::bar(jobs.len() as u64, "copy images");
    let copied: Result<Vec<bool>> = jobs
        .par_iter()
        .map(|(from, rel)| {
            pb.inc(1);
            if !from.is_file() {
                return Ok(false);
            }
            let to = images_dir.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).at(parent)?;
            }
            std::fs::copy(from, &to).at(from)?;
            Ok(true)
        })
        .collect();
    pb.finish_and_clear();
    Ok(copied?.into_iter().filter(|c| *c).count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::Step;

    fn proc_with(images: &[&str]) -> Procedure {
        Procedure {
            id: "p".into(),
            steps: vec![Step { images: images.iter().map(|s| s.to_string()).collect(), ..Default::default() }],
            ..Default::default()
        }
    }

    fn origin(base: &Path) -> Origin {
        Origin { file: base.join("x.jsonl"), record: "1".into(), image_base: base.to_path_buf() }
    }

    #[test]
    fn one_folder_keeps_paths_verbatim() {
        let mut ps = vec![proc_with(&["images/a.jpg", "b.jpg"])];
        let root = rebase_images(&mut ps, &[origin(Path::new("/data/set"))]).unwrap();
        assert_eq!(root, Path::new("/data/set"));
        assert_eq!(ps[0].steps[0].images, ["images/a.jpg", "b.jpg"]);
    }

    #[test]
    fn different_folders_rebase_onto_the_common_root() {
        let mut ps = vec![proc_with(&["i/a.jpg"]), proc_with(&["../shared/b.jpg", "/abs/c.jpg"])];
        let origins = [origin(Path::new("/data/x")), origin(Path::new("/data/y/z"))];
        let root = rebase_images(&mut ps, &origins).unwrap();
        assert_eq!(root, Path::new("/data"));
        assert_eq!(ps[0].steps[0].images, ["x/i/a.jpg"]);
        assert_eq!(ps[1].steps[0].images, ["y/shared/b.jpg", "/abs/c.jpg"]);
    }

    #[test]
    fn missing_images_by_mode() {
        let td = tempfile::tempdir().unwrap();
        std::fs::write(td.path().join("ok.jpg"), b"x").unwrap();
        let mut ps = vec![proc_with(&["ok.jpg", "gone.jpg", "gone.jpg"])];
        let e = check_images(&mut ps.clone(), td.path(), OnMissingImage::Error).unwrap_err();
        assert!(e.to_string().contains("1 of 2 image file(s) are missing") && e.exit_code() == 2, "{e}");
        let c = check_images(&mut ps.clone(), td.path(), OnMissingImage::Warn).unwrap();
        assert_eq!((c.missing.as_slice(), c.missing_refs, c.dropped_refs), (&["gone.jpg".to_string()][..], 2, 0));
        let c = check_images(&mut ps, td.path(), OnMissingImage::Drop).unwrap();
        assert_eq!((c.dropped_refs, ps[0].steps[0].images.as_slice()), (2, &["ok.jpg".to_string()][..]));
    }

    #[test]
    fn copies_images_into_the_corpus() {
        let td = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(td.path().join("src/i")).unwrap();
        std::fs::write(td.path().join("src/i/a.jpg"), b"jpeg").unwrap();
        let mut ps = vec![proc_with(&["i/a.jpg", "i/a.jpg", "missing.jpg"])];
        let n = copy_images(&mut ps, &td.path().join("src"), &td.path().join("out")).unwrap();
        assert_eq!(n, 1);
        assert_eq!(std::fs::read(td.path().join("out/images/i/a.jpg")).unwrap(), b"jpeg");
    }
}
