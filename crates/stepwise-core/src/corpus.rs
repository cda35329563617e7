//! A corpus on disk: a folder with `procedures.jsonl` (the interchange format), `procedures.parquet` (the same
//! rows for pyarrow / HF `datasets`) and `manifest.json`, optionally `images/` and `taskset/`.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Result};
use crate::json::write_canonical;
use crate::manifest::{MANIFEST_FILE, Manifest};
use crate::output::write_file_atomic;
use crate::procedure::Procedure;

pub const PROCEDURES_JSONL: &str = "procedures.jsonl";
pub const PROCEDURES_PARQUET: &str = "procedures.parquet";
/// Sub-folder of a corpus holding a task set that came with it (e.g. RecipeQA questions).
pub const TASKSET_DIR: &str = "taskset";

#[derive(Debug, Clone)]
pub struct Corpus {
    /// The corpus folder (or, for a bare JSONL file, the folder holding it).
    pub dir: PathBuf,
    /// Where step image paths are resolved from.
    pub image_root: PathBuf,
    pub manifest: Option<Manifest>,
    pub procedures: Vec<Procedure>,
}

impl Corpus {
    /// The file holding a corpus's procedures: `PATH/procedures.jsonl` for a folder, the path itself for a file
    /// (what manifests fingerprint as the input).
    pub fn procedures_file(path: &Path) -> PathBuf {
        if path.is_dir() { path.join(PROCEDURES_JSONL) } else { path.to_path_buf() }
    }

    /// Load a corpus folder, or a bare procedure-JSONL file (images relative to the file's folder).
    pub fn load(path: &Path) -> Result<Self> {
        if path.is_file() {
            let dir = crate::paths::parent_dir(path);
            let procedures = read_procedures_jsonl(path)?;
            return Ok(Corpus { image_root: dir.clone(), dir, manifest: None, procedures });
        }
        let jsonl = path.join(PROCEDURES_JSONL);
        if !jsonl.exists() {
            return Err(Error::bad_input(format!(
                "{}: not a corpus (no {PROCEDURES_JSONL}); create one with `stepwise ingest` or `stepwise world generate`",
                path.display()
            )));
        }
        let manifest = if path.join(MANIFEST_FILE).exists() { Some(Manifest::read(path)?) } else { None };
        let image_root = match manifest.as_ref().and_then(|m| m.image_root.as_deref()) {
            Some(r) if Path::new(r).is_absolute() => PathBuf::from(r),
            Some(r) => crate::paths::normalize(&path.join(r)),
            None => path.to_path_buf(),
        };
        let procedures = read_procedures_jsonl(&jsonl)?;
        Ok(Corpus { dir: path.to_path_buf(), image_root, manifest, procedures })
    }

    /// The file of a step image path.
    pub fn image_path(&self, rel: &str) -> PathBuf {
        self.image_root.join(rel)
    }

    /// The corpus an output folder was made from: the first input of `dir/manifest.json` (a corpus folder or
    /// its `procedures.jsonl`, as given on that command line: relative paths are taken from the current folder),
    /// when it is still there. `None` when there is no manifest, no input, or the input is not a corpus; an error
    /// when the file found is not the one the manifest fingerprinted.
    pub fn named_by_manifest(dir: &Path) -> Result<Option<Corpus>> {
        if !dir.is_dir() || !dir.join(MANIFEST_FILE).is_file() {
            return Ok(None);
        }
        let m = Manifest::read(dir)?;
        let Some(input) = m.inputs.first() else { return Ok(None) };
        let path = PathBuf::from(&input.path);
        let corpus = if path.is_file() { crate::paths::parent_dir(&path) } else { path };
        let file = corpus.join(PROCEDURES_JSONL);
        if !file.is_file() {
            return Ok(None);
        }
        // A relative input path read from another folder can name another corpus: the fingerprint decides.
        let (blake3, bytes) = crate::hash::hash_file(&file)?;
        if blake3 != input.blake3 || bytes != input.bytes {
            return Err(Error::bad_input(format!(
                "{}: the corpus its manifest names ({}) is not the one it was made from (the file changed, or the \
                 relative path points elsewhere from this folder); name the corpus with --corpus",
                dir.display(),
                file.display()
            )));
        }
        Ok(Some(Corpus::load(&corpus)?))
    }

    /// The task set stored with the corpus, if any.
    pub fn taskset_dir(&self) -> Option<PathBuf> {
        let d = self.dir.join(TASKSET_DIR);
        d.is_dir().then_some(d)
    }
}

/// Read a procedure-JSONL file. Errors name the line and field; duplicate ids name both lines; an empty file is
/// an error.
pub fn read_procedures_jsonl(path: &Path) -> Result<Vec<Procedure>> {
    // Streamed line by line (not `read_jsonl`): a 300 MB corpus must not sit in memory as text and values too.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    crate::json::for_each_jsonl(path, |r| {
        let loc = Location::Line { line: r.line, column: None };
        let p = Procedure::from_json(&r.value, path, &loc)?;
        if let Some(first) = seen.insert(p.id.clone(), r.line) {
            return Err(Error::Duplicate {
                id: p.id,
                first: format!("{}:{first}", path.display()),
                second: format!("{}:{}", path.display(), r.line),
            });
        }
        out.push(p);
        Ok(())
    })?;
    if out.is_empty() {
        return Err(Error::Empty { path: path.to_path_buf(), what: "no procedures".into() });
    }
    Ok(out)
}

/// Check ids are unique across procedures from several sources; `origin(i)` describes record i.
pub fn check_unique_ids(procedures: &[Procedure], origin: impl Fn(usize) -> String) -> Result<()> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(procedures.len());
    for (i, p) in procedures.iter().enumerate() {
        if let Some(first) = seen.insert(p.id.as_str(), i) {
            return Err(Error::Duplicate { id: p.id.clone(), first: origin(first), second: origin(i) });
        }
    }
    Ok(())
}

/// Write procedures as canonical JSONL (one sorted-key object per line), atomically.
pub fn write_procedures_jsonl(path: &Path, procedures: &[Procedure]) -> Result<()> {
    write_file_atomic(path, |w| {
        for p in procedures {
            write_canonical(w, &p.to_json())?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// Write the corpus files (JSONL, Parquet, manifest with counts) into `dir` (normally an
/// [`crate::output::OutputDir`] that the caller commits).
pub fn write_corpus_files(dir: &Path, procedures: &[Procedure], manifest: &mut Manifest) -> Result<()> {
    write_procedures_jsonl(&dir.join(PROCEDURES_JSONL), procedures)?;
    crate::parquet::write_procedures_parquet(&dir.join(PROCEDURES_PARQUET), procedures)?;
    let steps: usize = procedures.iter().map(|p| p.steps.len()).sum();
    let images: usize = procedures.iter().map(|p| p.step_images().count()).sum();
    manifest.count("procedures", procedures.len() as u64);
    manifest.count("steps", steps as u64);
    manifest.count("step_images", images as u64);
    manifest.write(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_ids_name_both_lines() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("p.jsonl");
        std::fs::write(&f, "{\"id\":\"a\",\"steps\":[]}\n\n{\"id\":\"a\",\"steps\":[]}\n").unwrap();
        let e = read_procedures_jsonl(&f).unwrap_err().to_string();
        assert!(e.contains("p.jsonl:1") && e.contains("p.jsonl:3"), "{e}");
    }

    #[test]
    fn the_corpus_a_manifest_names_must_be_the_one_it_fingerprinted() {
        let td = tempfile::tempdir().unwrap();
        let corpus = td.path().join("corpus");
        std::fs::create_dir_all(&corpus).unwrap();
        let jsonl = corpus.join(PROCEDURES_JSONL);
        std::fs::write(&jsonl, "{\"id\":\"a\",\"steps\":[]}\n").unwrap();
        let out = td.path().join("out");
        let mut m = Manifest::new("taskset");
        m.inputs.push(crate::manifest::InputHash::of(&jsonl).unwrap());
        m.write(&out).unwrap();
        assert_eq!(Corpus::named_by_manifest(&out).unwrap().unwrap().procedures.len(), 1);
        // Another corpus at the recorded path (changed since, or a relative path read from elsewhere).
        std::fs::write(&jsonl, "{\"id\":\"b\",\"steps\":[]}\n").unwrap();
        let e = Corpus::named_by_manifest(&out).unwrap_err().to_string();
        assert!(e.contains("is not the one it was made from") && e.contains("--corpus"), "{e}");
        assert!(Corpus::named_by_manifest(td.path()).unwrap().is_none(), "no manifest: no corpus");
    }

    #[test]
    fn empty_file_is_an_error() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("p.jsonl");
        std::fs::write(&f, "\n").unwrap();
        assert!(matches!(read_procedures_jsonl(&f), Err(Error::Empty { .. })));
    }
}
