//! A matrix of item vectors with their ids: the in-memory view of a feature store (or of any subset).

use std::collections::HashMap;

/// Row-major `f32` vectors with one id per row. Rows are addressed by index or id.
#[derive(Debug, Clone, Default)]
pub struct Vectors {
    pub dim: usize,
    pub ids: Vec<String>,
    pub data: Vec<f32>,
    index: HashMap<String, usize>,
}

impl Vectors {
    /// Build from ids and row-major data (`ids.len() * dim` floats). Duplicate ids keep the first row's index.
    pub fn new(dim: usize, ids: Vec<String>, data: Vec<f32>) -> Self {
        assert_eq!(ids.len() * dim, data.len(), "Vectors::new: ids and data disagree");
        let mut index = HashMap::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            index.entry(id.clone()).or_insert(i);
        }
        Vectors { dim, ids, data, index }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    pub fn get(&self, id: &str) -> Option<&[f32]> {
        self.index_of(id).map(|i| self.row(i))
    }

    /// A new matrix with the rows of `indices`, in that order.
    pub fn select(&self, indices: &[usize]) -> Vectors {
        let mut data = Vec::with_capacity(indices.len() * self.dim);
        let mut ids = Vec::with_capacity(indices.len());
        for &i in indices {
            data.extend_from_slice(self.row(i));
            ids.push(self.ids[i].clone());
        }
        Vectors::new(self.dim, ids, data)
    }
}
