//! The random baseline: a uniform permutation per instance from `rng_for(seed, "random/<instance id>")`.

use rand::Rng;
use stepwise_core::rng::rng_for;
use stepwise_core::sequencing::SequencingInstance;

/// A uniformly random order of the instance's items (Fisher–Yates), reproducible from the seed and the id.
pub fn random_order(inst: &SequencingInstance, seed: u64) -> Vec<usize> {
    let mut rng = rng_for(seed, &format!("random/{}", inst.id));
    let mut order: Vec<usize> = (0..inst.items.len()).collect();
    for j in (1..order.len()).rev() {
        let r = rng.random_range(0..=j);
        order.swap(j, r);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::sequencing::SequencingItem;

    #[test]
    fn orders_are_reproducible_permutations_and_vary_by_id() {
        let mk = |id: &str| SequencingInstance {
            id: id.into(),
            procedure: "p".into(),
            split: "test".into(),
            modality: "text".into(),
            items: (0..6).map(|s| SequencingItem { step: s, title: None, text: None, images: vec![] }).collect(),
            references: vec![(0..6).collect()],
            constraints: None,
        };
        let a = random_order(&mk("a"), 1);
        assert_eq!(a, random_order(&mk("a"), 1));
        assert!(stepwise_core::sequencing::is_permutation(&a, 6));
        let distinct: std::collections::BTreeSet<Vec<usize>> =
            (0..20).map(|i| random_order(&mk(&format!("i{i}")), 1)).collect();
        assert!(distinct.len() > 10);
    }
}
