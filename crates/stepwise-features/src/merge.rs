//! Joining the shard stores of one item list (`stepwise embed --shard I/N`, one per machine) into the store a
//! single run writes: `stepwise features merge PART... -o FEATURES`.
//!
//! Each part holds a contiguous slice of the item list, so its rows, failures, token vectors and patch grids
//! follow each other in shard order exactly as in a single run, and the merged store is written by the same code
//! as [`crate::embed`]'s (byte-identical to a single run whenever the encoder's vector of an input does not depend
//! on the other inputs of its batch, which holds for every encoder here: see the CLI test and the Ray check).
//! Parts are checked first: every shard of the split once, the same item list (by hash), the same encoder,
//! options, seed and inputs, and for corpus-fitted encoders the same fitted model.

use std::path::{Path, PathBuf};

use stepwise_core::json::first_difference;
use stepwise_core::output::read_tree;
use stepwise_core::shard::check_complete;

use crate::FeatureError;
use crate::embed::{RowKind, RowOutput, RowSource, write_store};
use crate::rows::{ItemRows, RowSlice, bad};
use crate::store::{FeatureStore, MODEL_DIR, StoreMeta, read_failures};

/// What a merge wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeReport {
    pub parts: usize,
    /// Rows in the merged store.
    pub stored: usize,
    /// Items listed in its `failures.jsonl`.
    pub failed: usize,
}

/// Merge the shard stores `parts` (any order) into a new store at `out` (replaced only with `force`).
pub fn merge_stores(parts: &[PathBuf], out: &Path, force: bool) -> Result<MergeReport, FeatureError> {
    if out.exists() && !force && std::fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(FeatureError::usage(format!(
            "{}: output exists; choose another path or pass --force to replace it",
            out.display()
        )));
    }
    let mut stores = Vec::with_capacity(parts.len());
    for p in parts {
        let s = FeatureStore::open(p)?;
        if s.meta().shard.is_none() {
            return Err(bad(format!(
                "{}: not a shard store (it was embedded without --shard); merge the stores of `stepwise embed \
                 --shard I/N` runs",
                p.display()
            )));
        }
        stores.push(s);
    }
    let shard_of = |s: &FeatureStore| s.meta().shard.as_ref().map(|m| m.shard).expect("checked above");
    check_complete(&stores.iter().map(shard_of).collect::<Vec<_>>(), |i| parts[i].display().to_string())
        .map_err(bad)?;
    stores.sort_by_key(|s| shard_of(s).index);

    // The same split of the same item list, made the same way.
    let first = &stores[0];
    let first_shard = first.meta().shard.clone().expect("checked above");
    let common = settings(first.meta());
    for s in &stores[1..] {
        let m = s.meta().shard.as_ref().expect("checked above");
        if m.items_blake3 != first_shard.items_blake3 || m.items != first_shard.items {
            return Err(bad(format!(
                "{} and {} are shards of different item lists ({} and {} items; another corpus, --strings file or \
                 encoder modality?)",
                first.dir().display(),
                s.dir().display(),
                first_shard.items,
                m.items
            )));
        }
        if let Some(field) = first_difference(&common, &settings(s.meta())) {
            return Err(bad(format!(
                "{} and {} were embedded with different settings (meta.json field `{field}` differs); re-run the \
                 shards with the same command",
                first.dir().display(),
                s.dir().display()
            )));
        }
    }
    let held: usize = stores.iter().map(|s| s.meta().count + s.meta().failures).sum();
    if held != first_shard.items {
        return Err(bad(format!(
            "the parts hold {held} items (rows and failures) but the item list has {}; a part is incomplete or \
             was edited",
            first_shard.items
        )));
    }
    let model = if first.meta().fitted {
        let model = first.dir().join(MODEL_DIR);
        let reference = read_tree(&model)?;
        for s in &stores[1..] {
            if read_tree(&s.dir().join(MODEL_DIR))? != reference {
                return Err(bad(format!(
                    "{} and {}: the fitted models ({MODEL_DIR}/) differ, so their vectors are not comparable; \
                     re-run the shards with the same seed and options",
                    first.dir().display(),
                    s.dir().display()
                )));
            }
        }
        Some(model)
    } else {
        None
    };

    // Rows and failures in shard order.
    let mut keys = Vec::new();
    let mut failures = Vec::new();
    let mut item_rows: Vec<Option<ItemRows>> = Vec::with_capacity(stores.len());
    let mut owner: Vec<(usize, usize)> = Vec::new();
    for (pi, s) in stores.iter().enumerate() {
        keys.push(s.keys()?);
        failures.extend(read_failures(&s.dir().join(crate::store::FAILURES_FILE))?);
        item_rows.push(match (&s.meta().tokens, &s.meta().patches) {
            (Some(_), _) => s.tokens()?.map(|t| t.into_rows()),
            (None, Some(_)) => s.patches()?.map(|p| p.into_rows()),
            (None, None) => None,
        });
        owner.extend((0..s.len()).map(|r| (pi, r)));
    }
    let rows: Vec<(&str, &str)> = stores
        .iter()
        .zip(&keys)
        .flat_map(|(s, k)| s.ids().iter().map(String::as_str).zip(k.iter().map(String::as_str)))
        .collect();
    if rows.is_empty() {
        let first_failure = failures.first().map_or_else(String::new, |f| format!(" (first: {}: {})", f.id, f.reason));
        return Err(FeatureError::NoItems(format!(
            "all {} items of the parts failed to encode, so there is nothing to merge{first_failure}; each part lists \
             its failures in its {}",
            failures.len(),
            crate::store::FAILURES_FILE
        )));
    }
    let meta = StoreMeta {
        count: rows.len(),
        failures: failures.len(),
        ids_blake3: String::new(),
        tokens: None,
        patches: None,
        shard: None,
        ..first.meta().clone()
    };
    let row_output = match (&first.meta().tokens, &first.meta().patches) {
        (Some(t), _) => {
            Some(RowOutput { kind: RowKind::Tokens(t.max_tokens), what: &t.token, dim: t.dim, vocab: t.vocab.clone() })
        }
        (None, Some(p)) => Some(RowOutput { kind: RowKind::Patches(p.grid), what: &p.patch, dim: p.dim, vocab: None }),
        (None, None) => None,
    };
    let source = Parts { stores: &stores, item_rows: &item_rows, owner: &owner };
    // The parts record the embedding command without its `--shard` (see the CLI's canonical command line): the
    // command of the single run the merged store equals.
    let command = stepwise_core::Manifest::read(first.dir())?.command;
    write_store(out, meta, &rows, &failures, &source, row_output, model.as_deref(), Some(command))?;
    Ok(MergeReport { parts: stores.len(), stored: rows.len(), failed: failures.len() })
}

/// The rows of the parts, numbered through.
struct Parts<'a> {
    stores: &'a [FeatureStore],
    item_rows: &'a [Option<ItemRows>],
    /// Merged row → (part, row in the part).
    owner: &'a [(usize, usize)],
}

impl RowSource for Parts<'_> {
    fn vector(&self, row: usize, _key: &str) -> Option<&[f32]> {
        let &(p, r) = self.owner.get(row)?;
        Some(self.stores[p].row(r))
    }

    fn rows(&self, row: usize, _key: &str) -> Option<RowSlice<'_>> {
        let &(p, r) = self.owner.get(row)?;
        self.item_rows[p].as_ref().map(|t| RowSlice::Values(t.item_f16(r)))
    }

    fn token_ids(&self, row: usize, _key: &str) -> Option<Vec<i64>> {
        let &(p, r) = self.owner.get(row)?;
        self.item_rows[p].as_ref()?.item_row_ids(r).map(<[i64]>::to_vec)
    }
}

/// What must agree between the parts: `meta.json` without the part's own counts, hashes and shard index.
fn settings(meta: &StoreMeta) -> serde_json::Value {
    let mut m = meta.clone();
    m.count = 0;
    m.failures = 0;
    m.ids_blake3 = String::new();
    m.shard = None;
    if let Some(t) = &mut m.tokens {
        t.total = 0;
        t.offsets_blake3 = String::new();
        t.ids_blake3 = None;
    }
    serde_json::to_value(&m).expect("store metadata serializes")
}
