//! Blind inputs: what a sequencing model (or a human annotator) is given, without anything that tells the
//! order.
//!
//! `instances.jsonl` is the *gold* file: its items carry `step` (the step index in the procedure, which sorts
//! them into the authored order) and the instance carries `references`; the evaluator reads it. `inputs.jsonl`
//! (written with `--blind`) is the file to hand to a model: one line per instance,
//!
//! ```text
//! {"id": instance id, "split", "modality", "items": [{"key", "title"?, "text"?, "images"?}, ...]}
//! ```
//!
//! with the items in the *same shuffled order* as the gold instance, so a predicted order of item indices
//! (`{"id", "order"}`, what `stepwise eval` reads) needs no mapping. Each item has an opaque `key`, a hash of
//! (seed, instance id, step), for tools that prefer names to positions; keys are unrelated to the order, so
//! sorting by them is a random order. No step index, no references and no procedure field (the instance id
//! names the procedure and the first step of the window, which says nothing about the order of the items).
//!
//! Image paths are passed through: the built-in world names its images by a hash of (procedure, step), so
//! they reveal nothing; real corpora whose file names number the steps (RecipeQA's `<recipe>_<step>_<k>.jpg`)
//! still do, and [`leaky_image_names`] counts such items so the manifest can say so.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use stepwise_core::Result;
use stepwise_core::json::write_canonical;
use stepwise_core::output::write_file_atomic;
use stepwise_core::sequencing::SequencingInstance;

/// The blind inputs file inside a sequencing folder.
pub const INPUTS_JSONL: &str = "inputs.jsonl";

/// One item as a model sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlindItem {
    /// Opaque, unrelated to the order: see [`item_key`].
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
}

/// One instance as a model sees it: the gold instance's items, in its order, without steps or references.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlindInstance {
    pub id: String,
    pub split: String,
    pub modality: String,
    pub items: Vec<BlindItem>,
}

/// The opaque key of the item showing `step` in instance `instance_id`: 10 hex digits of a seeded hash.
pub fn item_key(seed: u64, instance_id: &str, step: usize) -> String {
    let h = stepwise_core::hash::hash64(&[
        b"sequencing/item-key",
        &seed.to_le_bytes(),
        instance_id.as_bytes(),
        &(step as u64).to_le_bytes(),
    ]);
    format!("{:010x}", h >> 24)
}

/// The blind view of a gold instance.
pub fn blind(inst: &SequencingInstance, seed: u64) -> BlindInstance {
    BlindInstance {
        id: inst.id.clone(),
        split: inst.split.clone(),
        modality: inst.modality.clone(),
        items: inst
            .items
            .iter()
            .map(|it| BlindItem {
                key: item_key(seed, &inst.id, it.step),
                title: it.title.clone(),
                text: it.text.clone(),
                images: it.images.clone(),
            })
            .collect(),
    }
}

/// Write `inputs.jsonl` (canonical JSON, one blind instance per line, in the gold file's order).
pub fn write_inputs_jsonl(path: &Path, instances: &[SequencingInstance], seed: u64) -> Result<()> {
    write_file_atomic(path, |w| {
        for inst in instances {
            write_canonical(w, &serde_json::to_value(blind(inst, seed)).expect("blind instances serialize"))?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// Items with an image whose file name has the item's step number (0- or 1-based) as a separate number
/// (`12_3_0.jpg`, `step-03.png`, `img3.jpg`; not inside a hash like `3f09c2a17b4e`): image paths that may
/// still reveal the order in the blind inputs. A heuristic, for the manifest's warning.
pub fn leaky_image_names(instances: &[SequencingInstance]) -> usize {
    instances
        .iter()
        .flat_map(|i| &i.items)
        .filter(|it| {
            it.images.iter().any(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
                stem.split(|c: char| !c.is_ascii_alphanumeric())
                    // A token that is a number, or a word followed by a number ("step03").
                    .filter_map(|t| {
                        let digits = t.trim_start_matches(|c: char| c.is_ascii_alphabetic());
                        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
                    })
                    .any(|n| n.parse::<usize>().ok().is_some_and(|v| v == it.step || v == it.step + 1))
            })
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::sequencing::SequencingItem;

    fn item(step: usize, image: &str) -> SequencingItem {
        SequencingItem { step, title: Some(format!("t{step}")), text: None, images: vec![image.to_string()] }
    }

    #[test]
    fn blind_items_keep_the_order_and_content_but_not_the_step() {
        let inst = SequencingInstance {
            id: "p#s0".into(),
            procedure: "p".into(),
            split: "test".into(),
            modality: "multimodal".into(),
            items: vec![item(2, "images/p/a.jpg"), item(0, "images/p/b.jpg"), item(1, "images/p/c.jpg")],
            references: vec![vec![1, 2, 0]],
            constraints: None,
        };
        let b = blind(&inst, 7);
        assert_eq!(b.items.iter().map(|i| i.title.clone().unwrap()).collect::<Vec<_>>(), ["t2", "t0", "t1"]);
        assert_eq!(b.items[0].key, item_key(7, "p#s0", 2));
        assert_ne!(b.items[0].key, item_key(8, "p#s0", 2), "keys depend on the seed");
        let json = serde_json::to_string(&b).unwrap();
        assert!(!json.contains("step") && !json.contains("references") && !json.contains("procedure"), "{json}");
        assert_eq!(leaky_image_names(std::slice::from_ref(&inst)), 0);
        let leaky = SequencingInstance {
            items: vec![
                item(2, "images/r_2_0.jpg"),
                item(0, "x/r-step0.jpg"),
                item(3, "images/world-cooking_000001/3f09c2a17b4e.jpg"),
            ],
            ..inst
        };
        assert_eq!(leaky_image_names(&[leaky]), 2, "hashes are not step numbers");
    }
}
