//! The report as a document: sections of paragraphs, tables and figures, rendered to Markdown
//! ([`crate::markdown`]) and to one self-contained HTML file ([`crate::html`]). Text is plain (renderers escape
//! it); `code` spans are the only inline markup, written with backticks.

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table: a header, optional column groups spanning the header (e.g. "single reference" over six metric
/// columns), and rows of already formatted cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: Vec<(String, Align)>,
    /// (label, number of columns) spanning the header from the left; empty = no group row.
    pub groups: Vec<(String, usize)>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns; a column name starting with `>` is right-aligned (the `>` is dropped).
    pub fn new<S: AsRef<str>>(columns: &[S]) -> Self {
        let columns = columns
            .iter()
            .map(|c| match c.as_ref().strip_prefix('>') {
                Some(name) => (name.to_string(), Align::Right),
                None => (c.as_ref().to_string(), Align::Left),
            })
            .collect();
        Table { columns, groups: Vec::new(), rows: Vec::new() }
    }

    pub fn with_groups(mut self, groups: Vec<(String, usize)>) -> Self {
        self.groups = groups;
        self
    }

    /// Add a row; it must have one cell per column (an invariant of the report builders).
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.columns.len(), "a table row needs one cell per column");
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// A picture.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    /// A plot drawn for the report: the SVG (inlined in HTML) and the PNG file Markdown links to (relative to
    /// the report).
    Plot { caption: String, svg: String, png: String },
    /// An SVG file of the run folder (inlined in HTML when small enough, else linked); path relative to the
    /// report.
    SvgFile { caption: String, path: String, svg: Option<String> },
    /// A PNG file of the run folder: path relative to the report, and its bytes when they are embedded.
    PngFile { caption: String, path: String, bytes: Option<Vec<u8>> },
}

/// A block of a section.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Paragraph(String),
    /// A short heading inside a section.
    Heading(String),
    List(Vec<String>),
    Table(Table),
    /// Figures side by side (HTML) or one after the other (Markdown).
    Figures(Vec<Figure>),
    /// Collapsed content in HTML (a `<details>` element), a sub-heading in Markdown.
    Details {
        summary: String,
        blocks: Vec<Block>,
    },
}

/// A top-level section.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Anchor id (lowercase letters, digits and dashes).
    pub id: String,
    pub title: String,
    pub blocks: Vec<Block>,
}

impl Section {
    pub fn new(id: &str, title: &str) -> Self {
        Section { id: id.to_string(), title: title.to_string(), blocks: Vec::new() }
    }

    pub fn push(&mut self, b: Block) {
        self.blocks.push(b);
    }

    pub fn para(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Paragraph(text.into()));
    }

    pub fn table(&mut self, t: Table) {
        if !t.is_empty() {
            self.blocks.push(Block::Table(t));
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub title: String,
    /// One-paragraph summary under the title.
    pub summary: Vec<String>,
    pub sections: Vec<Section>,
}

/// A value as a percentage with one decimal.
pub fn pct(v: f64) -> String {
    format!("{:.1}", v * 100.0)
}

/// A percentage with its interval: `71.9 [68.0, 75.5]`.
pub fn pct_ci(v: f64, ci: Option<(f64, f64)>) -> String {
    match ci {
        Some((lo, hi)) => format!("{} [{}, {}]", pct(v), pct(lo), pct(hi)),
        None => pct(v),
    }
}

/// A number with `d` decimals and its interval.
pub fn num_ci(v: f64, ci: Option<(f64, f64)>, d: usize) -> String {
    match ci {
        Some((lo, hi)) => format!("{v:.d$} [{lo:.d$}, {hi:.d$}]"),
        None => format!("{v:.d$}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_with_their_intervals() {
        assert_eq!(pct_ci(0.719, Some((0.68, 0.755))), "71.9 [68.0, 75.5]");
    }
}
