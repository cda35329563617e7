//! `stepwise seq-study SEQ --features ... -o STUDY`: the sequencing paper's grid on one dataset — image-only,
//! text-only and multimodal models without and with sequence-aware pretraining (its Table 2), the pretraining
//! ablation on the multimodal model (Table 3), and the multi-reference breakdown (Table 4) — every cell trained,
//! decoded and scored with the same metrics as `stepwise eval` and the baselines' table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use stepwise_core::json::to_pretty_sorted;
use stepwise_core::manifest::{InputHash, Manifest};
use stepwise_core::output::{OutputDir, write_file_atomic, write_string_atomic};
use stepwise_core::sequencing::{OrderPrediction, SequencingInstance};
use stepwise_models::item_features::FeatureKind;
use stepwise_models::seq::{DecoderKind, Objective, PretrainConfig, SeqModel, load_encoder};

use super::baseline::table::{self, Results, Row};
use super::model_features::FeatureArgs;
use super::train_seq::{SeqData, SeqHyper, load_data};
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
    or several references (Table 4). Output: results.json and results.md (the baselines' layout, so `stepwise \
    baseline --merge` puts both in one table), breakdown.md, predictions/<cell>.jsonl, manifest.json. Finished \
    cells are kept in a hidden work folder beside STUDY, so a killed study resumes where it stopped.")]
pub struct Args {
    /// Sequencing instances (a folder from `stepwise generate --task sequencing`, or its instances.jsonl).
    pub instances: PathBuf,
    #[command(flatten)]
    pub features: FeatureArgs,
    #[command(flatten)]
    pub hyper: SeqHyper,
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
    /// The dataset's name in the tables.
    #[arg(long, default_value = "dataset")]
    pub name: String,
    #[arg(short, long)]
    pub output: PathBuf,
    #[arg(long)]
    pub force: bool,
}

/// One cell of the grid.
#[derive(Debug, Clone, PartialEq)]
struct Cell {
    modality: FeatureKind,
    /// None: no pretraining.
    objectives: Option<Vec<Objective>>,
}

impl Cell {
    fn method(&self) -> String {
        match &self.objectives {
            None => "sequencer".into(),
            Some(o) => {
                format!("sequencer + {}", o.iter().map(|o| o.as_str().to_uppercase()).collect::<Vec<_>>().join("+"))
            }
        }
    }

    fn key(&self) -> String {
        let pre = self
            .objectives
            .as_ref()
            .map_or("none".into(), |o| o.iter().map(|o| o.as_str()).collect::<Vec<_>>().join("-"));
        format!("{}__{pre}", self.modality.as_str())
    }
}

/// The objectives of `wanted` the data supports, or None (with the reason) when none remains.
fn supported(wanted: &[Objective], vocab: bool, images: bool) -> Result<Vec<Objective>, String> {
    let mut keep: Vec<Objective> =
        wanted.iter().copied().filter(|o| if o.needs_text() { vocab } else { images }).collect();
    keep.sort();
    if keep.len() < wanted.len() {
        let left: Vec<&str> = wanted.iter().filter(|o| !keep.contains(o)).map(|o| o.as_str()).collect();
        if keep.is_empty() {
            return Err(format!("no supported objective (left out: {})", left.join(", ")));
        }
    }
    Ok(keep)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    args.hyper.check()?;
    if args.pretrain_epochs == 0 || args.beam == 0 {
        usage_bail!("--pretrain-epochs and --beam must be at least 1");
    }
    let all = load_data(&args.instances, &args.features, None, args.hyper.max_tokens)?;
    let kinds: Vec<FeatureKind> = match all.kind {
        FeatureKind::Multimodal => vec![FeatureKind::Image, FeatureKind::Text, FeatureKind::Multimodal],
        k => vec![k],
    };
    let vocab = all.sources().vocab_size().is_some();
    let mut cells = Vec::new();
    let mut notes = Vec::new();
    let table2 = [Objective::Mlm, Objective::Isp, Objective::Smrm];
    for &k in &kinds {
        cells.push(Cell { modality: k, objectives: None });
        let images = k != FeatureKind::Text;
        let text_ids = vocab && k != FeatureKind::Image;
        match supported(&table2, text_ids, images) {
            Ok(o) => {
                if o.len() < table2.len() {
                    notes.push(format!(
                        "{}: pretraining with {} only (MLM needs token ids, ISP/SMRM images)",
                        k.as_str(),
                        o.iter().map(|o| o.as_str()).collect::<Vec<_>>().join("+")
                    ));
                }
                cells.push(Cell { modality: k, objectives: Some(o) });
            }
            Err(e) => notes.push(format!("{}: no pretrained cell: {e}", k.as_str())),
        }
    }
    if !args.no_ablation && kinds.contains(&FeatureKind::Multimodal) {
        use Objective::*;
        for set in [vec![Mlm], vec![Mlm, Isp], vec![Mlm, Smrm], vec![Mlm, Isp, Pisp], vec![Mlm, Isp, Smrm]] {
            match supported(&set, vocab, true) {
                Ok(o) => {
                    let c = Cell { modality: FeatureKind::Multimodal, objectives: Some(o) };
                    if !cells.contains(&c) {
                        cells.push(c);
                    }
                }
                Err(e) => notes
                    .push(format!("ablation {}: {e}", set.iter().map(|o| o.as_str()).collect::<Vec<_>>().join("+"))),
            }
        }
        if !vocab {
            notes.push("the text store has no token ids (embed with --tokens): MLM is left out of every cell".into());
        }
    }
    let out = OutputDir::create(&args.output, args.force)?;
    let work = work_dir(&args.output);
    std::fs::create_dir_all(&work)?;
    let seed = args.hyper.seed;
    let mut rows = Vec::new();
    let mut breakdown = Vec::new();
    let mut by_kind: std::collections::BTreeMap<FeatureKind, SeqData> = Default::default();
    std::fs::create_dir_all(out.path().join("predictions"))?;
    let fingerprint = format!(
        "{:?}|{:?}|{}|{}|{}",
        args.hyper,
        all.features.identities.iter().map(|(i, _)| i).collect::<Vec<_>>(),
        args.pretrain_epochs,
        args.beam,
        InputHash::of(&all.file)?.blake3
    );
    let key_hash = blake3::hash(fingerprint.as_bytes()).to_hex()[..16].to_string();
    for (i, cell) in cells.iter().enumerate() {
        let cache = work.join(format!("{}__{key_hash}.jsonl", cell.key()));
        let preds: Vec<OrderPrediction> = if cache.is_file() {
            read_predictions(&cache)?
        } else {
            let data = match by_kind.entry(cell.modality) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(load_data(&args.instances, &args.features, Some(cell.modality), args.hyper.max_tokens)?)
                }
            };
            if !stepwise_core::progress::is_quiet() {
                eprintln!("[{}/{}] {} {}", i + 1, cells.len(), cell.modality.as_str(), cell.method());
            }
            let p = run_cell(cell, data, &args)?;
            write_predictions(&cache, &p)?;
            p
        };
        write_predictions(&out.path().join("predictions").join(format!("{}.jsonl", cell.key())), &preds)?;
        let (n, multi, single_s, multi_s) = table::score(&all.instances, &preds, Some(&args.split), seed)?;
        rows.push(Row {
            dataset: args.name.clone(),
            method: cell.method(),
            features: cell.modality.as_str().into(),
            sequences: n,
            multi_reference: multi,
            single: single_s,
            multi: multi_s,
        });
        for (subset, keep) in [("Single", 1usize..=1), ("Multi.", 2..=usize::MAX), ("All", 1..=usize::MAX)] {
            let insts: Vec<SequencingInstance> =
                all.instances.iter().filter(|i| keep.contains(&i.references.len())).cloned().collect();
            let ids: BTreeSet<&str> = insts.iter().map(|i| i.id.as_str()).collect();
            let sub: Vec<OrderPrediction> = preds.iter().filter(|p| ids.contains(p.id.as_str())).cloned().collect();
            if !insts.iter().any(|i| i.split == args.split) {
                continue;
            }
            let (n, multi, s, m) = table::score(&insts, &sub, Some(&args.split), seed)?;
            breakdown.push(Row {
                dataset: subset.into(),
                method: cell.method(),
                features: cell.modality.as_str().into(),
                sequences: n,
                multi_reference: multi,
                single: s,
                multi: m,
            });
        }
    }
    notes.push(format!(
        "{}: trained on `train` (epoch by validation loss on `val`), scored on `{}`; encoder {} layers × {} wide × {} heads, at most {} epochs (patience {}), pretraining {} epochs, beam {}",
        args.name, args.split, args.hyper.layers, args.hyper.dim, args.hyper.heads, args.hyper.epochs, args.hyper.patience, args.pretrain_epochs, args.beam
    ));
    if !all.skipped.is_empty() {
        notes.push(format!("{} instances left out for missing vectors, e.g. {}", all.skipped.len(), all.skipped[0]));
    }
    let results = Results { rows, notes };
    write_string_atomic(&out.path().join("results.json"), &to_pretty_sorted(&results))?;
    write_string_atomic(&out.path().join("results.md"), &table::markdown(&results))?;
    let bd = Results {
        rows: breakdown,
        notes: vec![
            "Dataset column: the subset of instances with one reference (Single), several (Multi.), or all.".into(),
        ],
    };
    write_string_atomic(&out.path().join("breakdown.json"), &to_pretty_sorted(&bd))?;
    write_string_atomic(&out.path().join("breakdown.md"), &table::markdown(&bd))?;
    let mut m = Manifest::new("sequencing-results").with_seed(seed);
    m.inputs.push(InputHash::of(&all.file)?);
    m.inputs.extend(all.features.input_hashes.iter().cloned());
    m.param("dataset", &args.name);
    m.param("run", "seq-study");
    m.count("rows", results.rows.len() as u64);
    m.count("instances", all.instances.len() as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    let _ = std::fs::remove_dir_all(&work);
    print!("{}", table::markdown(&results));
    if !stepwise_core::progress::is_quiet() {
        eprintln!("wrote {}", dest.display());
    }
    Ok(())
}

/// Pretrain (when the cell asks), fine-tune, and predict the scored split.
fn run_cell(cell: &Cell, data: &SeqData, args: &Args) -> anyhow::Result<Vec<OrderPrediction>> {
    let train = data.split("train");
    let val = data.split("val");
    if train.is_empty() {
        usage_bail!("{}: no usable instance in split `train`", data.file.display());
    }
    let tcfg = args.hyper.train_config();
    let config = data.config(&args.hyper, DecoderKind::Berson);
    let quiet = |_: usize, _: usize, _: usize, _: f64| {};
    let model = SeqModel::new(config.clone(), tcfg.seed)?;
    if let Some(objectives) = &cell.objectives {
        let enc = SeqModel::new(config, tcfg.seed)?.with_pretraining_heads()?;
        let pcfg = PretrainConfig { objectives: objectives.clone(), ..PretrainConfig::default() };
        let pre = stepwise_models::seq::SeqTrainConfig { max_epochs: args.pretrain_epochs, ..tcfg.clone() };
        stepwise_models::seq::pretrain(&enc, &train, &pre, &pcfg, None, &mut { quiet })?;
        load_encoder(&model, &enc)?;
    }
    stepwise_models::seq::train_orders(&model, &train, &val, &tcfg, None, &mut { quiet })?;
    let test = data.split(&args.split);
    let orders = stepwise_models::seq::predict_orders(&model, &test, tcfg.batch_size, args.beam)?;
    Ok(test.iter().zip(orders).map(|(s, order)| OrderPrediction { id: s.id.clone(), order }).collect())
}

fn work_dir(output: &Path) -> PathBuf {
    let name = output.file_name().map_or_else(|| "seq-study".into(), |n| n.to_string_lossy().into_owned());
    output.with_file_name(format!(".{name}.seq-study-work"))
}

fn write_predictions(path: &Path, preds: &[OrderPrediction]) -> anyhow::Result<()> {
    write_file_atomic(path, |w| {
        for p in preds {
            serde_json::to_writer(&mut *w, p).map_err(std::io::Error::other)?;
            std::io::Write::write_all(w, b"\n")?;
        }
        Ok(())
    })?;
    Ok(())
}

fn read_predictions(path: &Path) -> anyhow::Result<Vec<OrderPrediction>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                anyhow::anyhow!("{}:{}: {e} (delete the work folder to start over)", path.display(), i + 1)
            })
        })
        .collect()
}
