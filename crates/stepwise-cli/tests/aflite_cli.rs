//! `stepwise audit --aflite` end to end on a world task set: the filtered set and the removed list partition the
//! questions, the report shows the audit before and after, the same bytes come out for 1 and 2 threads, and bad
//! parameters are usage errors.

use std::collections::BTreeSet;
use std::path::Path;

use stepwise_core::TaskSet;
use stepwise_core::output::read_tree;

mod common;
use common::{bin, run};

fn ok(args: &[&str], dir: &Path) {
    let (code, _, err) = run(bin().args(args).current_dir(dir));
    assert_eq!(code, 0, "stepwise {args:?}: {err}");
}

#[test]
fn aflite_writes_the_filtered_set_and_the_removed_questions_deterministically() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    ok(&["-q", "world", "generate", "-n", "80", "--seed", "4", "--no-images", "-o", "world"], d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "-o", "f-txt"], d);
    ok(
        &["-q", "generate", "world", "--features", "f-txt", "--task", "textual_cloze", "--knobs", "0,0,0", "-o", "tc"],
        d,
    );
    let args = ["audit", "tc", "--features", "f-txt", "--aflite", "--aflite-partitions", "16", "--resamples", "50"];
    ok(&[&["-q", "--threads", "1"], &args[..], &["-o", "a1"]].concat(), d);
    ok(&[&["-q", "--threads", "2"], &args[..], &["-o", "a2"]].concat(), d);
    assert_eq!(read_tree(&d.join("a1")).unwrap(), read_tree(&d.join("a2")).unwrap(), "same bytes for any --threads");

    let all = TaskSet::load(&d.join("tc")).unwrap();
    let kept = TaskSet::load(&d.join("a1/aflite")).unwrap();
    let removed: Vec<serde_json::Value> = std::fs::read_to_string(d.join("a1/aflite/removed.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!removed.is_empty(), "the w2v textual cloze set has questions the probe answers");
    let removed_qids: BTreeSet<&str> = removed.iter().map(|r| r["qid"].as_str().unwrap()).collect();
    let kept_qids: BTreeSet<&str> = kept.questions.iter().map(|q| q.qid.as_str()).collect();
    assert!(removed_qids.is_disjoint(&kept_qids));
    assert_eq!(removed_qids.len() + kept_qids.len(), all.questions.len());
    assert!(kept.questions.len() * 2 >= all.questions.len(), "never below half of the questions");
    for r in &removed {
        assert!(r["predictability"].as_f64().unwrap() >= 0.75 && r["round"].as_u64().unwrap() >= 1, "{r}");
    }
    let md = std::fs::read_to_string(d.join("a1/audit.md")).unwrap();
    let section = md.split("## AFLite").nth(1).expect("the AFLite section");
    let row = section.lines().find(|l| l.starts_with("| textual_cloze | ")).expect("the AFLite row");
    assert!(row.contains(&format!("| {} |", removed.len())) && row.contains(" → "), "{row}");

    // Bad parameters are usage errors; --aflite needs an output folder.
    for (bad, msg) in [
        (&["--aflite-partitions", "0"][..], "AFLite needs at least one partition"),
        (&["--aflite-train", "1.5"][..], "AFLite train share must be in (0, 1), got 1.5"),
    ] {
        let base = ["audit", "tc", "--features", "f-txt", "--aflite", "-o", "bad"];
        let (code, _, err) = run(bin().args(base).args(bad).current_dir(d));
        assert_eq!((code, err.contains(msg)), (2, true), "{err}");
        assert!(!d.join("bad").exists());
    }
    let (code, _, err) = run(bin().args(["audit", "tc", "--features", "f-txt", "--aflite"]).current_dir(d));
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_suite_audit_puts_every_setting_side_by_side_before_and_after_aflite() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    ok(&["-q", "world", "generate", "-n", "60", "--seed", "4", "--no-images", "-o", "world"], d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "-o", "f-txt"], d);
    let settings = "recipeqa,knobs-0-0-0,knobs-1-1-1";
    ok(
        &["-q", "sweep", "world", "--features", "f-txt", "--task", "textual_cloze", "--settings", settings, "-o", "s"],
        d,
    );
    let args = ["audit", "s", "--features", "f-txt", "--aflite", "--aflite-partitions", "8", "--resamples", "20"];
    ok(&[&["-q"], &args[..], &["-o", "a"]].concat(), d);
    let md = std::fs::read_to_string(d.join("a/audit.md")).unwrap();
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| textual_cloze | ")).collect();
    assert_eq!(rows.len(), 3, "{md}");
    for (row, setting) in rows.iter().zip(["recipeqa", "knobs-0-0-0", "knobs-1-1-1"]) {
        assert!(row.starts_with(&format!("| textual_cloze | {setting} | ")), "{row}");
        // questions, Hasty, probe, shortcut-free, worst shortcut, kept, Hasty after, probe after
        assert_eq!(row.matches('|').count(), 11, "{row}");
        let all = TaskSet::load(&d.join("s").join(setting).join("textual_cloze")).unwrap();
        let kept = TaskSet::load(&d.join("a/aflite").join(setting).join("textual_cloze")).unwrap();
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[3], all.questions.len().to_string(), "{row}");
        assert_eq!(cells[8], kept.questions.len().to_string(), "{row}");
        // Hasty Student with its interval; a verdict and the worst shortcut of the panel.
        assert!(cells[4].contains(" [") && ["yes", "no", "–"].contains(&cells[6]) && cells[7] != "–", "{row}");
        assert!(d.join("a").join(setting).join("textual_cloze/audit.md").is_file());
    }
    let m = stepwise_core::Manifest::read(&d.join("a/aflite")).unwrap();
    assert_eq!(m.kind, "suite");
    assert!(m.params.contains_key("aflite") && m.params.contains_key("generate"), "{m:?}");
    let counts = std::fs::read_to_string(d.join("a/aflite/counts.md")).unwrap();
    assert!(counts.contains("skipped: aflite_removed"), "{counts}");
    // The report reads the task sets' audits and the filtered suite.
    ok(&["-q", "report", ".", "-o", "report.html"], d);
    let md = std::fs::read_to_string(d.join("report.md")).unwrap();
    assert!(md.contains("## Bias audit") && md.contains("skipped: aflite removed"), "{md}");
    // The sweep and the filtered suite; the summary is not mistaken for a counts table.
    assert!(md.contains("| `s/counts.json` | knob-sweep suite |") && md.contains("| `a/aflite/counts.json` |"), "{md}");
    assert!(!md.contains("`a/audit.json`"), "{md}");
    // Auditing a suite without -o is a usage error.
    let (code, _, err) = run(bin().args(["audit", "s", "--features", "f-txt"]).current_dir(d));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a suite; auditing one needs -o OUT"), "{err}");
}
