//! Human-annotated alternative orders: JSONL `{"id": PROCEDURE_ID, "orders": [[step, ...], ...]}`.
//!
//! Orders list 0-based step indices of the procedure, each at most once. An order may cover the whole procedure
//! or only some steps (e.g. the five steps an annotator saw); a window uses the orders that contain all of its
//! steps. Every error names the file, the line and the field.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;
use stepwise_core::json::{Obj, kind, read_jsonl};
use stepwise_core::{Error, Location, Procedure, Result};

#[derive(Debug, Clone, Default)]
pub struct AltOrders {
    /// The file they came from (for messages and manifests).
    pub path: PathBuf,
    /// Procedure id → orders over its step indices.
    pub orders: BTreeMap<String, Vec<Vec<usize>>>,
}

impl AltOrders {
    /// Read and validate against the corpus: ids must be procedures of the corpus, indices in range.
    pub fn read(path: &Path, procedures: &[Procedure]) -> Result<Self> {
        let steps: HashMap<&str, usize> = procedures.iter().map(|p| (p.id.as_str(), p.steps.len())).collect();
        let records = read_jsonl(path)?;
        if records.is_empty() {
            return Err(Error::Empty { path: path.to_path_buf(), what: "no alternative orders".into() });
        }
        let mut lines: HashMap<String, usize> = HashMap::new();
        let mut orders = BTreeMap::new();
        for r in records {
            let loc = Location::Line { line: r.line, column: None };
            let obj = Obj::new(&r.value, path, &loc, "")?;
            let id = obj.req_str("id")?;
            let Some(&n) = steps.get(id) else {
                return Err(obj.error("id", format!("procedure {id:?} is not in the corpus")));
            };
            let list = obj.req_array("orders")?;
            let mut parsed = Vec::with_capacity(list.len());
            for (k, o) in list.iter().enumerate() {
                let field = format!("orders[{k}]");
                let Value::Array(items) = o else {
                    return Err(obj.error(&field, format!("expected an array of step indices, found {}", kind(o))));
                };
                let mut seen = vec![false; n];
                let mut order = Vec::with_capacity(items.len());
                for (j, v) in items.iter().enumerate() {
                    let f = format!("orders[{k}][{j}]");
                    let Some(s) = v.as_u64() else {
                        return Err(obj.error(&f, format!("expected a step index, found {}", kind(v))));
                    };
                    let s = s as usize;
                    if s >= n {
                        return Err(obj.error(&f, format!("step {s} out of range (procedure {id:?} has {n} steps)")));
                    }
                    if seen[s] {
                        return Err(obj.error(&f, format!("step {s} appears twice in this order")));
                    }
                    seen[s] = true;
                    order.push(s);
                }
                if order.len() < 2 {
                    return Err(obj.error(&field, "an order needs at least two steps"));
                }
                parsed.push(order);
            }
            if let Some(first) = lines.insert(id.to_string(), r.line) {
                return Err(Error::Duplicate {
                    id: id.to_string(),
                    first: format!("{}:{first}", path.display()),
                    second: format!("{}:{}", path.display(), r.line),
                });
            }
            orders.insert(id.to_string(), parsed);
        }
        Ok(AltOrders { path: path.to_path_buf(), orders })
    }

    pub fn get(&self, procedure: &str) -> Option<&[Vec<usize>]> {
        self.orders.get(procedure).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::Step;

    fn procs() -> Vec<Procedure> {
        vec![Procedure { id: "p".into(), steps: vec![Step::default(); 4], ..Default::default() }]
    }

    fn read(text: &str) -> Result<AltOrders> {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("alt.jsonl");
        std::fs::write(&f, text).unwrap();
        AltOrders::read(&f, &procs())
    }

    #[test]
    fn valid_file_reads() {
        let a = read("{\"id\":\"p\",\"orders\":[[0,2,1,3],[1,0]]}\n").unwrap();
        assert_eq!(a.get("p").unwrap(), &[vec![0, 2, 1, 3], vec![1, 0]]);
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = read("\n{\"id\":\"p\",\"orders\":[[0,1],[0,7]]}\n").unwrap_err().to_string();
        assert!(e.contains("alt.jsonl:2") && e.contains("orders[1][1]") && e.contains("out of range"), "{e}");
        let e = read("{\"id\":\"q\",\"orders\":[]}\n").unwrap_err().to_string();
        assert!(e.contains("field `id`") && e.contains("not in the corpus"), "{e}");
        let e = read("{\"id\":\"p\",\"orders\":[[1,1]]}\n").unwrap_err().to_string();
        assert!(e.contains("orders[0][1]") && e.contains("twice"), "{e}");
        let e = read("{\"id\":\"p\",\"orders\":[]}\n{\"id\":\"p\",\"orders\":[]}\n").unwrap_err().to_string();
        assert!(e.contains("alt.jsonl:1") && e.contains("alt.jsonl:2"), "{e}");
        let e = read("{\"id\":\"p\",\"orders\":[[\"a\"]]}\n").unwrap_err().to_string();
        assert!(e.contains("orders[0][0]") && e.contains("a string"), "{e}");
    }
}
