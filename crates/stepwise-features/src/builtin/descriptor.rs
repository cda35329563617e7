//! The classical image descriptor: no weights, deterministic, fast.
//!
//! The image is area-averaged (in linear RGB) to a 64×64 working image — aspect ratio not kept, like the
//! 224×224 squash of CNN features — and converted to CIELAB (D65). Three parts, each L2-normalised, are
//! concatenated and the whole vector L2-normalised (so each part weighs the same):
//! 1. colour: a 4 (L) × 6 (a) × 6 (b) joint histogram with soft (trilinear) binning, L ∈ [0, 100],
//!    a, b ∈ [-80, 80] (clamped), square-rooted (Hellinger) — 144 values;
//! 2. shape: gradient-orientation histograms of the lightness channel (central differences, 9 unsigned
//!    orientation bins with soft binning, magnitude-weighted) over a 4×4 grid of cells, square-rooted — 144;
//! 3. layout: a tiny 8×8 Lab image (L/100, a/100, b/100), each channel's mean removed — 192.
//!
//! A flat image has no gradients and a constant tiny image: those parts are zero and the colour part carries it.
//!
//! Patch grids (`stepwise embed --patches`): the image is cut into `grid × grid` cells (PyTorch's adaptive
//! pooling bins over its pixel rows and columns, [`crate::patches::adaptive_bins`]) and each cell gets the same
//! descriptor, computed on the cell alone (area-averaged to the 64×64 working size like a whole image). Cutting the
//! decoded image and cutting the squashed 64×64 working image give the same cells (the squash scales each axis),
//! but cutting first keeps every cell at full working resolution. The grid is at most 8 (a cell then spans one
//! block of the 8×8 tiny image).

use crate::FeatureError;
use crate::encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, TokenOutput};
use crate::patches::{PatchSpec, adaptive_bins};
use crate::registry::EncoderContext;

pub const NAME: &str = "descriptor";
/// Patch grids of the descriptor (registry entry).
pub const PATCHES: PatchSpec = PatchSpec {
    patch: "the descriptor of one cell of the image (adaptive-pooling bins over its pixels), computed on the cell \
            alone exactly as for a whole image (L2-normalised)",
    max_grid: TINY,
};
const VERSION: &str = "descriptor-2";
const WORK: usize = 64;
const L_BINS: usize = 4;
const AB_BINS: usize = 6;
const AB_RANGE: f32 = 80.0;
const COLOUR_DIM: usize = L_BINS * AB_BINS * AB_BINS;
const CELLS: usize = 4;
const ORIENT_BINS: usize = 9;
const GRAD_DIM: usize = CELLS * CELLS * ORIENT_BINS;
const TINY: usize = 8;
const TINY_DIM: usize = TINY * TINY * 3;
pub const DIM: usize = COLOUR_DIM + GRAD_DIM + TINY_DIM;
/// Below this norm the mean-removed tiny image is flat (a one-grey-level ramp is ~10x above it; float rounding
/// of a constant image ~1e-6).
const TINY_FLAT: f32 = 1e-3;

pub struct Descriptor {
    info: EncoderInfo,
    /// sRGB u8 → linear RGB.
    to_linear: [f32; 256],
}

impl Default for Descriptor {
    fn default() -> Self {
        Self::new()
    }
}

impl Descriptor {
    pub fn new() -> Self {
        let mut to_linear = [0f32; 256];
        for (i, v) in to_linear.iter_mut().enumerate() {
            let c = i as f32 / 255.0;
            *v = if c <= 0.04045 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) };
        }
        let info = EncoderInfo {
            name: NAME.to_string(),
            version: VERSION.to_string(),
            modality: Modality::Image,
            dim: DIM,
            normalization: Normalization::L2,
            preprocessing: format!(
                "area-average to {WORK}x{WORK} in linear RGB (aspect not kept), CIELAB D65; colour: \
                 {L_BINS}x{AB_BINS}x{AB_BINS} soft Lab histogram, sqrt; gradients: {CELLS}x{CELLS} cells x \
                 {ORIENT_BINS} unsigned orientations of L, sqrt; tiny: {TINY}x{TINY} Lab, channel means removed; \
                 each part L2, concatenated, L2"
            ),
        };
        Descriptor { info, to_linear }
    }

    /// The descriptor of one image.
    pub fn describe(&self, img: &image::RgbImage) -> Vec<f32> {
        let lab = self.working_lab(img);
        let mut out = Vec::with_capacity(DIM);
        let mut colour = colour_histogram(&lab);
        hellinger(&mut colour);
        let mut grad = gradient_histograms(&lab);
        hellinger(&mut grad);
        let mut tiny = tiny_image(&lab);
        l2(&mut tiny, TINY_FLAT);
        out.extend_from_slice(&colour);
        out.extend_from_slice(&grad);
        out.extend_from_slice(&tiny);
        l2(&mut out, 1e-6);
        out
    }

    /// The descriptors of the `grid × grid` cells of `img` (see module docs): `grid² * DIM` floats, row-major over
    /// the grid.
    pub fn describe_cells(&self, img: &image::RgbImage, grid: usize) -> Vec<f32> {
        let (w, h) = img.dimensions();
        let mut out = Vec::with_capacity(grid * grid * DIM);
        for ys in adaptive_bins(h as usize, grid) {
            for xs in adaptive_bins(w as usize, grid) {
                let (x, y) = (xs.start as u32, ys.start as u32);
                let cell = image::imageops::crop_imm(img, x, y, xs.len() as u32, ys.len() as u32).to_image();
                out.extend(self.describe(&cell));
            }
        }
        out
    }

    /// Area-average `img` to WORK×WORK in linear RGB, then convert to Lab: `[L, a, b]` per pixel, row-major.
    fn working_lab(&self, img: &image::RgbImage) -> Vec<[f32; 3]> {
        let (w, h) = (img.width() as usize, img.height() as usize);
        let raw = img.as_raw();
        let xs = area_weights(w, WORK);
        let ys = area_weights(h, WORK);
        // Horizontal pass: h rows × WORK columns.
        let mut rows = vec![[0f32; 3]; h * WORK];
        let mut lin_row = vec![[0f32; 3]; w];
        for y in 0..h {
            let src = &raw[y * w * 3..(y + 1) * w * 3];
            for (x, px) in lin_row.iter_mut().enumerate() {
                *px = [
                    self.to_linear[src[3 * x] as usize],
                    self.to_linear[src[3 * x + 1] as usize],
                    self.to_linear[src[3 * x + 2] as usize],
                ];
            }
            for (ox, taps) in xs.iter().enumerate() {
                let mut acc = [0f32; 3];
                for &(sx, wt) in taps {
                    let p = lin_row[sx];
                    acc[0] += wt * p[0];
                    acc[1] += wt * p[1];
                    acc[2] += wt * p[2];
                }
                rows[y * WORK + ox] = acc;
            }
        }
        // Vertical pass and colour conversion.
        let mut lab = vec![[0f32; 3]; WORK * WORK];
        for (oy, taps) in ys.iter().enumerate() {
            for ox in 0..WORK {
                let mut acc = [0f32; 3];
                for &(sy, wt) in taps {
                    let p = rows[sy * WORK + ox];
                    acc[0] += wt * p[0];
                    acc[1] += wt * p[1];
                    acc[2] += wt * p[2];
                }
                lab[oy * WORK + ox] = linear_rgb_to_lab(acc);
            }
        }
        lab
    }
}

/// For each of `dst` output cells, the source indices and weights (summing to 1) of a box (area) filter.
fn area_weights(src: usize, dst: usize) -> Vec<Vec<(usize, f32)>> {
    let scale = src as f64 / dst as f64;
    (0..dst)
        .map(|i| {
            let start = i as f64 * scale;
            let end = (i + 1) as f64 * scale;
            let first = start.floor() as usize;
            let last = (end.ceil() as usize).min(src).max(first + 1);
            (first..last)
                .filter_map(|j| {
                    let overlap = end.min(j as f64 + 1.0) - start.max(j as f64);
                    (overlap > 0.0).then_some((j, (overlap / (end - start)) as f32))
                })
                .collect()
        })
        .collect()
}

fn linear_rgb_to_lab([r, g, b]: [f32; 3]) -> [f32; 3] {
    // sRGB (D65) → XYZ, normalised by the D65 white point.
    let x = (0.412_456_4 * r + 0.357_576_1 * g + 0.180_437_5 * b) / 0.950_47;
    let y = 0.212_672_9 * r + 0.715_152_2 * g + 0.072_175 * b;
    let z = (0.019_333_9 * r + 0.119_192 * g + 0.950_304_1 * b) / 1.088_83;
    let f = |t: f32| {
        const D: f32 = 6.0 / 29.0;
        if t > D * D * D { t.cbrt() } else { t / (3.0 * D * D) + 4.0 / 29.0 }
    };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// Soft binning of `v` ∈ [lo, hi] into `n` bins: two (bin, weight) pairs.
fn soft_bin(v: f32, lo: f32, hi: f32, n: usize) -> [(usize, f32); 2] {
    let p = ((v - lo) / (hi - lo)).clamp(0.0, 1.0) * n as f32 - 0.5;
    if p <= 0.0 {
        return [(0, 1.0), (0, 0.0)];
    }
    let i = p.floor() as usize;
    if i >= n - 1 {
        return [(n - 1, 1.0), (n - 1, 0.0)];
    }
    let w = p - i as f32;
    [(i, 1.0 - w), (i + 1, w)]
}

fn colour_histogram(lab: &[[f32; 3]]) -> Vec<f32> {
    let mut h = vec![0f32; COLOUR_DIM];
    for &[l, a, b] in lab {
        let lb = soft_bin(l, 0.0, 100.0, L_BINS);
        let ab = soft_bin(a, -AB_RANGE, AB_RANGE, AB_BINS);
        let bb = soft_bin(b, -AB_RANGE, AB_RANGE, AB_BINS);
        for (li, lw) in lb {
            for (ai, aw) in ab {
                for (bi, bw) in bb {
                    h[(li * AB_BINS + ai) * AB_BINS + bi] += lw * aw * bw;
                }
            }
        }
    }
    h
}

fn gradient_histograms(lab: &[[f32; 3]]) -> Vec<f32> {
    let mut h = vec![0f32; GRAD_DIM];
    let at = |x: usize, y: usize| lab[y * WORK + x][0] / 100.0;
    let cell = WORK / CELLS;
    for y in 0..WORK {
        for x in 0..WORK {
            let gx = at((x + 1).min(WORK - 1), y) - at(x.saturating_sub(1), y);
            let gy = at(x, (y + 1).min(WORK - 1)) - at(x, y.saturating_sub(1));
            let mag = (gx * gx + gy * gy).sqrt();
            if mag <= 1e-6 {
                continue;
            }
            let mut angle = gy.atan2(gx);
            if angle < 0.0 {
                angle += std::f32::consts::PI;
            }
            // Circular soft binning over [0, π).
            let p = angle / std::f32::consts::PI * ORIENT_BINS as f32 - 0.5;
            let lo = p.floor();
            let w = p - lo;
            let b0 = (lo as i32).rem_euclid(ORIENT_BINS as i32) as usize;
            let b1 = (b0 + 1) % ORIENT_BINS;
            let base = ((y / cell) * CELLS + x / cell) * ORIENT_BINS;
            h[base + b0] += mag * (1.0 - w);
            h[base + b1] += mag * w;
        }
    }
    h
}

fn tiny_image(lab: &[[f32; 3]]) -> Vec<f32> {
    let block = WORK / TINY;
    let mut t = vec![0f32; TINY_DIM];
    for y in 0..WORK {
        for x in 0..WORK {
            let i = ((y / block) * TINY + x / block) * 3;
            let p = lab[y * WORK + x];
            t[i] += p[0] / 100.0;
            t[i + 1] += p[1] / 100.0;
            t[i + 2] += p[2] / 100.0;
        }
    }
    let n = (block * block) as f32;
    t.iter_mut().for_each(|v| *v /= n);
    for c in 0..3 {
        let mean = t.iter().skip(c).step_by(3).sum::<f32>() / (TINY * TINY) as f32;
        t.iter_mut().skip(c).step_by(3).for_each(|v| *v -= mean);
    }
    t
}

/// L1-normalise then square-root (the Hellinger map: the result has unit L2 norm).
fn hellinger(h: &mut [f32]) {
    let s: f32 = h.iter().sum();
    if s > 0.0 {
        h.iter_mut().for_each(|v| *v = (*v / s).max(0.0).sqrt());
    }
}

/// L2-normalise, or zero the vector when its norm is at most `flat` (rounding noise of a flat part must not be
/// amplified into a unit vector).
fn l2(v: &mut [f32], flat: f32) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > flat {
        v.iter_mut().for_each(|x| *x /= n);
    } else {
        v.iter_mut().for_each(|x| *x = 0.0);
    }
}

impl Encoder for Descriptor {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError> {
        let mut out = Vec::with_capacity(batch.len() * DIM);
        for item in batch {
            match item {
                Item::Image(img) => out.extend(self.describe(img)),
                Item::Text(_) => {
                    return Err(FeatureError::Encoder("descriptor encodes images, not text".into()));
                }
            }
        }
        Ok(out)
    }

    fn encode_with_patches(&self, batch: &[Item<'_>], grid: usize) -> Result<TokenOutput, FeatureError> {
        let mut out = TokenOutput { vectors: self.encode(batch)?, ..Default::default() };
        for item in batch {
            if let Item::Image(img) = item {
                out.tokens.extend(self.describe_cells(img, grid));
                out.counts.push(grid * grid);
            }
        }
        Ok(out)
    }

    fn batch_size(&self) -> usize {
        16
    }
}

pub fn build(ctx: &EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    ctx.check_options(NAME, &[])?;
    Ok(Box::new(Descriptor::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solid(w: u32, h: u32, rgb: [u8; 3]) -> image::RgbImage {
        image::RgbImage::from_pixel(w, h, image::Rgb(rgb))
    }

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn unit_norm_and_dimension() {
        let d = Descriptor::new();
        let img = image::RgbImage::from_fn(123, 77, |x, y| image::Rgb([(x * 2) as u8, (y * 3) as u8, 90]));
        let v = d.describe(&img);
        assert_eq!(v.len(), DIM);
        let n: f32 = v.iter().map(|x| x * x).sum();
        assert!((n - 1.0).abs() < 1e-5);
        // Tiny and huge inputs work too.
        assert_eq!(d.describe(&solid(1, 1, [10, 20, 30])).len(), DIM);
        assert_eq!(d.describe(&solid(1000, 3, [10, 20, 30])).len(), DIM);
    }

    #[test]
    fn lab_of_known_colours() {
        let d = Descriptor::new();
        let white = linear_rgb_to_lab([1.0, 1.0, 1.0]);
        assert!((white[0] - 100.0).abs() < 0.05 && white[1].abs() < 0.05 && white[2].abs() < 0.05, "{white:?}");
        // sRGB red (255, 0, 0) is Lab (53.24, 80.09, 67.20).
        let red = linear_rgb_to_lab([d.to_linear[255], 0.0, 0.0]);
        assert!(
            (red[0] - 53.24).abs() < 0.05 && (red[1] - 80.09).abs() < 0.1 && (red[2] - 67.20).abs() < 0.1,
            "{red:?}"
        );
    }

    #[test]
    fn similar_images_are_closer_than_different_ones() {
        let d = Descriptor::new();
        let stripes = |shift: u32, c: [u8; 3]| {
            image::RgbImage::from_fn(96, 96, move |x, _| {
                if ((x + shift) / 8).is_multiple_of(2) { image::Rgb(c) } else { image::Rgb([250, 250, 250]) }
            })
        };
        let a = d.describe(&stripes(0, [200, 30, 30]));
        let b = d.describe(&stripes(2, [190, 40, 30]));
        let c = d.describe(&solid(96, 96, [20, 60, 200]));
        assert!(cos(&a, &b) > cos(&a, &c) + 0.3, "similar {} vs different {}", cos(&a, &b), cos(&a, &c));
    }

    #[test]
    fn area_weights_sum_to_one() {
        for (src, dst) in [(512, 64), (64, 64), (3, 64), (100, 64)] {
            for taps in area_weights(src, dst) {
                let s: f32 = taps.iter().map(|t| t.1).sum();
                assert!((s - 1.0).abs() < 1e-5, "{src}->{dst}: {s}");
                assert!(taps.iter().all(|t| t.0 < src));
            }
        }
    }

    #[test]
    fn flat_images_have_only_a_colour_part() {
        let d = Descriptor::new();
        for (w, h, c) in [(1, 1, [127, 102, 237]), (50, 7, [3, 200, 90]), (300, 300, [255, 255, 255])] {
            let v = d.describe(&solid(w, h, c));
            assert!(v[COLOUR_DIM..].iter().all(|&x| x == 0.0), "{w}x{h} {c:?}: gradient or tiny part is not zero");
            let n: f32 = v.iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-5);
        }
    }

    #[test]
    fn rejects_text() {
        assert!(Descriptor::new().encode(&[Item::Text("x")]).is_err());
        assert!(Descriptor::new().encode_with_patches(&[Item::Text("x")], 2).is_err());
    }

    #[test]
    fn patch_grid_is_the_descriptor_of_each_cropped_cell() {
        let d = Descriptor::new();
        let img = image::RgbImage::from_fn(100, 70, |x, y| {
            image::Rgb([(x * 2) as u8, (y * 3) as u8, if (x / 10 + y / 10) % 2 == 0 { 40 } else { 220 }])
        });
        let img2 = solid(5, 9, [200, 10, 10]);
        let out = d.encode_with_patches(&[Item::Image(&img), Item::Image(&img2)], 3).unwrap();
        assert_eq!(out.vectors, d.encode(&[Item::Image(&img), Item::Image(&img2)]).unwrap(), "pooled unchanged");
        assert_eq!((out.counts, out.tokens.len(), out.ids.len()), (vec![9, 9], 18 * DIM, 0));
        // Cell (1, 2) of the 100x70 image: rows floor(70/3)=23 .. ceil(140/3)=47, columns 66 .. 100.
        let cell = image::imageops::crop_imm(&img, 66, 23, 34, 24).to_image();
        assert_eq!(&out.tokens[5 * DIM..6 * DIM], &d.describe(&cell)[..]);
        // A grid of 1 is the whole image; every cell is a unit vector.
        assert_eq!(d.describe_cells(&img, 1), d.describe(&img));
        for cell in out.tokens.chunks(DIM) {
            let n: f32 = cell.iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-4, "{n}");
        }
        // Different regions differ; a flat image has identical cells.
        assert_ne!(&out.tokens[..DIM], &out.tokens[8 * DIM..9 * DIM]);
        for c in out.tokens[9 * DIM..].chunks(DIM) {
            let diff = c.iter().zip(&out.tokens[9 * DIM..10 * DIM]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(diff < 1e-4, "cells of a flat image differ by {diff}");
        }
        // The largest grid works on an image smaller than the grid.
        assert_eq!(d.describe_cells(&solid(3, 2, [1, 2, 3]), TINY).len(), TINY * TINY * DIM);
    }
}
