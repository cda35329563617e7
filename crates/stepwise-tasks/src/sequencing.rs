//! Step-sequencing instances (Wu et al., ACL 2022, "Understanding Multimodal Procedural Knowledge by Sequencing
//! Multimodal Instructional Manuals"): n steps of one procedure, shuffled; the model puts them back in order.
//!
//! - [`orders`]: valid orders of a window (linear extensions of the induced step DAG), exact or sampled
//! - [`truncate`]: step-text truncation (sentences, tokens)
//! - [`alt_orders`]: human-annotated alternative orders (JSONL)
//! - [`write`]: the instances folder (`instances.jsonl`, `instances.parquet`, `manifest.json`)
//! - [`golden`]: a golden test subset for human evaluation, chosen by explicit rules
//! - [`blind`]: the model's view (`inputs.jsonl`): items in the same shuffled order with opaque keys, no step
//!   indices and no references
//!
//! How an instance is made (conventions of `stepwise_core::sequencing`):
//! 1. *Usable steps*: text — steps with non-empty title or text; image and multimodal — steps with at least one
//!    image (a step with several images lists them all; baselines average their vectors).
//! 2. *Windows*: a contiguous run of `steps` usable steps (a longer procedure gives a window, not a
//!    subsample). `Windows::Count(k)` samples k distinct start positions (seeded per procedure), `Windows::All`
//!    takes every start, `Windows::First` the first `steps` usable steps — what the paper's released code does
//!    (`telin0411/multimodal_sequencing`, `datasets/recipeqa.py`: `story_seq[:max_story_length+1]` after keeping
//!    the steps that have an image; it also keeps only the first image of a step, where we keep them all). A procedure with `min_steps ≤ usable < steps` gives one shorter instance;
//!    fewer than `min_steps` usable steps → skipped and counted.
//! 3. *References* (as window positions, then mapped to item indices): the authored order first, then every
//!    other valid order, from the first source that applies: the user's annotation file; the procedure's
//!    `order_constraints` (the step DAG: transitive closure over the whole procedure restricted to the window, all
//!    linear extensions counted exactly by a DP over subsets, listed when at most `max_references`, else a seeded
//!    uniform sample with the window's precedence pairs as the instance's `constraints`); its `valid_orders`
//!    restricted to the window (all of them); else the authored order alone.
//! 4. *Shuffle*: a uniform permutation from `rng_for(seed, "sequencing/shuffle/<id>")`.
//! 5. *Split* by procedure (`assign_splits` over the procedures that give instances, stratified by category).
//!
//! `instances.jsonl` is the gold file (items carry their `step`, instances their `references`); give models
//! the blind `inputs.jsonl` ([`blind`], `SequencingConfig::blind_inputs`).

pub mod alt_orders;
pub mod blind;
pub mod golden;
pub mod orders;
pub mod truncate;
pub mod write;

use std::collections::BTreeMap;
use std::path::Path;

use rand::Rng;
use rayon::prelude::*;
use serde::Serialize;
use stepwise_core::rng::rng_for;
use stepwise_core::sequencing::{SequencingInstance, SequencingItem};
use stepwise_core::split::{SplitFractions, assign_splits};
use stepwise_core::{Error, Location, Procedure, Result};

pub use alt_orders::AltOrders;
pub use write::write_instances_dir;

/// The largest window: valid orders are counted over subsets of the window (2^n states).
pub const MAX_STEPS: usize = 20;

/// What each item shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SeqModality {
    Text,
    Image,
    Multimodal,
}

impl SeqModality {
    pub fn as_str(self) -> &'static str {
        match self {
            SeqModality::Text => "text",
            SeqModality::Image => "image",
            SeqModality::Multimodal => "multimodal",
        }
    }
}

/// How many windows a procedure gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Windows {
    /// Up to k distinct windows, start positions sampled without replacement.
    Count(usize),
    /// Every contiguous window.
    All,
    /// The first window only (the released code's choice).
    First,
}

#[derive(Debug, Clone)]
pub struct SequencingConfig {
    pub modality: SeqModality,
    /// Items per instance (the paper: 5).
    pub steps: usize,
    /// Procedures with `min_steps ≤ usable < steps` give one shorter instance.
    pub min_steps: usize,
    pub windows: Windows,
    /// Sentences kept per step text (the paper: 5); None = all.
    pub max_sentences: Option<usize>,
    /// Tokens kept per step text (the paper: 60); None = all.
    pub max_tokens: Option<usize>,
    /// References kept per instance when a window's precedence constraints allow more orders (then a uniform
    /// sample); a procedure's own `valid_orders` list is kept whole.
    pub max_references: usize,
    pub fractions: SplitFractions,
    pub seed: u64,
    /// Also write the blind inputs file (`inputs.jsonl`, see [`blind`]).
    pub blind_inputs: bool,
}

impl Default for SequencingConfig {
    fn default() -> Self {
        SequencingConfig {
            modality: SeqModality::Text,
            steps: 5,
            min_steps: 5,
            windows: Windows::Count(1),
            max_sentences: Some(5),
            max_tokens: Some(60),
            max_references: 1000,
            fractions: SplitFractions::default(),
            seed: 0,
            blind_inputs: false,
        }
    }
}

/// Where an instance's alternative references come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReferenceSource {
    /// The user's alternative-orders file.
    Annotated,
    /// The procedure's `order_constraints` (exact).
    Constraints,
    /// The procedure's `valid_orders`.
    ValidOrders,
    /// No order information: the authored order only.
    AuthoredOnly,
}

impl ReferenceSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ReferenceSource::Annotated => "annotated",
            ReferenceSource::Constraints => "order_constraints",
            ReferenceSource::ValidOrders => "valid_orders",
            ReferenceSource::AuthoredOnly => "authored_only",
        }
    }
}

/// What generation produced and skipped.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GenerationStats {
    pub procedures: usize,
    pub procedures_used: usize,
    /// Skipped procedures by reason.
    pub skipped: BTreeMap<String, usize>,
    pub instances_per_split: BTreeMap<String, usize>,
    /// Instances by the source of their references.
    pub reference_sources: BTreeMap<String, usize>,
    /// Instances with more than one reference.
    pub multi_reference: usize,
    pub references_total: usize,
    /// Instances whose references are a sample (more valid orders than `max_references`, or an incomplete
    /// `valid_orders` list).
    pub sampled_references: usize,
    /// Items whose text was shortened by truncation.
    pub truncated_texts: usize,
}

impl GenerationStats {
    pub fn skipped_summary(&self) -> String {
        if self.skipped.is_empty() {
            return "nothing skipped".into();
        }
        self.skipped.iter().map(|(k, v)| format!("{v} skipped: {k}")).collect::<Vec<_>>().join(", ")
    }

    pub fn summary(&self) -> String {
        let total: usize = self.instances_per_split.values().sum();
        let splits: Vec<String> = self.instances_per_split.iter().map(|(k, v)| format!("{k} {v}")).collect();
        format!(
            "{total} sequencing instances ({}) from {} of {} procedures; {}; {} with several references ({} references in all, {} sampled)",
            splits.join(", "),
            self.procedures_used,
            self.procedures,
            self.skipped_summary(),
            self.multi_reference,
            self.references_total,
            self.sampled_references
        )
    }
}

#[derive(Debug, Clone)]
pub struct Generated {
    /// In corpus order, then window order.
    pub instances: Vec<SequencingInstance>,
    pub stats: GenerationStats,
}

/// The steps an instance of `modality` may use.
pub fn usable_steps(p: &Procedure, modality: SeqModality) -> Vec<usize> {
    p.steps
        .iter()
        .enumerate()
        .filter(|(_, s)| match modality {
            SeqModality::Text => !s.full_text().trim().is_empty(),
            SeqModality::Image | SeqModality::Multimodal => !s.images.is_empty(),
        })
        .map(|(i, _)| i)
        .collect()
}

/// Generate instances from `procedures` (read from `source`, named in errors). Deterministic for the seed,
/// whatever the thread count.
pub fn generate(
    procedures: &[Procedure],
    source: &Path,
    alt: Option<&AltOrders>,
    cfg: &SequencingConfig,
) -> Result<Generated> {
    assert!(cfg.steps >= 2 && cfg.steps <= MAX_STEPS, "steps checked by the caller");
    let usable: Vec<Vec<usize>> = procedures.par_iter().map(|p| usable_steps(p, cfg.modality)).collect();
    let eligible = |i: usize| usable[i].len() >= cfg.min_steps;
    let splits = assign_splits(
        procedures
            .iter()
            .enumerate()
            .filter(|&(i, _)| eligible(i))
            .map(|(_, p)| (p.id.as_str(), p.category.as_deref())),
        cfg.fractions,
        cfg.seed,
    );
    let per_procedure: Vec<Result<Vec<Made>>> = procedures
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            if !eligible(i) {
                return Ok(Vec::new());
            }
            let split = splits.get(&p.id).map(|s| s.as_str()).expect("every eligible procedure has a split");
            procedure_instances(p, &usable[i], split, source, alt, cfg)
        })
        .collect();

    let mut stats = GenerationStats { procedures: procedures.len(), ..Default::default() };
    let mut instances = Vec::new();
    for (i, r) in per_procedure.into_iter().enumerate() {
        let list = r?;
        if !eligible(i) {
            let reason = if usable[i].is_empty() {
                format!("no {} steps", if cfg.modality == SeqModality::Text { "text" } else { "image" })
            } else {
                format!("fewer than {} usable steps", cfg.min_steps)
            };
            *stats.skipped.entry(reason).or_default() += 1;
            continue;
        }
        stats.procedures_used += 1;
        for (inst, src, complete, truncated) in list {
            *stats.instances_per_split.entry(inst.split.clone()).or_default() += 1;
            *stats.reference_sources.entry(src.as_str().to_string()).or_default() += 1;
            stats.multi_reference += usize::from(inst.references.len() > 1);
            stats.references_total += inst.references.len();
            stats.sampled_references += usize::from(!complete);
            stats.truncated_texts += truncated;
            instances.push(inst);
        }
    }
    Ok(Generated { instances, stats })
}

/// An instance, the source of its references, whether they are complete, and how many item texts were cut.
type Made = (SequencingInstance, ReferenceSource, bool, usize);

/// Start positions (into the usable steps) of the windows of one procedure.
fn window_starts(p: &Procedure, n_usable: usize, cfg: &SequencingConfig) -> Vec<usize> {
    if n_usable < cfg.steps {
        return vec![0];
    }
    let n_starts = n_usable - cfg.steps + 1;
    match cfg.windows {
        Windows::All => (0..n_starts).collect(),
        Windows::First => vec![0],
        Windows::Count(k) if k >= n_starts => (0..n_starts).collect(),
        Windows::Count(k) => {
            let mut rng = rng_for(cfg.seed, &format!("sequencing/windows/{}", p.id));
            let mut starts: Vec<usize> = (0..n_starts).collect();
            // Partial Fisher–Yates: the first k are a uniform sample without replacement.
            for j in 0..k {
                let r = rng.random_range(j..n_starts);
                starts.swap(j, r);
            }
            let mut chosen = starts[..k].to_vec();
            chosen.sort_unstable();
            chosen
        }
    }
}

/// The valid orders of a window (as window positions), their source, and whether they are complete.
fn window_references(
    p: &Procedure,
    window: &[usize],
    closure: Option<&[Vec<bool>]>,
    alt: Option<&AltOrders>,
    cfg: &SequencingConfig,
    id: &str,
) -> (Vec<Vec<usize>>, ReferenceSource, bool) {
    if let Some(orders) = alt.and_then(|a| a.get(&p.id)) {
        return (orders::restrict_orders(orders, window), ReferenceSource::Annotated, true);
    }
    if let Some(c) = closure {
        let pred = orders::window_predecessors(c, window);
        let mut rng = rng_for(cfg.seed, &format!("sequencing/references/{id}"));
        let (refs, complete) = orders::window_orders(&pred, cfg.max_references, &mut rng);
        return (refs, ReferenceSource::Constraints, complete);
    }
    if let Some(vo) = p.annotations.as_ref().and_then(|a| a.valid_orders.as_ref()) {
        // Kept whole (a list of the source's, no larger than it): a truncated list would make valid orders wrong.
        let refs = orders::restrict_orders(&vo.orders, window);
        return (refs, ReferenceSource::ValidOrders, vo.complete);
    }
    (vec![(0..window.len()).collect()], ReferenceSource::AuthoredOnly, true)
}

fn procedure_instances(
    p: &Procedure,
    usable: &[usize],
    split: &str,
    source: &Path,
    alt: Option<&AltOrders>,
    cfg: &SequencingConfig,
) -> Result<Vec<Made>> {
    let closure = match p.annotations.as_ref().and_then(|a| a.order_constraints.as_ref()) {
        Some(cons) if alt.and_then(|a| a.get(&p.id)).is_none() => {
            let field = |m: String| {
                Error::field(
                    source,
                    Location::Record(format!("procedure {:?}", p.id)),
                    "annotations.order_constraints",
                    m,
                )
            };
            if let Some((k, [a, b])) = cons.iter().enumerate().find(|(_, [a, b])| a > b) {
                return Err(field(format!(
                    "[{k}] = [{a}, {b}] contradicts the authored order (step {a} is written after step {b})"
                )));
            }
            Some(orders::transitive_closure(p.steps.len(), cons).map_err(field)?)
        }
        _ => None,
    };
    let size = cfg.steps.min(usable.len());
    let mut out = Vec::new();
    for start in window_starts(p, usable.len(), cfg) {
        let window = &usable[start..start + size];
        let id = format!("{}#s{}", p.id, window[0]);
        let (refs, src, complete) = window_references(p, window, closure.as_deref(), alt, cfg, &id);

        // perm[k] = window position shown as item k.
        let mut perm: Vec<usize> = (0..size).collect();
        let mut rng = rng_for(cfg.seed, &format!("sequencing/shuffle/{id}"));
        for j in (1..size).rev() {
            let r = rng.random_range(0..=j);
            perm.swap(j, r);
        }
        let mut item_of_position = vec![0; size];
        for (k, &pos) in perm.iter().enumerate() {
            item_of_position[pos] = k;
        }
        let mut truncated = 0;
        let items: Vec<SequencingItem> = perm
            .iter()
            .map(|&pos| {
                let (item, cut) = make_item(p, window[pos], cfg);
                truncated += usize::from(cut);
                item
            })
            .collect();
        let first = refs[0].iter().map(|&pos| item_of_position[pos]).collect::<Vec<_>>();
        let mut rest: Vec<Vec<usize>> =
            refs[1..].iter().map(|o| o.iter().map(|&pos| item_of_position[pos]).collect()).collect();
        rest.sort();
        let mut references = vec![first];
        references.extend(rest);
        // A sample of the valid orders: keep the window's precedence pairs (none when its steps are all free), so
        // that scoring recognises every valid order, not only the sampled ones.
        let constraints = match closure.as_deref() {
            Some(c) if src == ReferenceSource::Constraints && !complete => {
                let mut pairs = Vec::new();
                for (i, &a) in window.iter().enumerate() {
                    for (j, &b) in window.iter().enumerate() {
                        if c[a][b] {
                            pairs.push([item_of_position[i], item_of_position[j]]);
                        }
                    }
                }
                pairs.sort_unstable();
                Some(pairs)
            }
            _ => None,
        };
        out.push((
            SequencingInstance {
                id,
                procedure: p.id.clone(),
                split: split.to_string(),
                modality: cfg.modality.as_str().to_string(),
                items,
                references,
                constraints,
            },
            src,
            complete,
            truncated,
        ));
    }
    Ok(out)
}

/// One item; the flag says whether its text was shortened.
fn make_item(p: &Procedure, step: usize, cfg: &SequencingConfig) -> (SequencingItem, bool) {
    let s = &p.steps[step];
    let with_text = cfg.modality != SeqModality::Image;
    let with_images = cfg.modality != SeqModality::Text;
    let nonempty = |t: &Option<String>| t.as_deref().map(str::trim).filter(|t| !t.is_empty()).map(str::to_string);
    let (text, cut) = match (with_text, nonempty(&s.text)) {
        (true, Some(t)) => {
            let short = truncate::truncate_step_text(&t, cfg.max_sentences, cfg.max_tokens);
            let cut = short.len() < t.len();
            ((!short.is_empty()).then_some(short), cut)
        }
        _ => (None, false),
    };
    (
        SequencingItem {
            step,
            title: if with_text { nonempty(&s.title) } else { None },
            text,
            images: if with_images { s.images.clone() } else { Vec::new() },
        },
        cut,
    )
}
