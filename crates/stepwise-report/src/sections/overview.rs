//! The overview: what the run folder holds, the pipeline stages (when the demo made it), and the headline
//! numbers of the later sections.

use stepwise_core::Result;

use crate::doc::{Block, Section, Table};
use crate::read::JsonFile;
use crate::scan::{Found, Kind};

/// The demo's stage list (`demo.json`): `{"kind": "demo", "stages": [{"name", "summary"}, ...]}`.
pub fn read_stages(path: &std::path::Path) -> Result<Vec<(String, String)>> {
    let f = JsonFile::read(path)?;
    let mut out = Vec::new();
    for s in f.root().req("stages")?.items()? {
        out.push((s.req_str("name")?.to_string(), s.req_str("summary")?.to_string()));
    }
    Ok(out)
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Demo => "demo stage list",
        Kind::Corpus => "corpus",
        Kind::CleanReport => "cleaning report",
        Kind::Stats => "corpus statistics",
        Kind::Features => "feature store",
        Kind::TaskSet => "task set",
        Kind::Suite => "knob-sweep suite",
        Kind::Audit => "bias audit",
        Kind::Sequencing => "sequencing instances",
        Kind::SequencingResults => "sequencing results",
        Kind::Eval => "evaluation",
        Kind::R2vqQuestions => "R2VQ questions",
        Kind::R2vqTagging => "R2VQ tagger scores",
        Kind::Study => "model study",
        Kind::Model => "trained model",
        Kind::Annotation => "human judgements",
        Kind::Picture => "picture",
    }
}

pub fn section(found: &Found, stages: &[(String, String)], headlines: &[String]) -> Section {
    let mut s = Section::new("overview", "Overview");
    if !headlines.is_empty() {
        s.push(Block::Heading("Key numbers".into()));
        s.push(Block::List(headlines.to_vec()));
    }
    if !stages.is_empty() {
        s.push(Block::Heading("Pipeline".into()));
        s.push(Block::List(stages.iter().map(|(n, sum)| format!("`{n}`: {sum}")).collect()));
    }
    let mut t = Table::new(&["path", "what"]);
    for a in &found.artefacts {
        t.row(vec![format!("`{}`", a.rel), kind_name(a.kind).to_string()]);
    }
    s.push(Block::Details {
        summary: format!("What the run folder holds ({} outputs)", found.artefacts.len()),
        blocks: vec![Block::Table(t)],
    });
    s
}
