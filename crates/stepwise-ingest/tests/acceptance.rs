//! Acceptance tests on ../shared/data (run with `cargo test -p stepwise-ingest --test acceptance -- --ignored`).
//! The data folder comes from `STEPWISE_SHARED_DATA` (default: `<workspace>/../shared/data`); the reference
//! vocabulary from `STEPWISE_VOCAB` (default: `<workspace>/models/glove-6b-50d/vocab.txt`, installed by
//! scripts/fetch-models.sh). Both fail loudly when missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stepwise_core::corpus::{Corpus, PROCEDURES_JSONL, TASKSET_DIR};
use stepwise_core::{Procedure, TaskSet};
use stepwise_ingest::clean::{CleanConfig, CleanResources, clean_corpus_dir};
use stepwise_ingest::{Format, IngestOptions, OnMissingImage, ReadOptions, Registry, Vocabulary, corpus_stats, ingest};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared() -> PathBuf {
    let dir = std::env::var_os("STEPWISE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared/data"));
    assert!(dir.join("README.md").is_file(), "shared data not found at {} (set STEPWISE_SHARED_DATA)", dir.display());
    dir
}

fn vocab_path() -> PathBuf {
    let p = std::env::var_os("STEPWISE_VOCAB")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("models/glove-6b-50d/vocab.txt"));
    assert!(
        p.is_file(),
        "reference vocabulary not found at {} (run scripts/fetch-models.sh or set STEPWISE_VOCAB)",
        p.display()
    );
    p
}

const PROCEDURE_SETS: [&str; 4] = ["gnome-recipes", "howtocook", "based-cooking", "ifixit"];

fn ingest_recipeqa(out: &Path) -> stepwise_ingest::IngestReport {
    let input = shared().join("recipeqa/val-dev.json");
    ingest(&[input], out, &Registry::builtin(), &IngestOptions::default()).expect("ingest val-dev.json")
}

#[test]
#[ignore]
fn recipeqa_val_dev_counts_and_stats() {
    let td = tempfile::tempdir().unwrap();
    let out = td.path().join("recipeqa");
    let report = ingest_recipeqa(&out);
    assert_eq!(report.inputs[0].format, "recipeqa", "detected from content");
    let expected: BTreeMap<String, usize> =
        [("textual_cloze", 397), ("visual_cloze", 358), ("visual_coherence", 357), ("visual_ordering", 378)]
            .into_iter()
            .map(|(t, n)| (t.to_string(), n))
            .collect();
    assert_eq!(report.questions_by_task, expected);
    assert_eq!(report.procedures, 413);
    assert_eq!(report.steps, 2676);
    // The images are not in ../shared: all are missing, counted and kept (the default is warn).
    assert_eq!(report.images.missing.len(), report.images.referenced);

    let ts = TaskSet::load(&out.join(TASKSET_DIR)).unwrap();
    let original = TaskSet::load(&shared().join("recipeqa/val-dev.json")).unwrap();
    assert_eq!(ts, original, "questions kept verbatim");

    let corpus = Corpus::load(&out).unwrap();
    let stats = corpus_stats(&corpus.procedures, Some(&ts), Some(stepwise_ingest::GroupBy::Split), None);
    assert_eq!(stats.all.procedures, 413);
    assert_eq!(stats.taskset.as_ref().unwrap().questions, 1490);
    let md = stats.to_markdown();
    assert!(md.contains("| procedures | 413 | 413 |"), "{md}");
    println!("{md}");
}

#[test]
#[ignore]
fn recipeqa_rebuilt_recipes_match_recipes_dev() {
    let data = shared().join("recipeqa");
    let opts = ReadOptions::default();
    let from_questions =
        stepwise_ingest::readers::recipeqa::RecipeQaQuestions.read(&[data.join("val-dev.json")], &opts).unwrap();
    let from_recipes = stepwise_ingest::readers::recipeqa_recipes::RecipeQaRecipes
        .read(&[data.join("recipes-dev.json")], &opts)
        .unwrap();
    let by_id: BTreeMap<&str, &Procedure> = from_recipes.procedures.iter().map(|p| (p.id.as_str(), p)).collect();
    assert_eq!(from_questions.procedures.len(), by_id.len());
    for p in &from_questions.procedures {
        let r = by_id[p.id.as_str()];
        assert_eq!(p.steps, r.steps, "recipe {}", p.id);
    }
    assert!(from_questions.notes.is_empty(), "{:?}", from_questions.notes);
    assert!(from_recipes.procedures.iter().all(|p| p.category.is_some()));
}

#[test]
#[ignore]
fn recipeqa_other_files_ingest() {
    let data = shared().join("recipeqa");
    let td = tempfile::tempdir().unwrap();
    for (file, format) in [("recipes-dev.json", "recipeqa-recipes"), ("official-examples.json", "recipeqa")] {
        let out = td.path().join(file);
        let report = ingest(&[data.join(file)], &out, &Registry::builtin(), &IngestOptions::default()).unwrap();
        assert_eq!(report.inputs[0].format, format);
        assert!(report.procedures > 0);
    }
}

#[test]
#[ignore]
fn procedure_sets_have_no_missing_images_and_round_trip() {
    let dir = shared().join("procedures");
    let td = tempfile::tempdir().unwrap();
    let inputs: Vec<PathBuf> = PROCEDURE_SETS.iter().map(|s| dir.join(format!("{s}.jsonl"))).collect();
    let opts = IngestOptions { on_missing_image: OnMissingImage::Error, ..Default::default() };
    let out = td.path().join("all");
    let report = ingest(&inputs, &out, &Registry::builtin(), &opts).expect("0 missing images");
    assert_eq!(report.images.missing.len(), 0);
    assert_eq!(report.procedures, 32 + 368 + 345 + 3);
    assert!(report.images.referenced > 0);

    // procedure JSONL → corpus → JSONL is byte-identical, per file and for all four together.
    let mut concatenated = Vec::new();
    for input in &inputs {
        let one = td.path().join(input.file_stem().unwrap());
        ingest(std::slice::from_ref(input), &one, &Registry::builtin(), &opts).unwrap();
        let original = std::fs::read(input).unwrap();
        assert!(std::fs::read(one.join(PROCEDURES_JSONL)).unwrap() == original, "{} differs", input.display());
        concatenated.extend(original);
    }
    assert!(std::fs::read(out.join(PROCEDURES_JSONL)).unwrap() == concatenated);

    let corpus = Corpus::load(&out).unwrap();
    for p in &corpus.procedures {
        for im in p.step_images().chain(p.gallery.iter().flatten().map(String::as_str)) {
            assert!(corpus.image_path(im).is_file(), "{im}");
        }
    }
}

#[test]
#[ignore]
fn clean_recipeqa_improves_in_vocab_rate() {
    let vocab = Vocabulary::load(&vocab_path()).unwrap();
    let td = tempfile::tempdir().unwrap();
    let raw = td.path().join("recipeqa");
    ingest_recipeqa(&raw);
    let out = td.path().join("clean");
    let res = CleanResources { vocab: Some(&vocab), dictionary: None };
    let report = clean_corpus_dir(&raw, &out, &CleanConfig::default(), res, false).unwrap();
    let v = report.vocab.as_ref().unwrap();
    println!("RecipeQA val-dev in-vocabulary rate ({} words): {}", v.vocab_words, v.rates_line());
    println!(
        "procedures {} → {}; segmentation edits {}, number/unit edits {}",
        report.procedures_in,
        report.procedures_out,
        report.rules["segmentation"].edits,
        report.rules["number_unit"].edits
    );
    assert!(v.after.rate > v.before.rate && v.after.ws_rate > v.before.ws_rate);
    assert!(v.after.rate > 0.9, "after-cleaning in-vocabulary rate {:.4}", v.after.rate);
    // The README's command must not damage real words (issue 15: forgive → "for give", output → "out put").
    let g = &report.segmenter;
    println!(
        "segmenter: {} token types split; {} vocabulary words kept whole (e.g. {}); {} vocabulary words split",
        g.split_types,
        g.vocab_kept_whole.unwrap_or(0),
        g.vocab_kept_whole_examples.iter().take(8).cloned().collect::<Vec<_>>().join(", "),
        g.vocab_words_split.unwrap_or(0)
    );
    assert_eq!(g.vocab_words_split, Some(0));
    for (token, _) in report.rules["segmentation"].top.iter().map(|t| (&t.token, &t.replacement)) {
        assert!(!vocab.contains(&token.to_lowercase()), "{token} is in the vocabulary but was split");
    }
    let text = std::fs::read_to_string(out.join(PROCEDURES_JSONL)).unwrap();
    for damaged in ["for give ", "form at ", "out put ", "When ever "] {
        assert!(!text.contains(damaged), "`{damaged}` in the cleaned corpus");
    }
    assert!(out.join("clean_report.md").is_file());
    assert!(out.join(TASKSET_DIR).join("questions.json").is_file());
}

/// R2VQ: both SemEval-layout files read, count as documented in r2vq/PROVENANCE.md, and write back byte for byte.
#[test]
#[ignore]
fn r2vq_semeval_files_read_with_their_questions_and_write_back_byte_for_byte() {
    use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
    let dir = shared().join("r2vq/semeval2022_task9");
    for (file, recipes, questions, answers) in
        [("test_crl_srl.csv", 100, 3442, 0), ("train_sample_1recipe_srpol.csv", 1, 27, 27)]
    {
        let path = dir.join(file);
        let doc = read_r2vq_conllu(&path).unwrap();
        assert_eq!(doc.recipes.len(), recipes, "{file}");
        let qs: Vec<_> = doc.recipes.iter().flat_map(|r| r.questions()).collect();
        assert_eq!(qs.len(), questions, "{file}");
        assert_eq!(qs.iter().filter(|q| q.answer.is_some()).count(), answers, "{file}");
        let written = doc.to_conllu_string();
        let original = std::fs::read_to_string(&path).unwrap();
        if let Some((n, (w, o))) = written.split('\n').zip(original.split('\n')).enumerate().find(|(_, (w, o))| w != o)
        {
            panic!("{file}:{}: written {w:?}, original {o:?}", n + 1);
        }
        assert!(written == original, "{file}: the written file differs from the original (length or ending)");
        // As a corpus format: detected from the content, one procedure per recipe with its steps.
        let registry = Registry::builtin();
        let format = registry.detect(&path).unwrap();
        assert_eq!(format.name(), "r2vq-conllu");
        let got = format.read(std::slice::from_ref(&path), &ReadOptions::default()).unwrap();
        assert_eq!(got.procedures.len(), recipes);
        for (p, r) in got.procedures.iter().zip(&doc.recipes) {
            assert_eq!(p.steps.len(), r.steps().count());
            assert!(p.steps.iter().all(|s| s.text.as_deref().is_some_and(|t| !t.is_empty())), "{}", p.id);
        }
    }
}

/// R2VQ annotation graphs of the shared SemEval files lose no annotation: every EVENT span is an event, every
/// PART/RES link reaches its event, every hidden argument sits on an event, and coreference ids point at
/// mentions that exist.
#[test]
#[ignore]
fn r2vq_annotation_graphs_keep_every_event_link_and_hidden_argument() {
    use stepwise_core::r2vq::{AnnotationGraph, EntityKind, EntityTag};
    use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
    let dir = shared().join("r2vq/semeval2022_task9");
    let (mut events, mut links, mut unresolved_coref, mut corefs) = (0, 0, 0, 0);
    for file in ["test_crl_srl.csv", "train_sample_1recipe_srpol.csv"] {
        let doc = read_r2vq_conllu(&dir.join(file)).unwrap();
        for r in &doc.recipes {
            let g = AnnotationGraph::of(r);
            let tokens: Vec<_> = r.steps().flat_map(|p| p.sentences.iter().flat_map(|s| s.tokens.iter())).collect();
            let b_events = tokens.iter().filter(|t| t.entity == EntityTag::Begin(EntityKind::Event)).count();
            assert_eq!(g.events.len(), b_events, "{}", r.id);
            let part_links = tokens.iter().filter(|t| t.part.is_some()).count();
            let res_links = tokens.iter().filter(|t| t.res.is_some()).count();
            let participants: usize = g.events.iter().map(|e| e.participants.len()).sum();
            let results: usize = g.events.iter().map(|e| e.results.len()).sum();
            assert_eq!((participants, results), (part_links, res_links), "{}: PART/RES links lost", r.id);
            let hidden_tokens = tokens.iter().filter(|t| !t.hidden.is_empty()).count();
            assert_eq!(g.events.iter().filter(|e| !e.hidden.is_empty()).count(), hidden_tokens, "{}", r.id);
            events += g.events.len();
            links += participants + results;
            for m in &g.mentions {
                let Some(at) = m.coref.as_ref().and_then(|c| c.at) else { continue };
                corefs += 1;
                if !g.mentions.iter().any(|x| x.at == at) {
                    unresolved_coref += 1;
                }
            }
        }
    }
    println!("events {events}, PART/RES links {links}, coref ids {corefs}, pointing at no mention {unresolved_coref}");
    assert!(events > 1000 && links > 1000);
    // Every coreference id names the position of a mention's first token.
    assert_eq!(unresolved_coref, 0, "coreference ids that point at no mention");
}
