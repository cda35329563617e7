//! The assembly domain (furniture and a lamp): parts with their place in the finished object, workshop props,
//! and one build function per category.

use crate::builder::{Builder, PropKind, act};
use crate::cooking::title_case;
use crate::model::*;

pub const CATEGORIES: &[&str] = &["shelf", "stool", "table", "lamp", "cabinet"];

const METAL: &[[u8; 3]] = &[[165, 170, 178], [120, 124, 130]];
const HANDLE: &[[u8; 3]] = &[[200, 40, 40], [240, 190, 40], [40, 90, 190], [30, 30, 30]];
const CLOTH: &[[u8; 3]] = &[[225, 222, 210], [200, 210, 220]];
const BOXES: &[[u8; 3]] = &[[190, 150, 100], [175, 140, 95]];

/// Wood or laminate the parts are made of.
const MATERIALS: &[(&str, [u8; 3])] = &[
    ("pine", [226, 192, 140]),
    ("oak", [192, 142, 92]),
    ("walnut", [122, 82, 52]),
    ("white", [236, 236, 230]),
    ("birch", [236, 214, 172]),
];
const PAINTS: &[(&str, [u8; 3])] = &[
    ("blue", [50, 95, 180]),
    ("red", [190, 50, 45]),
    ("green", [60, 140, 80]),
    ("yellow", [235, 190, 50]),
    ("white", [245, 245, 245]),
    ("teal", [40, 150, 150]),
];

macro_rules! prop {
    ($name:ident, $kind:literal, $names:expr, $role:ident, $colours:expr) => {
        pub const $name: PropKind = PropKind { kind: $kind, names: $names, role: PropRole::$role, colours: $colours };
    };
}

prop!(SCREWDRIVER, "screwdriver", &["screwdriver", "Phillips screwdriver"], Tool, HANDLE);
prop!(ALLEN_KEY, "allen_key", &["Allen key", "hex key"], Tool, METAL);
prop!(HAMMER, "hammer", &["hammer", "mallet"], Tool, HANDLE);
prop!(WRENCH, "wrench", &["wrench", "spanner"], Tool, METAL);
prop!(SANDPAPER, "sandpaper", &["sandpaper", "sanding block"], Tool, &[[205, 170, 110]]);
prop!(PAINTBRUSH, "paintbrush", &["paintbrush", "brush"], Tool, HANDLE);
prop!(BOX, "box", &["box", "carton"], Container, BOXES);
prop!(TRAY, "tray", &["parts tray", "tray", "small dish"], Container, &[[235, 235, 235], [60, 60, 65]]);
prop!(DROP_CLOTH, "drop_cloth", &["drop cloth", "dust sheet"], Habitat, CLOTH);
prop!(SOCKET, "socket", &["wall socket", "outlet", "socket"], Habitat, &[[240, 240, 236]]);

struct Shop {
    wood: [u8; 3],
    paint: [u8; 3],
    paint_name: &'static str,
    material: &'static str,
}

fn part(
    b: &mut Builder,
    shop: &Shop,
    id: &str,
    names: &[(&str, &str)],
    shape: Shape,
    colour: Option<[u8; 3]>,
    rect: [f32; 4],
    joints: [[f32; 2]; 2],
    loc: Loc,
) -> EntityId {
    let spec = EntitySpec {
        id: id.to_string(),
        kind: id
            .trim_start_matches("left_")
            .trim_start_matches("right_")
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '_')
            .to_string(),
        names: names.iter().map(|(s, p)| (s.to_string(), p.to_string())).collect(),
        names_by_tag: Vec::new(),
        role: EntityRole::Part,
        colour: colour.unwrap_or(shop.wood),
        inner: shop.paint,
        shape,
        count: 1,
        quantity: format!("1 {}", names[0].0),
        needs_peeling: false,
        cut_verbs: Vec::new(),
        blends: false,
        geometry: Some(PartGeometry { rect, joints }),
    };
    b.entity(spec, loc)
}

fn consumable(b: &mut Builder, id: &str, names: (&str, &str), count: u32, tray: PropId) -> EntityId {
    let spec = EntitySpec {
        id: id.to_string(),
        kind: id.to_string(),
        names: vec![(names.0.to_string(), names.1.to_string())],
        names_by_tag: Vec::new(),
        role: EntityRole::Consumable,
        colour: [150, 150, 158],
        inner: [150, 150, 158],
        shape: Shape::Screw,
        count,
        quantity: format!("{count} {}", if count == 1 { names.0 } else { names.1 }),
        needs_peeling: false,
        cut_verbs: Vec::new(),
        blends: false,
        geometry: None,
    };
    b.entity(spec, Loc::On(tray))
}

fn assembly(b: &mut Builder, id: &str, names: &[&str]) -> EntityId {
    let first = *b.pick(names);
    let mut all = vec![(first.to_string(), first.to_string())];
    all.extend(names.iter().filter(|n| **n != first).map(|n| (n.to_string(), n.to_string())));
    let spec = EntitySpec {
        id: id.to_string(),
        kind: "assembly".into(),
        names: all,
        names_by_tag: Vec::new(),
        role: EntityRole::Intermediate,
        colour: [0; 3],
        inner: [0; 3],
        shape: Shape::Composite,
        count: 1,
        quantity: String::new(),
        needs_peeling: false,
        cut_verbs: Vec::new(),
        blends: false,
        geometry: None,
    };
    b.entity(spec, Loc::Absent)
}

/// Build one assembly procedure of `category`; returns its goal phrase and title.
pub fn build(b: &mut Builder, category: &str) -> (String, String) {
    let (material, wood) = *b.pick(MATERIALS);
    let (paint_name, paint) = *b.pick(PAINTS);
    let shop = Shop { wood, paint, paint_name, material };
    match category {
        "shelf" => shelf(b, &shop),
        "stool" => stool(b, &shop),
        "table" => table(b, &shop),
        "lamp" => lamp(b, &shop),
        _ => cabinet(b, &shop),
    }
}

/// Where parts start: in the box (and an unpack step) or already laid out.
fn start_place(b: &mut Builder) -> (Loc, Option<PropId>) {
    if b.chance(0.35) {
        let bx = b.prop(&BOX);
        (Loc::On(bx), Some(bx))
    } else {
        (Loc::Start, None)
    }
}

fn unpack(b: &mut Builder, bx: Option<PropId>, parts: &[EntityId]) {
    if let Some(bx) = bx {
        b.act(act(Verb::Unpack).on_all(parts).inside(bx));
    }
}

/// Optional finishing of single parts before assembly: sanding, painting.
fn finish_parts(b: &mut Builder, parts: &[EntityId]) -> bool {
    let mut painted = false;
    if b.chance(0.3) {
        let k = b.range(1, parts.len().min(3) as u32) as usize;
        let chosen = b.sample(parts, k);
        let paper = b.prop(&SANDPAPER);
        let brush_too = b.chance(0.4);
        for &p in &chosen {
            b.act(act(Verb::Sand).on(p).tool(paper));
        }
        if brush_too {
            let brush = b.prop(&PAINTBRUSH);
            let cloth = b.prop(&DROP_CLOTH);
            for &p in &chosen {
                b.act(act(Verb::Paint).on(p).tool(brush).at(cloth));
            }
            painted = true;
        }
    }
    painted
}

/// Attach parts to `group` and fasten each, either pairwise (attach, fasten, attach, fasten...) or attaching all
/// first. Returns the screws each fasten uses.
fn attach_and_fasten(
    b: &mut Builder,
    group: EntityId,
    parts: &[EntityId],
    base: Option<EntityId>,
    tool: PropId,
    driver: PropId,
    screws: EntityId,
    per: u32,
    orientation: Option<Orientation>,
    install: bool,
) {
    let pairwise = b.chance(0.5);
    let verb = if install { Verb::Install } else { Verb::Attach };
    let mut pending = Vec::new();
    for (i, &p) in parts.iter().enumerate() {
        let mut a = act(verb).on(p).making(group).tool(tool);
        if i == 0
            && let Some(q) = base
        {
            a = a.based_on(q);
        }
        if let Some(o) = orientation {
            a = a.oriented(o);
        }
        b.act(a);
        if pairwise {
            b.act(act(Verb::Fasten).on(p).tool(driver).using_up(screws, per));
        } else {
            pending.push(p);
        }
    }
    for p in pending {
        b.act(act(Verb::Fasten).on(p).tool(driver).using_up(screws, per));
    }
}

/// Paint the whole assembly at the end (when no part was painted before).
fn maybe_paint_all(b: &mut Builder, group: EntityId, already: bool) {
    if !already && b.chance(0.3) {
        let brush = b.prop(&PAINTBRUSH);
        let cloth = b.prop(&DROP_CLOTH);
        b.act(act(Verb::Paint).on(group).tool(brush).at(cloth));
    }
}

fn screws_for(b: &mut Builder, tray: PropId, fastens: u32, per: u32) -> EntityId {
    let spare = b.range(0, 4);
    let (id, names) = if b.chance(0.5) { ("screws", ("screw", "screws")) } else { ("bolts", ("bolt", "bolts")) };
    consumable(b, id, names, fastens * per + spare, tray)
}

fn count_step(b: &mut Builder, screws: EntityId, tray: PropId) {
    if b.chance(0.3) {
        b.act(act(Verb::Count).using_up(screws, 0).inside(tray));
    }
}

fn shelf(b: &mut Builder, shop: &Shop) -> (String, String) {
    let (loc, bx) = start_place(b);
    let k = b.range(1, 3);
    let with_back = b.chance(0.6);
    let left = part(
        b,
        shop,
        "left_side_panel",
        &[("left side panel", "left side panels"), ("left side", "left sides")],
        Shape::Panel,
        None,
        [-0.3, 0.0, 0.05, 0.9],
        [[-0.3, -0.42], [-0.3, 0.42]],
        loc,
    );
    let right = part(
        b,
        shop,
        "right_side_panel",
        &[("right side panel", "right side panels"), ("right side", "right sides")],
        Shape::Panel,
        None,
        [0.3, 0.0, 0.05, 0.9],
        [[0.3, -0.42], [0.3, 0.42]],
        loc,
    );
    let bottom = part(
        b,
        shop,
        "bottom_panel",
        &[("bottom panel", "bottom panels"), ("base board", "base boards")],
        Shape::Panel,
        None,
        [0.0, 0.425, 0.55, 0.04],
        [[-0.27, 0.425], [0.27, 0.425]],
        loc,
    );
    let top = part(
        b,
        shop,
        "top_panel",
        &[("top panel", "top panels"), ("top board", "top boards")],
        Shape::Panel,
        None,
        [0.0, -0.425, 0.55, 0.04],
        [[-0.27, -0.425], [0.27, -0.425]],
        loc,
    );
    let mut shelves = Vec::new();
    // Spatial names, not ordinals: a name must not tell when the part goes on.
    let spatial: &[&str] = match k {
        1 => &["middle"],
        2 => &["upper", "lower"],
        _ => &["upper", "middle", "lower"],
    };
    for i in 0..k {
        let y = -0.425 + 0.85 * (i + 1) as f32 / (k + 1) as f32;
        let name = if k == 1 {
            ("shelf".to_string(), "shelves".to_string())
        } else {
            (format!("{} shelf", spatial[i as usize]), "shelves".to_string())
        };
        let s = part(
            b,
            shop,
            &format!("shelf_{}", i + 1),
            &[(name.0.as_str(), name.1.as_str())],
            Shape::Panel,
            None,
            [0.0, y, 0.55, 0.03],
            [[-0.27, y], [0.27, y]],
            loc,
        );
        shelves.push(s);
    }
    let back = if with_back {
        Some(part(
            b,
            shop,
            "back_panel",
            &[("back panel", "back panels"), ("backboard", "backboards")],
            Shape::Panel,
            Some(crate::builder::shade(shop.wood, 0.25)),
            [0.0, 0.0, 0.6, 0.9],
            [[-0.28, -0.43], [0.28, 0.43]],
            loc,
        ))
    } else {
        None
    };
    let frame = assembly(b, "frame", &["frame", "carcass", "bookcase"]);
    let tray = b.prop(&TRAY);
    let tool = if b.chance(0.5) { b.prop(&ALLEN_KEY) } else { b.prop(&SCREWDRIVER) };
    let mut attached = vec![bottom, top];
    attached.extend(&shelves);
    b.shuffle(&mut attached);
    attached.push(right);
    let screws = screws_for(b, tray, attached.len() as u32, 2);
    let mut all = vec![left, right, bottom, top];
    all.extend(&shelves);
    all.extend(back);
    unpack(b, bx, &all);
    count_step(b, screws, tray);
    let painted = finish_parts(b, &all);
    attach_and_fasten(b, frame, &attached, Some(left), tool, tool, screws, 2, None, false);
    if let Some(bk) = back {
        let hammer = b.prop(&HAMMER);
        let v = b.range(4, 8);
        let nails = consumable(b, "nails", ("nail", "nails"), v, tray);
        let n = b.entities[nails].count;
        b.act(act(Verb::Flip).on(frame).oriented(Orientation::UpsideDown));
        b.act(act(Verb::Attach).on(bk).making(frame).oriented(Orientation::UpsideDown));
        b.act(act(Verb::Fasten).on(bk).tool(hammer).using_up(nails, n));
        b.act(act(Verb::Flip).on(frame).oriented(Orientation::Upright));
    }
    maybe_paint_all(b, frame, painted);
    let what = if k >= 2 { "bookcase" } else { "shelf" };
    (
        format!(
            "{} {} {what} with {k} shelf board{}",
            crate::text::article(shop.material),
            shop.material,
            if k == 1 { "" } else { "s" }
        ),
        format!("{} {}", title_case(shop.material), title_case(what)),
    )
}

fn stool(b: &mut Builder, shop: &Shop) -> (String, String) {
    let (loc, bx) = start_place(b);
    let n_legs = b.range(3, 4);
    let seat = part(
        b,
        shop,
        "seat",
        &[("seat", "seats"), ("seat board", "seat boards")],
        Shape::Disc,
        None,
        [0.0, -0.38, 0.8, 0.09],
        [[-0.3, -0.34], [0.3, -0.34]],
        loc,
    );
    let xs: &[f32] = if n_legs == 3 { &[-0.3, 0.0, 0.3] } else { &[-0.33, -0.11, 0.11, 0.33] };
    let mut legs = Vec::new();
    for (i, &x) in xs.iter().enumerate() {
        let names: &[&str] = if n_legs == 3 {
            &["left", "middle", "right"]
        } else {
            &["front left", "back left", "back right", "front right"]
        };
        let name = format!("{} leg", names[i]);
        let l = part(
            b,
            shop,
            &format!("leg_{}", i + 1),
            &[(name.as_str(), "legs")],
            Shape::Rod,
            None,
            [x, 0.06, 0.06, 0.8],
            [[x, -0.33], [x, -0.33]],
            loc,
        );
        legs.push(l);
    }
    let rungs = if b.chance(0.5) { b.range(1, 2) } else { 0 };
    let mut rung_ids = Vec::new();
    for i in 0..rungs {
        let y = 0.2 - 0.14 * i as f32;
        let names: &[(&str, &str)] = if rungs == 1 {
            &[("rung", "rungs"), ("crossbar", "crossbars")]
        } else if i == 0 {
            &[("lower rung", "rungs"), ("lower crossbar", "crossbars")]
        } else {
            &[("upper rung", "rungs"), ("upper crossbar", "crossbars")]
        };
        let r = part(
            b,
            shop,
            &format!("rung_{}", i + 1),
            names,
            Shape::Rod,
            None,
            [0.0, y, 0.66, 0.035],
            [[-0.3, y], [0.3, y]],
            loc,
        );
        rung_ids.push(r);
    }
    let stool = assembly(b, "stool", &["stool", "stool frame"]);
    let tray = b.prop(&TRAY);
    let tool = if b.chance(0.5) { b.prop(&ALLEN_KEY) } else { b.prop(&SCREWDRIVER) };
    let per = b.range(1, 2);
    let screws = screws_for(b, tray, (legs.len() + rung_ids.len()) as u32, per);
    let mut all = vec![seat];
    all.extend(&legs);
    all.extend(&rung_ids);
    unpack(b, bx, &all);
    count_step(b, screws, tray);
    let painted = finish_parts(b, &all);
    b.act(act(Verb::Flip).on(seat).oriented(Orientation::UpsideDown));
    let mut legs = legs;
    b.shuffle(&mut legs);
    attach_and_fasten(b, stool, &legs, Some(seat), tool, tool, screws, per, Some(Orientation::UpsideDown), false);
    if !rung_ids.is_empty() {
        attach_and_fasten(b, stool, &rung_ids, None, tool, tool, screws, per, Some(Orientation::UpsideDown), false);
    }
    b.act(act(Verb::Flip).on(stool).oriented(Orientation::Upright));
    maybe_paint_all(b, stool, painted);
    (format!("a {n_legs}-legged {} stool", shop.material), format!("{} Stool", title_case(shop.material)))
}

fn table(b: &mut Builder, shop: &Shop) -> (String, String) {
    let (loc, bx) = start_place(b);
    let top = part(
        b,
        shop,
        "table_top",
        &[("table top", "table tops"), ("tabletop", "tabletops")],
        Shape::Panel,
        None,
        [0.0, -0.33, 1.0, 0.07],
        [[-0.4, -0.3], [0.4, -0.3]],
        loc,
    );
    let apron = part(
        b,
        shop,
        "apron",
        &[("apron rail", "apron rails"), ("apron", "aprons")],
        Shape::Rod,
        Some(crate::builder::shade(shop.wood, -0.15)),
        [0.0, -0.26, 0.8, 0.06],
        [[-0.36, -0.26], [0.36, -0.26]],
        loc,
    );
    let mut legs = Vec::new();
    let names = ["front left leg", "back left leg", "back right leg", "front right leg"];
    for (i, &x) in [-0.44f32, -0.3, 0.3, 0.44].iter().enumerate() {
        let l = part(
            b,
            shop,
            &format!("leg_{}", i + 1),
            &[(names[i], "legs")],
            Shape::Rod,
            None,
            [x, 0.07, 0.07, 0.74],
            [[x, -0.28], [x, -0.28]],
            loc,
        );
        legs.push(l);
    }
    let table = assembly(b, "table", &["table", "table frame"]);
    let tray = b.prop(&TRAY);
    let tool = if b.chance(0.5) { b.prop(&WRENCH) } else { b.prop(&SCREWDRIVER) };
    let screws = screws_for(b, tray, 5, 2);
    let mut all = vec![top, apron];
    all.extend(&legs);
    unpack(b, bx, &all);
    count_step(b, screws, tray);
    let painted = finish_parts(b, &all);
    b.act(act(Verb::Flip).on(top).oriented(Orientation::UpsideDown));
    let mut attached = legs.clone();
    b.shuffle(&mut attached);
    attached.insert(b.range(0, 4) as usize, apron);
    attach_and_fasten(b, table, &attached, Some(top), tool, tool, screws, 2, Some(Orientation::UpsideDown), false);
    b.act(act(Verb::Flip).on(table).oriented(Orientation::Upright));
    maybe_paint_all(b, table, painted);
    (
        format!("{} {} table", crate::text::article(shop.material), shop.material),
        format!("{} Table", title_case(shop.material)),
    )
}

fn lamp(b: &mut Builder, shop: &Shop) -> (String, String) {
    let (loc, bx) = start_place(b);
    let shade_colour = *b.pick(&[[240, 230, 200], [200, 60, 60], [70, 120, 180], [90, 160, 110], [250, 250, 245]]);
    let base = part(
        b,
        shop,
        "lamp_base",
        &[("base", "bases"), ("lamp base", "lamp bases")],
        Shape::Disc,
        None,
        [0.0, 0.42, 0.5, 0.1],
        [[0.0, 0.38], [0.0, 0.38]],
        loc,
    );
    let stem = part(
        b,
        shop,
        "stem",
        &[("stem", "stems"), ("pole", "poles")],
        Shape::Rod,
        Some([175, 178, 185]),
        [0.0, 0.02, 0.05, 0.72],
        [[0.0, 0.37], [0.0, 0.37]],
        loc,
    );
    let cable = part(
        b,
        shop,
        "cable",
        &[("cable", "cables"), ("power cord", "power cords")],
        Shape::Rod,
        Some([35, 35, 38]),
        [0.36, 0.45, 0.42, 0.02],
        [[0.16, 0.45], [0.16, 0.45]],
        loc,
    );
    let bulb = part(
        b,
        shop,
        "bulb",
        &[("bulb", "bulbs"), ("light bulb", "light bulbs")],
        Shape::Bulb,
        Some([235, 235, 225]),
        [0.0, -0.3, 0.13, 0.16],
        [[0.0, -0.22], [0.0, -0.22]],
        loc,
    );
    let shade = part(
        b,
        shop,
        "shade",
        &[("shade", "shades"), ("lampshade", "lampshades")],
        Shape::Cone,
        Some(shade_colour),
        [0.0, -0.33, 0.5, 0.3],
        [[0.0, -0.2], [0.0, -0.2]],
        loc,
    );
    let lamp = assembly(b, "lamp", &["lamp", "lamp body"]);
    let tray = b.prop(&TRAY);
    let wrench = b.prop(&WRENCH);
    let nut = consumable(b, "nut", ("nut", "nuts"), 1, tray);
    let all = vec![base, stem, cable, bulb, shade];
    unpack(b, bx, &all);
    finish_parts(b, &[base]);
    b.act(act(Verb::Attach).on(stem).making(lamp).based_on(base));
    b.act(act(Verb::Fasten).on(stem).tool(wrench).using_up(nut, 1));
    b.act(act(Verb::Install).on(cable).making(lamp));
    let mut tops = vec![bulb, shade];
    if b.chance(0.4) {
        tops.reverse();
    }
    for p in tops {
        b.act(act(Verb::Install).on(p).making(lamp));
    }
    if b.chance(0.7) {
        let socket = b.prop(&SOCKET);
        b.act(act(Verb::PlugIn).on(lamp).at(socket));
    }
    (
        format!("a table lamp with {} {} base", crate::text::article(shop.material), shop.material),
        format!("{} Table Lamp", title_case(shop.material)),
    )
}

fn cabinet(b: &mut Builder, shop: &Shop) -> (String, String) {
    let (loc, bx) = start_place(b);
    let left = part(
        b,
        shop,
        "left_side_panel",
        &[("left side panel", "left side panels"), ("left side", "left sides")],
        Shape::Panel,
        None,
        [-0.3, 0.0, 0.05, 0.9],
        [[-0.3, -0.42], [-0.3, 0.42]],
        loc,
    );
    let right = part(
        b,
        shop,
        "right_side_panel",
        &[("right side panel", "right side panels"), ("right side", "right sides")],
        Shape::Panel,
        None,
        [0.3, 0.0, 0.05, 0.9],
        [[0.3, -0.42], [0.3, 0.42]],
        loc,
    );
    let bottom = part(
        b,
        shop,
        "bottom_panel",
        &[("bottom panel", "bottom panels"), ("base board", "base boards")],
        Shape::Panel,
        None,
        [0.0, 0.425, 0.55, 0.04],
        [[-0.27, 0.425], [0.27, 0.425]],
        loc,
    );
    let top = part(
        b,
        shop,
        "top_panel",
        &[("top panel", "top panels"), ("top board", "top boards")],
        Shape::Panel,
        None,
        [0.0, -0.425, 0.55, 0.04],
        [[-0.27, -0.425], [0.27, -0.425]],
        loc,
    );
    let door = part(
        b,
        shop,
        "door",
        &[("door", "doors"), ("door panel", "door panels")],
        Shape::Panel,
        Some(crate::builder::shade(shop.wood, 0.1)),
        [0.0, 0.0, 0.54, 0.8],
        [[-0.26, -0.3], [-0.26, 0.3]],
        loc,
    );
    let h1 = part(
        b,
        shop,
        "hinge_1",
        &[("upper hinge", "upper hinges"), ("top hinge", "top hinges")],
        Shape::Panel,
        Some([150, 150, 158]),
        [-0.255, -0.3, 0.04, 0.08],
        [[-0.255, -0.3], [-0.255, -0.3]],
        loc,
    );
    let h2 = part(
        b,
        shop,
        "hinge_2",
        &[("lower hinge", "lower hinges"), ("bottom hinge", "bottom hinges")],
        Shape::Panel,
        Some([150, 150, 158]),
        [-0.255, 0.3, 0.04, 0.08],
        [[-0.255, 0.3], [-0.255, 0.3]],
        loc,
    );
    let knob = part(
        b,
        shop,
        "knob",
        &[("knob", "knobs"), ("handle", "handles")],
        Shape::Disc,
        Some([60, 60, 66]),
        [0.2, 0.0, 0.05, 0.05],
        [[0.2, 0.0], [0.2, 0.0]],
        loc,
    );
    let carcass = assembly(b, "carcass", &["carcass", "cabinet body", "cabinet"]);
    let door_asm = assembly(b, "door_assembly", &["door assembly", "door"]);
    let tray = b.prop(&TRAY);
    let driver = b.prop(&SCREWDRIVER);
    let tool = if b.chance(0.5) { b.prop(&ALLEN_KEY) } else { driver };
    let screws = screws_for(b, tray, 7, 2);
    let all = vec![left, right, bottom, top, door, h1, h2, knob];
    unpack(b, bx, &all);
    count_step(b, screws, tray);
    let painted = finish_parts(b, &[left, right, top, door]);
    let door_first = b.chance(0.4);
    let build_door = |b: &mut Builder| {
        attach_and_fasten(b, door_asm, &[h1, h2], Some(door), driver, driver, screws, 2, None, true);
        b.act(act(Verb::Install).on(knob).making(door_asm).tool(driver));
        b.act(act(Verb::Fasten).on(knob).tool(driver).using_up(screws, 2));
    };
    if door_first {
        build_door(b);
    }
    attach_and_fasten(b, carcass, &[bottom, top, right], Some(left), tool, tool, screws, 2, None, false);
    if !door_first {
        build_door(b);
    }
    b.act(act(Verb::Attach).on(door_asm).making(carcass).tool(driver));
    b.act(act(Verb::Fasten).on(door_asm).tool(driver).using_up(screws, 2));
    maybe_paint_all(b, carcass, painted);
    let colour = if painted { format!("{} and {}", shop.material, shop.paint_name) } else { shop.material.to_string() };
    (
        format!("{} {colour} cabinet with one door", crate::text::article(&colour)),
        format!("{} Cabinet", title_case(shop.material)),
    )
}
