//! One error type for the library crates.
//!
//! Every variant that comes from user data names the file and the record (line or index) and, where it
//! applies, the field, so the CLI can print it as-is (ripgrep style: `path:line:column: message`).
//! [`Error::exit_code`] maps an error to the CLI's exit codes: 2 for bad input or usage, 1 for runtime failures.

use std::fmt;
use std::path::{Path, PathBuf};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in an input a problem is: a line of a JSONL file, an index in a JSON array, a row...
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// 1-based line (and optional 1-based column) in a text file.
    Line { line: usize, column: Option<usize> },
    /// A record addressed by a JSON path such as `data[12]`.
    Record(String),
    /// The whole file.
    File,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line { line, column: Some(c) } => write!(f, "{line}:{c}"),
            Location::Line { line, column: None } => write!(f, "{line}"),
            Location::Record(r) => write!(f, "{r}"),
            Location::File => Ok(()),
        }
    }
}

/// An I/O error in words, with a hint for the common case of a wrong path.
fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| "?".into());
            format!("no such file or folder (relative paths start from the current folder, {cwd})")
        }
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed (not the user's data being wrong). The I/O error is part of the message,
    /// not a `source` (a chain would print it twice).
    #[error("{}: {}", path.display(), io_message(error))]
    Io { path: PathBuf, error: std::io::Error },

    /// Malformed syntax (JSON, CSV, ...): `file:line:column: message`.
    #[error("{}:{}: {message}", path.display(), location)]
    Syntax { path: PathBuf, location: Location, message: String },

    /// The bytes are not UTF-8.
    #[error("{}: invalid UTF-8 at byte offset {offset} (line {line})", path.display())]
    Utf8 { path: PathBuf, offset: usize, line: usize },

    /// Well-formed syntax, but a record's field is missing or has the wrong type or value.
    #[error("{}:{}: field `{field}`: {message}", path.display(), location)]
    Field { path: PathBuf, location: Location, field: String, message: String },

    /// Two records share an id that must be unique.
    #[error("duplicate id {id:?}: first at {first}, again at {second}")]
    Duplicate { id: String, first: String, second: String },

    /// The input holds no records.
    #[error("{}: empty input: {what}", path.display())]
    Empty { path: PathBuf, what: String },

    /// Bad input that is not tied to one record (inconsistent files, mismatched ids, missing images...).
    #[error("{0}")]
    BadInput(String),

    /// Bad command-line usage (conflicting options, an output that exists...).
    #[error("{0}")]
    Usage(String),

    /// A failure that is not the user's fault (a bug, a resource problem, an external library error).
    #[error("{0}")]
    Runtime(String),
}

impl Error {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io { path: path.as_ref().to_path_buf(), error: source }
    }

    pub fn field(
        path: impl AsRef<Path>,
        location: Location,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Field { path: path.as_ref().to_path_buf(), location, field: field.into(), message: message.into() }
    }

    pub fn bad_input(message: impl Into<String>) -> Self {
        Error::BadInput(message.into())
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Error::Usage(message.into())
    }

    pub fn runtime(message: impl Into<String>) -> Self {
        Error::Runtime(message.into())
    }

    /// True when the error is the user's input or usage (exit code 2), false for runtime failures (exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            Error::Io { error, .. } => matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::InvalidData | std::io::ErrorKind::IsADirectory
            ),
            Error::Syntax { .. }
            | Error::Utf8 { .. }
            | Error::Field { .. }
            | Error::Duplicate { .. }
            | Error::Empty { .. }
            | Error::BadInput(_)
            | Error::Usage(_) => true,
            Error::Runtime(_) => false,
        }
    }

    /// The CLI exit code for this error: 2 bad input or usage, 1 runtime failure.
    pub fn exit_code(&self) -> i32 {
        if self.is_bad_input() { 2 } else { 1 }
    }
}

/// Attach a path to `std::io::Result`s: `fs::read(p).at(p)?`.
pub trait IoResultExt<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoResultExt<T> for std::io::Result<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}
