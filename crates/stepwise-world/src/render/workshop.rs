//! The assembly scene: the object being built in the middle (parts at their place in the finished object,
//! seams until fastened, screw heads once fastened, turned over when upside down), other sub-assemblies on the
//! side, loose parts laid out along the front, the parts box, the screw tray (one dot per screw left), tools.

use std::collections::{BTreeMap, BTreeSet};

use super::paint::{Frame, Painter, item_colour, tool};
use super::raster::{P, Shape, add, rotate};
use crate::builder::shade;
use crate::model::*;
use crate::plan::Plan;

const MAIN: P = [0.42, 0.41];
const MAIN_SCALE: f32 = 0.56;
const SIDE: P = [0.84, 0.4];
const SIDE_SCALE: f32 = 0.3;

/// Object-to-scene transform of a group.
#[derive(Clone, Copy)]
struct Placement {
    centre: P,
    /// Object point that lands on `centre`.
    pivot: P,
    scale: f32,
    rot: f32,
}

impl Placement {
    fn p(&self, o: P) -> P {
        let v = rotate([(o[0] - self.pivot[0]) * self.scale, (o[1] - self.pivot[1]) * self.scale], self.rot);
        add(self.centre, v)
    }
}

fn leaf_parts(spec: &WorldSpec, st: &WorldState, g: EntityId) -> Vec<EntityId> {
    st.with_members(g).into_iter().filter(|&e| spec.entities[e].geometry.is_some()).collect()
}

/// Draw the workshop after step `step`.
pub fn draw(p: &mut Painter, plan: &Plan, step: usize) {
    let spec = &plan.spec;
    let st = &plan.states[step];
    let acts: Vec<&Action> = plan.steps[step].iter().map(|&a| &plan.actions[a]).collect();
    let in_use: Vec<PropId> = acts.iter().flat_map(|a| a.tools.iter().copied()).collect();
    let groups: Vec<EntityId> =
        (0..spec.entities.len()).filter(|&e| spec.entities[e].role == EntityRole::Intermediate).collect();
    let fastenable: BTreeSet<EntityId> =
        plan.actions.iter().filter(|a| a.verb() == Verb::Fasten).flat_map(|a| a.patients.iter().copied()).collect();
    let find_prop = |kind: &str| (0..spec.props.len()).find(|&q| spec.props[q].kind == kind);

    // Drop cloth under the work area.
    if let Some(cl) = find_prop("drop_cloth") {
        p.rrect(MAIN, 0.33, 0.34, 0.02, 0.03, spec.props[cl].colour);
        for i in 0..3 {
            let y = MAIN[1] - 0.2 + 0.2 * i as f32;
            p.capsule([MAIN[0] - 0.3, y], [MAIN[0] + 0.3, y + 0.02], 0.002, shade(spec.props[cl].colour, -0.12));
        }
    }
    // The parts box, closed while parts are in it.
    if let Some(bx) = find_prop("box") {
        let c = [0.86, 0.14];
        let col = spec.props[bx].colour;
        p.shadow(c, 0.1, 0.08);
        if st.contents(bx).is_empty() {
            p.rrect(c, 0.09, 0.07, 0.005, 0.0, col);
            p.rrect(c, 0.075, 0.055, 0.004, 0.0, shade(col, -0.35));
            p.shape(
                Shape::Polygon {
                    pts: vec![
                        [c[0] - 0.09, c[1] - 0.07],
                        [c[0] + 0.09, c[1] - 0.07],
                        [c[0] + 0.07, c[1] - 0.11],
                        [c[0] - 0.07, c[1] - 0.11],
                    ],
                },
                shade(col, 0.12),
            );
        } else {
            p.rrect(c, 0.09, 0.07, 0.005, 0.0, col);
            p.capsule([c[0] - 0.09, c[1]], [c[0] + 0.09, c[1]], 0.006, [200, 190, 150]);
        }
    }
    // Socket on the wall edge.
    if let Some(so) = find_prop("socket") {
        let c = [0.95, 0.62];
        p.rrect(c, 0.03, 0.04, 0.006, 0.0, spec.props[so].colour);
        p.circle([c[0], c[1] - 0.012], 0.005, [40, 40, 40]);
        p.circle([c[0], c[1] + 0.012], 0.005, [40, 40, 40]);
    }
    // Screw tray: one dot per screw left.
    if let Some(tr) = find_prop("tray") {
        let c = [0.86, 0.66];
        p.shadow(c, 0.075, 0.05);
        p.ellipse(c, 0.075, 0.05, 0.0, spec.props[tr].colour);
        p.ellipse(c, 0.062, 0.04, 0.0, shade(spec.props[tr].colour, -0.15));
        let counting = acts.iter().any(|a| a.verb() == Verb::Count);
        if counting {
            // Counting: the screws are laid out in a row beside the tray.
            p.rrect([c[0], c[1] + 0.09], 0.09, 0.022, 0.01, 0.0, [250, 245, 200]);
        }
        let mut k = 0;
        for e in st.contents(tr) {
            for _ in 0..st.entities[e].count.min(24) {
                let (col, row) = (k % 8, k / 8);
                let q = if counting {
                    [c[0] - 0.08 + 0.0075 * k as f32, c[1] + 0.09]
                } else {
                    [c[0] - 0.045 + 0.013 * col as f32, c[1] - 0.022 + 0.014 * row as f32]
                };
                // Screws contrast with the tray: dark on a light tray, light on a dark one.
                let light_tray = spec.props[tr].colour[0] > 128;
                let col = match (spec.entities[e].kind == "nails", light_tray) {
                    (true, _) => [150, 110, 70],
                    (false, true) => [70, 72, 80],
                    (false, false) => [200, 203, 210],
                };
                p.circle(q, 0.0052, col);
                k += 1;
            }
        }
    }

    // Groups: the first declared is the main object; the others sit on the side until joined.
    let mut placements: BTreeMap<EntityId, Placement> = BTreeMap::new();
    for (gi, &g) in groups.iter().enumerate() {
        if !st.present(g) || matches!(st.entities[g].loc, Loc::In(_)) {
            continue;
        }
        let leaves = leaf_parts(spec, st, g);
        let rot = if st.entities[g].orientation == Orientation::UpsideDown { std::f32::consts::PI } else { 0.0 };
        let pl = if gi == 0 {
            Placement { centre: MAIN, pivot: [0.0, 0.0], scale: MAIN_SCALE, rot }
        } else {
            let (lo, hi) = bbox(spec, &leaves);
            Placement { centre: SIDE, pivot: [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0], scale: SIDE_SCALE, rot }
        };
        placements.insert(g, pl);
        let lit = st.entities[g].tags & tag::LIT != 0;
        let mut order = leaves.clone();
        // Big panels behind small parts.
        order.sort_by(|&a, &b| area(spec, b).total_cmp(&area(spec, a)).then(a.cmp(&b)));
        for &e in &order {
            draw_part(p, spec, st, e, pl, lit, &fastenable);
        }
        if lit && let Some(cable) = leaves.iter().copied().find(|&e| spec.entities[e].kind == "cable") {
            let g = spec.entities[cable].geometry.expect("parts have geometry");
            let end = pl.p([g.rect[0] + g.rect[2] / 2.0, g.rect[1]]);
            p.capsule(end, [0.95, 0.62], 0.004, [35, 35, 38]);
        }
    }

    // Loose parts along the front, each in its own slot.
    let parts: Vec<EntityId> =
        (0..spec.entities.len()).filter(|&e| spec.entities[e].role == EntityRole::Part).collect();
    let slots = parts.len().max(1);
    let mut loose_at: BTreeMap<EntityId, P> = BTreeMap::new();
    for (i, &e) in parts.iter().enumerate() {
        if st.entities[e].loc != Loc::Start {
            continue;
        }
        let x = 0.06 + 0.66 * (i as f32 + 0.5) / slots as f32;
        let c = [x, 0.875 + if i % 2 == 0 { -0.02 } else { 0.03 }];
        loose_at.insert(e, c);
        let g = spec.entities[e].geometry.expect("parts have geometry");
        let (w, h) = (g.rect[2], g.rect[3]);
        let upright = h > w;
        let max_len = (0.66 / slots as f32 * 2.2).min(0.2);
        let s = (max_len / w.max(h)).min(0.3);
        let mut rot = if upright { std::f32::consts::FRAC_PI_2 } else { 0.0 };
        if st.entities[e].orientation == Orientation::UpsideDown {
            rot += std::f32::consts::PI;
        }
        let pl = Placement { centre: c, pivot: [g.rect[0], g.rect[1]], scale: s, rot };
        draw_part(p, spec, st, e, pl, false, &fastenable);
    }

    // Tools.
    let tools: Vec<PropId> = (0..spec.props.len()).filter(|&q| spec.props[q].role == PropRole::Tool).collect();
    for (i, &t) in tools.iter().enumerate() {
        let ts = &spec.props[t];
        if in_use.contains(&t) {
            let a = acts.iter().find(|a| a.tools.contains(&t)).expect("a tool in use belongs to an action");
            let target = tool_target(spec, st, a, &placements, &loose_at);
            tool(p, &ts.kind, ts.colour, Frame::at([target[0] + 0.06, target[1] - 0.04], 0.2, -0.6));
        } else {
            let c = [0.8 + 0.1 * (i % 2) as f32, 0.82 + 0.06 * (i / 2) as f32];
            tool(p, &ts.kind, ts.colour, Frame::at(c, 0.09, 0.0));
        }
    }
}

fn area(spec: &WorldSpec, e: EntityId) -> f32 {
    spec.entities[e].geometry.map(|g| g.rect[2] * g.rect[3]).unwrap_or(0.0)
}

fn bbox(spec: &WorldSpec, parts: &[EntityId]) -> (P, P) {
    let mut lo = [f32::MAX; 2];
    let mut hi = [f32::MIN; 2];
    for &e in parts {
        if let Some(g) = spec.entities[e].geometry {
            lo = [lo[0].min(g.rect[0] - g.rect[2] / 2.0), lo[1].min(g.rect[1] - g.rect[3] / 2.0)];
            hi = [hi[0].max(g.rect[0] + g.rect[2] / 2.0), hi[1].max(g.rect[1] + g.rect[3] / 2.0)];
        }
    }
    if lo[0] > hi[0] { ([0.0; 2], [0.0; 2]) } else { (lo, hi) }
}

/// Where a tool in use goes: the joint of the part it fastens, or the part or group it works on.
fn tool_target(
    spec: &WorldSpec,
    st: &WorldState,
    a: &Action,
    placements: &BTreeMap<EntityId, Placement>,
    loose_at: &BTreeMap<EntityId, P>,
) -> P {
    let Some(&e) = a.patients.first() else {
        return MAIN;
    };
    if let Some(c) = loose_at.get(&e) {
        return *c;
    }
    if let Some(pl) = placements.get(&e) {
        return pl.centre;
    }
    let top = st.top(e);
    let Some(pl) = placements.get(&top) else {
        return MAIN;
    };
    match spec.entities[e].geometry {
        Some(g) => pl.p(g.joints[0]),
        None => {
            // A sub-assembly joined to the main one: its first part's joint.
            let leaf = leaf_parts(spec, st, e).into_iter().next();
            leaf.and_then(|l| spec.entities[l].geometry).map(|g| pl.p(g.joints[0])).unwrap_or(pl.centre)
        }
    }
}

/// One part at its place: seams while only attached, screw heads once fastened, grain until sanded or
/// painted, paint colour once painted, a glow for a lit bulb.
fn draw_part(
    p: &mut Painter,
    spec: &WorldSpec,
    st: &WorldState,
    e: EntityId,
    pl: Placement,
    lit: bool,
    fastenable: &BTreeSet<EntityId>,
) {
    let es = &spec.entities[e];
    let g = es.geometry.expect("parts have geometry");
    let tags = st.entities[e].tags;
    // Only parts that get screwed show a seam until then (a bulb or a shade is simply on).
    let attached_only = tags & tag::ATTACHED != 0 && tags & tag::FASTENED == 0 && fastenable.contains(&e);
    // A part that is on but not yet fastened sits a little off its place, with a dark seam.
    let nudge = if attached_only { [0.006, -0.006] } else { [0.0, 0.0] };
    let c = add(pl.p([g.rect[0], g.rect[1]]), nudge);
    let (hw, hh) = (g.rect[2] / 2.0 * pl.scale, g.rect[3] / 2.0 * pl.scale);
    let col = item_colour(es, tags);
    let rot = pl.rot;
    if pl.scale > 0.4 {
        p.shadow(c, hw.max(0.01), hh.max(0.01));
    }
    if attached_only {
        p.rrect(c, hw + 0.004, hh + 0.004, 0.004, rot, [40, 30, 25]);
    }
    match es.shape {
        Form::Disc => p.rrect(c, hw, hh, hw.min(hh), rot, col),
        Form::Cone => {
            let pts = [[-0.25f32, -0.5], [0.25, -0.5], [0.5, 0.5], [-0.5, 0.5]]
                .map(|q| add(c, rotate([q[0] * hw * 2.0, q[1] * hh * 2.0], rot)))
                .to_vec();
            p.shape(Shape::Polygon { pts }, col);
            p.capsule(
                add(c, rotate([-0.3 * hw * 2.0, 0.45 * hh * 2.0], rot)),
                add(c, rotate([0.3 * hw * 2.0, 0.45 * hh * 2.0], rot)),
                0.003,
                shade(col, -0.2),
            );
        }
        Form::Bulb => {
            let glow_col = if lit { [255, 236, 140] } else { col };
            if lit {
                p.glow(c, hw * 3.5, [255, 230, 120], 0.7);
            }
            p.circle(c, hw, glow_col);
            p.rrect(add(c, rotate([0.0, hh * 0.9], rot)), hw * 0.5, hh * 0.3, 0.002, rot, [160, 160, 165]);
        }
        _ => {
            p.rrect(c, hw, hh, hw.min(hh) * 0.3, rot, col);
            // The underside edge is darker, so a part turned over looks turned over.
            let (a, b) = ([-hw * 0.9, hh * 0.8], [hw * 0.9, hh * 0.8]);
            p.capsule(add(c, rotate(a, rot)), add(c, rotate(b, rot)), (hh * 0.18).min(0.006), shade(col, -0.3));
            if tags & (tag::SANDED | tag::PAINTED) == 0
                && !matches!(es.kind.as_str(), "stem" | "cable" | "hinge" | "knob")
            {
                // Wood grain along the long side.
                let long_x = hw >= hh;
                for k in [-0.4f32, 0.15] {
                    let (a, b) = if long_x {
                        ([-hw * 0.85, hh * k], [hw * 0.85, hh * k * 0.6])
                    } else {
                        ([hw * k, -hh * 0.85], [hw * k * 0.6, hh * 0.85])
                    };
                    p.capsule(add(c, rotate(a, rot)), add(c, rotate(b, rot)), 0.0012, shade(col, -0.18));
                }
            }
            if tags & tag::SANDED != 0 && tags & tag::PAINTED == 0 {
                p.rrect(c, hw * 0.9, hh * 0.9, hw.min(hh) * 0.3, rot, shade(col, 0.12));
            }
        }
    }
    if tags & tag::FASTENED != 0 {
        for j in g.joints {
            let q = pl.p(j);
            p.circle(q, 0.011, [60, 62, 68]);
            p.capsule([q[0] - 0.007, q[1]], [q[0] + 0.007, q[1]], 0.002, [200, 200, 205]);
        }
    }
}

use crate::model::Shape as Form;
