//! A contact sheet: one procedure's step images side by side with step numbers and captions, to look at what
//! changes from step to step.

use image::{Rgb, RgbImage, imageops};
use stepwise_core::Procedure;

use crate::render::font::{draw_text, wrap};

/// Lay out `images` (one per step) in rows of `columns`, each with "STEP n" and up to three caption lines
/// (the step's title, or its text).
pub fn contact_sheet(procedure: &Procedure, images: &[RgbImage], columns: usize) -> RgbImage {
    let columns = columns.clamp(1, images.len().max(1));
    let tile = images.first().map(|i| i.width()).unwrap_or(224);
    let pad = 8u32;
    let caption_lines = 4u32;
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
    let max_chars = (tile / 6) as usize;
    for (i, img) in images.iter().enumerate() {
        let (col, row) = ((i % columns) as u32, (i / columns) as u32);
        let x = pad + col * cell_w;
        let y = header + row * cell_h;
        imageops::replace(&mut sheet, img, x as i64, y as i64);
        let step = procedure.steps.get(i);
        let caption = step.map(|s| s.text.clone().unwrap_or_default()).unwrap_or_default();
        draw_text(&mut sheet, x, y + tile + 4, &format!("STEP {}", i + 1), 1, [160, 30, 30]);
        for (k, line) in wrap(&caption, max_chars).into_iter().take(caption_lines as usize - 1).enumerate() {
            draw_text(&mut sheet, x, y + tile + 4 + (k as u32 + 1) * line_h, &line, 1, [40, 40, 40]);
        }
    }
    sheet
}
