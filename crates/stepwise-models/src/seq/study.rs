//! The sequencing paper's grid on one dataset (its Tables 2 and 3): which cells to run for the features at hand,
//! and how one cell is trained and decoded (cross-validation folds: `stepwise_core::split::ProcedureFolds`).
//!
//! Also the pairwise baseline every cell is compared with. Scoring is `stepwise_score::sequencing_table`; caching
//! and output files are the front-end's.

use std::collections::{BTreeMap, BTreeSet};

use stepwise_core::sequencing::OrderPrediction;
use stepwise_core::split::{ProcedureFolds, TrainOnly};
use stepwise_core::{Error, Result};

use super::data::SeqData;
use super::inputs::SeqInput;
use super::model::{Decoding, SeqConfig, SeqModel};
use super::pretrain::{Objective, PretrainConfig};
use super::train::{SeqTrainConfig, predict_orders, pretrain, train_orders};
use crate::item_features::{FeatureKind, FeatureSet};
use crate::pairwise::PairwiseConfig;
use crate::sequencer::{self, ChainStartName, Evaluation, ModelKind, RunConfig};

/// One cell of the grid: a modality, trained from scratch (`objectives` None) or fine-tuned from an encoder
/// pretrained with `objectives`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StudyCell {
    pub modality: FeatureKind,
    pub objectives: Option<Vec<Objective>>,
}

impl StudyCell {
    /// The method column of the results table: `sequencer` or `sequencer + MLM+ISP`.
    pub fn method(&self) -> String {
        match &self.objectives {
            None => "sequencer".into(),
            Some(o) => format!("sequencer + {}", names(o, "+").to_uppercase()),
        }
    }

    /// A file-name key: `multimodal__mlm-isp`, `text__none`.
    pub fn key(&self) -> String {
        let pre = self.objectives.as_ref().map_or("none".into(), |o| names(o, "-"));
        format!("{}__{pre}", self.modality.as_str())
    }
}

fn names(objectives: &[Objective], sep: &str) -> String {
    objectives.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(sep)
}

/// The cells to run and why some were left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StudyPlan {
    pub cells: Vec<StudyCell>,
    pub notes: Vec<String>,
}

/// The pretraining of Table 2 (the paper's best multimodal objectives).
pub const TABLE2_OBJECTIVES: [Objective; 3] = [Objective::Mlm, Objective::Isp, Objective::Smrm];

/// Table 3's ablation on the multimodal model.
pub fn table3_objectives() -> Vec<Vec<Objective>> {
    use Objective::*;
    vec![vec![Mlm], vec![Mlm, Isp], vec![Mlm, Smrm], vec![Mlm, Isp, Pisp], vec![Mlm, Isp, Smrm]]
}

/// The grid for data of modality `kind` (multimodal data gives image-only, text-only and multimodal rows):
/// each modality without and with Table 2's pretraining, then (with `ablation`, on multimodal data) Table 3's
/// objective sets. An objective the data cannot support is dropped and said in the notes: MLM needs token ids
/// (`vocab`), ISP, PISP and SMRM need images.
pub fn plan(kind: FeatureKind, vocab: bool, ablation: bool) -> StudyPlan {
    let kinds = match kind {
        FeatureKind::Multimodal => vec![FeatureKind::Image, FeatureKind::Text, FeatureKind::Multimodal],
        k => vec![k],
    };
    let mut cells = Vec::new();
    let mut notes = Vec::new();
    for &k in &kinds {
        cells.push(StudyCell { modality: k, objectives: None });
        match supported(&TABLE2_OBJECTIVES, vocab && k != FeatureKind::Image, k != FeatureKind::Text) {
            Ok(o) => {
                if o.len() < TABLE2_OBJECTIVES.len() {
                    notes.push(format!(
                        "{}: pretraining with {} only (MLM needs text with token ids; ISP, PISP and SMRM need images)",
                        k.as_str(),
                        names(&o, "+")
                    ));
                }
                cells.push(StudyCell { modality: k, objectives: Some(o) });
            }
            Err(e) => notes.push(format!("{}: no pretrained cell: {e}", k.as_str())),
        }
    }
    if ablation && kind == FeatureKind::Multimodal {
        for set in table3_objectives() {
            match supported(&set, vocab, true) {
                Ok(o) => {
                    let c = StudyCell { modality: FeatureKind::Multimodal, objectives: Some(o) };
                    if !cells.contains(&c) {
                        cells.push(c);
                    }
                }
                Err(e) => notes.push(format!("ablation {}: {e}", names(&set, "+"))),
            }
        }
        if !vocab {
            notes.push("the text store has no token ids (embed with --tokens): MLM is left out of every cell".into());
        }
    }
    StudyPlan { cells, notes }
}

/// The objectives of `wanted` the data supports (sorted), or the reason none remains.
fn supported(wanted: &[Objective], vocab: bool, images: bool) -> std::result::Result<Vec<Objective>, String> {
    let mut keep: Vec<Objective> =
        wanted.iter().copied().filter(|o| if o.needs_text() { vocab } else { images }).collect();
    keep.sort();
    if keep.is_empty() {
        let left: Vec<&str> = wanted.iter().map(|o| o.as_str()).collect();
        return Err(format!("no supported objective (left out: {})", left.join(", ")));
    }
    Ok(keep)
}

/// How every cell is trained.
#[derive(Debug, Clone)]
pub struct CellSettings {
    /// The model for the cell's modality (its decoder is used as given).
    pub model: SeqConfig,
    pub train: SeqTrainConfig,
    pub pretrain_epochs: usize,
    pub beam: usize,
    /// The pretrained values of a fine-tuned text encoder's layers (`model.text_tower`), every model's start.
    pub text_tower: Option<super::text_tower::TowerValues>,
}

/// Pretrain (when the cell asks) on `train`, fine-tune on `train` with early stopping on `val`, and decode `test`.
pub fn run_cell(
    cell: &StudyCell,
    settings: &CellSettings,
    train: &[SeqInput],
    val: &[SeqInput],
    test: &[SeqInput],
) -> Result<Vec<OrderPrediction>> {
    if train.is_empty() {
        return Err(Error::bad_input("no training instance".to_string()));
    }
    let quiet = |_: usize, _: usize, _: usize, _: f64| {};
    let tcfg = &settings.train;
    let tower = |m: &SeqModel| {
        super::text_tower::init_from(&m.params, settings.text_tower.as_ref()).map_err(crate::optim::cerr)
    };
    let model = SeqModel::new(settings.model.clone(), tcfg.seed).map_err(crate::optim::cerr)?;
    tower(&model)?;
    if let Some(objectives) = &cell.objectives {
        let enc = SeqModel::new(settings.model.clone(), tcfg.seed)
            .and_then(SeqModel::with_pretraining_heads)
            .map_err(crate::optim::cerr)?;
        tower(&enc)?;
        let pcfg = PretrainConfig { objectives: objectives.clone(), ..PretrainConfig::default() };
        let pre = SeqTrainConfig { max_epochs: settings.pretrain_epochs, dropout: 0.0, ..tcfg.clone() };
        pretrain(&enc, train, &pre, &pcfg, None, &mut { quiet })?;
        super::load_encoder(&model, &enc)?;
    }
    train_orders(&model, train, val, tcfg, None, &mut { quiet })?;
    let orders = predict_orders(&model, test, tcfg.batch_size, Decoding::Own { beam: settings.beam })?;
    Ok(test.iter().zip(orders).map(|(s, order)| OrderPrediction { id: s.id.clone(), order }).collect())
}

/// Run `cell` on `data`: trained on `train` (epoch by validation loss on `val`) and decoded on `split`; or,
/// with `folds`, once per fold (test on one fold, validate on the next, train on the rest), every instance
/// predicted once. `train_only`'s procedures train in every split and fold (the folds were made without them).
pub fn run_cell_on(
    cell: &StudyCell,
    settings: &CellSettings,
    data: &SeqData,
    split: &str,
    folds: Option<&ProcedureFolds>,
    train_only: &TrainOnly,
) -> Result<Vec<OrderPrediction>> {
    let Some(folds) = folds else {
        let of = |name: &str| -> Vec<SeqInput> {
            data.inputs.iter().filter(|s| train_only.split_of(&s.procedure, &s.split) == name).cloned().collect()
        };
        let train = of("train");
        if train.is_empty() {
            return Err(Error::usage(format!("{}: no usable instance in split `train`", data.file.display())));
        }
        return run_cell(cell, settings, &train, &of("val"), &of(split));
    };
    let mut out = Vec::new();
    for f in 0..folds.k() {
        let pick = |ix: &[usize]| ix.iter().map(|&j| data.inputs[j].clone()).collect::<Vec<_>>();
        let [train, val, test] = folds.indices(&data.inputs, f, |s| s.procedure.as_str());
        if !test.is_empty() {
            out.extend(run_cell(cell, settings, &pick(&train), &pick(&val), &pick(&test))?);
        }
    }
    Ok(out)
}

/// The pairwise baseline on each of `kinds`' pooled vectors (when `data` has that view) under every seed of
/// `seeds`: the reference every cell of that modality is compared with. Split mode predicts `split`,
/// cross-validation (`cv` folds) every instance.
pub fn pairwise_reference(
    data: &SeqData,
    kinds: &BTreeSet<FeatureKind>,
    seeds: &[u64],
    split: &str,
    cv: Option<usize>,
    seed: u64,
    train_only: &TrainOnly,
) -> Result<BTreeMap<FeatureKind, Vec<Vec<OrderPrediction>>>> {
    let pooled = FeatureSet { text: data.features.text.as_ref(), image: data.features.image.as_ref() };
    let mut out = BTreeMap::new();
    for &kind in kinds {
        let Some(set) = pooled.restrict(kind) else { continue };
        let mut runs = Vec::new();
        for &s in seeds {
            let config = RunConfig {
                model: ModelKind::Pairwise,
                evaluation: match cv {
                    Some(k) => Evaluation::CrossValidation(k),
                    None => Evaluation::Split(split.to_string()),
                },
                chain_start: ChainStartName::Outlier,
                pairwise: PairwiseConfig { seed: s, ..PairwiseConfig::default() },
                seed,
                train_only: train_only.clone(),
            };
            runs.push(sequencer::run(&data.instances, &set, &config)?.predictions);
        }
        out.insert(kind, runs);
    }
    Ok(out)
}

/// How the grid was trained and scored, for the results' notes.
pub fn protocol_note(split: &str, folds: Option<&ProcedureFolds>, instances: usize) -> String {
    match folds {
        None => format!("trained on `train` (epoch by validation loss on `val`), scored on `{split}`"),
        Some(f) => format!(
            "{}-fold cross-validation by procedure over all {instances} instances (each fold: test on one fold, epoch \
             by validation loss on the next, train on the rest; every instance predicted once)",
            f.k(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_follows_the_data() {
        let full = plan(FeatureKind::Multimodal, true, true);
        let keys: Vec<String> = full.cells.iter().map(StudyCell::key).collect();
        assert_eq!(
            keys,
            [
                "image__none",
                "image__isp-smrm",
                "text__none",
                "text__mlm",
                "multimodal__none",
                "multimodal__mlm-isp-smrm",
                "multimodal__mlm",
                "multimodal__mlm-isp",
                "multimodal__mlm-smrm",
                "multimodal__mlm-isp-pisp",
            ]
        );
        assert_eq!(full.cells[5].method(), "sequencer + MLM+ISP+SMRM");
        // Without token ids: no MLM anywhere, and the MLM-only ablation cell is gone.
        let no_vocab = plan(FeatureKind::Multimodal, false, true);
        assert!(no_vocab.cells.iter().all(|c| c.objectives.as_ref().is_none_or(|o| !o.contains(&Objective::Mlm))));
        assert!(no_vocab.notes.iter().any(|n| n.contains("ablation mlm:")), "{:?}", no_vocab.notes);
        let text = plan(FeatureKind::Text, false, true);
        assert_eq!(text.cells.len(), 1);
        assert!(text.notes[0].contains("no pretrained cell"), "{:?}", text.notes);
    }
}
