//! Drawing vocabulary shared by both scenes: a [`Painter`] with local frames and soft shadows, and the icons of
//! items, tools and containers.

use super::raster::{Canvas, P, Prng, Shape, add, rotate};
use crate::builder::shade;
use crate::model::{EntitySpec, Shape as Form, tag};

/// Where a local drawing goes: `origin + rotate(local * scale, rot)`.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub origin: P,
    pub scale: f32,
    pub rot: f32,
}

impl Frame {
    pub fn at(origin: P, scale: f32, rot: f32) -> Self {
        Frame { origin, scale, rot }
    }
    pub fn p(&self, local: P) -> P {
        add(self.origin, rotate([local[0] * self.scale, local[1] * self.scale], self.rot))
    }
    pub fn d(&self, v: f32) -> f32 {
        v * self.scale
    }
}

pub struct Painter {
    pub canvas: Canvas,
    /// Direction shadows fall (away from the light).
    pub shadow_dir: P,
}

impl Painter {
    pub fn shape(&mut self, s: Shape, col: [u8; 3]) {
        self.canvas.draw(&s, col, 1.0, 0.0);
    }
    pub fn shape_a(&mut self, s: Shape, col: [u8; 3], alpha: f32) {
        self.canvas.draw(&s, col, alpha, 0.0);
    }
    pub fn circle(&mut self, c: P, r: f32, col: [u8; 3]) {
        self.shape(Shape::Circle { c, r }, col);
    }
    pub fn ellipse(&mut self, c: P, rx: f32, ry: f32, rot: f32, col: [u8; 3]) {
        self.shape(Shape::Ellipse { c, rx, ry, rot }, col);
    }
    pub fn rrect(&mut self, c: P, hw: f32, hh: f32, r: f32, rot: f32, col: [u8; 3]) {
        self.shape(Shape::RoundRect { c, hw, hh, r, rot }, col);
    }
    pub fn capsule(&mut self, a: P, b: P, r: f32, col: [u8; 3]) {
        self.shape(Shape::Capsule { a, b, r }, col);
    }
    /// A soft shadow under an object of radius (rx, ry) at `c`.
    pub fn shadow(&mut self, c: P, rx: f32, ry: f32) {
        let o = [c[0] + self.shadow_dir[0] * rx * 0.25, c[1] + self.shadow_dir[1] * ry * 0.25];
        self.canvas.draw(&Shape::Ellipse { c: o, rx: rx * 1.05, ry: ry * 1.05, rot: 0.0 }, [20, 20, 20], 0.28, 6.0);
    }
    /// A soft glow (hot oven window, lit bulb).
    pub fn glow(&mut self, c: P, r: f32, col: [u8; 3], alpha: f32) {
        self.canvas.draw(&Shape::Circle { c, r }, col, alpha, 14.0);
    }
}

/// Mix two colours.
pub fn lerp(a: [u8; 3], b: [u8; 3], t: f32) -> [u8; 3] {
    [0, 1, 2].map(|k| (a[k] as f32 + (b[k] as f32 - a[k] as f32) * t).round().clamp(0.0, 255.0) as u8)
}

const BROWN: [u8; 3] = [125, 72, 30];

/// How an item looks in a state: skin or flesh colour, browned by heat or baking.
pub fn item_colour(spec: &EntitySpec, tags: u16) -> [u8; 3] {
    let mut c = if tags & (tag::PEELED | tag::CHOPPED) != 0 { spec.inner } else { spec.colour };
    if tags & tag::CRACKED != 0 {
        c = spec.inner;
    }
    if tags & tag::PAINTED != 0 {
        c = spec.inner;
    }
    if tags & tag::BAKED != 0 {
        c = lerp(c, BROWN, 0.5);
    } else if tags & tag::HEATED != 0 {
        c = lerp(c, BROWN, 0.28);
    }
    c
}

/// A whole (uncut) item: the ingredient's shape in its colour, `count` copies side by side (at most 3).
pub fn whole_item(p: &mut Painter, spec: &EntitySpec, tags: u16, c: P, size: f32, count: u32) {
    let col = item_colour(spec, tags);
    let n = count.clamp(1, 3) as usize;
    let step = size * 0.38;
    for i in 0..n {
        let o = [c[0] + (i as f32 - (n - 1) as f32 / 2.0) * step, c[1] + (i % 2) as f32 * size * 0.08];
        let r = size * 0.3;
        match spec.shape {
            Form::Round => {
                p.shadow(o, r, r * 0.8);
                p.circle(o, r, col);
                p.circle([o[0] - r * 0.35, o[1] - r * 0.35], r * 0.28, shade(col, 0.35));
                if tags & tag::PEELED == 0 {
                    p.capsule([o[0], o[1] - r * 0.9], [o[0] + r * 0.15, o[1] - r * 1.25], r * 0.1, [70, 110, 40]);
                }
            }
            Form::Oval => {
                p.shadow(o, r * 0.8, r);
                p.ellipse(o, r * 0.75, r, 0.2, col);
                p.ellipse([o[0] - r * 0.25, o[1] - r * 0.35], r * 0.2, r * 0.3, 0.2, shade(col, 0.3));
            }
            Form::Long => {
                let a = [o[0] - r * 1.1, o[1] + r * 0.3];
                let b = [o[0] + r * 1.1, o[1] - r * 0.3];
                p.shadow(o, r * 1.2, r * 0.5);
                p.shape(
                    Shape::Polygon {
                        pts: vec![
                            [a[0], a[1] - r * 0.4],
                            [a[0], a[1] + r * 0.4],
                            [b[0], b[1] + r * 0.12],
                            [b[0], b[1] - r * 0.12],
                        ],
                    },
                    col,
                );
                if tags & tag::PEELED == 0 && spec.kind == "carrot" {
                    p.capsule(a, [a[0] - r * 0.4, a[1] - r * 0.3], r * 0.12, [70, 140, 50]);
                }
            }
            Form::Leaf => {
                p.shadow(o, r * 1.1, r);
                for (dx, dy) in [(-0.4, 0.1), (0.4, 0.1), (0.0, -0.35), (0.0, 0.3)] {
                    p.circle([o[0] + dx * r, o[1] + dy * r], r * 0.65, col);
                }
                p.circle(o, r * 0.4, shade(col, 0.3));
            }
            Form::Block => {
                p.shadow(o, r, r * 0.7);
                p.rrect(o, r * 0.9, r * 0.6, r * 0.15, 0.0, col);
                p.rrect([o[0] - r * 0.2, o[1] - r * 0.2], r * 0.5, r * 0.15, r * 0.1, 0.0, shade(col, 0.25));
            }
            Form::Powder => {
                // A paper bag with a band of the content's colour.
                p.shadow(o, r * 0.8, r);
                p.rrect(o, r * 0.7, r, r * 0.15, 0.0, [228, 214, 186]);
                p.rrect([o[0], o[1] + r * 0.1], r * 0.7, r * 0.35, 0.0, 0.0, col);
                p.rrect([o[0], o[1] - r * 0.95], r * 0.6, r * 0.12, r * 0.05, 0.0, [200, 186, 160]);
                break;
            }
            Form::Liquid => {
                // A bottle tinted by the liquid.
                p.shadow(o, r * 0.6, r);
                p.rrect([o[0], o[1] + r * 0.15], r * 0.55, r * 0.9, r * 0.25, 0.0, lerp(col, [255, 255, 255], 0.15));
                p.rrect([o[0], o[1] - r * 0.95], r * 0.2, r * 0.3, r * 0.08, 0.0, lerp(col, [230, 230, 230], 0.4));
                p.rrect([o[0], o[1] + r * 0.2], r * 0.45, r * 0.3, 0.0, 0.0, [245, 245, 240]);
                break;
            }
            Form::Small => {
                let mut rng = Prng::new(spec.id.len() as u64 * 31 + spec.kind.len() as u64);
                p.shadow(o, r, r * 0.8);
                for _ in 0..9 {
                    let q = [o[0] + rng.range(-0.7, 0.7) * r, o[1] + rng.range(-0.5, 0.5) * r];
                    p.circle(q, r * 0.22, col);
                }
                break;
            }
            _ => {
                p.circle(o, r, col);
            }
        }
    }
}

/// Cut pieces scattered over an ellipse (chopped items, toppings in a dish).
pub fn pieces(p: &mut Painter, col: [u8; 3], c: P, rx: f32, ry: f32, n: usize, size: f32, seed: u64) {
    let mut rng = Prng::new(seed);
    for _ in 0..n {
        let a = rng.range(0.0, std::f32::consts::TAU);
        let r = rng.f().sqrt();
        let q = [c[0] + a.cos() * r * rx, c[1] + a.sin() * r * ry];
        let v = rng.range(-0.12, 0.12);
        let pc = shade(col, v);
        p.rrect(q, size, size * rng.range(0.6, 1.0), size * 0.3, rng.range(0.0, 3.0), pc);
    }
}

/// Tools, drawn along their local x axis (length 1).
pub fn tool(p: &mut Painter, kind: &str, colour: [u8; 3], f: Frame) {
    let metal = [198, 202, 208];
    let h = |v: f32| f.d(v);
    match kind {
        "knife" => {
            p.rrect(f.p([-0.3, 0.0]), h(0.2), h(0.055), h(0.03), f.rot, colour);
            p.shape(
                Shape::Polygon {
                    pts: vec![
                        f.p([-0.1, -0.06]),
                        f.p([0.42, -0.06]),
                        f.p([0.5, 0.0]),
                        f.p([0.45, 0.05]),
                        f.p([-0.1, 0.05]),
                    ],
                },
                metal,
            );
        }
        "peeler" => {
            p.rrect(f.p([-0.2, 0.0]), h(0.3), h(0.05), h(0.03), f.rot, colour);
            p.shape(Shape::Ring { c: f.p([0.25, 0.0]), r: h(0.13), t: h(0.025) }, metal);
        }
        "whisk" => {
            p.rrect(f.p([-0.3, 0.0]), h(0.22), h(0.05), h(0.03), f.rot, colour);
            for k in [0.05f32, 0.1, 0.15] {
                p.shape(
                    Shape::EllipseRing { c: f.p([0.22, 0.0]), rx: h(0.3), ry: h(k), rot: f.rot, t: h(0.012) },
                    metal,
                );
            }
        }
        "fork" => {
            p.capsule(f.p([-0.5, 0.0]), f.p([0.15, 0.0]), h(0.035), colour);
            for k in [-0.05f32, 0.0, 0.05] {
                p.capsule(f.p([0.15, k]), f.p([0.45, k]), h(0.015), colour);
            }
        }
        "spoon" => {
            p.capsule(f.p([-0.5, 0.0]), f.p([0.15, 0.0]), h(0.035), colour);
            p.ellipse(f.p([0.32, 0.0]), h(0.17), h(0.1), f.rot, colour);
            p.ellipse(f.p([0.32, 0.0]), h(0.11), h(0.06), f.rot, shade(colour, -0.15));
        }
        "spatula" => {
            p.capsule(f.p([-0.5, 0.0]), f.p([0.15, 0.0]), h(0.035), colour);
            p.rrect(f.p([0.32, 0.0]), h(0.16), h(0.12), h(0.03), f.rot, colour);
        }
        "ladle" => {
            p.capsule(f.p([-0.5, 0.0]), f.p([0.2, 0.0]), h(0.03), metal);
            p.circle(f.p([0.35, 0.0]), h(0.14), metal);
            p.circle(f.p([0.35, 0.0]), h(0.1), shade(metal, -0.25));
        }
        "pastry_brush" | "paintbrush" => {
            p.capsule(f.p([-0.5, 0.0]), f.p([0.1, 0.0]), h(0.04), colour);
            p.rrect(f.p([0.16, 0.0]), h(0.06), h(0.07), 0.0, f.rot, metal);
            p.rrect(f.p([0.33, 0.0]), h(0.12), h(0.08), h(0.02), f.rot, [240, 222, 176]);
        }
        "blender" => {
            p.rrect(f.p([-0.1, 0.0]), h(0.4), h(0.09), h(0.06), f.rot, colour);
            p.circle(f.p([0.38, 0.0]), h(0.11), [150, 150, 155]);
        }
        "screwdriver" => {
            p.rrect(f.p([-0.3, 0.0]), h(0.2), h(0.08), h(0.06), f.rot, colour);
            p.capsule(f.p([-0.1, 0.0]), f.p([0.48, 0.0]), h(0.025), metal);
        }
        "allen_key" => {
            p.capsule(f.p([-0.3, 0.0]), f.p([0.45, 0.0]), h(0.035), [70, 72, 78]);
            p.capsule(f.p([-0.3, 0.0]), f.p([-0.3, 0.25]), h(0.035), [70, 72, 78]);
        }
        "hammer" => {
            p.capsule(f.p([-0.5, 0.0]), f.p([0.3, 0.0]), h(0.045), colour);
            p.rrect(f.p([0.36, 0.0]), h(0.07), h(0.2), h(0.02), f.rot, [90, 92, 98]);
        }
        "wrench" => {
            p.capsule(f.p([-0.45, 0.0]), f.p([0.25, 0.0]), h(0.05), metal);
            p.circle(f.p([0.36, 0.0]), h(0.13), metal);
            p.rrect(f.p([0.46, 0.0]), h(0.08), h(0.05), 0.0, f.rot, [60, 60, 60]);
        }
        "sandpaper" => {
            p.rrect(f.p([0.0, 0.0]), h(0.3), h(0.2), h(0.03), f.rot, [205, 170, 110]);
            p.rrect(f.p([0.0, -0.12]), h(0.3), h(0.07), h(0.03), f.rot, [120, 80, 50]);
        }
        _ => {
            p.capsule(f.p([-0.5, 0.0]), f.p([0.5, 0.0]), h(0.05), colour);
        }
    }
}
