//! The Hugging Face dataset layout: `data/<config>/<split>-00000-of-00001.parquet` per config and split, and a
//! dataset card `README.md` whose YAML header lists the configs and their files (what `datasets.load_dataset`
//! and the Hub's viewer read).
//!
//! Images are the `datasets` `Image` feature: a struct of the file's bytes (the corpus's JPEG/PNG, not
//! re-encoded) and its path; the feature types are in the Parquet schema's `huggingface` metadata, as `datasets`
//! writes them itself, so `load_dataset` decodes `images` to PIL images without a loading script.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Int64Builder, ListBuilder, StringBuilder, StructBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::json;
use stepwise_core::output::write_string_atomic;
use stepwise_core::{Error, Question, Result};

use super::render::{LAYOUT_DOC, letter};
use super::{Config, ExportSummary, Prepared, Source, write_chunked};

/// Questions per Parquet row group.
const ROWS_PER_GROUP: usize = super::CHUNK;

/// The Parquet file of one config and split, relative to the export folder.
pub fn data_file(config: &str, split: &str) -> String {
    format!("data/{config}/{split}-00000-of-00001.parquet")
}

/// Write the Parquet files and the dataset card of `source` into `out`.
pub fn write(source: &Source, out: &Path) -> Result<ExportSummary> {
    let mut summary = ExportSummary { format: "hf".into(), ..Default::default() };
    write_data(source, out, &mut summary)?;
    write_string_atomic(&out.join("README.md"), &card(source, &summary))?;
    summary.files.push("README.md".into());
    Ok(summary)
}

/// The Parquet files of every config and split.
fn write_data(source: &Source, out: &Path, summary: &mut ExportSummary) -> Result<()> {
    let image_root = source.corpus.as_ref().map(|c| c.image_root.as_path());
    for config in &source.configs {
        for (split, questions) in &config.splits {
            let rel = data_file(&config.name, split);
            let images = write_split(&out.join(&rel), config, split, questions, image_root)?;
            summary.configs.entry(config.name.clone()).or_default().insert(split.clone(), questions.len());
            summary.images += images;
            summary.files.push(rel);
        }
    }
    Ok(())
}

fn image_fields() -> Fields {
    Fields::from(vec![Field::new("bytes", DataType::Binary, true), Field::new("path", DataType::Utf8, true)])
}

fn schema() -> Schema {
    let list = |item: DataType| DataType::List(Arc::new(Field::new("item", item, true)));
    let fields = vec![
        Field::new("qid", DataType::Utf8, true),
        Field::new("recipe_id", DataType::Utf8, true),
        Field::new("task", DataType::Utf8, true),
        Field::new("setting", DataType::Utf8, true),
        Field::new("split", DataType::Utf8, true),
        Field::new("question_text", DataType::Utf8, true),
        Field::new("prompt", DataType::Utf8, true),
        Field::new("options", list(DataType::Utf8), true),
        Field::new("answer", DataType::Int64, true),
        Field::new("answer_letter", DataType::Utf8, true),
        Field::new("images", list(DataType::Struct(image_fields())), true),
        Field::new("source", DataType::Utf8, true),
    ];
    let string = json!({"dtype": "string", "_type": "Value"});
    let features = json!({
        "qid": string, "recipe_id": string, "task": string, "setting": string, "split": string,
        "question_text": string, "prompt": string,
        "options": {"feature": string, "_type": "Sequence"},
        "answer": {"dtype": "int64", "_type": "Value"},
        "answer_letter": string,
        "images": {"feature": {"_type": "Image"}, "_type": "Sequence"},
        "source": string,
    });
    let meta = json!({"info": {"features": features}});
    let mut metadata = std::collections::HashMap::new();
    metadata.insert("huggingface".to_string(), stepwise_core::json::to_canonical_string(&meta));
    Schema::new(fields).with_metadata(metadata)
}

/// One config's split: returns the number of images written.
fn write_split(
    path: &Path,
    config: &Config,
    split: &str,
    questions: &[Question],
    image_root: Option<&Path>,
) -> Result<usize> {
    let schema = Arc::new(schema());
    write_chunked(path, &config.source, questions, image_root, |w, chunks| {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROWS_PER_GROUP))
            .build();
        let mut writer = ArrowWriter::try_new(w, schema.clone(), Some(props)).map_err(std::io::Error::other)?;
        while let Some(prepared) = chunks.next_chunk()? {
            let batch = batch(&schema, config, split, &prepared).map_err(std::io::Error::other)?;
            writer.write(&batch).map_err(std::io::Error::other)?;
        }
        writer.close().map(drop).map_err(std::io::Error::other)
    })
}

fn batch(
    schema: &Arc<Schema>,
    config: &Config,
    split: &str,
    rows: &[Prepared],
) -> std::result::Result<RecordBatch, Error> {
    let strings = |f: &dyn Fn(&Prepared) -> Option<String>| -> ArrayRef {
        let mut b = StringBuilder::new();
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let mut options = ListBuilder::new(StringBuilder::new());
    let mut answer = Int64Builder::new();
    let item = StructBuilder::new(image_fields(), vec![Box::new(BinaryBuilder::new()), Box::new(StringBuilder::new())]);
    let mut images = ListBuilder::new(item);
    for r in rows {
        for o in &r.rendered.options {
            options.values().append_value(o);
        }
        options.append(true);
        answer.append_value(r.rendered.answer as i64);
        for (path, bytes) in &r.images {
            let s = images.values();
            s.field_builder::<BinaryBuilder>(0).expect("bytes field").append_value(bytes);
            s.field_builder::<StringBuilder>(1).expect("path field").append_value(path);
            s.append(true);
        }
        images.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        strings(&|r| Some(r.question.qid.clone())),
        strings(&|r| Some(r.question.recipe_id.clone())),
        strings(&|_| Some(config.task.clone())),
        strings(&|_| config.setting.clone()),
        strings(&|_| Some(split.to_string())),
        strings(&|r| r.question.question_text.clone()),
        strings(&|r| Some(r.rendered.prompt.clone())),
        Arc::new(options.finish()),
        Arc::new(answer.finish()),
        strings(&|r| Some(letter(r.rendered.answer))),
        Arc::new(images.finish()),
        strings(&|r| Some(stepwise_core::json::to_canonical_string(&r.question.to_json()))),
    ];
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| Error::runtime(format!("building a record batch: {e}")))
}

/// The YAML `configs` header of a dataset card, configs in `order` (the first is the default).
pub fn configs_yaml(summary: &ExportSummary, order: &[&str]) -> String {
    let mut y = String::from("configs:\n");
    let configs = order.iter().filter_map(|c| summary.configs.get_key_value(*c));
    for (i, (config, splits)) in configs.enumerate() {
        let _ = writeln!(y, "- config_name: {config}");
        if i == 0 {
            y.push_str("  default: true\n");
        }
        y.push_str("  data_files:\n");
        for split in splits.keys() {
            let _ = writeln!(y, "  - split: {split}\n    path: {}", data_file(config, split));
        }
    }
    y
}

/// The dataset card: YAML header, then what the data is, its counts, columns, prompt layout, licences and
/// citations.
pub fn card(source: &Source, summary: &ExportSummary) -> String {
    let name = source.path.file_name().map_or_else(|| "stepwise".into(), |n| n.to_string_lossy().into_owned());
    let total = summary.questions();
    let size = match total {
        0..1_000 => "n<1K",
        1_000..10_000 => "1K<n<10K",
        10_000..100_000 => "10K<n<100K",
        100_000..1_000_000 => "100K<n<1M",
        _ => "n>1M",
    };
    let mut s = String::from("---\n");
    let _ = writeln!(s, "pretty_name: \"{}\"", format!("stepwise {} {name}", source.kind).replace(['"', '\\'], "'"));
    s.push_str("license: other\nlanguage:\n- en\ntask_categories:\n- visual-question-answering\n- multiple-choice\n");
    s.push_str("tags:\n- procedural-comprehension\n- recipeqa\n- stepwise\n");
    let _ = writeln!(s, "size_categories:\n- {size}");
    let order: Vec<&str> = source.configs.iter().map(|c| c.name.as_str()).collect();
    s.push_str(&configs_yaml(summary, &order));
    s.push_str("---\n\n");
    let _ = writeln!(s, "# {name}\n");
    let _ = writeln!(
        s,
        "Multiple-choice questions on step-by-step procedures, exported by stepwise {} from the {} `{}` \
         ({} questions, {} images embedded, {} configs). Each config is one task{}; {}\n",
        env!("CARGO_PKG_VERSION"),
        source.kind,
        name,
        total,
        summary.images,
        summary.configs.len(),
        if source.kind == "suite" { " under one setting (`<setting>-<task>`)" } else { "" },
        if source.manifest.is_some() {
            "stepwise splits by procedure: no procedure is in two splits."
        } else {
            "the splits are the source file's own."
        },
    );
    if source.kind == "suite" {
        s.push_str(
            "## Settings\n\n`recipeqa`: questions made as RecipeQA made them. `knobs-k1-k2-k3`: Meta-RecipeQA's \
             control knobs — k1 question overlap (1 = fewer questions per procedure, answered steps removed), k2 \
             hard negatives (0 = from the ball closest to the answer, 1 = from the shell around it), k3 negatives \
             near the question (1 = one negative at least as close to the question as the answer). Settings with \
             the same k1 ask the same questions with different negatives. Visual ordering has no knob 3: its \
             k3 = 1 settings are the k3 = 0 ones, which is why those configs are absent.\n\n",
        );
    }
    if let Some(generation) = source.manifest.as_ref().and_then(|m| m.params.get("generate")) {
        let _ = writeln!(
            s,
            "Generation parameters (from the {}'s manifest):\n\n```json\n{}\n```\n",
            source.kind, generation
        );
    }
    let splits: BTreeSet<&String> = summary.configs.values().flat_map(|m| m.keys()).collect();
    s.push_str("## Counts\n\n| config |");
    for sp in &splits {
        let _ = write!(s, " {sp} |");
    }
    s.push_str("\n|---|");
    s.push_str(&"---:|".repeat(splits.len()));
    s.push('\n');
    for (config, m) in &summary.configs {
        let _ = write!(s, "| {config} |");
        for sp in &splits {
            let _ = write!(s, " {} |", m.get(*sp).copied().unwrap_or(0));
        }
        s.push('\n');
    }
    s.push_str(
        "\n## Columns\n\n`qid`, `recipe_id` (the procedure), `task`, `setting`, `split`, `question_text` (the \
         task's instruction), `prompt` (context and question with `<image N>` placeholders), `options` (one text \
         per choice), `answer` (0-based index into `options`), `answer_letter`, `images` (the `Image` feature: \
         the images the placeholders name, in order), `source` (the question as stepwise wrote it, RecipeQA's \
         JSON layout with stepwise's provenance under `meta`).\n\n## Prompt layout\n\n",
    );
    s.push_str(LAYOUT_DOC);
    s.push_str("\n\n## Licences\n\n");
    s.push_str(&licences(source));
    s.push_str(
        "\n## Citation\n\nRecipeQA (the tasks): Semih Yagcioglu, Aykut Erdem, Erkut Erdem, Nazli Ikizler-Cinbis. \
         RecipeQA: A Challenge Dataset for Multimodal Comprehension of Cooking Recipes. EMNLP 2018.\n\n\
         ```bibtex\n@inproceedings{yagcioglu2018recipeqa,\n  title={RecipeQA: A Challenge Dataset for Multimodal \
         Comprehension of Cooking Recipes},\n  author={Yagcioglu, Semih and Erdem, Aykut and Erdem, Erkut and \
         Ikizler-Cinbis, Nazli},\n  booktitle={Proceedings of EMNLP},\n  year={2018}\n}\n```\n\n\
         The control knobs follow Meta-RecipeQA's definitions (the settings above); step sequencing follows Wu et \
         al., Understanding Multimodal Procedural Knowledge by Sequencing Multimodal Instructional Manuals, ACL \
         2022.\n",
    );
    s
}

/// Licences of the procedures the questions come from, as the corpus records them.
fn licences(source: &Source) -> String {
    let Some(corpus) = &source.corpus else {
        return "The source corpus is unknown to this export; its licence applies to the texts and images.\n".into();
    };
    let used: BTreeSet<&str> =
        source.configs.iter().flat_map(|c| c.splits.values().flatten()).map(|q| q.recipe_id.as_str()).collect();
    let mut by: BTreeMap<(String, String), usize> = BTreeMap::new();
    for p in corpus.procedures.iter().filter(|p| used.contains(p.id.as_str())) {
        let licence = p.license.clone().unwrap_or_else(|| "unknown".into());
        let origin = p.source.clone().unwrap_or_else(|| "unknown".into());
        *by.entry((licence, origin)).or_insert(0) += 1;
    }
    let world = corpus.manifest.as_ref().and_then(|m| m.params.get("source")).and_then(|v| v.as_str())
        == Some("stepwise-world");
    let mut s = String::new();
    if world {
        s.push_str(
            "The procedures, texts and images are synthetic, made by stepwise's built-in world generator \
             (Apache-2.0, like stepwise).\n\n",
        );
    }
    if !by.is_empty() {
        s.push_str("Procedures used, by licence and source (as the corpus records them):\n\n| licence | source | procedures |\n|---|---|---:|\n");
        for ((l, o), n) in &by {
            let _ = writeln!(s, "| {l} | {o} | {n} |");
        }
        s.push_str("\nEach procedure's own licence applies to its text and images.\n");
    }
    s
}
