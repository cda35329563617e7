//! The ground truth written into each procedure's annotations, and the assembly of a core [`Procedure`].
//!
//! # Schema of `annotations.world` (`schema: "stepwise-world/1"`)
//!
//! ```text
//! { schema, domain, index, category, goal,
//!   entities: [{ id, kind, role (ingredient|part|consumable|intermediate), names, shape, colour "#rrggbb",
//!                quantity, count,
//!                initial: {state, location},
//!                states:    [label after step 0, after step 1, ...],    // e.g. "whole", "chopped+heated", "fastened"
//!                locations: [location after each step],                // "pantry"|"bench", a prop id, "in:<entity>", "absent"
//!                counts?:       [count after each step],                // consumables only (screws left)
//!                orientations?: [orientation after each step],          // only for things that get turned over
//!                members: [entity ids it is made of, at the end],       // intermediates
//!                made_in_step?: first step after which it exists,       // intermediates
//!                mentions: [steps whose text names it], implicit_mentions: [steps where it is an unsaid argument] }],
//!   props: [{ id, kind, role (tool|container|habitat), names, count, colour,
//!             orientations?: [after each step],   // tools in use and poured-from containers "tilted"; absent: always upright
//!             locations?: [after each step],      // "counter" or the habitat it is on/in; absent: always on the counter
//!             states?: [after each step],         // "", "hot", "greased", "hot+greased"; absent: never either
//!             used_in_steps: [...], mentions: [...], implicit_mentions: [...] }],
//!   actions: [{ verb, step, patients, tools, container?, destination?, habitat?, result?, base?, orientation?,
//!               consumes?: [entity, n], detail? }],                     // canonical order (ids used by action_edges)
//!   action_edges: [[a, b], ...],                                        // transitive reduction of the action DAG
//!   style? }                                  // shared style id, only in worlds made with `--styles N`
//! ```
//!
//! Labels of states: see [`crate::model::state_label`]. The step DAG is `annotations.order_constraints`
//! (transitive reduction over step indices) and the valid orders `annotations.valid_orders` (exact count; all
//! orders when at most the cap, else the authored order plus distinct uniform samples). Each step's annotations
//! carry `spans` (explicit arguments with char offsets, implicit ones without), `links` (event → argument by
//! role), `actions` (indices into `actions`) and `template` (`styles`, `join`, `connective`, `noise`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use stepwise_core::procedure::{Procedure, ProcedureAnnotations, Step, StepAnnotations};

use crate::model::*;
use crate::orders::LinearExtensions;
use crate::plan::{Plan, stream};
use crate::text::ProcedureText;

pub const SCHEMA: &str = "stepwise-world/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateAt {
    pub state: String,
    pub location: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityTruth {
    pub id: String,
    pub kind: String,
    pub role: EntityRole,
    pub names: Vec<String>,
    pub shape: crate::model::Shape,
    pub colour: String,
    pub quantity: String,
    pub count: u32,
    pub initial: StateAt,
    pub states: Vec<String>,
    pub locations: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orientations: Option<Vec<Orientation>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_in_step: Option<usize>,
    pub mentions: Vec<usize>,
    pub implicit_mentions: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PropTruth {
    pub id: String,
    pub kind: String,
    pub role: PropRole,
    pub names: Vec<String>,
    pub count: u32,
    pub colour: String,
    /// Left out when always upright.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orientations: Vec<Orientation>,
    /// Left out when always on the counter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<String>,
    /// Left out when never hot or greased.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<String>,
    pub used_in_steps: Vec<usize>,
    pub mentions: Vec<usize>,
    pub implicit_mentions: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionTruth {
    pub verb: Verb,
    pub step: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patients: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub habitat: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orientation: Option<Orientation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumes: Option<(String, u32)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The typed `annotations.world` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorldTruth {
    pub schema: String,
    pub domain: Domain,
    pub index: u64,
    pub category: String,
    pub goal: String,
    pub entities: Vec<EntityTruth>,
    pub props: Vec<PropTruth>,
    pub actions: Vec<ActionTruth>,
    pub action_edges: Vec<[usize; 2]>,
    /// The shared visual style ("kitchen" or workshop) the procedure is drawn in, when the world was made with
    /// a fixed number of styles (`WorldParams::styles`); absent when every procedure has its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<u64>,
}

impl WorldTruth {
    /// Read the payload back from a procedure's annotations (None when it has none or another schema).
    pub fn of(p: &Procedure) -> Option<WorldTruth> {
        let v = p.annotations.as_ref()?.world.as_ref()?;
        serde_json::from_value(v.clone()).ok().filter(|t: &WorldTruth| t.schema == SCHEMA)
    }
}

fn hex(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

fn location(spec: &WorldSpec, loc: Loc) -> String {
    match loc {
        Loc::Absent => "absent".into(),
        Loc::Start => spec.domain.start_place().into(),
        Loc::On(p) => spec.props[p].id.clone(),
        Loc::In(e) => format!("in:{}", spec.entities[e].id),
    }
}

fn prop_state(s: &PropState) -> String {
    match (s.hot, s.greased) {
        (true, true) => "hot+greased".into(),
        (true, false) => "hot".into(),
        (false, true) => "greased".into(),
        (false, false) => String::new(),
    }
}

/// Build the typed truth of a plan, with mentions taken from the realised text.
pub fn world_truth(plan: &Plan, text: &ProcedureText) -> WorldTruth {
    let spec = &plan.spec;
    let n = plan.steps.len();
    let mut step_of = vec![0usize; plan.actions.len()];
    for (s, acts) in plan.steps.iter().enumerate() {
        for &a in acts {
            step_of[a] = s;
        }
    }
    // Mentions from spans: explicit (with offsets) and implicit.
    let mut explicit: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    let mut implicit: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (s, st) in text.steps.iter().enumerate() {
        for span in &st.spans {
            let key = span
                .attrs
                .get("entity")
                .map(|e| format!("e:{e}"))
                .or_else(|| span.attrs.get("prop").map(|p| format!("p:{p}")));
            if let Some(k) = key {
                if span.is_implicit() { &mut implicit } else { &mut explicit }.entry(k).or_default().insert(s);
            }
        }
    }
    let list = |m: &BTreeMap<String, BTreeSet<usize>>, k: &str| {
        m.get(k).map(|s| s.iter().copied().collect()).unwrap_or_default()
    };

    let entities = spec
        .entities
        .iter()
        .enumerate()
        .map(|(e, es)| {
            let init = plan.initial.entities[e];
            let states: Vec<String> =
                plan.states.iter().map(|s| state_label(spec.domain, s.entities[e].tags)).collect();
            let locations: Vec<String> = plan.states.iter().map(|s| location(spec, s.entities[e].loc)).collect();
            let orients: Vec<Orientation> = plan.states.iter().map(|s| s.entities[e].orientation).collect();
            let final_state = plan.states.last().expect("plans have steps");
            let key = format!("e:{}", es.id);
            EntityTruth {
                id: es.id.clone(),
                kind: es.kind.clone(),
                role: es.role,
                names: es.names.iter().map(|(s, p)| if es.count > 1 { p.clone() } else { s.clone() }).collect(),
                shape: es.shape,
                colour: hex(es.colour),
                quantity: es.quantity.clone(),
                count: es.count,
                initial: StateAt { state: state_label(spec.domain, init.tags), location: location(spec, init.loc) },
                states,
                locations,
                counts: (es.role == EntityRole::Consumable)
                    .then(|| plan.states.iter().map(|s| s.entities[e].count).collect()),
                orientations: orients.iter().any(|o| *o != Orientation::Upright).then_some(orients),
                members: if es.role == EntityRole::Intermediate {
                    final_state.members(e).into_iter().map(|m| spec.entities[m].id.clone()).collect()
                } else {
                    Vec::new()
                },
                made_in_step: if es.role == EntityRole::Intermediate {
                    plan.states.iter().position(|s| s.present(e))
                } else {
                    None
                },
                mentions: list(&explicit, &key),
                implicit_mentions: list(&implicit, &key),
            }
        })
        .collect();

    let props = spec
        .props
        .iter()
        .enumerate()
        .map(|(p, ps)| {
            let used: Vec<usize> =
                (0..n).filter(|&s| plan.steps[s].iter().any(|&a| plan.actions[a].tools.contains(&p))).collect();
            let orientations: Vec<Orientation> = (0..n)
                .map(|s| {
                    let acts = plan.steps[s].iter().map(|&a| &plan.actions[a]);
                    let poured =
                        acts.clone().any(|a| matches!(a.verb(), Verb::Pour | Verb::Serve) && a.container == Some(p));
                    let state = plan.states[s].props[p].orientation;
                    if state == Orientation::UpsideDown {
                        Orientation::UpsideDown
                    } else if used.contains(&s) || poured {
                        Orientation::Tilted
                    } else {
                        state
                    }
                })
                .collect();
            let key = format!("p:{}", ps.id);
            let locations: Vec<String> = plan
                .states
                .iter()
                .map(|s| s.props[p].on.map(|h| spec.props[h].id.clone()).unwrap_or_else(|| "counter".into()))
                .collect();
            let states: Vec<String> = plan.states.iter().map(|s| prop_state(&s.props[p])).collect();
            let keep = |v: Vec<String>, default: &str| {
                if v.iter().all(|x| x == default) { Vec::new() } else { v }
            };
            PropTruth {
                id: ps.id.clone(),
                kind: ps.kind.clone(),
                role: ps.role,
                names: ps.names.clone(),
                count: ps.count,
                colour: hex(ps.colour),
                orientations: if orientations.iter().all(|o| *o == Orientation::Upright) {
                    Vec::new()
                } else {
                    orientations
                },
                locations: keep(locations, "counter"),
                states: keep(states, ""),
                used_in_steps: used,
                mentions: list(&explicit, &key),
                implicit_mentions: list(&implicit, &key),
            }
        })
        .collect();

    let eid = |e: EntityId| spec.entities[e].id.clone();
    let pid = |p: PropId| spec.props[p].id.clone();
    let actions = plan
        .actions
        .iter()
        .enumerate()
        .map(|(i, a)| ActionTruth {
            verb: a.verb(),
            step: step_of[i],
            patients: a.patients.iter().map(|&e| eid(e)).collect(),
            tools: a.tools.iter().map(|&t| pid(t)).collect(),
            container: a.container.map(pid),
            destination: a.dest.map(pid),
            habitat: a.habitat.map(pid),
            result: a.result.map(eid),
            base: a.base.map(eid),
            orientation: a.orientation,
            consumes: a.consumes.map(|(e, k)| (eid(e), k)),
            detail: a.detail.clone(),
        })
        .collect();

    WorldTruth {
        schema: SCHEMA.into(),
        domain: spec.domain,
        index: plan.index,
        category: plan.category.clone(),
        goal: plan.goal.clone(),
        entities,
        props,
        actions,
        action_edges: plan.action_edges.clone(),
        style: None,
    }
}

/// The corpus id of procedure `index` (`world-cooking/000042`).
pub fn procedure_id(domain: Domain, index: u64) -> String {
    format!("world-{}/{index:06}", domain.as_str())
}

/// The file stem of a step image: 12 hex digits of a hash of (domain, procedure, step), so a path names its
/// procedure but not the step's position — a model or annotator reading paths (or sorting them) learns nothing
/// about the order. The names hide the order from readers of paths only: the corpus itself lists each step's
/// images in order.
pub fn image_stem(domain: Domain, index: u64, step: usize) -> String {
    let h = stepwise_core::hash::hash64(&[
        b"stepwise-world/image",
        domain.as_str().as_bytes(),
        &index.to_le_bytes(),
        &(step as u64).to_le_bytes(),
    ]);
    format!("{:012x}", h >> 16)
}

/// The image path of a step (`images/world-cooking_000042/3f09c2a17b4e.jpg`), relative to the corpus folder.
pub fn image_path(domain: Domain, index: u64, step: usize) -> String {
    format!("images/world-{}_{index:06}/{}.jpg", domain.as_str(), image_stem(domain, index, step))
}

/// Parse an image path back to (index, step); None when it is not one of the world's. Accepts the current
/// hashed names (the step is found by hashing every possible step, at most [`crate::plan::MAX_STEPS`]) and
/// the step-numbered names of corpora made before them (`.../03.jpg`).
pub fn parse_image_path(domain: Domain, path: &str) -> Option<(u64, usize)> {
    let rest =
        path.strip_prefix("images/")?.strip_prefix("world-")?.strip_prefix(domain.as_str())?.strip_prefix('_')?;
    let (idx, file) = rest.split_once('/')?;
    let stem = file.strip_suffix(".jpg")?;
    if idx.is_empty() || !idx.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: u64 = idx.parse().ok()?;
    let step = match stem.len() {
        12 => (0..crate::plan::MAX_STEPS).find(|&s| image_stem(domain, index, s) == stem)?,
        1..=3 if stem.bytes().all(|b| b.is_ascii_digit()) => stem.parse().ok()?,
        _ => return None,
    };
    Some((index, step))
}

/// Assemble the corpus record of a plan: steps with text, image paths and annotations, the ingredient or parts
/// list, the exact order constraints and valid orders, and the world truth.
/// `style` is the shared style the images are drawn in (None: the procedure's own).
pub fn procedure(
    plan: &Plan,
    text: &ProcedureText,
    seed: u64,
    max_orders: usize,
    order_samples: usize,
    style: Option<u64>,
) -> Result<Procedure, String> {
    let domain = plan.spec.domain;
    let n = plan.steps.len();
    let le = LinearExtensions::new(n, &plan.step_edges).map_err(|e| e.to_string())?;
    let valid = le.valid_orders(max_orders, order_samples, &mut stream(seed, domain, plan.index, "orders"));
    let truth = WorldTruth { style, ..world_truth(plan, text) };
    let steps = (0..n)
        .map(|s| {
            let t = &text.steps[s];
            let mut extra = BTreeMap::new();
            extra.insert("actions".to_string(), json!(plan.steps[s]));
            extra.insert(
                "template".to_string(),
                json!({"styles": t.styles, "join": t.join, "connective": t.connective, "noise": t.noise}),
            );
            Step {
                title: t.title.clone(),
                text: Some(t.text.clone()),
                images: vec![image_path(domain, plan.index, s)],
                annotations: Some(StepAnnotations { spans: t.spans.clone(), links: t.links.clone(), extra }),
                extra: BTreeMap::new(),
            }
        })
        .collect();
    let world: Value = serde_json::to_value(&truth).map_err(|e| e.to_string())?;
    Ok(Procedure {
        id: procedure_id(domain, plan.index),
        title: Some(plan.title.clone()),
        source: Some(format!("stepwise-world@seed={seed}")),
        license: Some("CC0-1.0".into()),
        lang: Some("en".into()),
        category: Some(plan.category.clone()),
        steps,
        ingredients: Some(text.ingredients.clone()),
        gallery: None,
        annotations: Some(ProcedureAnnotations {
            order_constraints: Some(plan.step_edges.clone()),
            valid_orders: Some(valid),
            world: Some(world),
            extra: BTreeMap::new(),
        }),
        extra: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_paths_round_trip() {
        let p = image_path(Domain::Assembly, 1234567, 12);
        assert!(p.starts_with("images/world-assembly_1234567/") && p.ends_with(".jpg"), "{p}");
        assert_eq!(parse_image_path(Domain::Assembly, &p), Some((1234567, 12)));
        assert_eq!(parse_image_path(Domain::Cooking, &p), None);
        assert_eq!(parse_image_path(Domain::Cooking, "images/world-cooking_/1.jpg"), None);
        assert_eq!(parse_image_path(Domain::Cooking, "images/world-cooking_12/x.jpg"), None);
        assert_eq!(
            parse_image_path(Domain::Cooking, "images/world-cooking_12/0123456789ab.jpg"),
            None,
            "not a step's hash"
        );
        // Step-numbered names of older corpora still parse.
        assert_eq!(parse_image_path(Domain::Cooking, "images/world-cooking_000042/03.jpg"), Some((42, 3)));
    }

    #[test]
    fn image_names_do_not_reveal_the_step() {
        let max = crate::plan::MAX_STEPS;
        let mut sorted_first = 0usize;
        let procedures = 4000u64;
        for index in 0..procedures {
            let stems: Vec<String> = (0..max).map(|s| image_stem(Domain::Cooking, index, s)).collect();
            // Distinct within a procedure, so every name parses back to its own step.
            let distinct: BTreeSet<&String> = stems.iter().collect();
            assert_eq!(distinct.len(), max, "procedure {index}");
            for s in 0..max {
                assert_eq!(parse_image_path(Domain::Cooking, &image_path(Domain::Cooking, index, s)), Some((index, s)));
            }
            // Sorting the names of a 5-step window recovers its order no more often than chance.
            let mut window: Vec<usize> = (0..5).collect();
            window.sort_by(|&a, &b| stems[a].cmp(&stems[b]));
            sorted_first += usize::from(window[0] == 0);
        }
        // The first name in sorted order is the first step about 1/5 of the time (binomial, 4000 draws:
        // standard deviation 0.0063, so 0.17..0.23 is a ±4.7σ band).
        let rate = sorted_first as f64 / procedures as f64;
        assert!((0.17..0.23).contains(&rate), "sorted name puts the first step first in {rate:.3} of procedures");
    }
}
