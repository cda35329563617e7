//! Generated R2VQ questions (`stepwise generate --task r2vq`): questions per family and split, from the manifest;
//! and the tagger's per-label scores (`stepwise r2vq tag --scores`).

use stepwise_core::r2vq::family_name;
use stepwise_core::{Manifest, Result};

use super::{command_of, count};
use crate::doc::{Section, Table};
use crate::read::JsonFile;
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

/// One `r2vq tag --scores` file.
pub struct TaggingInfo {
    pub rel: String,
    pub input: String,
    pub model: String,
    pub recipes: u64,
    pub fitted_on: u64,
    /// (label, gold, predicted, correct, precision, recall, F1).
    pub labels: Vec<(String, u64, u64, u64, f64, f64, f64)>,
}

pub fn read_tagging(a: &Artefact) -> Result<TaggingInfo> {
    let f = JsonFile::read(&a.path)?;
    let r = f.root();
    let mut labels = Vec::new();
    for l in r.req("labels")?.items()? {
        labels.push((
            l.req_str("label")?.to_string(),
            l.req_u64("gold")?,
            l.req_u64("predicted")?,
            l.req_u64("correct")?,
            l.req_f64("precision")?,
            l.req_f64("recall")?,
            l.req_f64("f1")?,
        ));
    }
    Ok(TaggingInfo {
        rel: a.rel.clone(),
        input: r.req_str("input")?.to_string(),
        model: r.req_str("model")?.to_string(),
        recipes: r.req_u64("recipes")?,
        fitted_on: r.req_u64("recipes_fitted_on")?,
        labels,
    })
}

pub fn tagging_section(sets: &[TaggingInfo]) -> Option<Section> {
    if sets.is_empty() {
        return None;
    }
    let mut s = Section::new("r2vq-tagging", "R2VQ tagger");
    s.para(
        "The cooking-role tagger's layer against the recipes' own: per ENTITY kind the mentions, the participant \
         links, and per hidden role the (event, value) pairs; precision, recall and F1 over those items.",
    );
    for t in sets {
        let held = if t.fitted_on == 0 {
            "none of them in its training data".to_string()
        } else {
            format!("{} of them in its training data: not held-out scores", count(t.fitted_on))
        };
        s.para(format!("`{}`: `{}` tagged by `{}`, {} recipes, {held}.", t.rel, t.input, t.model, count(t.recipes)));
        let mut table = Table::new(&["label", ">gold", ">predicted", ">correct", ">precision %", ">recall %", ">F1 %"]);
        for (label, gold, predicted, correct, p, r, f1) in &t.labels {
            table.row(vec![
                label.clone(),
                count(*gold),
                count(*predicted),
                count(*correct),
                format!("{:.1}", 100.0 * p),
                format!("{:.1}", 100.0 * r),
                format!("{:.1}", 100.0 * f1),
            ]);
        }
        s.table(table);
    }
    Some(s)
}
