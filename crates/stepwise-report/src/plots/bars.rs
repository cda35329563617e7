//! Grouped bar charts over named categories: one bar per series in each category, optional confidence
//! intervals drawn as error bars, and an optional horizontal reference line (e.g. chance accuracy).

use std::path::Path;

use plotters::prelude::*;
use stepwise_core::{Error, Result};

use super::{FONT_FAMILY, ensure_font, write_svg_and_png};

/// Colours of successive series (colour-blind-safe, from ColorBrewer's Dark2 and Set1).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1b, 0x9e, 0x77),
    RGBColor(0xd9, 0x5f, 0x02),
    RGBColor(0x75, 0x70, 0xb3),
    RGBColor(0xe7, 0x29, 0x8a),
    RGBColor(0x66, 0xa6, 0x1e),
    RGBColor(0xe6, 0xab, 0x02),
    RGBColor(0xa6, 0x76, 0x1d),
    RGBColor(0x66, 0x66, 0x66),
];

/// One series: a value per category (`None` = no bar), optionally a (low, high) interval per category.
#[derive(Debug, Clone)]
pub struct BarSeries {
    pub label: String,
    pub color: RGBColor,
    pub values: Vec<Option<f64>>,
    pub intervals: Option<Vec<Option<(f64, f64)>>>,
}

/// Bars of several series over the same categories.
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<BarSeries>,
    /// A horizontal line across the chart, with its legend label (e.g. chance).
    pub reference: Option<(f64, String)>,
    /// Fixed y range (e.g. 0..1 for accuracies); else 0 to the largest value or interval end.
    pub y_range: Option<(f64, f64)>,
    /// Picture size in pixels.
    pub size: (u32, u32),
}

impl BarChart {
    /// A chart of the default size with no reference line and an automatic y range.
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        categories: Vec<String>,
    ) -> Self {
        BarChart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            categories,
            series: Vec::new(),
            reference: None,
            y_range: None,
            size: (900, 460),
        }
    }

    /// Add a series, coloured by its position in [`PALETTE`].
    pub fn with_series(
        mut self,
        label: impl Into<String>,
        values: Vec<Option<f64>>,
        intervals: Option<Vec<Option<(f64, f64)>>>,
    ) -> Self {
        let color = PALETTE[self.series.len() % PALETTE.len()];
        self.series.push(BarSeries { label: label.into(), color, values, intervals });
        self
    }

    fn check(&self) -> Result<()> {
        let n = self.categories.len();
        if n == 0 || self.series.is_empty() {
            return Err(Error::runtime(format!("bar chart `{}`: no categories or no series", self.title)));
        }
        for s in &self.series {
            if s.values.len() != n || s.intervals.as_ref().is_some_and(|i| i.len() != n) {
                return Err(Error::runtime(format!(
                    "bar chart `{}`: series `{}` needs one value per category",
                    self.title, s.label
                )));
            }
            let finite = s.values.iter().flatten().all(|v| v.is_finite())
                && s.intervals.iter().flatten().flatten().all(|(a, b)| a.is_finite() && b.is_finite());
            if !finite {
                return Err(Error::runtime(format!(
                    "bar chart `{}`: series `{}` has a non-finite value",
                    self.title, s.label
                )));
            }
        }
        if let Some((lo, hi)) = self.y_range
            && !(lo.is_finite() && hi.is_finite() && hi > lo)
        {
            return Err(Error::runtime(format!("bar chart `{}`: bad y range", self.title)));
        }
        Ok(())
    }

    fn y_range(&self) -> (f64, f64) {
        if let Some(r) = self.y_range {
            return r;
        }
        let top = self
            .series
            .iter()
            .flat_map(|s| {
                s.values.iter().flatten().copied().chain(s.intervals.iter().flatten().flatten().map(|&(_, b)| b))
            })
            .chain(self.reference.iter().map(|r| r.0))
            .fold(0.0f64, f64::max);
        (0.0, if top > 0.0 { top * 1.1 } else { 1.0 })
    }
}

/// The chart as an SVG document.
pub fn bar_chart_svg(c: &BarChart) -> Result<String> {
    c.check()?;
    ensure_font()?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, c.size).into_drawing_area();
        draw(c, root).map_err(|e| Error::runtime(format!("drawing `{}`: {e}", c.title)))?;
    }
    Ok(text)
}

/// Write the chart as SVG and PNG.
pub fn write_bar_chart(c: &BarChart, svg: &Path, png: &Path) -> Result<()> {
    c.check()?;
    ensure_font()?;
    write_svg_and_png(svg, png, c.size, |root| draw(c, root), |root| draw(c, root))
}

/// A legend entry: a filled box (series) or a dashed line (the reference).
enum Key<'a> {
    Bar(&'a str, RGBColor),
    Line(&'a str),
}

fn draw<DB: DrawingBackend>(
    c: &BarChart,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let font = |size: u32| (FONT_FAMILY, size).into_font();
    root.fill(&WHITE).map_err(err)?;
    let n = c.categories.len();
    let (y0, y1) = c.y_range();
    // Title, then a one-row legend, then the chart: the legend never covers bars.
    let title_h = 34;
    root.draw(&Text::new(
        c.title.as_str(),
        (c.size.0 as i32 / 2, 10),
        font(20).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(err)?;
    let mut keys: Vec<Key<'_>> = c.series.iter().map(|s| Key::Bar(s.label.as_str(), s.color)).collect();
    if let Some((_, label)) = &c.reference {
        keys.push(Key::Line(label.as_str()));
    }
    let legend_h = if keys.len() > 1 { 26 } else { 0 };
    if legend_h > 0 {
        // Approximate text widths (DejaVu Sans at 13 px averages about 7.3 px per character).
        let widths: Vec<i32> = keys
            .iter()
            .map(|k| match k {
                Key::Bar(l, _) | Key::Line(l) => 22 + (l.chars().count() as f64 * 6.8) as i32 + 18,
            })
            .collect();
        let mut x = (c.size.0 as i32 - widths.iter().sum::<i32>()) / 2;
        let y = title_h + 12;
        for (k, w) in keys.iter().zip(&widths) {
            match k {
                Key::Bar(label, color) => {
                    root.draw(&Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.mix(0.8).filled())).map_err(err)?;
                    root.draw(&Text::new(
                        *label,
                        (x + 20, y),
                        font(13).color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(err)?;
                }
                Key::Line(label) => {
                    let style = BLACK.mix(0.55).stroke_width(1);
                    root.draw(&PathElement::new(vec![(x, y), (x + 6, y)], style)).map_err(err)?;
                    root.draw(&PathElement::new(vec![(x + 9, y), (x + 15, y)], style)).map_err(err)?;
                    root.draw(&Text::new(
                        *label,
                        (x + 20, y),
                        font(13).color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
                    ))
                    .map_err(err)?;
                }
            }
            x += w;
        }
    }
    let (_, area) = root.split_vertically(title_h + legend_h + 4);
    // Category labels are drawn by hand under each group (plotters' numeric tick placement would not hit
    // every category); a label may have several lines; long lines get a smaller font.
    let lines: Vec<Vec<&str>> = c.categories.iter().map(|s| s.lines().collect()).collect();
    let longest = lines.iter().flatten().map(|s| s.chars().count()).max().unwrap_or(1);
    let rows = lines.iter().map(Vec::len).max().unwrap_or(1).max(1) as u32;
    let slot = (c.size.0 as f64 - 100.0) / n as f64;
    let label_size = ((slot / (longest as f64 * 0.6)).floor() as u32).clamp(9, 14);
    let y_fmt = |v: &f64| {
        if y1 - y0 >= 10.0 { format!("{v:.0}") } else { format!("{v:.1}") }
    };
    let mut chart = ChartBuilder::on(&area)
        .margin(14)
        .margin_top(4)
        .x_label_area_size(30 + rows * (label_size + 3))
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), y0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_label_formatter(&y_fmt)
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .label_style(font(13))
        .axis_desc_style(font(15))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.08))
        .draw()
        .map_err(err)?;
    let k = c.series.len() as f64;
    let group = 0.8;
    let width = group / k;
    for (si, s) in c.series.iter().enumerate() {
        let color = s.color;
        let left = |i: usize| i as f64 - group / 2.0 + si as f64 * width;
        chart
            .draw_series(s.values.iter().enumerate().filter_map(|(i, v)| {
                v.map(|v| {
                    Rectangle::new(
                        [(left(i) + 0.06 * width, y0.max(0.0)), (left(i) + 0.94 * width, v)],
                        color.mix(0.8).filled(),
                    )
                })
            }))
            .map_err(err)?;
        if let Some(iv) = &s.intervals {
            // Error bars: a vertical line with caps a third of the bar wide.
            let cap = width / 6.0;
            chart
                .draw_series(iv.iter().enumerate().filter_map(|(i, r)| r.map(|r| (i, r))).flat_map(|(i, (lo, hi))| {
                    let x = left(i) + width / 2.0;
                    [
                        PathElement::new(vec![(x, lo), (x, hi)], BLACK.stroke_width(1)),
                        PathElement::new(vec![(x - cap, lo), (x + cap, lo)], BLACK.stroke_width(1)),
                        PathElement::new(vec![(x - cap, hi), (x + cap, hi)], BLACK.stroke_width(1)),
                    ]
                }))
                .map_err(err)?;
        }
    }
    if let Some((y, _)) = &c.reference {
        let line = BLACK.mix(0.55).stroke_width(1);
        chart.draw_series(DashedLineSeries::new([(-0.5, *y), (n as f64 - 0.5, *y)], 6, 4, line)).map_err(err)?;
    }
    let style = font(label_size).color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, ls) in lines.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64, y0));
        for (r, line) in ls.iter().enumerate() {
            let y = py + 6 + r as i32 * (label_size as i32 + 3);
            root.draw(&Text::new(*line, (px, y), style.clone())).map_err(err)?;
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> BarChart {
        let cats = vec!["RecipeQA".to_string(), "(0,0,0)".into(), "(0,1,1)".into()];
        let mut c = BarChart::new("visual_cloze", "setting", "accuracy", cats)
            .with_series(
                "Hasty Student",
                vec![Some(0.9), Some(0.5), Some(0.3)],
                Some(vec![Some((0.85, 0.95)), None, Some((0.2, 0.4))]),
            )
            .with_series("distance probe", vec![Some(0.8), None, Some(0.25)], None);
        c.reference = Some((0.25, "chance".into()));
        c.y_range = Some((0.0, 1.0));
        c
    }

    #[test]
    fn draws_every_category_label_and_legend_deterministically() {
        let svg = bar_chart_svg(&chart()).unwrap();
        for label in ["RecipeQA", "(0,0,0)", "(0,1,1)", "Hasty Student", "distance probe", "chance", "accuracy"] {
            assert!(svg.contains(label), "{label} missing");
        }
        assert_eq!(svg, bar_chart_svg(&chart()).unwrap());
        let td = tempfile::tempdir().unwrap();
        let (s, p) = (td.path().join("c.svg"), td.path().join("c.png"));
        write_bar_chart(&chart(), &s, &p).unwrap();
        assert_eq!(std::fs::read_to_string(&s).unwrap(), svg);
        assert_eq!(&std::fs::read(&p).unwrap()[1..4], b"PNG");
    }

    #[test]
    fn mismatched_or_non_finite_series_are_rejected() {
        let mut c = chart();
        c.series[0].values.pop();
        assert!(bar_chart_svg(&c).is_err());
        let mut c = chart();
        c.series[1].values[0] = Some(f64::NAN);
        assert!(bar_chart_svg(&c).is_err());
        let c = BarChart::new("t", "x", "y", vec![]);
        assert!(bar_chart_svg(&c).is_err());
    }
}
