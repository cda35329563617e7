//! Token counting: a fast, deterministic hash map (FxHash: no random state, much cheaper than SipHash on the tens of
//! millions of short keys a corpus pass makes) and a counter of lowercase tokens.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::text::tokenize::{for_each_token, lowercase};

/// The Fx hash (rustc's): multiply-rotate over 8-byte words. Not DoS-resistant, which does not matter here.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("chunk of 8")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Counts of lowercase tokens.
#[derive(Debug, Default, Clone)]
pub struct TokenCounts {
    pub counts: FastMap<String, u64>,
    pub total: u64,
}

impl TokenCounts {
    /// Count every token of `text` (lowercased).
    pub fn add_text(&mut self, text: &str, buf: &mut String) {
        for_each_token(text, |t| {
            let w = lowercase(t.text, buf);
            self.total += 1;
            match self.counts.get_mut(w) {
                Some(c) => *c += 1,
                None => {
                    self.counts.insert(w.to_string(), 1);
                }
            }
        });
    }

    /// Add another counter into this one.
    pub fn merge(&mut self, other: TokenCounts) {
        self.total += other.total;
        if self.counts.len() < other.counts.len() {
            let mine = std::mem::replace(&mut self.counts, other.counts);
            for (k, v) in mine {
                *self.counts.entry(k).or_insert(0) += v;
            }
        } else {
            for (k, v) in other.counts {
                *self.counts.entry(k).or_insert(0) += v;
            }
        }
    }

    pub fn get(&self, word: &str) -> u64 {
        self.counts.get(word).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_lowercase_tokens_and_merges() {
        let mut buf = String::new();
        let mut a = TokenCounts::default();
        a.add_text("Salt and salt, AND pepper", &mut buf);
        let mut b = TokenCounts::default();
        b.add_text("salt", &mut buf);
        a.merge(b);
        assert_eq!((a.get("salt"), a.get("and"), a.get("pepper"), a.total), (3, 2, 1, 6));
    }
}
