//! Linear models over hashed features, trained by the averaged perceptron: the R2VQ span ranker and tagger.
//! Features are hashed into [`DIM`] slots; a saved model keeps its nonzero weights as `(slot, weight)` pairs.

use std::path::Path;

use stepwise_core::{Error, Location, Result};

/// Slots of the hashed feature space.
pub const DIM: usize = 1 << 20;

/// FNV-1a of a word's bytes.
pub fn word_hash(w: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in w.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The slot of a feature given as parts (a namespace, then values), mixed by splitmix64.
pub fn slot(parts: &[u64]) -> u32 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for p in parts {
        x ^= p.wrapping_add(0x9e37_79b9_7f4a_7c15).wrapping_add(x << 6).wrapping_add(x >> 2);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
    }
    (x % DIM as u64) as u32
}

/// The score of a feature list.
pub fn score(w: &[f32], features: &[u32]) -> f32 {
    features.iter().map(|&k| w[k as usize]).sum()
}

/// Averaged perceptron weights: `w` the current ones, `u` the updates weighted by when they happened.
pub struct Perceptron {
    pub w: Vec<f32>,
    u: Vec<f32>,
    step: f32,
}

impl Default for Perceptron {
    fn default() -> Self {
        Perceptron { w: vec![0.0; DIM], u: vec![0.0; DIM], step: 1.0 }
    }
}

impl Perceptron {
    /// Add `delta` to the weights of `features`.
    pub fn update(&mut self, features: &[u32], delta: f32) {
        for &k in features {
            self.w[k as usize] += delta;
            self.u[k as usize] += delta * self.step;
        }
    }

    /// One example seen.
    pub fn tick(&mut self) {
        self.step += 1.0;
    }

    /// The averaged weights.
    pub fn averaged(&self) -> Vec<f32> {
        self.w.iter().zip(&self.u).map(|(w, u)| w - u / self.step).collect()
    }
}

/// The nonzero weights as `(slot, weight)`, in slot order.
pub fn sparse(dense: &[f32]) -> Vec<(u32, f32)> {
    dense.iter().enumerate().filter(|(_, w)| **w != 0.0).map(|(k, w)| (k as u32, *w)).collect()
}

/// Dense weights from a saved model's pairs; a slot outside the space or a weight that is not finite is an error
/// naming `path` and the pair.
pub fn dense(path: &Path, weights: &[(u32, f32)]) -> Result<Vec<f32>> {
    let mut dense = vec![0f32; DIM];
    for (k, (index, w)) in weights.iter().enumerate() {
        match dense.get_mut(*index as usize) {
            Some(slot) if w.is_finite() => *slot = *w,
            _ => {
                return Err(Error::field(
                    path,
                    Location::Record(format!("weights[{k}]")),
                    "weights",
                    format!("slot {index} outside the model's {DIM}, or a weight that is not finite"),
                ));
            }
        }
    }
    Ok(dense)
}

/// Read a saved model's JSON and check its `format`; `what` names the model and the command that makes it.
pub fn read_model<T: serde::de::DeserializeOwned>(
    path: &Path,
    format: &str,
    format_of: impl Fn(&T) -> &str,
    what: &str,
) -> Result<T> {
    let value = stepwise_core::json::read_json(path)?;
    let m: T = serde_json::from_value(value)
        .map_err(|e| Error::field(path, Location::File, "model", format!("not {what}: {e}")))?;
    if format_of(&m) != format {
        return Err(Error::field(
            path,
            Location::File,
            "format",
            format!("{:?} is not {format:?} ({what})", format_of(&m)),
        ));
    }
    Ok(m)
}

/// Write a model as JSON (atomically).
pub fn write_model<T: serde::Serialize>(path: &Path, model: &T) -> Result<()> {
    let text = serde_json::to_string(model).map_err(|e| Error::runtime(format!("serialising the model: {e}")))?;
    stepwise_core::output::write_string_atomic(path, &text)
}
