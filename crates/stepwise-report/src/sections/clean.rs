//! `stepwise clean` reports (`clean_report.json`): what each cleaning rule changed and what the filters dropped.

use stepwise_core::Result;

use super::count;
use crate::doc::{Block, Section, Table};
use crate::read::JsonFile;
use crate::scan::Artefact;

pub struct CleanInfo {
    pub rel: String,
    pub procedures: (u64, u64),
    pub steps: (u64, u64),
    /// rule → (edits, fields changed)
    pub rules: Vec<(String, u64, u64)>,
    /// filter → (procedures, steps) dropped
    pub filters: Vec<(String, Option<u64>, Option<u64>)>,
}

pub fn read(a: &Artefact) -> Result<CleanInfo> {
    let f = JsonFile::read(&a.path)?;
    let r = f.root();
    let mut rules = Vec::new();
    if let Some(rs) = r.get("rules")? {
        for (name, v) in rs.entries()? {
            rules.push((name.to_string(), v.req_u64("edits")?, v.req_u64("fields_changed")?));
        }
    }
    let mut filters = Vec::new();
    if let Some(fs) = r.get("filters")? {
        for (name, v) in fs.entries()? {
            filters.push((name.to_string(), v.opt_u64("procedures")?, v.opt_u64("steps")?));
        }
    }
    Ok(CleanInfo {
        rel: a.rel.clone(),
        procedures: (r.req_u64("procedures_in")?, r.req_u64("procedures_out")?),
        steps: (r.req_u64("steps_in")?, r.req_u64("steps_out")?),
        rules,
        filters,
    })
}

pub fn section(cleans: &[CleanInfo]) -> Option<Section> {
    if cleans.is_empty() {
        return None;
    }
    let mut s = Section::new("cleaning", "Cleaning");
    for c in cleans {
        if cleans.len() > 1 {
            s.push(Block::Heading(format!("`{}`", c.rel)));
        }
        s.para(format!(
            "{} → {} procedures, {} → {} steps (`{}`).",
            count(c.procedures.0),
            count(c.procedures.1),
            count(c.steps.0),
            count(c.steps.1),
            c.rel
        ));
        let mut t = Table::new(&["rule", ">edits", ">fields changed"]);
        for (name, e, f) in &c.rules {
            t.row(vec![name.replace('_', " "), count(*e), count(*f)]);
        }
        s.table(t);
        let mut ft = Table::new(&["filter", ">procedures dropped", ">steps dropped"]);
        let o = |v: &Option<u64>| v.map_or("–".into(), count);
        for (name, p, st) in &c.filters {
            ft.row(vec![name.replace('_', " "), o(p), o(st)]);
        }
        s.table(ft);
    }
    Some(s)
}
