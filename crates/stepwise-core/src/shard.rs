//! One part of a job split over several machines: `--shard I/N` (`stepwise embed`, `stepwise sweep`).
//!
//! A shard takes a contiguous slice of the job's units (items, procedures), so joining the parts in shard order
//! gives the units in the order a single run has them, and the merged output can be byte-identical to it.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// More shards than this is a typo, not a cluster.
pub const MAX_SHARDS: usize = 100_000;

/// Part `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The units of this part among `len` units: the `index`-th of `count` contiguous slices whose sizes differ
    /// by at most one.
    pub fn range(self, len: usize) -> Range<usize> {
        let at = |i: usize| (i as u128 * len as u128 / self.count as u128) as usize;
        at(self.index)..at(self.index + 1)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| format!("shard {s:?}: {why} (expected I/N with 0 <= I < N, e.g. 0/4)");
        let (i, n) = s.split_once('/').ok_or_else(|| bad("no `/`"))?;
        let index: usize = i.trim().parse().map_err(|_| bad("I is not a number"))?;
        let count: usize = n.trim().parse().map_err(|_| bad("N is not a number"))?;
        if count == 0 || count > MAX_SHARDS {
            return Err(bad(&format!("N must be between 1 and {MAX_SHARDS}")));
        }
        if index >= count {
            return Err(bad("I must be smaller than N"));
        }
        Ok(Shard { index, count })
    }
}

impl Serialize for Shard {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Shard {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Check that `parts` are the shards 0..N of one N-way split, each once; returns N. `name(i)` names part i in
/// errors (its folder).
pub fn check_complete(parts: &[Shard], name: impl Fn(usize) -> String) -> Result<usize, String> {
    let Some(first) = parts.first() else {
        return Err("no parts to merge".to_string());
    };
    let n = first.count;
    let mut seen: Vec<Option<usize>> = vec![None; n];
    for (i, p) in parts.iter().enumerate() {
        if p.count != n {
            return Err(format!(
                "{} is shard {p} but {} is shard {first}: parts of different splits",
                name(i),
                name(0)
            ));
        }
        if let Some(j) = seen[p.index] {
            return Err(format!("{} and {} are both shard {p}", name(j), name(i)));
        }
        seen[p.index] = Some(i);
    }
    let missing: Vec<String> = (0..n).filter(|&i| seen[i].is_none()).map(|i| format!("{i}/{n}")).collect();
    if !missing.is_empty() {
        return Err(format!("missing shard(s) {} of the {n}-way split", missing.join(", ")));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!("1/4".parse::<Shard>(), Ok(Shard { index: 1, count: 4 }));
        assert_eq!(Shard { index: 1, count: 4 }.to_string(), "1/4");
        for bad in ["", "1", "4/4", "0/0", "a/2", "1/b", "-1/2", "0/100001"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let e = "3/2".parse::<Shard>().unwrap_err();
        assert!(e.contains("\"3/2\"") && e.contains("I must be smaller than N"), "{e}");
    }

    proptest! {
        /// The ranges of the N shards tile 0..len in order, with sizes differing by at most one.
        #[test]
        fn ranges_tile_in_order(len in 0usize..10_000, count in 1usize..64) {
            let ranges: Vec<Range<usize>> = (0..count).map(|index| Shard { index, count }.range(len)).collect();
            prop_assert_eq!(ranges[0].start, 0);
            prop_assert_eq!(ranges[count - 1].end, len);
            for w in ranges.windows(2) {
                prop_assert_eq!(w[0].end, w[1].start);
            }
            let sizes: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
            prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }
    }

    #[test]
    fn completeness() {
        let s = |index, count| Shard { index, count };
        let name = |i: usize| format!("part{i}");
        assert_eq!(check_complete(&[s(1, 2), s(0, 2)], name), Ok(2));
        assert!(check_complete(&[s(0, 2)], name).unwrap_err().contains("missing shard(s) 1/2"));
        assert!(check_complete(&[s(0, 2), s(0, 2)], name).unwrap_err().contains("part0 and part1 are both shard 0/2"));
        assert!(check_complete(&[s(0, 2), s(1, 3)], name).unwrap_err().contains("different splits"));
        assert!(check_complete(&[], name).is_err());
    }
}
