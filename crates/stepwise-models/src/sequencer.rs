//! Running a sequencing baseline over an instances file: which instances are trained on, selected on and
//! predicted, with a train/val/test split or with cross-validation by procedure.
//!
//! - Split mode (default): the pairwise model trains on the `train` instances, selects its epoch on `val`, and
//!   predicts the target split (default `test`).
//! - Cross-validation (`folds = K`): for small datasets, K folds by procedure
//!   ([`stepwise_core::split::ProcedureFolds`]): every instance gets a prediction from a model that never saw
//!   its procedure. The `split` field of the instances is ignored.
//! - Train-only procedures (`RunConfig::train_only`, `--train-only`): extra training data in every split and
//!   fold, never selected on, predicted or scored.
//!
//! The training-free baselines (random, image-chain, text-position) predict the targets directly.

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde::Serialize;
use stepwise_core::sequencing::{OrderPrediction, SequencingInstance};
use stepwise_core::split::TrainOnly;
use stepwise_core::{Error, Result};

use crate::image_chain::{ChainStart, chain_order};
use crate::item_features::{FeatureSet, ItemMatrix, item_matrix};
use crate::pairwise::{Labelled, PairwiseConfig, PairwiseModel, TrainReport};
use crate::random_order::random_order;
use crate::text_position::text_position_order;

/// The baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    Random,
    TextPosition,
    ImageChain,
    Pairwise,
}

impl ModelKind {
    pub const ALL: [ModelKind; 4] =
        [ModelKind::Random, ModelKind::TextPosition, ModelKind::ImageChain, ModelKind::Pairwise];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::Random => "random",
            ModelKind::TextPosition => "text-position",
            ModelKind::ImageChain => "image-chain",
            ModelKind::Pairwise => "pairwise",
        }
    }

    /// True when the model reads feature vectors.
    pub fn needs_features(self) -> bool {
        matches!(self, ModelKind::ImageChain | ModelKind::Pairwise)
    }
}

/// Which instances get predictions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Evaluation {
    /// Instances of this split (`train`, `val`, `test`).
    Split(String),
    /// Every instance, through K-fold cross-validation by procedure.
    CrossValidation(usize),
}

#[derive(Debug, Clone, Serialize)]
pub struct RunConfig {
    pub model: ModelKind,
    pub evaluation: Evaluation,
    pub chain_start: ChainStartName,
    pub pairwise: PairwiseConfig,
    pub seed: u64,
    /// Procedures that only train (never validated, predicted or scored).
    #[serde(skip_serializing_if = "TrainOnly::is_empty")]
    pub train_only: TrainOnly,
}

/// [`ChainStart`] as a serialisable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChainStartName {
    Outlier,
    Best,
}

impl From<ChainStartName> for ChainStart {
    fn from(c: ChainStartName) -> Self {
        match c {
            ChainStartName::Outlier => ChainStart::Outlier,
            ChainStartName::Best => ChainStart::Best,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunOutput {
    /// In the order of the instances file.
    pub predictions: Vec<OrderPrediction>,
    /// One report per trained model (one, or one per fold).
    pub training: Vec<TrainReport>,
}

/// Run `cfg.model` over `instances`.
pub fn run(instances: &[SequencingInstance], features: &FeatureSet<'_>, cfg: &RunConfig) -> Result<RunOutput> {
    let only = &cfg.train_only;
    let split_of = |k: usize| only.split_of(&instances[k].procedure, &instances[k].split);
    let targets: Vec<usize> = match &cfg.evaluation {
        Evaluation::Split(s) => (0..instances.len()).filter(|&k| split_of(k) == s).collect(),
        Evaluation::CrossValidation(_) => {
            (0..instances.len()).filter(|&k| !only.contains(&instances[k].procedure)).collect()
        }
    };
    if targets.is_empty() {
        let splits: std::collections::BTreeSet<&str> = instances.iter().map(|i| i.split.as_str()).collect();
        return Err(Error::usage(format!(
            "no instances to predict in split {:?} (splits present: {})",
            match &cfg.evaluation {
                Evaluation::Split(s) => s.as_str(),
                Evaluation::CrossValidation(_) => "",
            },
            splits.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    if cfg.model.needs_features() && features.kind().is_none() {
        return Err(Error::usage(format!("the {} model needs --features", cfg.model.as_str())));
    }
    let needs_matrix = cfg.model.needs_features();
    // Item vectors of every instance the model touches (all of them for the pairwise model).
    let matrices: Vec<Option<ItemMatrix>> = instances
        .par_iter()
        .enumerate()
        .map(|(k, inst)| {
            let used = needs_matrix && (cfg.model == ModelKind::Pairwise || targets.binary_search(&k).is_ok());
            used.then(|| item_matrix(inst, features)).transpose()
        })
        .collect::<Result<_>>()?;

    let mut orders: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut training = Vec::new();
    match cfg.model {
        ModelKind::Random => {
            for &k in &targets {
                orders.insert(k, random_order(&instances[k], cfg.seed));
            }
        }
        ModelKind::TextPosition => {
            let has_text =
                targets.iter().any(|&k| instances[k].items.iter().any(|i| i.text.is_some() || i.title.is_some()));
            if !has_text {
                return Err(Error::bad_input(
                    "the text-position heuristic needs item texts (instances generated with --modality text or multimodal)",
                ));
            }
            for &k in &targets {
                orders.insert(k, text_position_order(&instances[k], cfg.seed));
            }
        }
        ModelKind::ImageChain => {
            let start: ChainStart = cfg.chain_start.into();
            for &k in &targets {
                orders.insert(k, chain_order(matrices[k].as_ref().expect("computed for targets"), start));
            }
        }
        ModelKind::Pairwise => {
            let groups: Vec<(Vec<usize>, Vec<usize>, Vec<usize>)> = match &cfg.evaluation {
                Evaluation::Split(_) => {
                    let of = |s: &str| (0..instances.len()).filter(|&k| split_of(k) == s).collect::<Vec<_>>();
                    vec![(of("train"), of("val"), targets.clone())]
                }
                Evaluation::CrossValidation(folds) => {
                    let folds = only.folds(instances.iter().map(|i| i.procedure.as_str()), *folds, cfg.seed)?;
                    (0..folds.k())
                        .map(|f| {
                            let [train, val, test] = folds.indices(instances, f, |i| i.procedure.as_str());
                            (train, val, test)
                        })
                        .filter(|(_, _, test)| !test.is_empty())
                        .collect()
                }
            };
            for (train, val, test) in groups {
                let lab = |ks: &[usize]| -> Vec<Labelled<'_>> {
                    ks.iter()
                        .filter(|&&k| instances[k].items.len() >= 2)
                        .map(|&k| Labelled {
                            items: matrices[k].as_ref().expect("computed for every instance"),
                            references: &instances[k].references,
                        })
                        .collect()
                };
                if train.is_empty() {
                    return Err(Error::bad_input(
                        "the pairwise model has no training instances (no `train` split in the instances; use cross-validation for small sets)",
                    ));
                }
                let (model, report) = PairwiseModel::train(&lab(&train), &lab(&val), &cfg.pairwise)?;
                training.push(report);
                let predicted: Vec<(usize, Vec<usize>)> = test
                    .par_iter()
                    .map(|&k| model.predict(matrices[k].as_ref().expect("computed")).map(|o| (k, o)))
                    .collect::<Result<_>>()?;
                orders.extend(predicted);
            }
        }
    }
    let predictions =
        orders.into_iter().map(|(k, order)| OrderPrediction { id: instances[k].id.clone(), order }).collect();
    Ok(RunOutput { predictions, training })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use stepwise_core::rng::rng_for;
    use stepwise_core::sequencing::SequencingItem;
    use stepwise_features::Vectors;

    /// `procedures` procedures of 5 steps, one instance each; text vectors encode the step position plus noise.
    fn data(procedures: usize) -> (Vec<SequencingInstance>, Vectors) {
        data_with_extra(procedures, 0)
    }

    /// As [`data`], the first `extra` procedures named `extra/p<k>`.
    fn data_with_extra(procedures: usize, extra: usize) -> (Vec<SequencingInstance>, Vectors) {
        let mut ids = Vec::new();
        let mut vecs = Vec::new();
        let mut instances = Vec::new();
        for p in 0..procedures {
            let pid = if p < extra { format!("extra/p{p}") } else { format!("p{p}") };
            let mut rng = rng_for(1, &pid);
            for s in 0..5 {
                ids.push(format!("text:{pid}#{s}"));
                vecs.extend([s as f32 + 0.3 * rng.random::<f32>(), rng.random::<f32>(), rng.random::<f32>()]);
            }
            let perm = [3usize, 0, 4, 1, 2];
            let mut reference = vec![0; 5];
            for (k, &s) in perm.iter().enumerate() {
                reference[s] = k;
            }
            instances.push(SequencingInstance {
                id: format!("{pid}#s0"),
                procedure: pid,
                split: ["train", "train", "train", "val", "test"][p % 5].into(),
                modality: "text".into(),
                items: perm
                    .iter()
                    .map(|&s| SequencingItem { step: s, title: None, text: None, images: vec![] })
                    .collect(),
                references: vec![reference],
                constraints: None,
            });
        }
        (instances, Vectors::new(3, ids, vecs))
    }

    fn cfg(model: ModelKind, evaluation: Evaluation) -> RunConfig {
        RunConfig {
            model,
            evaluation,
            chain_start: ChainStartName::Outlier,
            pairwise: PairwiseConfig { epochs: 15, ..Default::default() },
            seed: 0,
            train_only: TrainOnly::default(),
        }
    }

    #[test]
    fn split_mode_predicts_the_split_and_cross_validation_everything() {
        let (instances, v) = data(40);
        let set = FeatureSet { text: Some(&v), image: None };
        let out = run(&instances, &set, &cfg(ModelKind::Pairwise, Evaluation::Split("test".into()))).unwrap();
        assert_eq!(out.predictions.len(), 8);
        assert_eq!(out.training.len(), 1);
        let right = out.predictions.iter().filter(|p| {
            let inst = instances.iter().find(|i| i.id == p.id).unwrap();
            p.order == inst.references[0]
        });
        assert!(right.count() >= 6);

        let cv = run(&instances, &set, &cfg(ModelKind::Pairwise, Evaluation::CrossValidation(4))).unwrap();
        assert_eq!(cv.predictions.len(), 40);
        assert_eq!(cv.training.len(), 4);
        let ids: Vec<&str> = cv.predictions.iter().map(|p| p.id.as_str()).collect();
        let file_order: Vec<&str> = instances.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, file_order, "predictions in file order");
    }

    #[test]
    fn train_only_procedures_train_in_every_fold_and_are_never_predicted() {
        let (instances, v) = data_with_extra(40, 10);
        let set = FeatureSet { text: Some(&v), image: None };
        let studied: Vec<SequencingInstance> = instances[10..].to_vec();
        let extra = |p: &OrderPrediction| instances[..10].iter().any(|i| i.id == p.id);
        let with = RunConfig {
            train_only: TrainOnly::new(vec!["extra/".into()]).unwrap(),
            ..cfg(ModelKind::Pairwise, Evaluation::CrossValidation(4))
        };
        let cv = run(&instances, &set, &with).unwrap();
        let alone = run(&studied, &set, &cfg(ModelKind::Pairwise, Evaluation::CrossValidation(4))).unwrap();
        assert_eq!(cv.predictions.len(), 30);
        assert!(!cv.predictions.iter().any(extra));
        // The folds are those of the studied procedures alone; every fold trains on the extra ones as well.
        let ids = |o: &RunOutput| o.predictions.iter().map(|p| p.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&cv), ids(&alone));
        assert_eq!(cv.training.len(), alone.training.len());
        let added: Vec<usize> =
            cv.training.iter().zip(&alone.training).map(|(w, a)| w.train_pairs - a.train_pairs).collect();
        assert!(added[0] > 0 && added.iter().all(|&d| d == added[0]), "{added:?}");
        for (w, a) in cv.training.iter().zip(&alone.training) {
            assert_eq!(w.val_pairs, a.val_pairs, "extra procedures are never validated on");
        }
        // Split mode: an extra procedure in `test` or `val` trains instead.
        let split = RunConfig { evaluation: Evaluation::Split("test".into()), ..with };
        let out = run(&instances, &set, &split).unwrap();
        assert_eq!(out.predictions.len(), studied.iter().filter(|i| i.split == "test").count());
        assert!(!out.predictions.iter().any(extra));
        let plain = run(&instances, &set, &cfg(ModelKind::Pairwise, Evaluation::Split("test".into()))).unwrap();
        let moved = instances[..10].iter().filter(|i| i.split != "train").count();
        assert!(moved > 0);
        assert!(out.training[0].train_pairs > plain.training[0].train_pairs);
        let extra_val = instances[..10].iter().any(|i| i.split == "val");
        assert_eq!(out.training[0].val_pairs < plain.training[0].val_pairs, extra_val);
    }

    #[test]
    fn usage_problems_are_errors() {
        let (instances, v) = data(10);
        let none = FeatureSet::default();
        let e = run(&instances, &none, &cfg(ModelKind::ImageChain, Evaluation::Split("test".into()))).unwrap_err();
        assert!(e.to_string().contains("needs --features"), "{e}");
        let e = run(&instances, &none, &cfg(ModelKind::Random, Evaluation::Split("dev".into()))).unwrap_err();
        assert!(e.to_string().contains("splits present"), "{e}");
        let set = FeatureSet { text: Some(&v), image: None };
        let e = run(&instances, &set, &cfg(ModelKind::Pairwise, Evaluation::CrossValidation(2))).unwrap_err();
        assert!(e.to_string().contains("at least 3 folds"), "{e}");
        // Text-position needs texts: these instances have none.
        let e = run(&instances, &none, &cfg(ModelKind::TextPosition, Evaluation::Split("test".into()))).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let only_test: Vec<SequencingInstance> = instances.iter().filter(|i| i.split == "test").cloned().collect();
        let e = run(&only_test, &set, &cfg(ModelKind::Pairwise, Evaluation::Split("test".into()))).unwrap_err();
        assert!(e.to_string().contains("no training instances"), "{e}");
    }
}
