//! Calibrated knobs against a brute-force reading of the questions they make: the answer's distance rank that
//! the provenance states is the rank the shortcuts see, the ranks are uniform, the draws are the same for any
//! thread count; and paper knobs apply knob 3 to a coin flip's share of the questions.

use std::collections::BTreeMap;

use serde_json::Value;
use stepwise_core::taskset::PLACEHOLDER;
use stepwise_core::{Choice, Procedure, Question, Task};
use stepwise_features::Vectors;
use stepwise_tasks::{GenerateConfig, KnobSetting, KnobsMode, Mode};

mod common;

use common::{run, styled_corpus};

/// A stronger style than tests/generate.rs's (0.5): answers sit near their question, as in real data.
fn corpus(n_procs: usize, n_steps: usize) -> (Vec<Procedure>, Vectors) {
    styled_corpus(n_procs, n_steps, 5, 0.5)
}

fn unit(v: &[f32]) -> Vec<f64> {
    let n = v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    v.iter().map(|x| *x as f64 / n).collect()
}

fn cos_dist(a: &[f64], b: &[f64]) -> f64 {
    let (na, nb) = (a.iter().map(|x| x * x).sum::<f64>().sqrt(), b.iter().map(|x| x * x).sum::<f64>().sqrt());
    1.0 - a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>() / (na * nb)
}

fn mean(vs: &[Vec<f64>]) -> Vec<f64> {
    (0..vs[0].len()).map(|d| vs.iter().map(|v| v[d]).sum::<f64>()).collect()
}

/// The choices' values the shortcuts read (cloze: distance to the question; coherence: to the other shown images;
/// ordering: chain length), computed from the vectors.
fn brute_values(q: &Question, task: Task, v: &Vectors) -> Vec<f64> {
    let meta = &q.extra["meta"];
    let vec_of = |id: &str| unit(v.get(id).unwrap_or_else(|| panic!("no vector for {id}")));
    let ids = |key: &str| -> Vec<String> {
        meta[key].as_array().unwrap().iter().filter_map(|x| x.as_str().map(str::to_string)).collect()
    };
    let d: Vec<f64> = match task {
        Task::VisualCloze | Task::TextualCloze => {
            let question: Vec<Vec<f64>> = ids("question_items").iter().map(|i| vec_of(i)).collect();
            let c = mean(&question);
            ids("choice_items").iter().map(|i| cos_dist(&c, &vec_of(i))).collect()
        }
        Task::VisualCoherence => {
            let items: Vec<Vec<f64>> = ids("choice_items").iter().map(|i| vec_of(i)).collect();
            (0..items.len())
                .map(|k| {
                    let others: Vec<Vec<f64>> =
                        items.iter().enumerate().filter(|(j, _)| *j != k).map(|(_, x)| x.clone()).collect();
                    cos_dist(&mean(&others), &items[k])
                })
                .collect()
        }
        Task::VisualOrdering => {
            let items: Vec<Vec<f64>> = ids("question_items").iter().map(|i| vec_of(i)).collect();
            let orders: Vec<Vec<usize>> = serde_json::from_value(meta["choice_orders"].clone()).unwrap();
            orders
                .iter()
                .map(|o| o.windows(2).map(|w| cos_dist(&items[w[0]], &items[w[1]])).sum::<f64>() / 3.0)
                .collect()
        }
    };
    d
}

/// The answer's rank (how many choices are nearer) by the shortcuts' distance.
fn brute_rank(q: &Question, d: &[f64]) -> usize {
    let a = d[q.answer];
    d.iter().filter(|&&x| x < a - 1e-6).count()
}

/// Whether every rank's share of `ranks` (over 4 positions) is within 3.5 binomial standard deviations of a quarter.
fn uniform(ranks: &[usize]) -> bool {
    let n = ranks.len() as f64;
    let tolerance = 3.5 * (0.25f64 * 0.75 / n).sqrt();
    (0..4).all(|r| (ranks.iter().filter(|&&x| x == r).count() as f64 / n - 0.25).abs() < tolerance)
}

#[test]
fn calibrated_ranks_are_the_shortcuts_ranks_and_uniform() {
    let (procs, v) = corpus(400, 9);
    let cfg = GenerateConfig { seed: 3, k: 60, k_c: 30, ..Default::default() };
    assert_eq!(cfg.knobs_mode, KnobsMode::Calibrated, "new suites are calibrated");
    for task in Task::ALL {
        for k3 in [0, 1] {
            let mode = Mode::Knobs(KnobSetting { k1: 0, k2: 1, k3 });
            let g = run(&procs, &v, task, mode, &cfg);
            let mut hist = BTreeMap::new();
            let mut by_spread = Vec::new();
            for q in &g.questions {
                let meta = &q.extra["meta"];
                assert_eq!(meta["knobs_mode"], "calibrated");
                let stated = meta["calibrated_rank"].as_u64().unwrap() as usize;
                let values = brute_values(q, task, &v);
                assert_eq!(brute_rank(q, &values), stated, "{task} {mode} {}", q.qid);
                *hist.entry(stated).or_insert(0usize) += 1;
                let mean = values.iter().sum::<f64>() / values.len() as f64;
                by_spread.push((values.iter().map(|x| (x - mean).powi(2)).sum::<f64>(), stated));
                if task != Task::VisualOrdering {
                    assert!(q.question.iter().any(|s| s == PLACEHOLDER) || task == Task::VisualCoherence);
                }
                assert!(q.choice_list.iter().all(|c| matches!(c, Choice::Item(_) | Choice::Sequence(_))));
            }
            let n = g.questions.len();
            assert!(n >= 100, "{task} {mode}: {n} questions ({:?})", g.counts);
            let ranks: Vec<usize> = by_spread.iter().map(|x| x.1).collect();
            assert!(uniform(&ranks), "{task} {mode}: ranks {hist:?}");
            // And as uniform among the questions whose distances lie closest together as among the others (the
            // audit's "rank given spread and level"). Not for cloze here: on this corpus its answers stand so far
            // apart from the candidates that an unridged balance would keep under 1% of the questions, so the
            // balance gives way (the ridge in `Tilt::fit`) and the audit names what is left.
            if matches!(task, Task::VisualCoherence | Task::VisualOrdering) {
                by_spread.sort_by(|a, b| a.0.total_cmp(&b.0));
                for half in by_spread.chunks(n.div_ceil(2)) {
                    let ranks: Vec<usize> = half.iter().map(|x| x.1).collect();
                    let counts: Vec<usize> = (0..4).map(|r| ranks.iter().filter(|&&x| x == r).count()).collect();
                    assert!(uniform(&ranks), "{task} {mode}: ranks {counts:?} in a half by spread");
                }
            }
        }
    }
}

/// Two choices that are each other's reverse are never both shown: otherwise, the reversed correct order never
/// being a choice, "neither of a reversed pair" would be a shortcut.
#[test]
fn calibrated_orderings_never_show_an_order_and_its_reverse() {
    let (procs, v) = corpus(300, 9);
    let cfg = GenerateConfig { seed: 5, k: 60, k_c: 30, ..Default::default() };
    for k2 in [0, 1] {
        let mode = Mode::Knobs(KnobSetting { k1: 0, k2, k3: 0 });
        let g = run(&procs, &v, Task::VisualOrdering, mode, &cfg);
        assert!(g.questions.len() >= 100, "{mode}: {:?}", g.counts);
        for q in &g.questions {
            let orders: Vec<Vec<usize>> = serde_json::from_value(q.extra["meta"]["choice_orders"].clone()).unwrap();
            for (i, a) in orders.iter().enumerate() {
                let reversed: Vec<usize> = a.iter().rev().copied().collect();
                assert!(!orders[i + 1..].contains(&reversed), "{mode} {}: {orders:?}", q.qid);
            }
        }
    }
}

#[test]
fn calibrated_draws_are_identical_for_any_thread_count() {
    let (procs, v) = corpus(80, 9);
    let cfg = GenerateConfig { seed: 8, k: 40, k_c: 20, ..Default::default() };
    let render = |threads: usize| -> Vec<String> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let mut out = Vec::new();
            for task in Task::ALL {
                for mode in KnobSetting::all().into_iter().map(Mode::Knobs) {
                    let g = run(&procs, &v, task, mode, &cfg);
                    out.push(format!("{task} {mode} {:?}", g.counts));
                    out.extend(g.questions.iter().map(|q| stepwise_core::json::to_canonical_string(&q.to_json())));
                }
            }
            out
        })
    };
    let one = render(1);
    assert!(one.len() > 100);
    assert_eq!(one, render(2));
}

#[test]
fn paper_knob3_applies_to_a_coin_flips_share_and_then_holds() {
    let (procs, v) = corpus(120, 9);
    let cfg = GenerateConfig { seed: 4, k: 60, k_c: 30, knobs_mode: KnobsMode::Paper, ..Default::default() };
    let g = run(&procs, &v, Task::VisualCloze, Mode::Knobs(KnobSetting { k1: 0, k2: 1, k3: 1 }), &cfg);
    let (mut applied, mut closer_when_applied) = (0usize, 0usize);
    for q in &g.questions {
        let meta = &q.extra["meta"];
        assert_eq!(meta["knobs_mode"], "paper");
        assert!(meta.get("calibrated_rank").is_none());
        let to_q: Vec<f64> =
            meta["distances"]["to_question"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        if meta["knob3_applied"] == Value::Bool(true) {
            applied += 1;
            closer_when_applied +=
                usize::from(to_q.iter().enumerate().any(|(i, &d)| i != q.answer && d <= to_q[q.answer]));
        } else {
            assert_eq!(meta["knob3_applied"], Value::Bool(false));
        }
    }
    let n = g.questions.len();
    assert!(n >= 100, "{:?}", g.counts);
    assert_eq!(closer_when_applied, applied, "every question the coin applied knob 3 to has a closer negative");
    let share = applied as f64 / n as f64;
    assert!((0.3..0.7).contains(&share), "applied to {applied} of {n}");
}

#[test]
fn a_setting_below_its_retention_target_is_named() {
    // Few neighbours: the calibrated ranks can rarely be reached.
    let (procs, v) = corpus(40, 9);
    let cfg = GenerateConfig { seed: 1, k: 4, k_c: 4, ..Default::default() };
    let g = run(&procs, &v, Task::VisualCloze, Mode::Knobs(KnobSetting { k1: 0, k2: 0, k3: 1 }), &cfg);
    let kept = g.counts.retention().unwrap();
    assert!(kept < 0.5, "{:?}", g.counts);
    let w = g.counts.warnings();
    assert!(w.iter().any(|w| w.contains("planned questions, below the 50%")), "{w:?}");
    let rows = vec![stepwise_tasks::suite::SuiteRow {
        setting: "knobs-0-0-1".into(),
        task: Task::VisualCloze,
        same_as: None,
        counts: g.counts.clone(),
    }];
    let named = stepwise_tasks::suite::counts_warnings(&rows);
    assert!(named.iter().any(|w| w.contains("knobs-0-0-1") && w.contains("below the 50%")), "{named:?}");
}
