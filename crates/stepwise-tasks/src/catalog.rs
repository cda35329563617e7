//! The items of one task: every step title, text or image of the corpus (plus extra distractor images), each with
//! its vector and the procedures it belongs to, and for every procedure the steps that can be question items.
//!
//! Items are deduplicated by content (an image file used by several steps, or the same title in many recipes, is
//! one item owned by all of them), so "a distractor from another procedure" means an item none of whose owners is
//! the question's procedure, and a choice can never repeat the answer's content.

use std::collections::HashMap;
use std::sync::OnceLock;

use rand::Rng;
use stepwise_core::rng::rng_for;
use stepwise_core::{Error, Procedure, Result};
use stepwise_features::{Metric, Vectors};
use stepwise_kernels::math::dot_lanes;

use crate::config::{GenerateConfig, ItemKind};
use crate::counts::SkipReason;
use crate::titles::{content_key, strip_step_number};

/// One candidate item (a row of [`Catalog::data`]).
#[derive(Debug, Clone)]
pub struct Item {
    /// The feature-store id of its vector, e.g. `image:images/x.jpg` or `title:proc#3`.
    pub feature_id: String,
    /// What a question shows: an image path, or the title/text.
    pub content: String,
    /// Procedures (indices into the corpus) that use it, sorted; empty for extra distractor-pool items.
    pub owners: Vec<u32>,
}

impl Item {
    pub fn is_pool(&self) -> bool {
        self.owners.is_empty()
    }
}

/// A step that can be a question item.
#[derive(Debug, Clone)]
pub struct EligibleStep {
    /// Step index in the procedure (0-based, as in the corpus).
    pub step: usize,
    /// Row of the item in the catalog.
    pub item: u32,
    /// What the question shows for this step (the procedure's own title/text, or the chosen image path).
    pub display: String,
}

/// One procedure's view for a task.
#[derive(Debug, Clone)]
pub struct ProcEntry {
    pub eligible: Vec<EligibleStep>,
    /// Steps that cannot be question items, by reason.
    pub excluded: Vec<(SkipReason, u64)>,
}

/// Items, vectors and per-procedure eligible steps for one item kind.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub kind: ItemKind,
    pub metric: Metric,
    pub dim: usize,
    /// Row-major item vectors; L2-normalised when the metric is cosine, so that cosine distance is `1 − dot`.
    pub data: Vec<f32>,
    pub items: Vec<Item>,
    /// One entry per procedure, in corpus order.
    pub procs: Vec<ProcEntry>,
    /// Each row's Euclidean length, measured once on first use ([`Catalog::norm`]; `data` must not change
    /// after it): calibrated knobs measure cosines between millions of pairs of rows.
    pub norms: OnceLock<Vec<f32>>,
}

/// Where the vectors come from.
pub struct FeatureSources<'a> {
    pub features: &'a Vectors,
    /// Extra distractor images (only used for image items), with ids as in a feature store (`image:...`).
    pub extra_pool: Option<&'a Vectors>,
    /// Steps whose vector is missing are excluded (and counted) instead of being an error.
    pub allow_missing: bool,
}

impl Catalog {
    /// Build the catalog of `kind` items for `procedures`.
    pub fn build(
        procedures: &[Procedure],
        sources: &FeatureSources<'_>,
        kind: ItemKind,
        cfg: &GenerateConfig,
    ) -> Result<Catalog> {
        let features = sources.features;
        let dim = features.dim;
        let mut items: Vec<Item> = Vec::new();
        let mut rows: Vec<usize> = Vec::new(); // features row per item (pool rows are offset past features)
        let mut by_key: HashMap<String, u32> = HashMap::new();
        let mut procs = Vec::with_capacity(procedures.len());
        let mut missing: Vec<String> = Vec::new();
        let mut n_missing = 0usize;
        for (pi, p) in procedures.iter().enumerate() {
            let pi = pi as u32;
            let mut entry = ProcEntry { eligible: Vec::new(), excluded: Vec::new() };
            let mut first_step = 0u64;
            let mut no_item = 0u64;
            let mut repeated = 0u64;
            let mut no_vector = 0u64;
            let mut seen_in_proc: Vec<u32> = Vec::new();
            for si in 0..p.steps.len() {
                // Every item of every step is a candidate distractor for other procedures (RecipeQA's official
                // examples use first-step images as distractors too); only eligible steps become question items.
                let step_items = step_candidates(p, si, kind, cfg);
                let mut step_rows: Vec<Option<u32>> = Vec::with_capacity(step_items.len());
                for (key, feature_id, content) in &step_items {
                    let item = match by_key.get(key) {
                        Some(&i) => Some(i),
                        None => match features.index_of(feature_id) {
                            Some(row) => {
                                let i = items.len() as u32;
                                items.push(Item {
                                    feature_id: feature_id.clone(),
                                    content: content.clone(),
                                    owners: Vec::new(),
                                });
                                rows.push(row);
                                by_key.insert(key.clone(), i);
                                Some(i)
                            }
                            None => {
                                n_missing += 1;
                                if missing.len() < 5 {
                                    missing.push(format!("{feature_id} (procedure {:?}, step {si})", p.id));
                                }
                                None
                            }
                        },
                    };
                    if let Some(i) = item {
                        let owners = &mut items[i as usize].owners;
                        if owners.last() != Some(&pi) {
                            owners.push(pi);
                        }
                    }
                    step_rows.push(item);
                }
                if cfg.skip_first_step && si == 0 {
                    first_step += 1;
                    continue;
                }
                if step_items.is_empty() {
                    no_item += 1;
                    continue;
                }
                // The question item of the step: its only item, or (several images) one drawn per step.
                let pick = if step_items.len() == 1 {
                    0
                } else {
                    rng_for(cfg.seed, &format!("tasks/step-image/{}/{si}", p.id)).random_range(0..step_items.len())
                };
                let Some(item) = step_rows[pick] else {
                    no_vector += 1;
                    continue;
                };
                if seen_in_proc.contains(&item) {
                    repeated += 1;
                    continue;
                }
                seen_in_proc.push(item);
                let display = step_items[pick].2.clone();
                entry.eligible.push(EligibleStep { step: si, item, display });
            }
            for (r, n) in [
                (SkipReason::FirstStep, first_step),
                (SkipReason::NoItem, no_item),
                (SkipReason::RepeatedItem, repeated),
                (SkipReason::MissingFeatures, no_vector),
            ] {
                if n > 0 {
                    entry.excluded.push((r, n));
                }
            }
            procs.push(entry);
        }
        if n_missing > 0 && !sources.allow_missing {
            return Err(Error::bad_input(format!(
                "the features have no vector for {n_missing} {} item(s), e.g. {}; embed the corpus with \
                 `stepwise embed` (with an encoder for {}), or pass --allow-missing-features to leave those \
                 steps out",
                kind_name(kind),
                missing.join(", "),
                kind_name(kind)
            )));
        }
        let n_proc_items = items.len();
        let mut data = Vec::with_capacity((n_proc_items + pool_len(sources, kind)) * dim);
        for &row in &rows {
            data.extend_from_slice(features.row(row));
        }
        if kind == ItemKind::Image
            && let Some(pool) = sources.extra_pool
        {
            if pool.dim != dim {
                return Err(Error::bad_input(format!(
                    "the distractor pool's vectors have dimension {} but the features have {dim}: embed both \
                     with the same encoder",
                    pool.dim
                )));
            }
            for (i, id) in pool.ids.iter().enumerate() {
                let key = id.strip_prefix("image:").unwrap_or(id).to_string();
                if by_key.contains_key(&key) {
                    continue; // the same file is already a corpus image
                }
                by_key.insert(key.clone(), items.len() as u32);
                items.push(Item { feature_id: id.clone(), content: key, owners: Vec::new() });
                data.extend_from_slice(pool.row(i));
            }
        }
        if cfg.metric == Metric::Cosine {
            stepwise_features::encoder::l2_normalize_rows(&mut data, dim);
        }
        Ok(Catalog { kind, metric: cfg.metric, dim, data, items, procs, norms: OnceLock::new() })
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn row(&self, i: u32) -> &[f32] {
        let i = i as usize;
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// The Euclidean length of row `i`.
    pub fn norm(&self, i: u32) -> f32 {
        // Sequential: a parallel fill could, while waiting, take a job that asks for the norms it is filling.
        let norms =
            self.norms.get_or_init(|| self.data.chunks(self.dim.max(1)).map(|r| dot_lanes(r, r).sqrt()).collect());
        norms[i as usize]
    }

    /// Distance between two items (lower is closer).
    pub fn distance(&self, a: u32, b: u32) -> f32 {
        self.distance_to(self.row(a), b)
    }

    /// Distance between a vector (normalised like the rows, e.g. from [`Catalog::centroid`]) and an item. Sums
    /// run in 16 lanes and a fixed tree ([`dot_lanes`]; L2 through [`stepwise_features::knn::distance`], which
    /// sums the same way): the same bits on every machine, at SIMD speed (knob 3's constraint and the widened
    /// search measure millions of pairs in a large sweep).
    pub fn distance_to(&self, v: &[f32], b: u32) -> f32 {
        let x = self.row(b);
        match self.metric {
            Metric::Cosine => 1.0 - dot_lanes(v, x),
            Metric::InnerProduct => -dot_lanes(v, x),
            m => stepwise_features::knn::distance(v, x, m),
        }
    }

    /// The mean of some items' vectors: "the question" of Meta-RecipeQA's knob 3 (for cosine, the mean of unit
    /// vectors, re-normalised).
    pub fn centroid(&self, items: &[u32]) -> Vec<f32> {
        let mut c = vec![0f32; self.dim];
        for &i in items {
            for (a, b) in c.iter_mut().zip(self.row(i)) {
                *a += b;
            }
        }
        if !items.is_empty() {
            let n = items.len() as f32;
            c.iter_mut().for_each(|x| *x /= n);
        }
        if self.metric == Metric::Cosine {
            stepwise_features::encoder::l2_normalize_rows(&mut c, self.dim);
        }
        c
    }

    /// True when the two items share a procedure.
    pub fn share_owner(&self, a: u32, b: u32) -> bool {
        let (x, y) = (&self.items[a as usize].owners, &self.items[b as usize].owners);
        let (mut i, mut j) = (0, 0);
        while i < x.len() && j < y.len() {
            match x[i].cmp(&y[j]) {
                std::cmp::Ordering::Equal => return true,
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
            }
        }
        false
    }
}

/// [`Catalog::share_owner`] as a flat array lookup for neighbour-search filters, which ask it for billions of
/// (query, candidate) pairs: nearly every item has exactly one owner, and comparing two `u32`s from one small
/// array is much cheaper than chasing two items' owner lists. Same answers as `share_owner`.
pub struct OwnerIndex {
    /// The single owner of each item, or [`Self::NONE`] (no owner: pool items) or [`Self::MANY`].
    code: Vec<u32>,
}

impl OwnerIndex {
    const NONE: u32 = u32::MAX;
    const MANY: u32 = u32::MAX - 1;

    pub fn new(cat: &Catalog) -> OwnerIndex {
        let code = cat
            .items
            .iter()
            .map(|it| match it.owners.as_slice() {
                [] => Self::NONE,
                [o] if *o < Self::MANY => *o,
                _ => Self::MANY,
            })
            .collect();
        OwnerIndex { code }
    }

    /// True when items `a` and `b` share a procedure.
    #[inline]
    pub fn share(&self, cat: &Catalog, a: u32, b: u32) -> bool {
        let (x, y) = (self.code[a as usize], self.code[b as usize]);
        if x == Self::NONE || y == Self::NONE {
            false
        } else if x == Self::MANY || y == Self::MANY {
            cat.share_owner(a, b)
        } else {
            x == y
        }
    }
}

fn pool_len(sources: &FeatureSources<'_>, kind: ItemKind) -> usize {
    if kind == ItemKind::Image { sources.extra_pool.map_or(0, Vectors::len) } else { 0 }
}

fn kind_name(kind: ItemKind) -> &'static str {
    match kind {
        ItemKind::Title => "step-title",
        ItemKind::Text => "step-text",
        ItemKind::Image => "step-image",
    }
}

/// The items of one step: (dedup key, feature id, display content).
fn step_candidates(p: &Procedure, si: usize, kind: ItemKind, _cfg: &GenerateConfig) -> Vec<(String, String, String)> {
    let step = &p.steps[si];
    match kind {
        ItemKind::Title => {
            let t = step.title.as_deref().map(strip_step_number).unwrap_or_default();
            if t.is_empty() {
                return Vec::new();
            }
            vec![(format!("t:{}", content_key(&t)), format!("title:{}#{si}", p.id), t)]
        }
        ItemKind::Text => {
            // The choice shows the step's text (without its title, which the context shows); the vector is the
            // feature store's full-step-text vector.
            let t = step.text.as_deref().map(str::trim).unwrap_or_default();
            if t.is_empty() {
                return Vec::new();
            }
            vec![(format!("x:{}", content_key(t)), format!("text:{}#{si}", p.id), t.to_string())]
        }
        ItemKind::Image => step.images.iter().map(|img| (img.clone(), format!("image:{img}"), img.clone())).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::Step;

    fn proc_(id: &str, titles: &[&str]) -> Procedure {
        Procedure {
            id: id.into(),
            steps: titles
                .iter()
                .enumerate()
                .map(|(i, t)| Step {
                    title: Some(t.to_string()),
                    images: vec![format!("{id}/{i}.jpg")],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn vectors_for(procs: &[Procedure]) -> Vectors {
        let mut ids = Vec::new();
        for p in procs {
            for (i, s) in p.steps.iter().enumerate() {
                ids.push(format!("title:{}#{i}", p.id));
                ids.push(format!("image:{}", s.images[0]));
            }
        }
        let data = (0..ids.len() * 3).map(|i| ((i * 7919) % 13) as f32 + 1.0).collect();
        Vectors::new(3, ids, data)
    }

    #[test]
    fn shared_titles_are_one_item_with_two_owners() {
        let procs = vec![proc_("a", &["Intro", "Step 1: Mix", "Bake", "Enjoy!"]), proc_("b", &["Hi", "Chop", "enjoy"])];
        let v = vectors_for(&procs);
        let cfg = GenerateConfig::default();
        let src = FeatureSources { features: &v, extra_pool: None, allow_missing: false };
        let cat = Catalog::build(&procs, &src, ItemKind::Title, &cfg).unwrap();
        let enjoy = cat.items.iter().position(|i| i.content == "Enjoy!").unwrap();
        assert_eq!(cat.items[enjoy].owners, vec![0, 1]);
        let a = &cat.procs[0];
        assert_eq!(a.eligible.iter().map(|e| e.display.as_str()).collect::<Vec<_>>(), ["Mix", "Bake", "Enjoy!"]);
        assert_eq!(a.excluded, vec![(SkipReason::FirstStep, 1)]);
        // b's own display keeps its casing although the item is shared.
        assert_eq!(cat.procs[1].eligible[1].display, "enjoy");
        assert!(cat.share_owner(enjoy as u32, cat.procs[1].eligible[0].item));
    }

    #[test]
    fn the_owner_index_answers_like_share_owner() {
        let procs = vec![proc_("a", &["Intro", "Step 1: Mix", "Bake", "Enjoy!"]), proc_("b", &["Hi", "Chop", "enjoy"])];
        let v = vectors_for(&procs);
        let src = FeatureSources { features: &v, extra_pool: None, allow_missing: false };
        let mut cat = Catalog::build(&procs, &src, ItemKind::Title, &GenerateConfig::default()).unwrap();
        // Items with no owner (as pool items) and with several owners, next to single-owner items.
        cat.items[0].owners = Vec::new();
        cat.items.push(Item { feature_id: "x".into(), content: "x".into(), owners: vec![1, 7] });
        let idx = OwnerIndex::new(&cat);
        let n = cat.items.len() as u32;
        let mut shared = 0;
        for a in 0..n {
            for b in 0..n {
                assert_eq!(idx.share(&cat, a, b), cat.share_owner(a, b), "items {a}, {b}");
                shared += usize::from(cat.share_owner(a, b));
            }
        }
        assert!(shared > 0 && shared < (n * n) as usize);
    }

    #[test]
    fn missing_vectors_are_an_error_naming_the_item_unless_allowed() {
        let procs = vec![proc_("a", &["Intro", "Mix", "Bake"])];
        let v = Vectors::new(2, vec!["title:a#0".into()], vec![1.0, 0.0]);
        let cfg = GenerateConfig::default();
        let src = FeatureSources { features: &v, extra_pool: None, allow_missing: false };
        let e = Catalog::build(&procs, &src, ItemKind::Title, &cfg).unwrap_err().to_string();
        assert!(e.contains("title:a#1") && e.contains("--allow-missing-features"), "{e}");
        let src = FeatureSources { features: &v, extra_pool: None, allow_missing: true };
        let cat = Catalog::build(&procs, &src, ItemKind::Title, &cfg).unwrap();
        assert!(cat.procs[0].eligible.is_empty());
        assert!(cat.procs[0].excluded.contains(&(SkipReason::MissingFeatures, 2)));
    }

    #[test]
    fn pool_images_are_ownerless_and_dimension_checked() {
        let procs = vec![proc_("a", &["Intro", "Mix"])];
        let v = vectors_for(&procs);
        let pool = Vectors::new(3, vec!["image:g/1.jpg".into()], vec![1.0, 2.0, 3.0]);
        let cfg = GenerateConfig::default();
        let src = FeatureSources { features: &v, extra_pool: Some(&pool), allow_missing: false };
        let cat = Catalog::build(&procs, &src, ItemKind::Image, &cfg).unwrap();
        assert_eq!(cat.len(), 3);
        assert!(cat.items[2].is_pool() && cat.items[2].content == "g/1.jpg");
        let bad = Vectors::new(2, vec!["image:g/1.jpg".into()], vec![1.0, 2.0]);
        let src = FeatureSources { features: &v, extra_pool: Some(&bad), allow_missing: false };
        assert!(Catalog::build(&procs, &src, ItemKind::Image, &cfg).is_err());
    }
}
