//! Sequencing-instance generation: windows, exact multi-references, shuffling, splits, output folder.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proptest::prelude::*;
use stepwise_core::procedure::{ProcedureAnnotations, ValidOrders};
use stepwise_core::sequencing::{SequencingInstance, is_permutation};
use stepwise_core::{Procedure, Step};
use stepwise_tasks::sequencing::{self, AltOrders, SeqModality, SequencingConfig, Windows};

fn step(i: usize, image: bool) -> Step {
    Step {
        title: Some(format!("Step {i}")),
        text: Some(format!("Do thing number {i}. It matters. Really.")),
        images: if image { vec![format!("img/{i}.jpg")] } else { vec![] },
        ..Default::default()
    }
}

fn procedure(id: &str, n: usize, constraints: Option<Vec<[usize; 2]>>) -> Procedure {
    Procedure {
        id: id.into(),
        category: Some(if id.len().is_multiple_of(2) { "a".into() } else { "b".into() }),
        steps: (0..n).map(|i| step(i, true)).collect(),
        annotations: constraints.map(|c| ProcedureAnnotations { order_constraints: Some(c), ..Default::default() }),
        ..Default::default()
    }
}

fn generate(procs: &[Procedure], cfg: &SequencingConfig) -> sequencing::Generated {
    sequencing::generate(procs, Path::new("corpus.jsonl"), None, cfg).unwrap()
}

/// The step sequence of an order of item indices.
fn steps_of(inst: &SequencingInstance, order: &[usize]) -> Vec<usize> {
    order.iter().map(|&k| inst.items[k].step).collect()
}

/// Brute force: all orders of `steps` consistent with the transitive closure of `constraints`.
fn brute_force_orders(steps: &[usize], constraints: &[[usize; 2]], n: usize) -> BTreeSet<Vec<usize>> {
    let mut before = vec![vec![false; n]; n];
    for &[a, b] in constraints {
        before[a][b] = true;
    }
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                if before[i][k] && before[k][j] {
                    before[i][j] = true;
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    let mut perm = steps.to_vec();
    fn rec(perm: &mut Vec<usize>, k: usize, before: &[Vec<bool>], out: &mut BTreeSet<Vec<usize>>) {
        if k == perm.len() {
            let ok = (0..perm.len()).all(|i| (i + 1..perm.len()).all(|j| !before[perm[j]][perm[i]]));
            if ok {
                out.insert(perm.clone());
            }
            return;
        }
        for i in k..perm.len() {
            perm.swap(k, i);
            rec(perm, k + 1, before, out);
            perm.swap(k, i);
        }
    }
    rec(&mut perm, 0, &before, &mut out);
    out
}

#[test]
fn references_are_exactly_the_valid_orders_of_the_window() {
    // 8 steps; 0 → 3 → 6, 1 → 2, 4 → 5 → 7. Windows of 5 over all 8 steps.
    let cons = vec![[0, 3], [3, 6], [1, 2], [4, 5], [5, 7]];
    let procs = vec![procedure("p1", 8, Some(cons.clone()))];
    let cfg = SequencingConfig { windows: Windows::All, ..Default::default() };
    let g = generate(&procs, &cfg);
    assert_eq!(g.instances.len(), 4);
    for inst in &g.instances {
        let window: Vec<usize> = {
            let mut s: Vec<usize> = inst.items.iter().map(|i| i.step).collect();
            s.sort();
            s
        };
        // Authored order first, in step order.
        assert_eq!(steps_of(inst, &inst.references[0]), window);
        let got: BTreeSet<Vec<usize>> = inst.references.iter().map(|r| steps_of(inst, r)).collect();
        assert_eq!(got.len(), inst.references.len(), "no duplicate references");
        assert_eq!(got, brute_force_orders(&window, &cons, 8), "{}", inst.id);
        assert!(inst.references[1..].windows(2).all(|w| w[0] < w[1]), "alternatives sorted");
    }
    assert_eq!(g.stats.reference_sources.get("order_constraints"), Some(&4));
}

#[test]
fn windows_sampling_short_procedures_and_skips() {
    let procs = vec![procedure("long", 12, None), procedure("four", 4, None), procedure("two", 2, None)];
    let cfg = SequencingConfig { windows: Windows::Count(3), min_steps: 4, ..Default::default() };
    let g = generate(&procs, &cfg);
    let by_proc: BTreeMap<&str, Vec<&SequencingInstance>> = g.instances.iter().fold(BTreeMap::new(), |mut m, i| {
        m.entry(i.procedure.as_str()).or_default().push(i);
        m
    });
    assert_eq!(by_proc["long"].len(), 3);
    assert!(by_proc["long"].iter().all(|i| i.items.len() == 5));
    let starts: BTreeSet<usize> =
        by_proc["long"].iter().map(|i| i.items.iter().map(|x| x.step).min().unwrap()).collect();
    assert_eq!(starts.len(), 3, "distinct windows");
    assert_eq!(by_proc["four"].len(), 1);
    assert_eq!(by_proc["four"][0].items.len(), 4);
    assert!(!by_proc.contains_key("two"));
    let first = generate(&procs, &SequencingConfig { windows: Windows::First, min_steps: 4, ..Default::default() });
    let long = first.instances.iter().find(|i| i.procedure == "long").unwrap();
    assert_eq!(steps_of(long, &long.references[0]), vec![0, 1, 2, 3, 4]);
    assert_eq!(g.stats.skipped.values().sum::<usize>(), 1);
    // Contiguity: each window is a run of consecutive usable steps.
    for inst in &g.instances {
        let s = steps_of(inst, &inst.references[0]);
        assert!(s.windows(2).all(|w| w[1] == w[0] + 1), "{s:?}");
    }
}

#[test]
fn image_modality_uses_only_image_steps_and_no_text() {
    let mut p = procedure("img", 9, None);
    for i in [1, 4] {
        p.steps[i].images.clear();
    }
    let cfg = SequencingConfig { modality: SeqModality::Image, windows: Windows::All, ..Default::default() };
    let g = generate(&[p], &cfg);
    assert_eq!(g.instances.len(), 3); // 7 image steps → 3 windows of 5
    for inst in &g.instances {
        assert!(inst.items.iter().all(|i| i.text.is_none() && i.title.is_none() && !i.images.is_empty()));
        assert!(inst.items.iter().all(|i| i.step != 1 && i.step != 4));
        assert_eq!(inst.modality, "image");
    }
    let text = generate(
        &g.instances.iter().map(|_| procedure("t", 5, None)).take(1).collect::<Vec<_>>(),
        &SequencingConfig::default(),
    );
    assert!(text.instances[0].items.iter().all(|i| i.images.is_empty() && i.text.is_some()));
}

#[test]
fn text_is_truncated_to_sentences_and_tokens() {
    let mut p = procedure("t", 5, None);
    p.steps[0].text = Some("One. Two. Three. Four. Five. Six. Seven.".into());
    p.steps[1].text = Some((0..100).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" "));
    let g = generate(&[p], &SequencingConfig::default());
    let inst = &g.instances[0];
    let text_of = |step: usize| inst.items.iter().find(|i| i.step == step).unwrap().text.clone().unwrap();
    assert_eq!(text_of(0), "One. Two. Three. Four. Five.");
    assert_eq!(text_of(1).split(' ').count(), 60);
    assert_eq!(g.stats.truncated_texts, 2);
}

#[test]
fn shuffles_vary_and_splits_are_by_procedure() {
    let procs: Vec<Procedure> = (0..60).map(|i| procedure(&format!("p{i:02}"), 10, None)).collect();
    let cfg = SequencingConfig { windows: Windows::Count(2), seed: 3, ..Default::default() };
    let g = generate(&procs, &cfg);
    assert_eq!(g.instances.len(), 120);
    let identity = g.instances.iter().filter(|i| i.references[0] == (0..5).collect::<Vec<_>>()).count();
    assert!(identity <= 5, "items are shuffled ({identity} identity orders)");
    let mut split_of: BTreeMap<&str, &str> = BTreeMap::new();
    for inst in &g.instances {
        let s = split_of.entry(inst.procedure.as_str()).or_insert(inst.split.as_str());
        assert_eq!(*s, inst.split, "procedure {} in two splits", inst.procedure);
    }
    let counts = g.stats.instances_per_split.clone();
    assert_eq!(counts["train"], 96);
    assert_eq!(counts["val"] + counts["test"], 24);
    // Another seed shuffles differently.
    let other = generate(&procs, &SequencingConfig { seed: 4, ..cfg.clone() });
    assert_ne!(g.instances[0].items, other.instances[0].items);
}

#[test]
fn valid_orders_and_annotation_files_give_references() {
    let mut p = procedure("vo", 5, None);
    p.annotations = Some(ProcedureAnnotations {
        valid_orders: Some(ValidOrders {
            count: 2,
            orders: vec![vec![0, 1, 2, 3, 4], vec![1, 0, 2, 3, 4]],
            complete: true,
        }),
        ..Default::default()
    });
    let q = procedure("ann", 5, Some(vec![[0, 1], [1, 2], [2, 3], [3, 4]]));
    let procs = vec![p, q];
    let g = generate(&procs, &SequencingConfig::default());
    let vo = g.instances.iter().find(|i| i.procedure == "vo").unwrap();
    assert_eq!(vo.references.len(), 2);
    assert_eq!(steps_of(vo, &vo.references[1]), vec![1, 0, 2, 3, 4]);
    // A procedure's own list is kept whole whatever the cap: cutting it would make listed orders wrong.
    let capped = generate(&procs, &SequencingConfig { max_references: 1, ..Default::default() });
    let vo = capped.instances.iter().find(|i| i.procedure == "vo").unwrap();
    assert_eq!((vo.references.len(), vo.constraints.is_none()), (2, true));
    let chain = g.instances.iter().find(|i| i.procedure == "ann").unwrap();
    assert_eq!(chain.references.len(), 1, "a chain has one valid order");

    // The annotation file replaces the procedure's own constraints.
    let td = tempfile::tempdir().unwrap();
    let f = td.path().join("alt.jsonl");
    std::fs::write(&f, "{\"id\":\"ann\",\"orders\":[[0,1,2,4,3],[4,3,2,1,0]]}\n").unwrap();
    let alt = AltOrders::read(&f, &procs).unwrap();
    let g = sequencing::generate(&procs, Path::new("c"), Some(&alt), &SequencingConfig::default()).unwrap();
    let chain = g.instances.iter().find(|i| i.procedure == "ann").unwrap();
    let got: Vec<Vec<usize>> = chain.references.iter().map(|r| steps_of(chain, r)).collect();
    assert_eq!(got[0], vec![0, 1, 2, 3, 4]);
    assert_eq!(got.len(), 3);
    assert!(got.contains(&vec![0, 1, 2, 4, 3]) && got.contains(&vec![4, 3, 2, 1, 0]));
    assert_eq!(g.stats.reference_sources.get("annotated"), Some(&1));
}

#[test]
fn many_valid_orders_are_sampled_up_to_the_cap() {
    // No constraints among 8 steps → 8! orders; cap 50.
    let procs = vec![procedure("free", 8, Some(vec![]))];
    let cfg = SequencingConfig { steps: 8, min_steps: 8, max_references: 50, ..Default::default() };
    let g = generate(&procs, &cfg);
    let inst = &g.instances[0];
    assert_eq!(inst.references.len(), 50);
    assert_eq!(steps_of(inst, &inst.references[0]), (0..8).collect::<Vec<_>>());
    assert_eq!(g.stats.sampled_references, 1);
    assert!(inst.references.iter().all(|r| is_permutation(r, 8)));
    // No precedence among free steps, and still marked as a sample: every order is valid, sampled or not.
    assert_eq!(inst.constraints, Some(vec![]));
    let reversed: Vec<usize> = inst.references[0].iter().rev().copied().collect();
    assert!(!inst.references.contains(&reversed) && inst.is_valid_order(&reversed));

    // A sample under constraints keeps the window's precedence pairs (transitively closed, as items), so every
    // valid order can be recognised: steps 0 → 2 → 4 and 1 → 3 among 8 (8! / (3! · 2!) orders, cap 50).
    let procs = vec![procedure("dag", 8, Some(vec![[0, 2], [2, 4], [1, 3]]))];
    let g = generate(&procs, &cfg);
    let inst = &g.instances[0];
    assert_eq!(inst.references.len(), 50);
    let mut pairs: Vec<[usize; 2]> =
        inst.constraint_pairs().iter().map(|&[a, b]| [inst.items[a].step, inst.items[b].step]).collect();
    pairs.sort_unstable();
    assert_eq!(pairs, vec![[0, 2], [0, 4], [1, 3], [2, 4]]);
    assert!(inst.references.iter().all(|r| inst.satisfies_constraints(r)));
    // A valid order the sample may not hold: the authored order with the free steps 5, 6, 7 moved first.
    let item_of_step = |s: usize| inst.items.iter().position(|i| i.step == s).unwrap();
    let other: Vec<usize> = [5, 6, 7, 0, 1, 2, 3, 4].map(item_of_step).to_vec();
    assert!(inst.satisfies_constraints(&other));
    let broken: Vec<usize> = [2, 0, 1, 3, 4, 5, 6, 7].map(item_of_step).to_vec();
    assert!(!inst.satisfies_constraints(&broken));
    let repaired = inst.repair_order(&broken);
    assert_eq!(steps_of(inst, &repaired), vec![0, 2, 1, 3, 4, 5, 6, 7], "the earliest placeable item first");
    assert!(inst.satisfies_constraints(&repaired));
    assert_eq!(inst.repair_order(&other), other, "a valid order is its own repair");
    // Complete references need no constraints.
    let small = generate(&procs, &SequencingConfig { steps: 5, min_steps: 5, ..Default::default() });
    assert!(small.instances.iter().all(|i| i.constraints.is_none()));
}

#[test]
fn bad_constraints_are_errors_naming_the_procedure_and_field() {
    let procs = vec![procedure("bad", 5, Some(vec![[3, 1]]))];
    let e = sequencing::generate(&procs, Path::new("c.jsonl"), None, &SequencingConfig::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("c.jsonl") && msg.contains("\"bad\"") && msg.contains("annotations.order_constraints"),
        "{msg}"
    );
    assert_eq!(e.exit_code(), 2);
    let procs = vec![procedure("oob", 5, Some(vec![[1, 9]]))];
    let msg =
        sequencing::generate(&procs, Path::new("c.jsonl"), None, &SequencingConfig::default()).unwrap_err().to_string();
    assert!(msg.contains("out of range"), "{msg}");
}

#[test]
fn output_is_identical_for_any_thread_count() {
    let procs: Vec<Procedure> =
        (0..40).map(|i| procedure(&format!("p{i}"), 6 + i % 5, Some(vec![[0, 2], [1, 3], [2, 4]]))).collect();
    let cfg = SequencingConfig { windows: Windows::Count(2), seed: 11, ..Default::default() };
    let td = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let g = pool.install(|| generate(&procs, &cfg));
        let dest = td.path().join(format!("out{threads}"));
        sequencing::write_instances_dir(&dest, false, &g, &cfg, &[]).unwrap();
        let files: Vec<Vec<u8>> = ["instances.jsonl", "instances.parquet", "manifest.json"]
            .iter()
            .map(|f| std::fs::read(dest.join(f)).unwrap())
            .collect();
        bytes.push(files);
    }
    assert_eq!(bytes[0], bytes[1]);
    assert_eq!(stepwise_core::parquet::row_count(&td.path().join("out1/instances.parquet")).unwrap(), 80);
    let m: serde_json::Value = serde_json::from_slice(&bytes[0][2]).unwrap();
    assert_eq!(m["kind"], "sequencing");
    assert_eq!(m["counts"]["instances"], 80);
    // The JSONL reads back as instances with the same content.
    let first: SequencingInstance =
        serde_json::from_str(std::str::from_utf8(&bytes[0][0]).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(first.procedure, "p0");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// For random DAGs (edges only forward in authored order) and random window sizes, the references are
    /// exactly the brute-force valid orders of the window, each a permutation, the authored order first.
    #[test]
    fn references_match_brute_force_on_random_dags(
        n in 3usize..9,
        edges in proptest::collection::vec((0usize..9, 0usize..9), 0..14),
        size in 2usize..6,
        seed in 0u64..1000,
    ) {
        let cons: Vec<[usize; 2]> = edges.into_iter().filter(|(a, b)| a < b && *b < n).map(|(a, b)| [a, b]).collect();
        let procs = vec![procedure("r", n, Some(cons.clone()))];
        let size = size.min(n);
        let cfg = SequencingConfig { steps: size, min_steps: size, windows: Windows::All, seed, ..Default::default() };
        let g = generate(&procs, &cfg);
        prop_assert_eq!(g.instances.len(), n - size + 1);
        for inst in &g.instances {
            let mut window: Vec<usize> = inst.items.iter().map(|i| i.step).collect();
            window.sort();
            prop_assert_eq!(steps_of(inst, &inst.references[0]), window.clone());
            let got: BTreeSet<Vec<usize>> = inst.references.iter().map(|r| steps_of(inst, r)).collect();
            prop_assert_eq!(got, brute_force_orders(&window, &cons, n));
        }
    }
}

/// Kendall's τ of `order` against `gold` (both lists of item indices in procedural order).
fn kendall_tau(order: &[usize], gold: &[usize]) -> f64 {
    let mut pos = vec![0; gold.len()];
    for (p, &k) in gold.iter().enumerate() {
        pos[k] = p;
    }
    let ranks: Vec<usize> = order.iter().map(|&k| pos[k]).collect();
    let n = ranks.len();
    let mut discordant = 0;
    for i in 0..n {
        for j in i + 1..n {
            discordant += usize::from(ranks[i] > ranks[j]);
        }
    }
    1.0 - 4.0 * discordant as f64 / (n * (n - 1)) as f64
}

/// Mean τ of the item orders `sort_key` gives, over instances, and its standard error.
fn mean_tau(instances: &[SequencingInstance], order_of: impl Fn(&SequencingInstance) -> Vec<usize>) -> (f64, f64) {
    let taus: Vec<f64> = instances.iter().map(|i| kendall_tau(&order_of(i), &i.references[0])).collect();
    let n = taus.len() as f64;
    let mean = taus.iter().sum::<f64>() / n;
    let var = taus.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

fn sorted_by<K: Ord>(n: usize, key: impl Fn(usize) -> K) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&k| key(k));
    order
}

#[test]
fn blind_inputs_of_the_world_do_not_leak_the_order() {
    // World procedures: their image file names are hashes of (procedure, step).
    let mut params = stepwise_world::WorldParams::new(2, stepwise_world::Domain::Cooking, 300);
    params.images_stored = false;
    let procs = stepwise_world::generate(&params).unwrap();
    let cfg = SequencingConfig {
        modality: SeqModality::Multimodal,
        windows: Windows::Count(2),
        seed: 4,
        blind_inputs: true,
        ..Default::default()
    };
    let g = generate(&procs, &cfg);
    assert!(g.instances.len() > 400, "{} instances", g.instances.len());
    let td = tempfile::tempdir().unwrap();
    let dest = td.path().join("seq");
    sequencing::write_instances_dir(&dest, false, &g, &cfg, &[]).unwrap();
    let text = std::fs::read_to_string(dest.join(sequencing::blind::INPUTS_JSONL)).unwrap();
    let blind: Vec<sequencing::blind::BlindInstance> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(blind.len(), g.instances.len());
    for (b, line) in blind.iter().zip(text.lines()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v.get("references").is_none() && v.get("procedure").is_none());
        assert!(v["items"].as_array().unwrap().iter().all(|it| it.get("step").is_none()), "{line}");
        let keys: BTreeSet<&str> = b.items.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys.len(), b.items.len(), "keys are unique within an instance");
    }
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(dest.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["counts"]["blind_items_with_step_numbered_images"], 0, "world image names carry no step numbers");

    let by_id: BTreeMap<&str, &sequencing::blind::BlindInstance> = blind.iter().map(|b| (b.id.as_str(), b)).collect();
    // The same items in the same order as the gold file (so predicted item indices need no mapping).
    for inst in &g.instances {
        let b = by_id[inst.id.as_str()];
        assert_eq!(
            b.items.iter().map(|i| &i.images).collect::<Vec<_>>(),
            inst.items.iter().map(|i| &i.images).collect::<Vec<_>>()
        );
        assert_eq!(
            b.items.iter().map(|i| &i.text).collect::<Vec<_>>(),
            inst.items.iter().map(|i| &i.text).collect::<Vec<_>>()
        );
    }

    // The test can see a leak: the gold file's step field sorts every instance into the authored order.
    let (tau, _) = mean_tau(&g.instances, |i| sorted_by(i.items.len(), |k| i.items[k].step));
    assert_eq!(tau, 1.0);
    // What a model sees does not: sorting by key, by image path or by shown position is chance (τ ≈ 0, within
    // four standard errors).
    let by_key = mean_tau(&g.instances, |i| sorted_by(i.items.len(), |k| by_id[i.id.as_str()].items[k].key.clone()));
    let by_image =
        mean_tau(&g.instances, |i| sorted_by(i.items.len(), |k| by_id[i.id.as_str()].items[k].images.clone()));
    let as_shown = mean_tau(&g.instances, |i| (0..i.items.len()).collect());
    for (what, (mean, se)) in [("key", by_key), ("image path", by_image), ("shown position", as_shown)] {
        assert!(mean.abs() < 4.0 * se + 0.01, "sorting by {what}: mean τ {mean:.3} ± {se:.3}");
    }
}
