//! Procedure JSONL: one procedure per line (schema in ../shared/data/README.md and `stepwise_core::procedure`),
//! image paths relative to the file's folder. Read as a stream, so memory holds procedures, not text.

use std::path::{Path, PathBuf};

use stepwise_core::json::for_each_jsonl;
use stepwise_core::{Error, Location, Procedure, Result};

use crate::format::{Format, Ingested, Origin, ReadOptions, Sniff, contains, skip_ws};

pub struct ProcedureJsonl;

impl Format for ProcedureJsonl {
    fn name(&self) -> &'static str {
        "procedure-jsonl"
    }

    fn describe(&self) -> &'static str {
        "stepwise procedure JSONL: one {id, title, steps: [{title, text, images}], ...} per line; \
         image paths relative to the file"
    }

    fn sniff(&self, path: &Path, head: &[u8]) -> Sniff {
        let h = skip_ws(head);
        let first_line = h.split(|&b| b == b'\n').next().unwrap_or(h);
        if h.starts_with(b"{") && contains(first_line, b"\"steps\"") && contains(first_line, b"\"id\"") {
            // A whole procedure on the first line (JSON, not a pretty-printed document).
            if serde_json::from_slice::<serde_json::Value>(first_line).is_ok_and(|v| v.get("steps").is_some()) {
                return Sniff::Yes;
            }
        }
        if path.extension().is_some_and(|e| e == "jsonl") { Sniff::Maybe } else { Sniff::No }
    }

    fn read(&self, inputs: &[PathBuf], opts: &ReadOptions) -> Result<Ingested> {
        let mut out = Ingested::default();
        for path in inputs {
            let image_base = opts.image_base(path);
            let before = out.procedures.len();
            for_each_jsonl(path, |r| {
                let p = Procedure::from_json(&r.value, path, &Location::Line { line: r.line, column: None })?;
                out.push(p, Origin { file: path.clone(), record: r.line.to_string(), image_base: image_base.clone() });
                Ok(())
            })?;
            if out.procedures.len() == before {
                return Err(Error::Empty { path: path.clone(), what: "no procedures".into() });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_with_origins() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("p.jsonl");
        std::fs::write(
            &f,
            "{\"id\":\"a\",\"steps\":[{\"text\":\"x\",\"images\":[\"i/a.jpg\"]}]}\n\n{\"id\":\"b\",\"steps\":[]}\n",
        )
        .unwrap();
        let got = ProcedureJsonl.read(std::slice::from_ref(&f), &ReadOptions::default()).unwrap();
        assert_eq!(got.procedures.len(), 2);
        assert_eq!(got.origins[1].record, "3");
        assert_eq!(got.origins[1].image_base, td.path());
        assert_eq!(ProcedureJsonl.sniff(&f, &std::fs::read(&f).unwrap()), Sniff::Yes);
    }

    #[test]
    fn empty_file_is_an_error() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("p.jsonl");
        std::fs::write(&f, "\n\n").unwrap();
        let e = ProcedureJsonl.read(&[f], &ReadOptions::default()).unwrap_err();
        assert!(matches!(e, Error::Empty { .. }), "{e}");
    }
}
