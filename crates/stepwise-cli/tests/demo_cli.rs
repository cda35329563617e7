//! `stepwise demo` end to end on a small world (every stage through the public CLI), its determinism across
//! output folders, and `stepwise report` on the demo's folder.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    stepwise_core::output::read_tree(dir).unwrap()
}

fn stepwise(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepwise")).current_dir(cwd).args(args).output().expect("run stepwise")
}

/// The demo's closing summary (its stage lines and what to open), pinned: the folder and the run time redacted,
/// and in the lines of stages that train models (baselines, their evaluation, the two studies) every number
/// replaced by `#` and every verdict on noise redacted (as the report's size, which embeds their plots).
/// Trained weights are the same on every run of one machine (checked below, byte for byte), but candle's matrix
/// products may take other summation orders on other instruction sets, so those numbers are pinned by shape
/// only; every other stage's numbers come from the data pipeline and are pinned exactly.
fn stage_lines(stdout: &str, dir: &Path) -> String {
    const TRAINED: [&str; 4] = ["baselines", "eval-baselines", "study", "seq-study"];
    let summary = stdout.lines().skip_while(|l| !l.starts_with("stepwise demo: "));
    let time = regex::Regex::new(r"\d+(\.\d+)? s$").unwrap();
    let number = regex::Regex::new(r"[+−-]?\d+(\.\d+)?").unwrap();
    let verdict = regex::Regex::new(r"(within|outside) noise").unwrap();
    // The report embeds plots of the trained models' numbers.
    let size = regex::Regex::new(r"\(\d+(\.\d+)? [kKM]?B").unwrap();
    let mut out = String::new();
    for line in summary {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let line = line.replace(&canonical.display().to_string(), "[RUN]").replace(&dir.display().to_string(), "[RUN]");
        let stage = line.split_whitespace().next().unwrap_or("");
        let line = if line.starts_with("stepwise demo: ") {
            time.replace(&line, "[TIME]").into_owned()
        } else if line.starts_with("  ") && TRAINED.contains(&stage) {
            let line = number.replace_all(&line, "#");
            verdict.replace_all(&line, "[within or outside] noise").into_owned()
        } else if line.starts_with("  report ") {
            size.replace(&line, "([SIZE]").into_owned()
        } else {
            line
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[test]
fn demo_runs_every_stage_and_is_identical_in_any_folder() {
    let td = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(td.path().join("b/nested")).unwrap();
    let a = stepwise(td.path(), &["demo", "-n", "16", "--windows", "1", "-o", "a"]);
    let stdout = String::from_utf8_lossy(&a.stdout).into_owned();
    assert!(a.status.success(), "{}\n{}", stdout, String::from_utf8_lossy(&a.stderr));
    // The closing summary names every stage and the report.
    for stage in [
        "world",
        "clean",
        "stats",
        "contact-sheet",
        "embed-text",
        "embed-image",
        "tasks",
        "sweep",
        "audit",
        "sequencing",
        "baselines",
        "eval-baselines",
        "eval-hasty",
        "study",
        "seq-study",
        "annotate",
        "r2vq",
        "report",
    ] {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(stage)), "stage {stage} missing:\n{stdout}");
    }
    assert!(stdout.contains("report: ") && stdout.contains("equal to the audit's Hasty Student"), "{stdout}");
    insta::assert_snapshot!("demo-stage-lines", stage_lines(&stdout, td.path()));
    // The model study states RecipeQA mode against the knob settings, and the sequencing study its cells against
    // the pairwise baseline. Sixteen procedures leave at most one test procedure and one test sequence (the knob
    // settings none): nothing to resample, so neither claims an interval (the full-size demo's lines carry them),
    // and the study says it has nothing to compare.
    let study_line =
        stdout.lines().find(|l| l.trim_start().starts_with("study ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        study_line.contains("models mean of 3 seeds")
            && study_line.contains("HTRN: no comparison (a setting has no test questions)"),
        "{study_line}"
    );
    let (_, results) = study_line.split_once("epochs): ").unwrap_or_else(|| panic!("{study_line}"));
    assert!(!results.contains('['), "no zero-width interval for one procedure: {study_line}");
    let seq_line =
        stdout.lines().find(|l| l.trim_start().starts_with("seq-study ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        seq_line.contains("mean of 3 seeds [95% CI over sequences]") && seq_line.contains("no interval)"),
        "{seq_line}"
    );
    // The programs answer their own generated questions exactly.
    assert!(stdout.contains("annotation: EM 100.0% [100.0%, 100.0%], F1 100.0% [100.0%, 100.0%] ("), "{stdout}");
    let dir = td.path().join("a");
    for f in [
        "report.html",
        "report.md",
        "demo.json",
        "manifest.json",
        "contact_sheet.png",
        "stats.json",
        "suite/counts.json",
        "audit/recipeqa/visual_cloze/audit.json",
        "sequencing-results/results.json",
        "eval/hasty-student/results.json",
        "predictions/hasty-student.jsonl",
        "study/study.json",
        "seq-study/results.json",
        "seq-study/breakdown.md",
        "seq-study/seeds.md",
        "annotation/study.json",
        "annotation/admin-password.txt",
        "r2vq/questions.jsonl",
        "r2vq/test.csv",
        "eval/r2vq-text/results.json",
        "eval/r2vq-annotation/results.json",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for section in [
        "## Corpus",
        "## Corpus statistics",
        "## Knob sweep",
        "## Bias audit",
        "## Step sequencing",
        "## Evaluation of predictions",
        "## Models: GM3C study",
        "## R2VQ questions",
        "## Pictures",
    ] {
        assert!(md.contains(section), "{section} missing");
    }
    assert!(md.contains("| setting | HTRN − Hasty |"), "the study's paired comparison table:\n{md}");
    let paired = md.lines().skip_while(|l| !l.starts_with("| setting | HTRN − Hasty |")).nth(2).unwrap_or_default();
    let difference = paired.split('|').nth(2).unwrap_or_default().trim();
    assert!(difference.starts_with(['+', '−']), "a difference is printed with its sign: {paired}");
    // No temporary folder name leaks into the outputs; the cleaned corpus finds its images from anywhere.
    let all = files(&dir);
    assert!(all.values().all(|b| !String::from_utf8_lossy(b).contains(".partial-")), "a temporary path leaked");
    let clean = std::fs::read_to_string(dir.join("clean/manifest.json")).unwrap();
    assert!(clean.contains("\"image_root\": \"../corpus\""), "{clean}");

    // The annotation study is ready to serve: the command is printed, and its images are found from the study
    // folder wherever the demo folder is.
    assert!(stdout.contains("annotation app: stepwise annotate serve --study "), "{stdout}");
    let study = stepwise_annotate::Study::read(&dir.join("annotation")).unwrap();
    let root = study.image_root.clone().expect("the demo's instances have step photos");
    assert!(study.image_paths().iter().all(|p| root.join(p).is_file()), "a study image is missing under {root:?}");

    // The same seed in another folder gives the same bytes, file by file (the annotation study's admin password
    // is a fresh secret each run, by design).
    let secret = |k: &String| stepwise_annotate::study::SECRET_FILES.iter().any(|s| k.ends_with(s));
    let all: BTreeMap<String, Vec<u8>> = all.into_iter().filter(|(k, _)| !secret(k)).collect();
    let b =
        stepwise(&td.path().join("b/nested"), &["-q", "demo", "-n", "16", "--windows", "1", "-o", "demo", "--force"]);
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let other: BTreeMap<String, Vec<u8>> =
        files(&td.path().join("b/nested/demo")).into_iter().filter(|(k, _)| !secret(k)).collect();
    assert_eq!(all.keys().collect::<Vec<_>>(), other.keys().collect::<Vec<_>>());
    for (k, v) in &all {
        assert!(v == &other[k], "{k} differs between two runs");
    }

    // `stepwise report` replaces its own previous report (it is derived) and rewrites the same bytes.
    let title = "stepwise demo: 16 cooking procedures, seed 7";
    let r = stepwise(td.path(), &["report", "a", "-o", "a/report.html", "--title", title]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(std::fs::read(dir.join("report.html")).unwrap(), all["report.html"]);
}

#[test]
fn report_usage_errors_exit_2() {
    let td = tempfile::tempdir().unwrap();
    let r = stepwise(td.path(), &["report", "missing"]);
    assert_eq!(r.status.code(), Some(2));
    std::fs::create_dir_all(td.path().join("empty")).unwrap();
    let r = stepwise(td.path(), &["report", "empty"]);
    assert_eq!(r.status.code(), Some(2), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("no stepwise outputs found"));
    let r = stepwise(td.path(), &["report", "empty", "-o", "x.txt"]);
    assert_eq!(r.status.code(), Some(2));
}
