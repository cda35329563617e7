//! Parquet copies of stepwise tables (Snappy-compressed, loadable with pyarrow and HF `datasets`).
//!
//! [`write_procedures_parquet`] writes the procedure schema with nested steps; [`write_table`] writes any flat
//! table (task sets, counts, results) from typed columns.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, ListBuilder, StringBuilder, StructBuilder};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::json::to_canonical_string;
use crate::procedure::Procedure;

/// A typed column of a flat table.
#[derive(Debug, Clone)]
pub enum Column {
    Str(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    StrList(Vec<Option<Vec<String>>>),
    StrListList(Vec<Option<Vec<Vec<String>>>>),
}

impl Column {
    fn len(&self) -> usize {
        match self {
            Column::Str(v) => v.len(),
            Column::Int(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Bool(v) => v.len(),
            Column::StrList(v) => v.len(),
            Column::StrListList(v) => v.len(),
        }
    }

    fn to_array(&self) -> ArrayRef {
        match self {
            Column::Str(v) => Arc::new(StringArray::from(v.clone())),
            Column::Int(v) => Arc::new(Int64Array::from(v.clone())),
            Column::Float(v) => Arc::new(Float64Array::from(v.clone())),
            Column::Bool(v) => Arc::new(BooleanArray::from(v.clone())),
            Column::StrList(v) => {
                let mut b = ListBuilder::new(StringBuilder::new());
                for row in v {
                    match row {
                        Some(items) => {
                            for s in items {
                                b.values().append_value(s);
                            }
                            b.append(true);
                        }
                        None => b.append(false),
                    }
                }
                Arc::new(b.finish())
            }
            Column::StrListList(v) => {
                let mut b = ListBuilder::new(ListBuilder::new(StringBuilder::new()));
                for row in v {
                    match row {
                        Some(lists) => {
                            for items in lists {
                                for s in items {
                                    b.values().values().append_value(s);
                                }
                                b.values().append(true);
                            }
                            b.append(true);
                        }
                        None => b.append(false),
                    }
                }
                Arc::new(b.finish())
            }
        }
    }
}

/// Write a flat table of named columns (all the same length) to `path`, atomically.
pub fn write_table(path: &Path, columns: &[(&str, Column)]) -> Result<()> {
    let n = columns.first().map(|(_, c)| c.len()).unwrap_or(0);
    if let Some((name, _)) = columns.iter().find(|(_, c)| c.len() != n) {
        return Err(Error::runtime(format!("parquet table {}: column {name} has a different length", path.display())));
    }
    let arrays: Vec<(String, ArrayRef)> = columns.iter().map(|(name, c)| (name.to_string(), c.to_array())).collect();
    write_batch(path, arrays)
}

fn write_batch(path: &Path, arrays: Vec<(String, ArrayRef)>) -> Result<()> {
    let fields: Vec<Field> =
        arrays.iter().map(|(name, a)| Field::new(name.as_str(), a.data_type().clone(), true)).collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), arrays.into_iter().map(|(_, a)| a).collect())
        .map_err(|e| Error::runtime(format!("{}: building record batch: {e}", path.display())))?;
    crate::output::write_file_atomic(path, |w| {
        let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
        let mut writer = ArrowWriter::try_new(w, schema, Some(props)).map_err(std::io::Error::other)?;
        writer.write(&batch).map_err(std::io::Error::other)?;
        writer.close().map_err(std::io::Error::other)?;
        Ok(())
    })
}

fn step_fields() -> Fields {
    Fields::from(vec![
        Field::new("title", DataType::Utf8, true),
        Field::new("text", DataType::Utf8, true),
        Field::new("images", DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), true),
        Field::new("annotations", DataType::Utf8, true),
    ])
}

/// Write procedures with the interchange schema: one row per procedure, `steps` as a list of structs
/// (`title`, `text`, `images`, `annotations`), annotations and unknown keys as canonical JSON strings.
pub fn write_procedures_parquet(path: &Path, procedures: &[Procedure]) -> Result<()> {
    let fields = step_fields();
    let struct_builder = StructBuilder::new(
        fields.clone(),
        vec![
            Box::new(StringBuilder::new()) as Box<dyn ArrayBuilder>,
            Box::new(StringBuilder::new()),
            Box::new(ListBuilder::new(StringBuilder::new())),
            Box::new(StringBuilder::new()),
        ],
    );
    let mut steps = ListBuilder::new(struct_builder);
    for p in procedures {
        let sb = steps.values();
        for s in &p.steps {
            sb.field_builder::<StringBuilder>(0).expect("title builder").append_option(s.title.as_deref());
            sb.field_builder::<StringBuilder>(1).expect("text builder").append_option(s.text.as_deref());
            {
                let ib = sb.field_builder::<ListBuilder<StringBuilder>>(2).expect("images builder");
                for im in &s.images {
                    ib.values().append_value(im);
                }
                ib.append(true);
            }
            let ann = s.annotations.as_ref().map(|a| to_canonical_string(&serde_json::to_value(a).expect("serialize")));
            sb.field_builder::<StringBuilder>(3).expect("annotations builder").append_option(ann);
            sb.append(true);
        }
        steps.append(true);
    }
    let steps_array: ArrayRef = Arc::new(steps.finish());

    let s = |f: fn(&Procedure) -> Option<String>| Column::Str(procedures.iter().map(f).collect());
    let columns = vec![
        ("id", s(|p| Some(p.id.clone()))),
        ("title", s(|p| p.title.clone())),
        ("source", s(|p| p.source.clone())),
        ("license", s(|p| p.license.clone())),
        ("lang", s(|p| p.lang.clone())),
        ("category", s(|p| p.category.clone())),
        ("ingredients", Column::StrList(procedures.iter().map(|p| p.ingredients.clone()).collect())),
        ("gallery", Column::StrList(procedures.iter().map(|p| p.gallery.clone()).collect())),
        (
            "annotations",
            s(|p| p.annotations.as_ref().map(|a| to_canonical_string(&serde_json::to_value(a).expect("serialize")))),
        ),
        (
            "extra",
            s(|p| {
                (!p.extra.is_empty()).then(|| to_canonical_string(&serde_json::to_value(&p.extra).expect("serialize")))
            }),
        ),
    ];
    let mut arrays: Vec<(String, ArrayRef)> = Vec::new();
    for (name, c) in &columns {
        arrays.push((name.to_string(), c.to_array()));
        if *name == "category" {
            arrays.push(("steps".to_string(), steps_array.clone()));
        }
    }
    write_batch(path, arrays)
}

/// The number of rows of a Parquet file (for checks and tests).
pub fn row_count(path: &Path) -> Result<u64> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let f = File::open(path).map_err(|e| Error::io(path, e))?;
    let r = SerializedFileReader::new(f).map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?;
    Ok(r.metadata().file_metadata().num_rows() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procedure::Step;

    #[test]
    fn procedures_parquet_has_one_row_per_procedure() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("p.parquet");
        let procs: Vec<Procedure> = (0..3)
            .map(|i| Procedure {
                id: format!("p{i}"),
                steps: vec![Step { text: Some("x".into()), images: vec!["a.jpg".into()], ..Default::default() }],
                ..Default::default()
            })
            .collect();
        write_procedures_parquet(&f, &procs).unwrap();
        assert_eq!(row_count(&f).unwrap(), 3);
    }

    #[test]
    fn table_rejects_ragged_columns() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("t.parquet");
        let r = write_table(&f, &[("a", Column::Int(vec![Some(1)])), ("b", Column::Int(vec![]))]);
        assert!(r.is_err());
        write_table(
            &f,
            &[
                ("a", Column::Int(vec![Some(1), None])),
                ("b", Column::StrListList(vec![Some(vec![vec!["x".into()]]), None])),
            ],
        )
        .unwrap();
        assert_eq!(row_count(&f).unwrap(), 2);
    }
}
