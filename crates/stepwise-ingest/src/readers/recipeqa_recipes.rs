//! RecipeQA recipes as JSON: `{"recipes": [recipe, ...]}` (the layout of ../shared's `recipes-dev.json`), or the
//! same list under `"data"` or at the top level. A recipe is `{recipe_id, steps: [{id, title, body, images}]}` with
//! optional `title`, `category` (or `explorer_category`), `license`/`licence`; any other field is kept verbatim.
//!
//! RecipeQA's own `recipes.json` (with per-recipe licences) was not available to check, so this reader accepts the
//! documented step schema of the question files (`id`, `title`, `body`, `images`, optional `videos`) and is lenient
//! about the wrapper; a file whose recipes use other field names fails with an error naming the field.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stepwise_core::json::{Obj, kind, read_json};
use stepwise_core::{Error, Location, Procedure, Result, Step};

use super::step_key;
use crate::format::{Format, Ingested, Origin, ReadOptions, Sniff, contains, skip_ws};

pub struct RecipeQaRecipes;

const RECIPE_KEYS: &[&str] =
    &["recipe_id", "id", "title", "steps", "category", "explorer_category", "license", "licence", "lang"];
const STEP_KEYS: &[&str] = &["title", "body", "text", "images"];

impl Format for RecipeQaRecipes {
    fn name(&self) -> &'static str {
        "recipeqa-recipes"
    }

    fn describe(&self) -> &'static str {
        "RecipeQA recipes JSON ({\"recipes\": [{recipe_id, steps: [{id, title, body, images}]}]}, or that list \
         under \"data\" or at the top level)"
    }

    fn sniff(&self, _path: &Path, head: &[u8]) -> Sniff {
        let h = skip_ws(head);
        let recipe_like = contains(h, b"\"recipe_id\"") && contains(h, b"\"steps\"") && contains(h, b"\"body\"");
        if recipe_like && !contains(h, b"\"choice_list\"") && (h.starts_with(b"{") || h.starts_with(b"[")) {
            Sniff::Yes
        } else {
            Sniff::No
        }
    }

    fn read(&self, inputs: &[PathBuf], opts: &ReadOptions) -> Result<Ingested> {
        let mut out = Ingested::default();
        for path in inputs {
            let v = read_json(path)?;
            let (list, list_name, source) = match &v {
                Value::Array(a) => (a, "", None),
                Value::Object(_) => {
                    let top = Obj::new(&v, path, &Location::File, "")?;
                    let key = if top.get("recipes").is_some() { "recipes" } else { "data" };
                    (top.req_array(key)?, key, top.opt_str("source")?)
                }
                other => {
                    return Err(Error::field(
                        path,
                        Location::File,
                        "(top level)",
                        format!("expected an object with `recipes` or an array, found {}", kind(other)),
                    ));
                }
            };
            if list.is_empty() {
                return Err(Error::Empty { path: path.clone(), what: format!("no recipes in `{list_name}`") });
            }
            let image_base = opts.image_base(path);
            for (i, r) in list.iter().enumerate() {
                let record = if list_name.is_empty() { format!("[{i}]") } else { format!("{list_name}[{i}]") };
                let p = read_recipe(r, path, &Location::Record(record.clone()), source)?;
                out.push(p, Origin { file: path.clone(), record, image_base: image_base.clone() });
            }
        }
        Ok(out)
    }
}

fn read_recipe(v: &Value, path: &Path, loc: &Location, source: Option<&str>) -> Result<Procedure> {
    let o = Obj::new(v, path, loc, "")?;
    let id = match o.opt_str("recipe_id")? {
        Some(id) => id,
        None => o.req_str("id").map_err(|_| o.error("recipe_id", "missing (neither `recipe_id` nor `id`)"))?,
    };
    if id.trim().is_empty() {
        return Err(o.error("recipe_id", "must not be empty"));
    }
    let mut steps = Vec::new();
    for (i, s) in o.req_array("steps")?.iter().enumerate() {
        let so = Obj::new(s, path, loc, &format!("steps[{i}]."))?;
        let text = match so.opt_str("body")? {
            Some(b) => Some(b),
            None => so.opt_str("text")?,
        };
        let step = Step {
            title: so.opt_str("title")?.map(str::to_string),
            text: text.map(str::to_string),
            images: so.opt_str_array("images")?.unwrap_or_default(),
            extra: so.extra(STEP_KEYS),
            ..Default::default()
        };
        steps.push((step_key(so.get("id").unwrap_or(&Value::Null)), i, step));
    }
    // Step-id order (as the question reader); file order among steps without ids.
    steps.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let category = match o.opt_str("category")? {
        Some(c) => Some(c),
        None => o.opt_str("explorer_category")?,
    };
    let license = match o.opt_str("license")? {
        Some(l) => Some(l),
        None => o.opt_str("licence")?,
    };
    Ok(Procedure {
        id: id.to_string(),
        title: o.opt_str("title")?.map(str::to_string),
        source: Some(source.unwrap_or("RecipeQA").to_string()),
        license: license.map(str::to_string),
        lang: Some(o.opt_str("lang")?.unwrap_or("en").to_string()),
        category: category.map(str::to_string),
        steps: steps.into_iter().map(|(_, _, s)| s).collect(),
        extra: o.extra(RECIPE_KEYS),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_wrapped_and_bare_lists() {
        let td = tempfile::tempdir().unwrap();
        let f = td.path().join("recipes.json");
        std::fs::write(
            &f,
            r#"{"source": "s", "recipes": [{"recipe_id": "r", "explorer_category": "pie", "qids": {"a": "b"},
                 "steps": [{"id": 2, "body": "B", "title": "T"}, {"id": 1, "body": "A", "images": ["r_1_0.jpg"]}]}]}"#,
        )
        .unwrap();
        let got = RecipeQaRecipes.read(std::slice::from_ref(&f), &ReadOptions::default()).unwrap();
        let p = &got.procedures[0];
        assert_eq!((p.category.as_deref(), p.source.as_deref()), (Some("pie"), Some("s")));
        assert_eq!(p.steps[0].text.as_deref(), Some("A"));
        assert_eq!(p.steps[0].extra["id"], 1);
        assert!(p.extra.contains_key("qids"));
        assert_eq!(got.origins[0].record, "recipes[0]");

        std::fs::write(&f, r#"[{"recipe_id": "r", "steps": [{"id": 1, "body": 3}]}]"#).unwrap();
        let e = RecipeQaRecipes.read(&[f], &ReadOptions::default()).unwrap_err().to_string();
        assert!(e.contains("[0]: field `steps[0].body`: expected a string"), "{e}");
    }
}
