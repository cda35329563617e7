//! R2VQ question lists in JSON: `[{"q_id": "2-3", "question": "...", "doc_id": " r-378"}, ...]` (the layout of
//! HIT-QMUL's `test_qa.json`; recipe ids there carry a leading space, which is stripped).

use std::path::Path;

use serde_json::Value;
use stepwise_core::error::{Error, Location, Result};
use stepwise_core::json::{Obj, read_json};
use stepwise_core::r2vq::QuestionId;

/// A question addressed to a recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedQuestion {
    pub recipe: String,
    pub id: QuestionId,
    pub question: String,
}

/// Read a question list; errors name the file, the record (`[12]`) and the field.
pub fn read_question_list(path: &Path) -> Result<Vec<ListedQuestion>> {
    let value = read_json(path)?;
    let Value::Array(items) = value else {
        return Err(Error::field(path, Location::File, "", "must be a JSON list of {q_id, question, doc_id} records"));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let location = Location::Record(format!("[{i}]"));
        let obj = Obj::new(item, path, &location, "")?;
        let id = obj.req_str("q_id")?.trim().parse().map_err(|e: String| obj.error("q_id", e))?;
        let recipe = obj.req_str("doc_id")?.trim().to_string();
        if recipe.is_empty() {
            return Err(obj.error("doc_id", "is empty"));
        }
        out.push(ListedQuestion { recipe, id, question: obj.req_str("question")?.to_string() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_lists_are_read_and_bad_records_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.json");
        std::fs::write(&p, r#"[{"q_id": "2-3", "question": "where?", "doc_id": " r-378"}]"#).unwrap();
        let q = read_question_list(&p).unwrap();
        assert_eq!(
            q,
            [ListedQuestion { recipe: "r-378".into(), id: "2-3".parse().unwrap(), question: "where?".into() }]
        );
        std::fs::write(
            &p,
            r#"[{"q_id": "2-3", "question": "where?", "doc_id": "r"}, {"q_id": "x", "question": "q", "doc_id": "r"}]"#,
        )
        .unwrap();
        let e = read_question_list(&p).unwrap_err().to_string();
        assert!(e.contains("[1]") && e.contains("q_id"), "{e}");
        std::fs::write(&p, r#"{"q_id": "2-3"}"#).unwrap();
        assert!(read_question_list(&p).unwrap_err().to_string().contains("list"));
    }
}
