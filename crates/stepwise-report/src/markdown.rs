//! The report as Markdown (GitHub flavour): tables as pipe tables, figures as image links.

use std::fmt::Write as _;

use crate::doc::{Align, Block, Document, Figure, Table};

/// Render the document.
/// Marks a file as written by `stepwise report` (an HTML comment: invisible when rendered).
pub const GENERATOR_MARKDOWN: &str = "<!-- generator: stepwise report -->";

pub fn render(doc: &Document) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{GENERATOR_MARKDOWN}");
    let _ = writeln!(out, "# {}\n", text(&doc.title));
    for p in &doc.summary {
        let _ = writeln!(out, "{}\n", text(p));
    }
    if doc.sections.len() > 1 {
        for s in &doc.sections {
            let _ = writeln!(out, "- [{}](#{})", text(&s.title), s.id);
        }
        out.push('\n');
    }
    for s in &doc.sections {
        let _ = writeln!(out, "## {}\n", text(&s.title));
        blocks(&mut out, &s.blocks, 3);
    }
    out
}

fn blocks(out: &mut String, bs: &[Block], level: usize) {
    for b in bs {
        match b {
            Block::Paragraph(p) => {
                let _ = writeln!(out, "{}\n", text(p));
            }
            Block::Heading(h) => {
                let _ = writeln!(out, "{} {}\n", "#".repeat(level), text(h));
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {}", text(i));
                }
                out.push('\n');
            }
            Block::Table(t) => table(out, t),
            Block::Figures(fs) => {
                for f in fs {
                    let (caption, path) = match f {
                        Figure::Plot { caption, png, .. } => (caption, png),
                        Figure::SvgFile { caption, path, .. } | Figure::PngFile { caption, path, .. } => {
                            (caption, path)
                        }
                    };
                    let _ = writeln!(out, "![{}]({})\n", text(caption).replace(['[', ']'], ""), link(path));
                    let _ = writeln!(out, "*{}*\n", text(caption));
                }
            }
            Block::Details { summary, blocks: inner } => {
                let _ = writeln!(out, "{} {}\n", "#".repeat(level), text(summary));
                blocks(out, inner, level + 1);
            }
        }
    }
}

fn table(out: &mut String, t: &Table) {
    if !t.groups.is_empty() {
        // Markdown has no spanning header cells: say which columns each group covers.
        let mut start = 0;
        let parts: Vec<String> = t
            .groups
            .iter()
            .filter_map(|(g, n)| {
                let cols = &t.columns[start.min(t.columns.len())..(start + n).min(t.columns.len())];
                start += n;
                (!g.is_empty() && !cols.is_empty()).then(|| format!("{}: {}–{}", g, cols[0].0, cols[cols.len() - 1].0))
            })
            .collect();
        if !parts.is_empty() {
            let _ = writeln!(out, "Column groups: {}.\n", text(&parts.join("; ")));
        }
    }
    let head: Vec<String> = t.columns.iter().map(|(c, _)| cell(c)).collect();
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let rule: Vec<&str> = t.columns.iter().map(|(_, a)| if *a == Align::Right { "---:" } else { "---" }).collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for r in &t.rows {
        let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
}

/// Plain text with `code` spans: Markdown metacharacters outside code are escaped.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            out.push('`');
            out.push_str(part);
            out.push('`');
            continue;
        }
        // Escape only what can start markup: `*`, `<`, `>`, `\\` anywhere, `_` at a word boundary (GitHub does
        // not read intraword underscores as emphasis), `#` at the start of a line.
        let chars: Vec<char> = part.chars().collect();
        for (j, &ch) in chars.iter().enumerate() {
            let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric());
            let boundary_underscore =
                ch == '_' && !(word(j.checked_sub(1).and_then(|k| chars.get(k))) && word(chars.get(j + 1)));
            let line_start = j == 0 && i == 0 || chars.get(j.wrapping_sub(1)) == Some(&'\n');
            if matches!(ch, '\\' | '*' | '<' | '>') || boundary_underscore || (ch == '#' && line_start) {
                out.push('\\');
            }
            out.push(ch);
        }
    }
    out
}

/// A table cell: text without line breaks, pipes escaped (also inside code, as GitHub tables need).
fn cell(s: &str) -> String {
    text(&s.replace(['\n', '\r'], " ")).replace('|', "\\|")
}

/// A relative link target: spaces and parentheses percent-encoded.
fn link(path: &str) -> String {
    path.replace('%', "%25").replace(' ', "%20").replace('(', "%28").replace(')', "%29")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::Section;

    #[test]
    fn escapes_text_and_cells_but_keeps_code() {
        assert_eq!(text("a_b *c* _d `x_y` [1, 2]"), "a_b \\*c\\* \\_d `x_y` [1, 2]");
        let mut t = Table::new(&["name", ">n"]);
        t.row(vec!["a|b".into(), "1".into()]);
        let mut s = Section::new("s", "S");
        s.table(t);
        let doc = Document { title: "T".into(), summary: vec![], sections: vec![s] };
        let md = render(&doc);
        assert!(md.contains("| a\\|b | 1 |"), "{md}");
        assert!(md.contains("|---|---:|"), "{md}");
    }
}
