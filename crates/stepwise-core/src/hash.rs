//! Content hashes (BLAKE3, hex): input fingerprints in manifests and feature-store keys.

use std::io::Read;
use std::path::Path;

use crate::error::{IoResultExt, Result};

/// Hex BLAKE3 of a byte slice.
pub fn hash_bytes(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Hex BLAKE3 of a string.
pub fn hash_str(s: &str) -> String {
    hash_bytes(s.as_bytes())
}

/// Hex BLAKE3 of a file's content, streamed, and its size in bytes.
pub fn hash_file(path: &Path) -> Result<(String, u64)> {
    let mut f = std::fs::File::open(path).at(path)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).at(path)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((hasher.finalize().to_hex().to_string(), total))
}

/// A 64-bit hash of the parts (stable across platforms and runs), for seeding and deterministic shuffles.
pub fn hash64(parts: &[&[u8]]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    for p in parts {
        hasher.update(&(p.len() as u64).to_le_bytes());
        hasher.update(p);
    }
    let out = hasher.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&out.as_bytes()[..8]);
    u64::from_le_bytes(b)
}
