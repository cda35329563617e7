//! Generating a world corpus: procedures in parallel (each from its own random streams, so the output is
//! byte-identical for any thread count), step images rendered and stored as JPEG or left to be rendered on
//! demand, and the normal corpus files (JSONL, Parquet, manifest with `params.world`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use image::RgbImage;
use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use stepwise_core::corpus::{PROCEDURES_JSONL, PROCEDURES_PARQUET};
use stepwise_core::json::write_canonical;
use stepwise_core::output::OutputDir;
use stepwise_core::parquet::write_procedures_parquet;
use stepwise_core::rng::{ChaCha8Rng, rng_for};
use stepwise_core::{Error, IoResultExt, Manifest, Procedure, Result};

use crate::model::Domain;
use crate::plan::{Plan, plan, stream};
use crate::render::{Backdrop, backdrop, draw_step};
use crate::text::realise;
use crate::truth::{image_path, parse_image_path, procedure};

/// JPEG quality of stored step images (real corpora are JPEG too).
pub const JPEG_QUALITY: u8 = 90;
/// Default number of valid orders listed per procedure (all of them when there are at most this many).
pub const DEFAULT_MAX_ORDERS: usize = 100;
/// Default number of sampled valid orders (besides the authored one) when there are more than the cap.
pub const DEFAULT_ORDER_SAMPLES: usize = 20;
/// Procedures per chunk of the streaming writer: fixed, so chunk boundaries never depend on the thread count.
const CHUNK: u64 = 1024;
pub const DEFAULT_IMAGE_SIZE: u32 = 224;

/// How a world corpus was made; stored in the manifest as `params.world`, enough to regenerate any procedure
/// or image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldParams {
    pub seed: u64,
    pub domain: Domain,
    pub procedures: u64,
    pub image_size: u32,
    /// False: the corpus lists image paths but the files are rendered on demand ([`WorldImages`]).
    pub images_stored: bool,
    /// All valid orders are listed when there are at most this many.
    pub max_orders: usize,
    /// Otherwise the authored order and up to this many distinct uniform samples.
    #[serde(default = "default_order_samples")]
    pub order_samples: usize,
    /// None (the default): every procedure has its own background, lighting and camera — the per-recipe
    /// "same background" shortcut of real photos, at full strength. Some(k): procedures share k styles
    /// ("kitchens" or workshops), each procedure's drawn deterministically from (seed, procedure), so two
    /// procedures can look alike and the shortcut is weaker the smaller k is. Recorded per procedure in
    /// `annotations.world.style`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub styles: Option<u64>,
}

fn default_order_samples() -> usize {
    DEFAULT_ORDER_SAMPLES
}

impl WorldParams {
    pub fn new(seed: u64, domain: Domain, procedures: u64) -> Self {
        WorldParams {
            seed,
            domain,
            procedures,
            image_size: DEFAULT_IMAGE_SIZE,
            images_stored: true,
            max_orders: DEFAULT_MAX_ORDERS,
            order_samples: DEFAULT_ORDER_SAMPLES,
            styles: None,
        }
    }

    /// The world parameters recorded in a corpus manifest, if it is a world corpus.
    pub fn from_manifest(m: &Manifest) -> Option<Result<Self>> {
        let v = m.params.get("world")?;
        Some(serde_json::from_value(v.clone()).map_err(|e| Error::bad_input(format!("manifest params.world: {e}"))))
    }

    fn check(&self) -> Result<()> {
        if !(16..=2048).contains(&self.image_size) {
            return Err(Error::usage(format!("image size {} is outside 16..=2048", self.image_size)));
        }
        if self.max_orders == 0 || self.order_samples == 0 {
            return Err(Error::usage("max orders and order samples must be at least 1"));
        }
        if self.styles == Some(0) {
            return Err(Error::usage("the number of shared styles must be at least 1"));
        }
        Ok(())
    }

    /// The shared style procedure `index` is drawn in (None when every procedure has its own).
    pub fn style_of(&self, index: u64) -> Option<u64> {
        let k = self.styles?;
        Some(
            rng_for(self.seed, &format!("world/{}/{index}/style-choice", self.domain.as_str()))
                .random_range(0..k.max(1)),
        )
    }

    /// The random stream procedure `index`'s style is drawn from: its own, or its shared style's.
    pub fn style_stream(&self, index: u64) -> ChaCha8Rng {
        match self.style_of(index) {
            None => stream(self.seed, self.domain, index, "style"),
            Some(k) => rng_for(self.seed, &format!("world/{}/shared-style/{k}", self.domain.as_str())),
        }
    }

    /// The backdrop every step image of procedure `index` is drawn on.
    pub fn backdrop(&self, index: u64) -> Backdrop {
        backdrop(self.domain, &mut self.style_stream(index), self.image_size)
    }
}

fn plan_of(params: &WorldParams, index: u64) -> Result<Plan> {
    plan(params.seed, params.domain, index)
        .map_err(|e| Error::runtime(format!("world generation bug at procedure {index}: {e}")))
}

/// Generate one procedure (text, annotations, image paths; no images).
pub fn generate_procedure(params: &WorldParams, index: u64) -> Result<Procedure> {
    let p = plan_of(params, index)?;
    build(params, &p)
}

fn build(params: &WorldParams, p: &Plan) -> Result<Procedure> {
    let text = realise(p, &mut stream(params.seed, params.domain, p.index, "text"));
    procedure(p, &text, params.seed, params.max_orders, params.order_samples, params.style_of(p.index))
        .map_err(|e| Error::runtime(format!("procedure {}: {e}", p.index)))
}

/// Generate procedures `0..params.procedures` in parallel, in index order.
pub fn generate(params: &WorldParams) -> Result<Vec<Procedure>> {
    params.check()?;
    (0..params.procedures).into_par_iter().map(|i| generate_procedure(params, i)).collect()
}

/// Render the image of one step, regenerating the procedure's plan (for many images use [`WorldImages`],
/// which keeps recent plans, or [`render_procedure_images`]).
pub fn render_image(params: &WorldParams, index: u64, step: usize) -> Result<RgbImage> {
    Prepared::new(params, index)?.render(params, step)
}

/// All step images of one procedure (one plan and one backdrop for all steps).
pub fn render_procedure_images(params: &WorldParams, index: u64) -> Result<Vec<RgbImage>> {
    let p = plan_of(params, index)?;
    let b = params.backdrop(index);
    Ok((0..p.steps.len()).map(|s| draw_step(&p, params.seed, s, &b)).collect())
}

/// What rendering any step of one procedure needs: its plan and backdrop.
struct Prepared {
    plan: Plan,
    backdrop: Backdrop,
}

impl Prepared {
    fn new(params: &WorldParams, index: u64) -> Result<Self> {
        Ok(Prepared { plan: plan_of(params, index)?, backdrop: params.backdrop(index) })
    }

    fn render(&self, params: &WorldParams, step: usize) -> Result<RgbImage> {
        let n = self.plan.steps.len();
        if step >= n {
            return Err(Error::bad_input(format!("procedure {} has {n} steps; no step {step}", self.plan.index)));
        }
        Ok(draw_step(&self.plan, params.seed, step, &self.backdrop))
    }
}

/// Encode an image as JPEG at [`JPEG_QUALITY`].
pub fn encode_jpeg(img: &RgbImage) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(16 * 1024);
    let enc = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY);
    img.write_with_encoder(enc).map_err(|e| Error::runtime(format!("JPEG encoding: {e}")))?;
    Ok(out)
}

/// Save an image as PNG or JPEG (by the file's extension), atomically.
pub fn save_image(img: &RgbImage, path: &Path) -> Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let bytes = match ext.as_str() {
        "png" => {
            let mut out = Vec::new();
            img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
                .map_err(|e| Error::runtime(format!("PNG encoding: {e}")))?;
            out
        }
        "jpg" | "jpeg" => encode_jpeg(img)?,
        _ => {
            return Err(Error::usage(format!("{}: the output must end in .png or .jpg", path.display())));
        }
    };
    stepwise_core::output::write_file_atomic(path, |w| std::io::Write::write_all(w, &bytes))
}

/// Renders the images of a world corpus from its manifest, for corpora made with `--no-images` (or to check
/// stored ones). Image paths come one at a time (a feature extractor loads them in batches, from several
/// threads), so the plans and backdrops of the most recently used procedures are kept: the images of one
/// procedure, usually requested together, cost one plan and one backdrop between them.
pub struct WorldImages {
    /// Fixed once images are rendered (the kept plans belong to these parameters): for other parameters make
    /// another `WorldImages`.
    pub params: WorldParams,
    recent: Mutex<VecDeque<(u64, Arc<Prepared>)>>,
}

/// Procedures whose plan and backdrop [`WorldImages`] keeps (about 0.6 MB each at 224×224): enough for
/// every thread of a large machine to be working on a different procedure.
const RECENT_PROCEDURES: usize = 32;

impl std::fmt::Debug for WorldImages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldImages").field("params", &self.params).finish_non_exhaustive()
    }
}

impl Clone for WorldImages {
    fn clone(&self) -> Self {
        WorldImages::new(self.params.clone())
    }
}

impl WorldImages {
    pub fn new(params: WorldParams) -> Self {
        WorldImages { params, recent: Mutex::new(VecDeque::with_capacity(RECENT_PROCEDURES)) }
    }

    /// From a corpus manifest; None when the corpus is not a world corpus.
    pub fn from_manifest(m: &Manifest) -> Option<Result<Self>> {
        WorldParams::from_manifest(m).map(|r| r.map(WorldImages::new))
    }

    /// The image at a corpus image path (`images/world-cooking_000042/3f09c2a17b4e.jpg`).
    pub fn render(&self, rel_path: &str) -> Result<RgbImage> {
        let (index, step) = parse_image_path(self.params.domain, rel_path).ok_or_else(|| {
            Error::bad_input(format!("{rel_path}: not an image path of this {} world", self.params.domain.as_str()))
        })?;
        if index >= self.params.procedures {
            return Err(Error::bad_input(format!("{rel_path}: the corpus has {} procedures", self.params.procedures)));
        }
        self.prepared(index)?.render(&self.params, step)
    }

    /// The plan and backdrop of a procedure, from the recent ones or made now (outside the lock: two threads
    /// asking for the same new procedure may both make it; the results are identical).
    fn prepared(&self, index: u64) -> Result<Arc<Prepared>> {
        let lock = || self.recent.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, p)) = lock().iter().find(|(i, _)| *i == index) {
            return Ok(p.clone());
        }
        let made = Arc::new(Prepared::new(&self.params, index)?);
        let mut recent = lock();
        if !recent.iter().any(|(i, _)| *i == index) {
            if recent.len() == RECENT_PROCEDURES {
                recent.pop_front();
            }
            recent.push_back((index, made.clone()));
        }
        Ok(made)
    }
}

/// What [`write_corpus`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusSummary {
    pub procedures: u64,
    pub steps: u64,
    pub images_written: u64,
    pub image_bytes: u64,
}

/// Generate a world corpus into `out` (atomically: nothing is left on failure). `on_progress` is called with
/// the number of procedures done so far (from worker threads).
///
/// Streaming, so memory stays flat for any size: procedures are made in fixed chunks (in parallel within a
/// chunk; images rendered, encoded and written as they are made), each chunk's JSONL lines are appended in
/// order, and its Parquet part is written while the next chunk is generated; the parts are merged at the end.
pub fn write_corpus(
    params: &WorldParams,
    out: &Path,
    overwrite: bool,
    on_progress: &(dyn Fn(u64) + Sync),
) -> Result<CorpusSummary> {
    params.check()?;
    let dir = OutputDir::create(out, overwrite)?;
    let root = dir.path().to_path_buf();
    let jsonl_path = root.join(PROCEDURES_JSONL);
    let parts_dir = root.join(".parquet-parts");
    std::fs::create_dir_all(&parts_dir).at(&parts_dir)?;
    let mut jsonl = BufWriter::with_capacity(1 << 20, File::create(&jsonl_path).at(&jsonl_path)?);
    let done = AtomicU64::new(0);
    let image_bytes = AtomicU64::new(0);
    let mut steps = 0u64;
    let mut parts: Vec<PathBuf> = Vec::new();
    let mut pending: Option<(Vec<Procedure>, PathBuf)> = None;
    let make = |i: u64| -> Result<(Procedure, Vec<u8>)> {
        let p = plan_of(params, i)?;
        let proc = build(params, &p)?;
        if params.images_stored {
            let backdrop = params.backdrop(i);
            for s in 0..p.steps.len() {
                let bytes = encode_jpeg(&draw_step(&p, params.seed, s, &backdrop))?;
                let path = root.join(image_path(params.domain, i, s));
                if s == 0 {
                    let parent = path.parent().expect("image paths have a folder");
                    std::fs::create_dir_all(parent).at(parent)?;
                }
                std::fs::write(&path, &bytes).at(&path)?;
                image_bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
        }
        let mut line = Vec::with_capacity(32 * 1024);
        write_canonical(&mut line, &proc.to_json()).expect("writing to a Vec cannot fail");
        line.push(b'\n');
        on_progress(done.fetch_add(1, Ordering::Relaxed) + 1);
        Ok((proc, line))
    };
    let mut start = 0u64;
    while start < params.procedures {
        let end = (start + CHUNK).min(params.procedures);
        let previous = pending.take();
        let (made, written) = rayon::join(
            || (start..end).into_par_iter().map(make).collect::<Result<Vec<_>>>(),
            || previous.map_or(Ok(()), |(procs, path)| write_procedures_parquet(&path, &procs)),
        );
        written?;
        let mut procs = Vec::with_capacity((end - start) as usize);
        for (proc, line) in made? {
            jsonl.write_all(&line).at(&jsonl_path)?;
            steps += proc.steps.len() as u64;
            procs.push(proc);
        }
        let part = parts_dir.join(format!("{:06}.parquet", parts.len()));
        parts.push(part.clone());
        pending = Some((procs, part));
        start = end;
    }
    if let Some((procs, path)) = pending.take() {
        write_procedures_parquet(&path, &procs)?;
    }
    let file = jsonl.into_inner().map_err(|e| Error::io(&jsonl_path, e.into_error()))?;
    file.sync_all().at(&jsonl_path)?;
    merge_parquet(&parts, &root.join(PROCEDURES_PARQUET))?;
    std::fs::remove_dir_all(&parts_dir).at(&parts_dir)?;
    let mut manifest = Manifest::new("corpus").with_seed(params.seed);
    manifest.param("world", params);
    manifest.param("source", "stepwise-world");
    // The same counts `stepwise_core::corpus::write_corpus_files` records.
    manifest.count("procedures", params.procedures);
    manifest.count("steps", steps);
    manifest.count("step_images", steps);
    manifest.write(&root)?;
    dir.commit()?;
    Ok(CorpusSummary {
        procedures: params.procedures,
        steps,
        images_written: if params.images_stored { steps } else { 0 },
        image_bytes: image_bytes.into_inner(),
    })
}

/// Concatenate Parquet files with the same schema into one (Snappy, like every stepwise Parquet file).
fn merge_parquet(parts: &[PathBuf], dest: &Path) -> Result<()> {
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    if let [only] = parts {
        return std::fs::rename(only, dest).at(dest);
    }
    let err = |p: &Path, e: &dyn std::fmt::Display| Error::runtime(format!("{}: {e}", p.display()));
    let mut writer = None;
    let out = File::create(dest).at(dest)?;
    let mut out = Some(BufWriter::with_capacity(1 << 20, out));
    for part in parts {
        let f = File::open(part).at(part)?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| err(part, &e))?;
        if writer.is_none() {
            let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
            let w = out.take().expect("the output is taken once");
            writer = Some(ArrowWriter::try_new(w, builder.schema().clone(), Some(props)).map_err(|e| err(dest, &e))?);
        }
        let w = writer.as_mut().expect("the writer exists after the first part");
        for batch in builder.build().map_err(|e| err(part, &e))? {
            w.write(&batch.map_err(|e| err(part, &e))?).map_err(|e| err(dest, &e))?;
        }
    }
    if let Some(w) = writer {
        let inner = w.into_inner().map_err(|e| err(dest, &e))?;
        let f = inner.into_inner().map_err(|e| Error::io(dest, e.into_error()))?;
        f.sync_all().at(dest)?;
    }
    Ok(())
}
