//! The world model: entities (ingredients, parts, intermediates), props (tools, containers, habitats), the state
//! of both, and actions with preconditions and effects.
//!
//! [`apply`] executes one action on a [`WorldState`]: it checks the preconditions, applies the effects and
//! returns the action's *accesses* — which state variables it reads, overwrites, or adds to. Two actions
//! conflict when they touch the same variable and are not both reads or both commutative additions (two
//! ingredients added to one bowl commute; adding after mixing does not). The plan's dependency DAG keeps
//! exactly the conflicting pairs in their canonical order, so every linear extension runs without a failed
//! precondition and reaches the same final state (a test re-simulates sampled orders to check this).

use serde::{Deserialize, Serialize};

pub type EntityId = usize;
pub type PropId = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Domain {
    Cooking,
    Assembly,
}

impl Domain {
    pub fn as_str(self) -> &'static str {
        match self {
            Domain::Cooking => "cooking",
            Domain::Assembly => "assembly",
        }
    }

    pub fn parse(s: &str) -> Option<Domain> {
        match s {
            "cooking" => Some(Domain::Cooking),
            "assembly" => Some(Domain::Assembly),
            _ => None,
        }
    }

    /// Name of the place where unused items wait: the pantry shelf or the bench's parts area.
    pub fn start_place(self) -> &'static str {
        match self {
            Domain::Cooking => "pantry",
            Domain::Assembly => "bench",
        }
    }
}

/// What a prop is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PropRole {
    Tool,
    Container,
    Habitat,
}

/// How a prop or an assembly is oriented. Tools lie `upright` (their rest pose) and are `tilted` while in use;
/// a container is `tilted` while it is poured from and `upside_down` once turned out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Orientation {
    Upright,
    Tilted,
    UpsideDown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityRole {
    Ingredient,
    Part,
    /// Counted supplies used up by actions (screws).
    Consumable,
    /// Made during the procedure: a mixture ("the batter") or an assembly ("the frame").
    Intermediate,
}

/// The drawn shape of an entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    Round,
    Oval,
    Long,
    Leaf,
    Block,
    Powder,
    Liquid,
    Small,
    Panel,
    Rod,
    Disc,
    Cone,
    Bulb,
    Screw,
    /// An intermediate drawn from its members.
    Composite,
}

/// State tags of an entity (a bit set). The label of a state lists its tags in this order, joined by `+`.
pub mod tag {
    pub const PEELED: u16 = 1;
    pub const CHOPPED: u16 = 1 << 1;
    pub const CRACKED: u16 = 1 << 2;
    pub const MIXED: u16 = 1 << 3;
    pub const HEATED: u16 = 1 << 4;
    pub const BAKED: u16 = 1 << 5;
    pub const SANDED: u16 = 1 << 6;
    pub const PAINTED: u16 = 1 << 7;
    pub const ATTACHED: u16 = 1 << 8;
    pub const FASTENED: u16 = 1 << 9;
    pub const LIT: u16 = 1 << 10;

    pub const NAMES: [(u16, &str); 11] = [
        (PEELED, "peeled"),
        (CHOPPED, "chopped"),
        (CRACKED, "cracked"),
        (MIXED, "mixed"),
        (HEATED, "heated"),
        (BAKED, "baked"),
        (SANDED, "sanded"),
        (PAINTED, "painted"),
        (ATTACHED, "attached"),
        (FASTENED, "fastened"),
        (LIT, "lit"),
    ];
}

/// Where an entity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loc {
    /// Not made yet (intermediates before their first action).
    Absent,
    /// The start area: pantry shelf (cooking) or the bench's parts area (assembly).
    Start,
    /// On or in a prop (a bowl, the cutting board, the parts box...).
    On(PropId),
    /// Part of an intermediate (a mixture or an assembly).
    In(EntityId),
}

/// An assembly part's place in the finished object (assembly coordinates: the object spans about [-0.5, 0.5]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartGeometry {
    /// Centre x, centre y, width, height.
    pub rect: [f32; 4],
    /// Where it is screwed to the rest (assembly coordinates).
    pub joints: [[f32; 2]; 2],
}

/// A thing the procedure acts on.
#[derive(Debug, Clone, PartialEq)]
pub struct EntitySpec {
    /// Unique readable id, e.g. `carrot`, `left_side_panel`, `batter`.
    pub id: String,
    /// Catalogue kind, e.g. `carrot`, `side_panel`, `mixture`.
    pub kind: String,
    /// Surface names `(singular, plural)`; the first is canonical.
    pub names: Vec<(String, String)>,
    /// Names an intermediate takes once it carries a tag (e.g. the batter becomes "the cake" when baked).
    pub names_by_tag: Vec<(u16, String)>,
    pub role: EntityRole,
    pub colour: [u8; 3],
    /// Colour inside (peeled or cut) or, for parts, the paint colour.
    pub inner: [u8; 3],
    pub shape: Shape,
    pub count: u32,
    /// The quantity as a recipe writes it ("2 cups of flour", "3 eggs", "12 screws").
    pub quantity: String,
    pub needs_peeling: bool,
    /// Verbs for cutting it ("dice", "slice", "grate").
    pub cut_verbs: Vec<&'static str>,
    /// Intermediates that blend into one colour (batter) rather than keep their pieces (salad).
    pub blends: bool,
    pub geometry: Option<PartGeometry>,
}

impl EntitySpec {
    pub fn name(&self) -> &str {
        &self.names[0].0
    }

    /// The canonical name as the procedure would say it now: the plural when there are several.
    pub fn noun(&self) -> &str {
        if self.count > 1 { &self.names[0].1 } else { &self.names[0].0 }
    }

    /// The name for a given set of tags (intermediates change name: batter -> cake).
    pub fn name_for(&self, tags: u16) -> &str {
        let mut name = self.noun();
        for (t, n) in &self.names_by_tag {
            if tags & t != 0 {
                name = n;
            }
        }
        name
    }
}

/// A tool, container or habitat.
#[derive(Debug, Clone, PartialEq)]
pub struct PropSpec {
    pub id: String,
    pub kind: String,
    pub names: Vec<String>,
    pub role: PropRole,
    pub count: u32,
    pub colour: [u8; 3],
    /// A preparation surface (the cutting board): what lies on it is not its "contents".
    pub surface: bool,
    /// Must be greased before anything is poured in.
    pub needs_greasing: bool,
}

impl PropSpec {
    pub fn name(&self) -> &str {
        &self.names[0]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntState {
    pub tags: u16,
    pub loc: Loc,
    pub count: u32,
    pub orientation: Orientation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropState {
    /// The habitat it stands on or in (stove, oven, fridge), if any.
    pub on: Option<PropId>,
    pub hot: bool,
    pub greased: bool,
    pub orientation: Orientation,
}

/// The state of every entity and prop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldState {
    pub entities: Vec<EntState>,
    pub props: Vec<PropState>,
}

impl WorldState {
    /// Entities directly on or in prop `p`, by id.
    pub fn contents(&self, p: PropId) -> Vec<EntityId> {
        (0..self.entities.len()).filter(|&e| self.entities[e].loc == Loc::On(p)).collect()
    }

    /// Entities that are direct members of intermediate `e`.
    pub fn members(&self, e: EntityId) -> Vec<EntityId> {
        (0..self.entities.len()).filter(|&m| self.entities[m].loc == Loc::In(e)).collect()
    }

    /// `e` and, recursively, its members.
    pub fn with_members(&self, e: EntityId) -> Vec<EntityId> {
        let mut out = vec![e];
        let mut i = 0;
        while i < out.len() {
            let m = self.members(out[i]);
            out.extend(m);
            i += 1;
        }
        out
    }

    pub fn present(&self, e: EntityId) -> bool {
        self.entities[e].loc != Loc::Absent
    }

    /// The top-level entity holding `e` (itself when it is not part of anything).
    pub fn top(&self, mut e: EntityId) -> EntityId {
        while let Loc::In(g) = self.entities[e].loc {
            e = g;
        }
        e
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    // cooking
    Peel,
    Chop,
    Add,
    Mix,
    Pour,
    Heat,
    Bake,
    Preheat,
    Grease,
    Chill,
    Invert,
    Serve,
    // assembly
    Unpack,
    Count,
    Sand,
    Paint,
    Attach,
    Install,
    Fasten,
    Flip,
    PlugIn,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Peel => "peel",
            Verb::Chop => "chop",
            Verb::Add => "add",
            Verb::Mix => "mix",
            Verb::Pour => "pour",
            Verb::Heat => "heat",
            Verb::Bake => "bake",
            Verb::Preheat => "preheat",
            Verb::Grease => "grease",
            Verb::Chill => "chill",
            Verb::Invert => "invert",
            Verb::Serve => "serve",
            Verb::Unpack => "unpack",
            Verb::Count => "count",
            Verb::Sand => "sand",
            Verb::Paint => "paint",
            Verb::Attach => "attach",
            Verb::Install => "install",
            Verb::Fasten => "fasten",
            Verb::Flip => "flip",
            Verb::PlugIn => "plug_in",
        }
    }
}

/// One action with its arguments. Which fields matter depends on the verb (see [`apply`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Action {
    pub verb: Option<Verb>,
    /// What is acted on (ingredients, parts, an assembly).
    pub patients: Vec<EntityId>,
    pub tools: Vec<PropId>,
    /// Where it happens or comes from (the board, the bowl being mixed or poured from).
    pub container: Option<PropId>,
    /// Where things go (the bowl added to, the dish poured into, the plates).
    pub dest: Option<PropId>,
    pub habitat: Option<PropId>,
    /// The intermediate made or joined (the batter; the frame).
    pub result: Option<EntityId>,
    /// For the first attach of an assembly: the part it is built on.
    pub base: Option<EntityId>,
    /// Required (attach) or resulting (flip) orientation of the assembly.
    pub orientation: Option<Orientation>,
    /// A consumable used up, and how many.
    pub consumes: Option<(EntityId, u32)>,
    /// Free detail for the text (minutes, temperature).
    pub detail: Option<String>,
}

impl Action {
    pub fn verb(&self) -> Verb {
        self.verb.expect("actions are built with a verb")
    }
}

/// A state variable an action touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Var {
    Entity(EntityId),
    Contents(PropId),
    Prop(PropId),
    Members(EntityId),
    Supply(EntityId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Read,
    /// A commutative addition (put into a container, join an assembly, use up supplies).
    Add,
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub var: Var,
    pub mode: Mode,
}

/// True when the two access lists must keep their relative order.
pub fn conflicts(a: &[Access], b: &[Access]) -> bool {
    a.iter().any(|x| {
        b.iter()
            .any(|y| x.var == y.var && !matches!((x.mode, y.mode), (Mode::Read, Mode::Read) | (Mode::Add, Mode::Add)))
    })
}

/// The fixed part of a world: what exists.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldSpec {
    pub domain: Domain,
    pub entities: Vec<EntitySpec>,
    pub props: Vec<PropSpec>,
}

/// Execute `action` on `state`. Returns its accesses, or the failed precondition.
pub fn apply(spec: &WorldSpec, state: &mut WorldState, action: &Action) -> Result<Vec<Access>, String> {
    use Mode::*;
    let mut acc: Vec<Access> = Vec::new();
    let mut touch = |var: Var, mode: Mode| acc.push(Access { var, mode });
    let ename = |e: EntityId| spec.entities[e].id.clone();
    let need = |ok: bool, msg: String| if ok { Ok(()) } else { Err(msg) };
    let verb = action.verb();
    let one = |what: &str| -> Result<EntityId, String> {
        action.patients.first().copied().ok_or_else(|| format!("{}: no {what}", verb.as_str()))
    };
    let prop = |p: Option<PropId>, what: &str| p.ok_or_else(|| format!("{}: no {what}", verb.as_str()));
    for &t in &action.tools {
        touch(Var::Prop(t), Read);
    }
    match verb {
        Verb::Peel | Verb::Chop => {
            let e = one("patient")?;
            let s = state.entities[e];
            need(s.loc != Loc::Absent && !matches!(s.loc, Loc::In(_)), format!("{} is not at hand", ename(e)))?;
            if verb == Verb::Peel {
                need(
                    spec.entities[e].needs_peeling && s.tags & (tag::PEELED | tag::CHOPPED) == 0,
                    format!("{} cannot be peeled", ename(e)),
                )?;
                state.entities[e].tags |= tag::PEELED;
            } else {
                need(s.tags & tag::CHOPPED == 0, format!("{} is already cut", ename(e)))?;
                need(
                    !spec.entities[e].needs_peeling || s.tags & tag::PEELED != 0,
                    format!("{} must be peeled first", ename(e)),
                )?;
                state.entities[e].tags |= tag::CHOPPED;
            }
            if s.loc == Loc::Start {
                state.entities[e].loc = Loc::On(prop(action.container, "board")?);
            }
            touch(Var::Entity(e), Write);
        }
        Verb::Add => {
            let c = prop(action.dest, "destination")?;
            need(!action.patients.is_empty(), "add: nothing to add".into())?;
            for &e in &action.patients {
                let s = state.entities[e];
                let from_surface = match s.loc {
                    Loc::Start => true,
                    Loc::On(p) => spec.props[p].surface,
                    _ => false,
                };
                need(from_surface, format!("{} is not on the shelf or the board", ename(e)))?;
                state.entities[e].loc = Loc::On(c);
                if spec.entities[e].kind == "egg" {
                    state.entities[e].tags |= tag::CRACKED;
                }
                touch(Var::Entity(e), Write);
            }
            touch(Var::Contents(c), Add);
        }
        Verb::Mix => {
            let c = prop(action.container, "container")?;
            let r = action.result.ok_or("mix: no result")?;
            let contents = state.contents(c);
            let members: Vec<EntityId> = contents.iter().copied().filter(|&e| e != r).collect();
            let r_here = contents.contains(&r);
            need(
                !members.is_empty() && (members.len() >= 2 || r_here),
                format!("mix: too little in {}", spec.props[c].id),
            )?;
            let mut heated = state.entities[r].tags & tag::HEATED;
            for &m in &members {
                heated |= state.entities[m].tags & tag::HEATED;
                state.entities[m].loc = Loc::In(r);
                state.entities[m].tags |= tag::MIXED;
                touch(Var::Entity(m), Write);
            }
            state.entities[r].loc = Loc::On(c);
            state.entities[r].tags |= tag::MIXED | heated;
            touch(Var::Entity(r), Write);
            touch(Var::Contents(c), Write);
        }
        Verb::Pour | Verb::Serve | Verb::Invert => {
            let c = prop(action.container, "source")?;
            let d = prop(action.dest, "destination")?;
            let contents = state.contents(c);
            need(!contents.is_empty(), format!("{}: {} is empty", verb.as_str(), spec.props[c].id))?;
            if spec.props[d].needs_greasing {
                need(state.props[d].greased, format!("{} is not greased", spec.props[d].id))?;
                touch(Var::Prop(d), Read);
            }
            for e in contents {
                state.entities[e].loc = Loc::On(d);
                touch(Var::Entity(e), Write);
            }
            // Whatever was poured from is taken out of the oven or off the stove.
            state.props[c].on = None;
            if verb == Verb::Invert {
                state.props[c].orientation = Orientation::UpsideDown;
            }
            touch(Var::Contents(c), Write);
            touch(Var::Contents(d), Add);
            touch(Var::Prop(c), Write);
        }
        Verb::Heat | Verb::Bake | Verb::Chill => {
            let c = prop(action.container, "container")?;
            let h = prop(action.habitat, "habitat")?;
            let contents = state.contents(c);
            need(!contents.is_empty(), format!("{}: {} is empty", verb.as_str(), spec.props[c].id))?;
            if verb == Verb::Bake {
                need(state.props[h].hot, format!("{} is not hot", spec.props[h].id))?;
                touch(Var::Prop(h), Read);
            }
            let t = match verb {
                Verb::Heat => tag::HEATED,
                Verb::Bake => tag::BAKED,
                _ => 0,
            };
            if t != 0 {
                let affected: Vec<EntityId> = contents.iter().flat_map(|&e| state.with_members(e)).collect();
                for e in affected {
                    state.entities[e].tags |= t;
                    touch(Var::Entity(e), Write);
                }
            }
            state.props[c].on = Some(h);
            touch(Var::Contents(c), Read);
            touch(Var::Prop(c), Write);
        }
        Verb::Preheat => {
            let h = prop(action.habitat, "habitat")?;
            need(!state.props[h].hot, format!("{} is already hot", spec.props[h].id))?;
            state.props[h].hot = true;
            touch(Var::Prop(h), Write);
        }
        Verb::Grease => {
            let c = prop(action.container, "container")?;
            need(!state.props[c].greased, format!("{} is already greased", spec.props[c].id))?;
            state.props[c].greased = true;
            touch(Var::Prop(c), Write);
        }
        Verb::Unpack => {
            let b = prop(action.container, "box")?;
            for &e in &action.patients {
                need(state.entities[e].loc == Loc::On(b), format!("{} is not in the box", ename(e)))?;
                state.entities[e].loc = Loc::Start;
                touch(Var::Entity(e), Write);
            }
            touch(Var::Contents(b), Write);
        }
        Verb::Count => {
            let (e, _) = action.consumes.ok_or("count: nothing to count")?;
            touch(Var::Supply(e), Read);
        }
        Verb::Sand => {
            let e = one("part")?;
            let s = state.entities[e];
            need(
                s.tags & (tag::SANDED | tag::PAINTED) == 0 && s.loc == Loc::Start,
                format!("{} cannot be sanded now", ename(e)),
            )?;
            state.entities[e].tags |= tag::SANDED;
            touch(Var::Entity(e), Write);
        }
        Verb::Paint => {
            let e = one("part")?;
            need(
                state.present(e) && state.entities[e].tags & tag::PAINTED == 0,
                format!("{} cannot be painted now", ename(e)),
            )?;
            if spec.entities[e].role == EntityRole::Intermediate {
                touch(Var::Members(e), Read);
            }
            for m in state.with_members(e) {
                state.entities[m].tags |= tag::PAINTED;
                touch(Var::Entity(m), Write);
            }
        }
        Verb::Attach | Verb::Install => {
            let p = one("part")?;
            let g = action.result.ok_or("attach: no assembly")?;
            if !state.present(g) {
                let q =
                    action.base.ok_or_else(|| format!("attach: {} does not exist yet and has no base", ename(g)))?;
                need(state.entities[q].loc == Loc::Start, format!("{} is not loose", ename(q)))?;
                state.entities[q].loc = Loc::In(g);
                state.entities[q].tags |= tag::ATTACHED;
                state.entities[g].loc = Loc::Start;
                // A new assembly lies the way its base part lies (a seat turned over before the legs go on).
                state.entities[g].orientation = state.entities[q].orientation;
                touch(Var::Entity(q), Write);
                touch(Var::Entity(g), Write);
            } else {
                touch(Var::Entity(g), Read);
            }
            if let Some(o) = action.orientation {
                need(state.entities[g].orientation == o, format!("{} must be {o:?} first", ename(g)))?;
            }
            need(state.entities[p].loc == Loc::Start, format!("{} is not loose", ename(p)))?;
            state.entities[p].loc = Loc::In(g);
            state.entities[p].tags |= tag::ATTACHED;
            touch(Var::Entity(p), Write);
            touch(Var::Members(g), Add);
        }
        Verb::Fasten => {
            let p = one("part")?;
            let s = state.entities[p];
            need(
                s.tags & tag::ATTACHED != 0 && s.tags & tag::FASTENED == 0,
                format!("{} is not attached or already fastened", ename(p)),
            )?;
            state.entities[p].tags |= tag::FASTENED;
            touch(Var::Entity(p), Write);
            if let Some((c, k)) = action.consumes {
                need(state.entities[c].count >= k, format!("not enough {}", ename(c)))?;
                state.entities[c].count -= k;
                touch(Var::Supply(c), Add);
            }
        }
        Verb::Flip => {
            let g = one("assembly")?;
            let o = action.orientation.ok_or("flip: no orientation")?;
            need(state.present(g) && state.entities[g].orientation != o, format!("{} cannot be turned", ename(g)))?;
            state.entities[g].orientation = o;
            touch(Var::Entity(g), Write);
        }
        Verb::PlugIn => {
            let g = one("assembly")?;
            need(
                state.present(g) && state.entities[g].tags & tag::LIT == 0,
                format!("{} cannot be plugged in", ename(g)),
            )?;
            state.entities[g].tags |= tag::LIT;
            touch(Var::Entity(g), Write);
            touch(Var::Members(g), Read);
        }
    }
    acc.sort();
    acc.dedup();
    Ok(acc)
}

/// The label of a state's tags: tag names in [`tag::NAMES`] order joined by `+`, leaving out tags implied by a
/// later one (peeled by chopped, attached by fastened); `whole` (cooking) or `loose` (assembly) when untagged.
pub fn state_label(domain: Domain, tags: u16) -> String {
    let mut t = tags;
    if t & tag::CHOPPED != 0 {
        t &= !tag::PEELED;
    }
    if t & tag::FASTENED != 0 {
        t &= !tag::ATTACHED;
    }
    let names: Vec<&str> = tag::NAMES.iter().filter(|(b, _)| t & b != 0).map(|(_, n)| *n).collect();
    if names.is_empty() {
        return match domain {
            Domain::Cooking => "whole".into(),
            Domain::Assembly => "loose".into(),
        };
    }
    names.join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ent(id: &str, kind: &str, role: EntityRole) -> EntitySpec {
        EntitySpec {
            id: id.into(),
            kind: kind.into(),
            names: vec![(id.into(), id.into())],
            names_by_tag: vec![],
            role,
            colour: [0; 3],
            inner: [0; 3],
            shape: Shape::Round,
            count: 1,
            quantity: String::new(),
            needs_peeling: false,
            cut_verbs: vec![],
            blends: true,
            geometry: None,
        }
    }

    fn prop(id: &str, role: PropRole) -> PropSpec {
        PropSpec {
            id: id.into(),
            kind: id.into(),
            names: vec![id.into()],
            role,
            count: 1,
            colour: [0; 3],
            surface: id == "board",
            needs_greasing: id == "dish",
        }
    }

    #[test]
    fn adds_commute_but_mixing_does_not() {
        let spec = WorldSpec {
            domain: Domain::Cooking,
            entities: vec![
                ent("egg", "egg", EntityRole::Ingredient),
                ent("flour", "flour", EntityRole::Ingredient),
                ent("batter", "mixture", EntityRole::Intermediate),
            ],
            props: vec![prop("bowl", PropRole::Container), prop("whisk", PropRole::Tool)],
        };
        let mut st = WorldState {
            entities: vec![
                EntState { tags: 0, loc: Loc::Start, count: 2, orientation: Orientation::Upright },
                EntState { tags: 0, loc: Loc::Start, count: 1, orientation: Orientation::Upright },
                EntState { tags: 0, loc: Loc::Absent, count: 1, orientation: Orientation::Upright },
            ],
            props: vec![PropState { on: None, hot: false, greased: false, orientation: Orientation::Upright }; 2],
        };
        let add = |e| Action { verb: Some(Verb::Add), patients: vec![e], dest: Some(0), ..Default::default() };
        let a1 = apply(&spec, &mut st, &add(0)).unwrap();
        let a2 = apply(&spec, &mut st, &add(1)).unwrap();
        assert!(!conflicts(&a1, &a2));
        assert_eq!(st.entities[0].tags, tag::CRACKED);
        let mix =
            Action { verb: Some(Verb::Mix), container: Some(0), tools: vec![1], result: Some(2), ..Default::default() };
        let m = apply(&spec, &mut st, &mix).unwrap();
        assert!(conflicts(&a1, &m) && conflicts(&a2, &m));
        assert_eq!(st.contents(0), vec![2]);
        assert_eq!(state_label(Domain::Cooking, st.entities[0].tags), "cracked+mixed");
        // Mixing again with nothing new is a failed precondition, not a panic.
        let mut st2 = st.clone();
        assert!(apply(&spec, &mut st2, &mix).is_err());
    }
}
