use super::*;
use stepwise_core::Step;

fn step(text: &str) -> Step {
    Step { text: Some(text.to_string()), ..Default::default() }
}

/// A small English corpus in which the words of the issue's examples occur standalone often enough to be learned.
fn corpus() -> Vec<Procedure> {
    let common = "Preheat the oven to 350 F. Add salt and pepper to the bowl, then stir the beef stock with a fork.";
    let mut ps: Vec<Procedure> = (0..12)
        .map(|i| Procedure {
            id: format!("r{i}"),
            title: Some(format!("Recipe {i}")),
            lang: Some("en".into()),
            steps: vec![
                step(common),
                step("Melt the butter and cook the bacon in the pan."),
                step("Serve warm with the bread."),
            ],
            ..Default::default()
        })
        .collect();
    ps[0].steps[0] = step("<p>Preheatoven to 350F &amp; add 2cups flour.</p>");
    ps[1].steps[1] = step("Add saltand pepper,  then   mix.Next stir in 1/2tsp salt for 10-15min.");
    ps[2].steps.push(step("   "));
    ps.push(Procedure { id: "short".into(), steps: vec![step("Only one step here.")], ..Default::default() });
    ps
}

#[test]
fn cleans_the_issue_examples() {
    let (out, report) = clean_procedures(corpus(), &CleanConfig::default(), CleanResources::default()).unwrap();
    assert_eq!(out[0].steps[0].text.as_deref(), Some("Preheat oven to 350 F & add 2 cups flour."));
    assert_eq!(
        out[1].steps[1].text.as_deref(),
        Some("Add salt and pepper, then mix. Next stir in 1/2 tsp salt for 10-15 min.")
    );
    assert_eq!(out[2].steps.len(), 3, "the blank step is dropped");
    assert!(out.iter().all(|p| p.id != "short"));

    assert_eq!(report.procedures_in, 13);
    assert_eq!(report.procedures_out, 12);
    assert_eq!(report.filters["min_steps"].examples, ["short"]);
    assert_eq!(report.filters["empty_steps"].steps, 1);
    assert_eq!(report.rules["markup"].details["entities"], 1);
    assert_eq!(report.rules["number_unit"].edits, 4);
    let seg = &report.rules["segmentation"];
    assert_eq!(seg.edits, 2);
    let tops: Vec<(&str, &str)> = seg.top.iter().map(|t| (t.token.as_str(), t.replacement.as_str())).collect();
    assert_eq!(tops, [("Preheatoven", "Preheat oven"), ("saltand", "salt and")]);
    assert_eq!(report.rules["sentence_spacing"].edits, 1);
    assert!(report.to_markdown().contains("| segmentation | 2 | 2 |"));
}

#[test]
fn vocab_rates_improve_and_rules_switch_off() {
    let vocab = Vocabulary::from_words(
        "preheat oven to 350 f add 2 cups flour salt and pepper then mix next stir in 1/2 tsp for 10 15 min the bowl \
         beef stock with a fork melt butter cook bacon pan serve warm bread recipe 0 1 2 3 4 5 6 7 8 9 10 11 only one \
         step here"
            .split(' '),
    );
    let res = CleanResources { vocab: Some(&vocab), dictionary: None };
    let (_, report) = clean_procedures(corpus(), &CleanConfig::default(), res).unwrap();
    let v = report.vocab.unwrap();
    assert!(v.after.rate > v.before.rate, "{} -> {}", v.before.rate, v.after.rate);
    assert_eq!(v.after.rate, 1.0);
    assert_eq!(v.after.type_rate, 1.0);
    assert!(v.before.type_rate < 1.0 && v.before.ws_rate < v.after.ws_rate);

    let off = CleanConfig {
        strip_markup: false,
        segment: false,
        split_units: false,
        fix_sentence_spacing: false,
        min_steps: None,
        ..Default::default()
    };
    let (out, report) = clean_procedures(corpus(), &off, CleanResources::default()).unwrap();
    assert_eq!(out.len(), 13);
    assert!(out[0].steps[0].text.as_deref().unwrap().contains("Preheatoven"));
    assert_eq!(report.rules["segmentation"].edits, 0);
}

#[test]
fn identical_for_any_thread_count() {
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut many = Vec::new();
        for k in 0..60 {
            for mut p in corpus() {
                p.id = format!("{}-{k}", p.id);
                many.push(p);
            }
        }
        pool.install(|| clean_procedures(many, &CleanConfig::default(), CleanResources::default()).unwrap())
    };
    let (a, ra) = run(1);
    let (b, rb) = run(3);
    assert_eq!(a, b);
    assert_eq!(to_pretty_sorted(&ra), to_pretty_sorted(&rb));
}

#[cfg(unix)]
#[test]
fn a_symlink_loop_in_the_corpus_folder_is_refused_and_nothing_is_written() {
    let td = tempfile::tempdir().unwrap();
    let input = td.path().join("in");
    let sub = input.join(TASKSET_DIR).join("parts");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(input.join(TASKSET_DIR).join("questions.json"), "{\"data\":[]}").unwrap();
    std::os::unix::fs::symlink(input.join(TASKSET_DIR), sub.join("again")).unwrap();
    let mut m = Manifest::new("corpus");
    write_corpus_files(&input, &corpus(), &mut m).unwrap();
    let out = td.path().join("out");
    let e = clean_corpus_dir(&input, &out, &CleanConfig::default(), CleanResources::default(), false).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("symlink loop") && msg.contains("again") && msg.contains("remove the link"), "{msg}");
    assert!(!out.exists(), "a refused clean left its output behind");
    let left: Vec<_> = std::fs::read_dir(td.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[cfg(unix)]
#[test]
fn a_device_in_the_corpus_folder_is_refused_and_nothing_is_written() {
    let td = tempfile::tempdir().unwrap();
    let input = td.path().join("in");
    std::fs::create_dir_all(input.join(TASKSET_DIR)).unwrap();
    // Copied with `fs::copy`, a link to /dev/zero would never end.
    std::os::unix::fs::symlink("/dev/zero", input.join(TASKSET_DIR).join("questions.json")).unwrap();
    let mut m = Manifest::new("corpus");
    write_corpus_files(&input, &corpus(), &mut m).unwrap();
    let out = td.path().join("out");
    let e = clean_corpus_dir(&input, &out, &CleanConfig::default(), CleanResources::default(), false).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("questions.json: not a regular file or folder"), "{msg}");
    assert!(!out.exists(), "a refused clean left its output behind");
}

#[test]
fn learned_model_splits_like_the_cleaner() {
    let m = learn_word_model(corpus(), &CleanConfig::default(), CleanResources::default());
    assert_eq!(m.split_token("saltand"), Some(vec!["salt", "and"]));
    assert_eq!(m.split_token("pepper"), None);
    assert_eq!(m.split_token("BowlBeef"), Some(vec!["Bowl", "Beef"]));
}

#[test]
fn clean_corpus_dir_writes_report_and_keeps_taskset() {
    let td = tempfile::tempdir().unwrap();
    let input = td.path().join("in");
    std::fs::create_dir_all(input.join(TASKSET_DIR)).unwrap();
    std::fs::write(input.join(TASKSET_DIR).join("questions.json"), "{\"data\":[]}").unwrap();
    let mut m = Manifest::new("corpus");
    write_corpus_files(&input, &corpus(), &mut m).unwrap();
    let out = td.path().join("out");
    let report = clean_corpus_dir(&input, &out, &CleanConfig::default(), CleanResources::default(), false).unwrap();
    assert_eq!(report.procedures_out, 12);
    for f in [CLEAN_REPORT_JSON, CLEAN_REPORT_MD, "procedures.jsonl", "procedures.parquet", "manifest.json"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    assert!(out.join(TASKSET_DIR).join("questions.json").is_file());
    let cleaned = Corpus::load(&out).unwrap();
    assert_eq!(cleaned.procedures.len(), 12);
    // The image root is stored relative to the cleaned corpus and resolves to the input's folder.
    assert_eq!(cleaned.manifest.as_ref().unwrap().image_root.as_deref(), Some("../in"));
    assert_eq!(stepwise_core::paths::normalize(&cleaned.image_root), stepwise_core::paths::normalize(&input));
}

#[test]
fn words_of_the_reference_vocabulary_are_never_split_and_the_report_counts_them() {
    // "saltand" stands for a real word the corpus model would cut ("forgive" → "for give" on RecipeQA).
    let vocab = Vocabulary::from_words(["saltand", "pepper", "oven"]);
    let res = CleanResources { vocab: Some(&vocab), ..Default::default() };
    let (out, report) = clean_procedures(corpus(), &CleanConfig::default(), res).unwrap();
    assert_eq!(
        out[1].steps[1].text.as_deref(),
        Some("Add saltand pepper, then mix. Next stir in 1/2 tsp salt for 10-15 min.")
    );
    assert_eq!(out[0].steps[0].text.as_deref(), Some("Preheat oven to 350 F & add 2 cups flour."));
    assert_eq!(report.segmenter.vocab_kept_whole, Some(1));
    assert_eq!(report.segmenter.vocab_kept_whole_examples, ["saltand"]);
    assert_eq!(report.segmenter.vocab_words_split, Some(0));
    let md = report.to_markdown();
    assert!(
        md.contains(
            "- words of the reference vocabulary kept whole (the corpus model alone would split them): 1 (saltand)"
        ),
        "{md}"
    );
    assert!(md.contains("- words of the reference vocabulary split: 0"), "{md}");
    // Without --vocab the report says nothing about it.
    let (_, plain) = clean_procedures(corpus(), &CleanConfig::default(), CleanResources::default()).unwrap();
    assert_eq!(plain.segmenter.vocab_kept_whole, None);
    assert!(!plain.to_markdown().contains("reference vocabulary kept whole"));
}
