//! `stepwise world ...`: the built-in synthetic procedure world (generate a corpus, render an image on demand,
//! draw a contact sheet of one procedure).

use std::path::PathBuf;

use stepwise_core::Corpus;
use stepwise_world::contact_sheet::contact_sheet;
use stepwise_world::corpus::save_image;
use stepwise_world::truth::parse_image_path;
use stepwise_world::{Domain, WorldImages, WorldParams, render_procedure_images, write_corpus};

use crate::usage_bail;

#[derive(clap::Subcommand, Debug)]
pub enum WorldCommand {
    /// Generate a corpus from the built-in world (procedures with exact ground truth and step images).
    Generate(GenerateArgs),
    /// Render one step image of a world corpus (for corpora made with --no-images).
    Render(RenderArgs),
    /// Draw one procedure's step images side by side with captions (PNG).
    Sheet(SheetArgs),
}

/// Generate a world corpus: procedure JSONL + Parquet + step images + manifest. Same seed, same bytes.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise world generate -n 300 --seed 7 --domain cooking -o corpora/world\n  \
    stepwise world generate -n 100000 --no-images --domain assembly -o corpora/world-100k\n\n\
    Each procedure carries exact ground truth in its annotations: the step DAG (order_constraints), the valid \
    orders (exact count; all of them up to --max-orders, else uniform samples), and annotations.world (action DAG, \
    every entity's state and location after each step, props with counts and orientations, mentions). Step spans \
    mark explicit arguments with character offsets and implicit ones without. With --no-images the corpus lists \
    the same image paths and its manifest records how to render them on demand (`stepwise world render`).")]
pub struct GenerateArgs {
    /// Number of procedures.
    #[arg(short, long, default_value_t = 300)]
    pub n: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, default_value = "cooking", value_parser = ["cooking", "assembly"])]
    pub domain: String,
    /// The corpus folder to create.
    #[arg(short, long, value_name = "CORPUS")]
    pub output: PathBuf,
    /// Do not store images (they can be rendered on demand from the manifest).
    #[arg(long)]
    pub no_images: bool,
    /// Width and height of step images in pixels.
    #[arg(long, default_value_t = stepwise_world::corpus::DEFAULT_IMAGE_SIZE)]
    pub image_size: u32,
    /// List all valid orders of a procedure when there are at most this many, else sample this many.
    #[arg(long, default_value_t = stepwise_world::corpus::DEFAULT_MAX_ORDERS)]
    pub max_orders: usize,
    /// Draw procedures in N shared visual styles (background, lighting, camera), each procedure's chosen
    /// deterministically from the seed, instead of one style per procedure (the default). Few styles weaken the
    /// "same background" shortcut: a wrong image can share the answer's background. Recorded in the manifest
    /// (`params.world.styles`) and per procedure (`annotations.world.style`).
    #[arg(long, value_name = "N")]
    pub styles: Option<u64>,
    /// Replace CORPUS if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Render one step image of a world corpus to a PNG or JPEG file.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  stepwise world render corpora/world images/world-cooking_000042/3f09c2a17b4e.jpg -o step.png\n\n\
    Image file names are hashes of (procedure, step), so they do not reveal the order; take them from the corpus."
)]
pub struct RenderArgs {
    /// The world corpus folder.
    pub corpus: PathBuf,
    /// The image path as listed in the corpus.
    pub image: String,
    /// Output file (.png or .jpg).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Draw a contact sheet of one procedure of a world corpus.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  stepwise world sheet corpora/world --procedure world-cooking/000003 -o sheet.png")]
pub struct SheetArgs {
    /// The world corpus folder.
    pub corpus: PathBuf,
    /// Procedure id (default: the first).
    #[arg(long)]
    pub procedure: Option<String>,
    /// Images per row.
    #[arg(long, default_value_t = 5)]
    pub columns: usize,
    /// Output PNG.
    #[arg(short, long)]
    pub output: PathBuf,
}

pub fn run(cmd: WorldCommand) -> anyhow::Result<()> {
    match cmd {
        WorldCommand::Generate(a) => generate(a),
        WorldCommand::Render(a) => render(a),
        WorldCommand::Sheet(a) => sheet(a),
    }
}

fn generate(args: GenerateArgs) -> anyhow::Result<()> {
    if args.n == 0 {
        usage_bail!("-n must be at least 1");
    }
    let domain = Domain::parse(&args.domain).expect("clap checks the domain");
    let mut params = WorldParams::new(args.seed, domain, args.n);
    params.images_stored = !args.no_images;
    params.image_size = args.image_size;
    params.max_orders = args.max_orders;
    if args.styles == Some(0) {
        usage_bail!("--styles must be at least 1");
    }
    params.styles = args.styles;
    let bar = stepwise_core::progress::bar(args.n, "world");
    let t = std::time::Instant::now();
    let summary = write_corpus(&params, &args.output, args.force, &|done| bar.set_position(done))?;
    bar.finish_and_clear();
    if !stepwise_core::progress::is_quiet() {
        let images = if params.images_stored {
            format!("{} images ({:.1} MB)", summary.images_written, summary.image_bytes as f64 / 1e6)
        } else {
            "images rendered on demand".to_string()
        };
        eprintln!(
            "generated {} {} procedures ({} steps, {images}) into {} in {:.1} s",
            summary.procedures,
            domain.as_str(),
            summary.steps,
            args.output.display(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

fn world_of(corpus: &Corpus) -> anyhow::Result<WorldImages> {
    let Some(manifest) = &corpus.manifest else {
        usage_bail!("{}: no manifest.json; not a world corpus", corpus.dir.display());
    };
    match WorldImages::from_manifest(manifest) {
        Some(w) => Ok(w?),
        None => usage_bail!("{}: not a world corpus (no params.world in its manifest)", corpus.dir.display()),
    }
}

fn render(args: RenderArgs) -> anyhow::Result<()> {
    let corpus = Corpus::load(&args.corpus)?;
    let world = world_of(&corpus)?;
    let img = world.render(&args.image)?;
    Ok(save_image(&img, &args.output)?)
}

fn sheet(args: SheetArgs) -> anyhow::Result<()> {
    let corpus = Corpus::load(&args.corpus)?;
    let world = world_of(&corpus)?;
    let proc = match &args.procedure {
        Some(id) => match corpus.procedures.iter().find(|p| &p.id == id) {
            Some(p) => p,
            None => usage_bail!("{}: no procedure {id:?}", args.corpus.display()),
        },
        None => &corpus.procedures[0],
    };
    let first = proc.steps.first().and_then(|s| s.images.first()).map(String::as_str).unwrap_or("");
    let Some((index, _)) = parse_image_path(world.params.domain, first) else {
        usage_bail!("{}: procedure {} has no world image paths", args.corpus.display(), proc.id);
    };
    let images = render_procedure_images(&world.params, index)?;
    save_image(&contact_sheet(proc, &images, args.columns), &args.output)?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!("wrote {} ({} steps of {})", args.output.display(), images.len(), proc.id);
    }
    Ok(())
}
