//! stepwise-report: tables, plots and the HTML report.
//!
//! - [`report`]: `stepwise report` — read a run folder, write `report.html` (self-contained) and `report.md`
//! - [`scan`]: find the outputs of a run folder (by manifest kind, JSON shape, extension)
//! - [`read`]: JSON reading with errors naming the file and field path
//! - [`sections`]: one module per kind of output, each building its section
//! - [`doc`]: the document model (sections, tables, figures) and number formatting
//! - [`markdown`], [`html`]: the two renderers (HTML escaping, base64 images, inline SVG)
//! - [`plots`]: SVG/PNG plots with an embedded font (histograms, bar charts with intervals)

pub mod doc;
pub mod html;
pub mod markdown;
pub mod plots;
pub mod read;
pub mod report;
pub mod scan;
pub mod sections;

pub use report::{ReportOptions, Written, write_report};
