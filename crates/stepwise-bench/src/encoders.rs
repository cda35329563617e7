//! `stepwise bench encoders`: throughput of the pretrained encoders against the same models run by onnxruntime
//! (`scripts/bench/encoders_ref.py`) in the same invocation, with the GFLOP/s each side reaches next to the
//! machine's measured FMA peak (`stepwise_kernels::peak`).
//!
//! - MiniLM: sentences/s on sentences of exactly 48 word pieces (the same token ids for both), batches of 32.
//!   Target: at least 1.0x onnxruntime.
//! - EfficientNet-Lite0 and Lite2: images/s on 224x224 / 260x260 inputs, network only (as the reference), target at
//!   least 1.0x onnxruntime; and Lite0 end to end from 512x384 RGB images (resize + crop + network), target at
//!   least 20 images/s.
//! - With `--photos DIR`: Lite0 and Lite2 from photo files to features (read, JPEG/PNG decode, crop, resize,
//!   network) through the path `stepwise features` runs (`embed_items` into a scratch store), against PIL +
//!   onnxruntime doing the same work (decoding on a thread pool of the same size, overlapped with the network).
//!   Target: at least 1.5x.
//!
//! Each rate is the best of `--repeats` timed runs after a warm-up, measured before and after the reference. Without
//! a Python that has onnxruntime the reference is reported as unavailable and only absolute rates are printed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rand::Rng;
use stepwise_features::embed::{EmbedOptions, embed_items};
use stepwise_features::image_source::FsImageSource;
use stepwise_features::items::{ItemContent, ItemSpec, image_id};
use stepwise_features::pretrained::efficientnet_lite::{EfficientNetEncoder, EfficientNetLite, Output, Variant};
use stepwise_features::pretrained::minilm::MiniLm;
use stepwise_features::pretrained::preprocess::synthetic_photo;
use stepwise_features::registry::DEFAULT_MODELS_DIR;
use stepwise_features::{Encoder, Item};

use stepwise_cli::cli_util::feature_error;

const TOKENS: usize = 48;
const MINILM_TARGET_RATIO: f64 = 1.0;
const EFFNET_TARGET_RATIO: f64 = 1.0;
const EFFNET_TARGET_IMAGES_PER_S: f64 = 20.0;
const PHOTOS_TARGET_RATIO: f64 = 1.5;

#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  stepwise bench encoders --models models --python /tmp/venv/bin/python\n\n\
    The reference needs a Python with: numpy onnx onnxruntime safetensors tokenizers (and pillow for --photos).")]
pub struct Args {
    #[arg(long, env = "STEPWISE_MODELS", default_value = DEFAULT_MODELS_DIR)]
    pub models: PathBuf,
    /// Sentences for MiniLM.
    #[arg(long, default_value_t = 256)]
    pub sentences: usize,
    /// Images for EfficientNet-Lite0 and Lite2.
    #[arg(long, default_value_t = 64)]
    pub images: usize,
    /// Timed runs per measurement, on each side of the reference (the best is reported).
    #[arg(long, default_value_t = 2)]
    pub repeats: usize,
    /// Python for the onnxruntime reference (default: $STEPWISE_BENCH_PYTHON, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The reference script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench/encoders_ref.py"))]
    pub reference: PathBuf,
    /// A folder of photos (JPEG, PNG; searched recursively, in name order): also time photo files to features
    /// for Lite0 and Lite2, decoding included, against PIL + onnxruntime.
    #[arg(long)]
    pub photos: Option<PathBuf>,
    /// At most this many of the photos (the first in name order).
    #[arg(long, default_value_t = 160)]
    pub max_photos: usize,
    /// Exit with status 1 when a target is missed.
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.sentences == 0 || args.images == 0 || args.repeats == 0 || args.max_photos == 0 {
        stepwise_cli::usage_bail!("--sentences, --images, --repeats and --max-photos must be at least 1");
    }
    let photos = match &args.photos {
        Some(dir) => Some(photo_files(dir, args.max_photos)?),
        None => None,
    };
    let threads = rayon::current_num_threads();
    let peak = stepwise_kernels::peak::fma_peak_gflops(0.5);
    println!(
        "encoder benchmark: {threads} threads, best of {} runs; f32 FMA peak {peak:.0} GFLOP/s (measured)",
        args.repeats
    );

    // --- inputs, identical for stepwise and the reference
    let minilm = MiniLm::from_models_dir(&args.models).map_err(feature_error)?;
    let ids = sentence_ids(&minilm, args.sentences)?;
    let lite0 = EfficientNetLite::from_models_dir(&args.models, Variant::Lite0).map_err(feature_error)?;
    let lite2 = EfficientNetLite::from_models_dir(&args.models, Variant::Lite2).map_err(feature_error)?;
    let images: Vec<_> =
        (0..args.images).map(|i| synthetic_photo(512, 384, &format!("bench-encoders/image/{i}"))).collect();

    // --- stepwise, then the reference, then stepwise again: the machine's load varies, so each side keeps
    // its best rate and neither is measured only in a busy moment.
    let refs: Vec<&_> = images.iter().collect();
    let inputs0 = lite0.preprocess(&refs).map_err(feature_error)?;
    let inputs2 = lite2.preprocess(&refs).map_err(feature_error)?;
    let flops = Flops {
        sentence: minilm.flops_per_text(TOKENS),
        lite0: lite0.flops_per_image(),
        lite2: lite2.flops_per_image(),
    };
    let encoder = EfficientNetEncoder::new(lite0, Output::Features);
    let items: Vec<Item> = images.iter().map(Item::Image).collect();
    let measure = || -> anyhow::Result<[f64; 6]> {
        let minilm_rate =
            best_rate(args.repeats, ids.len(), || minilm.embed_ids(&ids).map(|_| ()).map_err(feature_error))?;
        let net0 = best_rate(args.repeats, images.len(), || {
            std::hint::black_box(encoder.model().features_from_inputs(&inputs0));
            Ok(())
        })?;
        let net2 = best_rate(args.repeats, images.len(), || {
            std::hint::black_box(lite2.features_from_inputs(&inputs2));
            Ok(())
        })?;
        let e2e = best_rate(args.repeats, images.len(), || {
            for chunk in items.chunks(encoder.batch_size()) {
                encoder.encode(chunk).map_err(feature_error)?;
            }
            Ok(())
        })?;
        let files = |variant: &str| match (&args.photos, &photos) {
            (Some(dir), Some(files)) => photos_rate(&args, variant, dir, files),
            _ => Ok(0.0),
        };
        Ok([minilm_rate, net0, net2, e2e, files("effnet-lite0")?, files("effnet-lite2")?])
    };
    let first = measure()?;
    let reference = run_reference(&args, &ids, photos.as_deref(), threads);
    let second = measure()?;
    let [ours_minilm, ours_net0, ours_net2, ours_e2e, ours_files0, ours_files2] =
        [0, 1, 2, 3, 4, 5].map(|i| first[i].max(second[i]));
    let gflops = |rate: f64, per: f64| {
        let g = rate * per / 1e9;
        format!("{g:>6.1} GFLOP/s ({:>4.1}% of peak)", 100.0 * g / peak)
    };

    println!(
        "\nMiniLM (all-MiniLM-L6-v2), {} sentences x {TOKENS} tokens, batches of 32 ({:.2} GFLOP each):",
        ids.len(),
        flops.sentence / 1e9
    );
    println!("  stepwise              {ours_minilm:>9.1} sentences/s  {}", gflops(ours_minilm, flops.sentence));
    let mut missed = Vec::new();
    match &reference {
        Ok(r) => {
            println!(
                "  onnxruntime {:<9} {:>9.1} sentences/s  {} (reference, same run)",
                r.version,
                r.minilm,
                gflops(r.minilm, flops.sentence)
            );
            ratio_line(ours_minilm / r.minilm, MINILM_TARGET_RATIO, "MiniLM vs onnxruntime", &mut missed);
        }
        Err(e) => println!("  reference unavailable: {e}"),
    }
    for (name, side, ours, per, theirs) in [
        ("EfficientNet-Lite0", 224, ours_net0, flops.lite0, reference.as_ref().ok().map(|r| r.lite0)),
        ("EfficientNet-Lite2", 260, ours_net2, flops.lite2, reference.as_ref().ok().map(|r| r.lite2)),
    ] {
        println!("\n{name}, {} images {side}x{side} ({:.2} GFLOP each), network only:", images.len(), per / 1e9);
        println!("  stepwise              {ours:>9.1} images/s     {}", gflops(ours, per));
        if let Some(theirs) = theirs {
            println!(
                "  onnxruntime           {theirs:>9.1} images/s     {} (reference, same run)",
                gflops(theirs, per)
            );
            ratio_line(ours / theirs, EFFNET_TARGET_RATIO, name, &mut missed);
        }
    }
    println!("\nEfficientNet-Lite0 end to end from 512x384 RGB (resize + crop + network):");
    let effnet_ok = ours_e2e >= EFFNET_TARGET_IMAGES_PER_S;
    println!(
        "  stepwise              {ours_e2e:>9.1} images/s   target >= {EFFNET_TARGET_IMAGES_PER_S}: {}",
        verdict(effnet_ok)
    );
    if !effnet_ok {
        missed.push("EfficientNet-Lite0 end to end");
    }
    if let (Some(dir), Some(files)) = (&args.photos, &photos) {
        let theirs = |f: fn(&Reference) -> Option<f64>| reference.as_ref().ok().and_then(f);
        for (name, short, ours, theirs) in [
            ("EfficientNet-Lite0", "Lite0 from photos", ours_files0, theirs(|r| r.lite0_files)),
            ("EfficientNet-Lite2", "Lite2 from photos", ours_files2, theirs(|r| r.lite2_files)),
        ] {
            println!(
                "\n{name} from {} photo files in {} (read + decode + crop + resize + network):",
                files.len(),
                dir.display()
            );
            println!("  stepwise features     {ours:>9.1} images/s");
            match theirs {
                Some(theirs) => {
                    println!("  PIL + onnxruntime     {theirs:>9.1} images/s (reference, same run)");
                    ratio_line(ours / theirs, PHOTOS_TARGET_RATIO, short, &mut missed);
                }
                None if reference.is_ok() => {
                    println!("  reference unavailable: {} did not time photo files", args.reference.display())
                }
                None => {}
            }
        }
    }

    if args.check && !missed.is_empty() {
        anyhow::bail!("encoder throughput targets missed: {}", missed.join(", "));
    }
    Ok(())
}

/// Floating-point operations per item of each network.
struct Flops {
    sentence: f64,
    lite0: f64,
    lite2: f64,
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

/// Print a ratio against its target (at least `target`); a miss is recorded as `label`.
fn ratio_line(ratio: f64, target: f64, label: &'static str, missed: &mut Vec<&'static str>) {
    println!("  ratio                 {ratio:>9.2}x   target >= {target}x: {}", verdict(ratio >= target));
    if ratio < target {
        missed.push(label);
    }
}

/// Items per second of the best of `repeats` timed runs after one warm-up run.
fn best_rate(repeats: usize, items: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    f()?;
    let mut best = 0f64;
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        best = best.max(items as f64 / t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// The first `max` photos under `dir` (relative paths, name order).
fn photo_files(dir: &Path, max: usize) -> anyhow::Result<Vec<String>> {
    let mut files = stepwise_features::image_source::image_files(dir)?;
    if files.is_empty() {
        stepwise_cli::usage_bail!("--photos {}: no .jpg, .jpeg or .png files in it", dir.display());
    }
    files.truncate(max);
    Ok(files)
}

/// Photos per second from files to features through `stepwise features`' own path (a scratch store, rewritten by
/// each run; loading the encoder's weights is part of every run).
fn photos_rate(args: &Args, encoder: &str, dir: &Path, files: &[String]) -> anyhow::Result<f64> {
    let scratch = tempfile::tempdir()?;
    let store = scratch.path().join("store");
    let items: Vec<ItemSpec> =
        files.iter().map(|f| ItemSpec { id: image_id(f), content: ItemContent::Image(f.clone()) }).collect();
    let source = FsImageSource::new(dir);
    let mut opts = EmbedOptions::new(encoder);
    opts.ctx.models_dir = args.models.clone();
    opts.force = true;
    best_rate(args.repeats, files.len(), || {
        let report = embed_items(&store, &items, &source, &opts).map_err(feature_error)?;
        if report.failed > 0 {
            anyhow::bail!(
                "{encoder}: {} of {} photos could not be embedded (stepwise features lists them in failures.jsonl)",
                report.failed,
                files.len()
            );
        }
        Ok(())
    })
}

/// `n` token-id sequences of exactly 48 word pieces ([CLS] ... [SEP]) from seeded pseudo-sentences.
fn sentence_ids(minilm: &MiniLm, n: usize) -> anyhow::Result<Vec<Vec<u32>>> {
    const WORDS: &[&str] = &[
        "whisk",
        "the",
        "eggs",
        "with",
        "sugar",
        "until",
        "pale",
        "and",
        "fluffy",
        "then",
        "fold",
        "in",
        "flour",
        "gently",
        "preheat",
        "oven",
        "to",
        "180",
        "degrees",
        "remove",
        "screws",
        "from",
        "back",
        "panel",
        "carefully",
        "lift",
        "display",
        "assembly",
        "disconnect",
        "cable",
        "simmer",
        "sauce",
        "for",
        "ten",
        "minutes",
        "stirring",
        "occasionally",
        "season",
        "salt",
        "pepper",
        "serve",
        "warm",
        "garnish",
        "chopped",
        "parsley",
    ];
    let texts: Vec<String> = (0..n)
        .map(|i| {
            let mut rng = stepwise_core::rng::rng_for(0, &format!("bench-encoders/sentence/{i}"));
            (0..60).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect::<Vec<_>>().join(" ")
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let full = minilm.tokenize(&refs).map_err(feature_error)?;
    full.into_iter()
        .map(|ids| {
            if ids.len() < TOKENS {
                anyhow::bail!("a benchmark sentence has only {} tokens", ids.len());
            }
            let sep = ids[ids.len() - 1];
            let mut v = ids[..TOKENS - 1].to_vec();
            v.push(sep);
            Ok(v)
        })
        .collect()
}

struct Reference {
    minilm: f64,
    lite0: f64,
    lite2: f64,
    /// Photo files to features (`--photos`).
    lite0_files: Option<f64>,
    lite2_files: Option<f64>,
    version: String,
}

fn run_reference(
    args: &Args,
    ids: &[Vec<u32>],
    photos: Option<&[String]>,
    threads: usize,
) -> Result<Reference, String> {
    if !args.reference.is_file() {
        return Err(format!("{} not found", args.reference.display()));
    }
    let python = args
        .python
        .clone()
        .or_else(|| std::env::var_os("STEPWISE_BENCH_PYTHON").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("python3"));
    let dir = std::env::temp_dir().join(format!("stepwise-bench-encoders-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let ids_path = dir.join("ids.npy");
    // Token ids (< 2^24) are exact in float32, the one dtype our .npy writer uses.
    let flat: Vec<f32> = ids.iter().flatten().map(|&i| i as f32).collect();
    let list_path = dir.join("photos.txt");
    let result = stepwise_features::npy::write_matrix(&ids_path, ids.len(), TOKENS, &flat)
        .map_err(|e| e.to_string())
        .and_then(|_| {
            let mut cmd = Command::new(&python);
            cmd.arg(&args.reference)
                .arg("--models")
                .arg(&args.models)
                .arg("--ids")
                .arg(&ids_path)
                .arg("--images")
                .arg(args.images.to_string())
                .arg("--threads")
                .arg(threads.to_string())
                .arg("--repeats")
                .arg(args.repeats.to_string());
            if let (Some(dir), Some(files)) = (&args.photos, photos) {
                std::fs::write(&list_path, files.join("\n")).map_err(|e| e.to_string())?;
                cmd.arg("--photos").arg(dir).arg("--photo-list").arg(&list_path);
            }
            cmd.output().map_err(|e| format!("cannot run {}: {e}", python.display()))
        });
    let _ = std::fs::remove_dir_all(&dir);
    let out = result?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
        return Err(format!("{} failed: {last}", python.display()));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("no JSON in the reference's output: {stdout}"))?;
    let num = |k: &str| v.get(k).and_then(|x| x.as_f64()).ok_or_else(|| format!("reference output lacks {k}"));
    Ok(Reference {
        minilm: num("minilm_sentences_per_s")?,
        lite0: num("effnet_lite0_images_per_s")?,
        lite2: num("effnet_lite2_images_per_s")?,
        lite0_files: v.get("effnet_lite0_files_per_s").and_then(|x| x.as_f64()),
        lite2_files: v.get("effnet_lite2_files_per_s").and_then(|x| x.as_f64()),
        version: v.get("onnxruntime").and_then(|x| x.as_str()).unwrap_or("?").to_string(),
    })
}
