//! Which items a person gets next: pure rules over the study, the judgements already held per item and the
//! person's history (tested without a server).
//!
//! A HIT holds up to `hit_size` items of one modality, in queue order: the modality with most judgements still
//! wanted in the whole study (ties in the fixed modality order) among those with an item this person may take.
//! A person may take an item when it still wants judgements, they have not had it before, and they have not
//! seen its instance in another modality within the last `modality_gap` HITs (`None`: ever). One HIT never
//! holds an instance twice. The server applies these rules through the database ([`crate::queue`]).

use std::collections::{BTreeMap, HashMap};

use crate::study::{Modality, Study};

/// An item a person has had: its instance, modality and the number of the HIT it was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub instance: usize,
    pub modality: Modality,
    pub hit_seq: i64,
}

/// Task ids (index + 1) of the next study HIT for a person whose next HIT number is `next_seq`; empty when
/// nothing is left for them. `load`: task id → judgements held (submitted or recently opened).
pub fn next_hit(study: &Study, load: &BTreeMap<i64, usize>, seen: &[Seen], next_seq: i64) -> Vec<i64> {
    let rules = &study.rules;
    // instance → (modality, HIT number) of every time this person had it
    let mut history: HashMap<usize, Vec<(Modality, i64)>> = HashMap::with_capacity(seen.len());
    for s in seen {
        history.entry(s.instance).or_default().push((s.modality, s.hit_seq));
    }
    let allowed = |instance: usize, modality: Modality| {
        history.get(&instance).is_none_or(|had| {
            had.iter().all(|&(m, seq)| {
                m != modality
                    && match rules.modality_gap {
                        None => false,
                        Some(gap) => next_seq - seq > i64::from(gap),
                    }
            })
        })
    };
    let remaining = |id: i64| rules.judgements.saturating_sub(load.get(&id).copied().unwrap_or(0));
    let mut wanted: BTreeMap<Modality, usize> = BTreeMap::new();
    for (i, t) in study.tasks.iter().enumerate() {
        if !t.qualification {
            *wanted.entry(t.modality).or_default() += remaining(i as i64 + 1);
        }
    }
    let wanted: Vec<(Modality, usize)> = wanted.into_iter().filter(|&(_, r)| r > 0).collect();
    for modality in modality_order(&wanted) {
        let mut hit = Vec::with_capacity(rules.hit_size);
        let mut instances = Vec::with_capacity(rules.hit_size);
        for (i, t) in study.tasks.iter().enumerate() {
            if hit.len() == rules.hit_size {
                break;
            }
            let id = i as i64 + 1;
            if t.qualification || t.modality != modality || remaining(id) == 0 || !allowed(t.instance, t.modality) {
                continue;
            }
            if !instances.contains(&t.instance) {
                instances.push(t.instance);
                hit.push(id);
            }
        }
        if !hit.is_empty() {
            return hit;
        }
    }
    Vec::new()
}

/// Modalities by judgements still wanted, most first; ties in the fixed modality order.
pub fn modality_order(wanted: &[(Modality, usize)]) -> Vec<Modality> {
    let mut order = wanted.to_vec();
    order.sort_by(|(ma, ra), (mb, rb)| rb.cmp(ra).then(ma.cmp(mb)));
    order.into_iter().map(|(m, _)| m).collect()
}

/// Task ids of the qualification round (every qualification item, in queue order).
pub fn qualification_hit(study: &Study) -> Vec<i64> {
    study.tasks.iter().enumerate().filter(|(_, t)| t.qualification).map(|(i, _)| i as i64 + 1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::{StudyRules, TaskSpec};

    fn study(instances: usize, modalities: &[Modality], rules: StudyRules) -> Study {
        let tasks = (0..instances)
            .flat_map(|instance| {
                modalities.iter().map(move |&modality| TaskSpec { instance, modality, qualification: false })
            })
            .collect();
        Study {
            version: 1,
            rules: StudyRules { modalities: modalities.to_vec(), ..rules },
            image_root: None,
            admin_password_hash: String::new(),
            tasks,
            instances: Vec::new(),
        }
    }

    fn seen_of(study: &Study, hit: &[i64], seq: i64) -> Vec<Seen> {
        hit.iter()
            .map(|&id| {
                let t = study.tasks[id as usize - 1];
                Seen { instance: t.instance, modality: t.modality, hit_seq: seq }
            })
            .collect()
    }

    #[test]
    fn hits_have_one_modality_and_never_repeat_an_instance_across_modalities() {
        let s = study(12, &Modality::ALL, StudyRules { hit_size: 5, judgements: 1, ..StudyRules::default() });
        let mut seen = Vec::new();
        let mut load = BTreeMap::new();
        let mut got = Vec::new();
        for seq in 1..20 {
            let hit = next_hit(&s, &load, &seen, seq);
            if hit.is_empty() {
                break;
            }
            assert!(hit.len() <= 5);
            let mods: Vec<Modality> = hit.iter().map(|&id| s.tasks[id as usize - 1].modality).collect();
            assert!(mods.iter().all(|m| *m == mods[0]), "one modality per HIT: {mods:?}");
            for &id in &hit {
                *load.entry(id).or_insert(0) += 1;
            }
            seen.extend(seen_of(&s, &hit, seq));
            got.extend(hit);
        }
        // 12 instances, never twice for one person: exactly 12 items, each instance once.
        assert_eq!(got.len(), 12);
        let mut instances: Vec<usize> = seen.iter().map(|x| x.instance).collect();
        instances.sort();
        instances.dedup();
        assert_eq!(instances.len(), 12);
    }

    #[test]
    fn the_gap_lets_an_instance_back_after_enough_hits() {
        let s = study(
            1,
            &[Modality::Text, Modality::Image],
            StudyRules { hit_size: 1, judgements: 1, modality_gap: Some(2), ..StudyRules::default() },
        );
        let first = next_hit(&s, &BTreeMap::new(), &[], 1);
        assert_eq!(first.len(), 1);
        let seen = seen_of(&s, &first, 1);
        let load: BTreeMap<i64, usize> = [(first[0], 1)].into();
        assert!(next_hit(&s, &load, &seen, 2).is_empty());
        assert!(next_hit(&s, &load, &seen, 3).is_empty());
        assert_eq!(next_hit(&s, &load, &seen, 4).len(), 1, "HIT 4 is more than 2 HITs after HIT 1");
    }

    #[test]
    fn full_items_are_skipped_and_the_most_wanted_modality_goes_first() {
        let s = study(
            3,
            &[Modality::Text, Modality::Image],
            StudyRules { hit_size: 5, judgements: 2, ..StudyRules::default() },
        );
        // Text items (ids 1, 3, 5) all half done, image items untouched: the next HIT is image.
        let load: BTreeMap<i64, usize> = [(1, 1), (3, 1), (5, 1)].into();
        let hit = next_hit(&s, &load, &[], 1);
        assert_eq!(hit, vec![2, 4, 6]);
        let full: BTreeMap<i64, usize> = (1..=6).map(|id| (id, 2)).collect();
        assert!(next_hit(&s, &full, &[], 1).is_empty());
    }
}
