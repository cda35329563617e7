//! `write_report` on a small run folder laid out like stepwise's commands lay theirs out (a corpus with order
//! annotations, stats JSON, a feature store, a suite's counts, audits of two knob settings, a sequencing results
//! table, an evaluation, a picture): the expected tables are there, the HTML is self-contained and escaped,
//! the output is byte-identical on a rerun and independent of where the folder is, and a malformed file is an
//! error naming the file and the field.

use std::path::Path;

use serde_json::json;
use stepwise_core::corpus::write_corpus_files;
use stepwise_core::procedure::{ProcedureAnnotations, ValidOrders};
use stepwise_core::{Manifest, Procedure, Step};
use stepwise_report::plots::{BarChart, write_bar_chart};
use stepwise_report::{ReportOptions, write_report};

fn write(path: &Path, v: &serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

fn manifest(dir: &Path, kind: &str, inputs: &[&str]) {
    let inputs: Vec<_> = inputs.iter().map(|p| json!({"path": p, "blake3": "00", "bytes": 1})).collect();
    write(
        &dir.join("manifest.json"),
        &json!({"schema_version": 1, "kind": kind, "stepwise_version": "0.1.0", "command": ["stepwise", kind], "inputs": inputs, "counts": {}}),
    );
}

fn estimate(v: f64, lo: f64, hi: f64) -> serde_json::Value {
    json!({"value": v, "ci": {"low": lo, "high": hi}})
}

fn audit_task(task: &str, n: u64, hasty: f64, probe: f64) -> serde_json::Value {
    json!({
        "task": task, "questions": n, "with_vectors": n, "chance": 0.25,
        "hasty_student": estimate(hasty, hasty - 0.05, hasty + 0.05),
        "distance_probe": {"accuracy": estimate(probe, probe - 0.05, probe + 0.05), "folds": 5, "features": "d", "weights": []},
        "distances": {"answer_is_extreme": hasty, "correct_mean": 0.1, "incorrect_mean": 0.3, "definition": "d",
                      "histogram": {"edges": [0.0, 0.5, 1.0], "correct": [3, 1], "incorrect": [1, 3]}},
        "overlap": {"applicable": n, "provenance": {"meta": n}, "same_task": estimate(0.4, 0.3, 0.5)},
        "missing_examples": []
    })
}

fn metric_block(acc: f64, pmr: f64) -> serde_json::Value {
    let m = |v: f64| json!({"value": v, "ci": [v - 0.1, v + 0.1]});
    json!({"position_accuracy": m(acc), "pmr": m(pmr), "kendall_tau": m(0.5), "distance": m(3.0), "lq": m(3.5), "lr": m(2.5)})
}

/// A run folder under `root`.
fn fixture(root: &Path) {
    let procs: Vec<Procedure> = (0..6)
        .map(|p| Procedure {
            id: format!("demo/{p}"),
            category: Some(if p % 2 == 0 { "soup".into() } else { "cake & <pie>".into() }),
            steps: (0..(4 + p % 3))
                .map(|s| Step {
                    text: Some(format!("step {s}")),
                    images: vec![format!("images/{p}/{s}.jpg")],
                    ..Default::default()
                })
                .collect(),
            annotations: Some(ProcedureAnnotations {
                valid_orders: Some(ValidOrders { count: 1 + p as u64, orders: vec![], complete: false }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    let corpus = root.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    let mut m = Manifest::new("corpus");
    write_corpus_files(&corpus, &procs, &mut m).unwrap();
    m.write(&corpus).unwrap();

    let dist = |mean: f64| json!({"n": 6, "mean": mean, "std": 0.5, "min": 4.0, "max": 6.0});
    write(
        &root.join("stats.json"),
        &json!({"all": {"procedures": 6, "steps": 30, "steps_per_procedure": dist(5.0), "tokens_per_step": dist(2.0), "types": 12},
                "group_by": null, "groups": {}, "taskset": null, "taskset_groups": {}}),
    );
    let feats = root.join("features/w2v");
    manifest(&feats, "features", &[]);
    write(
        &feats.join("meta.json"),
        &json!({"count": 30, "failures": 0, "encoder": {"name": "w2v", "version": "w2v-1", "dim": 100, "modality": "text", "normalization": "l2"}}),
    );
    let suite = root.join("suite");
    manifest(&suite, "suite", &[]);
    let row = |setting: &str, task: &str, n: u64| {
        json!({"setting": setting, "task": task, "questions": n, "questions_by_split": {"train": n - 2, "val": 1, "test": 1},
               "procedures_used": 6, "questions_skipped": {"knob3_no_close_negative": 100 - n}})
    };
    write(
        &suite.join("counts.json"),
        &json!([
            row("recipeqa", "visual_cloze", 40),
            row("knobs-0-1-1", "visual_cloze", 12),
            row("knobs-0-1-1", "textual_cloze", 30)
        ]),
    );
    for (setting, hasty, probe, n) in [("recipeqa", 0.95, 0.72, 40), ("knobs-0-1-1", 0.2, 0.31, 12)] {
        // The audited task set of the suite: its manifest gives the setting.
        let set = root.join(format!("suite/{setting}/visual_cloze"));
        std::fs::create_dir_all(&set).unwrap();
        let mut m = Manifest::new("taskset");
        m.param("setting", setting);
        m.write(&set).unwrap();
        let dir = root.join(format!("audit/{setting}/visual_cloze"));
        manifest(&dir, "audit", &[&format!("suite/{setting}/visual_cloze/questions.json")]);
        write(
            &dir.join("audit.json"),
            &json!({"questions": n, "config": {"folds": 5}, "tasks": [audit_task("visual_cloze", n, hasty, probe)]}),
        );
        std::fs::write(
            dir.join("distances-visual_cloze.svg"),
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>hist</text></svg>",
        )
        .unwrap();
    }
    let seq = root.join("sequencing-results");
    manifest(&seq, "sequencing-results", &[]);
    write(
        &seq.join("results.json"),
        &json!({"notes": ["demo: test split"], "rows": [
            {"dataset": "demo", "method": "random", "features": "-", "sequences": 10, "multi_reference": 8, "single": metric_block(0.2, 0.05), "multi": metric_block(0.5, 0.2)},
            {"dataset": "demo", "method": "pairwise", "features": "multimodal", "sequences": 10, "multi_reference": 8, "single": metric_block(0.6, 0.3), "multi": metric_block(0.9, 0.8)}
        ]}),
    );
    let ev = root.join("eval/hasty");
    manifest(&ev, "eval", &[]);
    write(
        &ev.join("results.json"),
        &json!({"kind": "multiple_choice", "sets": [{"name": "tasks", "predictions": "p.jsonl", "tasks": [
            {"task": "visual_cloze", "questions": 40, "accuracy": estimate(0.95, 0.9, 1.0), "missing": 0, "invalid": 0},
            {"task": "all", "questions": 40, "accuracy": estimate(0.95, 0.9, 1.0), "missing": 0, "invalid": 0}]}]}),
    );
    let chart = BarChart::new("sheet", "x", "y", vec!["a".into()]).with_series("s", vec![Some(1.0)], None);
    write_bar_chart(&chart, &root.join("sheet.svg"), &root.join("contact_sheet.png")).unwrap();
    // Things the report must ignore: an unfinished output and an unrelated JSON file.
    write(&root.join(".tasks.partial-1/counts.json"), &json!([{"setting": "x", "task": "y", "questions": 1}]));
    write(&root.join("notes.json"), &json!({"hello": "world"}));
}

fn report(root: &Path) -> (String, String) {
    let w = write_report(
        root,
        &root.join("report.html"),
        &ReportOptions { title: Some("Run <1>".into()), ..Default::default() },
    )
    .unwrap();
    (std::fs::read_to_string(&w.html).unwrap(), std::fs::read_to_string(&w.markdown).unwrap())
}

#[test]
fn the_report_has_a_table_for_every_output() {
    let td = tempfile::tempdir().unwrap();
    fixture(td.path());
    let (html, md) = report(td.path());
    // Corpus: counts from procedures.jsonl, and the order ground truth (5 of 6 procedures have > 1 order).
    assert!(md.contains("| `corpus` | 6 | 30 | 5.0 | 30 |"), "{md}");
    assert!(md.contains("| `corpus` | 6 | 5 (83%) |"), "{md}");
    // Statistics, features, suite counts (pivot: settings down, tasks across, missing cells as –).
    assert!(md.contains("| steps per procedure | 6 | 5.00 | 0.50 | 4 | 6 |"), "{md}");
    assert!(md.contains("| `features/w2v` | w2v (w2v-1) | text | 100 | 30 | 0 | l2 |"), "{md}");
    assert!(md.contains("| setting | textual_cloze | visual_cloze |"), "{md}");
    assert!(md.contains("| RecipeQA | – | 40 |") && md.contains("| (0,1,1) | 30 | 12 |"), "{md}");
    // Audit: RecipeQA mode first, then the knob setting found from the audited task set's manifest.
    let rq = md.find("| RecipeQA | 40 | 25.0 | 95.0 [90.0, 100.0] | 72.0 [67.0, 77.0] |").expect("recipeqa audit row");
    let k = md.find("| (0,1,1) | 12 | 25.0 | 20.0 [15.0, 25.0] | 31.0 [26.0, 36.0] |").expect("knob audit row");
    assert!(rq < k);
    assert!(md.contains("visual_cloze: distance probe 72.0 [67.0, 77.0]% in RecipeQA mode (40 questions); lowest over the knob settings 31.0 [26.0, 36.0]% with knobs (0,1,1)"), "{md}");
    // Sequencing: table-2 layout, single then multi-reference metrics.
    assert!(
        md.contains(
            "| demo | pairwise | multimodal | 10 | – | 60.0 [50.0, 70.0] | 30.0 [20.0, 40.0] | 0.500 | 3.000 | 3.500 | 2.500 | 90.0 [80.0, 100.0] | 80.0 [70.0, 90.0] |"
        ),
        "{md}"
    );
    // The headline's PMRs carry their intervals; a file without seeds shows "–" in the seeds column (above).
    assert!(
        md.contains("best perfect-match ratio 80.0 [70.0, 90.0] % by pairwise (multimodal features) against 20.0 [10.0, 30.0] % for random order"),
        "{md}"
    );
    assert!(md.contains("| tasks | `p.jsonl` | – | visual_cloze | 40 | 95.0 [90.0, 100.0] | 0 | 0 |"), "{md}");
    // Hidden folders and unknown JSON are not reported.
    assert!(!md.contains("partial") && !md.contains("notes.json"));
    // HTML: self-contained (inline SVG plots, base64 picture, no external resources), escaped.
    assert!(html.contains("<svg") && html.contains("data:image/png;base64,iVBORw0KGgo"));
    for external in ["<script", "<link", "src=\"http", "href=\"http"] {
        assert!(!html.contains(external), "{external}");
    }
    assert!(html.contains("<title>Run &lt;1&gt;</title>") && html.contains("cake &amp; &lt;pie&gt;"));
    assert!(html.contains("<th class=\"group\" colspan=\"6\">single reference</th>"));
    // Markdown links the plot files, which exist.
    for line in md.lines().filter(|l| l.starts_with("![")) {
        let target = &line[line.rfind("](").unwrap() + 2..line.len() - 1];
        assert!(td.path().join(target).is_file(), "{target}");
    }
}

#[test]
fn reports_are_deterministic_and_do_not_depend_on_the_folder() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    fixture(a.path());
    fixture(b.path());
    let first = report(a.path());
    assert_eq!(first, report(a.path()), "a rerun gives the same bytes");
    assert_eq!(first, report(b.path()), "another folder gives the same bytes");
    let files = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d.join("report_files")).unwrap().map(|e| e.unwrap().path()).collect();
        v.sort();
        v.iter().map(|p| (p.file_name().unwrap().to_owned(), std::fs::read(p).unwrap())).collect::<Vec<_>>()
    };
    assert_eq!(files(a.path()), files(b.path()));
}

#[test]
fn a_malformed_file_is_an_error_naming_file_and_field() {
    let td = tempfile::tempdir().unwrap();
    fixture(td.path());
    let audit = td.path().join("audit/recipeqa/visual_cloze/audit.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&audit).unwrap()).unwrap();
    v["tasks"][0]["distance_probe"]["accuracy"]["value"] = json!("high");
    write(&audit, &v);
    let e = write_report(td.path(), &td.path().join("report.html"), &ReportOptions::default()).unwrap_err().to_string();
    assert!(
        e.contains("audit/recipeqa/visual_cloze/audit.json") && e.contains("tasks[0].distance_probe.accuracy.value"),
        "{e}"
    );
    assert!(!td.path().join("report.html").exists(), "nothing written on error");
    // Not JSON at all.
    std::fs::write(td.path().join("stats.json"), "{ not json").unwrap();
    let e = write_report(td.path(), &td.path().join("report.html"), &ReportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("stats.json"), "{e}");
}

#[test]
fn an_empty_folder_is_an_error() {
    let td = tempfile::tempdir().unwrap();
    let e = write_report(td.path(), &td.path().join("report.html"), &ReportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("no stepwise outputs found"), "{e}");
}

#[test]
fn the_suite_section_shows_ordering_aliases_widened_counts_and_the_parameters() {
    let td = tempfile::tempdir().unwrap();
    let suite = td.path().join("suite");
    write(
        &suite.join("manifest.json"),
        &json!({"schema_version": 1, "kind": "suite", "stepwise_version": "0.1.0", "command": ["stepwise", "sweep"],
                "inputs": [], "counts": {},
                "params": {"generate": {"k": 100, "k_c": 50, "margin": 1.2, "metric": "l2"}}}),
    );
    let row = |setting: &str, task: &str, n: u64, widened: u64| {
        json!({"setting": setting, "task": task, "questions": n, "questions_by_split": {"train": n},
               "procedures_used": 3, "questions_skipped": {}, "questions_widened": widened})
    };
    let mut alias = row("knobs-0-1-0", "visual_ordering", 9, 0);
    alias["setting"] = json!("knobs-0-1-1");
    alias["same_as"] = json!("knobs-0-1-0");
    write(
        &suite.join("counts.json"),
        &json!([row("knobs-0-1-0", "visual_ordering", 9, 0), alias, row("knobs-0-1-1", "visual_cloze", 7, 2)]),
    );
    let (_, md) = report(td.path());
    assert!(md.contains("| (0,1,0) | – | 9 |") && md.contains("| (0,1,1) | 7 | = (0,1,0) |"), "{md}");
    assert!(md.contains("| (0,1,1) | visual_cloze | 7 | 7 | – | – | 3 | 2 |"), "{md}");
    assert!(md.contains("metric l2") && md.contains("K_C = 50") && md.contains("margin 1.2"), "{md}");
}

#[test]
fn an_audit_of_a_data_file_is_labelled_by_the_file_not_by_a_setting_its_path_contains() {
    let td = tempfile::tempdir().unwrap();
    let dir = td.path().join("audit-rqa");
    manifest(&dir, "audit", &["../shared/data/recipeqa/val-dev.json"]);
    write(
        &dir.join("audit.json"),
        &json!({"questions": 40, "config": {"folds": 5}, "tasks": [audit_task("visual_cloze", 40, 0.9, 0.7)]}),
    );
    let (_, md) = report(td.path());
    assert!(md.contains("| `../shared/data/recipeqa/val-dev.json` | 40 |"), "{md}");
    assert!(!md.contains("| RecipeQA |"), "a RecipeQA file is not the RecipeQA setting: {md}");
}

#[test]
fn installed_pretrained_models_in_the_run_folder_are_not_read_as_trained_models() {
    // The README tour runs `stepwise report .` in the repository root, where models/ holds the converted
    // pretrained weights (manifest kind "model", no training.json).
    let td = tempfile::tempdir().unwrap();
    fixture(td.path());
    let lite0 = td.path().join("models/effnet-lite0");
    manifest(&lite0, "model", &[]);
    std::fs::write(lite0.join("model.safetensors"), b"weights").unwrap();
    let (_, md) = report(td.path());
    assert!(!md.contains("effnet-lite0"), "{md}");
}
