//! `stepwise bench annotate`: the annotation server under load on loopback, with a `kill -9` in the middle.
//!
//! A study of synthetic five-step instances (multimodal and text, 3 judgements per item) is served by a real
//! `stepwise annotate serve` child process; `--annotators` simulated people (stepwise_annotate::simulate, one
//! kept-alive HTTP connection each) take HITs and submit answers until `--hits` HITs are complete. At
//! `--kill-at` of the way the server is killed with SIGKILL and started again on the same database; people
//! retry what failed. Then every acknowledged submission (HTTP 303) is looked up in the database: present with
//! the same answer (else *lost*), and no item answered twice by one person (else *duplicated*). Both must be 0.
//! Printed: submissions/s, submit latency p50/p99, the restart gap, per backend (SQLite in a temp folder, and
//! PostgreSQL with `--postgres URL`, in a fresh database made and dropped on that server) and per study size
//! (`--hits 1000,10000,100000`: the rate must stay flat as the study grows). With `--servers N` (PostgreSQL)
//! N server processes share the database, people spread over them, and the first is the one killed; afterwards
//! no item may hold more judgements than it wants and the queue's counts must equal a recount.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sqlx::Row;
use stepwise_annotate::client::Client;
use stepwise_annotate::db::{DONE, Db, WORKER_ACTIVE};
use stepwise_annotate::simulate::{Behaviour, Confidence, Step, step};
use stepwise_annotate::study::{Modality, Study, StudyRules};
use stepwise_core::sequencing::{SequencingInstance, SequencingItem};

use stepwise_annotate::server::runtime;
use stepwise_cli::usage_bail;

/// Load and crash test of `stepwise annotate serve` (SQLite; PostgreSQL with --postgres).
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise bench annotate                                   # 100 people, 10,000 HITs, SQLite, kill at 50%\n  \
    stepwise bench annotate --postgres postgres://stepwise@127.0.0.1:55432/postgres\n  \
    stepwise bench annotate --hits 500 --annotators 20 --kill-at 0   # a quick run, no kill\n  \
    stepwise bench annotate --hits 1000,10000,100000 --postgres URL   # is the rate flat as the study grows?\n  \
    stepwise bench annotate --no-sqlite --servers 2 --postgres URL    # two processes on one database")]
pub struct Args {
    /// Simulated people working at the same time.
    #[arg(long, default_value_t = 100)]
    pub annotators: usize,
    /// Completed HITs to reach; several sizes (comma-separated) run one after the other, each on a new study.
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    pub hits: Vec<usize>,
    #[arg(long, default_value_t = 5)]
    pub hit_size: usize,
    /// Kill the server with SIGKILL when this share of the HITs is complete, then restart it (0 = no kill).
    #[arg(long, default_value_t = 0.5)]
    pub kill_at: f64,
    /// Also run on this PostgreSQL server (a fresh database is made there and dropped after).
    #[arg(long, env = "STEPWISE_TEST_POSTGRES_URL")]
    pub postgres: Option<String>,
    /// Skip the SQLite run.
    #[arg(long)]
    pub no_sqlite: bool,
    /// Server processes on the one database (more than 1 needs PostgreSQL and --no-sqlite).
    #[arg(long, default_value_t = 1)]
    pub servers: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Targets: p99 submit latency, and the rate of the largest study against the smallest.
const P99_TARGET_MS: f64 = 50.0;
const FLAT_TARGET: f64 = 0.8;

pub(crate) struct Outcome {
    pub(crate) backend: &'static str,
    pub(crate) seconds: f64,
    pub(crate) submissions: usize,
    pub(crate) hits: usize,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) restart_seconds: Option<f64>,
    pub(crate) lost: usize,
    /// Answers acknowledged twice with different contents, items answered twice by one person, items with
    /// more answers than wanted.
    pub(crate) duplicated: usize,
    pub(crate) stored: usize,
    /// Items holding more fresh judgements than they want, plus items whose kept count differs from a recount.
    pub(crate) queue_errors: usize,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.annotators == 0 || a.hits.is_empty() || a.hits.contains(&0) || a.hit_size == 0 || a.servers == 0 {
        usage_bail!("--annotators, --hits, --hit-size and --servers must be at least 1");
    }
    if !(0.0..1.0).contains(&a.kill_at) {
        usage_bail!("--kill-at {}: a share in [0, 1)", a.kill_at);
    }
    if a.servers > 1 && (!a.no_sqlite || a.postgres.is_none()) {
        usage_bail!("--servers {}: several server processes need PostgreSQL (--postgres URL --no-sqlite)", a.servers);
    }
    let exe = crate::stepwise_exe()?;
    let mut outcomes = Vec::new();
    // Each row is printed as its run ends too, so a long invocation stopped part-way keeps what it measured.
    let mut finished = |o: Outcome| {
        println!("finished: {}", table_row(&o, a.servers));
        outcomes.push(o);
    };
    for &hits in &a.hits {
        if !a.no_sqlite {
            let td = tempfile::tempdir()?;
            let url = format!("sqlite://{}?mode=rwc", td.path().join("bench.sqlite").display());
            finished(run_backend("sqlite", &exe, &url, td.path(), hits, &a)?);
        }
        if let Some(pg) = &a.postgres {
            finished(run_postgres(pg, &exe, hits, &a)?);
        }
    }
    println!("\n{TABLE_HEADER}");
    let mut failed = Vec::new();
    for o in &outcomes {
        println!("{}", table_row(o, a.servers));
        if o.lost > 0 || o.duplicated > 0 || o.queue_errors > 0 {
            failed.push(format!(
                "{} at {} HITs: {} lost, {} duplicated, {} queue errors",
                o.backend, o.hits, o.lost, o.duplicated, o.queue_errors
            ));
        }
    }
    for o in &outcomes {
        println!(
            "  ({} at {} HITs: {} answers stored, every acknowledged one among them)",
            o.backend, o.hits, o.stored
        );
    }
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let worst_p99 = outcomes.iter().map(|o| o.p99_ms).fold(0.0, f64::max);
    println!(
        "target: submit p99 < {P99_TARGET_MS} ms: {} (worst {worst_p99:.1} ms)",
        verdict(worst_p99 < P99_TARGET_MS)
    );
    if a.hits.len() > 1 {
        for backend in ["sqlite", "postgres"] {
            let of: Vec<&Outcome> = outcomes.iter().filter(|o| o.backend == backend).collect();
            let (Some(small), Some(large)) = (of.iter().min_by_key(|o| o.hits), of.iter().max_by_key(|o| o.hits))
            else {
                continue;
            };
            let rate = |o: &Outcome| o.submissions as f64 / o.seconds;
            let ratio = rate(large) / rate(small);
            println!(
                "target: {backend} rate at {} HITs ≥ {:.0}% of the rate at {}: {} ({:.0}%)",
                large.hits,
                FLAT_TARGET * 100.0,
                small.hits,
                verdict(ratio >= FLAT_TARGET),
                ratio * 100.0
            );
        }
    }
    println!("target: 0 lost, 0 duplicated, 0 queue errors: {}", verdict(failed.is_empty()));
    if !failed.is_empty() {
        anyhow::bail!("bench annotate: {}", failed.join("; "));
    }
    Ok(())
}

const TABLE_HEADER: &str = "| backend | servers | HITs | submissions | seconds | submissions/s | submit p50 ms | \
    submit p99 ms | restart s | lost | duplicated | queue errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";

fn table_row(o: &Outcome, servers: usize) -> String {
    format!(
        "| {} | {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.1} | {} | {} | {} | {} |",
        o.backend,
        servers,
        o.hits,
        o.submissions,
        o.seconds,
        o.submissions as f64 / o.seconds,
        o.p50_ms,
        o.p99_ms,
        o.restart_seconds.map_or("–".into(), |s| format!("{s:.2}")),
        o.lost,
        o.duplicated,
        o.queue_errors
    )
}

/// One run in a fresh database on the PostgreSQL server `pg`, made and dropped on one connection.
fn run_postgres(pg: &str, exe: &Path, hits: usize, a: &Args) -> anyhow::Result<Outcome> {
    let name = format!("stepwise_bench_{}_{hits}", std::process::id());
    let rt = runtime()?;
    let admin = rt.block_on(async {
        let db = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(pg).await?;
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&db).await?;
        Ok::<_, sqlx::Error>(db)
    })?;
    let url = replace_database(pg, &name);
    let td = tempfile::tempdir()?;
    let result = run_backend("postgres", exe, &url, td.path(), hits, a);
    let dropped = rt
        .block_on(async { sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await });
    if let Err(e) = dropped {
        stepwise_cli::cli_util::warn_user(&format!("bench database {name} was not dropped: {e}"));
    }
    result
}

/// `postgres://u@h:p/db?x` with the database replaced.
fn replace_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..].find('/').map_or(base.len(), |i| i + scheme_end);
    let q = if query.is_empty() { String::new() } else { format!("?{query}") };
    format!("{}/{name}{q}", &base[..path_start])
}

fn instances(n: usize) -> Vec<SequencingInstance> {
    (0..n)
        .map(|i| SequencingInstance {
            id: format!("bench-{i}"),
            procedure: format!("bench-proc-{i}"),
            split: "test".into(),
            modality: "text".into(),
            items: (0..5)
                .map(|k| SequencingItem {
                    step: k,
                    title: Some(format!("Step {k}")),
                    text: Some(format!("Do part {k} of task {i}, then check it.")),
                    images: vec![],
                })
                .collect(),
            references: vec![vec![(i % 5), (i + 1) % 5, (i + 2) % 5, (i + 3) % 5, (i + 4) % 5]],
            constraints: None,
        })
        .collect()
}

/// A server child process, killed when dropped (every way out of a run stops its servers).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `stepwise annotate serve` on `bind` (port 0: any) and wait for its listening line.
fn start_server(exe: &Path, study: &Path, url: &str, bind: &str) -> anyhow::Result<(Server, SocketAddr)> {
    let child = Command::new(exe)
        .args(["-q", "annotate", "serve", "--study"])
        .arg(study)
        .args(["--database", url, "--bind", bind])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut child = Server(child);
    let stdout = child.0.stdout.take().ok_or_else(|| anyhow::anyhow!("no server stdout"))?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .and_then(|s| s.trim_end_matches('/').parse().ok())
        .ok_or_else(|| anyhow::anyhow!("the server did not start (said {line:?})"))?;
    Ok((child, addr))
}

pub(crate) fn run_backend(
    backend: &'static str,
    exe: &Path,
    url: &str,
    dir: &Path,
    hits: usize,
    a: &Args,
) -> anyhow::Result<Outcome> {
    let modalities = vec![Modality::Multimodal, Modality::Text];
    let judgements = 3;
    let items = hits * a.hit_size;
    let per_person = items.div_ceil(a.annotators);
    // Enough items for the target with room to spare, and enough instances that no one runs out.
    let n = (items.div_ceil(judgements * modalities.len()) * 5 / 4).max(per_person * 3 / 2) + 1;
    let rules = StudyRules {
        modalities,
        hit_size: a.hit_size,
        judgements,
        censor_floor: 0.0,
        seed: a.seed,
        ..StudyRules::default()
    };
    let study_dir = dir.join("study");
    std::fs::create_dir_all(&study_dir)?;
    let (study, _) = Study::create(instances(n), Path::new("bench"), None, rules)?;
    study.write(&study_dir)?;
    let study = Study::read(&study_dir)?;
    println!(
        "{backend}: {n} instances, {} items × {judgements} judgements; {} people, target {hits} HITs of {}, {} server \
         process(es)",
        study.tasks.len(),
        a.annotators,
        a.hit_size,
        a.servers
    );
    // One after the other: each loads the study's items into the database before it listens.
    let mut children = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..a.servers {
        let (child, addr) = start_server(exe, &study_dir, url, "127.0.0.1:0")?;
        children.push(child);
        addrs.push(std::sync::RwLock::new(addr));
    }
    let addr = *addrs[0].read().map_err(|_| anyhow::anyhow!("lock"))?;
    let child = children.remove(0);
    let rt = runtime()?;
    let study = Arc::new(study);
    rt.block_on(async {
        let db = Db::open(url).await?;
        let mut invites = Vec::new();
        for k in 0..a.annotators {
            invites.push(db.create_worker(&format!("sim-{k}"), WORKER_ACTIVE, 0).await?.invite);
        }
        let shared = Arc::new(Shared {
            addrs,
            hits: AtomicUsize::new(0),
            target: hits,
            finished: std::sync::atomic::AtomicBool::new(false),
            acked: tokio::sync::Mutex::new(Vec::new()),
        });
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (k, invite) in invites.into_iter().enumerate() {
            let (shared, db, study) = (shared.clone(), db.clone(), study.clone());
            let seed = a.seed.wrapping_mul(1_000_003).wrapping_add(k as u64);
            tasks.push(tokio::spawn(async move { annotator(shared, k, db, study, invite, seed).await }));
        }
        let kill_at = (a.kill_at > 0.0).then_some((hits as f64 * a.kill_at) as usize);
        let killer = {
            let shared = shared.clone();
            let (exe, study_dir, url) = (exe.to_path_buf(), study_dir.clone(), url.to_string());
            tokio::task::spawn_blocking(move || -> anyhow::Result<(Server, Option<f64>)> {
                let mut child = child;
                let Some(at) = kill_at else { return Ok((child, None)) };
                while shared.hits.load(Ordering::Relaxed) < at {
                    if shared.finished.load(Ordering::Relaxed) {
                        return Ok((child, None));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let t = Instant::now();
                child.0.kill()?; // SIGKILL
                child.0.wait()?;
                // Same address (the listener sets SO_REUSEADDR): people's connections just reconnect.
                let (child, addr) = start_server(&exe, &study_dir, &url, &addr.to_string())?;
                *shared.addrs[0].write().map_err(|_| anyhow::anyhow!("lock"))? = addr;
                Ok((child, Some(t.elapsed().as_secs_f64())))
            })
        };
        let mut latencies = Vec::new();
        let mut failure = None;
        for t in tasks {
            match t.await {
                Ok(Ok(l)) => latencies.extend(l),
                Ok(Err(e)) => failure = Some(e),
                Err(e) => failure = Some(anyhow::anyhow!("annotator task: {e}")),
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        // Every way out stops the killer thread and the server.
        shared.finished.store(true, Ordering::Relaxed);
        let (child, restart_seconds) = killer.await.map_err(|e| anyhow::anyhow!("{e}"))??;
        drop(child);
        drop(children);
        if let Some(e) = failure {
            return Err(e);
        }
        // Every acknowledged answer is stored, once.
        let acked = shared.acked.lock().await;
        let mut by_id: BTreeMap<i64, &str> = BTreeMap::new();
        let mut conflicting = 0;
        for (id, answer) in acked.iter() {
            if let Some(previous) = by_id.insert(*id, answer)
                && previous != answer.as_str()
            {
                conflicting += 1;
            }
        }
        let rows = sqlx::query("SELECT id, status, answer FROM assignments").fetch_all(&db.pool).await?;
        let stored: BTreeMap<i64, (String, Option<String>)> = rows
            .iter()
            .map(|r| Ok((r.try_get::<i64, _>(0)?, (r.try_get(1)?, r.try_get(2)?))))
            .collect::<Result<_, sqlx::Error>>()?;
        let lost = by_id
            .iter()
            .filter(|(id, answer)| !matches!(stored.get(id), Some((s, Some(x))) if s == DONE && x.as_str() == **answer))
            .count();
        let twice: i64 = sqlx::query(
            "SELECT COUNT(*) FROM (SELECT worker_id, task_id FROM assignments GROUP BY worker_id, task_id \
             HAVING COUNT(*) > 1) d",
        )
        .fetch_one(&db.pool)
        .await?
        .try_get(0)?;
        let over: i64 = sqlx::query(
            "SELECT COUNT(*) FROM (SELECT task_id FROM assignments WHERE status = $1 GROUP BY task_id \
             HAVING COUNT(*) > $2) d",
        )
        .bind(DONE)
        .bind(judgements as i64)
        .fetch_one(&db.pool)
        .await?
        .try_get(0)?;
        let duplicated = conflicting + twice as usize + over as usize;
        // No item holds more fresh judgements than it wants, and the kept counts equal a recount (every open
        // assignment is fresh: the run is far shorter than the assignment timeout).
        let recount = db.task_load(0).await?;
        let held: Vec<(i64, i64, i64)> =
            sqlx::query_as("SELECT id, held, needed FROM tasks WHERE qualification = 0").fetch_all(&db.pool).await?;
        let queue_errors = held
            .iter()
            .filter(|(id, h, needed)| h > needed || *h as usize != recount.get(id).copied().unwrap_or(0))
            .count();
        let done = stored.values().filter(|(s, _)| s == DONE).count();
        latencies.sort_by(f64::total_cmp);
        let q = |p: f64| {
            latencies
                .get(((p * latencies.len() as f64) as usize).min(latencies.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0.0)
                * 1e3
        };
        Ok::<_, anyhow::Error>(Outcome {
            backend,
            seconds,
            submissions: by_id.len(),
            hits: shared.hits.load(Ordering::Relaxed),
            p50_ms: q(0.5),
            p99_ms: q(0.99),
            restart_seconds,
            lost,
            duplicated,
            stored: done,
            queue_errors,
        })
    })
}

struct Shared {
    /// Each server process's address (person k uses server k mod N; the first is the one killed).
    addrs: Vec<std::sync::RwLock<SocketAddr>>,
    hits: AtomicUsize,
    target: usize,
    /// Set when every simulated person has stopped.
    finished: std::sync::atomic::AtomicBool,
    acked: tokio::sync::Mutex<Vec<(i64, String)>>,
}

/// One simulated person: join, then answer until the study's target is reached; failures (a killed server)
/// are retried against the current address. Returns the submit latencies in seconds.
async fn annotator(
    shared: Arc<Shared>,
    k: usize,
    db: Db,
    study: Arc<Study>,
    invite: String,
    seed: u64,
) -> anyhow::Result<Vec<f64>> {
    let server = &shared.addrs[k % shared.addrs.len()];
    let addr = || *server.read().unwrap_or_else(|e| e.into_inner());
    let mut client = Client::new(addr());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let behaviour =
        Behaviour { noise: 0.1, alternative_rate: 0.0, careless: false, confidence: Confidence::FromCorrectness };
    let mut failures = 0;
    loop {
        client.set_addr(addr());
        match client.get(&format!("/join/{invite}")).await {
            Ok(r) if r.status == 303 => break,
            Ok(r) => anyhow::bail!("join answered {}", r.status),
            Err(_) if failures < 600 => {
                failures += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut latencies = Vec::new();
    let mut failures = 0;
    while shared.hits.load(Ordering::Relaxed) < shared.target {
        client.set_addr(addr());
        match step(&mut client, &db, &study, &behaviour, &mut rng).await {
            Ok(Step::Submitted { assignment, answer, hit_done, submit_seconds }) => {
                failures = 0;
                latencies.push(submit_seconds);
                shared.acked.lock().await.push((assignment, answer));
                if hit_done {
                    shared.hits.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(Step::Finished(_)) => break,
            Err(_) if failures < 600 => {
                failures += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(latencies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_replaced_in_urls() {
        assert_eq!(replace_database("postgres://u@h:5/db", "x"), "postgres://u@h:5/x");
        assert_eq!(replace_database("postgres://u@h:5/db?sslmode=disable", "x"), "postgres://u@h:5/x?sslmode=disable");
        assert_eq!(replace_database("postgres://u@h:5", "x"), "postgres://u@h:5/x");
    }
}
