//! Step text: each action realised from one of five sentence *styles* shared by all verbs (the template id),
//! with verb synonyms chosen by context, ingredient aliases, quantities on first mention, ellipsis of the
//! container just talked about, implicit tools and habitats, reified intermediates ("the batter"), optional
//! step titles, position-independent connectives and narrative noise.
//!
//! Every argument the text names is a span with char offsets; every argument it leaves out is an implicit span
//! (no offsets). Spans are linked from the step's event span by role (`patient`, `tool`, `container`,
//! `destination`, `habitat`, `result`, `base`). Style, connective and noise are drawn independently of the
//! step's position, so they say nothing about order (tested in `tests/giveaway.rs`).

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rand::seq::IndexedRandom;
use stepwise_core::procedure::{Link, Span};
use stepwise_core::rng::ChaCha8Rng;

use crate::model::*;
use crate::plan::Plan;

/// Number of sentence styles (template ids 0..STYLES).
pub const STYLES: usize = 5;
/// Step-initial connectives, drawn independently of position.
pub const CONNECTIVES: &[&str] = &["Then", "Next", "Now", "After that"];

const COOKING_NOISE: &[&str] = &[
    "My grandmother always did this part by hand.",
    "This is the fun part.",
    "Don't rush this.",
    "The kitchen will start to smell wonderful.",
    "Kids love helping with this.",
    "I like to put some music on at this point.",
    "You can use whatever you have at home.",
];
const ASSEMBLY_NOISE: &[&str] = &[
    "Take your time with this one.",
    "A second pair of hands helps here.",
    "Keep the instructions close by.",
    "It is easier than it looks.",
    "Mind your fingers.",
    "Work on a clean, flat surface.",
];

/// The realised text of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepText {
    pub title: Option<String>,
    pub text: String,
    pub spans: Vec<Span>,
    pub links: Vec<Link>,
    /// Style id of each action's sentence.
    pub styles: Vec<usize>,
    /// How two bundled actions are joined (`and`, `then`, `sentences`), if bundled.
    pub join: Option<&'static str>,
    pub connective: Option<&'static str>,
    pub noise: bool,
}

/// The text of a whole procedure.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcedureText {
    pub steps: Vec<StepText>,
    /// Ingredient or parts list as quantities ("2 cups of flour", "12 screws").
    pub ingredients: Vec<String>,
}

/// Builds a step's text, recording spans at char offsets.
struct Writer {
    step: usize,
    text: String,
    chars: usize,
    cap_next: bool,
    spans: Vec<Span>,
    links: Vec<Link>,
    next: usize,
}

impl Writer {
    fn new(step: usize) -> Self {
        Writer { step, text: String::new(), chars: 0, cap_next: true, spans: Vec::new(), links: Vec::new(), next: 0 }
    }

    fn push(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        let s = if self.cap_next {
            self.cap_next = false;
            capitalise(s)
        } else {
            s.to_string()
        };
        self.chars += s.chars().count();
        self.text.push_str(&s);
    }

    fn lit(&mut self, s: &str) {
        self.push(s);
    }

    /// End a sentence: the next word is capitalised.
    fn stop(&mut self) {
        self.push(".");
        self.cap_next = true;
    }

    fn new_id(&mut self) -> String {
        self.next += 1;
        format!("s{}.{}", self.step, self.next)
    }

    fn span(&mut self, label: &str, s: &str, attrs: BTreeMap<String, String>) -> String {
        let start = self.chars;
        self.push(s);
        let id = self.new_id();
        let text: String = self.text.chars().skip(start).collect();
        self.spans.push(Span {
            id: id.clone(),
            label: label.into(),
            start: Some(start),
            end: Some(self.chars),
            text,
            attrs,
        });
        id
    }

    fn implicit(&mut self, label: &str, name: &str, attrs: BTreeMap<String, String>) -> String {
        let id = self.new_id();
        self.spans.push(Span { id: id.clone(), label: label.into(), start: None, end: None, text: name.into(), attrs });
        id
    }

    fn link(&mut self, role: &str, from: &str, to: &str) {
        self.links.push(Link { label: role.into(), from: from.into(), to: to.into() });
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn attrs(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// What the writer remembers across steps.
struct Discourse {
    last_place: Option<PropId>,
    mentioned: BTreeSet<EntityId>,
    quantities: bool,
}

/// Realise the text of every step of `plan`.
pub fn realise(plan: &Plan, rng: &mut ChaCha8Rng) -> ProcedureText {
    let domain = plan.spec.domain;
    let titles = rng.random_bool(0.35);
    let mut d = Discourse { last_place: None, mentioned: BTreeSet::new(), quantities: rng.random_bool(0.6) };
    let mut steps = Vec::with_capacity(plan.steps.len());
    let mut state = plan.initial.clone();
    for (s, acts) in plan.steps.iter().enumerate() {
        let mut w = Writer::new(s);
        let connective = if rng.random_bool(0.2) { Some(*CONNECTIVES.choose(rng).expect("connectives")) } else { None };
        if let Some(c) = connective {
            w.lit(c);
            w.lit(", ");
            w.cap_next = false;
        }
        let join = if acts.len() > 1 { Some(*["and", "then", "sentences"].choose(rng).expect("joins")) } else { None };
        let mut styles = Vec::new();
        let mut title = None;
        let mut prev_patients: Vec<EntityId> = Vec::new();
        for (k, &a) in acts.iter().enumerate() {
            let action = &plan.actions[a];
            let style = rng.random_range(0..STYLES);
            styles.push(style);
            if k > 0 {
                match join {
                    Some("and") => w.lit(" and "),
                    Some("then") => w.lit(", then "),
                    _ => {
                        w.lit(" ");
                        w.cap_next = true;
                    }
                }
            }
            let pronoun =
                k > 0 && join != Some("sentences") && !action.patients.is_empty() && action.patients == prev_patients;
            let t = sentence(&mut w, plan, &state, action, style, pronoun, &mut d, rng);
            if title.is_none() {
                title = Some(t);
            }
            if k + 1 == acts.len() || join == Some("sentences") {
                w.stop();
            }
            prev_patients = action.patients.clone();
            apply(&plan.spec, &mut state, action).expect("the plan was simulated in this order");
        }
        let noise = rng.random_bool(0.1);
        if noise {
            let list = if domain == Domain::Cooking { COOKING_NOISE } else { ASSEMBLY_NOISE };
            w.lit(" ");
            w.cap_next = false;
            w.lit(list.choose(rng).expect("noise"));
        }
        steps.push(StepText {
            title: if titles { title } else { None },
            text: w.text,
            spans: w.spans,
            links: w.links,
            styles,
            join,
            connective,
            noise,
        });
    }
    ProcedureText { steps, ingredients: materials_list(&plan.spec) }
}

/// The ingredient list (quantities as written) or the parts list (parts grouped by kind: "4 legs").
pub fn materials_list(spec: &WorldSpec) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut parts: Vec<(String, u32)> = Vec::new();
    for e in &spec.entities {
        match e.role {
            EntityRole::Intermediate => {}
            EntityRole::Part => match parts.iter_mut().find(|(k, _)| *k == e.kind) {
                Some((_, n)) => *n += 1,
                None => parts.push((e.kind.clone(), 1)),
            },
            _ => out.push(e.quantity.clone()),
        }
    }
    let mut list: Vec<String> = parts
        .into_iter()
        .map(|(k, n)| {
            let noun = k.replace('_', " ");
            if n == 1 { format!("1 {noun}") } else { format!("{n} {}", plural(&noun)) }
        })
        .collect();
    list.extend(out);
    list
}

/// English plural of a simple noun.
pub fn plural(noun: &str) -> String {
    if let Some(stem) = noun.strip_suffix('f') {
        format!("{stem}ves")
    } else if noun.ends_with('s') || noun.ends_with('x') || noun.ends_with("ch") || noun.ends_with("sh") {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

fn entity_label(spec: &EntitySpec) -> &'static str {
    match spec.role {
        EntityRole::Ingredient => "INGREDIENT",
        EntityRole::Part => "PART",
        EntityRole::Consumable => "SUPPLY",
        EntityRole::Intermediate => "RESULT",
    }
}

fn prop_label(p: &PropSpec) -> &'static str {
    match p.role {
        PropRole::Tool => "TOOL",
        PropRole::Container => "CONTAINER",
        PropRole::Habitat => "HABITAT",
    }
}

/// Context for realising one action.
struct Ctx<'a> {
    plan: &'a Plan,
    state: &'a WorldState,
    action: &'a Action,
}

impl Ctx<'_> {
    fn ent(&self, e: EntityId) -> &EntitySpec {
        &self.plan.spec.entities[e]
    }
    fn prop(&self, p: PropId) -> &PropSpec {
        &self.plan.spec.props[p]
    }
}

/// The surface name of an entity now (alias drawn at random, intermediates by state).
fn entity_name(c: &Ctx, e: EntityId, rng: &mut ChaCha8Rng) -> String {
    let spec = c.ent(e);
    if spec.role == EntityRole::Intermediate {
        let tags = c.state.entities[e].tags | if c.action.verb() == Verb::Bake { tag::BAKED } else { 0 };
        return spec.name_for(tags).to_string();
    }
    let k = if spec.names.len() > 1 && rng.random_bool(0.3) { 1 } else { 0 };
    let (s, p) = &spec.names[k];
    if spec.count > 1 { p.clone() } else { s.clone() }
}

/// Write "the X" (or a quantity on first mention) as a span.
fn mention(w: &mut Writer, c: &Ctx, e: EntityId, role: &str, event: &str, d: &mut Discourse, rng: &mut ChaCha8Rng) {
    let spec = c.ent(e);
    let first = !d.mentioned.contains(&e);
    d.mentioned.insert(e);
    let mut a = attrs(&[("entity", spec.id.clone())]);
    let name = if first && d.quantities && spec.role == EntityRole::Ingredient && !spec.quantity.is_empty() {
        a.insert("quantity".into(), spec.quantity.clone());
        spec.quantity.clone()
    } else {
        w.lit("the ");
        entity_name(c, e, rng)
    };
    let id = w.span(entity_label(spec), &name, a);
    w.link(role, event, &id);
}

/// Write a list of entities: "the flour, sugar and cocoa".
fn mention_list(
    w: &mut Writer,
    c: &Ctx,
    es: &[EntityId],
    role: &str,
    event: &str,
    d: &mut Discourse,
    rng: &mut ChaCha8Rng,
) {
    for (i, &e) in es.iter().enumerate() {
        if i > 0 {
            w.lit(if i + 1 == es.len() { " and " } else { ", " });
        }
        mention(w, c, e, role, event, d, rng);
    }
}

fn implicit_entity(w: &mut Writer, c: &Ctx, e: EntityId, role: &str, event: &str) {
    let spec = c.ent(e);
    let id =
        w.implicit(entity_label(spec), spec.name_for(c.state.entities[e].tags), attrs(&[("entity", spec.id.clone())]));
    w.link(role, event, &id);
}

fn prop_span(w: &mut Writer, c: &Ctx, p: PropId, role: &str, event: &str, article: &str, rng: &mut ChaCha8Rng) {
    let spec = c.prop(p);
    let name = if spec.names.len() > 1 && rng.random_bool(0.25) { &spec.names[1] } else { &spec.names[0] };
    let name = if spec.count > 1 && role == "destination" { format!("{} {name}", spec.count) } else { name.clone() };
    if !article.is_empty() {
        w.lit(article);
        w.lit(" ");
    }
    let mut a = attrs(&[("prop", spec.id.clone())]);
    if spec.count > 1 {
        a.insert("count".into(), spec.count.to_string());
    }
    let id = w.span(prop_label(spec), &name, a);
    w.link(role, event, &id);
}

fn implicit_prop(w: &mut Writer, c: &Ctx, p: PropId, role: &str, event: &str) {
    let spec = c.prop(p);
    let id = w.implicit(prop_label(spec), spec.name(), attrs(&[("prop", spec.id.clone())]));
    w.link(role, event, &id);
}

/// The verb synonym for an action in its context.
fn verb_word(c: &Ctx, rng: &mut ChaCha8Rng) -> String {
    let a = c.action;
    let tool_kind = a.tools.first().map(|&t| c.prop(t).kind.as_str()).unwrap_or("");
    let kinds = |p: PropId| -> Vec<&str> { c.state.contents(p).iter().map(|&e| c.ent(e).kind.as_str()).collect() };
    let pick = |words: &[&str], rng: &mut ChaCha8Rng| words.choose(rng).expect("verb synonyms").to_string();
    match a.verb() {
        Verb::Peel => "peel".into(),
        Verb::Chop => {
            let e = c.ent(a.patients[0]);
            if e.role == EntityRole::Intermediate { pick(&["slice", "cut"], rng) } else { pick(&e.cut_verbs, rng) }
        }
        Verb::Add => {
            if a.patients.iter().all(|&e| c.ent(e).kind == "egg") {
                "crack".into()
            } else if a.patients.iter().all(|&e| c.ent(e).shape == Shape::Liquid) {
                pick(&["add", "pour"], rng)
            } else {
                pick(&["add", "put", "place", "tip"], rng)
            }
        }
        Verb::Mix => {
            let blends = a.result.map(|r| c.ent(r).blends).unwrap_or(true);
            match (blends, tool_kind) {
                (_, "blender") => pick(&["blend", "purée"], rng),
                (true, "whisk") => pick(&["whisk", "beat"], rng),
                (true, "fork") => pick(&["beat", "whisk", "mix"], rng),
                (true, _) => pick(&["stir", "mix", "combine"], rng),
                (false, _) => pick(&["toss", "mix", "combine"], rng),
            }
        }
        Verb::Pour => pick(&["pour", "transfer", "tip"], rng),
        Verb::Serve => {
            if tool_kind == "ladle" {
                pick(&["ladle", "serve", "divide"], rng)
            } else {
                pick(&["serve", "divide", "spoon"], rng)
            }
        }
        Verb::Invert => pick(&["invert", "tip", "turn"], rng),
        Verb::Heat => {
            let ks = a.container.map(kinds).unwrap_or_default();
            if ks.iter().all(|k| *k == "butter") {
                "melt".into()
            } else if ks.iter().all(|k| *k == "oil" || *k == "butter") {
                pick(&["heat", "warm"], rng)
            } else if ks.contains(&"rice") || ks.contains(&"mixture") && ks.len() == 1 && !ks.is_empty() {
                pick(&["simmer", "cook", "boil"], rng)
            } else {
                pick(&["fry", "sauté", "cook"], rng)
            }
        }
        Verb::Bake => "bake".into(),
        Verb::Preheat => pick(&["preheat", "heat"], rng),
        Verb::Grease => pick(&["grease", "butter", "oil"], rng),
        Verb::Chill => pick(&["chill", "refrigerate", "cool"], rng),
        Verb::Unpack => pick(&["unpack", "unbox", "remove"], rng),
        Verb::Count => pick(&["count", "check"], rng),
        Verb::Sand => pick(&["sand", "smooth"], rng),
        Verb::Paint => pick(&["paint", "coat"], rng),
        Verb::Attach => pick(&["attach", "fix", "join", "fit"], rng),
        Verb::Install => match c.ent(a.patients[0]).kind.as_str() {
            "bulb" => pick(&["fit", "insert", "twist"], rng),
            "cable" => pick(&["thread", "feed", "run"], rng),
            _ => pick(&["fit", "install", "attach"], rng),
        },
        Verb::Fasten => {
            if tool_kind == "hammer" {
                pick(&["nail", "fix", "secure"], rng)
            } else {
                pick(&["fasten", "secure", "tighten"], rng)
            }
        }
        Verb::Flip => match a.orientation {
            Some(Orientation::UpsideDown) => pick(&["turn", "flip"], rng),
            _ => pick(&["turn", "stand"], rng),
        },
        Verb::PlugIn => pick(&["plug", "connect"], rng),
    }
}

/// The closing clause of style 3 ("until smooth", "a little at a time").
fn until_clause(c: &Ctx, rng: &mut ChaCha8Rng) -> &'static str {
    let words: &[&str] = match c.action.verb() {
        Verb::Peel => &["until no skin is left", "down to the flesh"],
        Verb::Chop => &["until the pieces are even", "until the pieces are small", "as evenly as you can"],
        Verb::Add => &["a little at a time", "without spilling", "all at once"],
        Verb::Pour | Verb::Serve | Verb::Invert => &["until nothing is left behind", "carefully", "in one go"],
        Verb::Unpack => &["and check nothing is missing", "and lay everything out"],
        Verb::Mix => &["until smooth", "until well combined", "until evenly mixed", "until no lumps remain"],
        Verb::Heat => &["until soft", "until golden", "until fragrant", "until cooked through", "until bubbling"],
        Verb::Bake => &["until golden brown", "until a skewer comes out clean", "until firm to the touch"],
        Verb::Preheat => &["and let it heat up", "fully"],
        Verb::Grease => &["until every corner is coated", "evenly"],
        Verb::Chill => &["until cold", "for a while"],
        Verb::Count => &["twice to be sure", "carefully"],
        Verb::Sand => &["until the surface is smooth", "until no splinters remain"],
        Verb::Paint => &["in even strokes", "until no bare wood shows"],
        Verb::Attach | Verb::Install => {
            &["so that it sits flush", "until it clicks into place", "so that the edges line up"]
        }
        Verb::Fasten => &["until nothing wobbles", "firmly", "but do not overtighten"],
        Verb::Flip => &["so that it rests flat", "carefully"],
        Verb::PlugIn => &["and switch it on", "to test it"],
    };
    words.choose(rng).expect("closing clauses")
}

/// Write one action's sentence (without the final stop). Returns a short title for it.
#[allow(clippy::too_many_arguments)]
fn sentence(
    w: &mut Writer,
    plan: &Plan,
    state: &WorldState,
    action: &Action,
    style: usize,
    pronoun: bool,
    d: &mut Discourse,
    rng: &mut ChaCha8Rng,
) -> String {
    let c = Ctx { plan, state, action };
    let verb = verb_word(&c, rng);
    let tool = action.tools.first().copied();
    // Style 2 fronts the tool ("Using a whisk, ...") or an adverb.
    if style == 2 {
        if let (Some(t), true) = (tool, rng.random_bool(0.7)) {
            let spec = c.prop(t);
            w.lit("using a ");
            let id = w.span(prop_label(spec), spec.name(), attrs(&[("prop", spec.id.clone())]));
            w.lit(", ");
            let event = write_event(w, &verb, action);
            w.link("tool", &event, &id);
            return body(w, &c, &verb, &event, style, pronoun, true, d, rng);
        }
        w.lit(["carefully", "gently", "slowly"].choose(rng).expect("adverbs"));
        w.lit(" ");
    }
    if style == 4 && !action.patients.is_empty() && !pronoun && action.verb() != Verb::Unpack {
        // "Take the carrots and dice them": the patients come first, linked once the event span exists.
        w.lit("take ");
        let first_link = w.links.len();
        mention_list(w, &c, &action.patients, "patient", "", d, rng);
        w.lit(" and ");
        let event = write_event(w, &verb, action);
        for l in &mut w.links[first_link..] {
            l.from = event.clone();
        }
        let many = action.patients.len() > 1 || c.ent(action.patients[0]).count > 1;
        w.lit(if many { " them" } else { " it" });
        return body_after_patients(w, &c, &verb, &event, style, false, d, rng);
    }
    let event = write_event(w, &verb, action);
    body(w, &c, &verb, &event, style, pronoun, false, d, rng)
}

fn write_event(w: &mut Writer, verb: &str, action: &Action) -> String {
    w.span("EVENT", verb, attrs(&[("action", action.verb().as_str().to_string())]))
}

/// Everything after the verb: patients, places, tool, detail, until-clause.
#[allow(clippy::too_many_arguments)]
fn body(
    w: &mut Writer,
    c: &Ctx,
    verb: &str,
    event: &str,
    style: usize,
    pronoun: bool,
    tool_said: bool,
    d: &mut Discourse,
    rng: &mut ChaCha8Rng,
) -> String {
    let a = c.action;
    if !a.patients.is_empty() && a.verb() != Verb::Unpack {
        w.lit(" ");
        if pronoun {
            let many = a.patients.len() > 1
                || c.ent(a.patients[0]).count > 1
                || c.ent(a.patients[0]).names[0].0.ends_with('s');
            w.lit(if many { "them" } else { "it" });
            for &e in &a.patients {
                implicit_entity(w, c, e, "patient", event);
            }
        } else {
            mention_list(w, c, &a.patients, "patient", event, d, rng);
        }
    }
    body_after_patients(w, c, verb, event, style, tool_said, d, rng)
}

/// Mention what is in a container: the solids and mixtures by name (at most three, else "everything"); liquids
/// and fats next to solids stay implicit ("Fry the onions" rather than "the onions and the oil").
fn mention_contents(
    w: &mut Writer,
    c: &Ctx,
    contents: &[EntityId],
    event: &str,
    d: &mut Discourse,
    rng: &mut ChaCha8Rng,
) {
    let minor = |e: EntityId| matches!(c.ent(e).shape, Shape::Liquid | Shape::Powder) || c.ent(e).kind == "butter";
    let main: Vec<EntityId> = contents.iter().copied().filter(|&e| !minor(e)).collect();
    let (said, unsaid): (Vec<EntityId>, Vec<EntityId>) = if main.is_empty() {
        (contents.to_vec(), Vec::new())
    } else {
        (main, contents.iter().copied().filter(|&e| minor(e)).collect())
    };
    if said.len() <= 3 {
        mention_list(w, c, &said, "patient", event, d, rng);
    } else {
        w.lit("everything");
        for &e in &said {
            implicit_entity(w, c, e, "patient", event);
        }
    }
    for e in unsaid {
        implicit_entity(w, c, e, "patient", event);
    }
}

/// "a" or "an" before a word.
pub fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U']) { "an" } else { "a" }
}

/// The preposition that goes with a verb of putting.
fn put_prep(verb: &str, rng: &mut ChaCha8Rng) -> &'static str {
    match verb {
        "add" => ["to", "into"].choose(rng).expect("preps"),
        "place" | "put" => ["in", "into"].choose(rng).expect("preps"),
        _ => "into",
    }
}

#[allow(clippy::too_many_arguments)]
fn body_after_patients(
    w: &mut Writer,
    c: &Ctx,
    verb: &str,
    event: &str,
    style: usize,
    tool_said: bool,
    d: &mut Discourse,
    rng: &mut ChaCha8Rng,
) -> String {
    let a = c.action;
    let spec = &c.plan.spec;
    let mut supply_said = false;
    match a.verb() {
        Verb::Chop => {
            if let Some(b) = a.container {
                place(w, c, b, "container", event, "on", style == 1, d, rng);
            }
            if rng.random_bool(0.3) {
                w.lit([" into small pieces", " finely", " into thin slices", " roughly"].choose(rng).expect("manners"));
            }
        }
        Verb::Peel => {
            if let Some(b) = a.container {
                implicit_prop(w, c, b, "container", event);
            }
        }
        Verb::Add => {
            let dest = a.dest.expect("add has a destination");
            // Into a container that holds a mixture: name the mixture ("to the batter").
            let mix_there =
                c.state.contents(dest).into_iter().find(|&e| spec.entities[e].role == EntityRole::Intermediate);
            if let (Some(m), true) = (mix_there, rng.random_bool(0.6)) {
                w.lit(if verb == "add" { " to " } else { " into " });
                mention(w, c, m, "destination", event, d, rng);
                implicit_prop(w, c, dest, "container", event);
                d.last_place = Some(dest);
            } else {
                place(w, c, dest, "destination", event, put_prep(verb, rng), style == 1, d, rng);
            }
        }
        Verb::Mix => {
            let cont = a.container.expect("mix has a container");
            let r = a.result.expect("mix has a result");
            let members: Vec<EntityId> = c.state.contents(cont).into_iter().filter(|&e| e != r).collect();
            w.lit(" ");
            if c.state.present(r) {
                // Folding more into an existing mixture.
                mention_list(w, c, &members, "patient", event, d, rng);
                w.lit(" into ");
                mention(w, c, r, "destination", event, d, rng);
                implicit_prop(w, c, cont, "container", event);
            } else {
                if members.len() <= 3 && rng.random_bool(0.4) {
                    mention_list(w, c, &members, "patient", event, d, rng);
                } else {
                    w.lit(["everything", "the ingredients", "it all"].choose(rng).expect("group nouns"));
                    for &m in &members {
                        implicit_entity(w, c, m, "patient", event);
                    }
                }
                if rng.random_bool(0.6) {
                    w.lit(" together");
                }
                place(w, c, cont, "container", event, "in", style == 1, d, rng);
                // Reify the result: "to make a batter".
                if rng.random_bool(0.5) {
                    let name = spec.entities[r].name();
                    w.lit([" to make ", " to form ", " into "].choose(rng).expect("result preps"));
                    w.lit(article(name));
                    w.lit(" ");
                    let id = w.span("RESULT", name, attrs(&[("entity", spec.entities[r].id.clone())]));
                    w.link("result", event, &id);
                    d.mentioned.insert(r);
                } else {
                    implicit_entity(w, c, r, "result", event);
                }
            }
        }
        Verb::Pour | Verb::Serve | Verb::Invert => {
            let src = a.container.expect("pour has a source");
            let dest = a.dest.expect("pour has a destination");
            w.lit(" ");
            mention_contents(w, c, &c.state.contents(src), event, d, rng);
            if rng.random_bool(0.3) || a.verb() == Verb::Invert {
                w.lit(" from");
                prop_span(w, c, src, "container", event, " the", rng);
            } else {
                implicit_prop(w, c, src, "container", event);
            }
            let over: Vec<EntityId> = c.state.contents(dest);
            let many = spec.props[dest].count > 1;
            if !over.is_empty() && !many && rng.random_bool(0.5) {
                w.lit(" over ");
                mention_contents(w, c, &over, event, d, rng);
                implicit_prop(w, c, dest, "destination", event);
            } else if many {
                w.lit([" between ", " among "].choose(rng).expect("preps"));
                prop_span(w, c, dest, "destination", event, "", rng);
            } else {
                w.lit(if a.verb() == Verb::Pour { " into" } else { " onto" });
                prop_span(w, c, dest, "destination", event, " the", rng);
            }
            d.last_place = Some(dest);
        }
        Verb::Heat | Verb::Bake | Verb::Chill => {
            let cont = a.container.expect("heat has a container");
            w.lit(" ");
            mention_contents(w, c, &c.state.contents(cont), event, d, rng);
            place(w, c, cont, "container", event, "in", style == 1, d, rng);
            let h = a.habitat.expect("heat has a habitat");
            let say_habitat = if a.verb() == Verb::Heat { rng.random_bool(0.3) } else { rng.random_bool(0.5) };
            if say_habitat {
                w.lit(if a.verb() == Verb::Heat { " on" } else { " in" });
                prop_span(w, c, h, "habitat", event, " the", rng);
            } else {
                if a.verb() == Verb::Heat && rng.random_bool(0.4) {
                    w.lit([" over medium heat", " over low heat", " over high heat"].choose(rng).expect("heats"));
                }
                implicit_prop(w, c, h, "habitat", event);
            }
        }
        Verb::Preheat => {
            let h = a.habitat.expect("preheat has a habitat");
            prop_span(w, c, h, "patient", event, " the", rng);
            if let Some(t) = &a.detail {
                w.lit(" to ");
                w.lit(t);
            }
        }
        Verb::Grease => {
            let cont = a.container.expect("grease has a container");
            prop_span(w, c, cont, "patient", event, " the", rng);
        }
        Verb::Unpack => {
            w.lit([" all the parts", " the parts", " everything"].choose(rng).expect("parts"));
            for &e in &a.patients {
                implicit_entity(w, c, e, "patient", event);
            }
            if let Some(b) = a.container {
                w.lit(" from");
                prop_span(w, c, b, "container", event, " the", rng);
            }
        }
        Verb::Count => {
            let (s, _) = a.consumes.expect("count has a supply");
            let n = c.state.entities[s].count;
            w.lit(" the ");
            let id =
                w.span("SUPPLY", c.ent(s).noun(), attrs(&[("entity", c.ent(s).id.clone()), ("count", n.to_string())]));
            w.link("patient", event, &id);
            if let Some(t) = a.container {
                place(w, c, t, "container", event, "in", style == 1, d, rng);
            }
            w.lit(&format!(": there should be {n}"));
        }
        Verb::Attach | Verb::Install => {
            let g = a.result.expect("attach has an assembly");
            let cable = c.ent(a.patients[0]).kind == "cable";
            let word = if cable { " through " } else { " to " };
            if !c.state.present(g) {
                let q = a.base.expect("a new assembly has a base");
                w.lit(word);
                mention(w, c, q, "base", event, d, rng);
                implicit_entity(w, c, g, "result", event);
            } else if cable || rng.random_bool(0.6) {
                w.lit(word);
                mention(w, c, g, "destination", event, d, rng);
            } else {
                implicit_entity(w, c, g, "destination", event);
            }
        }
        Verb::Fasten => {
            if let Some((s, k)) = a.consumes {
                if rng.random_bool(0.7) {
                    w.lit(" with ");
                    let txt = format!("{k} {}", if k == 1 { &c.ent(s).names[0].0 } else { &c.ent(s).names[0].1 });
                    let id =
                        w.span("SUPPLY", &txt, attrs(&[("entity", c.ent(s).id.clone()), ("count", k.to_string())]));
                    w.link("supply", event, &id);
                    supply_said = true;
                } else {
                    implicit_entity(w, c, s, "supply", event);
                }
            }
        }
        Verb::Flip => {
            w.lit(match (a.orientation, verb) {
                (Some(Orientation::UpsideDown), "flip") => " over",
                (Some(Orientation::UpsideDown), _) => " upside down",
                (_, "stand") => " upright",
                _ => " back upright",
            });
        }
        Verb::Sand => {}
        Verb::PlugIn => {
            if let Some(h) = a.habitat {
                if rng.random_bool(0.5) {
                    w.lit(" into");
                    prop_span(w, c, h, "habitat", event, " the", rng);
                } else {
                    implicit_prop(w, c, h, "habitat", event);
                }
            }
        }
        Verb::Paint => {
            if rng.random_bool(0.5) {
                let colour = paint_name(c.ent(a.patients[0]).inner);
                w.lit(&format!(" with {colour} paint"));
            }
            if let Some(h) = a.habitat {
                if rng.random_bool(0.3) {
                    w.lit(" on");
                    prop_span(w, c, h, "habitat", event, " the", rng);
                } else {
                    implicit_prop(w, c, h, "habitat", event);
                }
            }
        }
    }
    // Tools: said in style 1 (and sometimes otherwise), else implicit.
    for (i, &t) in a.tools.iter().enumerate() {
        if tool_said && i == 0 {
            continue;
        }
        if (style == 1 || rng.random_bool(0.15)) && a.verb() != Verb::Preheat {
            w.lit(if supply_said { " using" } else { " with" });
            prop_span(w, c, t, "tool", event, " the", rng);
        } else {
            implicit_prop(w, c, t, "tool", event);
        }
    }
    if let Some(det) = &a.detail
        && a.verb() != Verb::Preheat
        && (style != 3 || rng.random_bool(0.5))
    {
        w.lit(" for ");
        w.lit(det);
    }
    if style == 3 {
        w.lit(" ");
        w.lit(until_clause(c, rng));
    }
    format!("{} the {}", capitalise(verb), crate::cooking::title_case(&main_object(c)))
}

/// What a step is mainly about, for its title.
fn main_object(c: &Ctx) -> String {
    let a = c.action;
    let ent_name = |e: EntityId| c.ent(e).name_for(c.state.entities[e].tags).to_string();
    if let Some(&p) = a.patients.first() {
        if a.verb() != Verb::Unpack {
            return ent_name(p);
        }
        return "Parts".into();
    }
    if let Some(r) = a.result {
        return c.ent(r).name().to_string();
    }
    if let Some(cont) = a.container {
        let contents = c.state.contents(cont);
        let inter = contents.iter().copied().find(|&e| c.ent(e).role == EntityRole::Intermediate);
        if let Some(e) = inter.or(contents.first().copied())
            && a.verb() != Verb::Grease
        {
            return ent_name(e);
        }
        return c.prop(cont).name().to_string();
    }
    a.habitat.map(|h| c.prop(h).name().to_string()).unwrap_or_default()
}

/// A container or place: said when forced (style 1), when it is not the one just talked about, or at random;
/// otherwise an implicit argument (ellipsis: "Add the eggs." with the bowl left out).
#[allow(clippy::too_many_arguments)]
fn place(
    w: &mut Writer,
    c: &Ctx,
    p: PropId,
    role: &str,
    event: &str,
    prep: &str,
    force: bool,
    d: &mut Discourse,
    rng: &mut ChaCha8Rng,
) {
    let salient = d.last_place == Some(p);
    let say = force || !salient || rng.random_bool(0.35);
    if say {
        w.lit(" ");
        w.lit(prep);
        prop_span(w, c, p, role, event, " the", rng);
    } else {
        implicit_prop(w, c, p, role, event);
    }
    if !c.plan.spec.props[p].surface {
        d.last_place = Some(p);
    }
}

/// A colour word for a paint colour.
pub fn paint_name(c: [u8; 3]) -> String {
    let named: &[(&str, [u8; 3])] = &[
        ("blue", [50, 95, 180]),
        ("red", [190, 50, 45]),
        ("green", [60, 140, 80]),
        ("yellow", [235, 190, 50]),
        ("white", [245, 245, 245]),
        ("teal", [40, 150, 150]),
    ];
    let dist = |a: [u8; 3], b: [u8; 3]| (0..3).map(|i| (a[i] as i32 - b[i] as i32).pow(2)).sum::<i32>();
    named.iter().min_by_key(|(_, v)| dist(*v, c)).map(|(n, _)| n.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan, stream};

    #[test]
    fn spans_point_at_their_text_and_links_resolve() {
        for domain in [Domain::Cooking, Domain::Assembly] {
            for index in 0..60 {
                let p = plan(2, domain, index).unwrap();
                let t = realise(&p, &mut stream(2, domain, index, "text"));
                assert_eq!(t.steps.len(), p.steps.len());
                for st in &t.steps {
                    assert!(!st.text.is_empty());
                    let chars: Vec<char> = st.text.chars().collect();
                    let ids: BTreeSet<&str> = st.spans.iter().map(|s| s.id.as_str()).collect();
                    assert_eq!(ids.len(), st.spans.len(), "span ids are unique");
                    for s in &st.spans {
                        if let (Some(a), Some(b)) = (s.start, s.end) {
                            let got: String = chars[a..b].iter().collect();
                            assert_eq!(got, s.text, "{}", st.text);
                        }
                    }
                    for l in &st.links {
                        assert!(ids.contains(l.from.as_str()) && ids.contains(l.to.as_str()), "{l:?} in {}", st.text);
                    }
                    assert_eq!(st.spans.iter().filter(|s| s.label == "EVENT").count(), st.styles.len());
                    assert!(st.text.chars().next().unwrap().is_uppercase(), "{}", st.text);
                }
            }
        }
    }
}
