//! Line charts: one or more series of (x, y) points, with a legend (training curves, accuracy against a knob's
//! value with one line per model).

use std::path::Path;

use plotters::prelude::*;
use stepwise_core::{Error, Result};

use super::bars::PALETTE;
use super::{FONT_FAMILY, ensure_font, write_svg_and_png};

/// One line.
#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Line>,
    /// Fixed y range (e.g. 0..1 for accuracies); else the data's range with a margin.
    pub y_range: Option<(f64, f64)>,
    pub size: (u32, u32),
}

impl LineChart {
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Self {
        LineChart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            y_range: None,
            size: (720, 420),
        }
    }

    pub fn with_series(mut self, label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        self.series.push(Line { label: label.into(), points });
        self
    }

    fn check(&self) -> Result<()> {
        let all: Vec<(f64, f64)> = self.series.iter().flat_map(|s| s.points.iter().copied()).collect();
        if all.is_empty() {
            return Err(Error::runtime(format!("line chart `{}`: no points", self.title)));
        }
        if all.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
            return Err(Error::runtime(format!("line chart `{}`: a non-finite point", self.title)));
        }
        Ok(())
    }

    fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let pts = self.series.iter().flat_map(|s| s.points.iter().copied());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for (x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let y = self.y_range.unwrap_or_else(|| {
            let pad = ((y1 - y0) * 0.08).max(1e-6);
            (y0 - pad, y1 + pad)
        });
        ((x0, x1), y)
    }
}

/// Write the chart as SVG and PNG.
pub fn write_line_chart(c: &LineChart, svg: &Path, png: &Path) -> Result<()> {
    c.check()?;
    ensure_font()?;
    write_svg_and_png(svg, png, c.size, |root| draw(c, root), |root| draw(c, root))
}

fn draw<DB: DrawingBackend>(
    c: &LineChart,
    root: DrawingArea<DB, plotters::coord::Shift>,
) -> std::result::Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let ((x0, x1), (y0, y1)) = c.ranges();
    let mut chart = ChartBuilder::on(&root)
        .caption(c.title.as_str(), (FONT_FAMILY, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .label_style((FONT_FAMILY, 13))
        .axis_desc_style((FONT_FAMILY, 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    for (i, s) in c.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart.draw_series(s.points.iter().map(|&(x, y)| Circle::new((x, y), 3, color.filled()))).map_err(err)?;
    }
    if c.series.len() > 1 {
        chart
            .configure_series_labels()
            .label_font((FONT_FAMILY, 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)
}
