//! The ground truth of generated procedures: valid orders are topological orders of the step DAG, counts match
//! brute force on small procedures, the world payload is consistent with the steps, and records round-trip
//! through the corpus reader.

use std::collections::BTreeSet;
use std::path::Path;

use stepwise_core::Procedure;
use stepwise_core::error::Location;
use stepwise_world::orders::is_topological_order;
use stepwise_world::{Domain, WorldParams, WorldTruth, generate};

fn corpus(domain: Domain, n: u64, seed: u64) -> Vec<Procedure> {
    let mut p = WorldParams::new(seed, domain, n);
    p.images_stored = false;
    p.max_orders = 50;
    generate(&p).unwrap()
}

#[test]
fn listed_orders_are_topological_and_counts_match_brute_force() {
    let mut checked_small = 0;
    for domain in [Domain::Cooking, Domain::Assembly] {
        for p in corpus(domain, 200, 21) {
            let a = p.annotations.as_ref().unwrap();
            let edges = a.order_constraints.as_ref().unwrap();
            let v = a.valid_orders.as_ref().unwrap();
            let n = p.steps.len();
            let identity: Vec<usize> = (0..n).collect();
            assert!(is_topological_order(n, edges, &identity), "{}: the authored order breaks the DAG", p.id);
            assert_eq!(v.orders[0], identity, "{}: the authored order comes first", p.id);
            let distinct: BTreeSet<&Vec<usize>> = v.orders.iter().collect();
            assert_eq!(distinct.len(), v.orders.len(), "{}: orders are distinct", p.id);
            for o in &v.orders {
                assert!(is_topological_order(n, edges, o), "{}: listed order {o:?} breaks the DAG", p.id);
            }
            assert!(v.count >= v.orders.len() as u64);
            assert_eq!(v.complete, v.count as usize == v.orders.len());
            if n <= 8 {
                let mut all = Vec::new();
                stepwise_core::sequencing::for_each_permutation(n, |o| {
                    if is_topological_order(n, edges, o) {
                        all.push(o.to_vec());
                    }
                });
                assert_eq!(v.count, all.len() as u64, "{}: count vs brute force", p.id);
                if v.complete {
                    all.sort();
                    assert_eq!(v.orders, all, "{}: the complete list is every valid order", p.id);
                }
                checked_small += 1;
            }
        }
    }
    assert!(checked_small >= 20, "only {checked_small} procedures with at most 8 steps were brute-forced");
}

#[test]
fn world_payload_is_consistent_with_the_steps() {
    for domain in [Domain::Cooking, Domain::Assembly] {
        for p in corpus(domain, 60, 4) {
            let t = WorldTruth::of(&p).expect("world payload parses with the documented schema");
            let n = p.steps.len();
            assert_eq!(t.domain, domain);
            for e in &t.entities {
                assert_eq!(e.states.len(), n, "{} {}", p.id, e.id);
                assert_eq!(e.locations.len(), n);
                assert!(e.mentions.iter().chain(&e.implicit_mentions).all(|&s| s < n));
                if let Some(c) = &e.counts {
                    assert!(c.windows(2).all(|w| w[1] <= w[0]), "{}: {} supplies only go down", p.id, e.id);
                }
                if let Some(s) = e.made_in_step {
                    assert!(e.locations[..s].iter().all(|l| l == "absent") && e.locations[s] != "absent");
                }
            }
            for pr in &t.props {
                assert!(pr.orientations.is_empty() || pr.orientations.len() == n);
                assert!(pr.locations.is_empty() || pr.locations.len() == n);
                for &s in &pr.used_in_steps {
                    assert_eq!(pr.orientations.len(), n, "{}: a used tool has orientations", p.id);
                    assert_eq!(
                        pr.orientations[s],
                        stepwise_world::model::Orientation::Tilted,
                        "{}: tools in use are tilted",
                        p.id
                    );
                }
            }
            // Every action belongs to a step whose annotations list it.
            for (i, a) in t.actions.iter().enumerate() {
                let listed = p.steps[a.step].annotations.as_ref().unwrap().extra["actions"].as_array().unwrap();
                assert!(listed.iter().any(|x| x.as_u64() == Some(i as u64)), "{}: action {i}", p.id);
            }
            // The record round-trips through the corpus reader.
            let back =
                Procedure::from_json(&p.to_json(), Path::new("w.jsonl"), &Location::Line { line: 1, column: None })
                    .unwrap();
            assert_eq!(back, p);
        }
    }
}

#[test]
fn explicit_mentions_match_the_text() {
    for domain in [Domain::Cooking, Domain::Assembly] {
        for p in corpus(domain, 40, 8) {
            let t = WorldTruth::of(&p).unwrap();
            for e in &t.entities {
                for &s in &e.mentions {
                    let spans = &p.steps[s].annotations.as_ref().unwrap().spans;
                    assert!(spans.iter().any(|sp| sp.start.is_some() && sp.attrs.get("entity") == Some(&e.id)));
                }
            }
            // Something is left implicit somewhere (ellipsis, unsaid tools and habitats).
            let implicit =
                p.steps.iter().flat_map(|s| &s.annotations.as_ref().unwrap().spans).filter(|s| s.is_implicit()).count();
            assert!(implicit > 0, "{}", p.id);
        }
    }
}
