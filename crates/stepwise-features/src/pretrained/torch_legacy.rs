//! Reading PyTorch checkpoints (`.pth`/`.pt`) into plain tensors, and writing them as safetensors.
//!
//! Two on-disk formats exist:
//! - the **legacy** format (`torch.save(..., _use_new_zipfile_serialization=False)`, and everything saved before
//!   PyTorch 1.6): five consecutive pickles — magic number, protocol version, system info, the object with
//!   tensors whose storages are persistent ids `('storage', <dtype>Storage, key, location, numel[, view])`, the list
//!   of storage keys — then, for each key in that list, an 8-byte little-endian element count and the raw bytes.
//!   candle cannot read it; [`read_checkpoint`] does, with [`super::pickle`].
//! - the **zip** format (PyTorch ≥ 1.6 default), which candle reads; [`read_checkpoint`] delegates to it.
//!
//! Tensors may be non-contiguous views (the EfficientNet-Lite weights converted from TensorFlow keep TF's
//! HWIO layout through strides); they are gathered into C order here.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use stepwise_core::Error;

use super::pickle::{self, PyObj};
use crate::FeatureError;

/// Element types of checkpoint tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F64,
    F32,
    F16,
    BF16,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// The dtype name in a safetensors header.
    pub fn safetensors_name(self) -> &'static str {
        match self {
            DType::F64 => "F64",
            DType::F32 => "F32",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I64 => "I64",
            DType::I32 => "I32",
            DType::I16 => "I16",
            DType::I8 => "I8",
            DType::U8 => "U8",
            DType::Bool => "BOOL",
        }
    }

    /// From a legacy storage class name (`FloatStorage`...).
    fn from_storage_class(name: &str) -> Option<DType> {
        Some(match name {
            "DoubleStorage" => DType::F64,
            "FloatStorage" => DType::F32,
            "HalfStorage" => DType::F16,
            "BFloat16Storage" => DType::BF16,
            "LongStorage" => DType::I64,
            "IntStorage" => DType::I32,
            "ShortStorage" => DType::I16,
            "CharStorage" => DType::I8,
            "ByteStorage" => DType::U8,
            "BoolStorage" => DType::Bool,
            _ => return None,
        })
    }
}

/// One tensor of a checkpoint: C-order little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTensor {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl RawTensor {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The values as f32 (floating-point dtypes only).
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        let d = &self.data;
        Some(match self.dtype {
            DType::F32 => d.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            DType::F64 => d
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32)
                .collect(),
            DType::F16 => d.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            DType::BF16 => d.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            _ => return None,
        })
    }
}

/// The legacy format's magic number, as the little-endian bytes of its `LONG1`.
const LEGACY_MAGIC: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];

/// Read every tensor of a checkpoint file (legacy or zip format), in the file's order. `key` selects one entry
/// of a top-level dict (e.g. `state_dict`); without it, nested dicts are flattened with dotted names and
/// non-tensor values are skipped.
pub fn read_checkpoint(path: &Path, key: Option<&str>) -> Result<Vec<RawTensor>, FeatureError> {
    let bytes = stepwise_core::paths::read_regular_file(path)?;
    if bytes.starts_with(b"PK\x03\x04") {
        return read_zip_checkpoint(path, key);
    }
    read_legacy_bytes(&bytes, key).map_err(|m| bad(path, &m))
}

fn bad(path: &Path, msg: &str) -> FeatureError {
    FeatureError::Core(Error::bad_input(format!("{}: not a readable PyTorch checkpoint: {msg}", path.display())))
}

/// Decode a legacy-format checkpoint held in memory. Errors are messages (the caller adds the file name).
pub fn read_legacy_bytes(bytes: &[u8], key: Option<&str>) -> Result<Vec<RawTensor>, String> {
    let mut pos = 0;
    let p = |e: pickle::PickleError| e.to_string();
    let magic = pickle::load(bytes, &mut pos).map_err(|e| format!("no legacy header ({e})"))?;
    if magic != PyObj::BigInt(LEGACY_MAGIC.to_vec()) {
        return Err("wrong magic number (not a legacy torch.save file)".into());
    }
    let protocol = pickle::load(bytes, &mut pos).map_err(p)?;
    if protocol.as_int() != Some(1001) {
        return Err(format!("unsupported legacy protocol version {protocol:?} (expected 1001)"));
    }
    let sys_info = pickle::load(bytes, &mut pos).map_err(p)?;
    if let PyObj::Dict(items) = &sys_info {
        let little = items.iter().find(|(k, _)| k.as_str() == Some("little_endian")).map(|(_, v)| v);
        if little == Some(&PyObj::Bool(false)) {
            return Err("big-endian checkpoints are not supported".into());
        }
    }
    let root = pickle::load(bytes, &mut pos).map_err(p)?;
    let keys_obj = pickle::load(bytes, &mut pos).map_err(p)?;
    let keys: Vec<String> = keys_obj
        .as_seq()
        .ok_or("storage key list is not a list")?
        .iter()
        .map(|k| k.as_str().map(str::to_string).ok_or_else(|| "storage key is not a string".to_string()))
        .collect::<Result<_, _>>()?;

    let root = select_key(root, key)?;
    let mut found = Vec::new();
    collect_tensors(&root, "", &mut found)?;
    if found.is_empty() {
        return Err("no tensors found (is this a pickled model object rather than a state dict?)".into());
    }

    // Storage dtypes come from the tensors that reference them; the raw data follows in `keys` order.
    let mut storage_dtype: HashMap<&str, DType> = HashMap::new();
    for t in &found {
        if let Some(prev) = storage_dtype.insert(&t.storage_key, t.dtype)
            && prev != t.dtype
        {
            return Err(format!("storage {} is used with two dtypes", t.storage_key));
        }
    }
    let mut storages: HashMap<&str, (usize, usize)> = HashMap::new(); // key -> (byte offset, numel)
    for k in &keys {
        let numel_bytes = bytes.get(pos..pos + 8).ok_or_else(|| format!("truncated before storage {k}"))?;
        let numel = i64::from_le_bytes(numel_bytes.try_into().expect("8 bytes"));
        let numel = usize::try_from(numel).map_err(|_| format!("storage {k} has a negative size"))?;
        let dtype = *storage_dtype.get(k.as_str()).ok_or_else(|| format!("storage {k} is not used by any tensor"))?;
        let start = pos + 8;
        let len = numel.checked_mul(dtype.size()).ok_or_else(|| format!("storage {k} is too large"))?;
        let end = start.checked_add(len).filter(|&e| e <= bytes.len()).ok_or_else(|| {
            format!("truncated: storage {k} needs {len} bytes at offset {start}, file has {}", bytes.len())
        })?;
        storages.insert(k.as_str(), (start, numel));
        pos = end;
    }

    found
        .iter()
        .map(|t| {
            let (start, numel) = *storages
                .get(t.storage_key.as_str())
                .ok_or_else(|| format!("storage {} has no data", t.storage_key))?;
            let storage = &bytes[start..start + numel * t.dtype.size()];
            Ok(RawTensor {
                name: t.name.clone(),
                dtype: t.dtype,
                shape: t.shape.clone(),
                data: gather(storage, numel, t).map_err(|m| format!("tensor {}: {m}", t.name))?,
            })
        })
        .collect()
}

/// A tensor found in the pickled object, before its data is read.
struct TensorRef {
    name: String,
    dtype: DType,
    storage_key: String,
    /// In elements, including a storage view's offset.
    offset: usize,
    shape: Vec<usize>,
    stride: Vec<usize>,
}

fn select_key(root: PyObj, key: Option<&str>) -> Result<PyObj, String> {
    let Some(key) = key else { return Ok(root) };
    match root {
        PyObj::Dict(items) => {
            let names: Vec<String> = items.iter().filter_map(|(k, _)| k.as_str().map(str::to_string)).collect();
            items
                .into_iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v)
                .ok_or_else(|| format!("no entry `{key}` in the checkpoint (entries: {})", names.join(", ")))
        }
        _ => Err(format!("--key {key}: the checkpoint is not a dict")),
    }
}

fn collect_tensors(obj: &PyObj, prefix: &str, out: &mut Vec<TensorRef>) -> Result<(), String> {
    match obj {
        PyObj::Dict(items) => {
            for (k, v) in items {
                let name = match k {
                    PyObj::Str(s) => s.clone(),
                    PyObj::Int(i) => i.to_string(),
                    _ => continue,
                };
                let full = if prefix.is_empty() { name } else { format!("{prefix}.{name}") };
                collect_tensors(v, &full, out)?;
            }
            Ok(())
        }
        PyObj::Reduce { .. } => {
            if let Some(t) = tensor_ref(obj, prefix)? {
                out.push(t);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Interpret `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` (possibly wrapped in
/// `_rebuild_parameter`). Other calls are not tensors (`None`).
fn tensor_ref(obj: &PyObj, name: &str) -> Result<Option<TensorRef>, String> {
    let PyObj::Reduce { callable, args } = obj else {
        return Ok(None);
    };
    let args = args.as_seq().unwrap_or(&[]);
    if callable.is_global("torch._utils", "_rebuild_parameter")
        || callable.is_global("torch._utils", "_rebuild_parameter_with_state")
    {
        return match args.first() {
            Some(inner) => tensor_ref(inner, name),
            None => Err(format!("tensor {name}: empty _rebuild_parameter")),
        };
    }
    if !(callable.is_global("torch._utils", "_rebuild_tensor_v2")
        || callable.is_global("torch._utils", "_rebuild_tensor"))
    {
        return Ok(None);
    }
    let err = |m: &str| format!("tensor {name}: {m}");
    if args.len() < 4 {
        return Err(err("_rebuild_tensor needs (storage, offset, size, stride)"));
    }
    let PyObj::PersistentId(pid) = &args[0] else {
        return Err(err("storage is not a persistent id"));
    };
    let pid = pid.as_seq().ok_or_else(|| err("storage id is not a tuple"))?;
    if pid.len() < 5 || pid[0].as_str() != Some("storage") {
        return Err(err("storage id is not ('storage', type, key, location, size, ...)"));
    }
    let dtype = match &pid[1] {
        PyObj::Global { module, name: cls } if module == "torch" => {
            DType::from_storage_class(cls).ok_or_else(|| err(&format!("unsupported storage type torch.{cls}")))?
        }
        other => return Err(err(&format!("unsupported storage type {other:?}"))),
    };
    let storage_key = match &pid[2] {
        PyObj::Str(s) => s.clone(),
        PyObj::Int(i) => i.to_string(),
        _ => return Err(err("storage key is not a string")),
    };
    // A legacy storage view: (view_key, offset, size) into the root storage.
    let view_offset = match pid.get(5) {
        None | Some(PyObj::None) => 0,
        Some(v) => v.as_seq().and_then(|s| s.get(1)).and_then(PyObj::as_int).ok_or_else(|| err("bad storage view"))?,
    };
    let offset = args[1].as_int().ok_or_else(|| err("storage offset is not an int"))?;
    let dims = |o: &PyObj, what: &str| -> Result<Vec<usize>, String> {
        o.as_seq()
            .ok_or_else(|| err(&format!("{what} is not a tuple")))?
            .iter()
            .map(|d| d.as_int().and_then(|i| usize::try_from(i).ok()).ok_or_else(|| err(&format!("bad {what}"))))
            .collect()
    };
    let shape = dims(&args[2], "size")?;
    let stride = dims(&args[3], "stride")?;
    if shape.len() != stride.len() {
        return Err(err("size and stride have different lengths"));
    }
    let offset = usize::try_from(offset + view_offset).map_err(|_| err("negative storage offset"))?;
    Ok(Some(TensorRef { name: name.to_string(), dtype, storage_key, offset, shape, stride }))
}

/// Copy the elements of a strided view into C order.
fn gather(storage: &[u8], numel: usize, t: &TensorRef) -> Result<Vec<u8>, String> {
    let es = t.dtype.size();
    let count: usize = t.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("shape overflows")?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let max_index = t
        .shape
        .iter()
        .zip(&t.stride)
        .try_fold(t.offset, |a, (&d, &s)| (d - 1).checked_mul(s).and_then(|x| x.checked_add(a)))
        .ok_or("strides overflow")?;
    if max_index >= numel {
        return Err(format!("view reaches element {max_index} of a storage of {numel}"));
    }
    // A view with more elements than its storage repeats elements (stride 0: an expanded tensor); weights never
    // are, and a tiny file could otherwise claim a view of 2^62 elements over one stored value.
    if count > numel {
        return Err(format!("view of {count} elements over a storage of {numel} (an expanded tensor, not weights)"));
    }
    let mut out = Vec::with_capacity(count * es);
    let contiguous = {
        let mut expect = 1;
        t.shape.iter().zip(&t.stride).rev().all(|(&d, &s)| {
            let ok = d == 1 || s == expect;
            expect *= d;
            ok
        })
    };
    if contiguous {
        out.extend_from_slice(&storage[t.offset * es..(t.offset + count) * es]);
        return Ok(out);
    }
    let mut idx = vec![0usize; t.shape.len()];
    for _ in 0..count {
        let e = t.offset + idx.iter().zip(&t.stride).map(|(i, s)| i * s).sum::<usize>();
        out.extend_from_slice(&storage[e * es..(e + 1) * es]);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < t.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// Zip-format checkpoints, through candle's reader.
fn read_zip_checkpoint(path: &Path, key: Option<&str>) -> Result<Vec<RawTensor>, FeatureError> {
    use candle_core::DType as C;
    let tensors = candle_core::pickle::read_all_with_key(path, key).map_err(|e| bad(path, &e.to_string()))?;
    tensors
        .into_iter()
        .map(|(name, t)| {
            let shape = t.dims().to_vec();
            let flat = t.flatten_all().map_err(|e| bad(path, &e.to_string()))?;
            let conv = |e: candle_core::Error| bad(path, &format!("tensor {name}: {e}"));
            let (dtype, data): (DType, Vec<u8>) = match t.dtype() {
                C::F32 => {
                    (DType::F32, flat.to_vec1::<f32>().map_err(conv)?.iter().flat_map(|v| v.to_le_bytes()).collect())
                }
                C::F64 => {
                    (DType::F64, flat.to_vec1::<f64>().map_err(conv)?.iter().flat_map(|v| v.to_le_bytes()).collect())
                }
                C::F16 => (
                    DType::F16,
                    flat.to_vec1::<half::f16>().map_err(conv)?.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ),
                C::BF16 => (
                    DType::BF16,
                    flat.to_vec1::<half::bf16>().map_err(conv)?.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ),
                C::I64 => {
                    (DType::I64, flat.to_vec1::<i64>().map_err(conv)?.iter().flat_map(|v| v.to_le_bytes()).collect())
                }
                C::U8 => (DType::U8, flat.to_vec1::<u8>().map_err(conv)?),
                other => {
                    return Err(bad(path, &format!("tensor {name}: unsupported dtype {other:?}")));
                }
            };
            Ok(RawTensor { name, dtype, shape, data })
        })
        .collect()
}

/// Write tensors as a safetensors file (atomically), with string metadata in the header's `__metadata__`.
/// Tensors are stored in name order so the file is byte-identical for the same input.
pub fn write_safetensors(
    path: &Path,
    tensors: &[RawTensor],
    metadata: &BTreeMap<String, String>,
) -> stepwise_core::Result<()> {
    let mut sorted: Vec<&RawTensor> = tensors.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut header = serde_json::Map::new();
    if !metadata.is_empty() {
        let m: serde_json::Map<String, serde_json::Value> =
            metadata.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
        header.insert("__metadata__".into(), serde_json::Value::Object(m));
    }
    let mut offset = 0usize;
    for t in &sorted {
        let end = offset + t.data.len();
        header.insert(
            t.name.clone(),
            serde_json::json!({"dtype": t.dtype.safetensors_name(), "shape": t.shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let mut json = serde_json::to_string(&serde_json::Value::Object(header)).expect("header serializes");
    // The data section must start 8-byte aligned.
    while !(8 + json.len()).is_multiple_of(8) {
        json.push(' ');
    }
    stepwise_core::output::write_file_atomic(path, |w| {
        w.write_all(&(json.len() as u64).to_le_bytes())?;
        w.write_all(json.as_bytes())?;
        for t in &sorted {
            w.write_all(&t.data)?;
        }
        Ok(())
    })
}

/// A hand-assembled legacy checkpoint, `{'w': 2x3 float32 transposed view, 'n': int64 scalar}`: for tests and as
/// a fuzzing seed.
pub fn tiny_legacy_checkpoint() -> Vec<u8> {
    let mut b = Vec::new();
    // magic, protocol, sys info
    b.extend_from_slice(&[0x80, 2, 0x8a, 10]);
    b.extend_from_slice(&LEGACY_MAGIC);
    b.push(b'.');
    b.extend_from_slice(&[0x80, 2, b'M', 0xe9, 0x03, b'.']);
    b.extend_from_slice(&[0x80, 2, b'}', b'(', 0x8c, 13]);
    b.extend_from_slice(b"little_endian");
    b.extend_from_slice(&[0x88, b'u', b'.']);
    // state dict
    b.extend_from_slice(&[0x80, 2]);
    b.extend_from_slice(b"ccollections\nOrderedDict\n");
    b.extend_from_slice(b")R(");
    for (name, cls, key, numel, offset, size, stride) in [
        ("w", "FloatStorage", "100", 6u8, 0u8, &[2u8, 3][..], &[1u8, 2][..]),
        ("n", "LongStorage", "200", 1, 0, &[][..], &[][..]),
    ] {
        b.extend_from_slice(&[0x8c, name.len() as u8]);
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(b"ctorch._utils\n_rebuild_tensor_v2\n");
        b.push(b'(');
        // persistent id tuple
        b.push(b'(');
        b.extend_from_slice(&[0x8c, 7]);
        b.extend_from_slice(b"storage");
        b.extend_from_slice(format!("ctorch\n{cls}\n").as_bytes());
        b.extend_from_slice(&[0x8c, key.len() as u8]);
        b.extend_from_slice(key.as_bytes());
        b.extend_from_slice(&[0x8c, 3]);
        b.extend_from_slice(b"cpu");
        b.extend_from_slice(&[b'K', numel, b'N', b't', b'Q']);
        b.extend_from_slice(&[b'K', offset]);
        b.push(b'(');
        for d in size {
            b.extend_from_slice(&[b'K', *d]);
        }
        b.push(b't');
        b.push(b'(');
        for s in stride {
            b.extend_from_slice(&[b'K', *s]);
        }
        b.push(b't');
        b.extend_from_slice(&[0x89, b'N', b't', b'R']);
    }
    b.extend_from_slice(b"u.");
    // storage keys, then data
    b.extend_from_slice(&[0x80, 2, b']', b'(', 0x8c, 3]);
    b.extend_from_slice(b"100");
    b.extend_from_slice(&[0x8c, 3]);
    b.extend_from_slice(b"200");
    b.extend_from_slice(b"e.");
    b.extend_from_slice(&6i64.to_le_bytes());
    for v in [0f32, 1., 2., 3., 4., 5.] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&1i64.to_le_bytes());
    b.extend_from_slice(&42i64.to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_larger_than_its_storage_is_refused() {
        // The tiny checkpoint's `w` is a (2, 3) view with strides (1, 2) over 6 floats; give it shape (2^40, 3)
        // and strides (0, 2): every index stays inside the storage, but the view claims 3 * 2^40 elements.
        let mut b = tiny_legacy_checkpoint();
        let at = b.windows(6).position(|w| w == [b'(', b'K', 2, b'K', 3, b't']).unwrap();
        let mut huge = vec![b'(', b'\x8a', 6, 0, 0, 0, 0, 0, 1, b'K', 3, b't'];
        b.splice(at..at + 6, huge.drain(..));
        let at = b.windows(6).position(|w| w == [b'(', b'K', 1, b'K', 2, b't']).unwrap();
        b[at + 2] = 0;
        let e = read_legacy_bytes(&b, None).unwrap_err();
        assert!(e.contains("expanded tensor"), "{e}");
    }

    #[test]
    fn reads_strided_legacy_tensors() {
        let t = read_legacy_bytes(&tiny_legacy_checkpoint(), None).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "w");
        assert_eq!(t[0].shape, vec![2, 3]);
        // Storage 0..6 viewed with stride (1, 2): row 0 = 0, 2, 4; row 1 = 1, 3, 5.
        assert_eq!(t[0].to_f32().unwrap(), vec![0., 2., 4., 1., 3., 5.]);
        assert_eq!(t[1].name, "n");
        assert_eq!(t[1].dtype, DType::I64);
        assert!(t[1].shape.is_empty());
        assert_eq!(t[1].data, 42i64.to_le_bytes().to_vec());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let full = tiny_legacy_checkpoint();
        for cut in 0..full.len() {
            assert!(read_legacy_bytes(&full[..cut], None).is_err(), "cut at {cut} should fail");
        }
    }

    #[test]
    fn out_of_range_view_is_rejected() {
        let mut b = tiny_legacy_checkpoint();
        // Make storage "100" claim only 5 elements: the (2,3)/(1,2) view reaches element 5.
        let key_list_end = b.len() - (8 + 24 + 8 + 8);
        b[key_list_end..key_list_end + 8].copy_from_slice(&5i64.to_le_bytes());
        let e = read_legacy_bytes(&b, None).unwrap_err();
        assert!(e.contains("tensor w") || e.contains("storage"), "{e}");
    }

    #[test]
    fn key_selection_names_available_entries() {
        let e = read_legacy_bytes(&tiny_legacy_checkpoint(), Some("state_dict")).unwrap_err();
        assert!(e.contains("state_dict") && e.contains("w, n"), "{e}");
    }

    #[test]
    fn safetensors_round_trip_through_candle() {
        let t = read_legacy_bytes(&tiny_legacy_checkpoint(), None).unwrap();
        let td = tempfile::tempdir().unwrap();
        let p = td.path().join("m.safetensors");
        let meta = BTreeMap::from([("source".to_string(), "test".to_string())]);
        write_safetensors(&p, &t, &meta).unwrap();
        let loaded = candle_core::safetensors::load(&p, &candle_core::Device::Cpu).unwrap();
        let w = loaded["w"].to_vec2::<f32>().unwrap();
        assert_eq!(w, vec![vec![0., 2., 4.], vec![1., 3., 5.]]);
        assert_eq!(loaded["n"].to_scalar::<i64>().unwrap(), 42);
        let again = td.path().join("m2.safetensors");
        write_safetensors(&again, &t, &meta).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&again).unwrap());
    }
}
