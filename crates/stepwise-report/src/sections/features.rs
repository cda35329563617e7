//! Feature stores (`stepwise embed`): encoder, dimension, items and failures from each store's `meta.json`.

use stepwise_core::Result;

use super::count;
use crate::doc::{Block, Section, Table};
use crate::read::JsonFile;
use crate::scan::Artefact;

pub struct FeatureInfo {
    pub rel: String,
    pub encoder: String,
    pub version: String,
    pub modality: String,
    pub dim: u64,
    pub items: u64,
    pub failures: u64,
    pub normalization: String,
    pub preprocessing: Option<String>,
}

pub fn read(a: &Artefact) -> Result<FeatureInfo> {
    let f = JsonFile::read(&a.path.join("meta.json"))?;
    let r = f.root();
    let e = r.req("encoder")?;
    Ok(FeatureInfo {
        rel: a.rel.clone(),
        encoder: e.req_str("name")?.to_string(),
        version: e.opt_str("version")?.unwrap_or("–").to_string(),
        modality: e.opt_str("modality")?.unwrap_or("–").to_string(),
        dim: e.req_u64("dim")?,
        items: r.req_u64("count")?,
        failures: r.opt_u64("failures")?.unwrap_or(0),
        normalization: e.opt_str("normalization")?.unwrap_or("–").to_string(),
        preprocessing: e.opt_str("preprocessing")?.map(str::to_string),
    })
}

pub fn section(stores: &[FeatureInfo]) -> Option<Section> {
    if stores.is_empty() {
        return None;
    }
    let mut s = Section::new("features", "Features");
    let mut t = Table::new(&["store", "encoder", "modality", ">dim", ">items", ">failures", "normalisation"]);
    for f in stores {
        t.row(vec![
            format!("`{}`", f.rel),
            format!("{} ({})", f.encoder, f.version),
            f.modality.clone(),
            f.dim.to_string(),
            count(f.items),
            count(f.failures),
            f.normalization.clone(),
        ]);
    }
    s.table(t);
    let pre: Vec<String> = stores
        .iter()
        .filter_map(|f| f.preprocessing.as_ref().map(|p| format!("`{}` ({}): {p}", f.rel, f.encoder)))
        .collect();
    if !pre.is_empty() {
        s.push(Block::Details { summary: "Encoder preprocessing".into(), blocks: vec![Block::List(pre)] });
    }
    Some(s)
}
