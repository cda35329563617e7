//! `stepwise annotate create|serve|export`: human judgements of step order in a web app (stepwise-annotate).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use stepwise_annotate::db::Db;
use stepwise_annotate::export::{ExportOptions, export};
use stepwise_annotate::server::{AppState, serve};
use stepwise_annotate::study::{Modality, Study, StudyKind, StudyRules, write_admin_password};
use stepwise_annotate::tls::Transport;
use stepwise_core::output::OutputDir;
use stepwise_core::{Corpus, Manifest};

use crate::usage_bail;

#[derive(clap::Subcommand, Debug)]
pub enum AnnotateCommand {
    Create(CreateArgs),
    Serve(ServeArgs),
    Export(ExportArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindArg {
    /// People put scrambled steps in order (human performance per modality).
    Ordering,
    /// People see the authored order and add other valid orders (multiple references).
    Alternatives,
}

/// Make a study from sequencing instances: the work queue, the rules, and an admin password.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise generate corpus/ --task sequencing --modality multimodal -o seq/\n  \
    stepwise annotate create seq/ --corpus corpus/ --split test --qualification 3 -o study/\n  \
    stepwise annotate serve --study study/ --bind 127.0.0.1:8080\n  \
    stepwise annotate export study/ -o results/\n\n\
    Defaults follow the sequencing paper: HITs of 5 items, each ordered by 3 people, never the same instance \
    for one person in two modalities, people below 20% perfect matches censored (their items re-queued).\n\
    The admin password is written to STUDY/admin-password.txt (owner-only); the admin makes invite links \
    on the dashboard (/admin).")]
pub struct CreateArgs {
    /// Sequencing instances (`stepwise generate --task sequencing` output folder, or its instances.jsonl).
    pub instances: PathBuf,
    /// The study folder to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// The corpus the instances come from (serves the step images); default: the instances' manifest input.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "ordering")]
    pub kind: KindArg,
    /// Modalities each instance is ordered in (ordering studies).
    #[arg(long, value_delimiter = ',', default_value = "multimodal,text,image")]
    pub modalities: Vec<String>,
    /// Only the instances of this split (e.g. test).
    #[arg(long)]
    pub split: Option<String>,
    /// Items per HIT.
    #[arg(long, default_value_t = 5)]
    pub hit_size: usize,
    /// Judgements wanted per item, each by a different person.
    #[arg(long, default_value_t = 3)]
    pub judgements: usize,
    /// HITs before a person may see an instance again in another modality: a number, or `never`.
    #[arg(long, default_value = "never")]
    pub modality_gap: String,
    /// Qualification items (known answers, taken out of the study) every person orders first; 0 = none.
    #[arg(long, default_value_t = 0)]
    pub qualification: usize,
    /// Share of qualification items ordered exactly right needed to join.
    #[arg(long, default_value_t = 0.6)]
    pub qualification_threshold: f64,
    /// Censor people whose perfect-match ratio falls below this (0 = never).
    #[arg(long, default_value_t = 0.2)]
    pub censor_floor: f64,
    /// Judgements a person gives before the floor applies.
    #[arg(long, default_value_t = 10)]
    pub censor_min_items: usize,
    /// Minutes after which an unanswered item is offered to others again.
    #[arg(long, default_value_t = 60)]
    pub assignment_timeout: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Replace an existing study folder.
    #[arg(long)]
    pub force: bool,
}

/// Serve a study: annotators enter by invite link, the admin signs in at /admin/login.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise annotate serve --study study/                                   # SQLite in study/\n  \
    stepwise annotate serve --study study/ --database postgres://lab@db/study --bind 0.0.0.0:8080\n\n\
    The first line on stdout is `listening on http://ADDR/` (https:// with TLS). Stop with Ctrl-C or SIGTERM: submissions are \
    acknowledged only after they are committed, so stopping loses nothing acknowledged.\n\n\
    Several processes may serve one study on one PostgreSQL database (behind a load balancer, or while one \
    restarts): they never hand out an item's judgement twice. A study on SQLite has one server process (a \
    second one is refused).\n\n\
    HTTPS: serve it directly with --tls-cert/--tls-key, or name the TLS proxy in front with --trusted-proxy. \
    Over HTTPS every cookie is Secure and browsers are told to keep to HTTPS (HSTS).")]
pub struct ServeArgs {
    /// The study folder (`stepwise annotate create`).
    #[arg(long)]
    pub study: PathBuf,
    /// sqlite://FILE or postgres://USER@HOST/DB (default: STUDY/annotations.sqlite).
    #[arg(long, env = "STEPWISE_ANNOTATE_DATABASE")]
    pub database: Option<String>,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Serve HTTPS with this certificate chain (PEM, leaf first); needs --tls-key.
    #[arg(long, requires = "tls_key", value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert", value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
    /// A TLS-terminating proxy in front of the server (its IP address; repeat for several): requests from it
    /// that say `X-Forwarded-Proto: https` count as HTTPS.
    #[arg(long, value_name = "IP")]
    pub trusted_proxy: Vec<std::net::IpAddr>,
}

/// Export a study's judgements for `stepwise eval` and `stepwise generate --task sequencing --alt-orders`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise annotate export study/ -o results/\n  \
    stepwise eval study/instances.jsonl -p results/predictions/multimodal-1.jsonl\n  \
    stepwise eval study/instances.jsonl --agreement results/annotations/text.jsonl\n\n\
    Ordering studies: predictions/MODALITY-K.jsonl (each instance's K-th judgement), annotations/MODALITY.jsonl.\n\
    Alternative-order studies: alternatives.jsonl, references.jsonl (people below --min-agreement dropped, then a \
    majority vote per instance). Both: judgements.jsonl, workers.jsonl, summary.md.")]
pub struct ExportArgs {
    /// The study folder (`stepwise annotate create`).
    pub study: PathBuf,
    #[arg(short, long)]
    pub output: PathBuf,
    /// sqlite://FILE or postgres://USER@HOST/DB (default: STUDY/annotations.sqlite).
    #[arg(long, env = "STEPWISE_ANNOTATE_DATABASE")]
    pub database: Option<String>,
    /// Alternative-order studies: people whose mean best-matched κ is below this are left out of the vote.
    #[arg(long, default_value_t = 0.4, allow_negative_numbers = true)]
    pub min_agreement: f64,
    #[arg(long)]
    pub force: bool,
}

pub fn run(command: AnnotateCommand) -> anyhow::Result<()> {
    match command {
        AnnotateCommand::Create(a) => create(a),
        AnnotateCommand::Serve(a) => run_serve(a),
        AnnotateCommand::Export(a) => run_export(a),
    }
}

fn create(args: CreateArgs) -> anyhow::Result<()> {
    let mut modalities = Vec::new();
    for m in &args.modalities {
        match Modality::parse(m.trim()) {
            Some(x) => modalities.push(x),
            None => usage_bail!("--modalities: {m:?} is not one of multimodal, text, image"),
        }
    }
    let modality_gap = match args.modality_gap.as_str() {
        "never" => None,
        n => match n.parse::<u32>() {
            Ok(g) => Some(g),
            Err(_) => usage_bail!("--modality-gap {n:?}: a number of HITs, or `never`"),
        },
    };
    let kind = match args.kind {
        KindArg::Ordering => StudyKind::Ordering,
        KindArg::Alternatives => StudyKind::Alternatives,
    };
    if kind == StudyKind::Alternatives {
        // Alternatives are judged with everything shown.
        modalities = vec![Modality::Multimodal];
    }
    let rules = StudyRules {
        kind,
        modalities,
        hit_size: args.hit_size,
        judgements: args.judgements,
        modality_gap,
        qualification_items: args.qualification,
        qualification_threshold: args.qualification_threshold,
        censor_floor: args.censor_floor,
        censor_min_items: args.censor_min_items,
        assignment_timeout_minutes: args.assignment_timeout,
        seed: args.seed,
    };
    let file = stepwise_score::predictions::instances_file(&args.instances);
    let mut instances = stepwise_score::predictions::read_instances(&args.instances)?;
    if let Some(split) = &args.split {
        instances.retain(|i| &i.split == split);
        if instances.is_empty() {
            usage_bail!("--split {split}: no instances of that split in {}", file.display());
        }
    }
    let image_root = match &args.corpus {
        Some(c) => Some(Corpus::load(c)?.image_root),
        None => Corpus::named_by_manifest(&args.instances)?.map(|c| c.image_root),
    };
    let (study, password) = Study::create(instances, &file, image_root.as_deref(), rules)?;
    let out = OutputDir::create(&args.output, args.force)?;
    study.write(out.path())?;
    write_admin_password(out.path(), &password)?;
    let mut m = Manifest::new("annotation-study").with_seed(args.seed);
    m.add_inputs(&[&file])?;
    m.count("instances", study.instances.len() as u64);
    m.count("tasks", study.tasks.len() as u64);
    m.write(out.path())?;
    let dest = out.commit()?;
    let study_items = study.tasks.iter().filter(|t| !t.qualification).count();
    if stepwise_core::progress::is_quiet() {
        return Ok(());
    }
    eprintln!(
        "study: {} instances, {} items to judge ({} modalities × {} judgements each), {} qualification items\n\
         admin password: {} (owner-only; delete it once noted)\n\
         next: stepwise annotate serve --study {}",
        study.instances.len(),
        study_items,
        study.rules.modalities.len(),
        study.rules.judgements,
        study.rules.qualification_items,
        dest.join(stepwise_annotate::study::ADMIN_PASSWORD_FILE).display(),
        dest.display()
    );
    Ok(())
}

fn database_url(study: &Path, database: &Option<String>) -> anyhow::Result<String> {
    Ok(match database {
        Some(u) => u.clone(),
        None => Study::sqlite_url(study)?,
    })
}

fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let study = Study::read(&args.study)?;
    study.check_images(&args.study)?;
    let url = database_url(&args.study, &args.database)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(stepwise_annotate::tls::server_config(cert, key)?),
        _ => None,
    };
    let transport = Transport { tls: tls.is_some(), trusted_proxies: args.trusted_proxy.clone() };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let _one_server = stepwise_annotate::db::claim_server(&url)?;
    stepwise_annotate::server::runtime()?.block_on(async {
        let db = Db::open(&url).await?;
        db.sync_tasks(&study).await?;
        let state = AppState::serving(db, study, transport);
        let dir = args.study.display().to_string();
        serve(state, args.bind, tls, |addr| {
            // stdout: for scripts (the browser test reads the port from it).
            println!("listening on {scheme}://{addr}/");
            if !stepwise_core::progress::is_quiet() {
                eprintln!("serving study {dir}: admin at {scheme}://{addr}/admin/login · Ctrl-C to stop");
            }
        })
        .await
    })?;
    Ok(())
}

fn run_export(args: ExportArgs) -> anyhow::Result<()> {
    let study = Study::read(&args.study)?;
    let url = database_url(&args.study, &args.database)?;
    if args.database.is_none() && !args.study.join(stepwise_annotate::study::SQLITE_FILE).is_file() {
        anyhow::bail!(stepwise_core::Error::bad_input(format!(
            "{}: no {} yet (serve the study first, or name its database with --database)",
            args.study.display(),
            stepwise_annotate::study::SQLITE_FILE
        )));
    }
    let (workers, assignments) = stepwise_annotate::server::runtime()?.block_on(async {
        let db = Db::open(&url).await?;
        db.sync_tasks(&study).await?;
        let w = db.workers().await?;
        let a = db.assignments(None).await?;
        db.pool.close().await;
        Ok::<_, stepwise_core::Error>((w, a))
    })?;
    let out = OutputDir::create(&args.output, args.force)?;
    let ex = export(&study, &workers, &assignments, out.path(), &ExportOptions { min_agreement: args.min_agreement })?;
    let dest = out.commit()?;
    if !stepwise_core::progress::is_quiet() {
        eprintln!("{}\nwrote {} files to {}", ex.summary.trim_end(), ex.files.len(), dest.display());
    }
    Ok(())
}
