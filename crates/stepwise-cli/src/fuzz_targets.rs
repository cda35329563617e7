//! Every reader of files that strangers make, as a fuzz target: bytes in, the reader's verdict out.
//!
//! One target per input format the CLI reads (corpus formats, task sets, predictions, annotations, R2VQ files,
//! `.npy` feature arrays, safetensors weights and checkpoints, PyTorch pickles, images, study definitions) and one
//! for the command line itself. The coverage-guided fuzzer (`fuzz/`, run by `scripts/fuzz/fuzz.py`) calls [`run`] per
//! input; the regression test replays the inputs it found (`fuzz/regressions/`) in `cargo test`.
//!
//! What a target checks beyond "no panic, no hang, no unbounded allocation" (the fuzzer's own checks): a refused
//! file's error names the file ([`Verdict::Refused`] would otherwise be a finding, reported as a panic here so the
//! fuzzer keeps the input).

use std::path::{Path, PathBuf};

/// The fuzz targets, in the order `scripts/fuzz/fuzz.py` runs them.
pub const TARGETS: &[&str] = &[
    "procedure-jsonl",
    "recipeqa",
    "recipeqa-recipes",
    "r2vq-conllu",
    "r2vq-questions",
    "r2vq-inline",
    "r2vq-2021",
    "taskset",
    "choice-predictions",
    "order-predictions",
    "annotations",
    "study",
    "npy",
    "safetensors",
    "checkpoint",
    "pickle",
    "image",
    "cli-args",
];

/// What a reader made of an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// Refused with this message (which names the file).
    Refused(String),
}

/// Feed `data` to `target`'s reader. Panics (the fuzzer's finding) when the reader panics or refuses the input
/// with a message that does not name the file; an unknown target is a usage error.
pub fn run(target: &str, data: &[u8]) -> Result<Verdict, String> {
    let scratch = Scratch::get()?;
    let result: Result<(), String> = match target {
        "procedure-jsonl" | "recipeqa" | "recipeqa-recipes" | "r2vq-conllu" => {
            let ext = match target {
                "procedure-jsonl" => "jsonl",
                "r2vq-conllu" => "conllu",
                _ => "json",
            };
            let path = scratch.file(ext, data)?;
            ingest_format(target, &path)
        }
        "r2vq-questions" => {
            let path = scratch.file("json", data)?;
            stepwise_ingest::readers::r2vq_json::read_question_list(&path).map(drop).map_err(msg)
        }
        "r2vq-inline" => {
            let path = scratch.file("txt", data)?;
            let family_of = |_: &str, _: &str| Some(1);
            stepwise_ingest::readers::r2vq_inline::read_inline_tagged(&path, None, &family_of).map(drop).map_err(msg)
        }
        "r2vq-2021" => {
            let path = scratch.file("jsonl", data)?;
            let family_of = |_: &str, _: &str| Some(1);
            stepwise_ingest::readers::r2vq_2021::read_r2vq_2021(&path, &family_of).map(drop).map_err(msg)
        }
        "taskset" => {
            let path = scratch.file("json", data)?;
            stepwise_core::TaskSet::load(&path).map(drop).map_err(msg)
        }
        "choice-predictions" => {
            let path = scratch.file("jsonl", data)?;
            use stepwise_score::predictions::{ChoiceFormat, read_choice_predictions};
            read_choice_predictions(&path, ChoiceFormat::Auto, None, Some("textual_cloze")).map(drop).map_err(msg)
        }
        "order-predictions" => {
            let path = scratch.file("jsonl", data)?;
            stepwise_score::predictions::read_order_predictions(&path).map(drop).map_err(msg)
        }
        "annotations" => {
            let path = scratch.file("jsonl", data)?;
            stepwise_score::predictions::read_annotations(&path).map(drop).map_err(msg)
        }
        "study" => {
            let dir = scratch.folder_with("study.json", data)?;
            stepwise_annotate::Study::read(&dir).map(drop).map_err(msg)
        }
        "npy" => {
            let path = scratch.file("npy", data)?;
            read_npy_every_way(&path)
        }
        "safetensors" => {
            let path = scratch.file("safetensors", data)?;
            let params = tiny_params()?;
            stepwise_models::optim::load_weights(&params, &path).map_err(msg)
        }
        "checkpoint" => {
            let path = scratch.file("safetensors", data)?;
            let params = tiny_params()?;
            let mut adam = stepwise_models::optim::Adam::new(&params, 1e-3).map_err(|e| e.to_string())?;
            stepwise_models::optim::load_checkpoint::<serde_json::Value>(&path, &params, &mut adam, "fuzz")
                .map(drop)
                .map_err(msg)
        }
        "pickle" => {
            let path = scratch.file("pt", data)?;
            stepwise_features::pretrained::torch_legacy::read_checkpoint(&path, None).map(drop).map_err(msg)
        }
        "image" => {
            // Decoding works on bytes; the caller adds the file name, so there is none to check here.
            return Ok(match stepwise_features::image_source::decode_image(data) {
                Ok(_) => Verdict::Accepted,
                Err(e) => Verdict::Refused(e),
            });
        }
        "cli-args" => {
            let text = String::from_utf8_lossy(data);
            let argv: Vec<&str> = text.split('\0').collect();
            return Ok(match crate::parse_command_line(&argv) {
                Ok(()) => Verdict::Accepted,
                Err(e) => Verdict::Refused(e),
            });
        }
        other => return Err(format!("unknown fuzz target `{other}`; the targets: {}", TARGETS.join(", "))),
    };
    Ok(match result {
        Ok(()) => Verdict::Accepted,
        Err(m) => {
            let named = scratch.written.borrow().as_ref().is_some_and(|p| m.contains(&p.display().to_string()));
            assert!(named, "{target}: the error does not name the file: {m}");
            Verdict::Refused(m)
        }
    })
}

/// Small valid inputs for the targets whose formats the real data and the demo do not give in a compact form
/// (binary weights, arrays, images, command lines): the fuzzer's starting points, and a check (in the regression
/// test) that each target's happy path is reached. Named `(file name, bytes)`.
pub fn builtin_seeds(target: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    match target {
        "procedure-jsonl" => seeds.push((
            "two-steps.jsonl".into(),
            concat!(
                r#"{"id":"p1","title":"Tea","steps":[{"text":"Boil water.","images":[]},"#,
                r#"{"title":"Steep","text":"Steep the leaves.","images":[]}]}"#,
                "\n",
                r#"{"id":"p2","title":"Toast","category":"breakfast","steps":[{"text":"Slice bread."}]}"#,
                "\n"
            )
            .as_bytes()
            .to_vec(),
        )),
        "annotations" => seeds.push((
            "two-annotators.jsonl".into(),
            concat!(
                r#"{"id":"p1#0","annotator":"a1","order":[0,1,2],"alternatives":[[1,0,2]]}"#,
                "\n",
                r#"{"id":"p1#0","annotator":"a2","order":[1,0,2]}"#,
                "\n"
            )
            .as_bytes()
            .to_vec(),
        )),
        "order-predictions" => seeds.push((
            "orders.jsonl".into(),
            b"{\"id\":\"p1#0\",\"order\":[2,0,1]}\n{\"id\":\"p2#1\",\"order\":[0]}\n".to_vec(),
        )),
        "npy" => {
            use stepwise_features::npy;
            let mut f32s = npy::header_bytes(&[2, 3]);
            npy::write_f32s(&mut f32s, &[0.0, 1.5, -2.0, 3.25, 4.0, 5.0]).map_err(|x| e(&x))?;
            seeds.push(("f32-2x3.npy".into(), f32s));
            let mut f16s = npy::header_bytes_for("<f2", &[1, 2, 2]);
            let halves: Vec<half::f16> = [0.5f32, 1.0, -1.0, 2.0].iter().map(|&v| half::f16::from_f32(v)).collect();
            npy::write_f16s(&mut f16s, &halves).map_err(|x| e(&x))?;
            seeds.push(("f16-1x2x2.npy".into(), f16s));
            let mut i64s = npy::header_bytes_for("<i8", &[3]);
            for v in [0i64, 7, -1] {
                i64s.extend_from_slice(&v.to_le_bytes());
            }
            seeds.push(("i64-3.npy".into(), i64s));
        }
        "safetensors" => {
            let bytes = stepwise_models::optim::weights_bytes(&tiny_params()?).map_err(|x| e(&x))?;
            seeds.push(("tiny.safetensors".into(), bytes));
        }
        "checkpoint" => {
            let params = tiny_params()?;
            let adam = stepwise_models::optim::Adam::new(&params, 1e-3).map_err(|x| e(&x))?;
            let dir = tempfile::tempdir().map_err(|x| e(&x))?;
            let path = dir.path().join("checkpoint.safetensors");
            let state = serde_json::json!({"epoch": 1});
            stepwise_models::optim::save_checkpoint(&path, &params, &adam, None, "fuzz", &state).map_err(|x| e(&x))?;
            seeds.push(("tiny-checkpoint.safetensors".into(), std::fs::read(&path).map_err(|x| e(&x))?));
        }
        "pickle" => {
            seeds.push(("tiny-legacy.pt".into(), stepwise_features::pretrained::torch_legacy::tiny_legacy_checkpoint()))
        }
        "image" => {
            use stepwise_features::image::{ImageFormat, RgbImage};
            let img = RgbImage::from_fn(6, 4, |x, y| stepwise_features::image::Rgb([x as u8 * 40, y as u8 * 60, 9]));
            for (name, format) in [("tiny.png", ImageFormat::Png), ("tiny.jpg", ImageFormat::Jpeg)] {
                let mut bytes = Vec::new();
                img.write_to(&mut std::io::Cursor::new(&mut bytes), format).map_err(|x| e(&x))?;
                seeds.push((name.into(), bytes));
            }
        }
        "cli-args" => {
            for (name, argv) in [
                (
                    "embed",
                    &["embed", "corpus", "--encoder", "w2v", "-o", "features", "--shard", "1/2", "--threads", "2"][..],
                ),
                (
                    "sweep",
                    &[
                        "sweep",
                        "corpus",
                        "--features",
                        "f",
                        "-o",
                        "suite",
                        "--questions-per-procedure",
                        "3",
                        "--seed",
                        "7",
                    ],
                ),
                ("world", &["world", "generate", "-n", "50", "-o", "w"]),
                ("audit", &["audit", "suite", "--features", "f", "--aflite", "--aflite-threshold", "0.75", "-o", "a"]),
            ] {
                let argv = argv.join("\0");
                seeds.push((name.into(), argv.as_bytes().to_vec()));
            }
        }
        _ => {}
    }
    Ok(seeds)
}

fn msg(e: impl std::fmt::Display) -> String {
    // `{:#}`-style chains are what the CLI prints; Display of our errors already carries the whole message.
    e.to_string()
}

fn ingest_format(name: &str, path: &Path) -> Result<(), String> {
    let registry = stepwise_ingest::Registry::builtin();
    let format = registry.get(name).map_err(msg)?;
    let opts = stepwise_ingest::ReadOptions::default();
    format.read(&[path.to_path_buf()], &opts).map(drop).map_err(msg)
}

/// The feature store's readers of `.npy` files: copied, memory-mapped f32, memory-mapped f16, i64 vectors. A file
/// is accepted when one of them takes it (each wants its own dtype and rank); every refusal must name the file.
fn read_npy_every_way(path: &Path) -> Result<(), String> {
    use stepwise_features::npy;
    let results = [
        npy::read_matrix(path).map(drop),
        npy::MmapMatrix::open(path).map(drop),
        npy::MmapF16Matrix::open(path).map(drop),
        npy::read_i64_vector(path).map(drop),
    ];
    let refusals: Vec<String> = results.iter().filter_map(|r| r.as_ref().err().map(msg)).collect();
    for m in &refusals {
        assert!(m.contains(&path.display().to_string()), "npy: the error does not name the file: {m}");
    }
    if refusals.len() < results.len() { Ok(()) } else { Err(refusals.join(" | ")) }
}

/// Two small tensors, so safetensors files that name, shape or type them wrongly are refused by the restore.
fn tiny_params() -> Result<stepwise_models::nn::Params, String> {
    let mut p = stepwise_models::nn::Params::new(0);
    p.uniform("layer.weight", &[3, 4], 0.1).map_err(|e| e.to_string())?;
    p.constant("layer.bias", &[4], 0.0).map_err(|e| e.to_string())?;
    Ok(p)
}

/// The name of every scratch file (with the format's extension) and folder.
const SCRATCH_STEM: &str = "fuzz-input";

/// A per-process, per-thread folder the inputs are written to (the readers take paths; tests run in threads).
/// Remembers the path it wrote last: a refusal must name it.
struct Scratch {
    dir: PathBuf,
    written: std::cell::RefCell<Option<PathBuf>>,
}

impl Scratch {
    fn dir() -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local!(static THREAD: usize = NEXT.fetch_add(1, Ordering::Relaxed));
        let thread = THREAD.with(|t| *t);
        std::env::temp_dir().join(format!("stepwise-fuzz-{}-{thread}", std::process::id()))
    }

    fn get() -> Result<Scratch, String> {
        let dir = Self::dir();
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Scratch { dir, written: std::cell::RefCell::new(None) })
    }

    fn file(&self, ext: &str, data: &[u8]) -> Result<PathBuf, String> {
        let path = self.dir.join(format!("{SCRATCH_STEM}.{ext}"));
        std::fs::write(&path, data).map_err(|e| format!("{}: {e}", path.display()))?;
        *self.written.borrow_mut() = Some(path.clone());
        Ok(path)
    }

    fn folder_with(&self, name: &str, data: &[u8]) -> Result<PathBuf, String> {
        let dir = self.dir.join(SCRATCH_STEM);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::write(dir.join(name), data).map_err(|e| format!("{}: {e}", dir.display()))?;
        *self.written.borrow_mut() = Some(dir.clone());
        Ok(dir)
    }
}

/// Remove this thread's scratch folder (the fuzzer's runs are killed by their time budget: the script removes
/// theirs, `stepwise-fuzz-<pid>-*` in the temp folder).
pub fn remove_scratch() {
    let _ = std::fs::remove_dir_all(Scratch::dir());
}
