//! Atomic outputs: everything is written under a temporary name next to the destination and renamed into
//! place only on success, so an interrupted or failed run never leaves a partial corpus, task set or report.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoResultExt, Result};

/// An output folder being built. Files go into [`OutputDir::path`]; [`OutputDir::commit`] moves it to the
/// destination. Dropped without commit, the temporary folder is removed.
#[derive(Debug)]
pub struct OutputDir {
    tmp: PathBuf,
    dest: PathBuf,
    overwrite: bool,
    committed: bool,
}

impl OutputDir {
    /// Start building `dest`. If `dest` exists and is not empty, this is a usage error unless `overwrite` is true
    /// (then it is replaced at commit time, not before).
    pub fn create(dest: &Path, overwrite: bool) -> Result<Self> {
        if dest.exists() && !overwrite && !is_empty_dir(dest) {
            return Err(Error::usage(format!(
                "{}: output exists; choose another path or pass --force to replace it",
                dest.display()
            )));
        }
        let parent = parent_of(dest);
        fs::create_dir_all(&parent).at(&parent)?;
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        let tmp = parent.join(format!(".{name}.partial-{}", std::process::id()));
        if tmp.exists() {
            fs::remove_dir_all(&tmp).at(&tmp)?;
        }
        fs::create_dir_all(&tmp).at(&tmp)?;
        Ok(OutputDir { tmp, dest: dest.to_path_buf(), overwrite, committed: false })
    }

    /// The temporary folder to write into.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The final destination.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Move the finished folder into place (replacing an existing one when allowed).
    pub fn commit(mut self) -> Result<PathBuf> {
        if self.dest.exists() {
            if is_empty_dir(&self.dest) {
                fs::remove_dir(&self.dest).at(&self.dest)?;
            } else if self.overwrite {
                let old = self.tmp.with_extension("old");
                if old.exists() {
                    remove_any(&old)?;
                }
                fs::rename(&self.dest, &old).at(&self.dest)?;
                fs::rename(&self.tmp, &self.dest).at(&self.dest)?;
                remove_any(&old)?;
                self.committed = true;
                return Ok(self.dest.clone());
            } else {
                return Err(Error::usage(format!("{}: output appeared while running", self.dest.display())));
            }
        }
        fs::rename(&self.tmp, &self.dest).at(&self.dest)?;
        self.committed = true;
        Ok(self.dest.clone())
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

/// The buffered writer [`write_file_atomic`] hands to its callback.
pub type FileWriter = BufWriter<fs::File>;

/// Write a single file atomically: `write` fills a buffered temporary file, which is renamed to `dest`.
pub fn write_file_atomic(dest: &Path, write: impl FnOnce(&mut FileWriter) -> std::io::Result<()>) -> Result<()> {
    let parent = parent_of(dest);
    fs::create_dir_all(&parent).at(&parent)?;
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let result = (|| {
        let f = fs::File::create(&tmp)?;
        let mut w = BufWriter::new(f);
        write(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(dest, e));
    }
    fs::rename(&tmp, dest).at(dest)
}

/// [`write_file_atomic`] for a string.
pub fn write_string_atomic(dest: &Path, content: &str) -> Result<()> {
    write_file_atomic(dest, |w| w.write_all(content.as_bytes()))
}

fn parent_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn is_empty_dir(p: &Path) -> bool {
    fs::read_dir(p).map(|mut d| d.next().is_none()).unwrap_or(false)
}

fn remove_any(p: &Path) -> Result<()> {
    if p.is_dir() { fs::remove_dir_all(p).at(p) } else { fs::remove_file(p).at(p) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncommitted_output_leaves_nothing() {
        let td = tempfile::tempdir().unwrap();
        let dest = td.path().join("corpus");
        {
            let out = OutputDir::create(&dest, false).unwrap();
            fs::write(out.path().join("a.txt"), "x").unwrap();
        }
        assert!(!dest.exists());
        assert_eq!(fs::read_dir(td.path()).unwrap().count(), 0);
    }

    #[test]
    fn existing_output_needs_overwrite() {
        let td = tempfile::tempdir().unwrap();
        let dest = td.path().join("corpus");
        fs::create_dir(&dest).unwrap();
        fs::write(dest.join("old.txt"), "old").unwrap();
        let err = OutputDir::create(&dest, false).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let out = OutputDir::create(&dest, true).unwrap();
        fs::write(out.path().join("new.txt"), "new").unwrap();
        out.commit().unwrap();
        assert!(dest.join("new.txt").exists());
        assert!(!dest.join("old.txt").exists());
    }

    #[test]
    fn atomic_file_failure_keeps_old_content() {
        let td = tempfile::tempdir().unwrap();
        let dest = td.path().join("f.txt");
        fs::write(&dest, "old").unwrap();
        let r = write_file_atomic(&dest, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("boom"))
        });
        assert!(r.is_err());
        assert_eq!(fs::read_to_string(&dest).unwrap(), "old");
        assert_eq!(fs::read_dir(td.path()).unwrap().count(), 1);
    }
}

/// Every file below `dir`, by path relative to it (`/`-separated) → bytes: what determinism checks compare
/// between two runs.
pub fn read_tree(dir: &Path) -> Result<std::collections::BTreeMap<String, Vec<u8>>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).at(&d)? {
            let p = e.at(&d)?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap_or(&p);
                let key = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                out.insert(key, fs::read(&p).at(&p)?);
            }
        }
    }
    Ok(out)
}
