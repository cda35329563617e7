//! From a category's canonical action list to a procedure plan: the action dependency DAG (conflicting
//! accesses, see [`crate::model`]), one authored linearisation, steps that sometimes bundle two consecutive
//! actions, the step DAG (the quotient of the action DAG), and the world state after every step.

use rand::Rng;
use stepwise_core::rng::{ChaCha8Rng, rng_for};

use crate::builder::Builder;
use crate::model::*;
use crate::orders;

/// The most steps a procedure has (the valid-order DP works on bitmasks of steps).
pub const MAX_STEPS: usize = 20;

/// Everything about one generated procedure except its text.
#[derive(Debug, Clone)]
pub struct Plan {
    pub index: u64,
    pub category: String,
    /// What is made, e.g. "a walnut cake".
    pub goal: String,
    pub title: String,
    pub spec: WorldSpec,
    pub initial: WorldState,
    /// Actions in canonical order (indices used by `action_edges` and `steps`).
    pub actions: Vec<Action>,
    /// Transitive reduction of the action dependency DAG.
    pub action_edges: Vec<[usize; 2]>,
    /// The authored steps in order; each lists its actions (one or two, in execution order).
    pub steps: Vec<Vec<usize>>,
    /// Transitive reduction of the step DAG (authored step indices).
    pub step_edges: Vec<[usize; 2]>,
    /// The world after each authored step.
    pub states: Vec<WorldState>,
}

/// The random stream of one procedure's part (`plan`, `text`, `orders`, `style`, `noise`).
pub fn stream(seed: u64, domain: Domain, index: u64, part: &str) -> ChaCha8Rng {
    rng_for(seed, &format!("world/{}/{index}/{part}", domain.as_str()))
}

/// Generate the plan of procedure `index` of a world.
pub fn plan(seed: u64, domain: Domain, index: u64) -> Result<Plan, String> {
    let mut rng = stream(seed, domain, index, "plan");
    let categories = match domain {
        Domain::Cooking => crate::cooking::CATEGORIES,
        Domain::Assembly => crate::assembly::CATEGORIES,
    };
    let category = categories[rng.random_range(0..categories.len())].to_string();
    let mut b = Builder::new(domain, &mut rng);
    let (goal, title) = match domain {
        Domain::Cooking => crate::cooking::build(&mut b, &category),
        Domain::Assembly => crate::assembly::build(&mut b, &category),
    };
    let Builder { entities, entity_start, props, prop_start, actions, .. } = b;
    let spec = WorldSpec { domain, entities, props };
    let initial = WorldState { entities: entity_start, props: prop_start };
    if actions.len() > orders::MAX_NODES {
        return Err(format!("{category}: {} actions (at most {})", actions.len(), orders::MAX_NODES));
    }

    // Simulate the canonical order to get each action's accesses; conflicting pairs are the DAG.
    let mut state = initial.clone();
    let mut accesses = Vec::with_capacity(actions.len());
    for (i, a) in actions.iter().enumerate() {
        let acc =
            apply(&spec, &mut state, a).map_err(|e| format!("{category}: action {i} ({}): {e}", a.verb().as_str()))?;
        accesses.push(acc);
    }
    let mut edges = Vec::new();
    for j in 0..actions.len() {
        for i in 0..j {
            if conflicts(&accesses[i], &accesses[j]) {
                edges.push([i, j]);
            }
        }
    }
    let action_edges = orders::transitive_reduction(actions.len(), &edges).map_err(|e| e.to_string())?;

    let authored = authored_order(actions.len(), &action_edges, &mut rng);
    let steps = bundle(&authored, &actions, &mut rng);
    let mut step_of = vec![0usize; actions.len()];
    for (s, acts) in steps.iter().enumerate() {
        for &a in acts {
            step_of[a] = s;
        }
    }
    let quotient: Vec<[usize; 2]> =
        action_edges.iter().map(|&[a, b]| [step_of[a], step_of[b]]).filter(|[a, b]| a != b).collect();
    if quotient.iter().any(|[a, b]| a > b) {
        return Err(format!("{category}: bundling broke the order (a bug)"));
    }
    let step_edges = orders::transitive_reduction(steps.len(), &quotient).map_err(|e| e.to_string())?;

    let states = simulate(&spec, &initial, &actions, &steps).map_err(|e| format!("{category}: authored order: {e}"))?;
    Ok(Plan { index, category, goal, title, spec, initial, actions, action_edges, steps, step_edges, states })
}

/// Run the steps' actions in the order given; the state after each step.
pub fn simulate(
    spec: &WorldSpec,
    initial: &WorldState,
    actions: &[Action],
    steps: &[Vec<usize>],
) -> Result<Vec<WorldState>, String> {
    let mut state = initial.clone();
    let mut out = Vec::with_capacity(steps.len());
    for (s, acts) in steps.iter().enumerate() {
        for &a in acts {
            apply(spec, &mut state, &actions[a]).map_err(|e| format!("step {s}: {e}"))?;
        }
        out.push(state.clone());
    }
    Ok(out)
}

/// A linear extension close to the canonical order: Kahn's algorithm taking the available action with the
/// smallest jittered canonical index, so authors sometimes make the dressing first or chop in another order.
fn authored_order(n: usize, edges: &[[usize; 2]], rng: &mut ChaCha8Rng) -> Vec<usize> {
    let keys: Vec<f64> = (0..n).map(|i| i as f64 + rng.random_range(-2.5..2.5)).collect();
    let mut preds = vec![0u64; n];
    for &[a, b] in edges {
        preds[b] |= 1 << a;
    }
    let mut done = 0u64;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let next = (0..n)
            .filter(|&v| done & (1 << v) == 0 && preds[v] & !done == 0)
            .min_by(|&a, &b| keys[a].total_cmp(&keys[b]))
            .expect("a DAG always has an available action");
        done |= 1 << next;
        out.push(next);
    }
    out
}

/// Group consecutive actions of the authored order into steps. Two actions that are consecutive in a linear
/// extension can always share a step without making the step graph cyclic (no third action lies between them).
fn bundle(authored: &[usize], actions: &[Action], rng: &mut ChaCha8Rng) -> Vec<Vec<usize>> {
    let mut steps: Vec<Vec<usize>> = Vec::new();
    let mut i = 0;
    while i < authored.len() {
        if i + 1 < authored.len() {
            let (a, b) = (&actions[authored[i]], &actions[authored[i + 1]]);
            let p = if related(a, b) { 0.35 } else { 0.08 };
            if rng.random_bool(p) {
                steps.push(vec![authored[i], authored[i + 1]]);
                i += 2;
                continue;
            }
        }
        steps.push(vec![authored[i]]);
        i += 1;
    }
    while steps.len() > MAX_STEPS {
        let singles: Vec<usize> =
            (0..steps.len() - 1).filter(|&s| steps[s].len() == 1 && steps[s + 1].len() == 1).collect();
        let s = if singles.is_empty() {
            rng.random_range(0..steps.len() - 1)
        } else {
            singles[rng.random_range(0..singles.len())]
        };
        let next = steps.remove(s + 1);
        steps[s].extend(next);
    }
    steps
}

/// Actions that read well as one step: they share a patient or a container.
fn related(a: &Action, b: &Action) -> bool {
    let places = |x: &Action| [x.container, x.dest].into_iter().flatten().collect::<Vec<_>>();
    a.patients.iter().any(|p| b.patients.contains(p)) || places(a).iter().any(|p| places(b).contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orders::{LinearExtensions, is_topological_order};

    #[test]
    fn plans_of_both_domains_are_valid() {
        for domain in [Domain::Cooking, Domain::Assembly] {
            for index in 0..150 {
                let p = plan(11, domain, index).unwrap_or_else(|e| panic!("{domain:?} {index}: {e}"));
                assert!(!p.steps.is_empty() && p.steps.len() <= MAX_STEPS);
                let identity: Vec<usize> = (0..p.steps.len()).collect();
                assert!(is_topological_order(p.steps.len(), &p.step_edges, &identity));
                assert_eq!(p.states.len(), p.steps.len());
                let n_actions: usize = p.steps.iter().map(Vec::len).sum();
                assert_eq!(n_actions, p.actions.len());
            }
        }
    }

    /// Every valid order (sampled uniformly) runs without a failed precondition and ends in the same world.
    #[test]
    fn every_valid_order_reaches_the_same_final_state() {
        for domain in [Domain::Cooking, Domain::Assembly] {
            for index in 0..80 {
                let p = plan(5, domain, index).unwrap();
                let le = LinearExtensions::new(p.steps.len(), &p.step_edges).unwrap();
                let mut rng = stream(5, domain, index, "test");
                let last = p.states.last().unwrap();
                for _ in 0..20 {
                    let order = le.sample(&mut rng);
                    let steps: Vec<Vec<usize>> = order.iter().map(|&s| p.steps[s].clone()).collect();
                    let states = simulate(&p.spec, &p.initial, &p.actions, &steps)
                        .unwrap_or_else(|e| panic!("{domain:?} {index} order {order:?}: {e}"));
                    assert_eq!(states.last().unwrap(), last, "{domain:?} {index} order {order:?}");
                }
            }
        }
    }

    /// The DAG is not over-constrained in an obvious way: procedures have several valid orders on average.
    #[test]
    fn procedures_have_alternative_orders() {
        for domain in [Domain::Cooking, Domain::Assembly] {
            let mut multi = 0;
            for index in 0..60 {
                let p = plan(3, domain, index).unwrap();
                let le = LinearExtensions::new(p.steps.len(), &p.step_edges).unwrap();
                if le.count() > 1 {
                    multi += 1;
                }
            }
            assert!(multi >= 45, "{domain:?}: only {multi}/60 with alternatives");
        }
    }
}
