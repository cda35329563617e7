//! L2-regularised logistic regression on a few dense features, fitted exactly by Newton's method (IRLS) on
//! standardised features — small, deterministic and dependency-free, for probes and calibration.
//!
//! Objective (the same as scikit-learn's `LogisticRegression(C = 1/l2)` with its default L2 penalty, applied to
//! standardised features, intercept not penalised): minimise Σ_i log(1 + exp(−y_i·f(x_i))) + (l2/2)·‖w‖²,
//! f(x) = w·z(x) + b with z the standardised features and y ∈ {−1, +1}.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LogRegConfig {
    /// L2 penalty on the weights (scikit-learn's 1/C).
    pub l2: f64,
    pub max_iter: usize,
    /// Stop when the Newton step's largest component is below this.
    pub tol: f64,
}

impl Default for LogRegConfig {
    fn default() -> Self {
        LogRegConfig { l2: 1.0, max_iter: 100, tol: 1e-10 }
    }
}

/// A fitted model (weights on standardised features).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogisticRegression {
    pub weights: Vec<f64>,
    pub bias: f64,
    /// Feature means and standard deviations used to standardise (std 1 for constant features).
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
    /// Newton iterations used.
    pub iterations: usize,
}

impl LogisticRegression {
    /// Fit on rows `x` (all the same length) with labels `y`. Errors on empty or ragged input.
    pub fn fit(x: &[Vec<f64>], y: &[bool], cfg: &LogRegConfig) -> Result<Self, String> {
        let n = x.len();
        if n == 0 || n != y.len() {
            return Err(format!("logistic regression needs as many labels as rows (rows {n}, labels {})", y.len()));
        }
        let d = x[0].len();
        if x.iter().any(|r| r.len() != d) {
            return Err("logistic regression rows have different lengths".into());
        }
        if x.iter().flatten().any(|v| !v.is_finite()) {
            return Err("logistic regression features must be finite".into());
        }
        let mean: Vec<f64> = (0..d).map(|j| x.iter().map(|r| r[j]).sum::<f64>() / n as f64).collect();
        let std: Vec<f64> = (0..d)
            .map(|j| {
                let v = x.iter().map(|r| (r[j] - mean[j]).powi(2)).sum::<f64>() / n as f64;
                if v > 1e-24 { v.sqrt() } else { 1.0 }
            })
            .collect();
        let z: Vec<Vec<f64>> =
            x.iter().map(|r| r.iter().enumerate().map(|(j, v)| (v - mean[j]) / std[j]).collect()).collect();
        // θ = (w_0..w_{d−1}, b).
        let p = d + 1;
        let mut theta = vec![0.0; p];
        let mut iterations = 0;
        for it in 0..cfg.max_iter {
            iterations = it + 1;
            let mut grad = vec![0.0; p];
            let mut hess = vec![vec![0.0; p]; p];
            for (zi, &yi) in z.iter().zip(y) {
                let f = dot(&theta[..d], zi) + theta[d];
                let prob = sigmoid(f);
                let r = prob - if yi { 1.0 } else { 0.0 };
                let w = (prob * (1.0 - prob)).max(1e-12);
                for a in 0..p {
                    let za = if a < d { zi[a] } else { 1.0 };
                    grad[a] += r * za;
                    for b in a..p {
                        let zb = if b < d { zi[b] } else { 1.0 };
                        hess[a][b] += w * za * zb;
                    }
                }
            }
            for a in 0..d {
                grad[a] += cfg.l2 * theta[a];
                hess[a][a] += cfg.l2;
            }
            for a in 0..p {
                for b in 0..a {
                    hess[a][b] = hess[b][a];
                }
            }
            let step = solve(hess, grad).ok_or("logistic regression: singular Hessian")?;
            for (t, s) in theta.iter_mut().zip(&step) {
                *t -= s;
            }
            if step.iter().fold(0.0f64, |m, s| m.max(s.abs())) < cfg.tol {
                break;
            }
        }
        Ok(LogisticRegression { weights: theta[..d].to_vec(), bias: theta[d], mean, std, iterations })
    }

    /// The decision value w·z(x) + b (higher = more likely positive).
    pub fn decision(&self, x: &[f64]) -> f64 {
        let z: Vec<f64> = x.iter().enumerate().map(|(j, v)| (v - self.mean[j]) / self.std[j]).collect();
        dot(&self.weights, &z) + self.bias
    }

    pub fn probability(&self, x: &[f64]) -> f64 {
        sigmoid(self.decision(x))
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn sigmoid(f: f64) -> f64 {
    if f >= 0.0 { 1.0 / (1.0 + (-f).exp()) } else { f.exp() / (1.0 + f.exp()) }
}

/// Solve `a x = b` by Gaussian elimination with partial pivoting; `None` when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let piv = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            if f != 0.0 {
                for k in col..n {
                    a[row][k] -= f * a[col][k];
                }
                b[row] -= f * b[col];
            }
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_vanishes_at_the_fitted_optimum() {
        // Overlapping classes: a finite optimum exists.
        let x: Vec<Vec<f64>> = (0..40).map(|i| vec![(i % 10) as f64, ((i * 7) % 5) as f64]).collect();
        let y: Vec<bool> = (0..40).map(|i| (i % 10) + ((i * 3) % 4) > 6).collect();
        let cfg = LogRegConfig { l2: 0.5, ..Default::default() };
        let m = LogisticRegression::fit(&x, &y, &cfg).unwrap();
        // ∂/∂w_j = Σ (p − y) z_j + l2 w_j = 0 and ∂/∂b = Σ (p − y) = 0.
        let mut g = vec![0.0; 3];
        for (xi, &yi) in x.iter().zip(&y) {
            let r = m.probability(xi) - if yi { 1.0 } else { 0.0 };
            for j in 0..2 {
                g[j] += r * (xi[j] - m.mean[j]) / m.std[j];
            }
            g[2] += r;
        }
        for j in 0..2 {
            g[j] += 0.5 * m.weights[j];
        }
        assert!(g.iter().all(|v| v.abs() < 1e-8), "{g:?}");
        assert!(m.weights[0] > 0.0);
    }

    #[test]
    fn separable_data_stays_finite_with_a_penalty() {
        let x: Vec<Vec<f64>> = (0..20).map(|i| vec![i as f64]).collect();
        let y: Vec<bool> = (0..20).map(|i| i >= 10).collect();
        let m = LogisticRegression::fit(&x, &y, &LogRegConfig::default()).unwrap();
        assert!(m.weights[0].is_finite() && m.weights[0] > 0.0);
        assert!(m.probability(&[19.0]) > 0.9 && m.probability(&[0.0]) < 0.1);
    }

    #[test]
    fn constant_features_and_bad_input() {
        let x = vec![vec![1.0, 3.0], vec![1.0, 4.0], vec![1.0, 5.0]];
        let m = LogisticRegression::fit(&x, &[false, true, true], &LogRegConfig::default()).unwrap();
        assert_eq!(m.weights[0], 0.0);
        assert!(LogisticRegression::fit(&x, &[true], &LogRegConfig::default()).is_err());
        assert!(LogisticRegression::fit(&[vec![f64::NAN]], &[true], &LogRegConfig::default()).is_err());
    }
}
