//! The per-procedure visual style: background colour and texture, lighting direction and gain, camera jitter.
//! Every step of a procedure shares it — the "same background" shortcut of real recipe photos, on purpose, so
//! the control knobs that remove that bias have something to remove. By default every procedure draws its own
//! style; a world made with `WorldParams::styles = Some(k)` draws it from k shared styles instead (procedures in
//! the same "kitchen" look alike), which dials the shortcut down.

use rand::Rng;
use stepwise_core::rng::ChaCha8Rng;

use super::raster::{Camera, P, value_noise};
use crate::model::Domain;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Texture {
    Plain,
    Grain,
    Tiles,
    Speckle,
    Marble,
}

#[derive(Debug, Clone)]
pub struct Style {
    pub base: [f32; 3],
    pub accent: [f32; 3],
    pub texture: Texture,
    pub texture_scale: f32,
    pub light_dir: P,
    pub light_gain: f32,
    pub light_slope: f32,
    pub tint: [f32; 3],
    pub camera: Camera,
    pub seed: u32,
}

const COOKING_BASES: &[([u8; 3], [u8; 3], Texture)] = &[
    ([196, 160, 118], [170, 130, 90], Texture::Grain),
    ([226, 224, 218], [170, 170, 175], Texture::Marble),
    ([80, 84, 90], [60, 62, 68], Texture::Speckle),
    ([236, 232, 220], [200, 190, 170], Texture::Tiles),
    ([150, 170, 160], [120, 140, 130], Texture::Plain),
    ([214, 190, 150], [185, 160, 120], Texture::Grain),
    ([120, 60, 50], [100, 50, 40], Texture::Tiles),
    ([200, 210, 225], [170, 180, 200], Texture::Speckle),
];
const ASSEMBLY_BASES: &[([u8; 3], [u8; 3], Texture)] = &[
    ([180, 150, 110], [150, 120, 85], Texture::Grain),
    ([150, 150, 148], [120, 120, 118], Texture::Speckle),
    ([60, 90, 80], [45, 70, 62], Texture::Plain),
    ([190, 180, 160], [160, 150, 130], Texture::Tiles),
    ([110, 110, 130], [90, 90, 110], Texture::Speckle),
    ([215, 205, 185], [190, 175, 150], Texture::Grain),
];

impl Style {
    pub fn new(domain: Domain, rng: &mut ChaCha8Rng) -> Self {
        let list = match domain {
            Domain::Cooking => COOKING_BASES,
            Domain::Assembly => ASSEMBLY_BASES,
        };
        let (base, accent, texture) = list[rng.random_range(0..list.len())];
        // Jitter the base colour so two procedures with the same palette still differ.
        let j: [f32; 3] = [rng.random_range(-14.0..14.0), rng.random_range(-14.0..14.0), rng.random_range(-14.0..14.0)];
        let f = |c: [u8; 3]| [0, 1, 2].map(|k| (c[k] as f32 + j[k]).clamp(0.0, 255.0));
        let angle: f32 = rng.random_range(0.0..std::f32::consts::TAU);
        let warm: f32 = rng.random_range(-0.06..0.06);
        Style {
            base: f(base),
            accent: f(accent),
            texture,
            texture_scale: rng.random_range(0.7..1.4),
            light_dir: [angle.cos(), angle.sin()],
            light_gain: rng.random_range(0.85..1.12),
            light_slope: rng.random_range(0.12..0.38),
            tint: [1.0 + warm, 1.0, 1.0 - warm],
            camera: Camera {
                offset: [rng.random_range(-0.03..0.03), rng.random_range(-0.03..0.03)],
                zoom: rng.random_range(0.94..1.06),
                rotation: rng.random_range(-0.09..0.09),
            },
            seed: rng.random(),
        }
    }

    /// The background colour at a scene point.
    pub fn background(&self, p: P) -> [f32; 3] {
        let s = self.texture_scale;
        let t = match self.texture {
            Texture::Plain => 0.15 * value_noise(p, 6.0 * s, self.seed),
            Texture::Grain => {
                let n = value_noise([p[0] * 0.5, p[1] * 8.0], 3.0 * s, self.seed);
                0.5 + 0.5 * ((p[1] * 90.0 * s + n * 6.0).sin() * 0.5 + 0.5) * 0.6 - 0.3 + 0.2 * n
            }
            Texture::Tiles => {
                let k = 6.0 * s;
                let (u, v) = ((p[0] * k).fract(), (p[1] * k).fract());
                let grout = u < 0.05 || v < 0.05;
                if grout { 1.0 } else { 0.1 * value_noise(p, 30.0, self.seed) }
            }
            Texture::Speckle => {
                let n = super::raster::hash2((p[0] * 160.0) as i32, (p[1] * 160.0) as i32, self.seed);
                if n > 0.85 { 0.9 } else { 0.2 * value_noise(p, 10.0 * s, self.seed) }
            }
            Texture::Marble => {
                let n = value_noise(p, 4.0 * s, self.seed) * 4.0 + value_noise(p, 12.0 * s, self.seed ^ 7);
                let v = ((p[0] + p[1]) * 12.0 * s + n * 3.0).sin().abs();
                if v < 0.08 { 0.8 } else { 0.05 * n }
            }
        };
        let t = t.clamp(0.0, 1.0);
        [0, 1, 2].map(|k| self.base[k] + (self.accent[k] - self.base[k]) * t)
    }

    /// Light gain at a scene point: a linear gradient along the light direction, with the tint folded in by
    /// the caller per channel (kept scalar here for speed).
    pub fn light(&self, p: P) -> f32 {
        let d = (p[0] - 0.5) * self.light_dir[0] + (p[1] - 0.5) * self.light_dir[1];
        self.light_gain * (1.0 + self.light_slope * d)
    }
}
