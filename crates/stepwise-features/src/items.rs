//! Item ids and the items of a corpus.
//!
//! The id convention every stepwise crate uses to find a feature row:
//! - `text:{procedure_id}#{step_index}`: the step's full text ([`stepwise_core::Step::full_text`]: title, newline,
//!   text); steps with neither title nor text have no `text:` item;
//! - `title:{procedure_id}#{step_index}`: the step title (only when the step has a non-empty title);
//! - `image:{relative image path}`: a step or gallery image, the path as written in the procedure JSONL; an image
//!   used by several steps or procedures is one item;
//! - `str:{blake3 hex of the text}`: an arbitrary string (answer choices, `stepwise embed --strings FILE`).
//!
//! Step indices are 0-based. Text encoders embed `text:`, `title:` and `str:` items, image encoders `image:` items.

use std::collections::HashSet;

use stepwise_core::{Corpus, Error};

use crate::encoder::Modality;

/// What an item's vector is computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemContent {
    Text(String),
    /// An image path relative to the image source's root.
    Image(String),
}

impl ItemContent {
    pub fn modality(&self) -> Modality {
        match self {
            ItemContent::Text(_) => Modality::Text,
            ItemContent::Image(_) => Modality::Image,
        }
    }
}

/// One item to embed: its id and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemSpec {
    pub id: String,
    pub content: ItemContent,
}

pub fn text_id(procedure_id: &str, step: usize) -> String {
    format!("text:{procedure_id}#{step}")
}

pub fn title_id(procedure_id: &str, step: usize) -> String {
    format!("title:{procedure_id}#{step}")
}

pub fn image_id(rel_path: &str) -> String {
    format!("image:{rel_path}")
}

pub fn str_id(text: &str) -> String {
    format!("str:{}", stepwise_core::hash::hash_str(text))
}

/// A parsed item id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemRef<'a> {
    Text { procedure: &'a str, step: usize },
    Title { procedure: &'a str, step: usize },
    Image(&'a str),
    Str(&'a str),
}

impl<'a> ItemRef<'a> {
    /// Parse an id of the convention above; `None` for anything else.
    pub fn parse(id: &'a str) -> Option<ItemRef<'a>> {
        let step_of = |rest: &'a str| -> Option<(&'a str, usize)> {
            let (p, s) = rest.rsplit_once('#')?;
            Some((p, s.parse().ok()?))
        };
        if let Some(rest) = id.strip_prefix("text:") {
            let (procedure, step) = step_of(rest)?;
            Some(ItemRef::Text { procedure, step })
        } else if let Some(rest) = id.strip_prefix("title:") {
            let (procedure, step) = step_of(rest)?;
            Some(ItemRef::Title { procedure, step })
        } else if let Some(rest) = id.strip_prefix("image:") {
            Some(ItemRef::Image(rest))
        } else {
            id.strip_prefix("str:").map(ItemRef::Str)
        }
    }

    /// The procedure of a step item.
    pub fn procedure(&self) -> Option<&'a str> {
        match self {
            ItemRef::Text { procedure, .. } | ItemRef::Title { procedure, .. } => Some(procedure),
            _ => None,
        }
    }
}

/// The items of `corpus` for an encoder of `modality`, in corpus order (procedures, then steps; an image at its
/// first appearance; a procedure's gallery after its steps).
pub fn corpus_items(corpus: &Corpus, modality: Modality) -> Vec<ItemSpec> {
    let mut out = Vec::new();
    let mut seen_images: HashSet<&str> = HashSet::new();
    for p in &corpus.procedures {
        for (i, step) in p.steps.iter().enumerate() {
            match modality {
                Modality::Text => {
                    let full = step.full_text();
                    if !full.trim().is_empty() {
                        out.push(ItemSpec { id: text_id(&p.id, i), content: ItemContent::Text(full) });
                    }
                    if let Some(t) = step.title.as_deref().filter(|t| !t.trim().is_empty()) {
                        out.push(ItemSpec { id: title_id(&p.id, i), content: ItemContent::Text(t.to_string()) });
                    }
                }
                Modality::Image => {
                    for img in &step.images {
                        if seen_images.insert(img) {
                            out.push(ItemSpec { id: image_id(img), content: ItemContent::Image(img.clone()) });
                        }
                    }
                }
            }
        }
        if modality == Modality::Image {
            for img in p.gallery.iter().flatten() {
                if seen_images.insert(img) {
                    out.push(ItemSpec { id: image_id(img), content: ItemContent::Image(img.clone()) });
                }
            }
        }
    }
    out
}

/// `str:` items for arbitrary strings, deduplicated, in first-appearance order.
pub fn string_items<S: AsRef<str>>(texts: &[S]) -> Vec<ItemSpec> {
    let mut seen = HashSet::new();
    texts
        .iter()
        .filter(|t| seen.insert(t.as_ref().to_string()))
        .map(|t| ItemSpec { id: str_id(t.as_ref()), content: ItemContent::Text(t.as_ref().to_string()) })
        .collect()
}

/// Check ids are storable (non-empty, one line, unique).
pub fn check_ids(items: &[ItemSpec]) -> stepwise_core::Result<()> {
    let mut seen = HashSet::with_capacity(items.len());
    for it in items {
        if it.id.is_empty() || it.id.contains('\n') || it.id.contains('\r') {
            return Err(Error::bad_input(format!("item id {:?} is empty or spans lines; ids must be one line", it.id)));
        }
        if !seen.insert(it.id.as_str()) {
            return Err(Error::bad_input(format!("item id {:?} appears twice", it.id)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::{Procedure, Step};

    fn step(title: Option<&str>, text: Option<&str>, images: &[&str]) -> Step {
        Step {
            title: title.map(str::to_string),
            text: text.map(str::to_string),
            images: images.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn ids_parse_back() {
        assert_eq!(ItemRef::parse(&text_id("a/b#c", 3)), Some(ItemRef::Text { procedure: "a/b#c", step: 3 }));
        assert_eq!(ItemRef::parse(&title_id("x", 0)), Some(ItemRef::Title { procedure: "x", step: 0 }));
        assert_eq!(ItemRef::parse("image:images/a.jpg"), Some(ItemRef::Image("images/a.jpg")));
        assert_eq!(ItemRef::parse("text:x#y"), None);
        assert_eq!(ItemRef::parse("other"), None);
        assert!(str_id("hello").starts_with("str:") && str_id("hello").len() == 4 + 64);
    }

    #[test]
    fn corpus_items_follow_the_convention() {
        let p = Procedure {
            id: "set/p1".into(),
            steps: vec![
                step(Some("Boil"), Some("Boil water."), &["i/a.jpg"]),
                step(None, None, &["i/a.jpg", "i/b.jpg"]),
                step(None, Some("Serve."), &[]),
            ],
            gallery: Some(vec!["i/g.jpg".into(), "i/b.jpg".into()]),
            ..Default::default()
        };
        let corpus = Corpus { dir: ".".into(), image_root: ".".into(), manifest: None, procedures: vec![p] };
        let text = corpus_items(&corpus, Modality::Text);
        let ids: Vec<&str> = text.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["text:set/p1#0", "title:set/p1#0", "text:set/p1#2"]);
        assert_eq!(text[0].content, ItemContent::Text("Boil\nBoil water.".into()));
        let img = corpus_items(&corpus, Modality::Image);
        let ids: Vec<&str> = img.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["image:i/a.jpg", "image:i/b.jpg", "image:i/g.jpg"]);
        check_ids(&text).unwrap();
    }

    #[test]
    fn bad_ids_are_rejected() {
        let it = |id: &str| ItemSpec { id: id.into(), content: ItemContent::Text("x".into()) };
        assert!(check_ids(&[it("a\nb")]).is_err());
        assert!(check_ids(&[it("a"), it("a")]).is_err());
        assert_eq!(string_items(&["x", "y", "x"]).len(), 2);
    }
}
