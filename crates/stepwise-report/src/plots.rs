//! Plots as SVG and PNG, drawn with plotters. Text uses DejaVu Sans, embedded in the binary (Bitstream Vera
//! licence, `assets/DejaVuSans-LICENSE.txt`), so PNGs look the same on every machine and need no system fonts.
//! Outputs are deterministic (no timestamps) and written atomically.
//!
//! - [`Histogram`] / [`write_histogram`]: overlaid histograms over shared bins (the audit's distance plots);
//! - [`BarChart`] / [`write_bar_chart`]: grouped bars over named categories, with optional confidence intervals
//!   and a reference line (accuracy per knob setting against chance, counts per setting, steps per procedure);
//! - [`LineChart`] / [`write_line_chart`]: lines of (x, y) points with a legend (training curves, knob effects).

use std::path::Path;
use std::sync::OnceLock;

mod bars;
mod lines;

use plotters::prelude::*;
use plotters::style::FontStyle;
use std::io::Write;

use stepwise_core::output::{write_file_atomic, write_string_atomic};
use stepwise_core::{Error, Result};

pub use bars::{BarChart, BarSeries, PALETTE, bar_chart_svg, write_bar_chart};
pub use lines::{Line, LineChart, write_line_chart};

/// The family name plots use for the embedded font.
pub const FONT_FAMILY: &str = "stepwise-sans";
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Register the embedded font with plotters once per process.
pub fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok =
        *REGISTERED.get_or_init(|| plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT_BYTES).is_ok());
    if ok { Ok(()) } else { Err(Error::runtime("the embedded plot font could not be loaded")) }
}

/// One series of a histogram: counts per bin.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    pub label: &'a str,
    pub counts: &'a [u64],
    pub color: RGBColor,
}

/// Overlaid histograms over shared bins.
#[derive(Debug, Clone)]
pub struct Histogram<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    /// Bin edges (one more than the counts of each series), increasing.
    pub edges: &'a [f64],
    pub series: Vec<Series<'a>>,
    /// Plot each series as a share of its own total (so series of different sizes compare).
    pub normalize: bool,
}

/// The colours of "correct" and "incorrect" in every stepwise plot.
pub const CORRECT: RGBColor = RGBColor(0x1b, 0x9e, 0x77);
pub const INCORRECT: RGBColor = RGBColor(0xd9, 0x5f, 0x02);

const SIZE: (u32, u32) = (900, 540);

/// Write `h` as SVG and PNG.
pub fn write_histogram(h: &Histogram<'_>, svg: &Path, png: &Path) -> Result<()> {
    check(h)?;
    ensure_font()?;
    write_svg_and_png(svg, png, SIZE, |root| draw(h, root), |root| draw(h, root))
}

/// Draw the same picture into an SVG file and a PNG file (atomically).
pub(crate) fn write_svg_and_png(
    svg: &Path,
    png: &Path,
    size: (u32, u32),
    draw_svg: impl FnOnce(DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> std::result::Result<(), String>,
    draw_png: impl FnOnce(DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>) -> std::result::Result<(), String>,
) -> Result<()> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        draw_svg(root).map_err(|e| Error::runtime(format!("drawing {}: {e}", svg.display())))?;
    }
    write_string_atomic(svg, &text)?;
    // Drawn into memory and encoded here (plotters' own PNG encoder would bring a second version of `image`).
    let (w, h) = size;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        draw_png(root.clone())
            .and_then(|_| root.present().map_err(|e| e.to_string()))
            .map_err(|e| Error::runtime(format!("drawing {}: {e}", png.display())))?;
    }
    let mut bytes = Vec::new();
    image::RgbImage::from_raw(w, h, rgb)
        .ok_or_else(|| Error::runtime(format!("drawing {}: buffer of the wrong size", png.display())))?
        .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)
        .map_err(|e| Error::runtime(format!("encoding {}: {e}", png.display())))?;
    write_file_atomic(png, |f| f.write_all(&bytes))
}

fn check(h: &Histogram<'_>) -> Result<()> {
    let bins = h.edges.len().saturating_sub(1);
    if bins == 0
        || h.edges.windows(2).any(|w| w[1].partial_cmp(&w[0]) != Some(std::cmp::Ordering::Greater))
        || h.edges.iter().any(|e| !e.is_finite())
    {
        return Err(Error::runtime("histogram edges must be finite and increasing"));
    }
    if h.series.iter().any(|s| s.counts.len() != bins) {
        return Err(Error::runtime("every histogram series needs one count per bin"));
    }
    Ok(())
}

fn heights(h: &Histogram<'_>, s: &Series<'_>) -> Vec<f64> {
    let total: u64 = s.counts.iter().sum();
    s.counts
        .iter()
        .map(|&c| if h.normalize { if total == 0 { 0.0 } else { c as f64 / total as f64 } } else { c as f64 })
        .collect()
}

fn draw<DB: DrawingBackend>(
    h: &Histogram<'_>,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let (x0, x1) = (h.edges[0], *h.edges.last().expect("checked: edges are not empty"));
    let y_max = h.series.iter().flat_map(|s| heights(h, s)).fold(0.0f64, f64::max).max(1e-9) * 1.08;
    let font = |size: u32| (FONT_FAMILY, size).into_font();
    let mut chart = ChartBuilder::on(&root)
        .caption(h.title, font(22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(h.x_label)
        .y_desc(if h.normalize { "share of choices" } else { "choices" })
        .label_style(font(14))
        .axis_desc_style(font(16))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    for s in &h.series {
        let hs = heights(h, s);
        let color = s.color;
        chart
            .draw_series(
                h.edges
                    .windows(2)
                    .zip(hs)
                    .map(move |(w, y)| Rectangle::new([(w[0], 0.0), (w[1], y)], color.mix(0.45).filled())),
            )
            .map_err(err)?
            .label(s.label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.mix(0.6).filled()));
    }
    chart
        .configure_series_labels()
        .label_font(font(15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot<'a>(edges: &'a [f64], a: &'a [u64], b: &'a [u64]) -> Histogram<'a> {
        Histogram {
            title: "Distance to the question",
            x_label: "cosine distance",
            edges,
            series: vec![
                Series { label: "correct", counts: a, color: CORRECT },
                Series { label: "incorrect", counts: b, color: INCORRECT },
            ],
            normalize: true,
        }
    }

    #[test]
    fn writes_svg_and_png_deterministically() {
        let td = tempfile::tempdir().unwrap();
        let edges = [0.0, 0.25, 0.5, 0.75, 1.0];
        let h = plot(&edges, &[5, 3, 1, 0], &[1, 4, 6, 9]);
        let (svg, png) = (td.path().join("h.svg"), td.path().join("h.png"));
        write_histogram(&h, &svg, &png).unwrap();
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(s.contains("<svg") && s.contains("correct") && s.contains("cosine distance"));
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        // The PNG has text: more than the two bar colours and white.
        let (svg2, png2) = (td.path().join("g.svg"), td.path().join("g.png"));
        write_histogram(&h, &svg2, &png2).unwrap();
        assert_eq!(std::fs::read(&svg2).unwrap(), s.as_bytes());
        assert_eq!(std::fs::read(&png2).unwrap(), bytes);
        // Only the two outputs are left in the folder.
        assert_eq!(std::fs::read_dir(td.path()).unwrap().count(), 4);
    }

    #[test]
    fn bad_bins_are_rejected() {
        let td = tempfile::tempdir().unwrap();
        let edges = [0.0, 1.0, 1.0];
        let h = plot(&edges, &[1, 2], &[3, 4]);
        assert!(write_histogram(&h, &td.path().join("a.svg"), &td.path().join("a.png")).is_err());
        let edges = [0.0, 1.0];
        let h = plot(&edges, &[1, 2], &[3]);
        assert!(write_histogram(&h, &td.path().join("a.svg"), &td.path().join("a.png")).is_err());
    }
}
