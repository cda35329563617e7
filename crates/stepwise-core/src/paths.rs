//! Lexical path arithmetic: absolute normalised paths and relative paths between folders (no file-system access,
//! so they work for outputs that do not exist yet).

use std::path::{Component, Path, PathBuf};

use crate::error::{IoResultExt, Result};

/// The folder holding `file`: `.` for a bare file name (whose `parent()` is the empty path, which other path
/// functions reject: "cannot make an empty path absolute").
pub fn parent_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `p` made absolute against the working directory, with `.` and `..` resolved lexically.
pub fn absolute_normalized(p: &Path) -> Result<PathBuf> {
    let p = if p.as_os_str().is_empty() { Path::new(".") } else { p }; // the parent of a bare file name
    let abs = std::path::absolute(p).at(p)?;
    Ok(normalize(&abs))
}

/// Resolve `.` and `..` components lexically (a leading `..` of a relative path is kept).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            // `..` cancels a name before it; a leading `..` stays (and stacks); `/..` is `/`.
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A path that stays inside its root: relative, not empty, no `..`, no root or prefix components.
pub fn safe_relative(p: &str) -> bool {
    !p.is_empty() && Path::new(p).components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// The relative path from folder `base` to `target` (both absolute and normalised), with `/` separators;
/// `.` when they are the same.
pub fn relative_path(base: &Path, target: &Path) -> String {
    let b: Vec<_> = base.components().collect();
    let t: Vec<_> = target.components().collect();
    let common = b.iter().zip(&t).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = std::iter::repeat_n("..".to_string(), b.len() - common).collect();
    parts.extend(t[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if parts.is_empty() { ".".into() } else { parts.join("/") }
}

/// How an output folder records where its images live: relative to the folder itself, so a run folder (corpus
/// next to its images) can be moved or renamed as a whole.
pub fn image_root_for(output_dir: &Path, image_root: &Path) -> Result<String> {
    Ok(relative_path(&absolute_normalized(output_dir)?, &absolute_normalized(image_root)?))
}

/// Read a whole file of at most `max` bytes; a bigger one is refused before reading (from its size) or while
/// reading (a FIFO or a device that never ends), with `why` saying what the bound is for.
pub fn read_file_within(path: &Path, max: u64, why: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).at(path)?;
    let len = file.metadata().at(path)?.len();
    let refuse = |size: String| {
        crate::Error::bad_input(format!(
            "{}: {size}, more than the {} {why}",
            path.display(),
            crate::json::human_bytes(max)
        ))
    };
    if len > max {
        return Err(refuse(format!("{len} bytes")));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max + 1).read_to_end(&mut bytes).at(path)?;
    if bytes.len() as u64 > max {
        return Err(refuse("still growing".to_string()));
    }
    Ok(bytes)
}

/// Read a whole binary file whose format bounds its own size (an `.npy` array, a checkpoint, a list of ids): any
/// size a regular file has is fine, but a FIFO or a device (a link to `/dev/zero`) is refused before reading, and
/// a file that grows while it is read is refused instead of being followed.
pub fn read_regular_file(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path).at(path)?;
    let meta = file.metadata().at(path)?;
    if !meta.is_file() {
        return Err(crate::Error::bad_input(format!(
            "{}: not a regular file (a pipe or a device?); stepwise reads this file whole",
            path.display()
        )));
    }
    let len = meta.len();
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(len + 1).read_to_end(&mut bytes).at(path)?;
    if bytes.len() as u64 > len {
        return Err(crate::Error::bad_input(format!("{}: the file grew while it was read", path.display())));
    }
    Ok(bytes)
}

/// The folders a recursive walk is inside, by their resolved paths: a symlink that leads back to one of them (a
/// loop) is detected instead of being followed until the path is too long.
#[derive(Debug, Default)]
pub struct WalkAncestors {
    resolved: Vec<PathBuf>,
}

impl WalkAncestors {
    /// Enter `dir`: `Ok(None)` when it is a new folder (call [`WalkAncestors::leave`] after its entries), or
    /// `Ok(Some(ancestor))` when it resolves to a folder the walk is already inside.
    pub fn enter(&mut self, dir: &Path) -> Result<Option<PathBuf>> {
        let resolved = std::fs::canonicalize(dir).at(dir)?;
        if self.resolved.contains(&resolved) {
            return Ok(Some(resolved));
        }
        self.resolved.push(resolved);
        Ok(None)
    }

    /// Leave the folder entered last.
    pub fn leave(&mut self) {
        self.resolved.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(relative_path(Path::new("/a/b"), Path::new("/a/b/c/d.png")), "c/d.png");
        assert_eq!(relative_path(Path::new("/a/b"), Path::new("/a/x.png")), "../x.png");
        assert_eq!(relative_path(Path::new("/a/b"), Path::new("/a/b")), ".");
        assert_eq!(relative_path(Path::new("/run/clean"), Path::new("/run/corpus")), "../corpus");
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("../x/./y")), PathBuf::from("../x/y"));
        // A corpus folder `real` whose image root climbs above the working folder (found by a relative `-o`).
        assert_eq!(normalize(Path::new("real/../../../work/img")), PathBuf::from("../../work/img"));
        assert_eq!(normalize(Path::new("/a/../../b")), PathBuf::from("/b"));
    }

    #[test]
    fn image_root_is_relative_to_the_output() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(image_root_for(&cwd.join("run/clean"), &cwd.join("run/corpus")).unwrap(), "../corpus");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_back_to_an_ancestor_is_a_loop() {
        let td = tempfile::tempdir().unwrap();
        let a = td.path().join("a");
        std::fs::create_dir_all(a.join("b")).unwrap();
        std::os::unix::fs::symlink(&a, a.join("b/loop")).unwrap();
        let mut w = WalkAncestors::default();
        assert_eq!(w.enter(&a).unwrap(), None);
        assert_eq!(w.enter(&a.join("b")).unwrap(), None);
        assert_eq!(w.enter(&a.join("b/loop")).unwrap(), Some(std::fs::canonicalize(&a).unwrap()));
        w.leave();
        w.leave();
        // A sibling reached twice without a loop is not one.
        assert_eq!(w.enter(&a.join("b")).unwrap(), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_that_never_ends_is_refused_at_the_bound() {
        let e = read_file_within(Path::new("/dev/zero"), 1 << 20, "for this test").unwrap_err().to_string();
        assert_eq!(e, "/dev/zero: still growing, more than the 1 MiB for this test");
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("f");
        std::fs::write(&f, [7u8; 10]).unwrap();
        assert_eq!(read_file_within(&f, 10, "x").unwrap(), [7u8; 10]);
        assert!(
            read_file_within(&f, 9, "x").unwrap_err().to_string().ends_with("f: 10 bytes, more than the 9 bytes x")
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_binary_file_must_be_a_regular_file() {
        let td = tempfile::tempdir().unwrap();
        let link = td.path().join("vectors.npy");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_regular_file(&link).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("{}: not a regular file (a pipe or a device?); stepwise reads this file whole", link.display())
        );
        let f = td.path().join("f");
        std::fs::write(&f, [1u8, 2, 3]).unwrap();
        assert_eq!(read_regular_file(&f).unwrap(), [1, 2, 3]);
    }
}
