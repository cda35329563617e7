//! The encoder's input rows as one op with its own backward pass: per step `[CLS] + text rows + image rows`, the
//! [CLS] row carrying the mean of the step's (real) rows, text rows chosen for MLM replaced by the [MASK] vector,
//! and the position (row index within the step), token-type and step-index embeddings added.
//!
//! Why one op: as candle ops (broadcast, weighted mean by a batched product, `cat`, broadcast addition) the
//! backward pass made a full-size tensor per edge and accumulated each into a fresh zero tensor; a step's rows
//! are written once here and their gradients read once. Tested against the composite version.

use candle_core::{CpuStorage, CustomOp3, Layout, Shape, Tensor};
use rayon::prelude::*;

use crate::nn::CResult;
use crate::ops::{f32_rows, par_vec, with_data};

/// Where each embedding table sits in the packed vector of [`assemble`]: `[CLS]` (`D`), positions (`P × D`),
/// token types (`3 × D`: [CLS], text, image), step indices (`S × D`), the [MASK] vector (`D`).
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    pub positions: usize,
    pub steps: usize,
}

impl Tables {
    fn cls(&self, d: usize) -> std::ops::Range<usize> {
        0..d
    }
    fn position(&self, d: usize, j: usize) -> std::ops::Range<usize> {
        d * (1 + j)..d * (2 + j)
    }
    fn kind(&self, d: usize, t: usize) -> std::ops::Range<usize> {
        let at = d * (1 + self.positions + t);
        at..at + d
    }
    fn step(&self, d: usize, k: usize) -> std::ops::Range<usize> {
        let at = d * (4 + self.positions + k);
        at..at + d
    }
    fn mask(&self, d: usize) -> std::ops::Range<usize> {
        let at = d * (4 + self.positions + self.steps);
        at..at + d
    }
    /// Length of the packed vector.
    pub fn len(&self, d: usize) -> usize {
        d * (5 + self.positions + self.steps)
    }
}

/// The constants of one batch: per text and image row its weight in its step's mean (mask / real rows of the
/// step, 0 for padding) and, per text row, whether MLM replaces it by the [MASK] vector.
pub struct RowWeights {
    pub text: Vec<f32>,
    pub image: Vec<f32>,
    pub text_masked: Vec<bool>,
}

/// `B × n·(1 + s + p) × D` (each sequence's steps one after another, as the encoder reads them) from the projected
/// text rows (`B × n × s × D`, `s` may be 0), the projected image rows (`B × n × p × D`) and the packed tables
/// ([`Tables`]).
pub fn assemble(text: &Tensor, image: &Tensor, tables: &Tensor, layout: Tables, rows: RowWeights) -> CResult<Tensor> {
    text.contiguous()?.apply_op3(&image.contiguous()?, &tables.contiguous()?, Assemble { layout, rows })
}

struct Assemble {
    layout: Tables,
    rows: RowWeights,
}

/// `(B, n, s, p, D)` of a call.
fn dims(
    name: &str,
    text: &Layout,
    image: &Layout,
    tables: &Layout,
    layout: &Tables,
    rows: &RowWeights,
) -> CResult<[usize; 5]> {
    let (&[b, n, s, d], &[b2, n2, p, d2]) = (text.dims(), image.dims()) else {
        candle_core::bail!("{name}: text {:?} and image {:?} rows must be B × n × rows × D", text.dims(), image.dims());
    };
    if (b, n, d) != (b2, n2, d2) || tables.dims() != [layout.len(d)] || n > layout.steps || 1 + s + p > layout.positions
    {
        candle_core::bail!(
            "{name}: text {:?}, image {:?} and tables {:?} do not fit",
            text.dims(),
            image.dims(),
            tables.dims()
        );
    }
    if rows.text.len() != b * n * s
        || rows.image.len() != b * n * p
        || !(rows.text_masked.is_empty() || rows.text_masked.len() == b * n * s)
    {
        candle_core::bail!("{name}: row weights do not fit {b} × {n} steps of {s} + {p} rows");
    }
    Ok([b, n, s, p, d])
}

/// `acc += Σ_r weights[r] · row(r)`, the sum formed on its own first (as the composite's product did).
fn add_weighted_mean<'a>(acc: &mut [f32], weights: &[f32], row: impl Fn(usize) -> &'a [f32]) {
    if weights.is_empty() {
        return;
    }
    let mut mean = vec![0f32; acc.len()];
    for (r, &w) in weights.iter().enumerate() {
        mean.iter_mut().zip(row(r)).for_each(|(m, &x)| *m += w * x);
    }
    acc.iter_mut().zip(&mean).for_each(|(c, m)| *c += m);
}

impl Assemble {
    fn masked(&self, row: usize) -> bool {
        self.rows.text_masked.get(row).copied().unwrap_or(false)
    }

    /// The packed tables' gradient from the output's gradient `g`. Each table row's gradient is a sum over the
    /// output rows that used it, formed by one task in (step, row) order, so the values do not depend on the
    /// thread count (and are those of one serial pass over the rows).
    fn tables_grad(&self, g: &[f32], [b, n, s, p, d]: [usize; 5]) -> Vec<f32> {
        let (t, l) = (&self.layout, 1 + s + p);
        let row = |step: usize, j: usize| &g[(step * l + j) * d..(step * l + j + 1) * d];
        // A sum over steps `first, first + stride, …` and, within each, rows `rows`.
        struct Sum {
            first: usize,
            stride: usize,
            rows: std::ops::Range<usize>,
        }
        let all = |rows| Sum { first: 0, stride: 1, rows };
        let mut sums: Vec<Sum> = (0..l).map(|j| all(j..j + 1)).collect(); // positions ([CLS], text, image rows)
        sums.push(all(1..1 + s)); // token type "text"
        sums.push(all(1 + s..l)); // token type "image"
        sums.extend((0..n).map(|k| Sum { first: k, stride: n, rows: 0..l })); // step indices
        let totals: Vec<Vec<f32>> = sums
            .par_iter()
            .map(|sum| {
                let mut acc = vec![0f32; d];
                for step in (sum.first..b * n).step_by(sum.stride) {
                    for j in sum.rows.clone() {
                        acc.iter_mut().zip(row(step, j)).for_each(|(a, &v)| *a += v);
                    }
                }
                acc
            })
            .collect();
        let mut dt = vec![0f32; t.len(d)];
        // [CLS] and its token type are summed over the same rows as position 0.
        for (range, total) in [(t.cls(d), &totals[0]), (t.kind(d, 0), &totals[0])]
            .into_iter()
            .chain((0..l).map(|j| (t.position(d, j), &totals[j])))
            .chain((1..3).map(|kind| (t.kind(d, kind), &totals[l + kind - 1])))
            .chain((0..n).map(|k| (t.step(d, k), &totals[l + 2 + k])))
        {
            dt[range].copy_from_slice(total);
        }
        // A masked text row is the [MASK] vector, in its row and (by its weight) in the mean.
        for step in 0..b * n {
            for r in (0..s).filter(|&r| self.masked(step * s + r)) {
                let w = self.rows.text[step * s + r];
                let (v, c) = (row(step, 1 + r), row(step, 0));
                dt[t.mask(d)].iter_mut().zip(v).zip(c).for_each(|((a, &v), &c)| *a += v + w * c);
            }
        }
        dt
    }
}

impl CustomOp3 for Assemble {
    fn name(&self) -> &'static str {
        "stepwise-seq-assemble"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        let name = self.name();
        let [b, n, s, p, d] = dims(name, l1, l2, l3, &self.layout, &self.rows)?;
        let (text, image, tables) = (f32_rows(s1, l1, name)?.0, f32_rows(s2, l2, name)?.0, f32_rows(s3, l3, name)?.0);
        let (t, l) = (&self.layout, 1 + s + p);
        let out = par_vec(b * n * l * d, l * d, |step, out| {
            let k = step % n;
            let (step_emb, mask_vec) = (&tables[t.step(d, k)], &tables[t.mask(d)]);
            // Each row: its content, then + ((position + token type) + step index), as the composite summed it.
            let mut put = |j: usize, kind: usize, content: &[f32]| {
                let (pos, typ) = (&tables[t.position(d, j)], &tables[t.kind(d, kind)]);
                for (((o, &x), (&pos, &typ)), &st) in
                    out[j * d..(j + 1) * d].iter_mut().zip(content).zip(pos.iter().zip(typ)).zip(step_emb)
                {
                    *o = x + ((pos + typ) + st);
                }
            };
            let text_row = |r: usize| -> &[f32] {
                if self.masked(step * s + r) { mask_vec } else { &text[(step * s + r) * d..(step * s + r + 1) * d] }
            };
            let image_row = |r: usize| &image[(step * p + r) * d..(step * p + r + 1) * d];
            // [CLS] = cls + mean of the text rows + mean of the image rows (each stream's mean summed on its own).
            let mut cls = tables[t.cls(d)].to_vec();
            add_weighted_mean(&mut cls, &self.rows.text[step * s..(step + 1) * s], text_row);
            add_weighted_mean(&mut cls, &self.rows.image[step * p..(step + 1) * p], image_row);
            put(0, 0, &cls);
            for r in 0..s {
                put(1 + r, 1, text_row(r));
            }
            for r in 0..p {
                put(1 + s + r, 2, image_row(r));
            }
        });
        Ok((CpuStorage::F32(out), Shape::from((b, n * l, d))))
    }

    fn bwd(
        &self,
        text: &Tensor,
        image: &Tensor,
        tables: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let name = self.name();
        let [b, n, s, p, d] = dims(name, text.layout(), image.layout(), tables.layout(), &self.layout, &self.rows)?;
        let (t, l) = (&self.layout, 1 + s + p);
        let grad = grad.contiguous()?;
        with_data(&grad, name, |g| {
            // Rows: their own gradient plus their weight times the [CLS] row's (the mean); masked text rows none.
            let stream_grad = |rows: usize, offset: usize, weights: &[f32], masked: &[bool]| {
                par_vec(b * n * rows * d, rows * d, |step, out| {
                    let gs = &g[step * l * d..(step + 1) * l * d];
                    for r in 0..rows {
                        if masked.get(step * rows + r).copied().unwrap_or(false) {
                            continue;
                        }
                        let w = weights[step * rows + r];
                        let (o, gr) = (&mut out[r * d..(r + 1) * d], &gs[(offset + r) * d..(offset + r + 1) * d]);
                        o.iter_mut().zip(gr).zip(&gs[..d]).for_each(|((o, &gr), &gc)| *o = gr + w * gc);
                    }
                })
            };
            let dtext = text
                .track_op()
                .then(|| {
                    Tensor::from_vec(
                        stream_grad(s, 1, &self.rows.text, &self.rows.text_masked),
                        (b, n, s, d),
                        text.device(),
                    )
                })
                .transpose()?;
            let dimage = image
                .track_op()
                .then(|| Tensor::from_vec(stream_grad(p, 1 + s, &self.rows.image, &[]), (b, n, p, d), image.device()))
                .transpose()?;
            let dtables = tables
                .track_op()
                .then(|| Tensor::from_vec(self.tables_grad(g, [b, n, s, p, d]), t.len(d), tables.device()))
                .transpose()?;
            Ok((dtext, dimage, dtables))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};
    use rand::Rng;

    /// The op against the same assembly from candle ops (as the encoder built it before), forward and the
    /// gradients of both streams and of every table, with padded rows, a padded step and MLM-masked rows.
    #[test]
    fn assembly_matches_the_composite_forward_and_backward() {
        let (b, n, s, p, d) = (2, 3, 4, 5, 8);
        let layout = Tables { positions: 12, steps: 4 };
        let mut rng = stepwise_core::rng::rng_for(5, "assemble");
        let mut random = |shape: &[usize]| {
            let count: usize = shape.iter().product();
            let v: Vec<f32> = (0..count).map(|_| rng.random_range(-1.0..1.0)).collect();
            Var::from_tensor(&Tensor::from_vec(v, shape, &Device::Cpu).unwrap()).unwrap()
        };
        let (text, image, tables) = (random(&[b, n, s, d]), random(&[b, n, p, d]), random(&[layout.len(d)]));
        let loss_w = random(&[b, n, 1 + s + p, d]).as_tensor().clone();
        // Row masks: the second sequence's last step is padding; some rows are padding; three text rows masked.
        let mut tmask = vec![1f32; b * n * s];
        let mut imask = vec![1f32; b * n * p];
        tmask[3] = 0.0;
        imask[7] = 0.0;
        let pad_step = n + 2;
        tmask[pad_step * s..(pad_step + 1) * s].iter_mut().for_each(|v| *v = 0.0);
        imask[pad_step * p..(pad_step + 1) * p].iter_mut().for_each(|v| *v = 0.0);
        let mut masked = vec![false; b * n * s];
        for r in [1, 6, 13] {
            masked[r] = true;
        }
        let (mut wt, mut wi) = (tmask.clone(), imask.clone());
        for step in 0..b * n {
            let count: f32 = tmask[step * s..(step + 1) * s].iter().chain(&imask[step * p..(step + 1) * p]).sum();
            wt[step * s..(step + 1) * s].iter_mut().for_each(|w| *w /= count.max(1.0));
            wi[step * p..(step + 1) * p].iter_mut().for_each(|w| *w /= count.max(1.0));
        }
        let run = |fused: bool| {
            let (tx, im, tb) = (text.as_tensor(), image.as_tensor(), tables.as_tensor());
            let y = if fused {
                let rows = RowWeights { text: wt.clone(), image: wi.clone(), text_masked: masked.clone() };
                assemble(tx, im, tb, layout, rows).unwrap().reshape((b, n, 1 + s + p, d)).unwrap()
            } else {
                let dev = &Device::Cpu;
                let part = |r: std::ops::Range<usize>| tb.narrow(0, r.start, r.len()).unwrap();
                let tm = Tensor::from_vec(
                    masked.iter().map(|&m| if m { 1f32 } else { 0.0 }).collect::<Vec<_>>(),
                    (b, n, s, 1),
                    dev,
                )
                .unwrap();
                let mv = part(layout.mask(d)).reshape((1, 1, 1, d)).unwrap();
                let tx = (tx.broadcast_mul(&tm.affine(-1.0, 1.0).unwrap()).unwrap() + tm.broadcast_mul(&mv).unwrap())
                    .unwrap();
                let mean = |w: &[f32], rows: &Tensor, r: usize| {
                    let w = Tensor::from_vec(w.to_vec(), (b * n, 1, r), dev).unwrap();
                    w.matmul(&rows.reshape((b * n, r, d)).unwrap()).unwrap().reshape((b, n, 1, d)).unwrap()
                };
                let cls = part(layout.cls(d)).reshape((1, 1, 1, d)).unwrap().broadcast_as((b, n, 1, d)).unwrap();
                let cls = ((cls + mean(&wt, &tx, s)).unwrap() + mean(&wi, im, p)).unwrap();
                let x = Tensor::cat(&[&cls, &tx, im], 2).unwrap();
                let l = 1 + s + p;
                let pos = part(layout.position(d, 0).start..layout.position(d, l).start).reshape((l, d)).unwrap();
                let kinds: Vec<u32> = (0..l)
                    .map(|j| {
                        if j == 0 {
                            0
                        } else if j <= s {
                            1
                        } else {
                            2
                        }
                    })
                    .collect();
                let types = part(layout.kind(d, 0).start..layout.kind(d, 3).start).reshape((3, d)).unwrap();
                let emb = (pos + types.index_select(&Tensor::new(kinds, dev).unwrap(), 0).unwrap()).unwrap();
                let steps = part(layout.step(d, 0).start..layout.step(d, n).start).reshape((1, n, 1, d)).unwrap();
                let emb = emb.reshape((1, 1, l, d)).unwrap().broadcast_add(&steps).unwrap();
                x.broadcast_add(&emb).unwrap()
            };
            let grads = (&y * &loss_w).unwrap().sum_all().unwrap().backward().unwrap();
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let g = |v: &Var| flat(grads.get(v.as_tensor()).expect("a gradient"));
            vec![flat(&y), g(&text), g(&image), g(&tables)]
        };
        let (fused, composite) = (run(true), run(false));
        for (what, (a, b)) in ["forward", "text", "image", "tables"].iter().zip(fused.iter().zip(&composite)) {
            assert!(b.iter().any(|v| v.abs() > 1e-3), "{what}: the reference is all zeros");
            for (i, (u, v)) in a.iter().zip(b).enumerate() {
                assert!((u - v).abs() <= 1e-5 * (1.0 + v.abs()), "{what}[{i}]: fused {u} vs composite {v}");
            }
        }
        // Masked text rows get no gradient; the [MASK] vector does.
        let text_grad = &fused[1];
        assert!(text_grad[6 * d..7 * d].iter().all(|&v| v == 0.0));
        assert!(fused[3][layout.mask(d)].iter().any(|&v| v != 0.0));
    }

    /// The tables' gradient, summed per table row by parallel tasks, against the serial pass over the rows it
    /// replaced (every table row's sum in (step, row) order): the same bits on 1 and 4 threads, with MLM-masked
    /// rows, several steps, and a stream without rows.
    #[test]
    fn tables_gradient_is_the_serial_pass_bit_for_bit() {
        use rand::Rng;
        for (b, n, s, p, d) in [(3, 4, 5, 6, 8), (2, 3, 0, 4, 8), (1, 2, 3, 0, 4)] {
            let layout = Tables { positions: 16, steps: 5 };
            let mut rng = stepwise_core::rng::rng_for(7, "tables-grad");
            let l = 1 + s + p;
            let g: Vec<f32> = (0..b * n * l * d).map(|_| rng.random_range(-1.0..1.0)).collect();
            let text: Vec<f32> = (0..b * n * s).map(|_| rng.random_range(0.0..1.0)).collect();
            let text_masked: Vec<bool> = (0..b * n * s).map(|i| i % 3 == 1).collect();
            let op = Assemble {
                layout,
                rows: RowWeights { text: text.clone(), image: vec![0.5; b * n * p], text_masked: text_masked.clone() },
            };
            // The serial pass (as the op summed before).
            let t = &layout;
            let mut want = vec![0f32; t.len(d)];
            let add = |dt: &mut [f32], range: std::ops::Range<usize>, row: &[f32]| {
                dt[range].iter_mut().zip(row).for_each(|(a, &v)| *a += v)
            };
            for step in 0..b * n {
                for j in 0..l {
                    let row = &g[(step * l + j) * d..(step * l + j + 1) * d];
                    let kind = if j == 0 {
                        0
                    } else if j <= s {
                        1
                    } else {
                        2
                    };
                    if j == 0 {
                        add(&mut want, t.cls(d), row);
                    }
                    add(&mut want, t.position(d, j), row);
                    add(&mut want, t.kind(d, kind), row);
                    add(&mut want, t.step(d, step % n), row);
                    if kind == 1 && text_masked[step * s + j - 1] {
                        let w = text[step * s + j - 1];
                        let cls_g = &g[step * l * d..(step * l + 1) * d];
                        want[t.mask(d)].iter_mut().zip(row).zip(cls_g).for_each(|((a, &v), &c)| *a += v + w * c);
                    }
                }
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(want.iter().any(|&v| v != 0.0));
            for threads in [1, 4] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let got = pool.install(|| op.tables_grad(&g, [b, n, s, p, d]));
                assert_eq!(bits(&got), bits(&want), "{b}x{n} steps of {s} + {p} rows, {threads} threads");
            }
        }
    }
}
