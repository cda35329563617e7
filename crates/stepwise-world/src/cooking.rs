//! The cooking domain: ingredients, kitchen props, and one recipe function per category.

use crate::builder::{Builder, PropKind, act, shade};
use crate::model::*;

pub const CATEGORIES: &[&str] = &["salad", "cake", "soup", "omelette", "stir_fry", "gratin"];

#[derive(Debug, Clone, Copy)]
enum Unit {
    Each,
    Cup,
    Tbsp,
    Pinch,
    Clove,
    Gram,
}

#[derive(Debug, Clone, Copy)]
struct Ingredient {
    kind: &'static str,
    names: &'static [(&'static str, &'static str)],
    colours: &'static [[u8; 3]],
    inner: [u8; 3],
    shape: Shape,
    peel: bool,
    count: (u32, u32),
    unit: Unit,
    cut: &'static [&'static str],
}

macro_rules! ing {
    ($kind:literal, $names:expr, $colours:expr, $inner:expr, $shape:ident, $peel:expr, $count:expr, $unit:ident, $cut:expr) => {
        Ingredient {
            kind: $kind,
            names: $names,
            colours: $colours,
            inner: $inner,
            shape: Shape::$shape,
            peel: $peel,
            count: $count,
            unit: Unit::$unit,
            cut: $cut,
        }
    };
}

const INGREDIENTS: &[Ingredient] = &[
    ing!(
        "tomato",
        &[("tomato", "tomatoes"), ("ripe tomato", "ripe tomatoes")],
        &[[210, 40, 35], [225, 70, 30]],
        [235, 95, 75],
        Round,
        false,
        (2, 4),
        Each,
        &["dice", "chop", "slice"]
    ),
    ing!(
        "onion",
        &[("onion", "onions"), ("yellow onion", "yellow onions")],
        &[[205, 160, 90]],
        [242, 236, 214],
        Round,
        true,
        (1, 2),
        Each,
        &["dice", "chop", "slice", "mince"]
    ),
    ing!(
        "red_onion",
        &[("red onion", "red onions")],
        &[[130, 40, 95]],
        [226, 180, 210],
        Round,
        true,
        (1, 2),
        Each,
        &["dice", "slice", "chop"]
    ),
    ing!(
        "carrot",
        &[("carrot", "carrots")],
        &[[240, 120, 30]],
        [250, 155, 60],
        Long,
        true,
        (2, 3),
        Each,
        &["dice", "slice", "chop", "julienne"]
    ),
    ing!(
        "potato",
        &[("potato", "potatoes"), ("waxy potato", "waxy potatoes")],
        &[[190, 150, 100]],
        [242, 226, 160],
        Oval,
        true,
        (3, 5),
        Each,
        &["dice", "slice", "cube"]
    ),
    ing!(
        "cucumber",
        &[("cucumber", "cucumbers")],
        &[[45, 125, 50]],
        [205, 232, 175],
        Long,
        false,
        (1, 2),
        Each,
        &["slice", "dice", "chop"]
    ),
    ing!(
        "lettuce",
        &[("head of lettuce", "heads of lettuce"), ("lettuce", "lettuce")],
        &[[110, 190, 80]],
        [160, 215, 120],
        Leaf,
        false,
        (1, 1),
        Each,
        &["chop", "shred", "tear"]
    ),
    ing!(
        "bell_pepper",
        &[("bell pepper", "bell peppers"), ("pepper", "peppers")],
        &[[220, 45, 40], [245, 200, 40], [60, 150, 50]],
        [240, 220, 180],
        Round,
        false,
        (1, 2),
        Each,
        &["slice", "dice", "chop"]
    ),
    ing!(
        "apple",
        &[("apple", "apples")],
        &[[195, 30, 40], [150, 200, 60]],
        [246, 236, 200],
        Round,
        true,
        (2, 3),
        Each,
        &["slice", "dice", "chop"]
    ),
    ing!(
        "garlic",
        &[("garlic clove", "garlic cloves"), ("clove of garlic", "cloves of garlic")],
        &[[240, 235, 220]],
        [250, 246, 226],
        Small,
        true,
        (2, 4),
        Clove,
        &["mince", "chop", "crush"]
    ),
    ing!(
        "mushroom",
        &[("mushroom", "mushrooms"), ("button mushroom", "button mushrooms")],
        &[[205, 175, 145]],
        [238, 222, 196],
        Round,
        false,
        (4, 8),
        Each,
        &["slice", "chop", "quarter"]
    ),
    ing!(
        "zucchini",
        &[("zucchini", "zucchini"), ("courgette", "courgettes")],
        &[[60, 115, 40]],
        [222, 232, 172],
        Long,
        false,
        (1, 2),
        Each,
        &["slice", "dice", "chop"]
    ),
    ing!(
        "chicken",
        &[("chicken breast", "chicken breasts")],
        &[[242, 192, 172]],
        [236, 204, 188],
        Block,
        false,
        (1, 2),
        Each,
        &["dice", "slice", "cube"]
    ),
    ing!(
        "cheese",
        &[("cheese", "cheese"), ("cheddar", "cheddar")],
        &[[246, 200, 60]],
        [250, 215, 90],
        Block,
        false,
        (1, 3),
        Gram,
        &["cube", "slice", "crumble"]
    ),
    ing!(
        "chocolate",
        &[("dark chocolate", "dark chocolate"), ("chocolate", "chocolate")],
        &[[85, 48, 28]],
        [110, 65, 40],
        Block,
        false,
        (1, 2),
        Gram,
        &["chop", "break up"]
    ),
    ing!(
        "walnuts",
        &[("walnuts", "walnuts"), ("nuts", "nuts")],
        &[[155, 105, 58]],
        [190, 145, 90],
        Small,
        false,
        (1, 1),
        Cup,
        &["chop", "crush"]
    ),
    ing!(
        "blueberries",
        &[("blueberries", "blueberries")],
        &[[62, 62, 140]],
        [90, 60, 120],
        Small,
        false,
        (1, 1),
        Cup,
        &[]
    ),
    ing!(
        "egg",
        &[("egg", "eggs"), ("large egg", "large eggs")],
        &[[246, 238, 220], [205, 155, 105]],
        [250, 200, 40],
        Oval,
        false,
        (2, 4),
        Each,
        &[]
    ),
    ing!(
        "flour",
        &[("flour", "flour"), ("all-purpose flour", "all-purpose flour"), ("plain flour", "plain flour")],
        &[[248, 246, 240]],
        [248, 246, 240],
        Powder,
        false,
        (1, 3),
        Cup,
        &[]
    ),
    ing!(
        "sugar",
        &[("sugar", "sugar"), ("caster sugar", "caster sugar")],
        &[[252, 252, 250]],
        [252, 252, 250],
        Powder,
        false,
        (1, 2),
        Cup,
        &[]
    ),
    ing!(
        "cocoa",
        &[("cocoa powder", "cocoa powder"), ("cocoa", "cocoa")],
        &[[105, 62, 40]],
        [105, 62, 40],
        Powder,
        false,
        (2, 4),
        Tbsp,
        &[]
    ),
    ing!(
        "butter",
        &[("butter", "butter")],
        &[[250, 226, 130]],
        [252, 232, 150],
        Block,
        false,
        (2, 6),
        Tbsp,
        &["cube", "dice"]
    ),
    ing!(
        "milk",
        &[("milk", "milk"), ("whole milk", "whole milk")],
        &[[250, 250, 245]],
        [250, 250, 245],
        Liquid,
        false,
        (1, 2),
        Cup,
        &[]
    ),
    ing!(
        "cream",
        &[("cream", "cream"), ("heavy cream", "heavy cream")],
        &[[250, 244, 228]],
        [250, 244, 228],
        Liquid,
        false,
        (1, 2),
        Cup,
        &[]
    ),
    ing!(
        "oil",
        &[("olive oil", "olive oil"), ("oil", "oil")],
        &[[205, 185, 60]],
        [205, 185, 60],
        Liquid,
        false,
        (1, 3),
        Tbsp,
        &[]
    ),
    ing!(
        "vinegar",
        &[("vinegar", "vinegar"), ("red wine vinegar", "red wine vinegar")],
        &[[175, 95, 95]],
        [175, 95, 95],
        Liquid,
        false,
        (1, 2),
        Tbsp,
        &[]
    ),
    ing!(
        "lemon_juice",
        &[("lemon juice", "lemon juice")],
        &[[250, 240, 150]],
        [250, 240, 150],
        Liquid,
        false,
        (1, 2),
        Tbsp,
        &[]
    ),
    ing!(
        "stock",
        &[("vegetable stock", "vegetable stock"), ("stock", "stock"), ("broth", "broth")],
        &[[205, 160, 90]],
        [205, 160, 90],
        Liquid,
        false,
        (3, 5),
        Cup,
        &[]
    ),
    ing!("water", &[("water", "water")], &[[185, 212, 236]], [185, 212, 236], Liquid, false, (1, 3), Cup, &[]),
    ing!(
        "salt",
        &[("salt", "salt"), ("sea salt", "sea salt")],
        &[[250, 250, 250]],
        [250, 250, 250],
        Powder,
        false,
        (1, 1),
        Pinch,
        &[]
    ),
    ing!("soy_sauce", &[("soy sauce", "soy sauce")], &[[62, 32, 16]], [62, 32, 16], Liquid, false, (2, 3), Tbsp, &[]),
    ing!("honey", &[("honey", "honey")], &[[232, 172, 40]], [232, 172, 40], Liquid, false, (1, 2), Tbsp, &[]),
    ing!(
        "rice",
        &[("rice", "rice"), ("long-grain rice", "long-grain rice")],
        &[[246, 246, 236]],
        [246, 246, 236],
        Small,
        false,
        (1, 2),
        Cup,
        &[]
    ),
];

const WHITE: &[[u8; 3]] = &[[246, 246, 242]];
const METAL: &[[u8; 3]] = &[[170, 174, 180], [140, 144, 150]];
const CERAMIC: &[[u8; 3]] = &[[246, 246, 242], [120, 170, 200], [215, 120, 90], [140, 185, 140], [235, 205, 120]];
const WOOD: &[[u8; 3]] = &[[200, 160, 110], [170, 125, 80], [225, 195, 150]];
const DARK: &[[u8; 3]] = &[[45, 45, 50], [60, 55, 52]];

macro_rules! prop {
    ($name:ident, $kind:literal, $names:expr, $role:ident, $colours:expr) => {
        pub const $name: PropKind = PropKind { kind: $kind, names: $names, role: PropRole::$role, colours: $colours };
    };
}

prop!(KNIFE, "knife", &["knife", "sharp knife", "chef's knife"], Tool, DARK);
prop!(PEELER, "peeler", &["peeler", "vegetable peeler"], Tool, METAL);
prop!(WHISK, "whisk", &["whisk", "balloon whisk"], Tool, METAL);
prop!(FORK, "fork", &["fork"], Tool, METAL);
prop!(SPOON, "spoon", &["wooden spoon", "spoon"], Tool, WOOD);
prop!(SPATULA, "spatula", &["spatula"], Tool, DARK);
prop!(LADLE, "ladle", &["ladle"], Tool, METAL);
prop!(BRUSH, "pastry_brush", &["pastry brush", "brush"], Tool, WOOD);
prop!(BLENDER, "blender", &["hand blender", "stick blender"], Tool, WHITE);
prop!(BOARD, "board", &["cutting board", "chopping board", "board"], Container, WOOD);
prop!(MIXING_BOWL, "mixing_bowl", &["mixing bowl", "large bowl", "bowl"], Container, CERAMIC);
prop!(SMALL_BOWL, "small_bowl", &["small bowl", "bowl"], Container, CERAMIC);
prop!(SALAD_BOWL, "salad_bowl", &["salad bowl", "serving bowl"], Container, CERAMIC);
prop!(JAR, "jar", &["jar", "jam jar"], Container, &[[215, 228, 232]]);
prop!(POT, "pot", &["pot", "saucepan", "large pot"], Container, METAL);
prop!(PAN, "pan", &["frying pan", "skillet", "pan"], Container, DARK);
prop!(WOK, "wok", &["wok"], Container, DARK);
prop!(CAKE_TIN, "cake_tin", &["cake tin", "baking tin", "tin"], Container, METAL);
prop!(BAKING_DISH, "baking_dish", &["baking dish", "casserole dish", "dish"], Container, CERAMIC);
prop!(PLATE, "plate", &["plate", "serving plate"], Container, WHITE);
prop!(PLATES, "plates", &["plates", "dinner plates"], Container, WHITE);
prop!(SOUP_BOWLS, "soup_bowls", &["bowls", "soup bowls"], Container, CERAMIC);
prop!(STOVE, "stove", &["stove", "hob", "burner"], Habitat, DARK);
prop!(OVEN, "oven", &["oven"], Habitat, &[[70, 70, 75], [230, 230, 228]]);
prop!(FRIDGE, "fridge", &["fridge", "refrigerator"], Habitat, WHITE);

fn find(kind: &str) -> &'static Ingredient {
    INGREDIENTS.iter().find(|i| i.kind == kind).expect("ingredient kinds used by recipes are in the catalogue")
}

fn quantity(i: &Ingredient, n: u32, names: &(String, String)) -> String {
    let (sing, plural) = (&names.0, &names.1);
    let s = |n: u32| if n == 1 { "" } else { "s" };
    match i.unit {
        Unit::Each => format!("{n} {}", if n == 1 { sing } else { plural }),
        Unit::Cup => format!("{n} cup{} of {sing}", s(n)),
        Unit::Tbsp => format!("{n} tablespoon{} of {sing}", s(n)),
        Unit::Pinch => format!("a pinch of {sing}"),
        Unit::Clove => format!("{n} {}", if n == 1 { sing } else { plural }),
        Unit::Gram => format!("{} g of {sing}", n * 50),
    }
}

/// Add an ingredient from the catalogue (random alias order, colour and count).
fn ingredient(b: &mut Builder, kind: &str) -> EntityId {
    let i = find(kind);
    let count = b.range(i.count.0, i.count.1);
    let mut names: Vec<(String, String)> = i.names.iter().map(|(s, p)| (s.to_string(), p.to_string())).collect();
    let first = b.range(0, names.len() as u32 - 1) as usize;
    names.swap(0, first);
    let colour = *b.pick(i.colours);
    let counted = matches!(i.unit, Unit::Each | Unit::Clove);
    let spec = EntitySpec {
        id: kind.to_string(),
        kind: kind.to_string(),
        quantity: quantity(i, count, &names[0]),
        names,
        names_by_tag: Vec::new(),
        role: EntityRole::Ingredient,
        colour,
        inner: if i.colours.len() > 1 && kind == "bell_pepper" { shade(colour, 0.35) } else { i.inner },
        shape: i.shape,
        count: if counted { count } else { 1 },
        needs_peeling: i.peel,
        cut_verbs: i.cut.to_vec(),
        blends: true,
        geometry: None,
    };
    b.entity(spec, Loc::Start)
}

/// Declare an intermediate ("the batter" that becomes "the cake" once baked).
fn intermediate(b: &mut Builder, id: &str, names: &[&str], by_tag: &[(u16, &str)], blends: bool) -> EntityId {
    let first = *b.pick(names);
    let mut all = vec![(first.to_string(), first.to_string())];
    all.extend(names.iter().filter(|n| **n != first).map(|n| (n.to_string(), n.to_string())));
    let spec = EntitySpec {
        id: id.to_string(),
        kind: "mixture".into(),
        names: all,
        names_by_tag: by_tag.iter().map(|(t, n)| (*t, n.to_string())).collect(),
        role: EntityRole::Intermediate,
        colour: [0; 3],
        inner: [0; 3],
        shape: Shape::Composite,
        count: 1,
        quantity: String::new(),
        needs_peeling: false,
        cut_verbs: vec!["slice", "cut"],
        blends,
        geometry: None,
    };
    b.entity(spec, Loc::Absent)
}

/// Peel (when needed) and cut an ingredient on the board.
fn prep(b: &mut Builder, e: EntityId) {
    let board = b.prop(&BOARD);
    if b.entities[e].needs_peeling {
        // Garlic and onions are peeled with the knife, the rest with a peeler.
        let peeler = if matches!(b.entities[e].kind.as_str(), "garlic" | "onion" | "red_onion") {
            b.prop(&KNIFE)
        } else {
            b.prop(&PEELER)
        };
        b.act(act(Verb::Peel).on(e).tool(peeler).inside(board));
    }
    if !b.entities[e].cut_verbs.is_empty() {
        let knife = b.prop(&KNIFE);
        b.act(act(Verb::Chop).on(e).tool(knife).inside(board));
    }
}

/// Build one cooking procedure of `category`; returns its goal phrase and title.
pub fn build(b: &mut Builder, category: &str) -> (String, String) {
    match category {
        "salad" => salad(b),
        "cake" => cake(b),
        "soup" => soup(b),
        "omelette" => omelette(b),
        "stir_fry" => stir_fry(b),
        _ => gratin(b),
    }
}

fn salad(b: &mut Builder) -> (String, String) {
    let n = b.range(3, 5) as usize;
    let veg = b.sample(&["lettuce", "tomato", "cucumber", "carrot", "bell_pepper", "red_onion", "apple"], n);
    let bowl = b.prop(&SALAD_BOWL);
    let mut groups: Vec<Vec<EntityId>> = Vec::new();
    for v in &veg {
        let e = ingredient(b, v);
        groups.push(vec![e]);
    }
    let dressing = b.chance(0.75);
    let dressing_first = dressing && b.chance(0.3);
    let spoon = if b.chance(0.5) { b.prop(&SPOON) } else { b.prop(&FORK) };
    let salad = intermediate(b, "salad", &["salad", "salad mix"], &[], false);
    let make_dressing = |b: &mut Builder| -> EntityId {
        let jar = if b.chance(0.5) { b.prop(&JAR) } else { b.prop(&SMALL_BOWL) };
        let oil = ingredient(b, "oil");
        let acid = if b.chance(0.5) { "vinegar" } else { "lemon_juice" };
        let acid = ingredient(b, acid);
        let salt = ingredient(b, "salt");
        let d = intermediate(b, "dressing", &["dressing", "vinaigrette"], &[], true);
        let whisk = b.prop(&WHISK);
        let mut adds = vec![oil, acid, salt];
        b.shuffle(&mut adds);
        if b.chance(0.5) {
            b.act(act(Verb::Add).on_all(&adds).to(jar));
        } else {
            for e in adds {
                b.act(act(Verb::Add).on(e).to(jar));
            }
        }
        b.act(act(Verb::Mix).inside(jar).tool(whisk).making(d));
        jar
    };
    let mut jar = None;
    if dressing_first {
        jar = Some(make_dressing(b));
    }
    for g in &groups {
        prep(b, g[0]);
        b.act(act(Verb::Add).on(g[0]).to(bowl));
    }
    if dressing && !dressing_first {
        jar = Some(make_dressing(b));
    }
    if let Some(j) = jar {
        b.act(act(Verb::Pour).inside(j).to(bowl));
    }
    b.act(act(Verb::Mix).inside(bowl).tool(spoon).making(salad));
    if b.chance(0.35) {
        let fridge = b.prop(&FRIDGE);
        let v = b.range(2, 6);
        b.act(act(Verb::Chill).inside(bowl).at(fridge).detail(format!("{} minutes", 10 * v)));
    }
    if b.chance(0.6) {
        let v = b.range(2, 4);
        let plates = b.new_prop(&PLATES, v);
        b.act(act(Verb::Serve).inside(bowl).to(plates));
    }
    let main = b.entities[groups[0][0]].name().to_string();
    let title = format!("{} Salad", title_case(&main));
    (format!("a {main} salad"), title)
}

fn cake(b: &mut Builder) -> (String, String) {
    let oven = b.prop(&OVEN);
    let tin = if b.chance(0.6) { b.prop(&CAKE_TIN) } else { b.prop(&BAKING_DISH) };
    let brush = b.prop(&BRUSH);
    let bowl = b.prop(&MIXING_BOWL);
    let whisk = if b.chance(0.7) { b.prop(&WHISK) } else { b.prop(&SPOON) };
    let temp = 10 * b.range(16, 19);
    b.act(act(Verb::Preheat).at(oven).detail(format!("{temp}°C")));
    b.act(act(Verb::Grease).inside(tin).tool(brush));
    let flour = ingredient(b, "flour");
    let sugar = ingredient(b, "sugar");
    let mut dry = vec![flour, sugar];
    if b.chance(0.4) {
        dry.push(ingredient(b, "cocoa"));
    }
    let eggs = ingredient(b, "egg");
    let liquid = if b.chance(0.6) { "milk" } else { "cream" };
    let milk = ingredient(b, liquid);
    let batter = intermediate(b, "batter", &["batter", "cake batter", "mixture"], &[(tag::BAKED, "cake")], true);
    // Melted butter is its own little chain on the stove.
    if b.chance(0.5) {
        let butter = ingredient(b, "butter");
        let pan = b.prop(&PAN);
        let stove = b.prop(&STOVE);
        b.act(act(Verb::Add).on(butter).to(pan));
        b.act(act(Verb::Heat).inside(pan).at(stove));
        if b.chance(0.5) {
            b.act(act(Verb::Add).on_all(&dry).to(bowl));
        } else {
            for &d in &dry {
                b.act(act(Verb::Add).on(d).to(bowl));
            }
        }
        b.act(act(Verb::Pour).inside(pan).to(bowl));
    } else if b.chance(0.5) {
        b.act(act(Verb::Add).on_all(&dry).to(bowl));
    } else {
        for &d in &dry {
            b.act(act(Verb::Add).on(d).to(bowl));
        }
    }
    b.act(act(Verb::Add).on(eggs).to(bowl));
    b.act(act(Verb::Add).on(milk).to(bowl));
    b.act(act(Verb::Mix).inside(bowl).tool(whisk).making(batter));
    let mut flavour = "vanilla".to_string();
    if b.chance(0.6) {
        let extra = *b.pick(&["chocolate", "walnuts", "blueberries", "apple", "carrot"]);
        let e = ingredient(b, extra);
        flavour = b.entities[e].name().to_string();
        prep(b, e);
        b.act(act(Verb::Add).on(e).to(bowl));
        let spoon = b.prop(&SPOON);
        b.act(act(Verb::Mix).inside(bowl).tool(spoon).making(batter));
    }
    b.act(act(Verb::Pour).inside(bowl).to(tin));
    let v = b.range(5, 9);
    b.act(act(Verb::Bake).inside(tin).at(oven).detail(format!("{} minutes", 5 * v)));
    if b.chance(0.6) {
        let plate = b.prop(&PLATE);
        b.act(act(Verb::Invert).inside(tin).to(plate));
        if b.chance(0.5) {
            let knife = b.prop(&KNIFE);
            b.act(act(Verb::Chop).on(batter).tool(knife));
        }
    }
    (format!("{} {flavour} cake", crate::text::article(&flavour)), format!("{} Cake", title_case(&flavour)))
}

fn soup(b: &mut Builder) -> (String, String) {
    let pot = b.prop(&POT);
    let stove = b.prop(&STOVE);
    let onion = ingredient(b, "onion");
    let n = b.range(2, 3) as usize;
    let others = b.sample(&["carrot", "potato", "tomato", "zucchini", "mushroom", "bell_pepper"], n);
    let others: Vec<EntityId> = others.iter().map(|k| ingredient(b, k)).collect();
    let v = b.chance(0.5);
    let garlic = if v { Some(ingredient(b, "garlic")) } else { None };
    let v = b.chance(0.6);
    let oil = ingredient(b, if v { "oil" } else { "butter" });
    let v = b.chance(0.6);
    let stock = ingredient(b, if v { "stock" } else { "water" });
    let soup = intermediate(b, "soup", &["soup", "soup base"], &[(tag::HEATED, "soup")], true);
    let spoon = b.prop(&SPOON);
    prep(b, onion);
    if let Some(g) = garlic {
        prep(b, g);
    }
    let prep_first = b.chance(0.5);
    if prep_first {
        for &o in &others {
            prep(b, o);
        }
    }
    b.act(act(Verb::Add).on(oil).to(pot));
    b.act(act(Verb::Heat).inside(pot).at(stove));
    let mut aromatics = vec![onion];
    aromatics.extend(garlic);
    b.act(act(Verb::Add).on_all(&aromatics).to(pot));
    let v = b.range(3, 6);
    b.act(act(Verb::Heat).inside(pot).at(stove).detail(format!("{} minutes", v)));
    if !prep_first {
        for &o in &others {
            prep(b, o);
        }
    }
    for &o in &others {
        b.act(act(Verb::Add).on(o).to(pot));
    }
    b.act(act(Verb::Add).on(stock).to(pot));
    b.act(act(Verb::Mix).inside(pot).tool(spoon).making(soup));
    let v = b.range(3, 6);
    b.act(act(Verb::Heat).inside(pot).at(stove).detail(format!("{} minutes", 5 * v)));
    if b.chance(0.5) {
        let salt = ingredient(b, "salt");
        b.act(act(Verb::Add).on(salt).to(pot));
        let blender = if b.chance(0.5) { b.prop(&BLENDER) } else { spoon };
        b.act(act(Verb::Mix).inside(pot).tool(blender).making(soup));
    }
    let v = b.range(2, 4);
    let bowls = b.new_prop(&SOUP_BOWLS, v);
    let ladle = b.prop(&LADLE);
    b.act(act(Verb::Serve).inside(pot).to(bowls).tool(ladle));
    let main = b.entities[others[0]].name().to_string();
    (format!("a {main} soup"), format!("{} Soup", title_case(&main)))
}

fn omelette(b: &mut Builder) -> (String, String) {
    let bowl = b.prop(&SMALL_BOWL);
    let eggs = ingredient(b, "egg");
    let milk = ingredient(b, "milk");
    let salt = ingredient(b, "salt");
    let whisk = if b.chance(0.5) { b.prop(&WHISK) } else { b.prop(&FORK) };
    let mix = intermediate(b, "egg_mixture", &["egg mixture", "beaten eggs"], &[(tag::HEATED, "omelette")], true);
    let pan = b.prop(&PAN);
    let stove = b.prop(&STOVE);
    let spatula = b.prop(&SPATULA);
    let n = b.range(1, 2) as usize;
    let fill_kinds = b.sample(&["mushroom", "bell_pepper", "onion", "cheese", "tomato"], n);
    let fillings: Vec<EntityId> = fill_kinds.iter().map(|k| ingredient(b, k)).collect();
    let fat = ingredient(b, "butter");
    let filling_first = b.chance(0.5);
    if filling_first {
        for &f in &fillings {
            prep(b, f);
        }
    }
    b.act(act(Verb::Add).on(eggs).to(bowl));
    b.act(act(Verb::Add).on_all(&[milk, salt]).to(bowl));
    b.act(act(Verb::Mix).inside(bowl).tool(whisk).making(mix));
    if !filling_first {
        for &f in &fillings {
            prep(b, f);
        }
    }
    b.act(act(Verb::Add).on(fat).to(pan));
    b.act(act(Verb::Heat).inside(pan).at(stove));
    b.act(act(Verb::Pour).inside(bowl).to(pan));
    b.act(act(Verb::Add).on_all(&fillings).to(pan));
    let v = b.range(2, 4);
    b.act(act(Verb::Heat).inside(pan).at(stove).tool(spatula).detail(format!("{} minutes", v)));
    let plate = b.prop(&PLATE);
    b.act(act(Verb::Serve).inside(pan).to(plate).tool(spatula));
    let main = b.entities[fillings[0]].name().to_string();
    (format!("a {main} omelette"), format!("{} Omelette", title_case(&main)))
}

fn stir_fry(b: &mut Builder) -> (String, String) {
    let wok = if b.chance(0.6) { b.prop(&WOK) } else { b.prop(&PAN) };
    let stove = b.prop(&STOVE);
    let chicken = ingredient(b, "chicken");
    let n = b.range(2, 3) as usize;
    let veg = b.sample(&["bell_pepper", "carrot", "onion", "zucchini", "mushroom"], n);
    let veg: Vec<EntityId> = veg.iter().map(|k| ingredient(b, k)).collect();
    let oil = ingredient(b, "oil");
    let sauce_bowl = b.prop(&SMALL_BOWL);
    let soy = ingredient(b, "soy_sauce");
    let honey = ingredient(b, "honey");
    let sauce = intermediate(b, "sauce", &["sauce", "stir-fry sauce"], &[], true);
    let dish = intermediate(b, "stir_fry", &["stir-fry", "stir fry"], &[], false);
    let spatula = b.prop(&SPATULA);
    let whisk = b.prop(&FORK);
    let with_rice = b.chance(0.6);
    let cook_rice = |b: &mut Builder| {
        let pot = b.prop(&POT);
        let rice = ingredient(b, "rice");
        let water = ingredient(b, "water");
        b.act(act(Verb::Add).on_all(&[rice, water]).to(pot));
        let v = b.range(3, 4);
        b.act(act(Verb::Heat).inside(pot).at(stove).detail(format!("{} minutes", 5 * v)));
        pot
    };
    let mut rice_pot = None;
    if with_rice && b.chance(0.5) {
        rice_pot = Some(cook_rice(b));
    }
    let mut sauce_adds = vec![soy, honey];
    b.shuffle(&mut sauce_adds);
    b.act(act(Verb::Add).on_all(&sauce_adds).to(sauce_bowl));
    b.act(act(Verb::Mix).inside(sauce_bowl).tool(whisk).making(sauce));
    prep(b, chicken);
    for &v in &veg {
        prep(b, v);
    }
    b.act(act(Verb::Add).on(oil).to(wok));
    b.act(act(Verb::Heat).inside(wok).at(stove));
    b.act(act(Verb::Add).on(chicken).to(wok));
    let v = b.range(4, 7);
    b.act(act(Verb::Heat).inside(wok).at(stove).tool(spatula).detail(format!("{} minutes", v)));
    b.act(act(Verb::Add).on_all(&veg).to(wok));
    let v = b.range(2, 5);
    b.act(act(Verb::Heat).inside(wok).at(stove).tool(spatula).detail(format!("{} minutes", v)));
    b.act(act(Verb::Pour).inside(sauce_bowl).to(wok));
    b.act(act(Verb::Mix).inside(wok).tool(spatula).making(dish));
    if with_rice && rice_pot.is_none() {
        rice_pot = Some(cook_rice(b));
    }
    let v = b.range(2, 4);
    let plates = b.new_prop(&PLATES, v);
    if let Some(p) = rice_pot {
        b.act(act(Verb::Serve).inside(p).to(plates));
    }
    b.act(act(Verb::Serve).inside(wok).to(plates).tool(spatula));
    let main = b.entities[veg[0]].name().to_string();
    (format!("a chicken and {main} stir-fry"), format!("Chicken and {} Stir-Fry", title_case(&main)))
}

fn gratin(b: &mut Builder) -> (String, String) {
    let oven = b.prop(&OVEN);
    let dish = b.prop(&BAKING_DISH);
    let brush = b.prop(&BRUSH);
    let bowl = b.prop(&MIXING_BOWL);
    let main_kind = *b.pick(&["potato", "zucchini", "potato"]);
    let main = ingredient(b, main_kind);
    let v = b.chance(0.5);
    let second = if v { Some(ingredient(b, "onion")) } else { None };
    let cream = ingredient(b, "cream");
    let cheese = ingredient(b, "cheese");
    let salt = ingredient(b, "salt");
    let sauce = intermediate(b, "sauce", &["sauce", "cream sauce"], &[], true);
    let gratin = intermediate(b, "gratin", &["gratin", "bake"], &[], false);
    let whisk = b.prop(&WHISK);
    let temp = 10 * b.range(18, 21);
    b.act(act(Verb::Preheat).at(oven).detail(format!("{temp}°C")));
    b.act(act(Verb::Grease).inside(dish).tool(brush));
    prep(b, main);
    if let Some(s) = second {
        prep(b, s);
    }
    prep(b, cheese);
    let mut layer = vec![main];
    layer.extend(second);
    b.act(act(Verb::Add).on_all(&layer).to(dish));
    b.act(act(Verb::Add).on_all(&[cream, salt]).to(bowl));
    b.act(act(Verb::Mix).inside(bowl).tool(whisk).making(sauce));
    b.act(act(Verb::Pour).inside(bowl).to(dish));
    b.act(act(Verb::Add).on(cheese).to(dish));
    let spoon = b.prop(&SPOON);
    b.act(act(Verb::Mix).inside(dish).tool(spoon).making(gratin));
    let v = b.range(6, 10);
    b.act(act(Verb::Bake).inside(dish).at(oven).detail(format!("{} minutes", 5 * v)));
    if b.chance(0.5) {
        let v = b.range(2, 4);
        let plates = b.new_prop(&PLATES, v);
        b.act(act(Verb::Serve).inside(dish).to(plates).tool(spoon));
    }
    let name = b.entities[main].name().to_string();
    (format!("a {name} gratin"), format!("{} Gratin", title_case(&name)))
}

pub fn title_case(s: &str) -> String {
    s.split(' ')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
