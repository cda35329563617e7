//! An lmms-eval task folder over the Hugging Face export:
//!
//! ```text
//! OUT/hf/                     the Hugging Face dataset (README.md card + data/<config>/<split>-*.parquet)
//! OUT/tasks/stepwise/<config>.yaml   one task per config: stepwise_<config>, evaluated on its test split
//! OUT/tasks/stepwise/stepwise.yaml   the group `stepwise` of all of them
//! OUT/tasks/stepwise/utils.py        doc_to_visual / doc_to_text / process_results (the card's prompt layout)
//! ```
//! Run with `lmms-eval --include_path OUT/tasks --tasks stepwise ...`. The YAMLs name the dataset by
//! `dataset_path` (the absolute path of `OUT/hf` at export time, or `--dataset-path`, e.g. a Hub repository id
//! after uploading `OUT/hf`) and `dataset_name` (the config).

use std::fmt::Write as _;
use std::path::Path;

use stepwise_core::Result;
use stepwise_core::output::write_string_atomic;

use super::{ExportSummary, Source, hf};

/// The lmms-eval task name of a config (`stepwise_` + the config with `-` as `_`).
pub fn task_name(config: &str) -> String {
    format!("stepwise_{}", config.replace('-', "_"))
}

/// The utilities the YAMLs call (the prompt layout of [`super::render`]: prompt, lettered options, the answer
/// instruction; a response's answer is a bare letter, else the letter after "answer", else its last standalone
/// option letter).
pub const UTILS_PY: &str = r#""""lmms-eval utilities of a stepwise export (written by `stepwise export --to lmms-eval`).

The prompt layout is the dataset card's: `prompt` (with <image N> placeholders naming `images` in order), the
options as "A. ..." lines, and the answer instruction.
"""
import re

ANSWER_INSTRUCTION = "Answer with the option's letter from the given choices directly."


def doc_to_visual(doc):
    return [image.convert("RGB") for image in doc["images"]]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kwargs = lmms_eval_specific_kwargs or {}
    letters = [chr(ord("A") + i) for i in range(len(doc["options"]))]
    options = "\n".join(f"{letter}. {option}" for letter, option in zip(letters, doc["options"]))
    text = f"{doc['prompt']}\nOptions:\n{options}\n{ANSWER_INSTRUCTION}"
    return f"{kwargs.get('pre_prompt', '')}{text}{kwargs.get('post_prompt', '')}"


def doc_to_target(doc):
    return doc["answer_letter"]


def parse_letter(response, n_options):
    """The option letter a response gives, or None: a bare letter ("B", "(B)", "B. ..."), else the letter after
    "answer" ("The answer is B"), else the last standalone option letter (so "A good guess is C" gives C)."""
    allowed = "".join(chr(ord("A") + i) for i in range(n_options))
    text = (response or "").strip()
    bare = re.match(rf"^\(?([{allowed}])\)?(?:[.):]|$)", text)
    if bare:
        return bare.group(1)
    after = re.search(rf"answer\W*(?:is\W*)?\(?([{allowed}])\b", text, flags=re.IGNORECASE)
    if after and after.group(1).isupper():
        return after.group(1)
    found = re.findall(rf"\b([{allowed}])\b", text)
    return found[-1] if found else None


def process_results(doc, results):
    predicted = parse_letter(results[0] if results else "", len(doc["options"]))
    return {"accuracy": 1.0 if predicted == doc["answer_letter"] else 0.0}
"#;

/// The YAML of one config's task.
pub fn task_yaml(config: &str, dataset_path: &str, split: &str) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "task: {}", task_name(config));
    let _ = writeln!(y, "dataset_path: {}", yaml_string(dataset_path));
    let _ = writeln!(y, "dataset_name: {}", yaml_string(config));
    let _ = writeln!(y, "test_split: {split}");
    y.push_str(
        "output_type: generate_until\n\
         doc_to_visual: !function utils.doc_to_visual\n\
         doc_to_text: !function utils.doc_to_text\n\
         doc_to_target: !function utils.doc_to_target\n\
         process_results: !function utils.process_results\n\
         generation_kwargs:\n  max_new_tokens: 16\n  temperature: 0\n  do_sample: false\n\
         metric_list:\n  - metric: accuracy\n    aggregation: mean\n    higher_is_better: true\n\
         metadata:\n  version: 1.0\n",
    );
    y
}

/// A double-quoted YAML string.
fn yaml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Write the Hugging Face folder and the task folder of `source` into `out`; `dataset_path` is what the YAMLs
/// name the dataset by.
pub fn write(source: &Source, out: &Path, dataset_path: &str) -> Result<ExportSummary> {
    let hf_summary = hf::write(source, &out.join("hf"))?;
    let mut summary = ExportSummary {
        format: "lmms-eval".into(),
        configs: hf_summary.configs.clone(),
        images: hf_summary.images,
        files: hf_summary.files.iter().map(|f| format!("hf/{f}")).collect(),
    };
    let mut names = std::collections::BTreeMap::new();
    for config in hf_summary.configs.keys() {
        if let Some(other) = names.insert(task_name(config), config) {
            return Err(stepwise_core::Error::bad_input(format!(
                "configs {other:?} and {config:?} would both be the lmms-eval task {}",
                task_name(config)
            )));
        }
    }
    let tasks = out.join("tasks").join("stepwise");
    let mut group = String::from("group: stepwise\ntask:\n");
    for (config, splits) in &hf_summary.configs {
        // The evaluation split: test when the config has one, else the last of its splits (validation, train).
        let split = if splits.contains_key("test") { "test" } else { splits.keys().last().map_or("test", |s| s) };
        let file = format!("{config}.yaml");
        write_string_atomic(&tasks.join(&file), &task_yaml(config, dataset_path, split))?;
        summary.files.push(format!("tasks/stepwise/{file}"));
        let _ = writeln!(group, "  - {}", task_name(config));
    }
    write_string_atomic(&tasks.join("stepwise.yaml"), &group)?;
    write_string_atomic(&tasks.join("utils.py"), UTILS_PY)?;
    summary.files.push("tasks/stepwise/stepwise.yaml".into());
    summary.files.push("tasks/stepwise/utils.py".into());
    Ok(summary)
}
