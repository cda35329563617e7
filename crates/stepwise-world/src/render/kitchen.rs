//! The cooking scene: habitats along the back (stove, oven, fridge), containers on the counter with their
//! contents, the pantry shelf along the front with what is still unused, and the tools (the ones in use drawn
//! over what they act on, tilted).

use std::collections::BTreeMap;

use super::paint::{Frame, Painter, item_colour, lerp, pieces, tool, whole_item};
use super::raster::{P, Shape};
use crate::builder::shade;
use crate::model::*;
use crate::plan::Plan;

struct Layout {
    habitats: BTreeMap<PropId, P>,
    counter: BTreeMap<PropId, P>,
    pantry: BTreeMap<EntityId, P>,
    rest: BTreeMap<PropId, P>,
}

fn spread(n: usize, lo: f32, hi: f32) -> Vec<f32> {
    if n == 1 {
        return vec![(lo + hi) / 2.0];
    }
    (0..n).map(|i| lo + (hi - lo) * i as f32 / (n - 1) as f32).collect()
}

fn layout(plan: &Plan) -> Layout {
    let spec = &plan.spec;
    let hab: Vec<PropId> = (0..spec.props.len()).filter(|&p| spec.props[p].role == PropRole::Habitat).collect();
    let habitats = hab.iter().zip(spread(hab.len(), 0.2, 0.8)).map(|(&p, x)| (p, [x, 0.15])).collect();
    let mut cont: Vec<PropId> = (0..spec.props.len()).filter(|&p| spec.props[p].role == PropRole::Container).collect();
    cont.sort_by_key(|&p| (spec.props[p].kind != "board", p));
    let mut counter = BTreeMap::new();
    if cont.len() <= 3 {
        for (&p, x) in cont.iter().zip(spread(cont.len(), 0.2, 0.8)) {
            counter.insert(p, [x, 0.52]);
        }
    } else {
        let top = cont.len().div_ceil(2);
        for (i, &p) in cont.iter().enumerate() {
            let (row, k, n) = if i < top { (0.44, i, top) } else { (0.66, i - top, cont.len() - top) };
            counter.insert(p, [spread(n, 0.18, 0.82)[k], row]);
        }
    }
    let ings: Vec<EntityId> =
        (0..spec.entities.len()).filter(|&e| spec.entities[e].role == EntityRole::Ingredient).collect();
    // One row of at most five items, two rows when there are more.
    let per_row = if ings.len() > 5 { ings.len().div_ceil(2) } else { ings.len() };
    let mut pantry = BTreeMap::new();
    for (i, &e) in ings.iter().enumerate() {
        let (row, k) = (i / per_row.max(1), i % per_row.max(1));
        let n_row = if row == 0 { per_row } else { ings.len() - per_row };
        pantry.insert(e, [spread(n_row, 0.08, 0.64)[k] + 0.03 * row as f32, 0.85 + 0.085 * row as f32]);
    }
    let tools: Vec<PropId> = (0..spec.props.len()).filter(|&p| spec.props[p].role == PropRole::Tool).collect();
    let rest = tools
        .iter()
        .enumerate()
        .map(|(i, &t)| (t, [0.8 + 0.12 * (i % 2) as f32, 0.81 + 0.06 * (i / 2) as f32]))
        .collect();
    Layout { habitats, counter, pantry, rest }
}

/// Draw the kitchen after step `step`.
pub fn draw(p: &mut Painter, plan: &Plan, step: usize) {
    let spec = &plan.spec;
    let st = &plan.states[step];
    let lay = layout(plan);
    let acts: Vec<&Action> = plan.steps[step].iter().map(|&a| &plan.actions[a]).collect();
    let in_use: Vec<PropId> = acts.iter().flat_map(|a| a.tools.iter().copied()).collect();
    let poured: BTreeMap<PropId, PropId> = acts
        .iter()
        .filter(|a| matches!(a.verb(), Verb::Pour | Verb::Serve))
        .filter_map(|a| Some((a.container?, a.dest?)))
        .collect();

    // The pantry shelf: a band along the front.
    p.rrect([0.37, 0.89], 0.35, 0.1, 0.02, 0.0, [168, 134, 96]);
    p.rrect([0.37, 0.795], 0.35, 0.01, 0.0, 0.0, [128, 98, 66]);

    // Habitats.
    for (&h, &c) in &lay.habitats {
        let hs = &spec.props[h];
        p.shadow(c, 0.14, 0.12);
        match hs.kind.as_str() {
            "stove" => {
                p.rrect(c, 0.165, 0.12, 0.02, 0.0, [42, 42, 46]);
                for (i, dx) in [-0.075f32, 0.075].into_iter().enumerate() {
                    let b = [c[0] + dx, c[1]];
                    let busy = (0..spec.props.len()).filter(|&q| st.props[q].on == Some(h)).nth(i).is_some();
                    if busy {
                        p.glow(b, 0.055, [255, 120, 30], 0.8);
                    }
                    p.shape(Shape::Ring { c: b, r: 0.05, t: 0.006 }, if busy { [240, 110, 40] } else { [90, 90, 95] });
                }
            }
            "oven" => {
                p.rrect(c, 0.14, 0.12, 0.015, 0.0, hs.colour);
                p.rrect([c[0], c[1] + 0.015], 0.11, 0.075, 0.01, 0.0, [30, 28, 30]);
                if st.props[h].hot {
                    p.rrect([c[0], c[1] + 0.015], 0.1, 0.065, 0.01, 0.0, [150, 60, 20]);
                    p.glow([c[0], c[1] + 0.015], 0.07, [255, 150, 50], 0.6);
                }
                p.rrect([c[0], c[1] - 0.095], 0.1, 0.01, 0.005, 0.0, [120, 120, 125]);
                for k in 0..3 {
                    p.circle([c[0] - 0.06 + 0.06 * k as f32, c[1] - 0.095], 0.008, [40, 40, 40]);
                }
            }
            _ => {
                p.rrect(c, 0.12, 0.13, 0.02, 0.0, hs.colour);
                p.rrect([c[0], c[1] + 0.01], 0.1, 0.1, 0.01, 0.0, [200, 225, 240]);
                p.rrect([c[0] + 0.105, c[1]], 0.008, 0.05, 0.004, 0.0, [150, 150, 155]);
            }
        }
    }

    // Containers: on the counter, on a habitat, or tilted over their destination while poured from.
    for (&c, &pos) in &lay.counter {
        let ps = &spec.props[c];
        let (pos, scale, tilt) = match (poured.get(&c), st.props[c].on) {
            (Some(&d), _) => {
                let dp = where_is(&lay, st, d);
                ([dp[0] + 0.11, dp[1] - 0.12], 0.8, 0.7)
            }
            (None, Some(h)) => {
                let hc = lay.habitats[&h];
                match spec.props[h].kind.as_str() {
                    "stove" => {
                        let i = (0..c).filter(|&q| st.props[q].on == Some(h)).count();
                        ([hc[0] + if i == 0 { -0.075 } else { 0.075 }, hc[1] - 0.005], 0.72, 0.0)
                    }
                    _ => ([hc[0], hc[1] + 0.02], 0.45, 0.0),
                }
            }
            (None, None) => (pos, 1.0, 0.0),
        };
        let _ = ps;
        container(p, plan, st, c, pos, scale, tilt);
        if let Some(&d) = poured.get(&c) {
            // The stream of what was poured, from the lip to the destination.
            let dp = where_is(&lay, st, d);
            let col = st.contents(d).last().map(|&e| entity_colour(spec, st, e)).unwrap_or([200, 200, 200]);
            p.capsule([pos[0] - 0.06, pos[1] + 0.02], [dp[0] + 0.01, dp[1]], 0.012, col);
        }
    }

    // The pantry: what has not been used yet.
    for (&e, &pos) in &lay.pantry {
        if st.entities[e].loc == Loc::Start {
            let size = if lay.pantry.len() > 5 { 0.12 } else { 0.14 };
            whole_item(p, &spec.entities[e], st.entities[e].tags, pos, size, st.entities[e].count);
        }
    }

    // Tools: resting ones small, the ones in use over their target, tilted.
    for (&t, &pos) in &lay.rest {
        let ts = &spec.props[t];
        if in_use.contains(&t) {
            let target = acts.iter().find(|a| a.tools.contains(&t)).map(|a| tool_target(&lay, st, a)).unwrap_or(pos);
            tool(p, &ts.kind, ts.colour, Frame::at([target[0] + 0.05, target[1] - 0.06], 0.24, -0.7));
        } else {
            tool(p, &ts.kind, ts.colour, Frame::at(pos, 0.11, 0.0));
        }
    }
}

/// Where a container is drawn now (its counter slot, burner or oven).
fn where_is(lay: &Layout, st: &WorldState, c: PropId) -> P {
    match st.props[c].on {
        Some(h) => lay.habitats.get(&h).copied().unwrap_or([0.5, 0.5]),
        None => lay.counter.get(&c).copied().unwrap_or([0.5, 0.5]),
    }
}

fn tool_target(lay: &Layout, st: &WorldState, a: &Action) -> P {
    match (a.container, a.dest) {
        (Some(c), _) => where_is(lay, st, c),
        (None, Some(d)) => where_is(lay, st, d),
        _ => a
            .patients
            .first()
            .and_then(|&e| match st.entities[e].loc {
                Loc::On(c) => Some(where_is(lay, st, c)),
                _ => None,
            })
            .unwrap_or([0.5, 0.5]),
    }
}

/// The colour an entity shows: its own, or for a blended mixture the mean of its members.
fn entity_colour(spec: &WorldSpec, st: &WorldState, e: EntityId) -> [u8; 3] {
    let es = &spec.entities[e];
    if es.role != EntityRole::Intermediate {
        return item_colour(es, st.entities[e].tags);
    }
    let members = st.members(e);
    if members.is_empty() {
        return [200, 190, 170];
    }
    let mut sum = [0f32; 3];
    for &m in &members {
        let c = entity_colour(spec, st, m);
        for k in 0..3 {
            sum[k] += c[k] as f32;
        }
    }
    let mut c = sum.map(|v| (v / members.len() as f32).round() as u8);
    let t = st.entities[e].tags;
    if t & tag::BAKED != 0 {
        c = lerp(c, [150, 90, 40], 0.55);
    } else if t & tag::HEATED != 0 {
        c = lerp(c, [150, 95, 45], 0.25);
    }
    c
}

/// Draw a container (all its copies) with its contents at `pos`.
fn container(p: &mut Painter, plan: &Plan, st: &WorldState, c: PropId, pos: P, scale: f32, tilt: f32) {
    let spec = &plan.spec;
    let ps = &spec.props[c];
    let copies = ps.count.clamp(1, 4) as usize;
    let upside_down = st.props[c].orientation == Orientation::UpsideDown;
    for k in 0..copies {
        let (cpos, s) = if copies > 1 {
            ([pos[0] + (k as f32 - (copies - 1) as f32 / 2.0) * 0.085, pos[1] + (k % 2) as f32 * 0.035], scale * 0.55)
        } else {
            (pos, scale)
        };
        let (rx, ry) = match ps.kind.as_str() {
            "board" => (0.15 * s, 0.1 * s),
            "small_bowl" | "jar" => (0.09 * s, 0.075 * s),
            "plate" | "plates" => (0.11 * s, 0.09 * s),
            _ => (0.125 * s, 0.1 * s),
        };
        p.shadow(cpos, rx, ry);
        let col = ps.colour;
        let inner = shade(col, -0.22);
        if upside_down {
            p.ellipse(cpos, rx, ry, tilt, shade(col, -0.1));
            p.ellipse([cpos[0], cpos[1] - ry * 0.1], rx * 0.7, ry * 0.6, tilt, shade(col, 0.1));
            continue;
        }
        let interior = match ps.kind.as_str() {
            "board" => {
                p.rrect(cpos, rx, ry, 0.012 * s, tilt, col);
                for i in 0..3 {
                    let y = cpos[1] - ry * 0.5 + ry * 0.5 * i as f32;
                    p.capsule([cpos[0] - rx * 0.85, y], [cpos[0] + rx * 0.85, y + 0.003], 0.0015, shade(col, -0.12));
                }
                p.circle([cpos[0] + rx * 0.8, cpos[1] - ry * 0.7], 0.008 * s, shade(col, -0.35));
                (cpos, rx * 0.8, ry * 0.75)
            }
            "pan" | "wok" => {
                let handle_end = [cpos[0] + rx * 2.0, cpos[1] + ry * 0.3];
                p.capsule([cpos[0] + rx * 0.8, cpos[1]], handle_end, 0.012 * s, [30, 30, 32]);
                p.ellipse(cpos, rx, ry, tilt, col);
                p.ellipse(cpos, rx * 0.85, ry * 0.85, tilt, shade(col, 0.12));
                (cpos, rx * 0.75, ry * 0.75)
            }
            "pot" => {
                p.rrect([cpos[0] - rx * 1.05, cpos[1]], 0.02 * s, 0.01 * s, 0.005, tilt, [60, 60, 64]);
                p.rrect([cpos[0] + rx * 1.05, cpos[1]], 0.02 * s, 0.01 * s, 0.005, tilt, [60, 60, 64]);
                p.ellipse(cpos, rx, ry, tilt, col);
                p.ellipse(cpos, rx * 0.88, ry * 0.88, tilt, shade(col, -0.35));
                (cpos, rx * 0.8, ry * 0.8)
            }
            "baking_dish" => {
                p.rrect(cpos, rx * 1.1, ry, 0.02 * s, tilt, col);
                p.rrect(cpos, rx * 0.95, ry * 0.82, 0.015 * s, tilt, inner);
                (cpos, rx * 0.88, ry * 0.75)
            }
            "plate" | "plates" => {
                p.ellipse(cpos, rx, ry, tilt, col);
                p.ellipse(cpos, rx * 0.7, ry * 0.7, tilt, shade(col, -0.06));
                (cpos, rx * 0.62, ry * 0.6)
            }
            _ => {
                p.ellipse(cpos, rx, ry, tilt, col);
                p.ellipse(cpos, rx * 0.86, ry * 0.84, tilt, inner);
                (cpos, rx * 0.78, ry * 0.74)
            }
        };
        if st.props[c].greased {
            p.shape_a(
                Shape::Ellipse {
                    c: [interior.0[0] - interior.1 * 0.3, interior.0[1] - interior.2 * 0.3],
                    rx: interior.1 * 0.35,
                    ry: interior.2 * 0.2,
                    rot: -0.4,
                },
                [255, 250, 220],
                0.35,
            );
        }
        contents(p, plan, st, c, interior, tilt != 0.0);
        let on_stove = st.props[c].on.is_some_and(|h| spec.props[h].kind == "stove");
        if on_stove && st.contents(c).iter().any(|&e| st.entities[e].tags & tag::HEATED != 0) {
            for i in 0..3 {
                let x = interior.0[0] + (i as f32 - 1.0) * interior.1 * 0.5;
                let y = interior.0[1] - interior.2 * 1.2;
                p.shape_a(Shape::Capsule { a: [x, y], b: [x + 0.008, y - 0.03], r: 0.003 }, [250, 250, 250], 0.5);
                p.shape_a(
                    Shape::Capsule { a: [x + 0.008, y - 0.03], b: [x - 0.004, y - 0.055], r: 0.003 },
                    [250, 250, 250],
                    0.4,
                );
            }
        }
    }
}

/// Draw what is in a container inside its interior ellipse: fills first (liquids, blends), then mounds of
/// powder, then pieces and whole items.
fn contents(p: &mut Painter, plan: &Plan, st: &WorldState, c: PropId, interior: (P, f32, f32), emptying: bool) {
    let spec = &plan.spec;
    let (ic, rx, ry) = interior;
    let items = st.contents(c);
    if emptying && items.is_empty() {
        return;
    }
    let board = spec.props[c].surface;
    let n = items.len().max(1) as f32;
    // Fills.
    for &e in &items {
        let es = &spec.entities[e];
        let t = st.entities[e].tags;
        if (es.role == EntityRole::Intermediate && es.blends) || es.shape == Form::Liquid {
            let col = entity_colour(spec, st, e);
            p.ellipse(ic, rx, ry, 0.0, col);
            if es.role == EntityRole::Intermediate {
                // Swirls of a blended mixture; a baked crust; cut lines once sliced.
                p.shape_a(
                    Shape::EllipseRing { c: ic, rx: rx * 0.55, ry: ry * 0.4, rot: 0.3, t: 0.003 },
                    shade(col, 0.2),
                    0.6,
                );
                if t & tag::BAKED != 0 {
                    pieces(p, shade(col, -0.25), ic, rx * 0.8, ry * 0.8, 14, 0.006, e as u64 + 7);
                }
                if t & tag::CHOPPED != 0 {
                    for k in [-0.5f32, 0.0, 0.5] {
                        p.capsule(
                            [ic[0] + k * rx, ic[1] - ry * 0.9],
                            [ic[0] + k * rx, ic[1] + ry * 0.9],
                            0.003,
                            shade(col, -0.4),
                        );
                    }
                    p.capsule([ic[0] - rx * 0.9, ic[1]], [ic[0] + rx * 0.9, ic[1]], 0.003, shade(col, -0.4));
                }
            } else {
                p.shape_a(
                    Shape::Ellipse { c: [ic[0] - rx * 0.35, ic[1] - ry * 0.35], rx: rx * 0.2, ry: ry * 0.12, rot: 0.0 },
                    [255, 255, 255],
                    0.35,
                );
            }
        }
    }
    // Mounds and pieces.
    for (i, &e) in items.iter().enumerate() {
        let es = &spec.entities[e];
        let t = st.entities[e].tags;
        let off = if n > 1.0 {
            let a = i as f32 / n * std::f32::consts::TAU;
            [ic[0] + a.cos() * rx * 0.4, ic[1] + a.sin() * ry * 0.4]
        } else {
            ic
        };
        if es.role == EntityRole::Intermediate {
            if !es.blends {
                // A tossed mixture keeps its pieces.
                for m in st.with_members(e).into_iter().skip(1) {
                    let ms = &spec.entities[m];
                    if ms.role == EntityRole::Intermediate || ms.shape == Form::Liquid {
                        continue;
                    }
                    pieces(
                        p,
                        item_colour(ms, st.entities[m].tags | (t & (tag::HEATED | tag::BAKED))),
                        ic,
                        rx * 0.85,
                        ry * 0.85,
                        16,
                        0.008,
                        m as u64 * 131 + e as u64,
                    );
                }
            }
            continue;
        }
        match es.shape {
            Form::Liquid => {}
            Form::Powder => {
                let col = item_colour(es, t);
                p.ellipse(off, rx * 0.45, ry * 0.4, 0.0, shade(col, -0.06));
                p.ellipse([off[0] - rx * 0.08, off[1] - ry * 0.08], rx * 0.25, ry * 0.2, 0.0, shade(col, 0.1));
            }
            _ if t & tag::CRACKED != 0 => {
                let k = st.entities[e].count.clamp(1, 4);
                for j in 0..k {
                    let a = j as f32 * 1.9 + i as f32;
                    let q = [off[0] + a.cos() * rx * 0.3, off[1] + a.sin() * ry * 0.3];
                    p.ellipse(
                        q,
                        rx * 0.28,
                        ry * 0.24,
                        a,
                        lerp([250, 250, 244], [200, 150, 90], if t & tag::HEATED != 0 { 0.3 } else { 0.0 }),
                    );
                    p.circle(q, rx * 0.11, item_colour(es, t));
                }
            }
            _ if t & tag::CHOPPED != 0 => {
                let col = item_colour(es, t);
                let (prx, pry) = if board { (rx * 0.45, ry * 0.45) } else { (rx * 0.8, ry * 0.8) };
                let centre = if board { board_spot(ic, rx, ry, i, items.len()) } else { ic };
                let k = (8 + 4 * st.entities[e].count as usize).min(26);
                pieces(p, col, centre, prx, pry, k, 0.0075, e as u64 * 97 + c as u64);
            }
            _ => {
                let centre = if board { board_spot(ic, rx, ry, i, items.len()) } else { off };
                whole_item(p, es, t, centre, rx * if board { 0.8 } else { 0.6 }, st.entities[e].count);
            }
        }
    }
}

fn board_spot(ic: P, rx: f32, ry: f32, i: usize, n: usize) -> P {
    if n <= 1 {
        return ic;
    }
    let cols = n.min(3);
    let x = ic[0] - rx * 0.55 + rx * 1.1 * (i % cols) as f32 / (cols - 1).max(1) as f32;
    let y = ic[1] + if i / cols == 0 { -ry * 0.3 } else { ry * 0.4 };
    [x, y]
}

use crate::model::Shape as Form;
