//! `stepwise r2vq order`: event-ordering instances from R2VQ annotation (R2VQ §4.2).

use std::path::PathBuf;

use stepwise_core::Manifest;
use stepwise_core::output::OutputDir;
use stepwise_core::sequencing::{INSTANCES_JSONL, INSTANCES_PARQUET, SequencingInstance};
use stepwise_ingest::readers::r2vq_conllu::read_r2vq_conllu;
use stepwise_tasks::r2vq::event_ordering::event_ordering;
use stepwise_tasks::sequencing::write::{write_instances_jsonl, write_instances_parquet};

/// Write the event-ordering study's inputs: a sentence corpus and two sequencing folders.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise r2vq order test_crl_srl.csv -o r2vq-order\n  \
    stepwise embed r2vq-order/sentences -e tfidf -o r2vq-order/features\n  \
    stepwise baseline r2vq-order/event --model pairwise --features r2vq-order/features -o event.jsonl\n  \
    stepwise eval r2vq-order/event -p event.jsonl --split test --by-length 2,3-5,6-10\n\n\
    OUT/sentences is a corpus with one procedure per recipe whose steps are its sentences; OUT/event and \
    OUT/sent are sequencing folders over it (items are sentences, `step` their index), split by recipe. EVENT: \
    for each ingredient entity, the sentences with a mention carrying its COREF id (explicit or coreferent), in \
    document order; an entity with the same sentences as another gives no second instance. SENT: for each EVENT \
    instance of N sentences, N consecutive sentences of the same recipe from a seeded random start.")]
pub struct OrderArgs {
    /// An annotated R2VQ file in the SemEval layout.
    pub input: PathBuf,
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Train, val and test fractions of the recipes.
    #[arg(long, value_name = "T,V,T", default_value = "0.6,0.2,0.2")]
    pub split: String,
    /// Also count a sentence whose event has the entity as a hidden argument (HIDDEN Drop=, Shadow=, ...).
    #[arg(long)]
    pub with_hidden: bool,
    /// Replace an existing output folder.
    #[arg(long)]
    pub force: bool,
}

pub(super) fn run_order(a: OrderArgs) -> anyhow::Result<()> {
    let doc = read_r2vq_conllu(&a.input)?;
    let fractions = super::super::generate::parse_split(&a.split)?;
    let made = event_ordering(&doc, fractions, a.seed, a.with_hidden);
    let out = OutputDir::create(&a.output, a.force)?;
    let mut corpus_manifest = Manifest::new("r2vq-sentences").with_seed(a.seed);
    corpus_manifest.add_inputs(std::slice::from_ref(&a.input))?;
    let sentences = out.path().join("sentences");
    std::fs::create_dir_all(&sentences).map_err(|e| stepwise_core::Error::io(&sentences, e))?;
    stepwise_core::corpus::write_corpus_files(&sentences, &made.sentences, &mut corpus_manifest)?;
    for (name, instances) in [("event", &made.event), ("sent", &made.sent)] {
        let dir = out.path().join(name);
        std::fs::create_dir_all(&dir).map_err(|e| stepwise_core::Error::io(&dir, e))?;
        write_instances_jsonl(&dir.join(INSTANCES_JSONL), instances)?;
        write_instances_parquet(&dir.join(INSTANCES_PARQUET), instances)?;
        let mut m = Manifest::new(stepwise_core::TaskFamily::Sequencing.manifest_kind()).with_seed(a.seed);
        m.add_inputs(std::slice::from_ref(&a.input))?;
        m.count("instances", instances.len() as u64);
        for (split, n) in per_split(instances) {
            m.count(&format!("instances_{split}"), n as u64);
        }
        m.param("study", format!("r2vq event ordering: {name}"));
        m.write(&dir)?;
    }
    let mut m = Manifest::new("r2vq-order").with_seed(a.seed);
    m.add_inputs(std::slice::from_ref(&a.input))?;
    m.param("with_hidden", a.with_hidden);
    m.count("recipes", doc.recipes.len() as u64);
    m.count("ingredient_entities", made.entities as u64);
    m.count("single_sentence_entities", made.single_sentence as u64);
    m.count("duplicate_sentence_sets", made.duplicates as u64);
    m.count("event_instances", made.event.len() as u64);
    m.count("sent_instances", made.sent.len() as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        let buckets = length_buckets(&made.event);
        eprintln!(
            "{} recipes, {} ingredient entities ({} in one sentence, {} repeating another's sentences): {} EVENT and \
             {} SENT instances (N = 2: {}, 3-5: {}, 6-10: {}, 11+: {}) into {}",
            doc.recipes.len(),
            made.entities,
            made.single_sentence,
            made.duplicates,
            made.event.len(),
            made.sent.len(),
            buckets[0],
            buckets[1],
            buckets[2],
            buckets[3],
            dest.display()
        );
    }
    Ok(())
}

fn per_split(instances: &[SequencingInstance]) -> std::collections::BTreeMap<&str, usize> {
    let mut m = std::collections::BTreeMap::new();
    for i in instances {
        *m.entry(i.split.as_str()).or_default() += 1;
    }
    m
}

/// Instances with N = 2, 3–5, 6–10 and 11 or more items (the paper's buckets, and the rest).
fn length_buckets(instances: &[SequencingInstance]) -> [usize; 4] {
    let mut b = [0; 4];
    for i in instances {
        b[match i.items.len() {
            0..=2 => 0,
            3..=5 => 1,
            6..=10 => 2,
            _ => 3,
        }] += 1;
    }
    b
}
