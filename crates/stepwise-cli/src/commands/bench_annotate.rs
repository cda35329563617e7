//! `stepwise bench annotate`: the annotation server under load on loopback, with a `kill -9` in the middle.
//!
//! A study of synthetic five-step instances (multimodal and text, 3 judgements per item) is served by a real
//! `stepwise annotate serve` child process; `--annotators` simulated people (stepwise_annotate::simulate, one
//! kept-alive HTTP connection each) take HITs and submit answers until `--hits` HITs are complete. At
//! `--kill-at` of the way the server is killed with SIGKILL and started again on the same database; people
//! retry what failed. Then every acknowledged submission (HTTP 303) is looked up in the database: present with
//! the same answer (else *lost*), and no item answered twice by one person (else *duplicated*). Both must be 0.
//! Printed: submissions/s, submit latency p50/p99, the restart gap, per backend (SQLite in a temp folder, and
//! PostgreSQL with `--postgres URL`, in a fresh database made and dropped on that server).

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
use stepwise_annotate::simulate::{Behaviour, Step, step};
use stepwise_annotate::study::{Modality, Study, StudyRules};
use stepwise_core::sequencing::{SequencingInstance, SequencingItem};

use super::annotate::runtime;
use crate::usage_bail;

/// Load and crash test of `stepwise annotate serve` (SQLite; PostgreSQL with --postgres).
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  \
    stepwise bench annotate                                   # 100 people, 10,000 HITs, SQLite, kill at 50%\n  \
    stepwise bench annotate --postgres postgres://stepwise@127.0.0.1:55432/postgres\n  \
    stepwise bench annotate --hits 500 --annotators 20 --kill-at 0   # a quick run, no kill")]
pub struct Args {
    /// Simulated people working at the same time.
    #[arg(long, default_value_t = 100)]
    pub annotators: usize,
    /// Completed HITs to reach.
    #[arg(long, default_value_t = 10_000)]
    pub hits: usize,
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
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

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
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.annotators == 0 || a.hits == 0 || a.hit_size == 0 {
        usage_bail!("--annotators, --hits and --hit-size must be at least 1");
    }
    if !(0.0..1.0).contains(&a.kill_at) {
        usage_bail!("--kill-at {}: a share in [0, 1)", a.kill_at);
    }
    let exe = std::env::current_exe()?;
    let mut outcomes = Vec::new();
    if !a.no_sqlite {
        let td = tempfile::tempdir()?;
        let url = format!("sqlite://{}?mode=rwc", td.path().join("bench.sqlite").display());
        outcomes.push(run_backend("sqlite", &exe, &url, td.path(), &a)?);
    }
    if let Some(pg) = &a.postgres {
        // A fresh database on that server, made and dropped on one connection of one runtime.
        let name = format!("stepwise_bench_{}", std::process::id());
        let rt = runtime()?;
        let admin = rt.block_on(async {
            let db = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(pg).await?;
            sqlx::query(&format!("CREATE DATABASE {name}")).execute(&db).await?;
            Ok::<_, sqlx::Error>(db)
        })?;
        let url = replace_database(pg, &name);
        let td = tempfile::tempdir()?;
        let result = run_backend("postgres", &exe, &url, td.path(), &a);
        let dropped = rt.block_on(async {
            sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await
        });
        if let Err(e) = dropped {
            crate::cli_util::warn_user(&format!("bench database {name} was not dropped: {e}"));
        }
        outcomes.push(result?);
    }
    println!(
        "\n| backend | HITs | submissions | seconds | submissions/s | submit p50 ms | submit p99 ms | restart s | lost | duplicated |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut failed = Vec::new();
    for o in &outcomes {
        println!(
            "| {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.1} | {} | {} | {} |",
            o.backend,
            o.hits,
            o.submissions,
            o.seconds,
            o.submissions as f64 / o.seconds,
            o.p50_ms,
            o.p99_ms,
            o.restart_seconds.map_or("–".into(), |s| format!("{s:.2}")),
            o.lost,
            o.duplicated
        );
        if o.lost > 0 || o.duplicated > 0 {
            failed.push(format!("{}: {} lost, {} duplicated", o.backend, o.lost, o.duplicated));
        }
        println!("  ({}: {} answers stored, every acknowledged one among them)", o.backend, o.stored);
    }
    println!("target: 0 lost, 0 duplicated: {}", if failed.is_empty() { "PASS" } else { "FAIL" });
    if !failed.is_empty() {
        anyhow::bail!("bench annotate: {}", failed.join("; "));
    }
    Ok(())
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
        })
        .collect()
}

/// Start `stepwise annotate serve` on `bind` (port 0: any) and wait for its listening line.
fn start_server(exe: &Path, study: &Path, url: &str, bind: &str) -> anyhow::Result<(Child, SocketAddr)> {
    let mut child = Command::new(exe)
        .args(["-q", "annotate", "serve", "--study"])
        .arg(study)
        .args(["--database", url, "--bind", bind])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no server stdout"))?;
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
    a: &Args,
) -> anyhow::Result<Outcome> {
    let modalities = vec![Modality::Multimodal, Modality::Text];
    let judgements = 3;
    let items = a.hits * a.hit_size;
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
        "{backend}: {n} instances, {} items × {judgements} judgements; {} people, target {} HITs of {}",
        study.tasks.len(),
        a.annotators,
        a.hits,
        a.hit_size
    );
    let (child, addr) = start_server(exe, &study_dir, url, "127.0.0.1:0")?;
    let rt = runtime()?;
    let study = Arc::new(study);
    rt.block_on(async {
        let db = Db::open(url).await?;
        let mut invites = Vec::new();
        for k in 0..a.annotators {
            invites.push(db.create_worker(&format!("sim-{k}"), WORKER_ACTIVE, 0).await?.invite);
        }
        let shared = Arc::new(Shared {
            addr: std::sync::RwLock::new(addr),
            hits: AtomicUsize::new(0),
            target: a.hits,
            finished: std::sync::atomic::AtomicBool::new(false),
            acked: tokio::sync::Mutex::new(Vec::new()),
        });
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (k, invite) in invites.into_iter().enumerate() {
            let (shared, db, study) = (shared.clone(), db.clone(), study.clone());
            let seed = a.seed.wrapping_mul(1_000_003).wrapping_add(k as u64);
            tasks.push(tokio::spawn(async move { annotator(shared, db, study, invite, seed).await }));
        }
        let kill_at = (a.kill_at > 0.0).then_some((a.hits as f64 * a.kill_at) as usize);
        let killer = {
            let shared = shared.clone();
            let (exe, study_dir, url) = (exe.to_path_buf(), study_dir.clone(), url.to_string());
            tokio::task::spawn_blocking(move || -> anyhow::Result<(Child, Option<f64>)> {
                let mut child = child;
                let Some(at) = kill_at else { return Ok((child, None)) };
                while shared.hits.load(Ordering::Relaxed) < at {
                    if shared.finished.load(Ordering::Relaxed) {
                        return Ok((child, None));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let t = Instant::now();
                child.kill()?; // SIGKILL
                child.wait()?;
                // Same address (the listener sets SO_REUSEADDR): people's connections just reconnect.
                let (child, addr) = start_server(&exe, &study_dir, &url, &addr.to_string())?;
                *shared.addr.write().map_err(|_| anyhow::anyhow!("lock"))? = addr;
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
        let (mut child, restart_seconds) = killer.await.map_err(|e| anyhow::anyhow!("{e}"))??;
        let _ = child.kill();
        let _ = child.wait();
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
        })
    })
}

struct Shared {
    addr: std::sync::RwLock<SocketAddr>,
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
    db: Db,
    study: Arc<Study>,
    invite: String,
    seed: u64,
) -> anyhow::Result<Vec<f64>> {
    let addr = || *shared.addr.read().unwrap_or_else(|e| e.into_inner());
    let mut client = Client::new(addr());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let behaviour = Behaviour { noise: 0.1, alternative_rate: 0.0, careless: false };
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
