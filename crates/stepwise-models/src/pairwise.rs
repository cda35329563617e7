//! The pairwise order model with topological-sort decoding (Prabhumoye et al., ACL 2020, B-TSort, here over
//! precomputed features instead of BERT).
//!
//! - [`pairs`]: labelled training pairs (soft labels from multiple references) and feature standardisation
//! - [`net`]: the classifier (logistic regression or a small MLP) in candle, seeded initialisation, the loss
//!
//! Model: item vectors wider than `max_dim` are first reduced by a seeded random projection (entries ±1/√k,
//! Achlioptas' database-friendly Johnson–Lindenstrauss projection: TF-IDF and multimodal vectors have thousands
//! of dimensions, which would make 4·d pair inputs slow to train on CPU), then standardised with the training
//! items' mean and deviation. For items i, j with vectors f_i, f_j, the classifier reads
//! `[f_i, f_j, f_i − f_j, f_i ⊙ f_j]` (4·d inputs) and predicts the logit of "i comes before j". Training:
//! binary cross-entropy with soft labels over all ordered pairs of the training instances, AdamW, mini-batches
//! shuffled by `rng_for(seed, "pairwise/epoch/<e>")`, for at most `epochs` epochs; after each epoch the loss on
//! the validation pairs is measured and the weights of the best epoch are kept (early stop after `patience`
//! epochs without improvement). Without validation instances, all epochs run and the last weights are kept.
//! Prediction: the probability matrix of all ordered pairs, decoded by [`crate::topo_decode::decode`].

pub mod net;
pub mod pairs;

use candle_core::Tensor;
use candle_nn::optim::{AdamW, Optimizer, ParamsAdamW};
use rand::Rng;
use serde::Serialize;
use stepwise_core::rng::rng_for;
use stepwise_core::{Error, Result};

use crate::item_features::ItemMatrix;
use net::{Classifier, Net, bce_with_logits, f32_tensor, matrix, pair_features, sigmoid, u32_tensor};
use pairs::{PairTable, Standardizer};

fn cerr(e: candle_core::Error) -> Error {
    Error::runtime(format!("candle: {e}"))
}

/// Training options (defaults suit a few thousand pairs of 100–1000-d features).
#[derive(Debug, Clone, Serialize)]
pub struct PairwiseConfig {
    pub classifier: Classifier,
    pub epochs: usize,
    pub batch_size: usize,
    pub learning_rate: f64,
    pub weight_decay: f64,
    /// Early stopping: epochs without a better validation loss.
    pub patience: usize,
    /// Item vectors wider than this are randomly projected to this many dimensions (0 = never).
    pub max_dim: usize,
    pub seed: u64,
}

impl Default for PairwiseConfig {
    fn default() -> Self {
        PairwiseConfig {
            classifier: Classifier::Mlp { hidden: 64 },
            epochs: 60,
            batch_size: 256,
            learning_rate: 1e-3,
            weight_decay: 1e-2,
            patience: 8,
            max_dim: 256,
            seed: 0,
        }
    }
}

/// One labelled instance for training: its item vectors and its references.
pub struct Labelled<'a> {
    pub items: &'a ItemMatrix,
    pub references: &'a [Vec<usize>],
}

/// What training did.
#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    pub train_pairs: usize,
    pub val_pairs: usize,
    pub parameters: usize,
    pub epochs_run: usize,
    /// The epoch whose weights were kept (1-based).
    pub best_epoch: usize,
    pub train_loss: f64,
    pub val_loss: Option<f64>,
    /// Share of validation pairs with a strict label (0 or 1) whose predicted side of 0.5 is right.
    pub val_pair_accuracy: Option<f64>,
}

/// A trained pairwise model.
pub struct PairwiseModel {
    projection: Option<Projection>,
    standardizer: Standardizer,
    net: Net,
}

/// A random projection `d → k` (row-major `d × k`, entries ±1/√k).
struct Projection {
    from: usize,
    to: usize,
    matrix: Tensor,
}

impl Projection {
    fn new(from: usize, to: usize, seed: u64) -> Result<Self> {
        let mut rng = rng_for(seed, "pairwise/projection");
        let scale = 1.0 / (to as f32).sqrt();
        let data: Vec<f32> = (0..from * to).map(|_| if rng.random::<bool>() { scale } else { -scale }).collect();
        Ok(Projection { from, to, matrix: matrix(&data, from, to).map_err(cerr)? })
    }

    /// Project row-major items (`from` columns) to `to` columns.
    fn apply(&self, items: &[f32]) -> Result<Vec<f32>> {
        let rows = items.len() / self.from;
        if rows == 0 {
            return Ok(Vec::new());
        }
        (|| matrix(items, rows, self.from)?.matmul(&self.matrix)?.flatten_all()?.to_vec1::<f32>())().map_err(cerr)
    }
}

fn table(instances: &[Labelled<'_>], projection: Option<&Projection>) -> Result<PairTable> {
    let mut t = PairTable::default();
    for inst in instances {
        match projection {
            Some(p) => {
                let x = ItemMatrix { dim: p.to, data: p.apply(&inst.items.data)? };
                t.push_instance(&x, inst.references);
            }
            None => t.push_instance(inst.items, inst.references),
        }
    }
    Ok(t)
}

impl PairwiseModel {
    /// Train on `train`, selecting the epoch on `val` (may be empty).
    pub fn train(train: &[Labelled<'_>], val: &[Labelled<'_>], cfg: &PairwiseConfig) -> Result<(Self, TrainReport)> {
        let input_dim = train.first().map_or(0, |l| l.items.dim);
        let projection = if cfg.max_dim > 0 && input_dim > cfg.max_dim {
            Some(Projection::new(input_dim, cfg.max_dim, cfg.seed)?)
        } else {
            None
        };
        let mut tr = table(train, projection.as_ref())?;
        if tr.is_empty() {
            return Err(Error::bad_input("the pairwise model needs training instances with at least two items"));
        }
        let dim = tr.dim;
        let standardizer = Standardizer::fit(&tr.items, dim);
        tr.standardize(&standardizer);
        let mut va = table(val, projection.as_ref())?;
        va.standardize(&standardizer);

        let net = Net::new(4 * dim, cfg.classifier, cfg.seed)?;
        let params = ParamsAdamW { lr: cfg.learning_rate, weight_decay: cfg.weight_decay, ..ParamsAdamW::default() };
        let mut opt = AdamW::new(net.vars(), params).map_err(cerr)?;
        let train_items = matrix(&tr.items, tr.rows(), dim).map_err(cerr)?;
        let val_items = if va.is_empty() { None } else { Some(matrix(&va.items, va.rows(), dim).map_err(cerr)?) };

        let mut best: Option<(f64, usize, Vec<Tensor>)> = None;
        let mut since_best = 0;
        let mut epochs_run = 0;
        let mut last_train_loss = f64::NAN;
        let batch = cfg.batch_size.max(1);
        for epoch in 0..cfg.epochs.max(1) {
            epochs_run = epoch + 1;
            let mut order: Vec<usize> = (0..tr.len()).collect();
            let mut rng = rng_for(cfg.seed, &format!("pairwise/epoch/{epoch}"));
            for j in (1..order.len()).rev() {
                let r = rng.random_range(0..=j);
                order.swap(j, r);
            }
            let mut total = 0f64;
            for chunk in order.chunks(batch) {
                let ia: Vec<u32> = chunk.iter().map(|&k| tr.a[k]).collect();
                let ib: Vec<u32> = chunk.iter().map(|&k| tr.b[k]).collect();
                let y: Vec<f32> = chunk.iter().map(|&k| tr.y[k]).collect();
                let loss = (|| {
                    let x = pair_features(&train_items, &u32_tensor(&ia)?, &u32_tensor(&ib)?)?;
                    bce_with_logits(&net.forward(&x)?, &f32_tensor(&y)?)
                })()
                .map_err(cerr)?;
                opt.backward_step(&loss).map_err(cerr)?;
                total += loss.to_scalar::<f32>().map_err(cerr)? as f64 * chunk.len() as f64;
            }
            last_train_loss = total / tr.len() as f64;
            let Some(vi) = &val_items else { continue };
            let (val_loss, _) = evaluate(&net, vi, &va, batch)?;
            tracing::info!(epoch = epoch + 1, train_loss = last_train_loss, val_loss, "pairwise epoch");
            if best.as_ref().is_none_or(|(b, _, _)| val_loss < *b - 1e-9) {
                best = Some((val_loss, epoch + 1, net.snapshot().map_err(cerr)?));
                since_best = 0;
            } else {
                since_best += 1;
                if since_best >= cfg.patience {
                    break;
                }
            }
        }
        let (best_epoch, val_loss, val_pair_accuracy) = match (&best, &val_items) {
            (Some((_, e, weights)), Some(vi)) => {
                net.restore(weights).map_err(cerr)?;
                let (l, acc) = evaluate(&net, vi, &va, batch)?;
                (*e, Some(l), acc)
            }
            _ => (epochs_run, None, None),
        };
        let report = TrainReport {
            train_pairs: tr.len(),
            val_pairs: va.len(),
            parameters: net.parameter_count(),
            epochs_run,
            best_epoch,
            train_loss: last_train_loss,
            val_loss,
            val_pair_accuracy,
        };
        Ok((PairwiseModel { projection, standardizer, net }, report))
    }

    /// `p[i][j]` = predicted probability that item i comes before item j (diagonal 0.5).
    pub fn probabilities(&self, x: &ItemMatrix) -> Result<Vec<Vec<f64>>> {
        let n = x.len();
        let mut p = vec![vec![0.5; n]; n];
        if n < 2 {
            return Ok(p);
        }
        let trained_dim = self.projection.as_ref().map_or(self.standardizer.mean.len(), |p| p.from);
        if x.dim != trained_dim {
            return Err(Error::bad_input(format!(
                "features have dimension {} but the model was trained on dimension {trained_dim}",
                x.dim
            )));
        }
        let mut items = match &self.projection {
            Some(p) => p.apply(&x.data)?,
            None => x.data.clone(),
        };
        let dim = self.standardizer.mean.len();
        for row in items.chunks_mut(dim) {
            self.standardizer.apply(row);
        }
        let (ia, ib): (Vec<u32>, Vec<u32>) =
            (0..n).flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i as u32, j as u32))).unzip();
        let probs: Vec<f32> = (|| {
            let t = matrix(&items, n, dim)?;
            let z = self.net.forward(&pair_features(&t, &u32_tensor(&ia)?, &u32_tensor(&ib)?)?)?;
            sigmoid(&z)?.to_vec1::<f32>()
        })()
        .map_err(cerr)?;
        for ((&i, &j), &v) in ia.iter().zip(&ib).zip(&probs) {
            p[i as usize][j as usize] = v as f64;
        }
        Ok(p)
    }

    /// The decoded order of the items of `x`.
    pub fn predict(&self, x: &ItemMatrix) -> Result<Vec<usize>> {
        Ok(crate::topo_decode::decode(&self.probabilities(x)?).0)
    }
}

/// Mean loss over a pair table, and the accuracy on its strictly labelled pairs.
fn evaluate(net: &Net, items: &Tensor, t: &PairTable, batch: usize) -> Result<(f64, Option<f64>)> {
    let mut loss = 0f64;
    let (mut right, mut strict) = (0usize, 0usize);
    let idx: Vec<usize> = (0..t.len()).collect();
    for chunk in idx.chunks(batch) {
        let ia: Vec<u32> = chunk.iter().map(|&k| t.a[k]).collect();
        let ib: Vec<u32> = chunk.iter().map(|&k| t.b[k]).collect();
        let y: Vec<f32> = chunk.iter().map(|&k| t.y[k]).collect();
        let (l, z) = (|| {
            let z = net.forward(&pair_features(items, &u32_tensor(&ia)?, &u32_tensor(&ib)?)?)?;
            let l = bce_with_logits(&z, &f32_tensor(&y)?)?.to_scalar::<f32>()?;
            Ok::<_, candle_core::Error>((l, z.to_vec1::<f32>()?))
        })()
        .map_err(cerr)?;
        loss += l as f64 * chunk.len() as f64;
        for (zk, yk) in z.iter().zip(&y) {
            if *yk == 0.0 || *yk == 1.0 {
                strict += 1;
                right += usize::from((*zk > 0.0) == (*yk == 1.0));
            }
        }
    }
    Ok((loss / t.len().max(1) as f64, (strict > 0).then(|| right as f64 / strict as f64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item_features::ItemMatrix;

    /// Synthetic instances: item vectors encode their position (first coordinate) plus noise.
    fn synthetic(count: usize, n: usize, noise: f32, seed: u64) -> Vec<(ItemMatrix, Vec<Vec<usize>>)> {
        (0..count)
            .map(|c| {
                let mut rng = rng_for(seed, &format!("synthetic/{c}"));
                let mut perm: Vec<usize> = (0..n).collect();
                for j in (1..n).rev() {
                    let r = rng.random_range(0..=j);
                    perm.swap(j, r);
                }
                // item k shows position perm[k]
                let dim = 6;
                let mut data = Vec::with_capacity(n * dim);
                for &pos in &perm {
                    data.push(pos as f32 / n as f32 + noise * (rng.random::<f32>() - 0.5));
                    for _ in 1..dim {
                        data.push(rng.random::<f32>() - 0.5);
                    }
                }
                let mut reference = vec![0; n];
                for (k, &pos) in perm.iter().enumerate() {
                    reference[pos] = k;
                }
                (ItemMatrix { dim, data }, vec![reference])
            })
            .collect()
    }

    fn labelled(v: &[(ItemMatrix, Vec<Vec<usize>>)]) -> Vec<Labelled<'_>> {
        v.iter().map(|(x, r)| Labelled { items: x, references: r }).collect()
    }

    #[test]
    fn learns_positions_and_is_deterministic() {
        let train = synthetic(120, 5, 0.1, 1);
        let val = synthetic(20, 5, 0.1, 2);
        let test = synthetic(30, 5, 0.1, 3);
        let cfg = PairwiseConfig { epochs: 25, seed: 7, ..Default::default() };
        let (model, report) = PairwiseModel::train(&labelled(&train), &labelled(&val), &cfg).unwrap();
        assert!(report.val_pair_accuracy.unwrap() > 0.9, "{report:?}");
        let exact = test.iter().filter(|(x, r)| model.predict(x).unwrap() == r[0]).count();
        assert!(exact >= 20, "exact {exact}/30");
        // Same seed, same weights, same probabilities (bit for bit).
        let (again, _) = PairwiseModel::train(&labelled(&train), &labelled(&val), &cfg).unwrap();
        for (x, _) in &test[..5] {
            assert_eq!(model.probabilities(x).unwrap(), again.probabilities(x).unwrap());
        }
    }

    #[test]
    fn wide_features_are_projected_and_still_learnable() {
        // 6 informative dims padded to 600 with zeros; max_dim 32 forces a projection.
        let widen = |v: Vec<(ItemMatrix, Vec<Vec<usize>>)>| -> Vec<(ItemMatrix, Vec<Vec<usize>>)> {
            v.into_iter()
                .map(|(x, r)| {
                    let data = x
                        .data
                        .chunks(x.dim)
                        .flat_map(|row| row.iter().copied().chain(std::iter::repeat_n(0.0, 594)))
                        .collect();
                    (ItemMatrix { dim: 600, data }, r)
                })
                .collect()
        };
        let train = widen(synthetic(120, 5, 0.05, 8));
        let val = widen(synthetic(20, 5, 0.05, 9));
        let cfg = PairwiseConfig { max_dim: 32, epochs: 25, ..Default::default() };
        let (model, report) = PairwiseModel::train(&labelled(&train), &labelled(&val), &cfg).unwrap();
        assert_eq!(report.parameters, (4 * 32) * 64 + 64 + 64 + 1);
        assert!(report.val_pair_accuracy.unwrap() > 0.8, "{report:?}");
        let narrow = &synthetic(1, 5, 0.05, 10)[0].0;
        assert!(model.probabilities(narrow).is_err(), "a dimension mismatch is an error");
    }

    #[test]
    fn logistic_regression_trains_without_validation() {
        let train = synthetic(60, 4, 0.05, 4);
        let cfg =
            PairwiseConfig { classifier: Classifier::LogReg, epochs: 30, learning_rate: 1e-2, ..Default::default() };
        let (model, report) = PairwiseModel::train(&labelled(&train), &[], &cfg).unwrap();
        assert_eq!(report.epochs_run, 30);
        assert!(report.val_loss.is_none());
        let test = synthetic(20, 4, 0.05, 5);
        let exact = test.iter().filter(|(x, r)| model.predict(x).unwrap() == r[0]).count();
        assert!(exact >= 14, "exact {exact}/20");
    }
}
