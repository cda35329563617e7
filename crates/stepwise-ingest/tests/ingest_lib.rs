//! Ingest as a library call on small synthetic inputs: byte-identical JSONL round trip, rebasing across folders,
//! duplicate ids across files, task sets, atomic output.

use std::path::Path;

use stepwise_core::corpus::{Corpus, PROCEDURES_JSONL, PROCEDURES_PARQUET, TASKSET_DIR};
use stepwise_core::{Error, TaskSet};
use stepwise_ingest::{IngestOptions, OnMissingImage, Registry, ingest};

/// Two procedures in the canonical form of ../shared's files (Python `json.dumps(ensure_ascii=False,
/// sort_keys=True, separators=(",", ":"))`): escapes, a control character, U+2028, emoji, nulls, unknown keys,
/// annotations, gallery.
fn canonical_jsonl() -> String {
    concat!(
        r#"{"category":null,"gallery":[],"id":"t/1","ingredients":["½ cup sugar","2 eggs"],"lang":"en","license":"MIT","source":"a/b@0","steps":[{"images":["images/t/a.jpg"],"text":"Line one\nline\ttwo \u0001 "#,
        "\u{2028}",
        r#" end 🍰","title":null},{"images":[],"text":null,"title":"Bake"}],"title":"Crème \"brûlée\" \\ test","zz_extra":{"a":true,"b":[1,2,{"c":null}],"n":-12}}"#,
        "\n",
        r#"{"annotations":{"order_constraints":[[0,0]]},"category":"soup","id":"t/2","lang":"zh","license":"Unlicense","source":"a/b@0","steps":[{"images":[],"note":"x","text":"肉蟹掀盖后对半砍开，撒 5g 生粉","title":null}],"title":"切好"}"#,
        "\n"
    )
    .to_string()
}

fn setup(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("images/t")).unwrap();
    std::fs::write(dir.join("images/t/a.jpg"), b"jpeg").unwrap();
    let f = dir.join("set.jsonl");
    std::fs::write(&f, canonical_jsonl()).unwrap();
    f
}

#[test]
fn jsonl_round_trip_is_byte_identical() {
    let td = tempfile::tempdir().unwrap();
    let input = setup(&td.path().join("data"));
    let out = td.path().join("corpus");
    let opts = IngestOptions { on_missing_image: OnMissingImage::Error, ..Default::default() };
    let report = ingest(std::slice::from_ref(&input), &out, &Registry::builtin(), &opts).unwrap();
    assert_eq!((report.procedures, report.images.referenced, report.images.missing.len()), (2, 1, 0));
    assert_eq!(std::fs::read(out.join(PROCEDURES_JSONL)).unwrap(), std::fs::read(&input).unwrap());
    assert_eq!(stepwise_core::parquet::row_count(&out.join(PROCEDURES_PARQUET)).unwrap(), 2);
    let corpus = Corpus::load(&out).unwrap();
    assert_eq!(corpus.image_root, td.path().join("data"));
    assert!(corpus.image_path(&corpus.procedures[0].steps[0].images[0]).is_file());
    for f in ["manifest.json", "ingest_report.json", "ingest_report.md"] {
        assert!(out.join(f).is_file(), "{f}");
    }
}

#[test]
fn inputs_in_different_folders_are_rebased_and_copied() {
    let td = tempfile::tempdir().unwrap();
    let a = setup(&td.path().join("a"));
    let b_dir = td.path().join("b/deeper");
    std::fs::create_dir_all(&b_dir).unwrap();
    std::fs::write(b_dir.join("pic.jpg"), b"x").unwrap();
    let b = b_dir.join("other.jsonl");
    std::fs::write(&b, r#"{"id":"o/1","steps":[{"text":"x","images":["pic.jpg"]}]}"#).unwrap();
    let out = td.path().join("corpus");
    let opts = IngestOptions { copy_images: true, on_missing_image: OnMissingImage::Error, ..Default::default() };
    let report = ingest(&[a, b], &out, &Registry::builtin(), &opts).unwrap();
    assert_eq!(report.copied_images, Some(2));
    let corpus = Corpus::load(&out).unwrap();
    assert_eq!(corpus.procedures[0].steps[0].images, ["a/images/t/a.jpg"]);
    assert_eq!(corpus.procedures[2].steps[0].images, ["b/deeper/pic.jpg"]);
    assert_eq!(corpus.image_root, out.join("images"));
    assert!(corpus.image_path("b/deeper/pic.jpg").is_file());
}

#[test]
fn duplicate_ids_across_files_name_both_records_and_write_nothing() {
    let td = tempfile::tempdir().unwrap();
    let a = setup(&td.path().join("a"));
    let b = td.path().join("b.jsonl");
    std::fs::write(&b, "\n{\"id\":\"t/2\",\"steps\":[]}\n").unwrap();
    let out = td.path().join("corpus");
    let e = ingest(&[a.clone(), b.clone()], &out, &Registry::builtin(), &IngestOptions::default()).unwrap_err();
    match &e {
        Error::Duplicate { id, first, second } => {
            assert_eq!(id, "t/2");
            assert_eq!(first, &format!("{}:2", a.display()));
            assert_eq!(second, &format!("{}:2", b.display()));
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(e.exit_code(), 2);
    assert!(!out.exists());
    let leftovers: Vec<_> =
        std::fs::read_dir(td.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    assert!(leftovers.iter().all(|n| !n.to_string_lossy().contains("partial")), "{leftovers:?}");
}

#[test]
fn recipeqa_questions_become_a_taskset_and_recipes() {
    let td = tempfile::tempdir().unwrap();
    let q = td.path().join("val.json");
    std::fs::write(
        &q,
        r#"{"data": [{"answer": 1, "choice_list": ["A", "B"], "context": [{"body": "b2", "id": 2, "images": ["r_2_0.jpg"]},
        {"body": "b1", "id": 1, "images": []}], "context_modality": ["body", "images"], "qid": "1000-1",
        "question": ["A", "@placeholder"], "question_modality": ["title"], "question_text": "Choose",
        "recipe_id": "r", "split": "val", "task": "textual_cloze"}]}"#,
    )
    .unwrap();
    let out = td.path().join("corpus");
    let report = ingest(&[q], &out, &Registry::builtin(), &IngestOptions::default()).unwrap();
    assert_eq!(report.inputs[0].format, "recipeqa");
    assert_eq!(report.questions_by_task["textual_cloze"], 1);
    assert_eq!(report.images.missing, ["r_2_0.jpg"]);
    let ts = TaskSet::load(&out.join(TASKSET_DIR)).unwrap();
    assert_eq!(ts.questions[0].qid, "1000-1");
    assert!(out.join(TASKSET_DIR).join("manifest.json").is_file());
    let corpus = Corpus::load(&out).unwrap();
    assert_eq!(corpus.procedures[0].steps.len(), 2);
    assert_eq!(corpus.procedures[0].steps[0].text.as_deref(), Some("b1"));
}

#[test]
fn r2vq_inline_recipes_ingest_under_an_id_prefix_and_question_files_refuse_one() {
    let td = tempfile::tempdir().unwrap();
    let inline = td.path().join("data_train3.json");
    std::fs::write(
        &inline,
        r#"{"f-AB12": ["cut ( result : chopped vegetables # tool : knife ) the broccoli ( participant : cut ) .", "boil water ."],
        "r-7": ["mix ( result : dough ) flour ( participant : mix ) and water ( participant : mix ) ."]}"#,
    )
    .unwrap();
    let out = td.path().join("corpus");
    let opts = IngestOptions { id_prefix: Some("r2vq/".into()), ..Default::default() };
    let report = ingest(std::slice::from_ref(&inline), &out, &Registry::builtin(), &opts).unwrap();
    assert_eq!((report.inputs[0].format.as_str(), report.procedures, report.steps), ("r2vq-inline", 2, 3));
    let corpus = Corpus::load(&out).unwrap();
    let mut ids: Vec<&str> = corpus.procedures.iter().map(|p| p.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["r2vq/f-AB12", "r2vq/r-7"]);
    let cut = corpus.procedures.iter().find(|p| p.id == "r2vq/f-AB12").unwrap();
    assert_eq!(cut.steps[0].text.as_deref(), Some("cut the broccoli ."), "the annotation is left out");
    assert_eq!(cut.steps[1].text.as_deref(), Some("boil water ."));
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains(r#""id_prefix": "r2vq/""#), "{manifest}");

    // RecipeQA questions name their recipes by id: a prefix would cut them loose.
    let q = td.path().join("val.json");
    std::fs::write(
        &q,
        r#"{"data": [{"answer": 0, "choice_list": ["A", "B"], "context": [{"body": "b", "id": 1, "images": []}],
        "context_modality": ["body"], "qid": "1-1", "question": ["@placeholder"], "question_modality": ["title"],
        "question_text": "Choose", "recipe_id": "r", "split": "val", "task": "textual_cloze"}]}"#,
    )
    .unwrap();
    let e = ingest(&[q], &td.path().join("q"), &Registry::builtin(), &opts).unwrap_err();
    assert!(e.to_string().contains("--id-prefix renames procedures"), "{e}");
    assert_eq!(e.exit_code(), 2);
    assert!(!td.path().join("q").exists(), "nothing written");
}

#[test]
fn explicit_format_and_detection_errors_are_usage_errors() {
    let td = tempfile::tempdir().unwrap();
    let f = td.path().join("notes.txt");
    std::fs::write(&f, "just text").unwrap();
    let out = td.path().join("corpus");
    let e = ingest(std::slice::from_ref(&f), &out, &Registry::builtin(), &IngestOptions::default()).unwrap_err();
    assert!(e.to_string().contains("cannot detect the input format"), "{e}");
    let opts = IngestOptions { format: Some("nope".into()), ..Default::default() };
    let e = ingest(&[f], &out, &Registry::builtin(), &opts).unwrap_err();
    assert!(e.to_string().contains("known formats: procedure-jsonl, recipeqa, recipeqa-recipes"), "{e}");
    assert_eq!(e.exit_code(), 2);
}
