//! NumPy `.npy` files: writing float32 matrices, reading them back (whole or memory-mapped); float16 matrices
//! and int64 vectors for the token output of a feature store.
//!
//! Written files are format 1.0 (2.0 when the header needs it), C order, with the header padded so the data
//! starts at a multiple of 64 bytes — `numpy.load` reads them, and a memory map can be viewed as `&[f32]` (or
//! `&[f16]`). The float reader accepts formats 1–3, little-endian `f4`/`f8`/`f2`, C or Fortran order (converted
//! to row-major); [`read_i64_vector`] reads 1-D `'<i8'` arrays; [`MmapF16Matrix`] maps float16 arrays (2-D, or
//! more dimensions viewed as rows of the last one).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use half::f16;
use memmap2::Mmap;
use stepwise_core::{Error, IoResultExt};

const MAGIC: &[u8] = b"\x93NUMPY";
/// Data starts at a multiple of this, as NumPy itself writes (the format requires at least 16).
const ALIGN: usize = 64;

/// The parsed header of a `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// NumPy dtype string, e.g. `<f4`.
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
    /// Byte offset of the first element.
    pub data_offset: usize,
}

impl NpyHeader {
    /// Number of elements (product of the shape; 1 for a scalar).
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(rows, cols)` of a 2-D array, or of a 1-D array viewed as one column.
    pub fn matrix_shape(&self) -> Option<(usize, usize)> {
        match self.shape.as_slice() {
            [n] => Some((*n, 1)),
            [r, c] => Some((*r, *c)),
            _ => None,
        }
    }
}

/// The bytes of a format-1.0 (or 2.0 if needed) header for a C-order `'<f4'` array of `shape`.
pub fn header_bytes(shape: &[usize]) -> Vec<u8> {
    header_bytes_for("<f4", shape)
}

/// The bytes of a format-1.0 (or 2.0 if needed) header for a C-order array of NumPy dtype `descr` (e.g. `<f2`,
/// `<i8`) and `shape`.
pub fn header_bytes_for(descr: &str, shape: &[usize]) -> Vec<u8> {
    let shape_str = match shape {
        [n] => format!("({n},)"),
        dims => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_str}, }}");
    for (major, len_bytes) in [(1u8, 2usize), (2u8, 4usize)] {
        let prefix = MAGIC.len() + 2 + len_bytes;
        let unpadded = prefix + dict.len() + 1; // + '\n'
        let total = unpadded.div_ceil(ALIGN) * ALIGN;
        let header_len = total - prefix;
        if major == 1 && header_len > u16::MAX as usize {
            continue;
        }
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(MAGIC);
        out.push(major);
        out.push(0);
        if major == 1 {
            out.extend_from_slice(&(header_len as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(header_len as u32).to_le_bytes());
        }
        out.extend_from_slice(dict.as_bytes());
        out.resize(total - 1, b' ');
        out.push(b'\n');
        return out;
    }
    unreachable!("a format-2.0 header holds any shape")
}

/// Write the header of a `(rows, cols)` float32 matrix; the caller then writes `rows * cols` little-endian f32s.
pub fn write_matrix_header<W: Write + ?Sized>(w: &mut W, rows: usize, cols: usize) -> std::io::Result<()> {
    w.write_all(&header_bytes(&[rows, cols]))
}

/// Write f32 values as little-endian bytes.
pub fn write_f32s<W: Write + ?Sized>(w: &mut W, values: &[f32]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        // SAFETY: f32 has no padding and any byte pattern is a valid u8; the slice covers exactly the floats.
        let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) };
        w.write_all(bytes)
    } else {
        for v in values {
            w.write_all(&v.to_le_bytes())?;
        }
        Ok(())
    }
}

/// Write float16 values as little-endian bytes.
pub fn write_f16s<W: Write + ?Sized>(w: &mut W, values: &[f16]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        // SAFETY: f16 is a `repr(transparent)` u16 without padding; the slice covers exactly the values.
        let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) };
        w.write_all(bytes)
    } else {
        for v in values {
            w.write_all(&v.to_le_bytes())?;
        }
        Ok(())
    }
}

/// Write a 1-D int64 array (`'<i8'`) to `path` atomically.
pub fn write_i64_vector(path: &Path, values: &[i64]) -> stepwise_core::Result<()> {
    stepwise_core::output::write_file_atomic(path, |w| {
        w.write_all(&header_bytes_for("<i8", &[values.len()]))?;
        for v in values {
            w.write_all(&v.to_le_bytes())?;
        }
        Ok(())
    })
}

/// Read a 1-D little-endian int64 array (`'<i8'`, as `np.save(path, a.astype(np.int64))` writes).
pub fn read_i64_vector(path: &Path) -> stepwise_core::Result<Vec<i64>> {
    parse_i64_vector(path, &stepwise_core::paths::read_regular_file(path)?)
}

/// [`read_i64_vector`] on the bytes of the file at `path` (named in errors).
pub fn parse_i64_vector(path: &Path, bytes: &[u8]) -> stepwise_core::Result<Vec<i64>> {
    let h = parse_header(path, bytes)?;
    let n = match h.shape.as_slice() {
        [n] => *n,
        other => {
            return Err(Error::bad_input(format!("{}: expected a 1-D array, found shape {other:?}", path.display())));
        }
    };
    if h.descr != "<i8" {
        return Err(Error::bad_input(format!(
            "{}: expected little-endian int64 ('<i8'), found {:?}",
            path.display(),
            h.descr
        )));
    }
    let body = &bytes[h.data_offset..];
    if body.len() < n * 8 {
        return Err(Error::bad_input(format!(
            "{}: truncated: shape ({n},) needs {} data bytes, file has {}",
            path.display(),
            n * 8,
            body.len()
        )));
    }
    Ok(body[..n * 8]
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect())
}

/// Write a row-major `(rows, cols)` float32 matrix to `path` atomically.
pub fn write_matrix(path: &Path, rows: usize, cols: usize, data: &[f32]) -> stepwise_core::Result<()> {
    assert_eq!(rows * cols, data.len(), "write_matrix: shape and data disagree");
    stepwise_core::output::write_file_atomic(path, |w| {
        write_matrix_header(w, rows, cols)?;
        write_f32s(w, data)
    })
}

/// Parse the header at the start of `bytes` (the whole file or at least its header).
pub fn parse_header(path: &Path, bytes: &[u8]) -> stepwise_core::Result<NpyHeader> {
    let bad = |msg: &str| Error::bad_input(format!("{}: not a readable .npy file: {msg}", path.display()));
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("bad magic (expected \\x93NUMPY)"));
    }
    let major = bytes[6];
    let (header_len, prefix) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("truncated header"));
            }
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        v => return Err(bad(&format!("unsupported format version {v}"))),
    };
    let end = prefix + header_len;
    if bytes.len() < end {
        return Err(bad("truncated header"));
    }
    let dict = std::str::from_utf8(&bytes[prefix..end]).map_err(|_| bad("header is not text"))?;
    let descr = dict_value(dict, "descr").and_then(parse_quoted).ok_or_else(|| bad("header has no 'descr'"))?;
    let fortran_order = match dict_value(dict, "fortran_order") {
        Some(v) if v.starts_with("True") => true,
        Some(v) if v.starts_with("False") => false,
        _ => return Err(bad("header has no 'fortran_order'")),
    };
    let shape = dict_value(dict, "shape").and_then(parse_shape).ok_or_else(|| bad("header has no valid 'shape'"))?;
    // Every size computed from the shape (elements × up to 8 bytes, plus the header) must fit in memory's address
    // range; a hostile header claiming more would otherwise overflow that arithmetic (and wrap in release builds).
    let fits = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .and_then(|n| n.checked_mul(8))
        .is_some_and(|bytes| bytes <= isize::MAX as usize - end);
    if !fits {
        return Err(bad(&format!("shape {shape:?} is larger than any array that fits in memory")));
    }
    Ok(NpyHeader { descr, fortran_order, shape, data_offset: end })
}

/// The text after `'key':` in a Python dict literal, with leading spaces removed.
fn dict_value<'a>(dict: &'a str, key: &str) -> Option<&'a str> {
    let pat_single = format!("'{key}'");
    let pat_double = format!("\"{key}\"");
    let pos = dict
        .find(&pat_single)
        .map(|p| p + pat_single.len())
        .or_else(|| dict.find(&pat_double).map(|p| p + pat_double.len()))?;
    let rest = dict[pos..].trim_start();
    Some(rest.strip_prefix(':')?.trim_start())
}

fn parse_quoted(s: &str) -> Option<String> {
    let q = s.chars().next()?;
    if q != '\'' && q != '"' {
        return None;
    }
    let rest = &s[1..];
    rest.find(q).map(|end| rest[..end].to_string())
}

fn parse_shape(s: &str) -> Option<Vec<usize>> {
    let inner = s.strip_prefix('(')?;
    let inner = &inner[..inner.find(')')?];
    inner.split(',').map(str::trim).filter(|t| !t.is_empty()).map(|t| t.trim_end_matches('L').parse().ok()).collect()
}

/// Element types the reader converts to f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    F16,
    F32,
    F64,
}

fn dtype(path: &Path, descr: &str) -> stepwise_core::Result<Dtype> {
    match descr {
        "<f4" | "|f4" => Ok(Dtype::F32),
        "<f8" => Ok(Dtype::F64),
        "<f2" => Ok(Dtype::F16),
        other => Err(Error::bad_input(format!(
            "{}: unsupported .npy dtype {other:?} (expected little-endian float16/32/64)",
            path.display()
        ))),
    }
}

/// Read a 1-D or 2-D float array as a row-major f32 matrix: `((rows, cols), data)`.
pub fn read_matrix(path: &Path) -> stepwise_core::Result<((usize, usize), Vec<f32>)> {
    let bytes = stepwise_core::paths::read_regular_file(path)?;
    let h = parse_header(path, &bytes)?;
    let (rows, cols) = h.matrix_shape().ok_or_else(|| {
        Error::bad_input(format!("{}: expected a 1-D or 2-D array, found shape {:?}", path.display(), h.shape))
    })?;
    let dt = dtype(path, &h.descr)?;
    let width = match dt {
        Dtype::F16 => 2,
        Dtype::F32 => 4,
        Dtype::F64 => 8,
    };
    let n = rows.checked_mul(cols).ok_or_else(|| Error::bad_input(format!("{}: shape overflows", path.display())))?;
    let body = &bytes[h.data_offset..];
    if body.len() < n * width {
        return Err(Error::bad_input(format!(
            "{}: truncated: shape {:?} needs {} data bytes, file has {}",
            path.display(),
            h.shape,
            n * width,
            body.len()
        )));
    }
    let mut flat: Vec<f32> = match dt {
        Dtype::F32 => body[..n * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        Dtype::F64 => body[..n * 8]
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32)
            .collect(),
        Dtype::F16 => body[..n * 2].chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
    };
    if h.fortran_order && rows > 1 && cols > 1 {
        // Column-major on disk: element (r, c) is at c * rows + r.
        let mut t = vec![0f32; n];
        for c in 0..cols {
            for r in 0..rows {
                t[r * cols + c] = flat[c * rows + r];
            }
        }
        flat = t;
    }
    Ok(((rows, cols), flat))
}

/// A memory-mapped C-order `'<f4'` matrix, viewed as `&[f32]` without reading the file.
#[derive(Debug)]
pub struct MmapMatrix {
    mmap: Option<Mmap>,
    offset: usize,
    pub rows: usize,
    pub cols: usize,
}

impl MmapMatrix {
    /// Map `path`; it must be a C-order little-endian float32 1-D/2-D array whose data is 4-byte aligned.
    pub fn open(path: &Path) -> stepwise_core::Result<Self> {
        let file = File::open(path).at(path)?;
        let len = file.metadata().at(path)?.len() as usize;
        if len == 0 {
            return Err(Error::bad_input(format!("{}: empty file, not a .npy array", path.display())));
        }
        // SAFETY: the feature store never modifies a vectors.npy in place (it is replaced by rename), so the
        // mapping stays valid for the lifetime of this value.
        let mmap = unsafe { Mmap::map(&file) }.at(path)?;
        let h = parse_header(path, &mmap)?;
        let (rows, cols) = h.matrix_shape().ok_or_else(|| {
            Error::bad_input(format!("{}: expected a 2-D array, found shape {:?}", path.display(), h.shape))
        })?;
        if dtype(path, &h.descr)? != Dtype::F32 || (h.fortran_order && rows > 1 && cols > 1) {
            return Err(Error::bad_input(format!(
                "{}: expected C-order float32 ('<f4'), found {:?} fortran_order={}",
                path.display(),
                h.descr,
                h.fortran_order
            )));
        }
        let need = h.data_offset + rows * cols * 4;
        if mmap.len() < need {
            return Err(Error::bad_input(format!(
                "{}: truncated: shape ({rows}, {cols}) needs {need} bytes, file has {}",
                path.display(),
                mmap.len()
            )));
        }
        if h.data_offset % 4 != 0 || cfg!(target_endian = "big") {
            return Err(Error::bad_input(format!(
                "{}: data is not 4-byte aligned little-endian; cannot memory-map",
                path.display()
            )));
        }
        let mmap = if rows * cols == 0 { None } else { Some(mmap) };
        Ok(MmapMatrix { mmap, offset: h.data_offset, rows, cols })
    }

    /// All values, row-major.
    pub fn data(&self) -> &[f32] {
        match &self.mmap {
            None => &[],
            Some(m) => {
                let bytes = &m[self.offset..self.offset + self.rows * self.cols * 4];
                // SAFETY: `open` checked the range, the 4-byte alignment (page-aligned map + offset % 4 == 0),
                // the little-endian f32 dtype; every bit pattern is a valid f32.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), self.rows * self.cols) }
            }
        }
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data()[i * self.cols..(i + 1) * self.cols]
    }
}

/// A memory-mapped C-order `'<f2'` (float16) matrix, viewed as `&[f16]` without reading the file. An array of
/// more than two dimensions is viewed as a matrix of its last dimension: `(a, b, c)` as `(a * b, c)`.
#[derive(Debug)]
pub struct MmapF16Matrix {
    mmap: Option<Mmap>,
    offset: usize,
    pub rows: usize,
    pub cols: usize,
    /// The array's shape as the file states it.
    pub shape: Vec<usize>,
}

impl MmapF16Matrix {
    /// Map `path`; it must be a C-order little-endian float16 array of two or more dimensions whose data is
    /// 2-byte aligned.
    pub fn open(path: &Path) -> stepwise_core::Result<Self> {
        let file = File::open(path).at(path)?;
        let len = file.metadata().at(path)?.len() as usize;
        if len == 0 {
            return Err(Error::bad_input(format!("{}: empty file, not a .npy array", path.display())));
        }
        // SAFETY: feature-store files are never modified in place (they are replaced by rename), so the mapping
        // stays valid for the lifetime of this value.
        let mmap = unsafe { Mmap::map(&file) }.at(path)?;
        let h = parse_header(path, &mmap)?;
        let (rows, cols) = match h.shape.as_slice() {
            [lead @ .., c] if !lead.is_empty() => (lead.iter().try_fold(1usize, |a, &d| a.checked_mul(d)), *c),
            other => {
                return Err(Error::bad_input(format!(
                    "{}: expected a 2-D (or larger) array, found shape {other:?}",
                    path.display()
                )));
            }
        };
        let rows =
            rows.ok_or_else(|| Error::bad_input(format!("{}: shape {:?} overflows", path.display(), h.shape)))?;
        if h.descr != "<f2" || (h.fortran_order && h.shape.iter().filter(|&&d| d > 1).count() > 1) {
            return Err(Error::bad_input(format!(
                "{}: expected C-order float16 ('<f2'), found {:?} fortran_order={}",
                path.display(),
                h.descr,
                h.fortran_order
            )));
        }
        let need = rows
            .checked_mul(cols)
            .and_then(|n| n.checked_mul(2))
            .and_then(|n| n.checked_add(h.data_offset))
            .ok_or_else(|| Error::bad_input(format!("{}: shape ({rows}, {cols}) overflows", path.display())))?;
        if mmap.len() < need {
            return Err(Error::bad_input(format!(
                "{}: truncated: shape ({rows}, {cols}) needs {need} bytes, file has {}",
                path.display(),
                mmap.len()
            )));
        }
        if h.data_offset % 2 != 0 || cfg!(target_endian = "big") {
            return Err(Error::bad_input(format!(
                "{}: data is not 2-byte aligned little-endian; cannot memory-map",
                path.display()
            )));
        }
        let mmap = if rows * cols == 0 { None } else { Some(mmap) };
        Ok(MmapF16Matrix { mmap, offset: h.data_offset, rows, cols, shape: h.shape })
    }

    /// All values, row-major.
    pub fn data(&self) -> &[f16] {
        match &self.mmap {
            None => &[],
            Some(m) => {
                let bytes = &m[self.offset..self.offset + self.rows * self.cols * 2];
                // SAFETY: `open` checked the range, the 2-byte alignment (page-aligned map + even offset) and the
                // little-endian f16 dtype; f16 is a `repr(transparent)` u16, valid for every bit pattern.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f16>(), self.rows * self.cols) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_whose_sizes_overflow_are_refused_not_wrapped() {
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("huge.npy");
        // 2^61 int64 elements: 2^64 bytes, which wraps to 0 in release arithmetic (an empty vector "read").
        let mut bytes = header_bytes_for("<i8", &[1 << 61]);
        bytes.extend_from_slice(&7i64.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        let e = read_i64_vector(&p).unwrap_err().to_string();
        assert!(e.contains("huge.npy") && e.contains("larger than any array that fits in memory"), "{e}");
        // 2^31 x 2^31 float32: the element count fits, the byte count does not.
        let mut bytes = header_bytes(&[1 << 31, 1 << 31]);
        bytes.extend_from_slice(&[0; 16]);
        std::fs::write(&p, &bytes).unwrap();
        for e in [read_matrix(&p).unwrap_err(), MmapMatrix::open(&p).unwrap_err()] {
            assert!(e.to_string().contains("larger than any array"), "{e}");
        }
        // 10^12 elements fit the address range: refused by the file's size instead, before any allocation.
        let mut bytes = header_bytes(&[1_000_000, 1_000_000]);
        bytes.extend_from_slice(&[0; 16]);
        std::fs::write(&p, &bytes).unwrap();
        assert!(read_matrix(&p).unwrap_err().to_string().contains("truncated"));
    }

    #[test]
    fn header_is_aligned_and_parses_back() {
        for shape in [vec![0usize, 3], vec![7, 512], vec![300_000, 512], vec![5]] {
            let h = header_bytes(&shape);
            assert_eq!(h.len() % ALIGN, 0);
            assert_eq!(*h.last().unwrap(), b'\n');
            let parsed = parse_header(Path::new("x.npy"), &h).unwrap();
            assert_eq!(parsed.shape, shape);
            assert_eq!(parsed.descr, "<f4");
            assert!(!parsed.fortran_order);
            assert_eq!(parsed.data_offset, h.len());
        }
    }

    #[test]
    fn round_trip_read_and_mmap() {
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("m.npy");
        let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
        write_matrix(&p, 3, 4, &data).unwrap();
        let ((r, c), back) = read_matrix(&p).unwrap();
        assert_eq!((r, c), (3, 4));
        assert_eq!(back, data);
        let m = MmapMatrix::open(&p).unwrap();
        assert_eq!(m.data(), &data[..]);
        assert_eq!(m.row(2), &data[8..12]);
    }

    #[test]
    fn f16_matrix_and_i64_vector_round_trip() {
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("h.npy");
        let data: Vec<f16> = (0..6).map(|i| f16::from_f32(i as f32 * 0.25 - 0.5)).collect();
        stepwise_core::output::write_file_atomic(&p, |w| {
            w.write_all(&header_bytes_for("<f2", &[2, 3]))?;
            write_f16s(w, &data)
        })
        .unwrap();
        let m = MmapF16Matrix::open(&p).unwrap();
        assert_eq!((m.rows, m.cols), (2, 3));
        assert_eq!(m.data(), &data[..]);
        // The float reader converts it too.
        let ((r, c), back) = read_matrix(&p).unwrap();
        assert_eq!((r, c), (2, 3));
        assert_eq!(back, data.iter().map(|x| x.to_f32()).collect::<Vec<_>>());
        assert!(MmapMatrix::open(&p).is_err(), "f2 cannot be mapped as f32");
        // A 3-D array is a matrix of its last dimension.
        let p3 = td.path().join("h3.npy");
        stepwise_core::output::write_file_atomic(&p3, |w| {
            w.write_all(&header_bytes_for("<f2", &[1, 2, 3]))?;
            write_f16s(w, &data)
        })
        .unwrap();
        let m = MmapF16Matrix::open(&p3).unwrap();
        assert_eq!((m.rows, m.cols, m.shape.clone(), m.data()), (2, 3, vec![1, 2, 3], &data[..]));

        let q = td.path().join("o.npy");
        write_i64_vector(&q, &[0, 3, 3, 1 << 40]).unwrap();
        assert_eq!(read_i64_vector(&q).unwrap(), vec![0, 3, 3, 1 << 40]);
        assert_eq!(parse_header(&q, &std::fs::read(&q).unwrap()).unwrap().descr, "<i8");
        let e = read_i64_vector(&p).unwrap_err().to_string();
        assert!(e.contains("h.npy") && e.contains("1-D"), "{e}");
        let f = td.path().join("f.npy");
        let mut bytes = header_bytes(&[3]);
        bytes.extend_from_slice(&[0u8; 12]);
        std::fs::write(&f, bytes).unwrap();
        let e = read_i64_vector(&f).unwrap_err().to_string();
        assert!(e.contains("f.npy") && e.contains("'<i8'"), "{e}");
        let e = MmapF16Matrix::open(&q).unwrap_err().to_string();
        assert!(e.contains("o.npy"), "{e}");
    }

    #[test]
    fn fortran_order_f8_is_transposed() {
        // Hand-made NumPy file: np.asfortranarray(np.arange(6, dtype='<f8').reshape(2, 3)).
        let dict = "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }";
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[1, 0]);
        let total = (10 + dict.len() + 1).div_ceil(64) * 64;
        bytes.extend_from_slice(&((total - 10) as u16).to_le_bytes());
        bytes.extend_from_slice(dict.as_bytes());
        bytes.resize(total - 1, b' ');
        bytes.push(b'\n');
        // Column-major storage of [[0,1,2],[3,4,5]]: 0,3,1,4,2,5.
        for v in [0f64, 3., 1., 4., 2., 5.] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("f.npy");
        std::fs::write(&p, bytes).unwrap();
        let ((r, c), back) = read_matrix(&p).unwrap();
        assert_eq!((r, c), (2, 3));
        assert_eq!(back, vec![0., 1., 2., 3., 4., 5.]);
        assert!(MmapMatrix::open(&p).is_err(), "f8 cannot be mapped as f32");
    }

    #[test]
    fn malformed_files_are_errors_not_panics() {
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("bad.npy");
        for bytes in [b"".to_vec(), b"hello world".to_vec(), header_bytes(&[4, 4])] {
            std::fs::write(&p, &bytes).unwrap();
            let e = read_matrix(&p).expect_err("must fail");
            assert!(e.to_string().contains("bad.npy"), "{e}");
            assert_eq!(e.exit_code(), 2);
            assert!(MmapMatrix::open(&p).is_err());
        }
    }
}
