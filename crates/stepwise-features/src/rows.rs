//! Per-item row sets: for each item of a feature store, a run of float16 rows of one width — the machinery behind
//! token vectors ([`crate::tokens`], a variable count per item) and patch grids ([`crate::patches`], `grid²` rows
//! per item). Rows `offsets[i]..offsets[i+1]` of the matrix belong to item i (row i of the store's `ids`);
//! optionally each row carries an int64 id (the vocabulary id of a token).

use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;
use std::path::Path;

use half::f16;
use stepwise_core::Error;

use crate::FeatureError;
use crate::npy::MmapF16Matrix;
use crate::store::FeatureStore;

/// Rows of items, float16, memory-mapped when read from a store. [`crate::TokenVectors`] and
/// [`crate::PatchGrids`] dereference to it for the item-level accessors.
#[derive(Debug)]
pub struct ItemRows {
    /// Width of each row.
    pub dim: usize,
    ids: Vec<String>,
    index: HashMap<String, usize>,
    /// `ids.len() + 1` non-decreasing row offsets, starting at 0.
    offsets: Vec<usize>,
    data: RowData,
    /// One id per row, when the rows have ids.
    row_ids: Option<Vec<i64>>,
}

#[derive(Debug)]
enum RowData {
    Mapped(MmapF16Matrix),
    Owned(Vec<f16>),
}

impl ItemRows {
    /// The rows of a store's items from its row matrix (already checked to be `(offsets.last(), dim)`) and raw
    /// offsets, checked: `store.len() + 1` offsets from 0, each item at most `max_per_item` rows. `redo` says how
    /// to rewrite broken files; `path` names the offsets in errors.
    pub(crate) fn from_store(
        store: &FeatureStore,
        path: &Path,
        raw_offsets: &[i64],
        max_per_item: usize,
        matrix: MmapF16Matrix,
        redo: &str,
    ) -> Result<ItemRows, FeatureError> {
        let offsets = check_offsets(path, raw_offsets, store.len(), matrix.rows, max_per_item, redo)?;
        Ok(ItemRows {
            dim: matrix.cols,
            ids: store.ids().to_vec(),
            index: store.ids().iter().enumerate().map(|(i, id)| (id.clone(), i)).collect(),
            offsets,
            data: RowData::Mapped(matrix),
            row_ids: None,
        })
    }

    /// Rows held in memory (e.g. for tests): `offsets` as `ids.len() + 1` values from 0 to `data.len() / dim`,
    /// at most `max_per_item` apart, `data` row-major. An error when they disagree.
    pub fn new(
        dim: usize,
        max_per_item: usize,
        ids: Vec<String>,
        offsets: Vec<usize>,
        data: Vec<f16>,
    ) -> Result<ItemRows, FeatureError> {
        if dim == 0 || !data.len().is_multiple_of(dim) {
            return Err(bad(format!("item rows: {} values are not rows of dimension {dim}", data.len())));
        }
        let raw: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
        let path = Path::new("(row offsets)");
        let offsets = check_offsets(path, &raw, ids.len(), data.len() / dim, max_per_item, "fix the offsets")?;
        let mut index = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            if index.insert(id.clone(), i).is_some() {
                return Err(bad(format!("item rows: duplicate id {id:?}")));
            }
        }
        Ok(ItemRows { dim, ids, index, offsets, data: RowData::Owned(data), row_ids: None })
    }

    /// Attach one id per row (`path` names their file in errors).
    pub(crate) fn with_row_ids(mut self, path: &Path, ids: Vec<i64>) -> Result<ItemRows, FeatureError> {
        if ids.len() != self.total_rows() {
            return Err(bad(format!("{}: {} ids for {} rows", path.display(), ids.len(), self.total_rows())));
        }
        self.row_ids = Some(ids);
        Ok(self)
    }

    /// Items (rows of `ids`, with or without rows of their own).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Item ids, in store row order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Rows in all.
    pub fn total_rows(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0)
    }

    /// Rows of the matrix belonging to item `i`. Panics when `i >= len()`, like slice indexing.
    pub fn row_range(&self, i: usize) -> Range<usize> {
        self.offsets[i]..self.offsets[i + 1]
    }

    /// The whole matrix, row-major float16 (memory-mapped when opened from a store).
    pub fn data_f16(&self) -> &[f16] {
        match &self.data {
            RowData::Mapped(m) => m.data(),
            RowData::Owned(v) => v,
        }
    }

    /// The rows of item `i` as stored (`count × dim` float16). Panics when `i >= len()`.
    pub fn item_f16(&self, i: usize) -> &[f16] {
        let r = self.row_range(i);
        &self.data_f16()[r.start * self.dim..r.end * self.dim]
    }

    /// The rows of `id` as row-major `count × dim` f32; `None` for an unknown id or an item without rows.
    pub fn get(&self, id: &str) -> Option<Vec<f32>> {
        let i = self.index_of(id)?;
        let v = self.item_f16(i);
        (!v.is_empty()).then(|| v.iter().map(|x| x.to_f32()).collect())
    }

    /// How many rows `id` has (`Some(0)` for a stored item without any); `None` for an id not in the store.
    pub fn row_count(&self, id: &str) -> Option<usize> {
        self.index_of(id).map(|i| self.row_range(i).len())
    }

    /// The ids of item `i`'s rows (in row order), when the rows have ids. Panics when `i >= len()`.
    pub fn item_row_ids(&self, i: usize) -> Option<&[i64]> {
        let r = self.row_range(i);
        self.row_ids.as_deref().map(|ids| &ids[r])
    }

    /// True when every row has an id.
    pub fn has_row_ids(&self) -> bool {
        self.row_ids.is_some()
    }
}

/// Offsets as `usize`, checked: `items + 1` values, starting at 0, non-decreasing by at most `max_per_item`,
/// ending at `total`.
fn check_offsets(
    path: &Path,
    raw: &[i64],
    items: usize,
    total: usize,
    max_per_item: usize,
    redo: &str,
) -> Result<Vec<usize>, FeatureError> {
    if raw.len() != items + 1 {
        return Err(bad(format!(
            "{}: {} offsets for {items} items (expected {}); {redo}",
            path.display(),
            raw.len(),
            items + 1
        )));
    }
    let mut out = Vec::with_capacity(raw.len());
    for (i, &o) in raw.iter().enumerate() {
        let prev = out.last().copied().unwrap_or(0);
        let ok =
            usize::try_from(o).ok().filter(|&o| if i == 0 { o == 0 } else { o >= prev && o - prev <= max_per_item });
        match ok {
            Some(o) => out.push(o),
            None => {
                return Err(bad(format!(
                    "{}: offset {i} is {o} after {prev} (offsets start at 0 and grow by 0..={max_per_item}); {redo}",
                    path.display()
                )));
            }
        }
    }
    if out.last() != Some(&total) {
        return Err(bad(format!(
            "{}: the last offset is {}, but there are {total} rows; {redo}",
            path.display(),
            out.last().copied().unwrap_or(0)
        )));
    }
    Ok(out)
}

/// Open a float16 row file of a store, which must have exactly `shape` (`what` and `redo` word the error).
pub(crate) fn open_rows_file(
    path: &Path,
    shape: &[usize],
    what: &str,
    redo: &str,
) -> Result<MmapF16Matrix, FeatureError> {
    let matrix = MmapF16Matrix::open(path)?;
    if matrix.shape != shape {
        return Err(bad(format!(
            "{}: shape {:?}, but meta.json says {what} {shape:?}; {redo}",
            path.display(),
            matrix.shape
        )));
    }
    Ok(matrix)
}

/// f32 values as float16; `None` when one is non-finite or beyond the float16 range (it would become ±inf).
pub fn to_f16(values: &[f32]) -> Option<Vec<f16>> {
    let out: Vec<f16> = values.iter().map(|&x| f16::from_f32(x)).collect();
    out.iter().all(|x| x.is_finite()).then_some(out)
}

/// The row values of one item, as a work chunk (little-endian float16 bytes) or a store (values) holds them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RowSlice<'a> {
    Bytes(&'a [u8]),
    Values(&'a [f16]),
}

impl RowSlice<'_> {
    /// Number of float16 values.
    pub(crate) fn len(&self) -> usize {
        match self {
            RowSlice::Bytes(b) => b.len() / 2,
            RowSlice::Values(v) => v.len(),
        }
    }
}

/// Write the rows of each item (in row order) as one C-order float16 array of `shape` to `path`, atomically.
pub(crate) fn write_rows_file(path: &Path, shape: &[usize], items: &[RowSlice<'_>]) -> Result<(), FeatureError> {
    debug_assert_eq!(items.iter().map(RowSlice::len).sum::<usize>(), shape.iter().product::<usize>());
    stepwise_core::output::write_file_atomic(path, |w| {
        w.write_all(&crate::npy::header_bytes_for("<f2", shape))?;
        for v in items {
            match v {
                RowSlice::Bytes(b) => w.write_all(b)?,
                RowSlice::Values(v) => crate::npy::write_f16s(w, v)?,
            }
        }
        Ok(())
    })?;
    Ok(())
}

pub(crate) fn bad(msg: String) -> FeatureError {
    FeatureError::Core(Error::bad_input(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &[f32]) -> Vec<f16> {
        v.iter().map(|&x| f16::from_f32(x)).collect()
    }

    #[test]
    fn in_memory_rows() {
        let ids: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let t = ItemRows::new(2, 2, ids.clone(), vec![0, 2, 2, 3], h(&[1., 2., 3., 4., 5., 6.])).unwrap();
        assert_eq!((t.len(), t.total_rows()), (3, 3));
        assert_eq!(t.get("a"), Some(vec![1., 2., 3., 4.]));
        assert_eq!(t.get("b"), None, "an item without rows is None, never Some(empty)");
        assert_eq!(t.row_count("b"), Some(0));
        assert_eq!(t.get("c"), Some(vec![5., 6.]));
        assert_eq!((t.row_count("zz"), t.get("zz"), t.index_of("c")), (None, None, Some(2)));
        assert!(!t.has_row_ids() && t.item_row_ids(0).is_none());
        let t = t.with_row_ids(Path::new("ids.npy"), vec![7, 8, 9]).unwrap();
        assert_eq!(
            (t.item_row_ids(0), t.item_row_ids(1), t.item_row_ids(2)),
            (Some(&[7, 8][..]), Some(&[][..]), Some(&[9][..]))
        );
        let t = ItemRows::new(2, 2, ids.clone(), vec![0, 2, 2, 3], h(&[0.; 6])).unwrap();
        assert!(t.with_row_ids(Path::new("ids.npy"), vec![1]).unwrap_err().to_string().contains("ids.npy"));
        // Inconsistent parts are errors, not panics.
        assert!(ItemRows::new(2, 2, ids.clone(), vec![0, 2, 2], h(&[0.; 6])).is_err());
        assert!(ItemRows::new(2, 2, ids.clone(), vec![0, 2, 1, 3], h(&[0.; 6])).is_err());
        assert!(ItemRows::new(2, 1, ids.clone(), vec![0, 2, 2, 3], h(&[0.; 6])).is_err(), "over the cap");
        assert!(ItemRows::new(2, 2, ids.clone(), vec![0, 2, 2, 4], h(&[0.; 6])).is_err());
        let dup = vec!["a".to_string(), "a".to_string(), "c".to_string()];
        assert!(ItemRows::new(2, 2, dup, vec![0, 2, 2, 3], h(&[0.; 6])).is_err());
    }

    #[test]
    fn f16_conversion_rejects_overflow() {
        assert_eq!(to_f16(&[1.5, -2.0]).unwrap(), h(&[1.5, -2.0]));
        assert!(to_f16(&[70000.0]).is_none());
        assert!(to_f16(&[f32::NAN]).is_none());
    }
}
