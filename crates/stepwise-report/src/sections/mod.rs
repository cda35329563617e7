//! Building the report's sections from the artefacts of a run folder, one module per kind of output.

pub mod annotation;
pub mod audit;
pub mod clean;
pub mod corpus;
pub mod eval;
pub mod features;
pub mod overview;
pub mod pictures;
pub mod r2vq;
pub mod sequencing;
pub mod stats;
pub mod study;
pub mod suite;
pub mod tasksets;

use std::path::{Path, PathBuf};

use stepwise_core::Result;

use crate::doc::Figure;
use crate::plots::{BarChart, write_bar_chart};

/// Values and (low, high) intervals of one plotted series.
pub type SeriesData = (Vec<Option<f64>>, Vec<Option<(f64, f64)>>);

/// Where the report goes and where its plot files are written.
pub struct Ctx {
    /// The run folder.
    pub run_dir: PathBuf,
    /// The folder of the report files (absolute).
    pub report_dir: PathBuf,
    /// Where plot files are written now (a temporary folder renamed to the assets folder on success).
    pub assets_tmp: PathBuf,
    /// The assets folder's name, relative to the report (e.g. `report_files`).
    pub assets_rel: String,
    /// PNG files up to this size are embedded in the HTML.
    pub max_embed_bytes: u64,
}

impl Ctx {
    /// Draw a chart into the assets folder (`name`.svg/.png) and return it as a figure.
    pub fn plot(&self, name: &str, caption: impl Into<String>, chart: &BarChart) -> Result<Figure> {
        let (svg, png) = (self.assets_tmp.join(format!("{name}.svg")), self.assets_tmp.join(format!("{name}.png")));
        write_bar_chart(chart, &svg, &png)?;
        let text = stepwise_core::json::read_text(&svg)?;
        Ok(Figure::Plot { caption: caption.into(), svg: text, png: format!("{}/{name}.png", self.assets_rel) })
    }

    /// A path of the run folder as the report links it (relative to the report's folder).
    pub fn link(&self, path: &Path) -> String {
        relative(&self.report_dir, &absolute(path))
    }
}

/// `p` made absolute against the working directory, with `.` and `..` resolved lexically.
pub fn absolute(p: &Path) -> PathBuf {
    stepwise_core::paths::absolute_normalized(p).unwrap_or_else(|_| stepwise_core::paths::normalize(p))
}

pub use stepwise_core::paths::relative_path as relative;

/// A knob-setting folder name made readable: `recipeqa` → `RecipeQA`, `knobs-0-1-1` → `(0,1,1)`.
pub fn setting_label(s: &str) -> String {
    if s == "recipeqa" {
        return "RecipeQA".into();
    }
    match s.strip_prefix("knobs-") {
        Some(k) => format!("({})", k.replace('-', ",")),
        None => s.to_string(),
    }
}

/// Sort key of settings: RecipeQA mode first, then the knob settings in order, then anything else.
pub fn setting_order(s: &str) -> (u8, String) {
    if s == "recipeqa" {
        (0, String::new())
    } else if s.starts_with("knobs-") {
        (1, s.to_string())
    } else {
        (2, s.to_string())
    }
}

/// Whether `s` names a suite setting (`recipeqa` or `knobs-K1-K2-K3`).
pub fn is_setting(s: &str) -> bool {
    s == "recipeqa"
        || s.strip_prefix("knobs-").is_some_and(|k| {
            let parts: Vec<&str> = k.split('-').collect();
            parts.len() == 3 && parts.iter().all(|p| *p == "0" || *p == "1")
        })
}

/// A count with thousands separators (`12,345`).
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// The command that made an output, as recorded in its manifest (`stepwise ...`).
pub fn command_of(dir: &Path) -> Option<String> {
    let m = stepwise_core::Manifest::read(dir).ok()?;
    (!m.command.is_empty()).then(|| m.command.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_and_labels() {
        assert_eq!(relative(Path::new("/a/b"), Path::new("/a/b/c/d.png")), "c/d.png");
        assert_eq!(relative(Path::new("/a/b"), Path::new("/a/x.png")), "../x.png");
        assert_eq!(absolute(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(setting_label("knobs-0-1-1"), "(0,1,1)");
        assert!(is_setting("knobs-1-0-1") && is_setting("recipeqa") && !is_setting("knobs-2-0-0"));
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
        let mut s = vec!["knobs-1-0-0", "other", "recipeqa", "knobs-0-0-1"];
        s.sort_by_key(|x| setting_order(x));
        assert_eq!(s, ["recipeqa", "knobs-0-0-1", "knobs-1-0-0", "other"]);
    }
}
