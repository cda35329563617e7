//! PNG pictures of the run folder (e.g. the demo's contact sheet of one procedure's step images).

use stepwise_core::{IoResultExt, Result};

use super::Ctx;
use crate::doc::{Block, Figure, Section};
use crate::scan::Artefact;

pub fn section(ctx: &Ctx, pictures: &[&Artefact]) -> Result<Option<Section>> {
    if pictures.is_empty() {
        return Ok(None);
    }
    let mut s = Section::new("pictures", "Pictures");
    let mut figs = Vec::new();
    for p in pictures {
        let size = std::fs::metadata(&p.path).at(&p.path)?.len();
        let bytes = if size <= ctx.max_embed_bytes { Some(std::fs::read(&p.path).at(&p.path)?) } else { None };
        let name = p.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let caption = if name.contains("contact") {
            format!("Contact sheet (`{}`): one procedure's step images in order, with their step texts.", p.rel)
        } else {
            format!("`{}`", p.rel)
        };
        figs.push(Figure::PngFile { caption, path: ctx.link(&p.path), bytes });
    }
    s.push(Block::Figures(figs));
    Ok(Some(s))
}
