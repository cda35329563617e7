//! Patch grids: for each image item, a frozen `grid × grid` grid of patch feature vectors, stored next to the
//! pooled vectors of a feature store (`stepwise embed --patches [--grid G]`), for models that read the regions of
//! a step image (e.g. a multimodal transformer over text tokens and image patches).
//!
//! Files, inside the store folder (so the store's `meta.json`, ids and manifest cover them):
//! - `patches.npy`: float16 `(count, grid², dim)`, C order, NumPy-readable: the patches of row i of `ids` are
//!   `patches[i]`, row-major over the grid (grid row from the top, then column from the left): patch `(r, c)` is
//!   `patches[i, r * grid + c]`;
//! - `meta.json` → `patches` ([`PatchMeta`]): grid side, dimension, dtype, and what a patch is for the encoder.
//!
//! What a patch is, per encoder ([`crate::registry::EncoderEntry::patches`]): the last feature map before global
//! pooling of `effnet-lite0`/`effnet-lite2` (7×7 / 9×9), average-pooled to the grid; the built-in `descriptor` of
//! each cell of the image; `clip-image`'s last-layer patch tokens (7×7 for ViT-B/32), average-pooled to the grid.
//! Cells and pooling bins follow PyTorch's `adaptive_avg_pool2d`: along a side of `n`, cell `i` of `g` covers
//! `floor(i * n / g) .. ceil((i + 1) * n / g)` ([`adaptive_bins`]), so a grid equal to the native size keeps the
//! native patches and a grid that divides it averages equal blocks. The grid is at most the native size
//! ([`PatchSpec::max_grid`]). Values beyond the float16 range make the item a failure.
//!
//! Read with [`PatchGrids`], which shares the per-item row machinery of token vectors ([`crate::rows`]).

use std::ops::{Deref, Range};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::rows::{ItemRows, RowSlice, open_rows_file, write_rows_file};
use crate::store::FeatureStore;
use crate::{FeatureError, registry};

pub const PATCHES_FILE: &str = "patches.npy";
/// Grid side unless `--grid` says otherwise (9 patches per image).
pub const DEFAULT_GRID: usize = 3;
const REDO: &str = "re-run `stepwise embed --patches --force`";

/// What an encoder's patches are, in the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PatchSpec {
    /// What one patch vector is (recorded in `meta.json`).
    pub patch: &'static str,
    /// The native grid side (the feature map or patch-token grid at the default input size): `--grid` is at most
    /// this.
    pub max_grid: usize,
}

/// The `patches` entry of a store's `meta.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchMeta {
    /// Grid side: `grid²` patches per item.
    pub grid: usize,
    /// Width of a patch vector (the encoder's `dim`, except for CLIP's wider patch tokens).
    pub dim: usize,
    /// Element type of `patches.npy` (`float16`).
    pub dtype: String,
    /// What one patch vector is, for this encoder.
    pub patch: String,
    /// The order of an item's patches.
    pub order: String,
}

/// How an item's patches are ordered (recorded in `meta.json`).
pub const PATCH_ORDER: &str =
    "row-major over the grid: patch (r, c) is row r * grid + c (r from the top, c from the left)";

/// What a patch is for `encoder` with a `grid × grid` grid, or a usage error: the encoder has no patch output
/// (naming those that have), or the grid is out of `1..=max_grid` (naming `--grid`).
pub fn patch_output(encoder: &str, grid: usize) -> Result<&'static str, FeatureError> {
    let Some(spec) = registry::find(encoder).and_then(|e| e.patches) else {
        let with: Vec<&str> = registry::list().iter().filter(|e| e.patches.is_some()).map(|e| e.name).collect();
        return Err(FeatureError::usage(format!(
            "encoder `{encoder}` has no patch output; --patches works with: {}",
            with.join(", ")
        )));
    };
    if grid == 0 || grid > spec.max_grid {
        return Err(FeatureError::usage(format!(
            "--grid {grid}: must be from 1 to {} for `{encoder}` (its native grid is {}x{})",
            spec.max_grid, spec.max_grid, spec.max_grid
        )));
    }
    Ok(spec.patch)
}

/// The cells of PyTorch's `adaptive_avg_pool2d` along a side of `n` split into `g`: cell i is
/// `floor(i * n / g) .. ceil((i + 1) * n / g)` (never empty; neighbours overlap when `g` does not divide `n`).
pub fn adaptive_bins(n: usize, g: usize) -> Vec<Range<usize>> {
    (0..g).map(|i| (i * n / g)..((i + 1) * n).div_ceil(g)).collect()
}

/// Average-pool an `h × w` grid of `c`-vectors (row-major, `h * w * c` floats) to `g × g` with [`adaptive_bins`]:
/// `g * g * c` floats, row-major over the output grid. Each output vector sums its cell row by row, left to right,
/// then divides by the cell's size (so `g = 1` is exactly the global average computed in that order).
pub fn pool_grid(data: &[f32], h: usize, w: usize, c: usize, g: usize) -> Vec<f32> {
    assert_eq!(data.len(), h * w * c, "pool_grid: data is not h * w * c");
    let (rows, cols) = (adaptive_bins(h, g), adaptive_bins(w, g));
    let mut out = Vec::with_capacity(g * g * c);
    for r in &rows {
        for cl in &cols {
            let mut acc = vec![0f32; c];
            for y in r.clone() {
                for x in cl.clone() {
                    acc.iter_mut().zip(&data[(y * w + x) * c..(y * w + x + 1) * c]).for_each(|(a, v)| *a += v);
                }
            }
            let n = (r.len() * cl.len()) as f32;
            out.extend(acc.into_iter().map(|a| a / n));
        }
    }
    out
}

/// Patch grids of image items: `grid²` rows per item. Dereferences to [`ItemRows`] for the item-level accessors
/// (`ids`, `index_of`, `item_f16`, `get`, `dim`...).
#[derive(Debug)]
pub struct PatchGrids {
    rows: ItemRows,
    grid: usize,
}

impl Deref for PatchGrids {
    type Target = ItemRows;

    fn deref(&self) -> &ItemRows {
        &self.rows
    }
}

impl PatchGrids {
    /// The rows alone (for the embedding pipeline's reuse of a store's rows).
    pub(crate) fn into_rows(self) -> ItemRows {
        self.rows
    }

    /// Open the patch grids of the feature store in `store_dir`: `None` when the store has none (it was embedded
    /// without `--patches`); an error when the store itself cannot be opened or its patch file disagrees.
    pub fn open(store_dir: &Path) -> Result<Option<PatchGrids>, FeatureError> {
        Self::from_store(&FeatureStore::open(store_dir)?)
    }

    /// The patch grids of an opened store (`None` when it has none).
    pub fn from_store(store: &FeatureStore) -> Result<Option<PatchGrids>, FeatureError> {
        let Some(pm) = &store.meta().patches else {
            return Ok(None);
        };
        let per = pm.grid * pm.grid;
        let path = store.dir().join(PATCHES_FILE);
        let matrix = open_rows_file(&path, &[store.len(), per, pm.dim], "patches of shape", REDO)?;
        let offsets: Vec<i64> = (0..=store.len()).map(|i| (i * per) as i64).collect();
        let rows = ItemRows::from_store(store, &path, &offsets, per, matrix, REDO)?;
        Ok(Some(PatchGrids { rows, grid: pm.grid }))
    }

    /// The grid side: every item has `grid()²` patches.
    pub fn grid(&self) -> usize {
        self.grid
    }

    /// Patches per item (`grid²`).
    pub fn per_item(&self) -> usize {
        self.grid * self.grid
    }

    /// Patch `(r, c)` of item `i` as stored (`dim` float16). Panics when out of range.
    pub fn patch_f16(&self, i: usize, r: usize, c: usize) -> &[half::f16] {
        assert!(r < self.grid && c < self.grid, "patch ({r}, {c}) outside a {0}x{0} grid", self.grid);
        let p = r * self.grid + c;
        &self.item_f16(i)[p * self.dim..(p + 1) * self.dim]
    }
}

/// Write `patches.npy` into `dir` from the patch values of each item (in row order, `grid²` rows of `dim` each).
pub(crate) fn write_patch_file(
    dir: &Path,
    grid: usize,
    dim: usize,
    items: &[RowSlice<'_>],
) -> Result<(), FeatureError> {
    debug_assert!(items.iter().all(|v| v.len() == grid * grid * dim), "every item has grid² patches");
    write_rows_file(&dir.join(PATCHES_FILE), &[items.len(), grid * grid, dim], items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_follow_adaptive_avg_pool2d() {
        assert_eq!(adaptive_bins(7, 7), (0..7).map(|i| i..i + 1).collect::<Vec<_>>());
        assert_eq!(adaptive_bins(7, 1), vec![0..7]);
        // torch.nn.AdaptiveAvgPool2d(3) on 7: [0, 3), [2, 5), [4, 7).
        assert_eq!(adaptive_bins(7, 3), vec![0..3, 2..5, 4..7]);
        assert_eq!(adaptive_bins(9, 3), vec![0..3, 3..6, 6..9]);
        assert_eq!(adaptive_bins(64, 3), vec![0..22, 21..43, 42..64]);
        assert_eq!(adaptive_bins(1, 3), vec![0..1, 0..1, 0..1], "a side smaller than the grid repeats");
    }

    #[test]
    fn pooling_averages_each_cell_and_the_whole_at_grid_one() {
        // A 3x2 grid of 2-vectors: value (y, x, ch) = 10y + x + 100ch.
        let (h, w, c) = (3, 2, 2);
        let data: Vec<f32> = (0..h)
            .flat_map(|y| (0..w).flat_map(move |x| (0..c).map(move |ch| (10 * y + x + 100 * ch) as f32)))
            .collect();
        assert_eq!(pool_grid(&data, h, w, c, 1), vec![10.5, 110.5]);
        // g = 2: rows [0, 2), [1, 3); columns [0, 1), [1, 2).
        assert_eq!(pool_grid(&data, h, w, c, 2), vec![5., 105., 6., 106., 15., 115., 16., 116.]);
        let same = pool_grid(&data, 3, 2, 2, 3);
        assert_eq!(same.len(), 18);
        assert_eq!(&same[0..2], &[0., 100.], "top-left cell");
    }

    #[test]
    fn encoders_and_grids_are_checked() {
        for name in ["w2v", "tfidf", "minilm", "effnet-lite0-logits", "nope"] {
            let e = patch_output(name, 3).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{name}");
            let msg = e.to_string();
            assert!(msg.contains(name) && msg.contains("descriptor, effnet-lite0, effnet-lite2, clip-image"), "{msg}");
        }
        for (name, max) in [("descriptor", 8), ("effnet-lite0", 7), ("effnet-lite2", 9), ("clip-image", 7)] {
            assert!(patch_output(name, 1).is_ok() && patch_output(name, max).is_ok(), "{name}");
            for bad in [0, max + 1] {
                let e = patch_output(name, bad).unwrap_err();
                assert_eq!(e.exit_code(), 2);
                assert!(e.to_string().contains(&format!("--grid {bad}")), "{e}");
            }
        }
    }

    #[test]
    fn in_memory_grid_accessors() {
        let ids: Vec<String> = vec!["image:a".into(), "image:b".into()];
        let data: Vec<half::f16> = (0..16).map(|i| half::f16::from_f32(i as f32)).collect();
        let rows = ItemRows::new(2, 4, ids, vec![0, 4, 8], data).unwrap();
        let g = PatchGrids { rows, grid: 2 };
        assert_eq!((g.grid(), g.per_item(), g.len(), g.dim), (2, 4, 2, 2));
        assert_eq!(g.patch_f16(1, 1, 0), &[half::f16::from_f32(12.), half::f16::from_f32(13.)]);
        assert_eq!(g.get("image:a").unwrap().len(), 8);
    }
}
