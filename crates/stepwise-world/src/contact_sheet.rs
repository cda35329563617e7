//! A contact sheet: one procedure's step images side by side with step numbers and captions, to look at what
//! changes from step to step.

use image::{Rgb, RgbImage, imageops};
use stepwise_core::Procedure;

use crate::render::font::{draw_text, wrap};

/// Most caption lines under a step; a longer text ends in "..." (the sheet shows what a step is about, the
/// corpus has the full text).
const MAX_CAPTION_LINES: usize = 12;

/// Lay out `images` (one per step) in rows of `columns`, each with "STEP n" and the step's text below, as many
/// lines as the longest caption needs (at most [`MAX_CAPTION_LINES`]).
pub fn contact_sheet(procedure: &Procedure, images: &[RgbImage], columns: usize) -> RgbImage {
    let columns = columns.clamp(1, images.len().max(1));
    let tile = images.first().map(|i| i.width()).unwrap_or(224);
    let pad = 8u32;
    let max_chars = (tile / 6) as usize;
    let captions: Vec<Vec<String>> = (0..images.len())
        .map(|i| {
            let text = procedure.steps.get(i).and_then(|s| s.text.clone()).unwrap_or_default();
            let mut lines = wrap(&text, max_chars);
            if lines.len() > MAX_CAPTION_LINES {
                lines.truncate(MAX_CAPTION_LINES);
                let last = &mut lines[MAX_CAPTION_LINES - 1];
                let keep: String = last.chars().take(max_chars.saturating_sub(3)).collect();
                *last = format!("{keep}...");
            }
            lines
        })
        .collect();
    let caption_lines = 1 + captions.iter().map(Vec::len).max().unwrap_or(0) as u32;
    let line_h = 10u32;
    let header = 28u32;
    let cell_w = tile + pad;
    let cell_h = tile + pad + caption_lines * line_h + 6;
    let rows = images.len().div_ceil(columns) as u32;
    let width = columns as u32 * cell_w + pad;
    let height = header + rows * cell_h + pad;
    let mut sheet = RgbImage::from_pixel(width, height, Rgb([250, 250, 247]));
    let title = format!("{} ({})", procedure.title.as_deref().unwrap_or(&procedure.id), procedure.id);
    draw_text(&mut sheet, pad, 9, &title, 2, [20, 20, 20]);
    for (i, img) in images.iter().enumerate() {
        let (col, row) = ((i % columns) as u32, (i / columns) as u32);
        let x = pad + col * cell_w;
        let y = header + row * cell_h;
        imageops::replace(&mut sheet, img, x as i64, y as i64);
        draw_text(&mut sheet, x, y + tile + 4, &format!("STEP {}", i + 1), 1, [160, 30, 30]);
        for (k, line) in captions[i].iter().enumerate() {
            draw_text(&mut sheet, x, y + tile + 4 + (k as u32 + 1) * line_h, line, 1, [40, 40, 40]);
        }
    }
    sheet
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::Step;

    fn sheet_height(texts: &[&str]) -> u32 {
        let p = Procedure {
            id: "p".into(),
            steps: texts.iter().map(|t| Step { text: Some(t.to_string()), ..Default::default() }).collect(),
            ..Default::default()
        };
        let images = vec![RgbImage::new(60, 60); texts.len()];
        contact_sheet(&p, &images, 4).height()
    }

    #[test]
    fn captions_are_not_cut_short() {
        let short = sheet_height(&["Mix.", "Bake."]);
        let long_text = "word ".repeat(40);
        let long = sheet_height(&["Mix.", &long_text]);
        // 60-pixel tiles hold 10 characters a line (two words): 40 words need 20 lines, capped at MAX_CAPTION_LINES.
        assert_eq!(long - short, (MAX_CAPTION_LINES as u32 - 1) * 10);
        let medium = sheet_height(&["Mix.", "word word word word word word"]);
        assert!(medium > short && medium < long, "{short} {medium} {long}");
    }
}
