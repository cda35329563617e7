//! CLI tests of `stepwise ingest`, `clean` and `stats` with the built binary: exit codes, error messages that name
//! the file/line/field, nothing half-written, missing-image modes, determinism across thread counts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn stepwise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepwise")).args(args).output().expect("run stepwise")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Nothing but the listed names in `dir` (no partial outputs left behind).
fn assert_only(dir: &Path, names: &[&str]) {
    let mut got: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    got.sort();
    let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
}

const GOOD: &str = concat!(
    r#"{"category":"side","id":"x/1","lang":"en","license":"MIT","source":"s","steps":[{"images":["img/a.jpg"],"text":"<p>Preheatoven to 350F &amp; mix.Next add 2cups flour.</p>","title":null},{"images":[],"text":"Add saltand pepper.","title":null},{"images":[],"text":"Stir the salt and pepper into the flour, then preheat the oven.","title":null}],"title":"One"}"#,
    "\n",
    r#"{"category":"main","id":"x/2","lang":"en","license":"MIT","source":"s","steps":[{"images":["img/a.jpg","img/gone.jpg"],"text":"Preheat the oven. Add the salt and pepper.","title":"Heat"},{"images":[],"text":"Add the flour to the oven dish and stir.","title":null},{"images":[],"text":"Serve the salt and pepper flour, then preheat the oven again.","title":null}],"title":"Two"}"#,
    "\n"
);

fn setup(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("img")).unwrap();
    std::fs::write(dir.join("img/a.jpg"), b"jpeg").unwrap();
    let f = dir.join("good.jsonl");
    std::fs::write(&f, GOOD).unwrap();
    f
}

#[test]
fn help_has_examples() {
    for cmd in ["ingest", "clean", "stats"] {
        let o = stepwise(&[cmd, "--help"]);
        assert!(o.status.success());
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("Example"), "{cmd}: {out}");
    }
}

#[test]
fn list_formats() {
    let o = stepwise(&["ingest", "--list-formats"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for f in ["procedure-jsonl", "recipeqa", "recipeqa-recipes"] {
        assert!(out.contains(f), "{out}");
    }
}

#[test]
fn malformed_json_names_line_and_column_and_writes_nothing() {
    let td = tempfile::tempdir().unwrap();
    let f = td.path().join("bad.jsonl");
    std::fs::write(&f, "{\"id\":\"a\",\"steps\":[]}\n{\"id\": \"b\", \"steps\": [}\n").unwrap();
    let out = td.path().join("corpus");
    let o = stepwise(&["ingest", "--format", "procedure-jsonl", s(&f), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{}:2:23:", f.display())), "{err}");
    assert_only(td.path(), &["bad.jsonl"]);
}

#[test]
fn invalid_utf8_reports_byte_offset() {
    let td = tempfile::tempdir().unwrap();
    let f = td.path().join("bad.jsonl");
    std::fs::write(&f, b"{\"id\":\"a\",\"steps\":[]}\n{\"id\":\"b\xff\",\"steps\":[]}\n").unwrap();
    let out = td.path().join("corpus");
    let o = stepwise(&["ingest", s(&f), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid UTF-8 at byte offset 30 (line 2)"), "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn duplicate_ids_name_both_records() {
    let td = tempfile::tempdir().unwrap();
    let a = setup(td.path());
    let b = td.path().join("b.jsonl");
    std::fs::write(&b, "{\"id\":\"x/2\",\"steps\":[]}\n").unwrap();
    let o = stepwise(&["ingest", s(&a), s(&b), "-o", s(&td.path().join("corpus"))]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("duplicate id \"x/2\"") && err.contains(&format!("{}:2", a.display())), "{err}");
    assert!(err.contains(&format!("{}:1", b.display())), "{err}");
    assert!(!td.path().join("corpus").exists());
}

#[test]
fn empty_input_is_an_error() {
    let td = tempfile::tempdir().unwrap();
    let f = td.path().join("empty.jsonl");
    std::fs::write(&f, "\n \n").unwrap();
    let o = stepwise(&["ingest", "--format", "procedure-jsonl", s(&f), "-o", s(&td.path().join("c"))]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("empty input"), "{}", stderr(&o));
    let o = stepwise(&["ingest", "-o", s(&td.path().join("c"))]);
    assert_eq!(o.status.code(), Some(2), "no inputs is a usage error");
}

#[test]
fn missing_images_in_each_mode() {
    let td = tempfile::tempdir().unwrap();
    let f = setup(td.path());

    let out = td.path().join("err");
    let o = stepwise(&["ingest", s(&f), "-o", s(&out), "--on-missing-image", "error"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("1 of 2 image file(s) are missing") && stderr(&o).contains("img/gone.jpg"));
    assert!(!out.exists());

    let out = td.path().join("warn");
    let o = stepwise(&["ingest", s(&f), "-o", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ingest_report.json")).unwrap()).unwrap();
    assert_eq!(report["images"]["missing"], serde_json::json!(["img/gone.jpg"]));
    assert!(std::fs::read_to_string(out.join("procedures.jsonl")).unwrap().contains("img/gone.jpg"));
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"missing_images\": 1"), "{manifest}");

    let out = td.path().join("drop");
    let o = stepwise(&["ingest", s(&f), "-o", s(&out), "--on-missing-image", "drop", "--copy-images"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let jsonl = std::fs::read_to_string(out.join("procedures.jsonl")).unwrap();
    assert!(!jsonl.contains("gone.jpg") && jsonl.contains("img/a.jpg"));
    assert!(out.join("images/img/a.jpg").is_file());
}

#[test]
fn existing_output_needs_force() {
    let td = tempfile::tempdir().unwrap();
    let f = setup(td.path());
    let out = td.path().join("c");
    assert!(stepwise(&["ingest", s(&f), "-o", s(&out)]).status.success());
    let o = stepwise(&["ingest", s(&f), "-o", s(&out)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stepwise(&["ingest", s(&f), "-o", s(&out), "--force"]).status.success());
}

#[test]
fn ingest_clean_stats_pipeline() {
    let td = tempfile::tempdir().unwrap();
    let f = setup(td.path());
    let raw = td.path().join("raw");
    assert!(stepwise(&["-q", "ingest", s(&f), "-o", s(&raw)]).status.success());
    let clean = td.path().join("clean");
    let o = stepwise(&["clean", s(&raw), "-o", s(&clean)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let jsonl = std::fs::read_to_string(clean.join("procedures.jsonl")).unwrap();
    assert!(jsonl.contains("Preheat oven to 350 F & mix. Next add 2 cups flour."), "{jsonl}");
    assert!(jsonl.contains("Add salt and pepper."), "{jsonl}");
    let report = std::fs::read_to_string(clean.join("clean_report.md")).unwrap();
    assert!(report.contains("| segmentation |"), "{report}");

    let o = stepwise(&["stats", s(&clean), "--by", "category"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("| statistic | all | main | side |"), "{md}");
    let o = stepwise(&["stats", s(&clean), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["all"]["procedures"], 2);
    assert_eq!(v["all"]["steps"], 6);

    let o = stepwise(&["clean", s(&raw), "-o", s(&td.path().join("x")), "--exclude-title", "("]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--exclude-title"));
    let o = stepwise(&["stats", s(&td.path().join("nope"))]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn outputs_do_not_depend_on_threads() {
    let td = tempfile::tempdir().unwrap();
    let f = setup(td.path());
    let raw = td.path().join("raw");
    assert!(stepwise(&["-q", "ingest", s(&f), "-o", s(&raw)]).status.success());
    let a = td.path().join("a");
    let b = td.path().join("b");
    assert!(stepwise(&["-q", "--threads", "1", "clean", s(&raw), "-o", s(&a)]).status.success());
    assert!(stepwise(&["-q", "--threads", "2", "clean", s(&raw), "-o", s(&b)]).status.success());
    for file in ["procedures.jsonl", "procedures.parquet", "manifest.json", "clean_report.json", "clean_report.md"] {
        assert_eq!(std::fs::read(a.join(file)).unwrap(), std::fs::read(b.join(file)).unwrap(), "{file}");
    }
}

#[test]
fn segment_tokens_prints_splits() {
    let td = tempfile::tempdir().unwrap();
    let f = setup(td.path());
    let toks = td.path().join("t.txt");
    std::fs::write(&toks, "saltand\npepper\n").unwrap();
    let o = stepwise(&["clean", s(&f), "--segment-tokens", s(&toks)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "saltand\tsalt and\npepper\tpepper\n");
    assert!(stderr(&o).contains("\"segment_seconds\""));
}
