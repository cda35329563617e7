//! What users read, pinned by snapshot: the summary every command of a small fixed run prints (world → clean →
//! stats → embed → generate → audit → eval → sequencing → sweep → export → R2VQ → report), `audit.md`, the eval
//! tables, the suite's counts and `report.md`, with the run's folder and timings redacted. A change to any of
//! them shows up as a snapshot diff to review (`cargo insta review`), not as a substring assert that happens to
//! still match.
//!
//! No GM3C model or sequencer is trained (predictions are fixed rules written here): the numbers come from the
//! data pipeline (word2vec and the descriptor, generation, the audit's probes), seeded and thread-count invariant,
//! whose kernels give the same bits on every instruction set, so the snapshots do not depend on the CPU they were
//! taken on. Logging is left at its default (STEPWISE_LOG removed) so that stderr holds only what users read.

mod common;

use std::path::{Path, PathBuf};

use common::{bin, run};

/// A run folder and the commands run in it.
struct Run {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Run {
    fn new() -> Run {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        Run { _dir: dir, root }
    }

    /// Run `stepwise args` in the run folder; it must succeed. Returns stdout and stderr, redacted.
    fn stepwise(&self, args: &[&str]) -> (String, String) {
        let (code, out, err) = run(bin()
            .current_dir(&self.root)
            .env_remove("STEPWISE_MODELS")
            .env_remove("STEPWISE_LOG")
            .env_remove("NO_COLOR")
            .args(args));
        assert_eq!(code, 0, "stepwise {args:?}:\n{out}\n{err}");
        (self.redact(&out), self.redact(&err))
    }

    fn read(&self, rel: &str) -> String {
        self.redact(&std::fs::read_to_string(self.root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}")))
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.root.join(rel), text).unwrap();
    }

    /// The run folder as `[RUN]`, durations and rates as `[TIME]` / `[RATE]`.
    fn redact(&self, s: &str) -> String {
        let s = s.replace(&self.root.display().to_string(), "[RUN]");
        let rate = regex::Regex::new(r"\d+(\.\d+)?\s?[A-Za-z]+/s\b").unwrap();
        let time = regex::Regex::new(r"\d+(\.\d+)?\s?(ms|µs|s|min)\b").unwrap();
        let s = rate.replace_all(&s, "[RATE]");
        time.replace_all(&s, "[TIME]").into_owned()
    }
}

/// The first-choice predictor: `{"qid", "answer": 0}` for every question of a task set.
fn first_choice_predictions(taskset: &Path) -> String {
    let ts = stepwise_core::TaskSet::load(taskset).unwrap();
    ts.questions.iter().map(|q| format!("{}\n", serde_json::json!({"qid": q.qid, "answer": 0}))).collect()
}

/// The shown-order predictor: every sequencing instance's items in the order they are given.
fn shown_order_predictions(instances: &Path) -> String {
    let text = std::fs::read_to_string(instances).unwrap();
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let n = v["items"].as_array().unwrap().len();
            format!("{}\n", serde_json::json!({"id": v["id"], "order": (0..n).collect::<Vec<_>>()}))
        })
        .collect()
}

#[test]
fn summaries_audit_eval_tables_and_report_of_a_small_run() {
    let r = Run::new();
    let mut summaries = String::new();
    let mut step = |args: &[&str]| {
        let (out, err) = r.stepwise(args);
        summaries.push_str(&format!("$ stepwise {}\n{out}{err}\n", args.join(" ")));
    };
    step(&["world", "generate", "-n", "30", "--seed", "5", "--domain", "cooking", "--styles", "8", "-o", "corpus"]);
    step(&["clean", "corpus", "-o", "clean"]);
    step(&["stats", "clean"]);
    step(&["embed", "clean", "--encoder", "w2v", "--seed", "5", "-o", "text"]);
    step(&["embed", "clean", "--encoder", "descriptor", "-o", "image"]);
    let feats = ["--features", "text", "--features", "image"];
    let mut gen_args = vec!["generate", "clean"];
    gen_args.extend(feats);
    gen_args.extend(["--task", "all", "--mode", "recipeqa", "--seed", "5", "-o", "tasks"]);
    step(&gen_args);
    let mut audit_args = vec!["audit", "tasks"];
    audit_args.extend(feats);
    audit_args.extend(["--seed", "5", "-o", "audit"]);
    step(&audit_args);
    r.write("first-choice.jsonl", &first_choice_predictions(&r.root.join("tasks")));
    step(&["eval", "tasks", "-p", "first-choice.jsonl", "--seed", "5", "-o", "eval/first-choice"]);
    step(&["generate", "clean", "--task", "sequencing", "--modality", "multimodal", "--seed", "5", "-o", "sequencing"]);
    r.write("shown-order.jsonl", &shown_order_predictions(&r.root.join("sequencing/instances.jsonl")));
    step(&["eval", "sequencing", "-p", "shown-order.jsonl", "--seed", "5", "-o", "eval/shown-order"]);
    step(&["baseline", "sequencing", "--model", "random", "--seed", "5", "-o", "random-order.jsonl"]);
    let mut table_args = vec!["baseline", "sequencing", "--table", "world"];
    table_args.extend(feats);
    table_args.extend(["--seed", "5", "-o", "baselines"]);
    step(&table_args);
    step(&[
        "eval",
        "sequencing",
        "-p",
        "shown-order.jsonl",
        "--versus",
        "random-order.jsonl",
        "--split",
        "test",
        "--seed",
        "5",
        "-o",
        "eval/shown-vs-random",
    ]);
    let mut sweep_args = vec!["sweep", "clean"];
    sweep_args.extend(feats);
    sweep_args.extend(["--seed", "5", "-o", "suite"]);
    step(&sweep_args);
    step(&["export", "suite", "--to", "vlmevalkit", "-o", "suite-vlmeval"]);
    step(&["generate", "corpus", "--task", "r2vq", "--seed", "5", "-o", "r2vq"]);
    step(&["r2vq", "answer", "r2vq/train.csv", "--method", "text", "-o", "r2vq-answers.jsonl"]);
    step(&["eval", "r2vq/train.csv", "-p", "r2vq-answers.jsonl", "--seed", "5", "-o", "eval/r2vq"]);
    step(&["report", ".", "-o", "report.html", "--title", "a small run"]);

    insta::assert_snapshot!("summaries", summaries);
    insta::assert_snapshot!("audit.md", r.read("audit/audit.md"));
    insta::assert_snapshot!("eval-choices.md", r.read("eval/first-choice/results.md"));
    insta::assert_snapshot!("eval-sequencing.md", r.read("eval/shown-order/results.md"));
    insta::assert_snapshot!("eval-versus.md", r.read("eval/shown-vs-random/results.md"));
    insta::assert_snapshot!("sequencing-baselines.md", r.read("baselines/results.md"));
    insta::assert_snapshot!("eval-r2vq.md", r.read("eval/r2vq/results.md"));
    insta::assert_snapshot!("suite-counts.md", r.read("suite/counts.md"));
    insta::assert_snapshot!("report.md", r.read("report.md"));
}
