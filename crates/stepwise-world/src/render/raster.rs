//! A small anti-aliased rasteriser: shapes are signed distance functions in scene coordinates (the unit
//! square, y down), drawn through a camera (offset, zoom, rotation) with coverage from the distance at each
//! pixel centre, then lit by a per-image lighting field.

use image::RgbImage;

pub type P = [f32; 2];

/// Scene-to-pixel transform.
#[derive(Debug, Clone, Copy)]
pub struct Camera {
    pub offset: P,
    pub zoom: f32,
    /// Radians.
    pub rotation: f32,
}

impl Camera {
    pub const IDENTITY: Camera = Camera { offset: [0.0, 0.0], zoom: 1.0, rotation: 0.0 };
}

/// A filled shape.
#[derive(Debug, Clone)]
pub enum Shape {
    Circle {
        c: P,
        r: f32,
    },
    Ellipse {
        c: P,
        rx: f32,
        ry: f32,
        rot: f32,
    },
    /// Centre, half sizes, corner radius, rotation.
    RoundRect {
        c: P,
        hw: f32,
        hh: f32,
        r: f32,
        rot: f32,
    },
    Capsule {
        a: P,
        b: P,
        r: f32,
    },
    Polygon {
        pts: Vec<P>,
    },
    /// A ring (outline of a circle) of the given half thickness.
    Ring {
        c: P,
        r: f32,
        t: f32,
    },
    /// The outline of an ellipse.
    EllipseRing {
        c: P,
        rx: f32,
        ry: f32,
        rot: f32,
        t: f32,
    },
}

impl Shape {
    /// Signed distance from `p` (negative inside).
    fn sdf(&self, p: P) -> f32 {
        match self {
            Shape::Circle { c, r } => len(sub(p, *c)) - r,
            Shape::Ring { c, r, t } => (len(sub(p, *c)) - r).abs() - t,
            Shape::Ellipse { c, rx, ry, rot } => {
                let q = rotate(sub(p, *c), -rot);
                let k = len([q[0] / rx, q[1] / ry]);
                (k - 1.0) * rx.min(*ry)
            }
            Shape::RoundRect { c, hw, hh, r, rot } => {
                let q = rotate(sub(p, *c), -rot);
                let r = r.min(*hw).min(*hh);
                let dx = q[0].abs() - (hw - r);
                let dy = q[1].abs() - (hh - r);
                len([dx.max(0.0), dy.max(0.0)]) + dx.max(dy).min(0.0) - r
            }
            Shape::Capsule { a, b, r } => {
                let pa = sub(p, *a);
                let ba = sub(*b, *a);
                let h = (dot(pa, ba) / dot(ba, ba).max(1e-12)).clamp(0.0, 1.0);
                len(sub(pa, [ba[0] * h, ba[1] * h])) - r
            }
            Shape::Polygon { pts } => polygon_sdf(pts, p),
            Shape::EllipseRing { c, rx, ry, rot, t } => {
                Shape::Ellipse { c: *c, rx: *rx, ry: *ry, rot: *rot }.sdf(p).abs() - t
            }
        }
    }

    /// A bounding box (min, max) in scene coordinates.
    fn bounds(&self) -> (P, P) {
        match self {
            Shape::Circle { c, r } => ([c[0] - r, c[1] - r], [c[0] + r, c[1] + r]),
            Shape::Ring { c, r, t } => ([c[0] - r - t, c[1] - r - t], [c[0] + r + t, c[1] + r + t]),
            Shape::Ellipse { c, rx, ry, .. } => {
                let m = rx.max(*ry);
                ([c[0] - m, c[1] - m], [c[0] + m, c[1] + m])
            }
            Shape::EllipseRing { c, rx, ry, t, .. } => {
                let m = rx.max(*ry) + t;
                ([c[0] - m, c[1] - m], [c[0] + m, c[1] + m])
            }
            Shape::RoundRect { c, hw, hh, .. } => {
                let m = (hw * hw + hh * hh).sqrt();
                ([c[0] - m, c[1] - m], [c[0] + m, c[1] + m])
            }
            Shape::Capsule { a, b, r } => {
                ([a[0].min(b[0]) - r, a[1].min(b[1]) - r], [a[0].max(b[0]) + r, a[1].max(b[1]) + r])
            }
            Shape::Polygon { pts } => {
                let mut lo = [f32::MAX, f32::MAX];
                let mut hi = [f32::MIN, f32::MIN];
                for p in pts {
                    lo = [lo[0].min(p[0]), lo[1].min(p[1])];
                    hi = [hi[0].max(p[0]), hi[1].max(p[1])];
                }
                (lo, hi)
            }
        }
    }
}

fn polygon_sdf(pts: &[P], p: P) -> f32 {
    if pts.len() < 3 {
        return f32::MAX;
    }
    let mut d = f32::MAX;
    let mut inside = false;
    let n = pts.len();
    let mut j = n - 1;
    for i in 0..n {
        let (a, b) = (pts[i], pts[j]);
        let e = sub(b, a);
        let w = sub(p, a);
        let h = (dot(w, e) / dot(e, e).max(1e-12)).clamp(0.0, 1.0);
        d = d.min(len(sub(w, [e[0] * h, e[1] * h])));
        if (a[1] > p[1]) != (b[1] > p[1]) && p[0] < (b[0] - a[0]) * (p[1] - a[1]) / (b[1] - a[1]) + a[0] {
            inside = !inside;
        }
        j = i;
    }
    if inside { -d } else { d }
}

pub fn sub(a: P, b: P) -> P {
    [a[0] - b[0], a[1] - b[1]]
}
pub fn add(a: P, b: P) -> P {
    [a[0] + b[0], a[1] + b[1]]
}
pub fn dot(a: P, b: P) -> f32 {
    a[0] * b[0] + a[1] * b[1]
}
pub fn len(a: P) -> f32 {
    dot(a, a).sqrt()
}
pub fn rotate(a: P, t: f32) -> P {
    let (s, c) = t.sin_cos();
    [a[0] * c - a[1] * s, a[0] * s + a[1] * c]
}

/// An RGB float canvas seen through a camera.
#[derive(Clone)]
pub struct Canvas {
    pub w: usize,
    pub h: usize,
    pub px: Vec<[f32; 3]>,
    cam: Camera,
    /// Scene units per pixel (the anti-aliasing width).
    aa: f32,
    /// The pixel-to-scene map is affine: scene = origin + x * dx + y * dy (pixel centres), precomputed so no
    /// pixel pays for a sine.
    origin: P,
    dx: P,
    dy: P,
}

impl Canvas {
    pub fn new(w: usize, h: usize, cam: Camera) -> Self {
        let aa = 1.0 / (w.min(h) as f32 * cam.zoom);
        let mut c = Canvas { w, h, px: vec![[0.0; 3]; w * h], cam, aa, origin: [0.0; 2], dx: [0.0; 2], dy: [0.0; 2] };
        let o = c.to_scene_exact(0.0, 0.0);
        let ox = c.to_scene_exact(1.0, 0.0);
        let oy = c.to_scene_exact(0.0, 1.0);
        c.origin = o;
        c.dx = sub(ox, o);
        c.dy = sub(oy, o);
        c
    }

    fn to_scene_exact(&self, x: f32, y: f32) -> P {
        let s = self.w.min(self.h) as f32;
        let u = [(x + 0.5) / s - 0.5 - self.cam.offset[0], (y + 0.5) / s - 0.5 - self.cam.offset[1]];
        let u = [u[0] / self.cam.zoom, u[1] / self.cam.zoom];
        add(rotate(u, -self.cam.rotation), [0.5, 0.5])
    }

    /// Pixel centre (x, y) to scene coordinates.
    #[inline]
    pub fn to_scene(&self, x: usize, y: usize) -> P {
        let (x, y) = (x as f32, y as f32);
        [self.origin[0] + x * self.dx[0] + y * self.dy[0], self.origin[1] + x * self.dx[1] + y * self.dy[1]]
    }

    fn to_pixel(&self, p: P) -> P {
        let s = self.w.min(self.h) as f32;
        let u = rotate(sub(p, [0.5, 0.5]), self.cam.rotation);
        [(u[0] * self.cam.zoom + 0.5 + self.cam.offset[0]) * s, (u[1] * self.cam.zoom + 0.5 + self.cam.offset[1]) * s]
    }

    /// Fill every pixel from a function of scene coordinates.
    pub fn fill(&mut self, f: impl Fn(P) -> [f32; 3]) {
        for y in 0..self.h {
            for x in 0..self.w {
                let p = self.to_scene(x, y);
                self.px[y * self.w + x] = f(p);
            }
        }
    }

    /// Draw a shape in a colour (0..255) with opacity; `soft` widens the edge (shadows, glows).
    pub fn draw(&mut self, shape: &Shape, colour: [u8; 3], alpha: f32, soft: f32) {
        let col = [colour[0] as f32, colour[1] as f32, colour[2] as f32];
        let edge = self.aa * (1.0 + soft);
        let (lo, hi) = shape.bounds();
        let pad = edge * 2.0;
        let corners = [
            [lo[0] - pad, lo[1] - pad],
            [hi[0] + pad, lo[1] - pad],
            [lo[0] - pad, hi[1] + pad],
            [hi[0] + pad, hi[1] + pad],
        ];
        let mut x0 = f32::MAX;
        let mut y0 = f32::MAX;
        let mut x1 = f32::MIN;
        let mut y1 = f32::MIN;
        for c in corners {
            let q = self.to_pixel(c);
            x0 = x0.min(q[0]);
            y0 = y0.min(q[1]);
            x1 = x1.max(q[0]);
            y1 = y1.max(q[1]);
        }
        let xa = x0.floor().max(0.0) as usize;
        let ya = y0.floor().max(0.0) as usize;
        let xb = (x1.ceil().max(0.0) as usize).min(self.w);
        let yb = (y1.ceil().max(0.0) as usize).min(self.h);
        for y in ya..yb {
            for x in xa..xb {
                let p = self.to_scene(x, y);
                let d = shape.sdf(p);
                let cov = (0.5 - d / edge).clamp(0.0, 1.0) * alpha;
                if cov <= 0.0 {
                    continue;
                }
                let px = &mut self.px[y * self.w + x];
                for k in 0..3 {
                    px[k] += (col[k] - px[k]) * cov;
                }
            }
        }
    }

    /// Multiply by a lighting field and add per-pixel noise, then quantise.
    pub fn finish(self, light: impl Fn(P) -> [f32; 3], noise: impl Fn(usize, usize) -> f32) -> RgbImage {
        let mut img = RgbImage::new(self.w as u32, self.h as u32);
        for y in 0..self.h {
            for x in 0..self.w {
                let l = light(self.to_scene(x, y));
                let n = noise(x, y);
                let p = self.px[y * self.w + x];
                let q = [0, 1, 2].map(|k| (p[k] * l[k] + n).round().clamp(0.0, 255.0) as u8);
                img.put_pixel(x as u32, y as u32, image::Rgb(q));
            }
        }
        img
    }
}

/// Deterministic cheap randomness for drawing (piece scatter, texture): SplitMix64.
#[derive(Debug, Clone)]
pub struct Prng(u64);

impl Prng {
    pub fn new(seed: u64) -> Self {
        Prng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn f(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.f()
    }
}

/// Hash of integer coordinates to [0, 1) (value noise).
pub fn hash2(x: i32, y: i32, seed: u32) -> f32 {
    let mut h =
        (x as u32).wrapping_mul(0x8da6_b343) ^ (y as u32).wrapping_mul(0xd816_3841) ^ seed.wrapping_mul(0xcb1a_b31f);
    h ^= h >> 13;
    h = h.wrapping_mul(0x5bd1_e995);
    h ^= h >> 15;
    (h & 0xffff) as f32 / 65536.0
}

/// Smooth value noise at scene point `p` with cells of size `1/freq`.
pub fn value_noise(p: P, freq: f32, seed: u32) -> f32 {
    let x = p[0] * freq;
    let y = p[1] * freq;
    let (xi, yi) = (x.floor() as i32, y.floor() as i32);
    let (fx, fy) = (x - x.floor(), y - y.floor());
    let s = |t: f32| t * t * (3.0 - 2.0 * t);
    let (sx, sy) = (s(fx), s(fy));
    let a = hash2(xi, yi, seed);
    let b = hash2(xi + 1, yi, seed);
    let c = hash2(xi, yi + 1, seed);
    let d = hash2(xi + 1, yi + 1, seed);
    let top = a + (b - a) * sx;
    let bot = c + (d - c) * sx;
    top + (bot - top) * sy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_cover_their_inside_only() {
        let mut c = Canvas::new(40, 40, Camera::IDENTITY);
        c.draw(&Shape::Circle { c: [0.5, 0.5], r: 0.25 }, [255, 0, 0], 1.0, 0.0);
        let img = c.finish(|_| [1.0; 3], |_, _| 0.0);
        assert_eq!(img.get_pixel(20, 20).0, [255, 0, 0]);
        assert_eq!(img.get_pixel(2, 2).0, [0, 0, 0]);
        // The edge is anti-aliased: some pixel is partly covered.
        assert!(img.pixels().any(|p| p.0[0] > 0 && p.0[0] < 255));
    }

    #[test]
    fn polygon_inside_is_negative() {
        let sq = Shape::Polygon { pts: vec![[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]] };
        assert!(sq.sdf([0.5, 0.5]) < 0.0);
        assert!(sq.sdf([1.5, 0.5]) > 0.0);
    }
}
