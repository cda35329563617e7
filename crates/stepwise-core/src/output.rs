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
        remove_stale_partials(&parent);
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        let tmp = parent.join(partial_name(&name));
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
    let tmp = parent.join(partial_name(&name));
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

/// The hidden name this process writes `name` under until it is complete: `.NAME.partial-PID@HOST`. The host
/// matters when several machines write into one shared folder (the parts of a sharded run on a cluster): only a
/// process on the same host can tell whether the owner is still running.
pub fn partial_name(name: &str) -> String {
    match this_host() {
        Some(h) => format!(".{name}.partial-{}@{h}", std::process::id()),
        None => format!(".{name}.partial-{}", std::process::id()),
    }
}

/// This machine's host name, reduced to `[A-Za-z0-9_-]` (dots would read as a file extension).
fn this_host() -> Option<&'static str> {
    static HOST: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let raw = fs::read_to_string("/proc/sys/kernel/hostname").ok().or_else(|| std::env::var("HOSTNAME").ok())?;
        let h: String =
            raw.trim().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        (!h.is_empty()).then_some(h)
    })
    .as_deref()
}

/// The owner of a partial output's name: its process id and, when recorded, its host (`.NAME.partial-PID`,
/// `.NAME.partial-PID@HOST`, either with `.old` left by a replace).
fn partial_owner(file_name: &str) -> Option<(u32, Option<&str>)> {
    if !file_name.starts_with('.') {
        return None;
    }
    let (_, tail) = file_name.rsplit_once(".partial-")?;
    let tail = tail.strip_suffix(".old").unwrap_or(tail);
    let (digits, host) = match tail.split_once('@') {
        Some((d, h)) if !h.is_empty() => (d, Some(h)),
        Some(_) => return None,
        None => (tail, None),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, host))
}

/// Whether a process is running, when that can be known (`/proc`); `None` otherwise.
fn process_alive(pid: u32) -> Option<bool> {
    let proc_root = Path::new("/proc");
    proc_root.join("self").exists().then(|| proc_root.join(pid.to_string()).exists())
}

/// Remove the partial outputs in `dir` whose process is gone (a run killed with `kill -9` cannot clean up after
/// itself). Only outputs whose owner is known to be dead are touched: a live process's (or one whose liveness
/// cannot be checked, without `/proc`) is left alone. Says what it removed, on stderr unless quiet; a failure to
/// remove is reported the same way and does not stop the run.
pub fn remove_stale_partials(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else { return removed };
    let mut stale: Vec<(PathBuf, u32)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let (pid, host) = partial_owner(&name)?;
            // Another machine's process cannot be checked from here: its output is left alone.
            let here = host.is_none_or(|h| Some(h) == this_host());
            (here && pid != std::process::id() && process_alive(pid) == Some(false)).then(|| (e.path(), pid))
        })
        .collect();
    stale.sort();
    for (path, pid) in stale {
        let size = tree_size(&path);
        match remove_any(&path) {
            Ok(()) => {
                if !crate::progress::is_quiet() {
                    eprintln!(
                        "removed {} ({:.1} MB), left by process {pid}, which is no longer running",
                        path.display(),
                        size as f64 / 1e6
                    );
                }
                removed.push(path);
            }
            Err(e) if !crate::progress::is_quiet() => eprintln!("could not remove a stale partial output: {e}"),
            Err(_) => {}
        }
    }
    removed
}

/// Bytes under `p` (a file or a folder; symbolic links not followed).
fn tree_size(p: &Path) -> u64 {
    let Ok(meta) = fs::symlink_metadata(p) else { return 0 };
    if !meta.is_dir() {
        return meta.len();
    }
    fs::read_dir(p).map(|d| d.flatten().map(|e| tree_size(&e.path())).sum()).unwrap_or(0)
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
    fn partial_outputs_of_dead_processes_are_removed_and_live_ones_kept() {
        assert_eq!(partial_owner(".corpus.partial-123"), Some((123, None)));
        assert_eq!(partial_owner(".corpus.partial-123.old"), Some((123, None)));
        assert_eq!(partial_owner(".a.b.partial-7"), Some((7, None)));
        assert_eq!(partial_owner(".a.partial-7@node-2"), Some((7, Some("node-2"))));
        assert_eq!(partial_owner(".a.partial-7@node-2.old"), Some((7, Some("node-2"))));
        assert_eq!(partial_owner(".a.partial-7@"), None);
        assert_eq!(partial_owner("corpus.partial-123"), None, "not hidden");
        assert_eq!(partial_owner(".corpus.partial-12x"), None);
        assert_eq!(partial_owner(".corpus.partial-"), None);
        if process_alive(std::process::id()) != Some(true) {
            return; // no /proc: nothing is ever removed (tested by the None arm above)
        }
        // A process that has exited: its pid names a dead owner (pids are not reused this fast).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let td = tempfile::tempdir().unwrap();
        let stale = td.path().join(format!(".sweep.partial-{dead}"));
        fs::create_dir_all(stale.join("deep")).unwrap();
        fs::write(stale.join("deep/x.bin"), vec![0u8; 1000]).unwrap();
        let stale_file = td.path().join(format!(".q.jsonl.partial-{dead}"));
        fs::write(&stale_file, "x").unwrap();
        let live = td.path().join(format!(".other.partial-{}", std::process::id()));
        // Dead here, but written on another machine sharing the folder: never touched.
        let remote = td.path().join(format!(".remote.partial-{dead}@some-other-host"));
        fs::create_dir_all(&remote).unwrap();
        let local = td.path().join(partial_name("local").replace(&std::process::id().to_string(), &dead.to_string()));
        fs::create_dir_all(&local).unwrap();
        fs::create_dir_all(&live).unwrap();
        let init = td.path().join(".init.partial-1"); // pid 1 is always running
        fs::create_dir_all(&init).unwrap();
        let out = OutputDir::create(&td.path().join("corpus"), false).unwrap();
        assert!(!stale.exists() && !stale_file.exists(), "dead owner's partial outputs removed");
        assert!(live.exists() && init.exists(), "a live process's partial output is never touched");
        assert!(remote.exists(), "another host's partial output is never touched");
        assert!(!local.exists(), "this host's, named with the host, is removed");
        out.commit().unwrap();
    }

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
