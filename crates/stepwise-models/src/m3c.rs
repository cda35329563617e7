//! The GM3C framework (Meta-RecipeQA §3): models for the RecipeQA tasks over precomputed features, trained on
//! CPU with candle.
//!
//! - [`dataset`]: the questions of a task set by split, with skipped questions counted
//! - [`inputs`]: questions → context rows and one query sequence per candidate (appendix C)
//! - [`model`]: modality encoders + a scoring function; batches; the losses
//! - [`saved`]: a trained model on disk (weights, configuration, feature identities) and the identity check
//! - [`scorers`]: Impatient Reader, BiDAF, HTRN
//! - [`train`]: Adam, early stopping on validation accuracy, kill-safe checkpoints, prediction, weights I/O
//! - [`study`]: the Meta-RecipeQA model study over a suite (train, select, test every model on every setting,
//!   several seeds, beside the Hasty Student)

pub mod dataset;
pub mod inputs;
pub mod model;
pub mod saved;
pub mod scorers;
pub mod study;
pub mod train;

pub use inputs::{FeatureSources, InputSpec, QuestionInput, question_input};
pub use model::{
    CandidateEmbedding, FittedScaling, HtrnConfig, InputScaling, Loss, M3cModel, ModelConfig, RowScale, ScorerKind,
};
pub use train::{TrainConfig, TrainReport};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item_features::ItemMatrix;
    use inputs::{ContextKind, QueryKind};
    use rand::Rng;
    use stepwise_core::Task;
    use stepwise_core::rng::rng_for;

    const DC: usize = 6;
    const DQ: usize = 5;

    /// Questions whose answer is decidable from context and query together: the context carries a hidden
    /// "topic" vector t; the right candidate's query rows are t-like, the wrong ones are drawn around other
    /// topics. Steps have 1–3 rows (tokens) and questions 3–5 steps, so padding is exercised.
    fn synthetic(count: usize, seed: u64) -> Vec<QuestionInput> {
        (0..count)
            .map(|i| {
                let mut rng = rng_for(seed, &format!("q/{i}"));
                let mut g = |s: f32| rng.random_range(-s..s);
                let topic: Vec<f32> = (0..DC).map(|_| g(1.0)).collect();
                let n_steps = 3 + i % 3;
                let context = (0..n_steps)
                    .map(|k| {
                        let rows = 1 + (i + k) % 3;
                        let data = (0..rows * DC).map(|j| topic[j % DC] + 0.3 * g(1.0)).collect();
                        ItemMatrix { dim: DC, data }
                    })
                    .collect();
                let answer = i % 4;
                let candidates: Vec<ItemMatrix> = (0..4)
                    .map(|c| {
                        let center: Vec<f32> =
                            if c == answer { topic[..DQ].to_vec() } else { (0..DQ).map(|_| g(1.0)).collect() };
                        let data = (0..3 * DQ).map(|j| center[j % DQ] + 0.2 * g(1.0)).collect();
                        ItemMatrix { dim: DQ, data }
                    })
                    .collect();
                // Each candidate's own item: its sequence's last row (where a cloze choice would sit).
                let own = candidates.iter().flat_map(|c| c.row(2).to_vec()).collect();
                let candidate_items = Some(ItemMatrix { dim: DQ, data: own });
                QuestionInput {
                    qid: format!("q{i}"),
                    recipe_id: format!("p{}", i / 2),
                    context,
                    candidates,
                    candidate_items,
                    answer,
                }
            })
            .collect()
    }

    fn config(scorer: ScorerKind, hierarchical: bool) -> ModelConfig {
        let spec = InputSpec {
            task: Task::VisualCloze,
            context: ContextKind::Text,
            query: QueryKind::Images,
            tokens: hierarchical,
            max_context_steps: 25,
            max_rows_per_step: 32,
        };
        let mut c = ModelConfig::new(scorer, spec, DC, DQ);
        c.hierarchical = hierarchical;
        c.hidden = 8;
        c.attention = 8;
        c.htrn = HtrnConfig { layers: 2, dim: 16, heads: 2, ff: 32, max_positions: 32 };
        c
    }

    #[test]
    fn every_parameter_of_every_model_gets_a_gradient() {
        let qs = synthetic(6, 1);
        let items: Vec<&QuestionInput> = qs.iter().collect();
        for scorer in ScorerKind::ALL {
            for hierarchical in [false, true] {
                let m = M3cModel::new(config(scorer, hierarchical), 3).unwrap();
                let batch = model::Batch::new(&items, &m.config).unwrap();
                let (loss, _) = m.loss(&batch).unwrap();
                let grads = loss.backward().unwrap();
                for (name, var) in m.params.named() {
                    let g = grads.get(var.as_tensor()).unwrap_or_else(|| panic!("{scorer:?}: no gradient for {name}"));
                    let norm = g.sqr().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
                    assert!(
                        norm > 0.0 && norm.is_finite(),
                        "{scorer:?} hierarchical={hierarchical}: {name} |g|² = {norm}"
                    );
                }
            }
        }
    }

    /// The Impatient Reader on the candidates' own items (RecipeQA §4.2): every parameter still learns, the
    /// candidate map reads item rows, and a question without them is refused by name.
    #[test]
    fn the_impatient_reader_on_candidate_items_learns_every_parameter_and_needs_the_items() {
        let mut qs = synthetic(6, 1);
        let mut c = config(ScorerKind::Impatient, true);
        c.candidate_embedding = CandidateEmbedding::Item;
        assert!(c.reads_candidate_items());
        let m = M3cModel::new(c.clone(), 3).unwrap();
        let items: Vec<&QuestionInput> = qs.iter().collect();
        let batch = model::Batch::new(&items, &m.config).unwrap();
        // Row qi·A + ci holds question qi's candidate ci's own item.
        let rows = batch.candidate_items.as_ref().unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(rows.len(), 6 * 4);
        for (qi, q) in qs.iter().enumerate() {
            for ci in 0..4 {
                assert_eq!(rows[qi * 4 + ci], q.candidate_items.as_ref().unwrap().row(ci), "question {qi}, {ci}");
            }
        }
        let (loss, _) = m.loss(&batch).unwrap();
        let grads = loss.backward().unwrap();
        for (name, var) in m.params.named() {
            let g = grads.get(var.as_tensor()).unwrap_or_else(|| panic!("no gradient for {name}"));
            let norm = g.sqr().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(norm > 0.0 && norm.is_finite(), "{name} |g|² = {norm}");
        }
        let w = &m.params.named()["scorer.w_candidate.weight"];
        assert_eq!(w.as_tensor().dims(), &[DQ, 16], "the candidate map reads item rows");
        // Centred inputs rescale the item rows as the query rows.
        let scaled = c.clone().scaled_on(InputScaling::Centered, &qs);
        let batch = model::Batch::new(&items, &scaled).unwrap();
        let got = batch.candidate_items.as_ref().unwrap().to_vec2::<f32>().unwrap();
        let mut want = vec![0.0; DQ];
        scaled.scaling.query.as_ref().unwrap().apply(qs[1].candidate_items.as_ref().unwrap().row(2), &mut want);
        assert_eq!(got[4 + 2], want);
        // The default reads no items, and ordering never does.
        assert!(!config(ScorerKind::Impatient, true).reads_candidate_items());
        c.input.task = Task::VisualOrdering;
        assert!(!c.reads_candidate_items());
        // A question without its candidates' items is refused, named.
        qs[2].candidate_items = None;
        let items: Vec<&QuestionInput> = qs.iter().collect();
        let err = model::Batch::new(&items, &m.config).err().unwrap();
        assert!(err.contains("question q2") && err.contains("own items"), "{err}");
    }

    #[test]
    fn each_model_overfits_32_questions() {
        let qs = synthetic(32, 2);
        for scorer in ScorerKind::ALL {
            let m = M3cModel::new(config(scorer, true), 5).unwrap();
            // The hinge loss on cosines (Impatient Reader) moves more slowly than cross-entropy.
            // A transformer wants a smaller step than the LSTM models.
            let (epochs, lr) = match scorer {
                ScorerKind::Impatient => (150, 1e-2),
                ScorerKind::Bidaf => (60, 1e-2),
                ScorerKind::Htrn => (100, 2e-3),
            };
            let cfg = TrainConfig { learning_rate: lr, batch_size: 8, max_epochs: epochs, patience: epochs, seed: 1 };
            let report = train::train(&m, &qs, &[], &cfg, None, &mut |_, _, _, _, _| {}).unwrap().unwrap();
            let pred = train::predict(&m, &qs, 32).unwrap();
            let right = pred.iter().zip(&qs).filter(|((p, _), q)| *p == q.answer).count();
            assert_eq!(right, 32, "{scorer:?}: {right}/32 after {} epochs", report.epochs_run);
        }
    }

    fn train_in_pool(threads: usize, scorer: ScorerKind) -> Vec<u8> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let (tr, va) = (synthetic(24, 3), synthetic(8, 4));
            // Dropout and standardised inputs on: their draws and statistics must not depend on the pool.
            let mut c = config(scorer, true).scaled_on(InputScaling::Centered, &tr);
            c.dropout = 0.2;
            let m = M3cModel::new(c, 7).unwrap();
            let cfg = TrainConfig { learning_rate: 5e-3, batch_size: 8, max_epochs: 4, patience: 20, seed: 9 };
            train::train(&m, &tr, &va, &cfg, None, &mut |_, _, _, _, _| {}).unwrap().unwrap();
            train::weights_bytes(&m).unwrap()
        })
    }

    #[test]
    fn same_seed_same_weights_for_any_thread_count() {
        for scorer in [ScorerKind::Bidaf, ScorerKind::Htrn] {
            let one = train_in_pool(1, scorer);
            assert_eq!(one, train_in_pool(2, scorer), "{scorer:?}");
            assert_eq!(one, train_in_pool(1, scorer), "{scorer:?}");
        }
    }

    #[test]
    fn a_stopped_run_resumes_to_the_same_weights() {
        let (tr, va) = (synthetic(24, 5), synthetic(8, 6));
        let cfg = TrainConfig { learning_rate: 5e-3, batch_size: 8, max_epochs: 5, patience: 20, seed: 2 };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt.safetensors");
        let mut with_dropout = config(ScorerKind::Impatient, true);
        with_dropout.dropout = 0.2;
        let config = |_, _| with_dropout.clone();
        let straight = M3cModel::new(config(ScorerKind::Impatient, true), 1).unwrap();
        let r1 = train::train(&straight, &tr, &va, &cfg, None, &mut |_, _, _, _, _| {}).unwrap().unwrap();

        let stop = train::Checkpointing { path: path.clone(), stop_after_epochs: Some(2) };
        let first = M3cModel::new(config(ScorerKind::Impatient, true), 1).unwrap();
        assert!(train::train(&first, &tr, &va, &cfg, Some(&stop), &mut |_, _, _, _, _| {}).unwrap().is_none());
        assert!(path.exists());
        // A new process: fresh weights, state from the checkpoint.
        let resumed = M3cModel::new(config(ScorerKind::Impatient, true), 1).unwrap();
        let go_on = train::Checkpointing { path: path.clone(), stop_after_epochs: None };
        let r2 = train::train(&resumed, &tr, &va, &cfg, Some(&go_on), &mut |_, _, _, _, _| {}).unwrap().unwrap();
        assert_eq!(r2.resumed_from_epoch, 2);
        assert_eq!(r1.curve, r2.curve);
        assert_eq!(train::weights_bytes(&straight).unwrap(), train::weights_bytes(&resumed).unwrap());
        // A checkpoint of another run (other seed) is ignored, not applied.
        let other = TrainConfig { seed: 3, ..cfg.clone() };
        let fresh = M3cModel::new(config(ScorerKind::Impatient, true), 1).unwrap();
        let r3 = train::train(&fresh, &tr, &va, &other, Some(&go_on), &mut |_, _, _, _, _| {}).unwrap().unwrap();
        assert_eq!(r3.resumed_from_epoch, 0);
    }

    #[test]
    fn input_scaling_centres_and_scales_as_named() {
        let rows: Vec<&[f32]> = vec![&[1.0, 10.0, 5.0], &[3.0, 30.0, 5.0]];
        assert_eq!(RowScale::fit(3, rows.iter().copied(), InputScaling::Raw), None);
        let s = RowScale::fit(3, rows.iter().copied(), InputScaling::Standardized).unwrap();
        assert_eq!(s.mean, vec![2.0, 20.0, 5.0]);
        // Per dimension: sd 1 and 10; a dimension that never varies is zeroed, not divided by 0.
        assert_eq!(s.inv_scale, vec![1.0, 0.1, 0.0]);
        let mut out = [0.0; 3];
        s.apply(rows[1], &mut out);
        assert_eq!(out, [1.0, 1.0, 0.0]);
        // Centred: one factor, the root of the mean variance (1 + 100 + 0) / 3, so relative spreads survive.
        let c = RowScale::fit(3, rows.iter().copied(), InputScaling::Centered).unwrap();
        let f = (1.0 / (101.0f64 / 3.0).sqrt()) as f32;
        assert_eq!(c.inv_scale, vec![f; 3]);
        c.apply(rows[0], &mut out);
        assert_eq!(out, [-f, -10.0 * f, 0.0]);
        assert_eq!(RowScale::fit(3, std::iter::empty(), InputScaling::Centered), None);
    }

    #[test]
    fn scaling_reaches_the_batch_and_is_saved_with_the_config() {
        let qs = synthetic(4, 8);
        let items: Vec<&QuestionInput> = qs.iter().collect();
        let c = config(ScorerKind::Bidaf, true).scaled_on(InputScaling::Standardized, &qs);
        let batch = model::Batch::new(&items, &c).unwrap();
        // Standardised over the training rows, the (unpadded) query rows have mean 0 in every dimension.
        let q = batch.query.to_vec3::<f32>().unwrap();
        let mask = batch.query_mask.to_vec2::<f32>().unwrap();
        for d in 0..DQ {
            let (mut sum, mut n) = (0f64, 0usize);
            for (rows, m) in q.iter().zip(&mask) {
                for (r, &keep) in rows.iter().zip(m) {
                    if keep > 0.0 {
                        sum += f64::from(r[d]);
                        n += 1;
                    }
                }
            }
            assert!((sum / n as f64).abs() < 1e-5, "dimension {d}: mean {}", sum / n as f64);
        }
        let json = serde_json::to_string(&c).unwrap();
        let back: ModelConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        // A configuration saved before scaling existed reads as raw inputs, and one saved before the candidate
        // embedding was a choice as the query summary, what those models were trained with.
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v.as_object_mut().unwrap().remove("scaling");
        v.as_object_mut().unwrap().remove("dropout");
        let old: ModelConfig = serde_json::from_value(v).unwrap();
        assert_eq!((old.scaling.method, old.dropout), (InputScaling::Raw, 0.0));
        // The default candidate embedding is not written, so the file is what it was before the choice existed
        // and reads back as the query summary; the other one is written and read back.
        assert!(!json.contains("candidate_embedding"), "{json}");
        assert_eq!(old.candidate_embedding, CandidateEmbedding::QuerySummary);
        let item = ModelConfig { candidate_embedding: CandidateEmbedding::Item, ..c.clone() };
        let json = serde_json::to_string(&item).unwrap();
        assert!(json.contains("\"candidate_embedding\":\"item\""), "{json}");
        assert_eq!(serde_json::from_str::<ModelConfig>(&json).unwrap(), item);
        // Scales that do not fit the dimensions are refused.
        let mut bad = c.clone();
        bad.scaling.query.as_mut().unwrap().mean.pop();
        assert!(M3cModel::new(bad, 1).is_err());
    }

    #[test]
    fn weights_round_trip_and_mismatched_files_are_refused() {
        let m = M3cModel::new(config(ScorerKind::Htrn, false), 4).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        std::fs::write(&path, train::weights_bytes(&m).unwrap()).unwrap();
        let again = M3cModel::new(config(ScorerKind::Htrn, false), 99).unwrap();
        train::load_weights(&again, &path).unwrap();
        assert_eq!(train::weights_bytes(&again).unwrap(), train::weights_bytes(&m).unwrap());
        let other = M3cModel::new(config(ScorerKind::Bidaf, false), 4).unwrap();
        let e = train::load_weights(&other, &path).unwrap_err().to_string();
        assert!(e.contains("w.safetensors"), "{e}");
        std::fs::write(&path, b"not weights").unwrap();
        assert!(train::load_weights(&m, &path).is_err());
    }
}
