//! `stepwise embed CORPUS --encoder E -o FEATURES`: embed a corpus's step texts or step images into a feature
//! store (incremental and resumable; see `stepwise_features::embed`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use stepwise_core::Corpus;
use stepwise_core::manifest::InputHash;
use stepwise_features::embed::{EmbedOptions, embed_corpus};
use stepwise_features::items::{ItemSpec, string_items};
use stepwise_features::patches::{DEFAULT_GRID, patch_output};
use stepwise_features::registry::{self, DEFAULT_MODELS_DIR, EncoderContext};
use stepwise_features::store::FAILURES_FILE;
use stepwise_features::tokens::{DEFAULT_MAX_TOKENS, token_output};

use crate::cli_util::feature_error;
use crate::usage_bail;

/// Embed a corpus into a feature store: step texts for text encoders, step images for image encoders.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise embed corpus/ --encoder descriptor -o features/descriptor\n  \
    stepwise embed corpus/ --encoder w2v --encoder-opt dim=200 --seed 7 -o features/w2v\n  \
    stepwise embed corpus/ --encoder minilm --models models -o features/minilm --strings choices.txt\n  \
    stepwise embed corpus/ --encoder w2v --tokens --max-tokens 48 -o features/w2v-tokens\n  \
    stepwise embed corpus/ --encoder descriptor --patches --grid 3 -o features/descriptor-patches\n  \
    stepwise embed corpus/ --encoder descriptor --shard 0/2 -o parts/0   (then 1/2; `stepwise features merge`)\n\n\
    The store holds vectors.npy (float32, NumPy-readable), ids, keys, meta.json, failures.jsonl, manifest.json \
    (and model/ for corpus-trained encoders). Item ids: text:{procedure}#{step}, title:{procedure}#{step}, \
    image:{path}, str:{blake3}.\n\
    --tokens (w2v, glove-50d, minilm) also stores per-token vectors: tokens.npy (float16, one row per token), \
    token_offsets.npy (int64: the tokens of line i of ids are rows offsets[i]..offsets[i+1]) and token_ids.npy \
    (int64: the vocabulary id of each token row); meta.json says what a token is and which vocabulary the ids \
    index.\n\
    --patches (descriptor, effnet-lite0, effnet-lite2, clip-image) also stores a GxG grid of patch vectors of each \
    image: patches.npy (float16, shape (items, G*G, dim), row-major over the grid); meta.json says what a patch is \
    for the encoder.\n\
    Re-running adds only new or changed items (\"0 new items\" when there is nothing to do); an interrupted run \
    resumes where it stopped. Unreadable images are listed in failures.jsonl and skipped.\n\
    Encoders: see `stepwise models list` (built in: w2v, tfidf, descriptor).")]
pub struct Args {
    /// Corpus folder or procedure-JSONL file.
    pub corpus: PathBuf,
    /// Encoder name (w2v, tfidf, descriptor, or a pretrained one).
    #[arg(short, long)]
    pub encoder: String,
    /// Output feature-store folder (created, or extended when it holds features of the same encoder).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Pretrained models folder (filled by scripts/fetch-models.sh).
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
    /// Seed of encoders that train on the corpus (w2v).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Encoder option, repeatable, e.g. `--encoder-opt dim=200` (see the encoder's description).
    #[arg(long = "encoder-opt", value_name = "KEY=VALUE")]
    pub encoder_opt: Vec<String>,
    /// Also embed every line of this UTF-8 file as a `str:{blake3 of the line}` item (text encoders only).
    #[arg(long, value_name = "FILE")]
    pub strings: Option<PathBuf>,
    /// Also store per-token vectors (float16) of each item: word vectors for w2v and glove-50d, last hidden
    /// states of the word pieces for minilm.
    #[arg(long)]
    pub tokens: bool,
    /// With --tokens: keep at most this many tokens per item (the first ones).
    #[arg(long, value_name = "N", requires = "tokens", default_value_t = DEFAULT_MAX_TOKENS)]
    pub max_tokens: usize,
    /// Cut each step's text to its first N sentences before encoding (the sequencing paper keeps 5 sentences and
    /// 60 tokens per step: `--tokens --max-tokens 60 --max-sentences 5`). Text encoders only; recorded in
    /// meta.json.
    #[arg(long, value_name = "N")]
    pub max_sentences: Option<usize>,
    /// Also store a grid of patch vectors (float16) of each image: the last feature map for effnet-lite0/2, the
    /// descriptor of each cell for descriptor, the last-layer patch tokens for clip-image.
    #[arg(long, conflicts_with = "tokens")]
    pub patches: bool,
    /// With --patches: the grid side G (G x G patches per image; 1 to the encoder's native grid: 7 for
    /// effnet-lite0 and clip-image, 9 for effnet-lite2, 8 for descriptor).
    #[arg(long, value_name = "G", requires = "patches", default_value_t = DEFAULT_GRID)]
    pub grid: usize,
    /// Replace existing features (another encoder or settings, or a fresh fit) instead of extending them.
    #[arg(long)]
    pub force: bool,
    /// Embed only part I (0-based) of N contiguous parts of the items, into a part store that `stepwise features
    /// merge` joins with the others (corpus-fitted encoders still fit on the whole corpus, so every part has the
    /// same model). See scripts/ray/ for running the parts on a cluster.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<stepwise_core::shard::Shard>,
    /// Testing aid: stop after this many new items, as if interrupted (the next run resumes).
    #[arg(long, hide = true)]
    pub stop_after: Option<usize>,
    /// Items per checkpoint.
    #[arg(long, hide = true, default_value_t = 2048)]
    pub chunk_items: usize,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let entry = match registry::find(&args.encoder) {
        Some(e) => e,
        None => {
            let names: Vec<&str> = registry::list().iter().map(|e| e.name).collect();
            usage_bail!("unknown encoder `{}` (available: {})", args.encoder, names.join(", "));
        }
    };
    if args.tokens {
        token_output(entry.name).map_err(feature_error)?;
        if args.max_tokens == 0 {
            usage_bail!("--max-tokens must be at least 1");
        }
    }
    if args.patches {
        patch_output(entry.name, args.grid).map_err(feature_error)?;
    }
    let options = parse_options(&args.encoder_opt)?;
    let mut corpus = Corpus::load(&args.corpus)?;
    if let Some(n) = args.max_sentences {
        if n == 0 {
            usage_bail!("--max-sentences must be at least 1");
        }
        if entry.modality != stepwise_features::Modality::Text {
            usage_bail!("--max-sentences needs a text encoder; `{}` reads images", entry.name);
        }
        for step in corpus.procedures.iter_mut().flat_map(|p| p.steps.iter_mut()) {
            if let Some(t) = &mut step.text {
                let keep = stepwise_ingest::text::tokenize::first_sentences(t, n).len();
                t.truncate(keep);
            }
        }
    }
    let mut inputs = vec![InputHash::of(&corpus_file(&args.corpus))?];
    let mut extra: Vec<ItemSpec> = Vec::new();
    if let Some(path) = &args.strings {
        if entry.modality != stepwise_features::Modality::Text {
            usage_bail!("--strings needs a text encoder; `{}` reads images", entry.name);
        }
        let text = stepwise_core::json::read_text(path)?;
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        extra = string_items(&lines);
        inputs.push(InputHash::of(path)?);
    }
    let mut opts = EmbedOptions::new(&args.encoder);
    opts.ctx = EncoderContext { models_dir: args.models.clone(), seed: args.seed, options, ..Default::default() };
    opts.force = args.force;
    opts.inputs = inputs;
    opts.stop_after = args.stop_after;
    opts.chunk_items = args.chunk_items.max(1);
    opts.label = args.encoder.clone();
    opts.tokens = args.tokens.then_some(args.max_tokens);
    opts.patches = args.patches.then_some(args.grid);
    opts.max_sentences = args.max_sentences;
    opts.shard = args.shard;
    let images = stepwise_features::image_source::for_corpus(&corpus)?;
    let report = embed_corpus(&corpus, &args.output, Some(images.as_ref()), &extra, &opts).map_err(feature_error)?;
    let out = args.output.display();
    if stepwise_core::progress::is_quiet() {
        return Ok(());
    }
    if report.interrupted {
        eprintln!(
            "stopped after {} new items (--stop-after); {} holds the progress: re-run the same command to resume",
            report.encoded, out
        );
    } else if report.up_to_date {
        eprintln!("0 new items: {out} is up to date ({} items, {} failures)", report.stored, report.failed);
    } else {
        eprintln!(
            "{out}: {} items with `{}`{} ({} new inputs encoded, {} reused, {} failed)",
            report.stored,
            args.encoder,
            item_kinds(&args.output),
            report.encoded,
            report.reused,
            report.failed
        );
    }
    if let Some(n) = report.tokens.filter(|_| !report.interrupted) {
        eprintln!("{out}: {n} token vectors (at most {} per item) in tokens.npy", args.max_tokens);
    }
    if let Some(n) = report.patches.filter(|_| !report.interrupted) {
        eprintln!("{out}: {n} patch vectors ({g}x{g} per image) in patches.npy", g = args.grid);
    }
    if let Some(shard) = args.shard.filter(|_| !report.interrupted) {
        eprintln!("{out}: shard {shard} of the items; join all {} parts with `stepwise features merge`", shard.count);
    }
    if report.failed > 0 && !report.interrupted {
        eprintln!(
            "warning: {} items could not be encoded: see {}",
            report.failed,
            args.output.join(FAILURES_FILE).display()
        );
    }
    Ok(())
}

/// What a store's items are, e.g. ` (480 step texts, 312 step titles)`: a text store holds step titles as items
/// of their own, so it has more items than the corpus has steps.
fn item_kinds(store: &Path) -> String {
    let Ok(s) = stepwise_features::FeatureStore::open(store) else { return String::new() };
    let kinds = [("text:", "step texts"), ("title:", "step titles"), ("image:", "images"), ("str:", "strings")];
    let parts: Vec<String> = kinds
        .iter()
        .filter_map(|(prefix, name)| {
            let n = s.ids().iter().filter(|id| id.starts_with(prefix)).count();
            (n > 0).then(|| format!("{n} {name}"))
        })
        .collect();
    if parts.len() < 2 { String::new() } else { format!(" ({})", parts.join(", ")) }
}

/// The procedure file of a corpus argument (the file itself, or `procedures.jsonl` in the folder).
fn corpus_file(path: &Path) -> PathBuf {
    if path.is_file() { path.to_path_buf() } else { path.join(stepwise_core::corpus::PROCEDURES_JSONL) }
}

fn parse_options(raw: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for r in raw {
        let Some((k, v)) = r.split_once('=') else {
            usage_bail!("--encoder-opt {r:?}: expected KEY=VALUE");
        };
        if k.trim().is_empty() {
            usage_bail!("--encoder-opt {r:?}: empty key");
        }
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}
