//! Property tests: random bytes, truncated valid files and random JSON values never panic the readers (they return
//! errors), and the text functions never panic on arbitrary strings and keep their invariants.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::Value;
use stepwise_ingest::clean::{CleanConfig, CleanResources, clean_procedures};
use stepwise_ingest::text::{markup, normalize, tokenize, units};
use stepwise_ingest::{ReadOptions, Registry};

const JSONL: &str = r#"{"category":"side","id":"s/1","lang":"en","license":"MIT","source":"x","steps":[{"images":["images/a.jpg"],"text":"Mix <b>it</b> well.","title":null},{"images":[],"text":"Bake at 350F.","title":"Bake"}],"title":"T"}
{"category":null,"id":"s/2","lang":"zh","license":"MIT","source":"x","steps":[{"images":[],"text":"切好。","title":null}],"title":"U","gallery":[]}
"#;

const RECIPEQA: &str = r#"{"data": [{"answer": 1, "choice_list": ["A", "B"], "context": [{"body": "b1", "id": 1, "images": ["r_1_0.jpg"]}, {"body": "b2", "id": 2, "title": "t2"}], "context_modality": ["body", "images"], "qid": "1000-1", "question": ["A", "@placeholder"], "question_modality": ["title"], "question_text": "Choose", "recipe_id": "r", "split": "val", "task": "textual_cloze"}]}"#;

const RECIPES: &str = r#"{"source": "s", "recipes": [{"recipe_id": "r", "explorer_category": "pie", "steps": [{"id": 1, "body": "b", "title": "t", "images": ["r_1_0.jpg"]}]}]}"#;

/// A small R2VQ recipe in the SemEval layout (every column kind used).
const R2VQ: &str = "# newdoc id = r-1\n# question 4-0 = Cutting x and adding y, which comes first?\n\
# answer 4-0 = the first event\n# metadata:url = https://example.org/wiki/Soup\n# newpar id = r-1::ingredients\n\
# sent_id = r-1::ingredients::sent01\n# text = 2 carrots\n\
1\t2\t2\tNUM\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\n\
# newpar id = r-1::step01\n# sent_id = r-1::step01::sent01\n# text = Cut carrots.\n# metadata:stop_sent = STEP\n\
1\tCut\tcut\tVERB\tB-EVENT\t_\t_\tTool=knife.1.1.1|Drop=a.1.1.2:b\t_\tCUT\tB-V\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
2\tcarrots\tcarrot\tNOUN\tB-EXPLICITINGREDIENT\t1\t_\t_\tcarrots.1.1.2\t_\tB-Patient\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
3\t.\t.\tPUNCT\tO\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\n\
1\tmore\tmore\tADJ\tO\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\n";

/// HIT-QMUL's inline-tagged layout and its QA strings.
const INLINE: &str = r#"{"r1": ["cut ( result : chopped onion # tool : knife )  ( entity : B-EVENT ) the onion ( participant : cut ) ( 2 ) .", "serve ( drop : chopped onion , rice # habitat : )  ( entity : B-EVENT ) with rice ( participant : serve ) ."]}"#;
const INLINE_QA: &str = r#"{" r1": {"question": [" What should be served?     the chopped onion and rice", " How many knives are used?     1"]}}"#;

/// One line of the 2021 release.
const R2021: &str = r#"{"title": "Onions", "content": "1. Cut onion in a bowl. Serve it.", "steps_offset": [10], "sents_offset": [10, 13, 34], "ingredients": [{"offset": [[17, 22]], "aid": "T1", "mention": "onion", "name": "onion", "expression": "explicit", "ref_id": null}, {"offset": [[40, 42]], "aid": "T2", "mention": "it", "name": "onion", "expression": "implicit", "ref_id": "T1"}], "props": [{"offset": [[28, 32]], "aid": "T3", "mention": "bowl", "name": "bowl", "usage": "habitat", "orientation": "upright", "ref_id": null}], "verbs": [{"offset": [[13, 16]], "aid": "T4", "mention": "Cut", "name": "cut", "implicit_props": [{"offset": [[-1, -1]], "aid": "T4-ip0", "mention": "knife", "name": "knife", "usage": "tool"}]}, {"offset": [[34, 39]], "aid": "T5", "mention": "Serve", "name": "serve", "implicit_props": []}], "events": [{"verb": {"aid": "T4"}, "ingredients": [{"aid": "T1"}], "props": [{"aid": "T3"}]}, {"verb": {"aid": "T5"}, "ingredients": [{"aid": "T2"}], "props": []}], "instantiations": [{"ingredient": {"aid": "T2"}, "event": {"verb": {"aid": "T4"}}}], "questions": [["What should be cut?", [["T1"], ["T2"]]], ["How many bowls are used?", 1], ["Are there more bowls?", false]]}"#;

/// `text` with random edits (deletions, insertions from `alphabet`, truncation).
fn mutate(text: &str, edits: &[(usize, usize)], alphabet: &[char]) -> String {
    let mut t: Vec<char> = text.chars().collect();
    for &(at, what) in edits {
        let at = at % (t.len() + 1);
        match what % (alphabet.len() + 2) {
            0 if at < t.len() => {
                t.remove(at);
            }
            0 => {}
            1 => t.truncate(at),
            k => t.insert(at, alphabet[k - 2]),
        }
    }
    t.into_iter().collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Every built-in reader on the file: any result is fine, a panic is not (proptest reports panics as failures).
fn read_with_all(path: &Path) {
    let registry = Registry::builtin();
    let _ = registry.detect(path);
    for f in registry.formats() {
        let _ = f.read(&[path.to_path_buf()], &ReadOptions::default());
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        prop_oneof![Just("id".to_string()), Just("steps".to_string()), ".{0,12}".prop_map(|s| s)]
            .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("id".to_string()),
            Just("steps".to_string()),
            Just("text".to_string()),
            Just("images".to_string()),
            Just("data".to_string()),
            Just("qid".to_string()),
            Just("recipe_id".to_string()),
            Just("choice_list".to_string()),
            Just("answer".to_string()),
            Just("context".to_string()),
            Just("recipes".to_string()),
            Just("body".to_string()),
            "[a-z]{1,6}".prop_map(|s| s),
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(key, inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600), ext in prop_oneof![Just("jsonl"), Just("json")]) {
        let td = tempfile::tempdir().unwrap();
        read_with_all(&write(td.path(), &format!("f.{ext}"), &bytes));
    }

    #[test]
    fn truncated_files_never_panic(cut in 0usize..2000, which in 0usize..3) {
        let text = [JSONL, RECIPEQA, RECIPES][which];
        let cut = cut.min(text.len());
        let td = tempfile::tempdir().unwrap();
        read_with_all(&write(td.path(), "f.jsonl", &text.as_bytes()[..cut]));
    }

    #[test]
    fn mutated_r2vq_files_never_panic_and_what_reads_writes_back_the_same(
        edits in prop::collection::vec((0usize..2000, 0usize..13), 1..6)
    ) {
        use stepwise_ingest::readers::r2vq_conllu::parse_r2vq_conllu;
        let mut text: Vec<char> = R2VQ.chars().collect();
        for (at, what) in edits {
            let at = at % (text.len() + 1);
            match what {
                0 if at < text.len() => { text.remove(at); }
                1..=9 => text.insert(at, ['\t', '\n', '-', '=', '|', ':', '.', '0', '#'][what - 1]),
                10 => text.truncate(at),
                11 => text.insert(at, '\r'),
                _ => text.insert(at, 'é'),
            }
        }
        let text: String = text.into_iter().collect();
        if let Ok(doc) = parse_r2vq_conllu(Path::new("m.csv"), &text) {
            // What reads, writes, and reads again into the same document.
            let again = parse_r2vq_conllu(Path::new("m.csv"), &doc.to_conllu_string());
            prop_assert_eq!(again.ok(), Some(doc));
        }
        let td = tempfile::tempdir().unwrap();
        read_with_all(&write(td.path(), "m.csv", text.as_bytes()));
    }

    #[test]
    fn mutated_inline_tagged_and_2021_files_never_panic_and_what_reads_writes_back_the_same(
        edits in prop::collection::vec((0usize..1500, 0usize..40), 1..6),
        qa_edits in prop::collection::vec((0usize..300, 0usize..40), 0..3),
    ) {
        use stepwise_ingest::readers::r2vq_2021::read_r2vq_2021;
        use stepwise_ingest::readers::r2vq_conllu::parse_r2vq_conllu;
        use stepwise_ingest::readers::r2vq_inline::read_inline_tagged;
        use stepwise_ingest::readers::r2vq_json::read_question_list;
        let alphabet = ['n', '(', ')', ':', '#', ',', '"', '[', ']', '{', '}', '0', '9', '-', ' ', '\n', 'é', '\\'];
        let td = tempfile::tempdir().unwrap();
        let family = |_: &str, _: &str| Some(1);
        let inline = write(td.path(), "inline.json", mutate(INLINE, &edits, &alphabet).as_bytes());
        let qa = write(td.path(), "qa.json", mutate(INLINE_QA, &qa_edits, &alphabet).as_bytes());
        let release = write(td.path(), "r2vq.jsonl", mutate(R2021, &edits, &alphabet).as_bytes());
        let reads = [read_inline_tagged(&inline, Some(&qa), &family), read_r2vq_2021(&release, &family)];
        // What reads writes the SemEval layout, which reads back into the same document.
        for (doc, _) in reads.into_iter().flatten() {
            let again = parse_r2vq_conllu(Path::new("m.csv"), &doc.to_conllu_string());
            prop_assert_eq!(again.ok(), Some(doc));
        }
        let _ = read_question_list(&write(td.path(), "q.json", mutate(r#"[{"q_id": "2-3", "question": "where?", "doc_id": " r"}]"#, &edits, &alphabet).as_bytes()));
    }

    #[test]
    fn random_json_values_never_panic(v in json_value()) {
        let td = tempfile::tempdir().unwrap();
        let line = serde_json::to_string(&v).unwrap();
        read_with_all(&write(td.path(), "line.jsonl", format!("{line}\n").as_bytes()));
        // The same value where each format expects a record.
        read_with_all(&write(td.path(), "q.json", format!("{{\"data\": [{line}]}}").as_bytes()));
        read_with_all(&write(td.path(), "r.json", format!("{{\"recipes\": [{line}]}}").as_bytes()));
    }

    #[test]
    fn text_functions_never_panic(s in "\\PC{0,80}|[<>&;#*_`\\[\\]()!a-zA-Z0-9 .\\n/-]{0,80}") {
        let mut c = markup::MarkupCounts::default();
        let _ = markup::strip_markup(&s, &mut c);
        let _ = normalize::nfkc(&s);
        let _ = normalize::ascii_fold(&s);
        let _ = normalize::fix_sentence_spacing(&s);
        if let Some(w) = normalize::collapse_whitespace(&s, true) {
            prop_assert!(!w.contains("  ") && !w.starts_with(' ') && !w.ends_with(' '));
        }
        for t in tokenize::tokens(&s) {
            prop_assert_eq!(&s[t.start..t.end()], t.text);
            let _ = units::split_number_unit(t.text, |_| true);
        }
        let _ = tokenize::count_sentences(&s);
    }

    #[test]
    fn cleaning_arbitrary_text_never_panics(texts in prop::collection::vec("\\PC{0,60}|[<>&;a-zA-Z0-9 .]{0,60}", 1..8)) {
        let p = stepwise_core::Procedure {
            id: "p".into(),
            steps: texts.into_iter().map(|t| stepwise_core::Step { text: Some(t), ..Default::default() }).collect(),
            ..Default::default()
        };
        let cfg = CleanConfig { min_steps: None, ascii_fold: true, ..Default::default() };
        let (out, report) = clean_procedures(vec![p], &cfg, CleanResources::default()).unwrap();
        prop_assert_eq!(report.procedures_out as usize, out.len());
    }
}
