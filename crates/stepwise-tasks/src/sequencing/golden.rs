//! A golden test subset of sequencing instances for human evaluation, chosen by explicit, measurable rules (the
//! sequencing paper's golden sets were hand-picked: "procedural in both texts and images", "images complement
//! the textual descriptions"; appendix B.1). Every rule given must hold: the split, the procedure's category, a
//! minimum number of step images, and complementary modalities (the images carry order evidence the text lacks,
//! measured by a caller-given path support per modality, e.g. `stepwise_models::order_evidence`). Then a seeded
//! draw of `count` of the passing instances, kept in file order.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rand::Rng;
use serde::Serialize;
use stepwise_core::rng::rng_for;
use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Error, Procedure, Result};

/// The rules.
#[derive(Debug, Clone)]
pub struct GoldenRules {
    /// Instances of this split (`all` for every split).
    pub split: String,
    /// The procedure's category is one of these (none: any).
    pub categories: BTreeSet<String>,
    /// The instance's steps have at least this many images in all.
    pub min_images: Option<usize>,
    /// Complementary modalities: image path support ≥ the first, text path support ≤ the second.
    pub complementary: Option<(f64, f64)>,
    /// Draw this many of the passing instances (all when `None` or when fewer pass).
    pub count: Option<usize>,
    pub seed: u64,
}

/// What the rules read of a procedure: its category and each step's image count.
pub type ProcedureInfo = HashMap<String, (Option<String>, Vec<usize>)>;

/// The category and step image counts of each procedure.
pub fn procedure_info(procedures: Vec<Procedure>) -> ProcedureInfo {
    procedures.into_iter().map(|p| (p.id, (p.category, p.steps.iter().map(|s| s.images.len()).collect()))).collect()
}

/// One selected instance, as `selection.jsonl` records it.
#[derive(Debug, Clone, Serialize)]
pub struct Selected<'a> {
    pub id: &'a str,
    pub procedure: &'a str,
    pub category: Option<&'a str>,
    /// Images of the instance's steps.
    pub images: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_support: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_support: Option<f64>,
}

/// The outcome of [`select`].
#[derive(Debug, Clone)]
pub struct GoldenSelection<'a> {
    /// The chosen instances (index into the input, what was measured), in file order.
    pub selected: Vec<(usize, Selected<'a>)>,
    /// Instances passing every rule (before the draw).
    pub passed: usize,
    /// Instances rejected, by the first rule they failed.
    pub rejected: BTreeMap<&'static str, u64>,
}

/// The path supports of an instance's items, `(image, text)`.
pub type Supports<'f> = &'f dyn Fn(&SequencingInstance) -> Result<(f64, f64)>;

/// Apply `rules` to `instances`; `procedures` gives categories and image counts (image counts fall back to the
/// items' own images), `supports` the path supports when `rules.complementary` is set. The selection may be
/// empty ([`GoldenSelection::require_some`]).
pub fn select<'a>(
    instances: &'a [SequencingInstance],
    procedures: &'a ProcedureInfo,
    rules: &GoldenRules,
    supports: Option<Supports<'_>>,
) -> Result<GoldenSelection<'a>> {
    let mut rejected: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut passing: Vec<(usize, Selected)> = Vec::new();
    for (k, inst) in instances.iter().enumerate() {
        if rules.split != "all" && inst.split != rules.split {
            *rejected.entry("split").or_default() += 1;
            continue;
        }
        let proc_info = procedures.get(&inst.procedure);
        let category = proc_info.and_then(|(c, _)| c.as_deref());
        if !rules.categories.is_empty() && !category.is_some_and(|c| rules.categories.contains(c)) {
            *rejected.entry("category").or_default() += 1;
            continue;
        }
        let images: usize = inst
            .items
            .iter()
            .map(|i| proc_info.and_then(|(_, counts)| counts.get(i.step).copied()).unwrap_or(i.images.len()))
            .sum();
        if rules.min_images.is_some_and(|m| images < m) {
            *rejected.entry("min_images").or_default() += 1;
            continue;
        }
        let (mut image_support, mut text_support) = (None, None);
        if let Some((min_image, max_text)) = rules.complementary {
            let supports = supports.ok_or_else(|| Error::usage("complementary modalities need path supports"))?;
            let (is, ts) = supports(inst)?;
            image_support = Some(is);
            text_support = Some(ts);
            if is < min_image || ts > max_text {
                *rejected.entry("complementary").or_default() += 1;
                continue;
            }
        }
        passing.push((
            k,
            Selected { id: &inst.id, procedure: &inst.procedure, category, images, image_support, text_support },
        ));
    }
    let passed = passing.len();
    if let Some(n) = rules.count
        && n < passing.len()
    {
        // Partial Fisher–Yates with one seeded stream, then back to file order.
        let mut rng = rng_for(rules.seed, "select-golden");
        for j in 0..n {
            let r = rng.random_range(j..passing.len());
            passing.swap(j, r);
        }
        passing.truncate(n);
        passing.sort_by_key(|(k, _)| *k);
    }
    Ok(GoldenSelection { selected: passing, passed, rejected })
}

impl GoldenSelection<'_> {
    /// The selection, or an error naming the rejections when no instance passed.
    pub fn require_some(self) -> Result<Self> {
        if self.selected.is_empty() {
            return Err(Error::bad_input(format!(
                "no instance passes the rules (rejected: {})",
                self.rejected.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use stepwise_core::sequencing::SequencingItem;

    use super::*;

    fn instance(id: &str, procedure: &str, split: &str, images: usize) -> SequencingInstance {
        let item = |step| SequencingItem {
            step,
            title: None,
            text: Some(format!("step {step}")),
            images: (0..images).map(|i| format!("{procedure}/{step}-{i}.jpg")).collect(),
        };
        SequencingInstance {
            constraints: None,
            id: id.into(),
            procedure: procedure.into(),
            split: split.into(),
            modality: "multimodal".into(),
            items: vec![item(0), item(1)],
            references: vec![vec![0, 1]],
        }
    }

    fn rules() -> GoldenRules {
        GoldenRules {
            split: "test".into(),
            categories: BTreeSet::new(),
            min_images: None,
            complementary: None,
            count: None,
            seed: 3,
        }
    }

    #[test]
    fn rules_reject_by_the_first_failing_rule_and_the_draw_keeps_file_order() {
        let instances: Vec<SequencingInstance> = (0..10)
            .map(|i| {
                instance(
                    &format!("i{i}"),
                    if i % 2 == 0 { "cake" } else { "soup" },
                    ["test", "train"][i % 3 / 2],
                    i % 4,
                )
            })
            .collect();
        let procedures: ProcedureInfo = [
            ("cake".to_string(), (Some("cake".to_string()), vec![])),
            ("soup".to_string(), (Some("soup".to_string()), vec![])),
        ]
        .into_iter()
        .collect();
        let r = GoldenRules { categories: ["cake".to_string()].into(), min_images: Some(2), ..rules() };
        let s = select(&instances, &procedures, &r, None).unwrap();
        let ids: Vec<&str> = s.selected.iter().map(|(_, x)| x.id).collect();
        // Test split: i % 3 != 2 (0 1 3 4 6 7 9); cake: even (0 4 6); at least 2 images over 2 items: i % 4 ≥ 1.
        assert_eq!(ids, ["i6"]);
        assert_eq!(s.rejected, BTreeMap::from([("category", 4), ("min_images", 2), ("split", 3)]));
        let drawn = select(&instances, &procedures, &GoldenRules { count: Some(3), ..rules() }, None).unwrap();
        assert_eq!(drawn.passed, 7);
        let idx: Vec<usize> = drawn.selected.iter().map(|(k, _)| *k).collect();
        assert!(idx.len() == 3 && idx.windows(2).all(|w| w[0] < w[1]), "{idx:?}");
        let again = select(&instances, &procedures, &GoldenRules { count: Some(3), ..rules() }, None).unwrap();
        assert_eq!(idx, again.selected.iter().map(|(k, _)| *k).collect::<Vec<_>>());
    }

    #[test]
    fn complementary_modalities_use_the_supports_and_nothing_passing_is_an_error() {
        let instances = vec![instance("a", "p", "test", 1), instance("b", "p", "test", 1)];
        let procedures = ProcedureInfo::new();
        let r = GoldenRules { complementary: Some((0.75, 0.5)), ..rules() };
        let supports = |i: &SequencingInstance| Ok(if i.id == "a" { (0.9, 0.4) } else { (0.9, 0.6) });
        let s = select(&instances, &procedures, &r, Some(&supports)).unwrap();
        assert_eq!(s.selected.len(), 1);
        assert_eq!((s.selected[0].1.image_support, s.selected[0].1.text_support), (Some(0.9), Some(0.4)));
        let none = select(&instances, &procedures, &GoldenRules { split: "val".into(), ..rules() }, None).unwrap();
        assert_eq!((none.selected.len(), none.passed), (0, 0));
        assert_eq!(none.require_some().unwrap_err().to_string(), "no instance passes the rules (rejected: split 2)");
    }
}
