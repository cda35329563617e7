//! Generated R2VQ questions (`stepwise generate --task r2vq`): questions per family and split, from the manifest.

use stepwise_core::r2vq::family_name;
use stepwise_core::{Manifest, Result};

use super::{command_of, count};
use crate::doc::{Section, Table};
use crate::scan::Artefact;

pub struct R2vqQuestionsInfo {
    pub rel: String,
    pub command: Option<String>,
    pub recipes: u64,
    pub questions: u64,
    /// (family, questions), in family order.
    pub families: Vec<(u32, u64)>,
    pub duplicates: u64,
    pub balanced_away: u64,
}

pub fn read(a: &Artefact) -> Result<R2vqQuestionsInfo> {
    let m = Manifest::read(&a.path)?;
    let c = |k: &str| m.counts.get(k).copied().unwrap_or(0);
    let families = m
        .counts
        .iter()
        .filter_map(|(k, &n)| k.strip_prefix("family_").and_then(|f| f.parse().ok()).map(|f: u32| (f, n)))
        .collect();
    Ok(R2vqQuestionsInfo {
        rel: a.rel.clone(),
        command: command_of(&a.path),
        recipes: c("recipes"),
        questions: c("questions"),
        families,
        duplicates: c("duplicates"),
        balanced_away: c("balanced_away"),
    })
}

pub fn section(sets: &[R2vqQuestionsInfo]) -> Option<Section> {
    if sets.is_empty() {
        return None;
    }
    let mut s = Section::new("r2vq", "R2VQ questions");
    s.para(
        "Questions generated from annotation in the R2VQ release's templates, each kept only when the family's \
         program parses it back and answers it uniquely (from the event it was made from, when made from one); \
         distractors (family 18) are questions of other recipes with no answer here.",
    );
    for q in sets {
        s.para(format!(
            "`{}`: {} questions from {} recipes ({} repeated texts dropped, {} dropped to balance answers){}.",
            q.rel,
            count(q.questions),
            count(q.recipes),
            count(q.duplicates),
            count(q.balanced_away),
            q.command.as_ref().map_or(String::new(), |c| format!("; made by `{c}`"))
        ));
        let mut t = Table::new(&["family", ">questions"]);
        for (f, n) in &q.families {
            t.row(vec![format!("{f} {}", family_name(*f)), count(*n)]);
        }
        s.table(t);
    }
    Some(s)
}
