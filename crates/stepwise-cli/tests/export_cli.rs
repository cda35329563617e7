//! `stepwise export` end to end: a world suite exported three ways (read back: the Parquet rows are the suite's
//! questions with the corpus's image bytes; same bytes on a second run with another thread count), and bad input
//! refused with the question, the image and nothing written.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::{Array, BinaryArray, Int64Array, ListArray, StringArray, StructArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use stepwise_core::output::read_tree;
use stepwise_core::{Corpus, TaskSet};

mod common;
use common::{bin, run};

fn ok(args: &[&str], dir: &Path) {
    let (code, _, err) = run(bin().args(args).current_dir(dir));
    assert_eq!(code, 0, "stepwise {args:?}: {err}");
}

/// One row of a Hugging Face export's Parquet file: qid, answer, image paths, image bytes.
type Row = (String, i64, Vec<String>, Vec<Vec<u8>>);

fn parquet_rows(file: &Path) -> Vec<Row> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap()).unwrap();
    let meta = reader.schema().metadata().get("huggingface").cloned().expect("the datasets features metadata");
    assert!(meta.contains(r#""images":{"_type":"Sequence","feature":{"_type":"Image"}}"#), "{meta}");
    let mut rows = Vec::new();
    for batch in reader.build().unwrap() {
        let batch = batch.unwrap();
        let col = |name: &str| batch.column_by_name(name).unwrap().clone();
        let qid = col("qid");
        let qid = qid.as_any().downcast_ref::<StringArray>().unwrap();
        let answer = col("answer");
        let answer = answer.as_any().downcast_ref::<Int64Array>().unwrap();
        let images = col("images");
        let images = images.as_any().downcast_ref::<ListArray>().unwrap();
        for i in 0..batch.num_rows() {
            let list = images.value(i);
            let s = list.as_any().downcast_ref::<StructArray>().unwrap();
            let bytes = s.column(0).as_any().downcast_ref::<BinaryArray>().unwrap();
            let paths = s.column(1).as_any().downcast_ref::<StringArray>().unwrap();
            rows.push((
                qid.value(i).to_string(),
                answer.value(i),
                (0..s.len()).map(|j| paths.value(j).to_string()).collect(),
                (0..s.len()).map(|j| bytes.value(j).to_vec()).collect(),
            ));
        }
    }
    rows
}

#[test]
fn a_world_suite_exports_three_ways_with_its_questions_and_images_byte_identically() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    ok(&["-q", "world", "generate", "-n", "60", "--seed", "2", "-o", "world"], d);
    ok(&["-q", "embed", "world", "--encoder", "descriptor", "-o", "f-img"], d);
    ok(&["-q", "embed", "world", "--encoder", "w2v", "-o", "f-txt"], d);
    ok(&["-q", "sweep", "world", "--features", "f-txt", "--features", "f-img", "-o", "suite"], d);
    ok(&["-q", "--threads", "1", "export", "suite", "--to", "hf", "-o", "hf"], d);
    ok(&["-q", "--threads", "2", "export", "suite", "--to", "hf", "-o", "hf2"], d);
    assert_eq!(read_tree(&d.join("hf")).unwrap(), read_tree(&d.join("hf2")).unwrap(), "same bytes for any --threads");

    // Every row is the suite's question, in file order, with the corpus's image files byte for byte.
    let corpus = Corpus::load(&d.join("world")).unwrap();
    let card = std::fs::read_to_string(d.join("hf/README.md")).unwrap();
    let mut checked = 0;
    for setting in ["recipeqa", "knobs-1-1-1"] {
        for task in ["textual_cloze", "visual_cloze", "visual_coherence", "visual_ordering"] {
            let dir = stepwise_tasks::suite::taskset_dir(
                &d.join("suite"),
                stepwise_tasks::Mode::parse_label(setting).unwrap(),
                stepwise_core::Task::parse(task).unwrap(),
            );
            let Ok(ts) = TaskSet::load(&dir) else { continue };
            let mut by_split: BTreeMap<String, Vec<_>> = BTreeMap::new();
            for q in &ts.questions {
                by_split.entry(stepwise_tasks::export::split_name(q.split.as_deref())).or_default().push(q);
            }
            let config = format!("{}-{task}", dir.parent().unwrap().file_name().unwrap().to_string_lossy());
            assert!(card.contains(&format!("- config_name: {config}\n")), "{config} missing from the card");
            for (split, qs) in by_split {
                let file = d.join("hf").join(stepwise_tasks::export::hf::data_file(&config, &split));
                let rows = parquet_rows(&file);
                assert_eq!(rows.len(), qs.len(), "{}", file.display());
                for (row, q) in rows.iter().zip(&qs) {
                    assert_eq!((row.0.as_str(), row.1), (q.qid.as_str(), q.answer as i64));
                    assert!(!row.2.is_empty(), "{}: every task here shows images", q.qid);
                    for (path, bytes) in row.2.iter().zip(&row.3) {
                        assert_eq!(bytes, &std::fs::read(corpus.image_path(path)).unwrap(), "{path}");
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} rows checked");
    assert!(card.starts_with("---\npretty_name:") && card.contains("## Prompt layout") && card.contains("synthetic"));

    // VLMEvalKit and lmms-eval: the test split by default.
    ok(&["-q", "export", "suite", "--to", "vlmevalkit", "-o", "vlm"], d);
    ok(&["-q", "export", "suite", "--to", "lmms-eval", "-o", "lmms"], d);
    let tsv = std::fs::read_to_string(d.join("vlm/recipeqa-visual_ordering.tsv")).unwrap();
    let ordering = TaskSet::load(&d.join("suite/recipeqa/visual_ordering")).unwrap();
    let test = ordering.questions.iter().filter(|q| q.split.as_deref() == Some("test")).count();
    // One record per test question (index 0..n; quoted prompts span lines).
    assert!(test > 0);
    assert!((0..test).all(|i| tsv.contains(&format!("\n{i}\t"))) && !tsv.contains(&format!("\n{test}\t")), "{tsv}");
    assert!(
        tsv.starts_with("index\timage\timage_path\tquestion\tA\tB\tC\tD\tanswer\tcategory\tl2-category\tsplit\tqid\n")
    );
    let yaml = std::fs::read_to_string(d.join("lmms/tasks/stepwise/recipeqa-visual_ordering.yaml")).unwrap();
    let hf_path = stepwise_core::paths::absolute_normalized(&d.join("lmms/hf")).unwrap();
    assert!(yaml.contains(&format!("dataset_path: \"{}\"", hf_path.display())), "{yaml}");
    assert!(yaml.contains("dataset_name: \"recipeqa-visual_ordering\"\ntest_split: test\n"), "{yaml}");
    assert!(d.join("lmms/tasks/stepwise/utils.py").is_file() && d.join("lmms/hf/README.md").is_file());
}

#[test]
fn a_missing_image_names_the_question_and_file_and_nothing_is_written() {
    let td = tempfile::tempdir().unwrap();
    let d = td.path();
    std::fs::create_dir_all(d.join("corpus/img")).unwrap();
    std::fs::write(
        d.join("corpus/procedures.jsonl"),
        r#"{"id":"p1","steps":[{"text":"Cut.","images":["img/a.jpg"]},{"text":"Fry.","images":["img/b.jpg"]}]}"#,
    )
    .unwrap();
    std::fs::write(d.join("corpus/img/a.jpg"), [0xFF, 0xD8, 0xFF, 0xE0, 0, 0]).unwrap();
    std::fs::write(
        d.join("q.json"),
        r#"{"data":[{"qid":"q1","recipe_id":"p1","task":"visual_cloze","split":"test","context":[],
            "question":["img/a.jpg","@placeholder"],"choice_list":["img/b.jpg","img/a.jpg"],"answer":0}]}"#,
    )
    .unwrap();
    for to in ["hf", "vlmevalkit", "lmms-eval"] {
        let (code, _, err) =
            run(bin().args(["export", "q.json", "--corpus", "corpus", "--to", to, "-o", "out"]).current_dir(d));
        assert_eq!(code, 2, "{to}: {err}");
        assert!(
            err.contains("q.json: question q1: image \"img/b.jpg\"") && err.contains("img/b.jpg): "),
            "{to}: {err}"
        );
        assert!(!d.join("out").exists(), "{to}: nothing is written");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 2, "{to}: no partial output left behind");
    }
    // A task or split that cannot name files and YAML keys is refused with the question.
    let bad =
        std::fs::read_to_string(d.join("q.json")).unwrap().replace("\"task\":\"visual_cloze\"", "\"task\":\"../x\"");
    std::fs::write(d.join("bad.json"), bad).unwrap();
    let (code, _, err) =
        run(bin().args(["export", "bad.json", "--corpus", "corpus", "--to", "hf", "-o", "out"]).current_dir(d));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.json: question q1: task \"../x\" cannot name an export"), "{err}");
    std::fs::remove_file(d.join("bad.json")).unwrap();
    // Without --corpus (a plain JSON file names no corpus) the error says how to name it.
    let (code, _, err) = run(bin().args(["export", "q.json", "--to", "hf", "-o", "out"]).current_dir(d));
    assert_eq!(code, 2);
    assert!(err.contains("the corpus is unknown; name it with --corpus"), "{err}");
    // Usage errors.
    let (code, _, err) =
        run(bin().args(["export", "q.json", "--to", "hf", "--dataset-path", "x", "-o", "o"]).current_dir(d));
    assert_eq!((code, err.contains("--dataset-path is for --to lmms-eval")), (2, true), "{err}");
    let (code, _, err) = run(bin().args(["export", "q.json", "--to", "csv", "-o", "o"]).current_dir(d));
    assert_eq!(
        (code, err.contains("unknown format \"csv\"; expected one of hf, vlmevalkit, lmms-eval")),
        (2, true),
        "{err}"
    );
    let (code, _, err) =
        run(bin().args(["export", "q.json", "--to", "hf", "--split", "dev", "-o", "o"]).current_dir(d));
    assert_eq!((code, err.contains("--split dev: expected train, validation or test")), (2, true), "{err}");
}
