//! `stepwise neighbors FEATURES --id ID`: the nearest neighbours of items (or of new texts / images encoded with
//! the store's encoder) by exact search over the memory-mapped store.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use stepwise_core::Corpus;
use stepwise_features::items::ItemRef;
use stepwise_features::knn::{Filter, KnnOptions, Metric, knn};
use stepwise_features::registry::{DEFAULT_MODELS_DIR, EncoderContext};
use stepwise_features::{FeatureStore, Item};

use crate::cli_util::feature_error;
use crate::usage_bail;

/// Show the nearest neighbours of feature-store items, texts or images.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise neighbors features/w2v --id 'text:gnome-recipes/R_Borscht_by_sylvia#2' -k 5 --corpus corpus/\n  \
    stepwise neighbors features/descriptor --id image:images/ifixit/a.jpg --exclude-same-procedure --corpus corpus/\n  \
    stepwise neighbors features/tfidf --text 'whisk the eggs with sugar' --prefix text:\n\n\
    Distances are lower-is-closer: cosine 1 - cos, ip -<q,x>, l2 Euclidean. The query item itself is never listed.")]
pub struct Args {
    /// Feature-store folder (from `stepwise embed`).
    pub features: PathBuf,
    /// Query item id, repeatable (e.g. `text:{procedure}#{step}`, `image:{path}`).
    #[arg(long = "id", value_name = "ID")]
    pub ids: Vec<String>,
    /// Query text, repeatable, encoded with the store's encoder (text stores).
    #[arg(long = "text", value_name = "TEXT")]
    pub texts: Vec<String>,
    /// Query image file, repeatable, encoded with the store's encoder (image stores).
    #[arg(long = "image", value_name = "FILE")]
    pub images: Vec<PathBuf>,
    /// Neighbours per query.
    #[arg(short, long, default_value_t = 10)]
    pub k: usize,
    /// cosine, ip or l2.
    #[arg(long, default_value = "cosine")]
    pub metric: Metric,
    /// Skip candidates from the query's procedure (for image items this needs --corpus).
    #[arg(long)]
    pub exclude_same_procedure: bool,
    /// Only candidates whose id starts with this, e.g. `text:` (skips titles and strings).
    #[arg(long)]
    pub prefix: Option<String>,
    /// The corpus the features come from: shows step texts and maps images to their procedures.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Pretrained models folder (for --text / --image with pretrained encoders).
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
    /// Print JSON lines ({query, neighbors: [{id, distance}]}) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One query: a label, its vector, the store row it came from and its procedures.
struct Query {
    label: String,
    vector: Vec<f32>,
    row: Option<usize>,
    procedures: BTreeSet<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.ids.is_empty() && args.texts.is_empty() && args.images.is_empty() {
        usage_bail!("give at least one query: --id ID, --text TEXT or --image FILE");
    }
    let store = FeatureStore::open(&args.features).map_err(feature_error)?;
    let corpus = match &args.corpus {
        Some(p) => Some(Corpus::load(p)?),
        None => None,
    };
    let index = corpus.as_ref().map(CorpusIndex::new);
    if args.exclude_same_procedure
        && index.is_none()
        && args.ids.iter().any(|id| matches!(ItemRef::parse(id), Some(ItemRef::Image(_))))
    {
        usage_bail!("--exclude-same-procedure with image items needs --corpus (image ids do not name their procedure)");
    }
    let procedures_of = |id: &str| -> BTreeSet<String> {
        match ItemRef::parse(id) {
            Some(r) if r.procedure().is_some() => r.procedure().into_iter().map(str::to_string).collect(),
            Some(ItemRef::Image(path)) => index.as_ref().map(|i| i.image_procedures(path)).unwrap_or_default(),
            _ => BTreeSet::new(),
        }
    };

    let mut queries = Vec::new();
    for id in &args.ids {
        let Some(row) = store.index_of(id) else {
            let example = store.ids().first().map(|e| format!(" (ids look like {e:?})")).unwrap_or_default();
            usage_bail!("{}: no item {id:?}{example}", args.features.display());
        };
        queries.push(Query {
            label: id.clone(),
            vector: store.row(row).to_vec(),
            row: Some(row),
            procedures: procedures_of(id),
        });
    }
    if !args.texts.is_empty() || !args.images.is_empty() {
        let ctx = EncoderContext { models_dir: args.models.clone(), ..Default::default() };
        let enc = store.encoder(&ctx).map_err(feature_error)?;
        for t in &args.texts {
            let v = enc.encode(&[Item::Text(t)]).map_err(feature_error)?;
            queries.push(Query { label: format!("text {t:?}"), vector: v, row: None, procedures: BTreeSet::new() });
        }
        for p in &args.images {
            let img = stepwise_features::image_source::load_image_file(p).map_err(|e| anyhow::anyhow!(e))?;
            let v = enc.encode(&[Item::Image(&img)]).map_err(feature_error)?;
            queries.push(Query {
                label: format!("image {}", p.display()),
                vector: v,
                row: None,
                procedures: BTreeSet::new(),
            });
        }
    }

    // Candidate procedures, only when needed.
    let row_procs: Vec<BTreeSet<String>> =
        if args.exclude_same_procedure { store.ids().iter().map(|id| procedures_of(id)).collect() } else { Vec::new() };
    let dim = store.dim();
    let flat: Vec<f32> = queries.iter().flat_map(|q| q.vector.iter().copied()).collect();
    let keep = |qi: usize, j: usize| {
        let q = &queries[qi];
        if q.row == Some(j) {
            return false;
        }
        if let Some(p) = &args.prefix
            && !store.ids()[j].starts_with(p.as_str())
        {
            return false;
        }
        !args.exclude_same_procedure || q.procedures.is_disjoint(&row_procs[j])
    };
    let filter: Filter<'_> = &keep;
    let results = knn(store.data(), &flat, dim, KnnOptions { k: args.k, metric: args.metric }, Some(filter));

    if !args.json {
        println!("rank, {} (lower is nearer), item id, step", args.metric.distance_name());
    }
    for (q, res) in queries.iter().zip(&results) {
        if args.json {
            let neighbors: Vec<serde_json::Value> =
                res.iter().map(|n| serde_json::json!({"id": store.ids()[n.index], "distance": n.distance})).collect();
            let line = serde_json::json!({"query": q.label, "neighbors": neighbors});
            println!("{}", stepwise_core::json::to_canonical_string(&line));
            continue;
        }
        let describe = |id: &str| index.as_ref().map(|i| i.describe(id)).unwrap_or_default();
        println!("{}  {}", q.label, q.row.map(|r| describe(&store.ids()[r])).unwrap_or_default());
        for (rank, n) in res.iter().enumerate() {
            let id = &store.ids()[n.index];
            println!("  {:>3}  {:>8.4}  {id}  {}", rank + 1, n.distance, describe(id));
        }
    }
    Ok(())
}

/// Texts of steps and the steps each image appears in.
struct CorpusIndex<'a> {
    corpus: &'a Corpus,
    procedures: HashMap<&'a str, usize>,
    /// image path → (procedure index, step index or None for gallery)
    images: HashMap<&'a str, Vec<(usize, Option<usize>)>>,
}

impl<'a> CorpusIndex<'a> {
    fn new(corpus: &'a Corpus) -> Self {
        let mut images: HashMap<&str, Vec<(usize, Option<usize>)>> = HashMap::new();
        for (pi, p) in corpus.procedures.iter().enumerate() {
            for (si, s) in p.steps.iter().enumerate() {
                for img in &s.images {
                    images.entry(img).or_default().push((pi, Some(si)));
                }
            }
            for img in p.gallery.iter().flatten() {
                images.entry(img).or_default().push((pi, None));
            }
        }
        let procedures = corpus.procedures.iter().enumerate().map(|(i, p)| (p.id.as_str(), i)).collect();
        CorpusIndex { corpus, procedures, images }
    }

    fn image_procedures(&self, path: &str) -> BTreeSet<String> {
        self.images
            .get(path)
            .map(|v| v.iter().map(|(p, _)| self.corpus.procedures[*p].id.clone()).collect())
            .unwrap_or_default()
    }

    /// A one-line description: the step text, or where an image is used.
    fn describe(&self, id: &str) -> String {
        let step_text = |pi: usize, si: usize| -> String {
            let s = &self.corpus.procedures[pi].steps[si];
            snippet(&s.full_text())
        };
        match ItemRef::parse(id) {
            Some(ItemRef::Text { procedure, step }) | Some(ItemRef::Title { procedure, step }) => {
                match self.procedures.get(procedure) {
                    Some(&pi) if step < self.corpus.procedures[pi].steps.len() => {
                        format!("\"{}\"", step_text(pi, step))
                    }
                    _ => String::new(),
                }
            }
            Some(ItemRef::Image(path)) => match self.images.get(path).and_then(|v| v.first()) {
                Some(&(pi, Some(si))) => {
                    format!("[{}#{si}: \"{}\"]", self.corpus.procedures[pi].id, step_text(pi, si))
                }
                Some(&(pi, None)) => format!("[{} gallery]", self.corpus.procedures[pi].id),
                None => String::new(),
            },
            _ => String::new(),
        }
    }
}

fn snippet(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 90 {
        format!("{}...", one_line.chars().take(87).collect::<String>())
    } else {
        one_line
    }
}
