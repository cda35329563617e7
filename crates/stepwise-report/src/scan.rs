//! Finding what a run folder holds: output folders are recognised by their `manifest.json` kind, loose JSON
//! files by their shape (the layouts `stepwise stats --format json`, `stepwise eval --json`, the demo's stage
//! list...), pictures by extension. The walk is sorted, so the report does not depend on directory order.

use std::path::{Path, PathBuf};

use stepwise_core::manifest::{MANIFEST_FILE, Manifest};
use stepwise_core::paths::WalkAncestors;
use stepwise_core::{Error, IoResultExt, Result};

use crate::read::JsonFile;

/// What an artefact is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The demo's stage list (`demo.json`).
    Demo,
    /// A corpus folder.
    Corpus,
    /// `stepwise clean`'s `clean_report.json`.
    CleanReport,
    /// `stepwise stats --format json` output.
    Stats,
    /// A feature-store folder.
    Features,
    /// A task-set folder (`stepwise generate`).
    TaskSet,
    /// A suite folder (`stepwise sweep`), or a loose `counts.json`.
    Suite,
    /// An audit (`audit.json`; its folder holds the distance plots).
    Audit,
    /// Sequencing instances (`stepwise generate --task sequencing`).
    Sequencing,
    /// Sequencing baseline results (`stepwise baseline --table`).
    SequencingResults,
    /// Evaluation results (`stepwise eval -o` or `--json`).
    Eval,
    /// Generated R2VQ questions (`stepwise generate --task r2vq`).
    R2vqQuestions,
    /// The R2VQ tagger's per-label scores (`stepwise r2vq tag --scores`).
    R2vqTagging,
    /// A model study (`stepwise study`): its `study.json`.
    Study,
    /// A trained model folder (`stepwise train`).
    Model,
    /// Human judgements exported by `stepwise annotate export`: its `tables.json`.
    Annotation,
    /// A PNG picture outside the folders above (e.g. a contact sheet).
    Picture,
}

/// One recognised output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artefact {
    pub kind: Kind,
    /// The folder (for folder outputs) or the file.
    pub path: PathBuf,
    /// `path` relative to the run folder, with `/` separators (`.` for the run folder itself).
    pub rel: String,
}

/// Everything found in a run folder, in walk order (sorted paths).
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub artefacts: Vec<Artefact>,
}

impl Found {
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Artefact> {
        self.artefacts.iter().filter(move |a| a.kind == kind)
    }
}

/// Loose JSON files larger than this are not opened to guess what they are (question files can be huge).
const MAX_SNIFF_BYTES: u64 = 32 << 20;
/// Folders deeper than this are not visited.
const MAX_DEPTH: usize = 8;

/// Walk `root`, skipping hidden entries (unfinished outputs are `.name.partial-*`) and the paths in `exclude`
/// (the report's own outputs).
pub fn scan(root: &Path, exclude: &[PathBuf]) -> Result<Found> {
    if !root.is_dir() {
        return Err(Error::usage(format!("{}: not a folder", root.display())));
    }
    let mut found = Found::default();
    walk(root, root, exclude, 0, &mut WalkAncestors::default(), &mut found)?;
    Ok(found)
}

fn rel(root: &Path, p: &Path) -> String {
    let r = p.strip_prefix(root).unwrap_or(p);
    let s: Vec<String> = r.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if s.is_empty() { ".".into() } else { s.join("/") }
}

fn push(found: &mut Found, root: &Path, kind: Kind, path: PathBuf) {
    let rel = rel(root, &path);
    found.artefacts.push(Artefact { kind, path, rel });
}

fn walk(
    root: &Path,
    dir: &Path,
    exclude: &[PathBuf],
    depth: usize,
    ancestors: &mut WalkAncestors,
    found: &mut Found,
) -> Result<()> {
    if dir.join(MANIFEST_FILE).is_file() && manifest_folder(root, dir, found)? {
        return Ok(());
    }
    // A symlink back to a folder being walked would list its outputs again, once per lap.
    if ancestors.enter(dir)?.is_some() {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).at(dir)?.map(|e| e.map(|e| e.path())).collect::<std::io::Result<_>>().at(dir)?;
    entries.sort();
    for p in entries {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with('.') || exclude.iter().any(|x| x == &p) {
            continue;
        }
        if p.is_dir() {
            if depth < MAX_DEPTH {
                walk(root, &p, exclude, depth + 1, ancestors, found)?;
            }
            continue;
        }
        let ext = p.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        match ext.as_str() {
            "png" => push(found, root, Kind::Picture, p),
            "json" if name != MANIFEST_FILE => {
                if let Some(kind) = sniff(&p)? {
                    push(found, root, kind, p);
                }
            }
            _ => {}
        }
    }
    ancestors.leave();
    Ok(())
}

/// Record a folder with a manifest; `false` when its kind is not one the report knows (then it is walked like
/// any folder).
fn manifest_folder(root: &Path, dir: &Path, found: &mut Found) -> Result<bool> {
    let m = Manifest::read(dir)?;
    let d = dir.to_path_buf();
    match m.kind.as_str() {
        "corpus" => {
            push(found, root, Kind::Corpus, d.clone());
            let clean = dir.join("clean_report.json");
            if clean.is_file() {
                push(found, root, Kind::CleanReport, clean);
            }
        }
        "features" => push(found, root, Kind::Features, d),
        "taskset" => push(found, root, Kind::TaskSet, d),
        "suite" => push(found, root, Kind::Suite, d.join("counts.json")),
        "audit" => push(found, root, Kind::Audit, d.join("audit.json")),
        "sequencing" => push(found, root, Kind::Sequencing, d),
        "sequencing-results" => push(found, root, Kind::SequencingResults, d.join("results.json")),
        "eval" => push(found, root, Kind::Eval, d.join("results.json")),
        "r2vq-questions" => push(found, root, Kind::R2vqQuestions, d),
        "study" => push(found, root, Kind::Study, d.join("study.json")),
        "annotation-export" => push(found, root, Kind::Annotation, d.join("tables.json")),
        // `stepwise train` writes a trained model with training.json; `models convert` writes pretrained weights
        // under the same kind (the repository's models/ folder, when the run folder is the repository root):
        // nothing to report there, and not a folder to walk.
        "model" if dir.join("training.json").is_file() => push(found, root, Kind::Model, d),
        "model" => {}
        _ => return Ok(false),
    }
    Ok(true)
}

/// What a loose JSON file is, from its top-level shape.
fn sniff(path: &Path) -> Result<Option<Kind>> {
    let size = std::fs::metadata(path).at(path)?.len();
    if size > MAX_SNIFF_BYTES {
        return Ok(None);
    }
    let f = JsonFile::read(path)?;
    let v = &f.value;
    let has = |k: &str| v.get(k).is_some();
    let kind_is = |k: &str| v.get("kind").and_then(|x| x.as_str()) == Some(k);
    let kind = if kind_is("demo") && has("stages") {
        Some(Kind::Demo)
    } else if has("all") && has("groups") && v["all"].get("steps_per_procedure").is_some() {
        Some(Kind::Stats)
    } else if has("procedures_in") && has("rules") {
        Some(Kind::CleanReport)
    } else if (kind_is("multiple_choice") && has("sets"))
        || (kind_is("sequencing") && has("groups"))
        || (kind_is("r2vq") && has("families"))
        || (kind_is("comparison") && has("rows"))
    {
        Some(Kind::Eval)
    } else if kind_is("r2vq-tagging") && has("labels") {
        Some(Kind::R2vqTagging)
    } else if has("tasks") && v.get("config").and_then(|c| c.get("folds")).is_some() {
        Some(Kind::Audit)
    } else if v.get("rows").and_then(|r| r.as_array()).is_some_and(|r| r.iter().all(|x| x.get("method").is_some()))
        && has("rows")
    {
        Some(Kind::SequencingResults)
    } else if v
        .as_array()
        .is_some_and(|a| !a.is_empty() && a.iter().all(|x| x.get("setting").is_some() && x.get("task").is_some()))
    {
        Some(Kind::Suite)
    } else {
        None
    };
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn symlinks_back_to_a_walked_folder_are_not_followed() {
        let td = tempfile::tempdir().unwrap();
        let plots = td.path().join("plots");
        std::fs::create_dir_all(&plots).unwrap();
        std::fs::write(plots.join("a.png"), b"png").unwrap();
        // Two links back to the root: followed blindly, the walk would visit 2^8 folders and list a.png 255 times.
        std::os::unix::fs::symlink(td.path(), plots.join("up")).unwrap();
        std::os::unix::fs::symlink(td.path(), plots.join("up2")).unwrap();
        let found = scan(td.path(), &[]).unwrap();
        let rels: Vec<&str> = found.artefacts.iter().map(|a| a.rel.as_str()).collect();
        assert_eq!(rels, ["plots/a.png"]);
    }
}
