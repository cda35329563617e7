//! Acceptance on ../shared/data (run with `--ignored`; needs no model weights): the model study on the real
//! step-image procedures with the grocery photos as extra distractors (descriptor image features, word2vec
//! text features), visual cloze, RecipeQA mode and the 8 knob settings, 5-fold cross-validation by procedure
//! (only a few dozen procedures have enough step photos for a fixed split). Prints the study's tables.
//!
//! The full study with pretrained features (MiniLM, EfficientNet-Lite0) and all three visual tasks is
//! `scripts/model_study.sh`.
//!
//! Also the sequencing model grid (`seq-study`, Tables 2 and 4 of the sequencing paper) on the same procedures:
//! word2vec token features capped at 5 sentences / 60 tokens per step, descriptor patch grids, 5-fold
//! cross-validation. The full grid with pretrained features is `scripts/seq_study.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn shared_data() -> PathBuf {
    std::env::var_os("STEPWISE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"))
}

/// The four real step-image procedure sets ingested as one corpus in `dir/corpus`; returns its path.
fn ingest_real_procedures(dir: &Path) -> String {
    let data = shared_data();
    let corpus = dir.join("corpus").to_string_lossy().into_owned();
    let mut args: Vec<String> = vec!["ingest".into()];
    for set in ["gnome-recipes", "howtocook", "based-cooking", "ifixit"] {
        args.push(data.join(format!("procedures/{set}.jsonl")).to_string_lossy().into_owned());
    }
    args.extend(["-o".into(), corpus.clone()]);
    stepwise(&args.iter().map(String::as_str).collect::<Vec<_>>());
    corpus
}

fn stepwise(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_stepwise")).args(args).arg("-q").output().unwrap();
    assert!(out.status.success(), "stepwise {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn model_study_on_real_procedures_with_grocery_distractors() {
    let data = shared_data();
    let td = tempfile::tempdir().unwrap();
    let p = |n: &str| td.path().join(n).to_string_lossy().into_owned();
    let procedures: Vec<String> = ["gnome-recipes", "howtocook", "based-cooking", "ifixit"]
        .iter()
        .map(|s| data.join(format!("procedures/{s}.jsonl")).to_string_lossy().into_owned())
        .collect();
    let corpus = p("corpus");
    let mut args: Vec<&str> = vec!["ingest"];
    args.extend(procedures.iter().map(String::as_str));
    args.extend(["-o", corpus.as_str()]);
    stepwise(&args);
    stepwise(&["embed", &corpus, "--encoder", "w2v", "--seed", "1", "-o", &p("text")]);
    stepwise(&["embed", &corpus, "--encoder", "descriptor", "-o", &p("image")]);
    let grocery = data.join("distractors/grocery").to_string_lossy().into_owned();
    let feats = ["--features", &p("text"), "--features", &p("image")];
    let pool = ["--distractor-pool", grocery.as_str(), "--pool-features", &p("grocery")];
    let suite = p("suite");
    stepwise(
        &[&["sweep", &corpus, "--task", "visual_cloze", "--seed", "1", "-o", &suite], &feats[..], &pool[..]].concat(),
    );
    let study = p("study");
    let size = [
        "--hidden",
        "32",
        "--attention",
        "32",
        "--htrn-layers",
        "2",
        "--htrn-dim",
        "64",
        "--htrn-heads",
        "4",
        "--epochs",
        "20",
        "--patience",
        "5",
        "--seed",
        "1",
        "--cv",
        "5",
        "--seeds",
        "1",
    ];
    stepwise(&[&["study", &suite, "-o", &study], &feats[..], &pool[..], &size[..]].concat());
    let md = std::fs::read_to_string(Path::new(&study).join("study.md")).unwrap();
    println!("{md}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&study).join("study.json")).unwrap()).unwrap();
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 9 * 4, "9 settings × (Hasty Student + 3 models)");
    for c in cells {
        assert!(c["test_questions"].as_u64().unwrap() > 0, "{c}");
        let a = c["accuracy"]["value"].as_f64().unwrap_or_else(|| panic!("no accuracy: {c}"));
        assert!((0.0..=1.0).contains(&a));
    }
    // With cross-validation every question is predicted once and are scored the same way by `stepwise eval`.
    let htrn = Path::new(&study).join("predictions/visual_cloze/recipeqa/htrn.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_stepwise"))
        .args(["eval", &format!("{suite}/recipeqa/visual_cloze"), "-p", htrn.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cell = cells.iter().find(|c| c["setting"] == "recipeqa" && c["model"] == "HTRN").unwrap();
    let shown = format!("{:.1}", 100.0 * cell["accuracy"]["value"].as_f64().unwrap());
    assert!(String::from_utf8_lossy(&out.stdout).contains(&shown), "eval and study agree on {shown}");
}

#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn seq_study_on_real_step_image_procedures_cross_validated() {
    let td = tempfile::tempdir().unwrap();
    let p = |n: &str| td.path().join(n).to_string_lossy().into_owned();
    let corpus = ingest_real_procedures(td.path());
    let text = p("text");
    stepwise(&[
        "embed",
        &corpus,
        "--encoder",
        "w2v",
        "--seed",
        "1",
        "--tokens",
        "--max-tokens",
        "60",
        "--max-sentences",
        "5",
        "-o",
        &text,
    ]);
    let image = p("image");
    stepwise(&["embed", &corpus, "--encoder", "descriptor", "--patches", "--grid", "2", "-o", &image]);
    let seq = p("seq");
    stepwise(&[
        "generate",
        &corpus,
        "--task",
        "sequencing",
        "--modality",
        "multimodal",
        "--seq-min-steps",
        "4",
        "--windows",
        "all",
        "--seed",
        "1",
        "-o",
        &seq,
    ]);
    let study = p("study");
    stepwise(&[
        "seq-study",
        &seq,
        "--features",
        &text,
        "--features",
        &image,
        "--cv",
        "5",
        "--no-ablation",
        "--dim",
        "32",
        "--layers",
        "1",
        "--heads",
        "4",
        "--epochs",
        "5",
        "--pretrain-epochs",
        "2",
        "--seed",
        "1",
        "--seeds",
        "1",
        "--name",
        "procedures",
        "-o",
        &study,
    ]);
    let md = std::fs::read_to_string(Path::new(&study).join("results.md")).unwrap();
    println!("{md}");
    let instances = std::fs::read_to_string(Path::new(&seq).join("instances.jsonl")).unwrap();
    let ids: std::collections::BTreeSet<String> = instances
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.len() >= 20, "{} instances", ids.len());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&study).join("results.json")).unwrap()).unwrap();
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        3 + 6,
        "the pairwise baseline per modality, then image / text / multimodal, each without and with pretraining: {md}"
    );
    for row in rows {
        assert_eq!(row["sequences"], ids.len(), "every instance predicted once: {row}");
        let pmr = row["single"]["pmr"]["value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&pmr), "{row}");
    }
    // The predictions score the same through `stepwise eval` (every instance, ignoring the generator's splits).
    let preds = Path::new(&study).join("predictions/multimodal__mlm-isp-smrm.jsonl");
    let json = p("eval.json");
    stepwise(&["eval", &seq, "-p", preds.to_str().unwrap(), "--json", &json]);
    let e: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let all = e["groups"].as_array().unwrap().iter().find(|g| g["group"] == "all").unwrap();
    let row = rows.iter().find(|r| r["method"] == "sequencer + MLM+ISP+SMRM" && r["features"] == "multimodal").unwrap();
    assert_eq!(all["sequences"], ids.len());
    assert_eq!(all["metrics"]["pmr"]["value"], row["multi"]["pmr"]["value"], "eval and seq-study agree");
}

/// R2VQ's event-ordering study (§4.2, appendix Table 2) on the annotated SemEval test recipes: EVENT instances
/// (sentences of one ingredient) and SENT instances (consecutive sentences of the same lengths), tf-idf features,
/// the pairwise + topological-sort baseline trained on the train recipes, scored on the test recipes by length
/// bucket. Prints the tables (numbers for the closing note); checks the instances' construction.
#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn r2vq_event_ordering_sent_versus_event_by_length() {
    let gold = shared_data().join("r2vq/semeval2022_task9/test_crl_srl.csv");
    let td = tempfile::tempdir().unwrap();
    for hidden in [false, true] {
        let dir = td.path().join(if hidden { "hidden" } else { "explicit" });
        let d = dir.to_str().unwrap();
        let mut args = vec!["r2vq", "order", gold.to_str().unwrap(), "-o", d];
        if hidden {
            args.push("--with-hidden");
        }
        stepwise(&args);
        let again = td.path().join("again");
        let mut args2 = args.clone();
        args2[4] = again.to_str().unwrap();
        stepwise(&args2);
        for kind in ["event", "sent"] {
            let a = std::fs::read(dir.join(kind).join("instances.jsonl")).unwrap();
            assert_eq!(a, std::fs::read(again.join(kind).join("instances.jsonl")).unwrap(), "same seed, same bytes");
        }
        std::fs::remove_dir_all(&again).unwrap();
        let read = |kind: &str| -> Vec<serde_json::Value> {
            std::fs::read_to_string(dir.join(kind).join("instances.jsonl"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let (event, sent) = (read("event"), read("sent"));
        assert!(event.len() > 100 && event.len() == sent.len(), "{} EVENT, {} SENT", event.len(), sent.len());
        for (e, s) in event.iter().zip(&sent) {
            let order = |inst: &serde_json::Value| -> Vec<u64> {
                inst["references"][0]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| inst["items"][i.as_u64().unwrap() as usize]["step"].as_u64().unwrap())
                    .collect()
            };
            let (eo, so) = (order(e), order(s));
            assert!(eo.windows(2).all(|w| w[0] < w[1]), "EVENT reference in document order: {eo:?}");
            assert!(so.windows(2).all(|w| w[1] == w[0] + 1), "SENT sentences consecutive: {so:?}");
            assert_eq!(eo.len(), so.len());
        }
        stepwise(&["embed", &format!("{d}/sentences"), "-e", "tfidf", "-o", &format!("{d}/features")]);
        for kind in ["event", "sent"] {
            let preds = format!("{d}/{kind}.jsonl");
            stepwise(&[
                "baseline",
                &format!("{d}/{kind}"),
                "--model",
                "pairwise",
                "--features",
                &format!("{d}/features"),
                "-o",
                &preds,
            ]);
            let out = Command::new(env!("CARGO_BIN_EXE_stepwise"))
                .args(["eval", &format!("{d}/{kind}"), "-p", &preds, "--split", "test", "--by-length", "2,3-5,6-10"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let table = String::from_utf8_lossy(&out.stdout);
            assert!(table.contains("| all |") && table.contains("| n=2 |"), "{table}");
            println!(
                "R2VQ event ordering, {kind}, hidden arguments {}:\n{table}",
                if hidden { "counted" } else { "not counted" }
            );
        }
    }
}

/// The question templates cover the SemEval release: every question of the test file and the answered train
/// recipe parses, and for every answerable family the template's candidates include the question's family.
#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn r2vq_question_templates_cover_the_release_and_name_the_right_families() {
    use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
    use stepwise_tasks::r2vq::questions::parse_question;
    let dir = shared_data().join("r2vq/semeval2022_task9");
    let (mut total, mut unparsed, mut wrong_family) = (0, Vec::new(), Vec::new());
    for file in ["test_crl_srl.csv", "train_sample_1recipe_srpol.csv"] {
        for r in read_r2vq_conllu(&dir.join(file)).unwrap().recipes {
            for q in r.questions() {
                total += 1;
                match parse_question(&q.question) {
                    None => unparsed.push(format!("{}/{}: {}", r.id, q.id, q.question)),
                    Some(p) if q.id.family != 18 && !p.template.families().contains(&q.id.family) => {
                        wrong_family.push(format!("{}/{} ({:?}): {}", r.id, q.id, p.template, q.question))
                    }
                    Some(_) => {}
                }
            }
        }
    }
    println!(
        "{total} questions, {} unparsed, {} with a family outside the template's",
        unparsed.len(),
        wrong_family.len()
    );
    for l in unparsed.iter().chain(&wrong_family).take(20) {
        println!("  {l}");
    }
    assert_eq!(total, 3442 + 27);
    assert!(unparsed.is_empty() && wrong_family.is_empty());

    // The 799 train recipes of HIT-QMUL's derived file: `"<question>     <answer>"` strings, no family ids.
    let path = dir.join("hitqmul_derived/train_text_qa_baseline_10_28.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (mut n, mut missed) = (0, Vec::new());
    for recipe in v.as_object().unwrap().values() {
        for qa in recipe["question"].as_array().unwrap() {
            let q = qa.as_str().unwrap().split("     ").next().unwrap();
            n += 1;
            if parse_question(q).is_none() {
                missed.push(q.to_string());
            }
        }
    }
    println!("train QA strings: {n}, unparsed {}", missed.len());
    for q in missed.iter().take(10) {
        println!("  {q}");
    }
    assert_eq!(n, 26_503);
    assert!(missed.is_empty());
}

/// The families' programs against the release: on the answered train recipe, `stepwise r2vq answer` scored by
/// the R2VQ scorer; on the test file (questions without answers), how many answerable questions get an answer,
/// how many distractors (family 18) get none, and how often the answering program's family is the id's.
#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn r2vq_programs_answer_the_release_questions_from_annotation() {
    use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
    use stepwise_score::r2vq::{gold_questions, read_answer_predictions, score};
    let dir = shared_data().join("r2vq/semeval2022_task9");
    let td = tempfile::tempdir().unwrap();
    let train = dir.join("train_sample_1recipe_srpol.csv");
    let answers = td.path().join("train.jsonl");
    stepwise(&["r2vq", "answer", train.to_str().unwrap(), "-o", answers.to_str().unwrap()]);
    let gold = gold_questions(&read_r2vq_conllu(&train).unwrap());
    let scores = score(&gold, &read_answer_predictions(&answers).unwrap(), &answers, &Default::default()).unwrap();
    println!("{}", stepwise_score::r2vq::markdown_table(&scores));
    for q in scores.questions.iter().filter(|q| q.em < 1.0) {
        println!("  disagreement {}: ours {:?}, gold {:?}", q.id, q.prediction, q.gold);
    }
    assert_eq!(scores.overall.questions, 27);
    assert!(scores.overall.em.value >= 0.9, "train-sample EM {}", scores.overall.em.value);

    let test = dir.join("test_crl_srl.csv");
    let answers = td.path().join("test.jsonl");
    stepwise(&["r2vq", "answer", test.to_str().unwrap(), "-o", answers.to_str().unwrap()]);
    let again = td.path().join("again.jsonl");
    stepwise(&["r2vq", "answer", test.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert_eq!(std::fs::read(&answers).unwrap(), std::fs::read(&again).unwrap(), "same input, same bytes");
    // family -> [questions, answered, same family]
    let mut per: std::collections::BTreeMap<u32, [usize; 3]> = Default::default();
    for line in std::fs::read_to_string(&answers).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = v["id"].as_str().unwrap();
        let family: u32 = id.rsplit('/').next().unwrap().split('-').next().unwrap().parse().unwrap();
        let row = per.entry(family).or_default();
        row[0] += 1;
        row[1] += usize::from(v["answer"] != "N/A");
        row[2] += usize::from(v["family"].as_u64() == Some(family as u64));
    }
    println!("| family | questions | answered | program family = id family |\n|---|---:|---:|---:|");
    for (f, [n, a, s]) in &per {
        println!("| {f} | {n} | {a} | {s} |");
    }
    let (n, answered): (usize, usize) =
        per.iter().filter(|(f, _)| **f != 18).fold((0, 0), |(n, a), (_, r)| (n + r[0], a + r[1]));
    let distractors = per[&18];
    println!(
        "answerable: {answered}/{n} answered; distractors: {}/{} without an answer",
        distractors[0] - distractors[1],
        distractors[0]
    );
    assert_eq!(n + distractors[0], 3442);
    assert!(answered as f64 >= 0.85 * n as f64, "{answered}/{n} answerable questions answered");
    assert!(
        distractors[1] as f64 <= 0.1 * distractors[0] as f64,
        "{}/{} distractors answered",
        distractors[1],
        distractors[0]
    );
}

/// The program check on 800 train recipes: HIT-QMUL's inline-tagged annotation converted to the SemEval layout
/// with the 26,503 gold QA strings, answered by the programs and scored. The inline form has no SRL columns and
/// no coreference (see `stepwise_ingest::readers::r2vq_inline`), so families 5–16 cannot be answered from it and
/// are reported, not checked; families 0–4 and 17 are checked, and 18 (no answer) too.
#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn r2vq_programs_against_800_train_recipes_gold_answers() {
    use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
    use stepwise_score::r2vq::{gold_questions, read_answer_predictions, score};
    let dir = shared_data().join("r2vq/semeval2022_task9/hitqmul_derived");
    let td = tempfile::tempdir().unwrap();
    let converted = td.path().join("train800.csv");
    let answers = td.path().join("answers.jsonl");
    stepwise(&[
        "r2vq",
        "convert",
        dir.join("inline_tagged/entity_train3.json").to_str().unwrap(),
        "--from",
        "inline-tagged",
        "--qa",
        dir.join("train_text_qa_baseline_10_28.json").to_str().unwrap(),
        "-o",
        converted.to_str().unwrap(),
    ]);
    stepwise(&["r2vq", "answer", converted.to_str().unwrap(), "-o", answers.to_str().unwrap()]);
    let gold = gold_questions(&read_r2vq_conllu(&converted).unwrap());
    assert_eq!(gold.len(), 26_503);
    let scores = score(&gold, &read_answer_predictions(&answers).unwrap(), &answers, &Default::default()).unwrap();
    println!("{}", stepwise_score::r2vq::markdown_table(&scores));
    for f in &scores.families {
        let family = f.family.unwrap();
        if [0, 1, 2, 3, 4, 17, 18].contains(&family) {
            let floor = if family == 17 { 0.3 } else { 0.5 };
            assert!(f.em.value >= floor, "family {family}: EM {} below {floor}", f.em.value);
        }
    }
    let written = std::fs::read_to_string(&answers).unwrap();
    assert!(written.contains(r#""answer":"N/A""#) && !written.contains(r#""answer":null"#), "unanswerable is N/A");

    // The learned text method, held out by recipe: fitted on 640 recipes, every route scored on the other 160
    // (programs where the layer is there, else the text method: the rules, then the span model).
    let split = td.path().join("split");
    stepwise(&["r2vq", "split", converted.to_str().unwrap(), "--held-out", "0.2", "-o", split.to_str().unwrap()]);
    let (fit, held) = (split.join("fit.csv"), split.join("held-out.csv"));
    let model = td.path().join("span.json");
    stepwise(&["r2vq", "train-text", fit.to_str().unwrap(), "-o", model.to_str().unwrap()]);
    let held_gold = gold_questions(&read_r2vq_conllu(&held).unwrap());
    let fitted: std::collections::BTreeSet<String> =
        read_r2vq_conllu(&fit).unwrap().recipes.into_iter().map(|r| r.id).collect();
    assert!(held_gold.iter().all(|q| !fitted.contains(&q.recipe)), "held-out recipes are not fitted on");
    let mut runs = Vec::new();
    for (name, extra) in [("rules", vec![]), ("span model", vec!["--text-model", model.to_str().unwrap()])] {
        let out = td.path().join(format!("held-{}.jsonl", runs.len()));
        let mut args = vec!["r2vq", "answer", held.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend(extra);
        stepwise(&args);
        let s = score(&held_gold, &read_answer_predictions(&out).unwrap(), &out, &Default::default()).unwrap();
        println!("held-out recipes, programs + {name}:\n{}", stepwise_score::r2vq::markdown_table(&s));
        runs.push(s);
    }
    let family_em = |s: &stepwise_score::r2vq::R2vqScores, family: u32| {
        s.families.iter().find(|f| f.family == Some(family)).map_or(0.0, |f| f.em.value)
    };
    let (rules, span) = (&runs[0], &runs[1]);
    let (span_ci, rules_ci) = (span.overall.em.ci.unwrap(), rules.overall.em.ci.unwrap());
    assert!(
        span_ci.low > rules_ci.high,
        "the span model's EM {:?} is not above the rules' {:?} beyond both intervals",
        span.overall.em,
        rules.overall.em
    );
    for family in [5, 7, 8] {
        assert!(family_em(span, family) >= 0.7, "family {family}: EM {}", family_em(span, family));
    }
    assert!(family_em(span, 18) >= 0.85, "unanswerable: EM {}", family_em(span, 18));

    // The tagger, trained on the other 640 inline-tagged recipes: its layer against the held-out recipes' own,
    // and the same questions answered from the predicted layer.
    let tagger = td.path().join("tagger.json");
    let inline = dir.join("inline_tagged/entity_train3.json");
    let (inline, held_s) = (inline.to_str().unwrap(), held.to_str().unwrap());
    stepwise(&["r2vq", "train-tagger", inline, "--exclude", held_s, "-o", tagger.to_str().unwrap()]);
    let tagged = td.path().join("tagged.csv");
    let report_dir = td.path().join("report");
    std::fs::create_dir_all(&report_dir).unwrap();
    let scores = report_dir.join("tagging.json");
    let tag_args = ["--model", tagger.to_str().unwrap(), "-o", tagged.to_str().unwrap()];
    stepwise(&[&["r2vq", "tag", held_s, "--scores", scores.to_str().unwrap()][..], &tag_args].concat());
    let labels =
        stepwise_score::r2vq::tagging_scores(&read_r2vq_conllu(&held).unwrap(), &read_r2vq_conllu(&tagged).unwrap());
    println!("tagger on held-out recipes:\n{}", stepwise_score::r2vq::tagging_table(&labels));
    let f1 = |label: &str| labels.iter().find(|l| l.label == label).map_or(0.0, |l| l.f1);
    assert!(f1("mention EVENT") >= 0.9, "events F1 {}", f1("mention EVENT"));
    assert!(f1("PART link") >= 0.75, "participant links F1 {}", f1("PART link"));
    // Results are named (weakly: 8% F1 when measured), so the object-lifespan programs run on a predicted layer.
    assert!(f1("hidden Result") > 0.04, "results F1 {}", f1("hidden Result"));
    let out = td.path().join("tagged.jsonl");
    stepwise(&[
        "r2vq",
        "answer",
        tagged.to_str().unwrap(),
        "--text-model",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    // The report shows the tagger's table and the routes of an evaluation.
    let eval_dir = report_dir.join("eval-tagged");
    stepwise(&["eval", tagged.to_str().unwrap(), "-p", out.to_str().unwrap(), "-o", eval_dir.to_str().unwrap()]);
    stepwise(&["report", report_dir.to_str().unwrap(), "-o", report_dir.join("report.html").to_str().unwrap()]);
    let md = std::fs::read_to_string(report_dir.join("report.md")).unwrap();
    assert!(md.contains("## R2VQ tagger") && md.contains("| mention EVENT |"), "report lacks the tagger");
    assert!(md.contains("answered by") && md.contains("program "), "report lacks the routes");
    let predicted = score(&held_gold, &read_answer_predictions(&out).unwrap(), &out, &Default::default()).unwrap();
    println!(
        "held-out recipes, programs on the predicted layer + span model:\n{}",
        stepwise_score::r2vq::markdown_table(&predicted)
    );
    assert!(predicted.overall.em.value > 0.3, "EM on the predicted layer {}", predicted.overall.em.value);
    assert!(
        family_em(&predicted, 3) >= 0.01,
        "object lifespan on the predicted layer: EM {}",
        family_em(&predicted, 3)
    );
    assert!(predicted.overall.em.value < span.overall.em.value, "the gold layer answers better than a predicted one");

    // Any recipe: RecipeQA's dev recipes (text only) tagged, questions generated from the predicted layer.
    let corpus = td.path().join("recipeqa");
    stepwise(&[
        "ingest",
        shared_data().join("recipeqa/recipes-dev.json").to_str().unwrap(),
        "-o",
        corpus.to_str().unwrap(),
    ]);
    let rqa = td.path().join("recipeqa.csv");
    stepwise(&[
        "r2vq",
        "tag",
        corpus.to_str().unwrap(),
        "--model",
        tagger.to_str().unwrap(),
        "-o",
        rqa.to_str().unwrap(),
    ]);
    let generated = td.path().join("recipeqa-questions");
    stepwise(&["generate", rqa.to_str().unwrap(), "--task", "r2vq", "-o", generated.to_str().unwrap()]);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(generated.join("manifest.json")).unwrap()).unwrap();
    println!("RecipeQA dev recipes, questions from the predicted layer: {}", manifest["counts"]);
    assert!(manifest["counts"]["questions"].as_u64().unwrap() > 1000, "{}", manifest["counts"]);
}

/// Generated question counts per family on the release's annotation (the 100 test recipes, and the 800 train
/// recipes converted from the inline-tagged form), and the round trip: the generated split files answered by the
/// programs score 100% (every kept question means what its program says).
#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn r2vq_generation_counts_and_round_trip_on_the_release() {
    use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
    use stepwise_score::r2vq::{gold_questions, read_answer_predictions, score};
    let dir = shared_data().join("r2vq/semeval2022_task9");
    let td = tempfile::tempdir().unwrap();
    let converted = td.path().join("train800.csv");
    stepwise(&[
        "r2vq",
        "convert",
        dir.join("hitqmul_derived/inline_tagged/entity_train3.json").to_str().unwrap(),
        "--from",
        "inline-tagged",
        "-o",
        converted.to_str().unwrap(),
    ]);
    for (name, input) in [("test", dir.join("test_crl_srl.csv")), ("train800", converted)] {
        let out = td.path().join(format!("gen-{name}"));
        stepwise(&["generate", input.to_str().unwrap(), "--task", "r2vq", "-o", out.to_str().unwrap()]);
        let questions: Vec<serde_json::Value> = std::fs::read_to_string(out.join("questions.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut per: std::collections::BTreeMap<u64, usize> = Default::default();
        for q in &questions {
            *per.entry(q["family"].as_u64().unwrap()).or_default() += 1;
        }
        println!("{name}: {} questions; per family {per:?}", questions.len());
        assert!(questions.len() > 1000, "{name}: {} questions", questions.len());
        for family in [0, 1, 2, 3, 4, 17, 18] {
            assert!(per.get(&family).copied().unwrap_or(0) > 50, "{name}: family {family}: {per:?}");
        }
        for split in ["train", "test"] {
            let file = out.join(format!("{split}.csv"));
            let answers = td.path().join(format!("{name}-{split}.jsonl"));
            stepwise(&["r2vq", "answer", file.to_str().unwrap(), "-o", answers.to_str().unwrap()]);
            let gold = gold_questions(&read_r2vq_conllu(&file).unwrap());
            let s = score(&gold, &read_answer_predictions(&answers).unwrap(), &answers, &Default::default()).unwrap();
            assert_eq!(s.overall.em.value, 1.0, "{name}/{split}: the generated answers are the programs' answers");
        }
    }
}

/// The program check on the 2021 release (recipe2video's `r2vq.jsonl`: 64 recipes, 56 with 1,540 questions whose
/// answers are counts, booleans or span ids): converted to the SemEval layout, answered by the programs and by the
/// text-only baseline, both scored.
#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn r2vq_programs_against_the_2021_release() {
    use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
    use stepwise_score::r2vq::{gold_questions, read_answer_predictions, score};
    let td = tempfile::tempdir().unwrap();
    let converted = td.path().join("r2021.csv");
    let release = shared_data().join("r2vq/recipe2video_site_2021/r2vq.jsonl");
    stepwise(&[
        "r2vq",
        "convert",
        release.to_str().unwrap(),
        "--from",
        "release-2021",
        "-o",
        converted.to_str().unwrap(),
    ]);
    let gold = gold_questions(&read_r2vq_conllu(&converted).unwrap());
    assert_eq!(gold.len(), 1540);
    let mut em = Vec::new();
    for method in ["annotation", "text"] {
        let answers = td.path().join(format!("{method}.jsonl"));
        stepwise(&["r2vq", "answer", converted.to_str().unwrap(), "--method", method, "-o", answers.to_str().unwrap()]);
        let s = score(&gold, &read_answer_predictions(&answers).unwrap(), &answers, &Default::default()).unwrap();
        println!("{method}:\n{}", stepwise_score::r2vq::markdown_table(&s));
        em.push(s.overall.em.value);
    }
    assert!(em[0] >= 0.7, "programs on the 2021 annotation: EM {}", em[0]);
    assert!(em[0] > em[1] + 0.2, "the annotation answers far more than the text: {em:?}");
}

/// Start `stepwise annotate serve` on a free port; returns the child and its address.
fn serve_study(study: &str) -> (std::process::Child, std::net::SocketAddr) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_stepwise"))
        .args(["-q", "annotate", "serve", "--study", study, "--bind", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().trim_start_matches("listening on http://").trim_end_matches('/').parse().unwrap();
    (child, addr)
}

/// Simulated people work a study through HTTP until none has anything left; returns (person, steps done).
async fn simulate_people(
    addr: std::net::SocketAddr,
    study_dir: &Path,
    people: &[(&str, stepwise_annotate::simulate::Behaviour)],
) -> Vec<(String, usize, String)> {
    use rand::SeedableRng;
    use stepwise_annotate::client::Client;
    use stepwise_annotate::simulate::{Step, step};
    let study = std::sync::Arc::new(stepwise_annotate::Study::read(study_dir).unwrap());
    let db = stepwise_annotate::db::Db::open(&stepwise_annotate::Study::sqlite_url(study_dir).unwrap()).await.unwrap();
    let status = if study.rules.qualification_items > 0 { "qualifying" } else { "active" };
    let mut tasks = Vec::new();
    for (k, (label, behaviour)) in people.iter().enumerate() {
        let w = db.create_worker(label, status, 0).await.unwrap();
        let (db, study, behaviour, label) = (db.clone(), study.clone(), *behaviour, label.to_string());
        tasks.push(tokio::spawn(async move {
            let mut c = Client::new(addr);
            assert_eq!(c.get(&format!("/join/{}", w.invite)).await.unwrap().status, 303);
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(k as u64);
            let mut done = 0;
            loop {
                match step(&mut c, &db, &study, &behaviour, &mut rng).await.unwrap() {
                    Step::Submitted { .. } => done += 1,
                    Step::Finished(why) => return (label, done, why),
                }
            }
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[test]
#[ignore = "needs ../shared/data (run by .ci/run)"]
fn annotation_pilot_on_real_step_image_procedures() {
    use stepwise_annotate::simulate::{Behaviour, Confidence};
    let td = tempfile::tempdir().unwrap();
    let p = |n: &str| td.path().join(n).to_string_lossy().into_owned();
    let corpus = ingest_real_procedures(td.path());
    let seq = p("seq");
    stepwise(&[
        "generate",
        &corpus,
        "--task",
        "sequencing",
        "--modality",
        "multimodal",
        "--seq-steps",
        "4",
        "--seed",
        "1",
        "-o",
        &seq,
    ]);
    // Ordering study: every instance in three modalities, 3 judgements each, 2 qualification items.
    let study = p("study");
    stepwise(&[
        "annotate",
        "create",
        &seq,
        "-o",
        &study,
        "--judgements",
        "3",
        "--qualification",
        "2",
        "--qualification-threshold",
        "0.5",
        "--censor-min-items",
        "4",
        "--seed",
        "1",
    ]);
    let careful =
        Behaviour { noise: 0.15, alternative_rate: 0.0, careless: false, confidence: Confidence::FromCorrectness };
    // Twelve people: each sees an instance in one modality only, so items get several judgements (κ defined).
    let people = [
        ("careful-1", careful),
        ("careful-2", careful),
        ("careful-3", Behaviour { noise: 0.25, ..careful }),
        ("careful-4", Behaviour { noise: 0.1, ..careful }),
        ("careful-5", Behaviour { noise: 0.05, ..careful }),
        ("careful-6", Behaviour { noise: 0.2, ..careful }),
        ("careful-7", careful),
        ("careful-8", Behaviour { noise: 0.1, ..careful }),
        ("careful-9", Behaviour { noise: 0.3, ..careful }),
        ("noisy-10", Behaviour { noise: 0.45, ..careful }),
        ("noisy-11", Behaviour { noise: 0.6, ..careful }),
        ("careless-12", Behaviour { careless: true, ..careful }),
    ];
    let (mut server, addr) = serve_study(&study);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let worked = rt.block_on(simulate_people(addr, Path::new(&study), &people));
    server.kill().unwrap();
    server.wait().unwrap();
    for (who, n, why) in &worked {
        println!("pilot ordering: {who}: {n} answers, then {why:?}");
    }
    let results = p("results");
    stepwise(&["annotate", "export", &study, "-o", &results]);
    let summary = std::fs::read_to_string(Path::new(&results).join("summary.md")).unwrap();
    println!("{summary}");
    let tables: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&results).join("tables.json")).unwrap()).unwrap();
    for m in tables["modalities"].as_array().unwrap() {
        assert!(m["kappa_instances"].as_u64().unwrap() > 0, "no instance with two judgements: {m}");
    }
    // Human rows: each modality's first round is scored by stepwise eval.
    let instances = format!("{study}/instances.jsonl");
    for m in ["multimodal", "text", "image"] {
        let preds = format!("{results}/predictions/{m}-1.jsonl");
        assert!(Path::new(&preds).is_file(), "no human predictions for {m}");
        let out = Command::new(env!("CARGO_BIN_EXE_stepwise"))
            .args(["eval", &instances, "-p", &preds, "--skip-missing"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        println!("human {m}, round 1:\n{}", String::from_utf8_lossy(&out.stdout));
    }
    let workers = std::fs::read_to_string(Path::new(&results).join("workers.jsonl")).unwrap();
    let careless = workers.lines().find(|l| l.contains("careless-12")).unwrap();
    assert!(careless.contains("\"status\":\"censored\"") || careless.contains("\"status\":\"failed\""), "{careless}");

    // Alternative orders: four people, then the majority references feed generation.
    let alt = p("alt");
    stepwise(&["annotate", "create", &seq, "-o", &alt, "--kind", "alternatives", "--judgements", "3", "--seed", "1"]);
    let offer =
        Behaviour { noise: 0.0, alternative_rate: 0.5, careless: false, confidence: Confidence::FromCorrectness };
    let people = [("alt-1", offer), ("alt-2", offer), ("alt-3", offer), ("alt-4", offer)];
    let (mut server, addr) = serve_study(&alt);
    let worked = rt.block_on(simulate_people(addr, Path::new(&alt), &people));
    server.kill().unwrap();
    server.wait().unwrap();
    for (who, n, why) in &worked {
        println!("pilot alternatives: {who}: {n} answers, then {why:?}");
    }
    // Every item wants 3 different people; which of the four get there first is up to the scheduler (a fast
    // three can take every item before the fourth starts), so the count of people who worked is at least 3.
    let items = std::fs::read_to_string(Path::new(&alt).join("instances.jsonl")).unwrap().lines().count();
    assert_eq!(worked.iter().map(|(_, n, _)| n).sum::<usize>(), 3 * items, "{worked:?}");
    assert!(worked.iter().filter(|(_, n, _)| *n > 0).count() >= 3, "{worked:?}");
    let alt_results = p("alt-results");
    stepwise(&["annotate", "export", &alt, "-o", &alt_results]);
    println!("{}", std::fs::read_to_string(Path::new(&alt_results).join("summary.md")).unwrap());
    let refs = format!("{alt_results}/references.jsonl");
    let seq_multi = p("seq-multi");
    stepwise(&[
        "generate",
        &corpus,
        "--task",
        "sequencing",
        "--modality",
        "multimodal",
        "--seq-steps",
        "4",
        "--seed",
        "1",
        "--alt-orders",
        &refs,
        "-o",
        &seq_multi,
    ]);
    let manifest = std::fs::read_to_string(Path::new(&seq_multi).join("manifest.json")).unwrap();
    println!("generation with the human references: {manifest}");
    // The report shows the human tables.
    stepwise(&["report", &td.path().to_string_lossy(), "-o", &p("report.html")]);
    let md = std::fs::read_to_string(td.path().join("report.md")).unwrap();
    assert!(md.contains("Human judgements") && md.contains("Table 8"), "report lacks the human section");
}
