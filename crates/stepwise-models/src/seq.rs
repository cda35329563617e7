//! The sequencing paper's model family over precomputed features, trained on CPU with candle.
//!
//! - [`data`]: the instances of a file with their features and model inputs (what training and prediction read)
//! - [`inputs`]: instances → per-step text rows (tokens, with ids) and image rows (patch grids)
//! - [`model`]: the multimodal step encoder, the pairwise and pointer (BERSON) order heads, the pretraining heads
//! - [`pretrain`]: how MLM, ISP, PISP and SMRM change a batch (pure, seeded)
//! - [`train`]: fine-tuning on orders, pretraining, prediction
//! - [`saved`]: a trained or pretrained model on disk
//! - [`study`]: the paper's grid (Tables 2 and 3): cells and running one
//! - [`text_tower`]: the pretrained text encoder's upper layers, fine-tuned inside the sequencer

mod assemble;
pub mod data;
pub mod inputs;
pub mod model;
pub mod pretrain;
pub mod saved;
pub mod study;
pub mod text_tower;
pub mod train;

pub use inputs::{PatchRows, SeqInput, SeqSources, StepInput, seq_input};
pub use model::{DecoderKind, Decoding, OrderLabels, SeqBatch, SeqConfig, SeqModel};
pub use pretrain::{Objective, PretrainConfig};
pub use train::{OrderTargets, SeqTrainConfig, SeqTrainReport, predict_orders, pretrain, train_orders};

/// Copy the encoder's weights (`encoder.*`) of a pretrained model into `model` (the heads stay as they are).
pub fn load_encoder(model: &SeqModel, pretrained: &SeqModel) -> stepwise_core::Result<usize> {
    let snap = pretrained.params.snapshot().map_err(crate::optim::cerr)?;
    model.params.restore_prefix(&snap, "encoder.").map_err(|e| stepwise_core::Error::bad_input(format!("{e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item_features::{FeatureKind, ItemMatrix};
    use crate::optim::Checkpointing;
    use rand::Rng;
    use rand::seq::SliceRandom;
    use stepwise_core::rng::rng_for;

    const DT: usize = 6;
    const DI: usize = 5;
    const VOCAB: usize = 11;

    /// Sequences whose order is decodable: step k (of n) carries k/n in its rows plus noise; the items are
    /// shuffled and the gold order lists them by k. Steps have 2–4 tokens and 3 patches; 3–5 steps.
    fn synthetic(count: usize, seed: u64) -> Vec<SeqInput> {
        (0..count)
            .map(|i| {
                let mut rng = rng_for(seed, &format!("s/{i}"));
                let n = 3 + i % 3;
                let mut perm: Vec<usize> = (0..n).collect();
                perm.shuffle(&mut rng);
                let steps: Vec<StepInput> = perm
                    .iter()
                    .map(|&k| {
                        let pos = k as f32 / n as f32;
                        let tokens = 2 + (i + k) % 3;
                        let mut g = |s: f32| rng.random_range(-s..s);
                        let text: Vec<f32> =
                            (0..tokens * DT).map(|j| if j % DT == 0 { pos } else { 0.2 * g(1.0) }).collect();
                        let image: Vec<f32> =
                            (0..3 * DI).map(|j| if j % DI == 1 { 1.0 - pos } else { 0.2 * g(1.0) }).collect();
                        StepInput {
                            text: Some(ItemMatrix { dim: DT, data: text }),
                            ids: Some((0..tokens).map(|t| ((k + t) % VOCAB) as i64).collect()),
                            image: Some(ItemMatrix { dim: DI, data: image }),
                        }
                    })
                    .collect();
                // Item j is step perm[j]: the gold order lists items by their step.
                let mut gold: Vec<usize> = (0..n).collect();
                gold.sort_by_key(|&j| perm[j]);
                SeqInput {
                    id: format!("s{i}"),
                    procedure: format!("p{i}"),
                    split: "train".into(),
                    steps,
                    references: vec![gold],
                    constraints: None,
                }
            })
            .collect()
    }

    fn small(kind: FeatureKind, decoder: DecoderKind, seed: u64) -> SeqModel {
        let mut c = SeqConfig::new(kind, DT, DI);
        c.dim = 16;
        c.heads = 2;
        c.ff = 32;
        c.layers = 1;
        c.max_tokens = 4;
        c.max_patches = 3;
        c.vocab = VOCAB;
        c.decoder = decoder;
        SeqModel::new(c, seed).unwrap()
    }

    fn missing_grads(model: &SeqModel, loss: &candle_core::Tensor) -> Vec<String> {
        let g = loss.backward().unwrap();
        model.params.named().iter().filter(|(_, v)| g.get(v.as_tensor()).is_none()).map(|(k, _)| k.clone()).collect()
    }

    #[test]
    fn gradient_reaches_every_parameter() {
        let data = synthetic(6, 1);
        for kind in FeatureKind::ALL {
            for decoder in [DecoderKind::Berson, DecoderKind::Pairwise] {
                let model = small(kind, decoder, 2);
                let steps: Vec<&[StepInput]> = data.iter().map(|s| s.steps.as_slice()).collect();
                let refs: Vec<OrderLabels<'_>> =
                    data.iter().map(|s| OrderLabels::of_references(&s.references)).collect();
                let batch = SeqBatch::new(&steps, &model.config).unwrap();
                let loss = model.order_loss(&batch, &refs).unwrap();
                // The [MASK] vector only acts in pretraining.
                let missing: Vec<String> =
                    missing_grads(&model, &loss).into_iter().filter(|k| k != "encoder.mask").collect();
                assert!(missing.is_empty(), "{kind:?} {decoder:?}: no gradient for {missing:?}");
            }
        }
        // Pretraining: every head and the [MASK] vector get a gradient from the objective that uses them.
        let model = small(FeatureKind::Multimodal, DecoderKind::Berson, 3).with_pretraining_heads().unwrap();
        let pcfg = PretrainConfig { swap_probability: 1.0, ..PretrainConfig::default() };
        let ordered: Vec<Vec<StepInput>> = data.iter().map(SeqInput::in_order).collect();
        let mut reached = std::collections::BTreeSet::new();
        for obj in Objective::ALL {
            let pb = train::pretrain_batch(&model, &ordered, obj, &pcfg, &mut rng_for(5, obj.as_str())).unwrap();
            let loss = train::pretrain_loss(&model, &pb).unwrap().unwrap();
            let missing = missing_grads(&model, &loss);
            for (name, _) in model.params.named() {
                if !missing.contains(name) {
                    reached.insert(name.clone());
                }
            }
            let head = format!("pretrain.{}", obj.as_str());
            if obj != Objective::Smrm {
                assert!(!missing.iter().any(|k| k.starts_with(&head)), "{obj:?}: {missing:?}");
            }
            assert!(!missing.iter().any(|k| k.starts_with("encoder.")), "{obj:?}: {missing:?}");
        }
        for (name, _) in model.params.named() {
            if name.starts_with("encoder.") || name.starts_with("pretrain.") {
                assert!(reached.contains(name), "pretraining never reaches {name}");
            }
        }
    }

    #[test]
    fn decoders_output_permutations_and_the_model_overfits() {
        let data = synthetic(24, 7);
        for decoder in [DecoderKind::Berson, DecoderKind::Pairwise] {
            let model = small(FeatureKind::Multimodal, decoder, 4);
            let cfg = SeqTrainConfig {
                learning_rate: 3e-3,
                batch_size: 8,
                max_epochs: 200,
                patience: 200,
                seed: 1,
                ..Default::default()
            };
            let report = train_orders(&model, &data, &[], &cfg, None, &mut |_, _, _, _| {}).unwrap().unwrap();
            // The pairwise head alone orders them too (for BERSON: its pointer left out).
            for decoding in [Decoding::Own { beam: 1 }, Decoding::Own { beam: 3 }, Decoding::PairwiseHead] {
                let pred = predict_orders(&model, &data, 8, decoding).unwrap();
                let mut right = 0;
                for (p, s) in pred.iter().zip(&data) {
                    let mut sorted = p.clone();
                    sorted.sort_unstable();
                    assert_eq!(sorted, (0..s.steps.len()).collect::<Vec<_>>(), "not a permutation: {p:?}");
                    right += usize::from(p == s.gold());
                }
                assert_eq!(
                    right,
                    data.len(),
                    "{decoder:?} {decoding:?}: {right}/{} perfect; {:?}",
                    data.len(),
                    report.curve.last()
                );
            }
        }
    }

    #[test]
    fn pairwise_head_decoding_is_the_topological_sort_of_the_heads_probabilities() {
        // An untrained BERSON model: its pointer and its pairwise head disagree, so the decodings can differ.
        let data = synthetic(8, 3);
        let model = small(FeatureKind::Multimodal, DecoderKind::Berson, 6);
        let steps: Vec<&[StepInput]> = data.iter().map(|s| s.steps.as_slice()).collect();
        let batch = SeqBatch::new(&steps, &model.config).unwrap();
        let enc = model.encode(&batch).unwrap();
        let pair = candle_nn::ops::sigmoid(&model.pair_logits(&enc.steps).unwrap()).unwrap().to_vec3::<f32>().unwrap();
        let expected: Vec<Vec<usize>> = (0..batch.b)
            .map(|bi| {
                let n = batch.lens[bi];
                let p: Vec<Vec<f64>> = (0..n).map(|i| (0..n).map(|j| pair[bi][i][j] as f64).collect()).collect();
                crate::topo_decode::decode(&p).0
            })
            .collect();
        assert_eq!(model.decode(&batch, Decoding::PairwiseHead).unwrap(), expected);
        let beam = model.decode(&batch, Decoding::Own { beam: 3 }).unwrap();
        assert_ne!(beam, expected, "the pointer's beam search ignored: the test cannot tell the decodings apart");
    }

    /// Sequences of 4 steps whose middle two may come in either order (both orders are references; the
    /// authored one a coin flip the features do not show): the outer steps carry their position as above.
    fn with_free_pair(count: usize, seed: u64) -> Vec<SeqInput> {
        synthetic(count, seed)
            .into_iter()
            .enumerate()
            .map(|(i, mut s)| {
                let mut rng = rng_for(seed, &format!("free/{i}"));
                s.steps.truncate(4);
                // Rebuild four steps at positions 0, 1/3, 1/3, 1 (the middle two alike).
                let pos = [0.0, 1.0 / 3.0, 1.0 / 3.0, 1.0];
                let mut perm: Vec<usize> = (0..4).collect();
                perm.shuffle(&mut rng);
                s.steps = perm
                    .iter()
                    .map(|&k| {
                        let mut g = |sc: f32| rng.random_range(-sc..sc);
                        let text: Vec<f32> =
                            (0..2 * DT).map(|j| if j % DT == 0 { pos[k] } else { 0.2 * g(1.0) }).collect();
                        let image: Vec<f32> =
                            (0..3 * DI).map(|j| if j % DI == 1 { 1.0 - pos[k] } else { 0.2 * g(1.0) }).collect();
                        StepInput {
                            text: Some(ItemMatrix { dim: DT, data: text }),
                            ids: Some(vec![k as i64, 0]),
                            image: Some(ItemMatrix { dim: DI, data: image }),
                        }
                    })
                    .collect();
                let item = |k: usize| perm.iter().position(|&p| p == k).unwrap();
                let (a, b) = if rng.random::<bool>() { (1, 2) } else { (2, 1) };
                let authored = vec![item(0), item(a), item(b), item(3)];
                let other = vec![item(0), item(b), item(a), item(3)];
                s.references = vec![authored, other];
                s
            })
            .collect()
    }

    #[test]
    fn every_reference_is_a_target_and_free_steps_stay_undecided() {
        let (train, test) = (with_free_pair(48, 11), with_free_pair(24, 12));
        let cfg = SeqTrainConfig {
            learning_rate: 3e-3,
            batch_size: 8,
            max_epochs: 60,
            patience: 60,
            seed: 1,
            ..Default::default()
        };
        assert_eq!(cfg.targets, OrderTargets::AllReferences);
        let model = small(FeatureKind::Multimodal, DecoderKind::Berson, 4);
        let report = train_orders(&model, &train, &[], &cfg, None, &mut |_, _, _, _| {}).unwrap().unwrap();
        // Every predicted order is a valid one.
        let pred = predict_orders(&model, &test, 8, Decoding::Own { beam: 3 }).unwrap();
        let valid = pred.iter().zip(&test).filter(|(p, s)| s.references.contains(p)).count();
        assert_eq!(valid, test.len(), "{valid}/{} valid; {:?}", test.len(), report.curve.last());
        // The pairwise head leaves the free pair near even and is sure of the fixed ones.
        let steps: Vec<&[StepInput]> = test.iter().map(|s| s.steps.as_slice()).collect();
        let batch = SeqBatch::new(&steps, &model.config).unwrap();
        let enc = model.encode(&batch).unwrap();
        let p = candle_nn::ops::sigmoid(&model.pair_logits(&enc.steps).unwrap()).unwrap().to_vec3::<f32>().unwrap();
        for (bi, s) in test.iter().enumerate() {
            let r = &s.references[0];
            let (free, fixed) = (p[bi][r[1]][r[2]], p[bi][r[0]][r[3]]);
            assert!((0.2..=0.8).contains(&free), "{}: P(free pair) {free}", s.id);
            assert!(fixed > 0.9, "{}: P(first before last) {fixed}", s.id);
        }
        // The loss the validation reads has the free pair's floor: both orders count, so it is no lower
        // than the authored-only loss's share for that pair would be, and finite.
        let all = train::order_loss_of(&model, &test, 8, OrderTargets::AllReferences).unwrap();
        let authored = train::order_loss_of(&model, &test, 8, OrderTargets::Authored).unwrap();
        assert!(all.is_finite() && authored.is_finite() && all < authored, "all {all}, authored {authored}");
    }

    #[test]
    fn pretraining_then_fine_tuning_is_deterministic_and_resumes_identically() {
        let data = synthetic(12, 9);
        let cfg = SeqTrainConfig {
            learning_rate: 1e-3,
            batch_size: 4,
            max_epochs: 3,
            patience: 3,
            seed: 2,
            ..Default::default()
        };
        let pcfg = PretrainConfig { objectives: Objective::ALL.to_vec(), ..PretrainConfig::default() };
        let run = |stop: Option<usize>, dir: &std::path::Path| {
            let model = small(FeatureKind::Multimodal, DecoderKind::Berson, 5).with_pretraining_heads().unwrap();
            let ck = Checkpointing { path: dir.join("pre.ckpt"), stop_after_epochs: stop };
            let mut r = pretrain(&model, &data, &cfg, &pcfg, Some(&ck), &mut |_, _, _, _| {}).unwrap();
            if r.is_none() {
                r = pretrain(
                    &model,
                    &data,
                    &cfg,
                    &pcfg,
                    Some(&Checkpointing { stop_after_epochs: None, ..ck }),
                    &mut |_, _, _, _| {},
                )
                .unwrap();
            }
            let tuned = small(FeatureKind::Multimodal, DecoderKind::Berson, 6);
            assert!(load_encoder(&tuned, &model).unwrap() > 0);
            train_orders(&tuned, &data[..8], &data[8..], &cfg, None, &mut |_, _, _, _| {}).unwrap().unwrap();
            (r.unwrap(), crate::optim::weights_bytes(&tuned.params).unwrap())
        };
        let (a, b, c) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (ra, wa) = run(None, a.path());
        let (rb, wb) = run(None, b.path());
        let (rc, wc) = run(Some(1), c.path());
        assert_eq!(wa, wb, "same seed, different weights");
        assert_eq!(wa, wc, "a killed and resumed pretraining ends elsewhere");
        assert_eq!(ra.curve, rb.curve);
        assert_eq!(ra.curve, rc.curve);
        assert_eq!(rc.resumed_from_epoch, 1);
        assert!(ra.curve.iter().all(|p| p.train_loss.is_finite()));
    }

    /// [`small`] with a fine-tuned text tower of two layers over the text rows.
    fn with_tower(seed: u64) -> SeqModel {
        let mut c = small(FeatureKind::Multimodal, DecoderKind::Berson, seed).config.clone();
        c.vocab = 0;
        c.text_tower = Some(text_tower::TextTowerConfig {
            encoder: "test".into(),
            version: "0".into(),
            frozen_layers: 1,
            tuned_layers: 2,
            hidden: DT,
            heads: 2,
            ff: 8,
        });
        SeqModel::new(c, seed).unwrap()
    }

    #[test]
    fn every_text_tower_parameter_gets_a_gradient() {
        let data = synthetic(8, 3);
        let model = with_tower(2);
        assert!(model.params.named().keys().any(|k| k.starts_with("text_tower.layer1.")));
        let steps: Vec<&[StepInput]> = data.iter().map(|s| s.steps.as_slice()).collect();
        let refs: Vec<OrderLabels<'_>> = data.iter().map(|s| OrderLabels::of_references(&s.references)).collect();
        let batch = SeqBatch::new(&steps, &model.config).unwrap();
        let loss = model.order_loss(&batch, &refs).unwrap();
        let missing: Vec<String> = missing_grads(&model, &loss).into_iter().filter(|k| k != "encoder.mask").collect();
        assert!(missing.is_empty(), "no gradient for {missing:?}");
    }

    #[test]
    fn weights_do_not_depend_on_the_thread_count() {
        let data = synthetic(8, 3);
        let cfg = SeqTrainConfig {
            learning_rate: 1e-3,
            batch_size: 4,
            max_epochs: 2,
            patience: 2,
            seed: 3,
            ..Default::default()
        };
        // Without and with a fine-tuned text tower.
        let plain = |seed| small(FeatureKind::Multimodal, DecoderKind::Berson, seed);
        for make in [&plain as &(dyn Fn(u64) -> SeqModel + Sync), &with_tower] {
            let weights = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                pool.install(|| {
                    let model = make(8);
                    train_orders(&model, &data, &[], &cfg, None, &mut |_, _, _, _| {}).unwrap();
                    crate::optim::weights_bytes(&model.params).unwrap()
                })
            };
            assert_eq!(weights(1), weights(2));
        }
    }

    /// Fine-tuning with dropout: its draws are seeded per batch, so the weights do not depend on the thread count
    /// and a killed run resumes to the same weights; it trains differently from no dropout; a config at 0 is
    /// saved as before the option existed.
    #[test]
    fn dropout_is_seeded_per_batch_resumes_identically_and_is_saved_only_when_used() {
        let data = synthetic(12, 4);
        let cfg = SeqTrainConfig {
            learning_rate: 1e-3,
            batch_size: 4,
            max_epochs: 3,
            patience: 3,
            seed: 5,
            dropout: 0.3,
            ..Default::default()
        };
        let train = |cfg: &SeqTrainConfig, threads: usize, stop: Option<usize>, dir: &std::path::Path| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let model = small(FeatureKind::Multimodal, DecoderKind::Berson, 8);
                let ck = Checkpointing { path: dir.join("ft.ckpt"), stop_after_epochs: stop };
                let done = train_orders(&model, &data[..8], &data[8..], cfg, Some(&ck), &mut |_, _, _, _| {}).unwrap();
                if done.is_none() {
                    let go_on = Checkpointing { stop_after_epochs: None, ..ck };
                    train_orders(&model, &data[..8], &data[8..], cfg, Some(&go_on), &mut |_, _, _, _| {}).unwrap();
                }
                crate::optim::weights_bytes(&model.params).unwrap()
            })
        };
        let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
        let one = train(&cfg, 1, None, dirs[0].path());
        assert_eq!(one, train(&cfg, 2, None, dirs[1].path()), "thread count");
        assert_eq!(one, train(&cfg, 2, Some(1), dirs[2].path()), "killed after one epoch and resumed");
        let plain = SeqTrainConfig { dropout: 0.0, ..cfg.clone() };
        assert_ne!(one, train(&plain, 2, None, dirs[3].path()), "dropout changes nothing");
        // A config saved at 0 (as before the option existed) has no field, and reads back as 0.
        let saved = serde_json::to_string(&plain).unwrap();
        assert!(!saved.contains("dropout"), "{saved}");
        assert_eq!(serde_json::from_str::<SeqTrainConfig>(&saved).unwrap(), plain);
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<SeqTrainConfig>(&json).unwrap(), cfg);
    }
}
