//! The `.work/` folder of an unfinished `stepwise embed` run: what makes it resumable.
//!
//! - `run.json`: the requested encoder, options and seed (written before anything else, so a resumed run can
//!   be checked against it) and, once built, the encoder's [`EncoderInfo`];
//! - `model/`: a freshly fitted encoder's state;
//! - `chunk-NNNNNN.bin`: encoded vectors, appended chunk by chunk. Each chunk is written to a temporary name and
//!   renamed, so after a `kill -9` every `chunk-*.bin` is complete; leftovers are ignored. A chunk is one JSON
//!   line `{"dim", "keys", "failures"}` followed by `keys.len() * dim` little-endian f32s; in a `--tokens` or
//!   `--patches` run the header also has `token_counts` (rows per key: its tokens, or its `grid²` patches), and
//!   `row_dim` when the rows are not `dim` wide, and the vectors are followed by `sum(token_counts) * row_dim`
//!   little-endian float16 row values, in key order; with `token_ids` (token runs) these are followed by one
//!   little-endian int64 vocabulary id per row. Row values are not loaded: they are read through a memory map of
//!   the chunk file when the store is written (they can be large: MiniLM token vectors take about 10 times the
//!   space of the pooled float32 vectors, a 7×7 EfficientNet patch grid 25 times). Token rows of a chunk without
//!   ids (written by an older stepwise) count as missing, so their items are encoded again.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use half::f16;
use memmap2::Mmap;
use serde::{Deserialize, Serialize};
use stepwise_core::output::{write_file_atomic, write_string_atomic};
use stepwise_core::{Error, IoResultExt};

use crate::FeatureError;
use crate::encoder::EncoderInfo;

pub const RUN_FILE: &str = "run.json";

/// What an unfinished run was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub encoder: String,
    pub options: BTreeMap<String, String>,
    pub seed: u64,
    /// True for `--force` runs: the existing store is replaced, not extended.
    pub replace: bool,
    /// `--tokens`: the cap on token vectors per item (absent: no token output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<usize>,
    /// `--patches`: the grid side (absent: no patch output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<EncoderInfo>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChunkHeader {
    dim: usize,
    keys: Vec<String>,
    failures: Vec<ChunkFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_counts: Option<Vec<usize>>,
    /// Width of the rows when it is not `dim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    row_dim: Option<usize>,
    /// True when one int64 id per row follows the row values.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    token_ids: bool,
}

impl ChunkHeader {
    fn row_dim(&self) -> usize {
        self.row_dim.unwrap_or(self.dim)
    }
}

/// The token vectors (or patch grids) of a chunk's keys: `counts[i]` rows of `dim` for key i, concatenated in key
/// order, and for token rows their vocabulary ids.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkTokens {
    pub counts: Vec<usize>,
    /// Width of a row.
    pub dim: usize,
    pub data: Vec<f16>,
    /// One id per row (token runs); `None` for rows without ids (patches).
    pub ids: Option<Vec<i64>>,
}

/// Where the rows of one key are in a chunk file.
#[derive(Debug, Clone, Copy)]
struct RowLoc {
    chunk: usize,
    /// Byte offset and length of the float16 values.
    start: usize,
    len: usize,
    /// Byte offset of the int64 ids and their count, when the chunk has ids.
    ids: Option<(usize, usize)>,
}

/// An input that could not be encoded, by content key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkFailure {
    pub key: String,
    pub reason: String,
}

/// The `.work/` folder of a store.
#[derive(Debug)]
pub struct WorkDir {
    pub dir: PathBuf,
    /// Vectors of finished chunks, by content key: (chunk, row).
    vectors: HashMap<String, (usize, usize)>,
    chunks: Vec<Vec<f32>>,
    /// Token (or patch) values of finished chunks, by content key.
    tokens: HashMap<String, RowLoc>,
    /// Memory maps of the chunk files holding token values (by chunk; `None` for chunks without).
    token_maps: Vec<Option<Mmap>>,
    pub failures: HashMap<String, String>,
    dim: Option<usize>,
}

impl WorkDir {
    /// Read the finished chunks in `dir` (which may not exist yet).
    pub fn open(dir: &Path) -> Result<WorkDir, FeatureError> {
        let mut w = WorkDir {
            dir: dir.to_path_buf(),
            vectors: HashMap::new(),
            chunks: Vec::new(),
            tokens: HashMap::new(),
            token_maps: Vec::new(),
            failures: HashMap::new(),
            dim: None,
        };
        if !dir.is_dir() {
            return Ok(w);
        }
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .at(dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("chunk-") && n.ends_with(".bin"))
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let bytes = stepwise_core::paths::read_regular_file(&path)?;
            let (header, data, token_start) = parse_chunk(&path, &bytes)?;
            drop(bytes);
            if let Some(d) = w.dim
                && d != header.dim
            {
                return Err(FeatureError::Mismatch(format!(
                    "{}: dimension {} differs from earlier chunks ({d}); pass --force to start over",
                    path.display(),
                    header.dim
                )));
            }
            let map = header.token_counts.is_some().then(|| map_chunk(&path)).transpose()?;
            w.add(header, data, token_start, map);
        }
        Ok(w)
    }

    /// Remember a finished chunk's vectors, tokens (at byte `token_start` of its file, mapped by `map`) and
    /// failures (the first occurrence of a key wins).
    fn add(&mut self, header: ChunkHeader, data: Vec<f32>, token_start: usize, map: Option<Mmap>) {
        let c = self.chunks.len();
        if let Some(counts) = &header.token_counts {
            let width = header.row_dim() * 2;
            let mut at = token_start;
            let mut id_at = token_start + counts.iter().sum::<usize>() * width;
            for (key, &n) in header.keys.iter().zip(counts) {
                let ids = header.token_ids.then_some((id_at, n));
                let loc = RowLoc { chunk: c, start: at, len: n * width, ids };
                // The first chunk holding a key wins, unless it lacks the ids a later one has.
                let slot = self.tokens.entry(key.clone()).or_insert(loc);
                if slot.ids.is_none() && ids.is_some() {
                    *slot = loc;
                }
                at += n * width;
                id_at += n * 8;
            }
        }
        for (row, key) in header.keys.into_iter().enumerate() {
            self.vectors.entry(key).or_insert((c, row));
        }
        for f in header.failures {
            self.failures.entry(f.key).or_insert(f.reason);
        }
        self.dim = Some(header.dim);
        self.chunks.push(data);
        self.token_maps.push(map);
    }

    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The dimension of the stored chunks, if any.
    pub fn dim(&self) -> Option<usize> {
        self.dim
    }

    pub fn vector(&self, key: &str) -> Option<&[f32]> {
        let &(c, row) = self.vectors.get(key)?;
        let dim = self.dim?;
        Some(&self.chunks[c][row * dim..(row + 1) * dim])
    }

    pub fn has_vector(&self, key: &str) -> bool {
        self.vectors.contains_key(key)
    }

    /// The token vectors of `key` as little-endian float16 bytes (`count * dim * 2`; empty for an input without
    /// tokens), read through the chunk file's memory map, when a chunk of a `--tokens` run holds them.
    pub fn token_bytes(&self, key: &str) -> Option<&[u8]> {
        let loc = self.tokens.get(key)?;
        self.token_maps[loc.chunk].as_ref()?.get(loc.start..loc.start + loc.len)
    }

    /// The vocabulary ids of `key`'s token rows, when a chunk of a `--tokens` run holds them (chunks written
    /// before token ids existed have none).
    pub fn token_ids(&self, key: &str) -> Option<Vec<i64>> {
        let loc = self.tokens.get(key)?;
        let (start, n) = loc.ids?;
        let bytes = self.token_maps[loc.chunk].as_ref()?.get(start..start + n * 8)?;
        Some(bytes.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().expect("8-byte chunks"))).collect())
    }

    pub fn model_dir(&self) -> PathBuf {
        self.dir.join(crate::store::MODEL_DIR)
    }

    pub fn read_run(&self) -> Result<Option<RunConfig>, FeatureError> {
        let p = self.dir.join(RUN_FILE);
        if !p.exists() {
            return Ok(None);
        }
        let v = stepwise_core::json::read_json(&p)?;
        let r = serde_json::from_value(v)
            .map_err(|e| Error::field(&p, stepwise_core::Location::File, "(run)", e.to_string()))?;
        Ok(Some(r))
    }

    pub fn write_run(&self, run: &RunConfig) -> Result<(), FeatureError> {
        std::fs::create_dir_all(&self.dir).at(&self.dir)?;
        write_string_atomic(&self.dir.join(RUN_FILE), &stepwise_core::json::to_pretty_sorted(run))?;
        Ok(())
    }

    /// Append a finished chunk (atomically) and remember its vectors (and token vectors or patch grids, in a
    /// `--tokens` or `--patches` run).
    pub fn append_chunk(
        &mut self,
        dim: usize,
        keys: Vec<String>,
        data: Vec<f32>,
        failures: Vec<ChunkFailure>,
        tokens: Option<ChunkTokens>,
    ) -> Result<(), FeatureError> {
        assert_eq!(keys.len() * dim, data.len(), "chunk keys and vectors disagree");
        if let Some(t) = &tokens {
            let rows = t.counts.iter().sum::<usize>();
            assert_eq!(t.counts.len(), keys.len(), "chunk keys and token counts disagree");
            assert_eq!(rows * t.dim, t.data.len(), "token counts and values disagree");
            assert!(t.ids.as_ref().is_none_or(|ids| ids.len() == rows), "token counts and ids disagree");
        }
        std::fs::create_dir_all(&self.dir).at(&self.dir)?;
        let path = self.dir.join(format!("chunk-{:06}.bin", self.chunks.len()));
        let (token_counts, row_dim, token_data, token_ids) = match tokens {
            Some(t) => (Some(t.counts), (t.dim != dim).then_some(t.dim), t.data, t.ids),
            None => (None, None, Vec::new(), None),
        };
        let header = ChunkHeader { dim, keys, failures, token_counts, row_dim, token_ids: token_ids.is_some() };
        let line = serde_json::to_string(&header).expect("chunk header serializes");
        write_file_atomic(&path, |w| {
            w.write_all(line.as_bytes())?;
            w.write_all(b"\n")?;
            crate::npy::write_f32s(w, &data)?;
            crate::npy::write_f16s(w, &token_data)?;
            for id in token_ids.iter().flatten() {
                w.write_all(&id.to_le_bytes())?;
            }
            Ok(())
        })?;
        let map = header.token_counts.is_some().then(|| map_chunk(&path)).transpose()?;
        let token_start = line.len() + 1 + std::mem::size_of_val(&data[..]);
        self.add(header, data, token_start, map);
        Ok(())
    }
}

/// Memory-map a finished chunk file (for its token values).
fn map_chunk(path: &Path) -> Result<Mmap, FeatureError> {
    let file = std::fs::File::open(path).at(path)?;
    // SAFETY: a chunk file is written once under a temporary name and renamed; it is never modified afterwards,
    // only deleted with the whole `.work/` folder once the store is written.
    Ok(unsafe { Mmap::map(&file) }.at(path)?)
}

/// The header and vectors of a chunk file's bytes, and the byte offset of its token values (the end of the
/// vectors).
fn parse_chunk(path: &Path, bytes: &[u8]) -> Result<(ChunkHeader, Vec<f32>, usize), FeatureError> {
    let corrupt = |why: &str| {
        FeatureError::Core(Error::bad_input(format!(
            "{}: corrupt work chunk ({why}); delete it to re-encode its items",
            path.display()
        )))
    };
    let nl = bytes.iter().position(|&b| b == b'\n').ok_or_else(|| corrupt("no header line"))?;
    let header: ChunkHeader = serde_json::from_slice(&bytes[..nl]).map_err(|e| corrupt(&e.to_string()))?;
    let body = &bytes[nl + 1..];
    let vector_bytes = header.keys.len() * header.dim * 4;
    let token_bytes = match &header.token_counts {
        None => 0,
        Some(c) if c.len() == header.keys.len() => {
            let rows = c.iter().sum::<usize>();
            rows * header.row_dim() * 2 + if header.token_ids { rows * 8 } else { 0 }
        }
        Some(_) => return Err(corrupt("token counts do not match the keys")),
    };
    if body.len() != vector_bytes + token_bytes {
        return Err(corrupt("vector bytes do not match the header"));
    }
    let data = body[..vector_bytes].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok((header, data, nl + 1 + vector_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip_and_partial_files_are_ignored() {
        let td = tempfile::tempdir().unwrap();
        let dir = td.path().join(".work");
        let mut w = WorkDir::open(&dir).unwrap();
        assert!(!w.exists());
        w.append_chunk(2, vec!["a".into(), "b".into()], vec![1., 2., 3., 4.], vec![], None).unwrap();
        let bad = vec![ChunkFailure { key: "z".into(), reason: "bad".into() }];
        w.append_chunk(2, vec!["c".into()], vec![5., 6.], bad, None).unwrap();
        // A chunk being written when the process was killed.
        std::fs::write(dir.join(".chunk-000002.bin.partial-123"), b"{\"dim\":2").unwrap();
        let back = WorkDir::open(&dir).unwrap();
        assert_eq!(back.chunk_count(), 2);
        assert_eq!(back.vector("b"), Some(&[3f32, 4.][..]));
        assert_eq!(back.vector("c"), Some(&[5f32, 6.][..]));
        assert_eq!(back.failures.get("z").map(String::as_str), Some("bad"));
        assert!(back.vector("z").is_none());
    }

    #[test]
    fn token_chunks_round_trip() {
        let td = tempfile::tempdir().unwrap();
        let dir = td.path().join(".work");
        let mut w = WorkDir::open(&dir).unwrap();
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let tokens =
            ChunkTokens { counts: vec![2, 0, 1], dim: 2, data: h(&[1., 2., 3., 4., 5., 6.]), ids: Some(vec![7, 8, 9]) };
        w.append_chunk(2, vec!["a".into(), "b".into(), "c".into()], vec![0.; 6], vec![], Some(tokens)).unwrap();
        w.append_chunk(2, vec!["d".into()], vec![7., 8.], vec![], None).unwrap();
        let values = |w: &WorkDir, key: &str| {
            w.token_bytes(key).map(|b| b.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]])).collect::<Vec<_>>())
        };
        for back in [&w, &WorkDir::open(&dir).unwrap()] {
            assert_eq!(values(back, "a"), Some(h(&[1., 2., 3., 4.])));
            assert_eq!(values(back, "b"), Some(vec![]));
            assert_eq!(values(back, "c"), Some(h(&[5., 6.])));
            assert_eq!(values(back, "d"), None, "a chunk without token output");
            assert_eq!((back.token_ids("a"), back.token_ids("b")), (Some(vec![7, 8]), Some(vec![])));
            assert_eq!((back.token_ids("c"), back.token_ids("d")), (Some(vec![9]), None));
        }
        let back = WorkDir::open(&dir).unwrap();
        assert_eq!(back.vector("d"), Some(&[7f32, 8.][..]));
        // A token chunk cut short is corrupt, not silently misread.
        let p = dir.join("chunk-000000.bin");
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 2]).unwrap();
        let e = WorkDir::open(&dir).unwrap_err().to_string();
        assert!(e.contains("chunk-000000.bin") && e.contains("corrupt"), "{e}");
    }

    #[test]
    fn patch_chunks_have_their_own_width_and_chunks_without_ids_give_way() {
        let td = tempfile::tempdir().unwrap();
        let dir = td.path().join(".work");
        let mut w = WorkDir::open(&dir).unwrap();
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        // Patch rows 3 wide beside 2-d vectors, no ids.
        let patches = ChunkTokens {
            counts: vec![2, 2],
            dim: 3,
            data: h(&[1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.]),
            ids: None,
        };
        w.append_chunk(2, vec!["a".into(), "b".into()], vec![0.; 4], vec![], Some(patches)).unwrap();
        // A token chunk of an older stepwise (no ids) for "c", then the same key with ids.
        let old = ChunkTokens { counts: vec![1], dim: 2, data: h(&[1., 1.]), ids: None };
        w.append_chunk(2, vec!["c".into()], vec![0.; 2], vec![], Some(old)).unwrap();
        let new = ChunkTokens { counts: vec![1], dim: 2, data: h(&[2., 2.]), ids: Some(vec![5]) };
        w.append_chunk(2, vec!["c".into()], vec![0.; 2], vec![], Some(new)).unwrap();
        let back = WorkDir::open(&dir).unwrap();
        assert_eq!(back.token_bytes("b").map(|b| b.len()), Some(12));
        assert_eq!(back.token_bytes("b").unwrap()[..2], f16::from_f32(7.).to_le_bytes());
        assert_eq!((back.token_ids("a"), back.token_ids("c")), (None, Some(vec![5])));
        assert_eq!(back.token_bytes("c").unwrap(), &f16::from_f32(2.).to_le_bytes().repeat(2)[..]);
    }

    #[test]
    fn corrupt_chunk_is_a_clear_error() {
        let td = tempfile::tempdir().unwrap();
        std::fs::write(td.path().join("chunk-000000.bin"), b"{\"dim\":2,\"keys\":[\"a\"],\"failures\":[]}\n\x00\x00")
            .unwrap();
        let e = WorkDir::open(td.path()).unwrap_err().to_string();
        assert!(e.contains("chunk-000000.bin") && e.contains("corrupt"), "{e}");
    }
}
