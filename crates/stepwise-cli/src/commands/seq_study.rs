//! `stepwise seq-study SEQ --features ... -o STUDY`: the sequencing paper's grid on one dataset — image-only,
//! text-only and multimodal models without and with sequence-aware pretraining (its Table 2), the pretraining
//! ablation on the multimodal model (Table 3), and the multi-reference breakdown (Table 4) — every cell trained,
//! decoded and scored with the same metrics as `stepwise eval` and the baselines' table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use stepwise_core::json::to_pretty_sorted;
use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::{OutputDir, write_string_atomic};
use stepwise_core::sequencing::{OrderPrediction, SequencingInstance};
use stepwise_core::split::TrainOnly;
use stepwise_models::item_features::FeatureKind;
use stepwise_models::seq::study::{CellSettings, StudyPlan, pairwise_reference, plan, protocol_note, run_cell_on};
use stepwise_models::seq::{DecoderKind, SeqTrainConfig};
use stepwise_score::predictions::write_order_predictions;
use stepwise_score::sequencing_table::{self as table, Results, SeedRow};

use super::model_features::FeatureArgs;
use stepwise_models::seq::data::SeqData;

use super::train_seq::{FineTuneArgs, SeqHyper, load_data};
use crate::usage_bail;

/// Train and test the sequencing model grid (sequencing paper Tables 2, 3 and 4) on one dataset.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise embed corpus/ --encoder w2v --tokens -o feats/w2v\n  \
    stepwise seq-study seq/ --features feats/w2v --features feats/descriptor -o seq-study/\n  \
    stepwise baseline --merge baselines/ --merge seq-study/ -o table/\n\n\
    Cells: for each modality the features give (image, text, multimodal): the model trained from scratch and \
    the model fine-tuned from an encoder pretrained with MLM+ISP+SMRM (Table 2); on the multimodal model the \
    pretraining ablation MLM, MLM+ISP, MLM+SMRM, MLM+ISP+PISP, MLM+ISP+SMRM (Table 3). An objective the data \
    cannot support is left out and said in the notes (MLM needs a text store embedded with --tokens; ISP, PISP \
    and SMRM need images). Training on `train`, epoch selected by validation loss on `val`, scored on --split \
    against the authored order (single) and the best valid order (multi), and per subset of instances with one \
    or several references (Table 4). With --cv K the splits are ignored: K-fold cross-validation by procedure \
    (test on one fold, validate on the next, train on the rest), every instance predicted once and scored as \
    split `cv` (for datasets too small for a held-out split). Output: results.json and results.md (the baselines' layout, so `stepwise \
    baseline --merge` puts both in one table), breakdown.md, predictions/<cell>.jsonl (the pairwise baseline: \
    pairwise__<modality>.jsonl), manifest.json. Finished \
    cells are kept in a hidden work folder beside STUDY, so a killed study resumes where it stopped.")]
pub struct Args {
    /// Sequencing instances (a folder from `stepwise generate --task sequencing`, or its instances.jsonl).
    pub instances: PathBuf,
    #[command(flatten)]
    pub features: FeatureArgs,
    #[command(flatten)]
    pub hyper: SeqHyper,
    #[command(flatten)]
    pub fine_tune: FineTuneArgs,
    /// Pretraining epochs.
    #[arg(long, default_value_t = 10)]
    pub pretrain_epochs: usize,
    /// Beam width of the decoder.
    #[arg(long, default_value_t = 4)]
    pub beam: usize,
    /// Leave out the pretraining ablation (Table 3).
    #[arg(long)]
    pub no_ablation: bool,
    /// The split the cells are scored on.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Cross-validate instead of using the instances' splits: K folds by procedure, every instance tested once
    /// (for datasets too small for a held-out split; at least 3).
    #[arg(long, value_name = "K", conflicts_with = "split")]
    pub cv: Option<usize>,
    /// Procedures whose id starts with PREFIX (repeatable) only train: in the training set of every fold or split,
    /// never validated, tested or scored (extra training corpora beside the dataset under study).
    #[arg(long = "train-only", value_name = "PREFIX")]
    pub train_only: Vec<String>,
    /// Train every cell with this many seeds (--seed, --seed + 1, ...): the tables show the mean over seeds with
    /// its interval over sequences, seeds.md the spread over seeds and each cell's difference from the pairwise
    /// baseline. Predictions are written per seed (`<cell>__seed<S>.jsonl`; one seed: `<cell>.jsonl`).
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// The dataset's name in the tables.
    #[arg(long, default_value = "dataset")]
    pub name: String,
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long)]
    pub force: bool,
}

/// The split name under which cross-validated predictions are scored.
const CV_SPLIT: &str = "cv";

pub fn run(args: Args) -> anyhow::Result<()> {
    args.hyper.check()?;
    args.fine_tune.check()?;
    if args.pretrain_epochs == 0 || args.beam == 0 || args.seeds == 0 {
        usage_bail!("--pretrain-epochs, --beam and --seeds must be at least 1");
    }
    let tune = args.fine_tune.tune_text_layers;
    let all = load_data(&args.instances, &args.features, None, args.hyper.max_tokens, tune)?;
    let seed = args.hyper.seed;
    let train_only = TrainOnly::new(args.train_only.clone())?;
    let folds = match args.cv {
        Some(k) => Some(train_only.folds(all.instances.iter().map(|i| i.procedure.as_str()), k, seed)?),
        None => None,
    };
    // What is scored: the instances of --split, or (cross-validation) every instance, under the split name `cv`;
    // never a train-only one.
    let studied = all.instances.iter().filter(|i| !train_only.contains(&i.procedure));
    let (scored, split): (Vec<SequencingInstance>, String) = match &folds {
        None => (studied.cloned().collect(), args.split.clone()),
        Some(_) => {
            (studied.map(|i| SequencingInstance { split: CV_SPLIT.into(), ..i.clone() }).collect(), CV_SPLIT.into())
        }
    };
    let extra = all.instances.len() - scored.len();
    // Token ids are in the fine-tuned encoder's frozen rows: no MLM on them.
    let vocab = all.sources().vocab_size().is_some() && all.text_tower.is_none();
    let StudyPlan { cells, mut notes } = plan(all.kind, vocab, !args.no_ablation);
    let out = OutputDir::create(&args.output, args.force)?;
    let work = work_dir(&args.output);
    std::fs::create_dir_all(&work)?;
    let mut rows = Vec::new();
    let mut seed_rows: Vec<SeedRow> = Vec::new();
    let mut breakdown = Vec::new();
    let mut by_kind: std::collections::BTreeMap<FeatureKind, SeqData> = Default::default();
    std::fs::create_dir_all(out.path().join("predictions"))?;
    let fingerprint = format!(
        "{:?}|{:?}|{:?}|{}|{}|{:?}|{}|{:?}",
        args.hyper,
        args.fine_tune,
        all.features.identities.iter().map(|(i, _)| i).collect::<Vec<_>>(),
        args.pretrain_epochs,
        args.beam,
        args.cv,
        InputHash::of(&all.file)?.blake3,
        train_only,
    );
    let key_hash = blake3::hash(fingerprint.as_bytes()).to_hex()[..16].to_string();
    let seeds: Vec<u64> = (0..args.seeds).map(|k| seed.wrapping_add(k)).collect();
    // The pairwise baseline on each modality's pooled vectors, with the same seeds: the reference every cell is
    // compared with.
    let kinds: BTreeSet<FeatureKind> = cells.iter().map(|c| c.modality).collect();
    let reference = pairwise_reference(&all, &kinds, &seeds, &args.split, args.cv, seed, &train_only)?;
    // One predictions file per cell and seed: `<key>.jsonl` with one seed, else `<key>__seed<S>.jsonl`.
    let write_runs = |key: &str, runs: &[Vec<OrderPrediction>]| -> anyhow::Result<()> {
        for (preds, run_seed) in runs.iter().zip(&seeds) {
            let name = if seeds.len() == 1 { key.to_string() } else { format!("{key}__seed{run_seed}") };
            write_order_predictions(&out.path().join("predictions").join(format!("{name}.jsonl")), preds, None)?;
        }
        Ok(())
    };
    for (kind, runs) in &reference {
        write_runs(&format!("pairwise__{}", kind.as_str()), runs)?;
        let (row, seeds_row) =
            table::seeded_rows(&args.name, "pairwise", kind.as_str(), &scored, runs, &seeds, None, Some(&split), seed)?;
        rows.push(row);
        seed_rows.push(seeds_row);
    }
    for (i, cell) in cells.iter().enumerate() {
        let mut runs = Vec::new();
        for &run_seed in &seeds {
            let cache = work.join(format!("{}__s{run_seed}__{key_hash}.jsonl", cell.key()));
            let preds: Vec<OrderPrediction> = if cache.is_file() {
                read_predictions(&cache)?
            } else {
                // The data's own modality is `all` itself (loading it again would repeat the stores' reading and the
                // text encoder's frozen layers); the other modalities are loaded once each.
                let data: &SeqData = if cell.modality == all.kind {
                    &all
                } else {
                    match by_kind.entry(cell.modality) {
                        std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::btree_map::Entry::Vacant(e) => e.insert(load_data(
                            &args.instances,
                            &args.features,
                            Some(cell.modality),
                            args.hyper.max_tokens,
                            tune,
                        )?),
                    }
                };
                if !stepwise_core::progress::is_quiet() {
                    eprintln!(
                        "[{}/{}] {} {} (seed {run_seed})",
                        i + 1,
                        cells.len(),
                        cell.modality.as_str(),
                        cell.method()
                    );
                }
                let settings = CellSettings {
                    model: args.hyper.config(data, DecoderKind::Berson),
                    train: SeqTrainConfig { seed: run_seed, ..args.hyper.train_config(&args.fine_tune) },
                    pretrain_epochs: args.pretrain_epochs,
                    beam: args.beam,
                    text_tower: data.text_tower.as_ref().map(|(_, values)| values.clone()),
                };
                let p = run_cell_on(cell, &settings, data, &args.split, folds.as_ref(), &train_only)?;
                write_order_predictions(&cache, &p, None)?;
                p
            };
            runs.push(preds);
        }
        write_runs(&cell.key(), &runs)?;
        let versus =
            reference.get(&cell.modality).map(|base| (format!("pairwise ({})", cell.modality.as_str()), &base[..]));
        let method = cell.method();
        let features = cell.modality.as_str();
        let (row, seeds_row) =
            table::seeded_rows(&args.name, &method, features, &scored, &runs, &seeds, versus, Some(&split), seed)?;
        seed_rows.push(seeds_row);
        rows.push(row);
        // Table 4 averages the seeds, as the results row does (its `All` row is that row).
        breakdown.extend(table::breakdown(&scored, &runs, &seeds, Some(&split), seed, &method, features)?);
    }
    let protocol = protocol_note(&args.split, folds.as_ref(), all.instances.len() - extra);
    notes.push(format!(
        "{}: {protocol}; encoder {} layers × {} wide × {} heads, at most {} epochs (patience {}), pretraining {} epochs, beam {}; fine-tuned on {}{}{}; {} seed(s) ({}): values are means over the seeds, intervals over sequences of each sequence's seed-mean (seeds.md: spread over seeds); pairwise = the pairwise baseline on the same stores' pooled vectors",
        args.name, args.hyper.layers, args.hyper.dim, args.hyper.heads, args.hyper.epochs, args.hyper.patience, args.pretrain_epochs, args.beam,
        args.hyper.train_config(&args.fine_tune).targets.as_str(),
        if args.fine_tune.dropout > 0.0 {
            format!(" with dropout {} (a departure from the paper)", args.fine_tune.dropout)
        } else {
            String::new()
        },
        match &all.text_tower {
            Some((t, _)) => format!(
                "; text: {} with its upper {} of {} layers fine-tuned at learning rate {} (the lower ones frozen, a departure from the paper's end-to-end fine-tuning; no MLM)",
                t.encoder,
                t.tuned_layers,
                t.frozen_layers + t.tuned_layers,
                args.fine_tune.text_lr.unwrap_or(args.hyper.lr)
            ),
            None => String::new(),
        },
        seeds.len(), seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
    ));
    notes.extend(train_only.note(extra).map(|n| format!("{}: {n}", args.name)));
    if !all.skipped.is_empty() {
        notes.push(format!("{} instances left out for missing vectors, e.g. {}", all.skipped.len(), all.skipped[0]));
    }
    let results = Results { rows, notes };
    results.write_files(out.path(), "results")?;
    let bd = Results {
        rows: breakdown,
        notes: vec![
            "Dataset column: the subset of instances with one reference (Single), several (Multi.), or all.".into(),
        ],
    };
    bd.write_files(out.path(), "breakdown")?;
    write_string_atomic(&out.path().join("seeds.json"), &to_pretty_sorted(&seed_rows))?;
    write_string_atomic(&out.path().join("seeds.md"), &table::seeds_markdown(&seed_rows))?;
    let mut m = Manifest::new("sequencing-results").with_seed(seed);
    m.inputs.push(InputHash::of(&all.file)?);
    m.inputs.extend(all.features.input_hashes.iter().cloned());
    m.param("dataset", &args.name);
    m.param("run", "seq-study");
    if let Some(k) = args.cv {
        m.param("cv", k);
    }
    if !train_only.is_empty() {
        m.param("train_only", train_only.prefixes());
    }
    m.count("rows", results.rows.len() as u64);
    m.count("seeds", seeds.len() as u64);
    m.count("instances", all.instances.len() as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    let _ = std::fs::remove_dir_all(&work);
    print!("{}\n{}", table::markdown(&results), table::seeds_markdown(&seed_rows));
    if !stepwise_core::progress::is_quiet() {
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

fn work_dir(output: &Path) -> PathBuf {
    let name = output.file_name().map_or_else(|| "seq-study".into(), |n| n.to_string_lossy().into_owned());
    output.with_file_name(format!(".{name}.seq-study-work"))
}

fn read_predictions(path: &Path) -> anyhow::Result<Vec<OrderPrediction>> {
    let records = stepwise_core::json::read_jsonl(path)
        .map_err(|e| anyhow::anyhow!("{e} (delete the work folder to start over)"))?;
    records
        .into_iter()
        .map(|r| {
            serde_json::from_value(r.value).map_err(|e| {
                anyhow::anyhow!("{}:{}: {e} (delete the work folder to start over)", path.display(), r.line)
            })
        })
        .collect()
}
