//! stepwise-report: tables, plots and the HTML report.
//!
//! - [`plots`]: SVG/PNG plots with an embedded font (histograms)

pub mod plots;
