//! Knob suites a study can compare, on a small built-in world with real (descriptor) image features: settings
//! sharing k1 ask the same questions, a constraint the K nearest neighbours cannot meet widens the search
//! (counted, and visible in the negatives), coherence takes knob 2's statistics over the whole union of the
//! coherent images' neighbour lists, the default metric is L2, and visual ordering is written once per (k1, k2).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::OnceLock;

use rayon::prelude::*;
use serde_json::Value;
use stepwise_core::manifest::Manifest;
use stepwise_core::{Procedure, Question, Task};
use stepwise_features::knn::{KnnOptions, knn};
use stepwise_features::registry::{EncoderContext, build_encoder};
use stepwise_features::{Item, Metric, Vectors};
use stepwise_tasks::catalog::FeatureSources;
use stepwise_tasks::suite::{SuiteConfig, taskset_dir, write_suite};
use stepwise_tasks::{GenerateConfig, Generated, Inputs, KnobSetting, KnobsMode, Mode, TaskGenerator, generate};

/// A 40-procedure cooking world (4 shared kitchens, so knob 3 can be met for part of the questions) and the
/// descriptor vectors of its step images, made once for all tests.
fn world() -> &'static (Vec<Procedure>, Vectors) {
    static WORLD: OnceLock<(Vec<Procedure>, Vectors)> = OnceLock::new();
    WORLD.get_or_init(|| {
        let params = stepwise_world::WorldParams {
            images_stored: false,
            image_size: 96,
            styles: Some(4),
            ..stepwise_world::WorldParams::new(3, stepwise_world::Domain::Cooking, 40)
        };
        let procedures = stepwise_world::generate(&params).expect("the world generates");
        let images = stepwise_world::WorldImages::new(params);
        let enc = build_encoder("descriptor", &EncoderContext::default()).expect("the built-in descriptor");
        let dim = enc.info().dim;
        let mut paths: Vec<String> = procedures.iter().flat_map(|p| p.step_images().map(str::to_string)).collect();
        paths.sort();
        paths.dedup();
        let rows: Vec<Vec<f32>> = paths
            .par_iter()
            .map(|p| {
                let im = images.render(p).expect("every world image renders");
                enc.encode(&[Item::Image(&im)]).expect("the descriptor encodes")
            })
            .collect();
        let ids = paths.iter().map(|p| format!("image:{p}")).collect();
        (procedures, Vectors::new(dim, ids, rows.concat()))
    })
}

fn run(task: Task, mode: Mode, cfg: &GenerateConfig) -> Generated {
    let (procs, v) = world();
    let inputs = Inputs {
        procedures: procs,
        sources: FeatureSources { features: v, extra_pool: None, allow_missing: false },
        splits: None,
    };
    generate(task, &inputs, cfg, mode).expect("generates")
}

fn meta(q: &Question) -> &Value {
    &q.extra["meta"]
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array().expect("an array").iter().map(|x| x.as_str().unwrap_or("").to_string()).collect()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// What must be identical across paired settings: the qid, the question's own items (for coherence the
/// coherent images and the replaced position), and the answer (the answer item; the correct order).
fn identity(task: Task, q: &Question) -> (String, Vec<String>, String) {
    let m = meta(q);
    let items = strs(&m["question_items"]);
    match task {
        Task::TextualCloze | Task::VisualCloze => (q.qid.clone(), items, strs(&m["choice_items"])[q.answer].clone()),
        Task::VisualCoherence => {
            let coherent = items.iter().enumerate().filter(|(i, _)| *i != q.answer).map(|(_, s)| s.clone()).collect();
            (q.qid.clone(), coherent, q.answer.to_string())
        }
        Task::VisualOrdering => (q.qid.clone(), items, q.choice_list[q.answer].items().join("|")),
    }
}

fn knobs(k1: u8, k2: u8, k3: u8) -> Mode {
    Mode::Knobs(KnobSetting { k1, k2, k3 })
}

#[test]
fn settings_sharing_k1_have_the_same_questions_and_answers() {
    let cfg = GenerateConfig { seed: 5, knobs_mode: KnobsMode::Paper, ..Default::default() };
    assert_eq!(cfg.metric, Metric::L2, "the papers' Euclidean distance is the default");
    for task in [Task::VisualCloze, Task::VisualCoherence, Task::VisualOrdering] {
        for k1 in [0, 1] {
            let sets: Vec<(Mode, Generated)> = Mode::Knobs(KnobSetting { k1, k2: 0, k3: 0 })
                .paired(task)
                .into_iter()
                .map(|m| (m, run(task, m, &cfg)))
                .collect();
            let (first_mode, first) = &sets[0];
            let want: Vec<_> = first.questions.iter().map(|q| identity(task, q)).collect();
            assert!(!want.is_empty(), "{task} k1={k1}: no questions ({:?})", first.counts);
            let attempts = |g: &Generated| g.counts.questions + g.counts.questions_skipped_total();
            for (mode, g) in &sets {
                let got: Vec<_> = g.questions.iter().map(|q| identity(task, q)).collect();
                assert_eq!(got, want, "{task}: {mode} and {first_mode} ask different questions");
                assert_eq!(attempts(g), attempts(first), "{task} {mode}: planned attempts differ");
                assert!(g.questions.iter().all(|q| meta(q)["distances"]["metric"] == "l2"));
            }
            if task == Task::VisualOrdering {
                // No knob 3: k3 = 1 gives exactly the k3 = 0 questions (not another random draw).
                let json = |g: &Generated| g.questions.iter().map(|q| q.to_json()).collect::<Vec<_>>();
                assert_eq!(json(&run(task, knobs(k1, 1, 1), &cfg)), json(&run(task, knobs(k1, 1, 0), &cfg)));
                continue;
            }
            // Negatives differ between the settings (the knobs do something), the questions do not.
            let negatives = |g: &Generated| -> Vec<Vec<String>> {
                g.questions.iter().map(|q| strs(&meta(q)["choice_items"])).collect()
            };
            assert_ne!(negatives(&sets[0].1), negatives(&sets[2].1), "{task}: k2 changes nothing");
            // A dropped question is counted under the failing setting's reason there and as
            // paired_setting_failed in the others; every drop has at least one failing setting.
            let dropped = attempts(first)
                - first.questions.len() as u64
                - first.counts.questions_skipped.get("knob1_pool_exhausted").copied().unwrap_or(0);
            let failing: u64 = sets
                .iter()
                .map(|(_, g)| {
                    g.counts
                        .questions_skipped
                        .iter()
                        .filter(|(r, _)| r.starts_with("knob2") || r.starts_with("knob3"))
                        .map(|(_, n)| n)
                        .sum::<u64>()
                })
                .sum();
            assert!(failing >= dropped, "{task} k1={k1}: {dropped} dropped, {failing} failures");
            // The k3 = 1 settings keep their constraint on every kept question the coin flip applied it to.
            for (mode, g) in &sets {
                let Mode::Knobs(k) = mode else { unreachable!() };
                if k.k3 == 0 {
                    continue;
                }
                for q in g.questions.iter().filter(|q| meta(q)["knob3_applied"] == true) {
                    let d = &meta(q)["distances"];
                    let to_q: Vec<f64> = d["to_question"].as_array().unwrap().iter().map(f).collect();
                    if task == Task::VisualCloze {
                        assert!((0..4).any(|i| i != q.answer && to_q[i] <= to_q[q.answer] + 1e-5), "{}", q.qid);
                    } else {
                        assert!(to_q[q.answer] < f(&d["min_coherent_pair"]) + 1e-5, "{}", q.qid);
                    }
                }
            }
        }
    }
}

/// The K nearest items (exact, L2) of catalog rows among other procedures' items, by feature id.
fn exact_neighbours(query_ids: &[String], k: usize) -> HashMap<String, Vec<(String, f32)>> {
    let (procs, v) = world();
    let owner: HashMap<String, usize> = procs
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.step_images().map(move |im| (format!("image:{im}"), i)).collect::<Vec<_>>())
        .collect();
    let index: HashMap<&str, usize> = v.ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
    let mut queries = Vec::new();
    for id in query_ids {
        queries.extend_from_slice(v.row(index[id.as_str()]));
    }
    let filter = |qi: usize, j: usize| owner[&query_ids[qi]] != owner[&v.ids[j]];
    let found = knn(&v.data, &queries, v.dim, KnnOptions { k, metric: Metric::L2 }, Some(&filter));
    query_ids
        .iter()
        .zip(found)
        .map(|(q, ns)| (q.clone(), ns.into_iter().map(|n| (v.ids[n.index].clone(), n.distance)).collect()))
        .collect()
}

/// Brute force over the whole catalog: can setting (k2, k3) make the visual-cloze question whose answer is
/// `answer` and whose visible items are `visible`? m_d and s_d of the answer's K_C nearest; the region is every
/// item of other procedures in the ball or shell (no K limit); k3 needs a region item at least as close to the
/// question as the answer.
fn feasible_anywhere(
    cat: &stepwise_tasks::catalog::Catalog,
    cfg: &GenerateConfig,
    answer: u32,
    visible: &[u32],
    k2: u8,
    k3: u8,
) -> bool {
    let eps = cfg.duplicate_epsilon as f32;
    let mut all: Vec<(f32, u32)> = (0..cat.len() as u32)
        .filter(|&x| x != answer && !cat.share_owner(answer, x))
        .map(|x| (cat.distance(answer, x), x))
        .filter(|(d, _)| *d > eps)
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let near: Vec<f64> = all.iter().take(cfg.k_c).map(|x| x.0 as f64).collect();
    let m = near.iter().sum::<f64>() / near.len() as f64;
    let s = (near.iter().map(|d| (d - m).powi(2)).sum::<f64>() / near.len() as f64).sqrt();
    let inside = |d: f32| {
        let d = d as f64;
        if k2 == 0 { d < m - s } else { d >= m - s && d <= m + s }
    };
    let region: Vec<u32> = all.iter().filter(|(d, _)| inside(*d)).map(|x| x.1).collect();
    if region.len() < cfg.n_choices - 1 {
        return false;
    }
    let c = cat.centroid(visible);
    k3 == 0 || region.iter().any(|&x| cat.distance_to(&c, x) <= cat.distance_to(&c, answer))
}

#[test]
fn a_question_is_dropped_exactly_when_some_paired_setting_has_no_candidate_anywhere() {
    let (procs, v) = world();
    let cfg = GenerateConfig { seed: 6, knobs_mode: KnobsMode::Paper, ..Default::default() };
    let sources = FeatureSources { features: v, extra_pool: None, allow_missing: false };
    let mut tg = TaskGenerator::for_kind(cfg.item_kind(Task::VisualCloze), procs, &sources, None, &cfg).unwrap();
    for k1 in [0, 1] {
        let plan = tg.plan(Task::VisualCloze, knobs(k1, 0, 0)).unwrap();
        tg.prepare(&[&plan]).unwrap();
        let kept: BTreeSet<String> = tg.build(&plan).questions.into_iter().map(|q| q.qid).collect();
        let cat = tg.catalog();
        let (mut planned, mut feasible) = (0, 0);
        for (i, pp) in plan.procs.iter().enumerate() {
            let eligible = &cat.procs[i].eligible;
            for pq in &pp.questions {
                planned += 1;
                let answer = eligible[pq.positions[pq.slot]].item;
                let visible: Vec<u32> = pq
                    .positions
                    .iter()
                    .enumerate()
                    .filter(|(s, _)| *s != pq.slot)
                    .map(|(_, &p)| eligible[p].item)
                    .collect();
                // Paper knobs: knob 3 binds only the questions its coin flip chose.
                let coin = stepwise_tasks::questions::knob3_coin(cfg.seed, Task::VisualCloze, &procs[i].id, pq.attempt);
                let ok = [(0, 0), (0, 1), (1, 0), (1, 1)]
                    .iter()
                    .all(|&(k2, k3)| feasible_anywhere(cat, &cfg, answer, &visible, k2, k3 * u8::from(coin)));
                feasible += usize::from(ok);
                let steps: Vec<String> = pq.positions.iter().map(|&p| (eligible[p].step - 1).to_string()).collect();
                let qid = format!("{}-{i}-{}", Task::VisualCloze.qid_prefix(), steps.join("-"));
                assert_eq!(kept.contains(&qid), ok, "k1={k1} {qid}: kept {} but feasible {ok}", kept.contains(&qid));
            }
        }
        assert_eq!(kept.len(), feasible);
        println!("k1={k1}: {feasible} of {planned} planned questions can be made in all four settings");
        assert!(feasible > 0 && feasible < planned, "the check is vacuous: {feasible} of {planned}");
    }
}

#[test]
fn widened_flags_match_the_counts_and_unwidened_negatives_are_among_the_k_nearest() {
    let cfg = GenerateConfig { seed: 2, k: 40, k_c: 20, knobs_mode: KnobsMode::Paper, ..Default::default() };
    for mode in knobs(0, 0, 0).paired(Task::VisualCloze) {
        let g = run(Task::VisualCloze, mode, &cfg);
        let widened = g.questions.iter().filter(|q| meta(q)["distances"]["selection"]["widened"] == true).count();
        assert_eq!(widened as u64, g.counts.questions_widened, "{mode}: counts and provenance disagree");
        assert!(g.questions.iter().all(|q| meta(q)["distances"]["selection"]["widened"].is_boolean()));
        // The answers' K nearest neighbours, computed here independently.
        let answers: Vec<String> =
            g.questions.iter().map(|q| strs(&meta(q)["choice_items"])[q.answer].clone()).collect();
        let nn = exact_neighbours(&answers, cfg.k);
        for (q, a) in g.questions.iter().zip(&answers) {
            let near: BTreeSet<&str> = nn[a].iter().map(|(id, _)| id.as_str()).collect();
            let outside = strs(&meta(q)["choice_items"])
                .into_iter()
                .enumerate()
                .filter(|(i, s)| *i != q.answer && !near.contains(s.as_str()))
                .count();
            let sel = &meta(q)["distances"]["selection"];
            // Widened: the K neighbours could not serve the question, so a negative comes from beyond them.
            assert_eq!(outside > 0, sel["widened"] == true, "{}: {outside} negatives beyond the K nearest", q.qid);
            let to_answer: Vec<f64> = meta(q)["distances"]["to_answer"].as_array().unwrap().iter().map(f).collect();
            let (lo, hi) = (f(&sel["lo"]), f(&sel["hi"]));
            for (i, d) in to_answer.iter().enumerate().filter(|(i, _)| *i != q.answer) {
                assert!(*d >= lo - 1e-4 && *d <= hi + 1e-4, "{}: choice {i} at {d} outside [{lo}, {hi}]", q.qid);
            }
        }
    }
}

#[test]
fn coherence_knob2_statistics_cover_the_whole_union() {
    let cfg = GenerateConfig { seed: 4, k: 30, k_c: 10, knobs_mode: KnobsMode::Paper, ..Default::default() };
    let g = run(Task::VisualCoherence, knobs(0, 1, 0), &cfg);
    assert!(!g.questions.is_empty());
    for q in g.questions.iter().take(25) {
        let m = meta(q);
        let items = strs(&m["question_items"]);
        let coherent: Vec<String> =
            items.iter().enumerate().filter(|(i, _)| *i != q.answer).map(|(_, s)| s.clone()).collect();
        let nn = exact_neighbours(&coherent, cfg.k);
        // The union, each item at its smallest distance to a coherent image.
        let mut union: BTreeMap<&str, f32> = BTreeMap::new();
        for list in nn.values() {
            for (id, d) in list {
                let e = union.entry(id.as_str()).or_insert(f32::INFINITY);
                *e = e.min(*d);
            }
        }
        let ds: Vec<f64> = union.values().map(|&d| d as f64).collect();
        assert!(ds.len() > cfg.k_c, "the union is larger than K_C");
        let mean = ds.iter().sum::<f64>() / ds.len() as f64;
        let std = (ds.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / ds.len() as f64).sqrt();
        let sel = &m["distances"]["selection"];
        assert!((f(&sel["m_d"]) - mean).abs() < 1e-3, "{}: m_d {} vs the union's {mean}", q.qid, sel["m_d"]);
        assert!((f(&sel["s_d"]) - std).abs() < 1e-3, "{}: s_d {} vs the union's {std}", q.qid, sel["s_d"]);
    }
}

#[test]
fn a_suite_writes_ordering_once_and_resolves_every_setting() {
    let (procs, v) = world();
    let td = tempfile::tempdir().unwrap();
    let cfg = SuiteConfig {
        generate: GenerateConfig { seed: 1, knobs_mode: KnobsMode::Paper, ..Default::default() },
        tasks: vec![Task::VisualCloze, Task::VisualOrdering],
        modes: Mode::suite(),
        split_fractions: Default::default(),
        shard: None,
    };
    let sources = FeatureSources { features: v, extra_pool: None, allow_missing: false };
    let rows = write_suite(td.path(), procs, sources, &cfg, &Manifest::new("suite")).unwrap();
    let dir = td.path();
    let qids = |p: &Path| -> Vec<String> {
        let v: Value = serde_json::from_slice(&std::fs::read(p.join("questions.json")).unwrap()).unwrap();
        v["data"].as_array().unwrap().iter().map(|q| q["qid"].as_str().unwrap().to_string()).collect()
    };
    for k in KnobSetting::all() {
        let mode = Mode::Knobs(k);
        let ordering = taskset_dir(dir, mode, Task::VisualOrdering);
        assert!(ordering.join("questions.json").is_file(), "{mode}: {}", ordering.display());
        assert_eq!(ordering, dir.join(format!("knobs-{}-{}-0/visual_ordering", k.k1, k.k2)));
        assert_eq!(dir.join(mode.label()).join("visual_ordering").exists(), k.k3 == 0);
        assert_eq!(taskset_dir(dir, mode, Task::VisualCloze), dir.join(mode.label()).join("visual_cloze"));
        // The written sets of one k1 hold the same questions.
        let base = Mode::Knobs(KnobSetting { k2: 0, k3: 0, ..k });
        for task in [Task::VisualCloze, Task::VisualOrdering] {
            assert_eq!(qids(&taskset_dir(dir, mode, task)), qids(&taskset_dir(dir, base, task)), "{mode} {task}");
        }
    }
    // counts.json: the k3 = 1 ordering rows point to their k3 = 0 setting; the suite manifest lists them.
    let counts: Value = serde_json::from_slice(&std::fs::read(dir.join("counts.json")).unwrap()).unwrap();
    let aliased: Vec<(String, String)> = counts
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.get("same_as").map(|s| (r["setting"].as_str().unwrap().into(), s.as_str().unwrap().into())))
        .collect();
    assert_eq!(
        aliased,
        [
            ("knobs-0-0-1", "knobs-0-0-0"),
            ("knobs-0-1-1", "knobs-0-1-0"),
            ("knobs-1-0-1", "knobs-1-0-0"),
            ("knobs-1-1-1", "knobs-1-1-0")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert_eq!(rows.len(), 18);
    let m: Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["params"]["same_as"]["knobs-1-1-1/visual_ordering"], "knobs-1-1-0/visual_ordering");
    assert_eq!(m["params"]["generate"]["metric"], "l2");
    let md = std::fs::read_to_string(dir.join("counts.md")).unwrap();
    assert!(md.contains("| knobs-0-0-1 | same as knobs-0-0-0"), "{md}");
    assert!(md.contains("| widened |"), "{md}");
}

#[test]
fn one_setting_generated_alone_equals_its_suite_counterpart() {
    // Pairing does not depend on which settings are generated: a knob setting alone is built with its partners
    // (calibrated knobs: with the same balance).
    let (procs, v) = world();
    for knobs_mode in [KnobsMode::Paper, KnobsMode::Calibrated] {
        let cfg = GenerateConfig { seed: 8, knobs_mode, ..Default::default() };
        let sources = FeatureSources { features: v, extra_pool: None, allow_missing: false };
        let mut tg = TaskGenerator::for_kind(cfg.item_kind(Task::VisualCloze), procs, &sources, None, &cfg).unwrap();
        let plan = tg.plan(Task::VisualCloze, knobs(1, 0, 0)).unwrap();
        tg.prepare(&[&plan]).unwrap();
        let modes = knobs(1, 0, 0).paired(Task::VisualCloze);
        let mut together: Vec<Vec<Question>> = vec![Vec::new(); modes.len()];
        let counts = tg
            .build_paired(&plan, &modes, |i, groups| {
                together[i].extend(groups.into_iter().flat_map(|g| g.into_questions()));
                Ok(())
            })
            .unwrap();
        for (i, mode) in modes.iter().enumerate() {
            let alone = run(Task::VisualCloze, *mode, &cfg);
            assert_eq!(alone.counts, counts[i], "{mode} {knobs_mode}");
            let json = |qs: &[Question]| qs.iter().map(|q| q.to_json()).collect::<Vec<_>>();
            assert_eq!(json(&alone.questions), json(&together[i]), "{mode} {knobs_mode}");
        }
    }
    let cfg = GenerateConfig { seed: 8, ..Default::default() };
    let sources = FeatureSources { features: v, extra_pool: None, allow_missing: false };
    let tg = TaskGenerator::for_kind(cfg.item_kind(Task::VisualCloze), procs, &sources, None, &cfg).unwrap();
    let plan = tg.plan(Task::VisualCloze, knobs(1, 0, 0)).unwrap();
    // Settings of another k1, or RecipeQA mode, cannot be built from this plan.
    assert!(tg.build_paired(&plan, &[knobs(0, 0, 0)], |_, _| Ok(())).is_err());
    assert!(tg.build_paired(&plan, &[Mode::RecipeQa], |_, _| Ok(())).is_err());
}
