//! VLMEvalKit's multiple-choice TSV (its `ImageMCQDataset` layout): one file `<config>.tsv` per config with
//! the columns `index`, `image`, `image_path`, `question`, `A`, `B`, … (as many letters as the most choices),
//! `answer` (a letter), `category` (the task), `l2-category` (the setting), `split` and `qid`.
//!
//! `image` is the base64 of the image file when a question has one image, and a Python list literal of base64
//! strings (`['…', '…']`, what VLMEvalKit's `toliststr` reads) when it has several, in `<image N>` order, with
//! `image_path` the file names VLMEvalKit dumps them to (`<index>.jpg`, or a list `['<index>_0.jpg', …]`: its
//! `dump_image` requires them for several images); both are empty for a question without images. The question and
//! options keep the `<image N>` placeholders. Fields holding a tab, a line break or a double quote
//! are quoted as CSV quotes them (`"…"`, inner quotes doubled), which is what `pandas.read_csv(sep='\t')` reads.

use std::io::Write;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use stepwise_core::Result;

use super::render::letter;
use super::{ExportSummary, Source, image_extension, write_chunked};

/// The TSV of one config, relative to the export folder.
pub fn tsv_file(config: &str) -> String {
    format!("{config}.tsv")
}

/// A TSV field, quoted when it must be.
fn field(s: &str) -> String {
    if s.contains(['\t', '\n', '\r', '"']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// A Python list literal of strings (what VLMEvalKit's `toliststr` reads); the items hold no quotes.
fn list_literal(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.map(|e| format!("'{e}'")).collect::<Vec<_>>().join(", "))
}

/// Write one TSV per config of `source` into `out`.
pub fn write(source: &Source, out: &Path) -> Result<ExportSummary> {
    let mut summary = ExportSummary { format: "vlmevalkit".into(), ..Default::default() };
    let image_root = source.corpus.as_ref().map(|c| c.image_root.as_path());
    for config in &source.configs {
        let letters = config.splits.values().flatten().map(|q| q.choice_list.len()).max().unwrap_or(0);
        let questions: Vec<_> = config.splits.values().flatten().cloned().collect();
        let rel = tsv_file(&config.name);
        let images = write_chunked(&out.join(&rel), &config.source, &questions, image_root, |w, chunks| {
            let mut header = vec!["index".to_string(), "image".into(), "image_path".into(), "question".into()];
            header.extend((0..letters).map(letter));
            header.extend(["answer", "category", "l2-category", "split", "qid"].map(String::from));
            writeln!(w, "{}", header.join("\t"))?;
            let mut index = 0usize;
            while let Some(prepared) = chunks.next_chunk()? {
                for p in &prepared {
                    let encoded: Vec<String> = p.images.iter().map(|(_, b)| STANDARD.encode(b)).collect();
                    // `prepare` accepted only JPEG and PNG files.
                    let ext = |b: &[u8]| image_extension(b).unwrap_or("jpg");
                    let (image, image_path) = match encoded.len() {
                        // No image (a text-only question): both cells empty.
                        0 => (String::new(), String::new()),
                        1 => (encoded[0].clone(), format!("{index}.{}", ext(&p.images[0].1))),
                        _ => (
                            list_literal(encoded.iter().cloned()),
                            list_literal(
                                p.images.iter().enumerate().map(|(k, (_, b))| format!("{index}_{k}.{}", ext(b))),
                            ),
                        ),
                    };
                    let mut row = vec![index.to_string(), image, image_path, field(&p.rendered.prompt)];
                    row.extend((0..letters).map(|i| p.rendered.options.get(i).map_or(String::new(), |o| field(o))));
                    row.push(p.rendered.answer_letter());
                    row.push(field(&config.task));
                    row.push(field(config.setting.as_deref().unwrap_or("")));
                    row.push(super::split_name(p.question.split.as_deref()));
                    row.push(field(&p.question.qid));
                    writeln!(w, "{}", row.join("\t"))?;
                    index += 1;
                }
            }
            Ok(())
        })?;
        for (split, qs) in &config.splits {
            summary.configs.entry(config.name.clone()).or_default().insert(split.clone(), qs.len());
        }
        summary.images += images;
        summary.files.push(rel);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_tabs_newlines_or_quotes_are_quoted() {
        assert_eq!(field("plain <image 1>"), "plain <image 1>");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field("say \"hi\"\there"), "\"say \"\"hi\"\"\there\"");
    }
}
