//! The [`Builder`] a category's recipe function uses to declare entities and props and emit actions in their
//! canonical order.

use rand::Rng;
use rand::seq::IndexedRandom;
use stepwise_core::rng::ChaCha8Rng;

use crate::model::*;

/// A procedure's world and canonical action list as a category function leaves it.
pub struct Builder<'r> {
    pub domain: Domain,
    pub rng: &'r mut ChaCha8Rng,
    pub entities: Vec<EntitySpec>,
    pub entity_start: Vec<EntState>,
    pub props: Vec<PropSpec>,
    pub prop_start: Vec<PropState>,
    pub actions: Vec<Action>,
}

/// A catalogue entry for a prop.
#[derive(Debug, Clone, Copy)]
pub struct PropKind {
    pub kind: &'static str,
    pub names: &'static [&'static str],
    pub role: PropRole,
    pub colours: &'static [[u8; 3]],
}

impl<'r> Builder<'r> {
    pub fn new(domain: Domain, rng: &'r mut ChaCha8Rng) -> Self {
        Builder {
            domain,
            rng,
            entities: Vec::new(),
            entity_start: Vec::new(),
            props: Vec::new(),
            prop_start: Vec::new(),
            actions: Vec::new(),
        }
    }

    /// Add an entity with its starting place and count; ids are made unique (`egg`, `egg_2`...).
    pub fn entity(&mut self, mut spec: EntitySpec, loc: Loc) -> EntityId {
        let base = spec.id.clone();
        let mut k = 2;
        while self.entities.iter().any(|e| e.id == spec.id) {
            spec.id = format!("{base}_{k}");
            k += 1;
        }
        self.entity_start.push(EntState { tags: 0, loc, count: spec.count, orientation: Orientation::Upright });
        self.entities.push(spec);
        self.entities.len() - 1
    }

    /// The prop of this kind, created on first use (one knife per kitchen). The surface name is drawn once.
    pub fn prop(&mut self, k: &PropKind) -> PropId {
        if let Some(i) = self.props.iter().position(|p| p.kind == k.kind) {
            return i;
        }
        self.new_prop(k, 1)
    }

    /// A prop of this kind with `count` copies, always new.
    pub fn new_prop(&mut self, k: &PropKind, count: u32) -> PropId {
        let first = *k.names.choose(self.rng).expect("prop kinds have names");
        let mut names = vec![first.to_string()];
        names.extend(k.names.iter().filter(|n| **n != first).map(|n| n.to_string()));
        let colour = *k.colours.choose(self.rng).expect("prop kinds have colours");
        let mut id = k.kind.to_string();
        let mut n = 2;
        while self.props.iter().any(|p| p.id == id) {
            id = format!("{}_{n}", k.kind);
            n += 1;
        }
        self.props.push(PropSpec {
            id,
            kind: k.kind.to_string(),
            names,
            role: k.role,
            count,
            colour,
            surface: matches!(k.kind, "board"),
            needs_greasing: matches!(k.kind, "baking_dish" | "cake_tin"),
        });
        self.prop_start.push(PropState { on: None, hot: false, greased: false, orientation: Orientation::Upright });
        self.props.len() - 1
    }

    pub fn act(&mut self, a: Action) {
        self.actions.push(a);
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        self.rng.random_range(lo..=hi)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        items.choose(self.rng).expect("non-empty choice")
    }

    /// `k` distinct items, in random order.
    pub fn sample<T: Clone>(&mut self, items: &[T], k: usize) -> Vec<T> {
        items.choose_multiple(self.rng, k.min(items.len())).cloned().collect()
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        use rand::seq::SliceRandom;
        items.shuffle(self.rng);
    }
}

/// Shorthand for building actions.
pub fn act(verb: Verb) -> Action {
    Action { verb: Some(verb), ..Default::default() }
}

impl Action {
    pub fn on(mut self, e: EntityId) -> Self {
        self.patients.push(e);
        self
    }
    pub fn on_all(mut self, es: &[EntityId]) -> Self {
        self.patients.extend_from_slice(es);
        self
    }
    pub fn tool(mut self, t: PropId) -> Self {
        self.tools.push(t);
        self
    }
    pub fn inside(mut self, c: PropId) -> Self {
        self.container = Some(c);
        self
    }
    pub fn to(mut self, d: PropId) -> Self {
        self.dest = Some(d);
        self
    }
    pub fn at(mut self, h: PropId) -> Self {
        self.habitat = Some(h);
        self
    }
    pub fn making(mut self, r: EntityId) -> Self {
        self.result = Some(r);
        self
    }
    pub fn based_on(mut self, b: EntityId) -> Self {
        self.base = Some(b);
        self
    }
    pub fn oriented(mut self, o: Orientation) -> Self {
        self.orientation = Some(o);
        self
    }
    pub fn using_up(mut self, e: EntityId, n: u32) -> Self {
        self.consumes = Some((e, n));
        self
    }
    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.detail = Some(d.into());
        self
    }
}

/// Lighten (`t > 0`) or darken (`t < 0`) a colour.
pub fn shade(c: [u8; 3], t: f32) -> [u8; 3] {
    let f = |v: u8| {
        let v = v as f32;
        let out = if t >= 0.0 { v + (255.0 - v) * t } else { v * (1.0 + t) };
        out.round().clamp(0.0, 255.0) as u8
    };
    [f(c[0]), f(c[1]), f(c[2])]
}
