//! End-to-end generation on a synthetic corpus whose vectors have a per-procedure style (like the built-in
//! world): question shape, provenance, knob guarantees, skip accounting and determinism across thread counts.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;
use stepwise_core::taskset::PLACEHOLDER;
use stepwise_core::{Choice, Procedure, Question, Step, Task};
use stepwise_features::Vectors;
use stepwise_tasks::catalog::FeatureSources;
use stepwise_tasks::{GenerateConfig, KnobSetting, KnobsMode, Mode};

mod common;

use common::{run, styled_corpus};

/// The corpus of these tests: style weight 0.3.
fn corpus(n_procs: usize, n_steps: usize) -> (Vec<Procedure>, Vectors) {
    styled_corpus(n_procs, n_steps, 7, 0.3)
}

fn meta(q: &Question) -> &Value {
    &q.extra["meta"]
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn every_task_and_mode_gives_well_formed_questions() {
    let (procs, v) = corpus(60, 9);
    let cfg = GenerateConfig { seed: 3, k: 40, k_c: 20, knobs_mode: KnobsMode::Paper, ..Default::default() };
    for task in Task::ALL {
        for mode in Mode::suite() {
            let g = run(&procs, &v, task, mode, &cfg);
            assert!(g.counts.questions > 0, "{task} {mode}: no questions ({:?})", g.counts);
            let mut qids = HashSet::new();
            for q in &g.questions {
                assert!(qids.insert(q.qid.clone()), "duplicate qid {}", q.qid);
                assert_eq!(q.choice_list.len(), 4);
                assert!(q.answer < 4);
                assert_eq!(q.task, task.as_str());
                assert!(q.qid.starts_with(&format!("{}-", task.qid_prefix())));
                let m = meta(q);
                // Visual ordering has no knob 3: its k3 = 1 settings give the k3 = 0 questions.
                assert_eq!(m["setting"], mode.data_mode(task).label());
                let pid = q.recipe_id.as_str();
                match task {
                    Task::TextualCloze | Task::VisualCloze => {
                        assert_eq!(q.question.len(), 4);
                        assert_eq!(q.question.iter().filter(|x| *x == PLACEHOLDER).count(), 1);
                        // The answer comes from the procedure, every distractor from another one.
                        for (i, src) in m["choice_sources"].as_array().unwrap().iter().enumerate() {
                            if i == q.answer {
                                assert_eq!(src["procedure"], pid);
                            } else {
                                assert_ne!(src["procedure"], pid);
                            }
                        }
                        let items: HashSet<Vec<&str>> = q.choice_list.iter().map(|c| c.items()).collect();
                        assert_eq!(items.len(), 4, "repeated choice in {}", q.qid);
                        if task == Task::TextualCloze {
                            // Step numbers are removed from titles.
                            assert!(q.choice_list.iter().all(|c| !c.items()[0].starts_with("Step ")));
                        }
                    }
                    Task::VisualCoherence => {
                        assert_eq!(
                            q.question,
                            q.choice_list.iter().map(|c| c.items()[0].to_string()).collect::<Vec<_>>()
                        );
                        let odd = q.choice_list[q.answer].items()[0].to_string();
                        let own_prefix = format!("images/{}_", &pid[6..]);
                        assert!(!odd.starts_with(&own_prefix), "{odd} is from {pid}");
                        for (i, c) in q.choice_list.iter().enumerate() {
                            if i != q.answer {
                                assert!(c.items()[0].starts_with(&own_prefix));
                            }
                        }
                    }
                    Task::VisualOrdering => {
                        let seqs: HashSet<Vec<&str>> = q.choice_list.iter().map(|c| c.items()).collect();
                        assert_eq!(seqs.len(), 4);
                        let Choice::Sequence(correct) = &q.choice_list[q.answer] else { panic!("sequence") };
                        let steps: Vec<usize> = correct
                            .iter()
                            .map(|s| s.rsplit('_').next().unwrap().trim_end_matches(".jpg").parse().unwrap())
                            .collect();
                        assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
                    }
                }
            }
            assert_eq!(g.counts.questions as usize, g.questions.len());
        }
    }
}

#[test]
fn knob_constraints_hold_in_provenance() {
    let (procs, v) = corpus(80, 10);
    let cfg = GenerateConfig { seed: 11, k: 60, k_c: 30, knobs_mode: KnobsMode::Paper, ..Default::default() };
    for k in KnobSetting::all() {
        let g = run(&procs, &v, Task::VisualCloze, Mode::Knobs(k), &cfg);
        for q in &g.questions {
            let d = &meta(q)["distances"];
            let sel = &d["selection"];
            let (lo, hi) = (f(&sel["lo"]), f(&sel["hi"]));
            let to_answer: Vec<f64> = d["to_answer"].as_array().unwrap().iter().map(f).collect();
            let to_question: Vec<f64> = d["to_question"].as_array().unwrap().iter().map(f).collect();
            for i in (0..4).filter(|&i| i != q.answer) {
                let x = to_answer[i];
                if k.k2 == 0 {
                    assert!(x < hi + 1e-5, "ball: {x} ≥ {hi}");
                } else {
                    assert!(x >= lo - 1e-5 && x <= hi + 1e-5, "shell: {x} ∉ [{lo}, {hi}]");
                }
            }
            // Paper knobs apply knob 3 to the questions their coin flip chose (§4.4).
            if k.k3 == 1 && meta(q)["knob3_applied"] == true {
                let a = to_question[q.answer];
                assert!(
                    (0..4).any(|i| i != q.answer && to_question[i] <= a + 1e-5),
                    "knob 3: no negative as close to the question as the answer in {}",
                    q.qid
                );
            }
        }
        let g = run(&procs, &v, Task::VisualCoherence, Mode::Knobs(k), &cfg);
        for q in &g.questions {
            let d = &meta(q)["distances"];
            if k.k3 == 1 && meta(q)["knob3_applied"] == true {
                let limit = f(&d["min_coherent_pair"]);
                // The incoherent image's distance to the coherent images' mean is below the closest pair.
                let odd_to_mean = f(&d["to_question"][q.answer]);
                assert!(odd_to_mean < limit + 1e-5, "{odd_to_mean} ≥ {limit}");
            }
        }
    }
}

#[test]
fn knob1_never_reuses_an_answer_step_in_a_later_question() {
    let (procs, v) = corpus(40, 12);
    let cfg = GenerateConfig { seed: 5, k: 40, k_c: 30, knobs_mode: KnobsMode::Paper, ..Default::default() };
    for k1 in [0, 1] {
        let g = run(&procs, &v, Task::TextualCloze, Mode::Knobs(KnobSetting { k1, k2: 1, k3: 0 }), &cfg);
        let mut by_proc: BTreeMap<String, Vec<&Question>> = BTreeMap::new();
        for q in &g.questions {
            by_proc.entry(q.recipe_id.clone()).or_default().push(q);
        }
        for qs in by_proc.values() {
            // 11 eligible steps (first skipped): at most 5 (k1 = 0) or 3 (k1 = 1) questions.
            assert!(qs.len() <= if k1 == 0 { 5 } else { 3 });
            let mut answered: Vec<u64> = Vec::new();
            for q in qs {
                let m = meta(q);
                for s in m["question_steps"].as_array().unwrap() {
                    assert!(!answered.contains(&s.as_u64().unwrap()));
                }
                answered.push(m["answer_step"].as_u64().unwrap());
            }
        }
    }
}

#[test]
fn impossible_constraints_skip_and_count_instead_of_relaxing() {
    // Three procedures: too few other items for a shell of 3 negatives with K = K_C = 4, and a 2-step procedure.
    let (mut procs, v) = corpus(3, 6);
    procs.push(Procedure {
        id: "short".into(),
        steps: vec![
            Step { title: Some("a".into()), ..Default::default() },
            Step { title: Some("b".into()), ..Default::default() },
        ],
        ..Default::default()
    });
    let cfg = GenerateConfig { seed: 1, k: 4, k_c: 4, knobs_mode: KnobsMode::Paper, ..Default::default() };
    let g = run(&procs, &v, Task::VisualCloze, Mode::Knobs(KnobSetting { k1: 0, k2: 0, k3: 0 }), &cfg);
    assert_eq!(g.counts.procedures_skipped.get("step_count_out_of_range"), Some(&1));
    assert_eq!(g.counts.questions, 0);
    assert_eq!(g.counts.questions_skipped.get("knob2_region_too_small"), Some(&6), "{:?}", g.counts);
}

#[test]
fn output_is_identical_for_any_thread_count() {
    let (procs, v) = corpus(50, 9);
    let cfg = GenerateConfig { seed: 9, k: 30, k_c: 15, knobs_mode: KnobsMode::Paper, ..Default::default() };
    let render = |threads: usize| -> Vec<String> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let mut out = Vec::new();
            for task in Task::ALL {
                for mode in [Mode::RecipeQa, Mode::Knobs(KnobSetting { k1: 1, k2: 0, k3: 1 })] {
                    let g = run(&procs, &v, task, mode, &cfg);
                    out.extend(g.questions.iter().map(|q| stepwise_core::json::to_canonical_string(&q.to_json())));
                }
            }
            out
        })
    };
    let one = render(1);
    assert!(!one.is_empty());
    assert_eq!(one, render(3));
    // A different seed gives different questions.
    let other = {
        let cfg = GenerateConfig { seed: 10, ..cfg.clone() };
        run(&procs, &v, Task::VisualCloze, Mode::RecipeQa, &cfg)
    };
    let first = run(&procs, &v, Task::VisualCloze, Mode::RecipeQa, &cfg);
    assert_ne!(
        first.questions.iter().map(|q| q.to_json()).collect::<Vec<_>>(),
        other.questions.iter().map(|q| q.to_json()).collect::<Vec<_>>()
    );
}

#[test]
fn settings_sharing_k1_ask_the_same_positions() {
    let (procs, v) = corpus(30, 9);
    let cfg = GenerateConfig { seed: 2, k: 60, k_c: 60, knobs_mode: KnobsMode::Paper, ..Default::default() };
    let qids = |k: KnobSetting| -> Vec<String> {
        run(&procs, &v, Task::VisualOrdering, Mode::Knobs(k), &cfg).questions.into_iter().map(|q| q.qid).collect()
    };
    assert_eq!(qids(KnobSetting { k1: 0, k2: 0, k3: 0 }), qids(KnobSetting { k1: 0, k2: 1, k3: 1 }));
}

/// Every byte of a written suite (streamed JSON + Parquet, manifests, counts) is the same for any thread count,
/// with exact neighbours and with the approximate IVF search; and the two searches give the same number of
/// questions here (IVF scanning every list is exact).
#[test]
fn written_suites_are_identical_for_any_thread_count_with_exact_and_ivf_search() {
    use stepwise_core::manifest::Manifest;
    use stepwise_tasks::NeighborSearch;
    use stepwise_tasks::suite::{SuiteConfig, write_suite};
    let (procs, v) = corpus(60, 9);
    let files = |dir: &std::path::Path| -> BTreeMap<String, Vec<u8>> { stepwise_core::output::read_tree(dir).unwrap() };

    let write = |threads: usize, neighbors: NeighborSearch, knobs_mode: KnobsMode| -> BTreeMap<String, Vec<u8>> {
        let td = tempfile::tempdir().unwrap();
        let cfg = SuiteConfig {
            generate: GenerateConfig { seed: 4, k: 30, k_c: 15, neighbors, knobs_mode, ..Default::default() },
            tasks: Task::ALL.to_vec(),
            modes: Mode::suite(),
            split_fractions: Default::default(),
            shard: None,
        };
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let sources = FeatureSources { features: &v, extra_pool: None, allow_missing: false };
            write_suite(td.path(), &procs, sources, &cfg, &Manifest::new("suite")).unwrap();
        });
        files(td.path())
    };
    for (search, mode) in [
        (NeighborSearch::Exact, KnobsMode::Paper),
        (NeighborSearch::Ivf { probes: 3 }, KnobsMode::Paper),
        (NeighborSearch::Exact, KnobsMode::Calibrated),
        (NeighborSearch::Ivf { probes: 3 }, KnobsMode::Calibrated),
    ] {
        let one = write(1, search, mode);
        assert!(one.keys().any(|k| k.ends_with("questions.parquet")));
        // 9 settings × 4 tasks, but visual ordering once per (k1, k2): 32 task sets of 3 files, plus the
        // manifest and the counts (JSON, Markdown).
        assert_eq!(one.len(), (9 * 4 - 4) * 3 + 3, "{:?}", one.keys().collect::<Vec<_>>());
        assert!(!one.keys().any(|k| k.starts_with("knobs-0-0-1/visual_ordering/")));
        assert_eq!(one, write(3, search, mode), "{search:?} {mode}");
    }
    // IVF over every list (probes ≥ lists: ⌈√n⌉ lists) finds exactly the exact neighbours.
    let exact = write(2, NeighborSearch::Exact, KnobsMode::Paper);
    let all_lists = write(2, NeighborSearch::Ivf { probes: 1000 }, KnobsMode::Paper);
    // Question ids per task set (distances may differ in the last float bits between the two searches).
    let questions = |f: &BTreeMap<String, Vec<u8>>| -> Vec<(String, Vec<String>)> {
        f.iter()
            .filter(|(k, _)| k.ends_with("questions.json"))
            .map(|(k, b)| {
                let v: Value = serde_json::from_slice(b).unwrap();
                let ids =
                    v["data"].as_array().unwrap().iter().map(|q| q["qid"].as_str().unwrap().to_string()).collect();
                (k.clone(), ids)
            })
            .collect()
    };
    assert_eq!(questions(&exact), questions(&all_lists));
}
