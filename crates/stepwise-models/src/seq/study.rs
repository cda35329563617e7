//! The sequencing paper's grid on one dataset (its Tables 2 and 3): which cells to run for the features at hand,
//! how one cell is trained and decoded, and cross-validation folds for datasets too small for a held-out split.
//!
//! Scoring is `stepwise_eval::sequencing_table`; caching and output files are the front-end's.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use stepwise_core::rng::rng_for;
use stepwise_core::sequencing::OrderPrediction;
use stepwise_core::{Error, Result};

use super::inputs::SeqInput;
use super::model::{SeqConfig, SeqModel};
use super::pretrain::{Objective, PretrainConfig};
use super::train::{SeqTrainConfig, predict_orders, pretrain, train_orders};
use crate::item_features::FeatureKind;

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
                        "{}: pretraining with {} only (MLM needs token ids, ISP/SMRM images)",
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
    let model = SeqModel::new(settings.model.clone(), tcfg.seed).map_err(crate::optim::cerr)?;
    if let Some(objectives) = &cell.objectives {
        let enc = SeqModel::new(settings.model.clone(), tcfg.seed)
            .and_then(SeqModel::with_pretraining_heads)
            .map_err(crate::optim::cerr)?;
        let pcfg = PretrainConfig { objectives: objectives.clone(), ..PretrainConfig::default() };
        let pre = SeqTrainConfig { max_epochs: settings.pretrain_epochs, ..tcfg.clone() };
        pretrain(&enc, train, &pre, &pcfg, None, &mut { quiet })?;
        super::load_encoder(&model, &enc)?;
    }
    train_orders(&model, train, val, tcfg, None, &mut { quiet })?;
    let orders = predict_orders(&model, test, tcfg.batch_size, settings.beam)?;
    Ok(test.iter().zip(orders).map(|(s, order)| OrderPrediction { id: s.id.clone(), order }).collect())
}

/// K-fold cross-validation by procedure (instances of one procedure stay in one fold): procedures are shuffled
/// with the seed and dealt round-robin. Fold `f` tests on fold `f`, stops early on fold `f + 1 (mod k)` and
/// trains on the rest, so every instance is tested exactly once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folds {
    pub k: usize,
    fold_of: BTreeMap<String, usize>,
}

impl Folds {
    /// Folds over `procedures` (repeats ignored). Needs `k ≥ 3` and at least `k` procedures.
    pub fn new<'a>(procedures: impl IntoIterator<Item = &'a str>, k: usize, seed: u64) -> Result<Folds> {
        let mut procs: Vec<&str> = procedures.into_iter().collect();
        procs.sort_unstable();
        procs.dedup();
        if k < 3 {
            return Err(Error::bad_input(format!(
                "--folds {k}: cross-validation needs at least 3 folds (train, val, test)"
            )));
        }
        if procs.len() < k {
            return Err(Error::bad_input(format!(
                "--folds {k}: only {} procedures to spread over {k} folds",
                procs.len()
            )));
        }
        procs.shuffle(&mut rng_for(seed, "seq-study/folds"));
        let fold_of = procs.iter().enumerate().map(|(i, p)| (p.to_string(), i % k)).collect();
        Ok(Folds { k, fold_of })
    }

    /// The (train, val, test) indices into `inputs` of fold `f`; a procedure the folds were not made over trains.
    pub fn split(&self, inputs: &[SeqInput], f: usize) -> [Vec<usize>; 3] {
        let mut parts: [Vec<usize>; 3] = Default::default();
        for (i, s) in inputs.iter().enumerate() {
            let part = match self.fold_of.get(&s.procedure) {
                Some(&g) if g == f => 2,
                Some(&g) if g == (f + 1) % self.k => 1,
                _ => 0,
            };
            parts[part].push(i);
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(id: usize, procedure: usize) -> SeqInput {
        SeqInput {
            id: format!("i{id}"),
            procedure: format!("p{procedure}"),
            split: "train".into(),
            steps: vec![Default::default(), Default::default()],
            references: vec![vec![0, 1]],
        }
    }

    #[test]
    fn folds_keep_procedures_together_and_test_every_instance_once() {
        let inputs: Vec<SeqInput> = (0..23).map(|i| input(i, i % 7)).collect();
        let folds = Folds::new(inputs.iter().map(|s| s.procedure.as_str()), 4, 3).unwrap();
        let mut tested = vec![0; inputs.len()];
        for f in 0..4 {
            let [train, val, test] = &folds.split(&inputs, f);
            assert_eq!(train.len() + val.len() + test.len(), inputs.len());
            assert!(!train.is_empty() && !val.is_empty() && !test.is_empty());
            let procs = |ix: &[usize]| ix.iter().map(|&i| inputs[i].procedure.clone()).collect::<BTreeSet<_>>();
            assert!(procs(test).is_disjoint(&procs(train)) && procs(test).is_disjoint(&procs(val)));
            assert!(procs(val).is_disjoint(&procs(train)));
            test.iter().for_each(|&i| tested[i] += 1);
        }
        assert!(tested.iter().all(|&t| t == 1), "{tested:?}");
        assert_eq!(folds, Folds::new(inputs.iter().map(|s| s.procedure.as_str()), 4, 3).unwrap());
        assert!(Folds::new(["a", "b", "c"], 2, 0).is_err());
        assert!(Folds::new(["a", "b", "c", "a"], 4, 0).is_err());
    }

    use std::collections::BTreeSet;

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
