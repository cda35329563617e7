//! The database: SQLite in the study folder by default (WAL, synchronous writes), or PostgreSQL by URL. One SQL
//! text serves both (sqlx's `Any` driver, `$n` placeholders); only the migrations differ (identity columns).
//! Plain `query` calls, no compile-time macros: the schema lives in `migrations/`.

use std::collections::BTreeMap;
use std::sync::Arc;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Row};
use stepwise_core::{Error, Result};

use crate::study::{Modality, Study};

/// Which server the URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone)]
pub struct Db {
    pub pool: AnyPool,
    pub backend: Backend,
    /// SQLite takes one writer: this process's write transactions queue here, in order, rather than in SQLite's
    /// busy handler (whose sleeps of up to 100 ms would set the latency tail). Unused on PostgreSQL.
    writer: Arc<tokio::sync::Mutex<()>>,
}

/// A write transaction (see [`Db::begin_write`]).
pub struct WriteTx {
    pub tx: sqlx::Transaction<'static, sqlx::Any>,
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl WriteTx {
    pub async fn commit(self) -> Result<()> {
        self.tx.commit().await.map_err(db_error)
    }
}

/// A database failure: not the user's input (the server answers 503 and logs it).
pub fn db_error(e: sqlx::Error) -> Error {
    Error::runtime(format!("database: {e}"))
}

/// Column `i` of a row; a type mismatch (a database from another schema) is an error, not a panic.
pub fn col<'r, T>(r: &'r sqlx::any::AnyRow, i: usize) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    r.try_get(i).map_err(db_error)
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    pub id: i64,
    pub label: String,
    pub invite: String,
    pub status: String,
    pub qualification_score: Option<f64>,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AssignmentRow {
    pub id: i64,
    pub hit_id: i64,
    pub hit_seq: i64,
    pub worker_id: i64,
    pub task_id: i64,
    pub position: i64,
    pub status: String,
    pub created_ms: i64,
    pub submitted_ms: Option<i64>,
    pub answer: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub token: String,
    pub worker_id: Option<i64>,
    pub admin: bool,
    pub csrf: String,
    pub created_ms: i64,
}

pub const WORKER_QUALIFYING: &str = "qualifying";
pub const WORKER_ACTIVE: &str = "active";
pub const WORKER_FAILED: &str = "failed";
pub const WORKER_CENSORED: &str = "censored";
pub const OPEN: &str = "open";
pub const DONE: &str = "done";
pub const DISCARDED: &str = "discarded";

const ASSIGNMENT_COLUMNS: &str = "a.id, a.hit_id, h.seq, a.worker_id, a.task_id, a.position, a.status, a.created_ms, \
                                  a.submitted_ms, a.answer";

impl Db {
    /// Connect (creating the SQLite file if needed) and run the migrations.
    pub async fn open(url: &str) -> Result<Db> {
        install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            return Err(Error::usage(format!(
                "--database {}: expected sqlite://FILE or postgres://USER@HOST/DB",
                redact(url)
            )));
        };
        let options = AnyPoolOptions::new().max_connections(if backend == Backend::Sqlite { 4 } else { 8 });
        let options = if backend == Backend::Sqlite {
            options.after_connect(|conn, _| {
                Box::pin(async move {
                    // WAL: readers never wait for the writer; FULL: a submission acknowledged is on disk.
                    for pragma in [
                        "PRAGMA journal_mode = WAL",
                        "PRAGMA synchronous = FULL",
                        "PRAGMA foreign_keys = ON",
                        "PRAGMA busy_timeout = 10000",
                    ] {
                        sqlx::query(pragma).execute(&mut *conn).await?;
                    }
                    Ok(())
                })
            })
        } else {
            options
        };
        let pool = options
            .connect(url)
            .await
            .map_err(|e| Error::bad_input(format!("--database {}: cannot connect: {e}", redact(url))))?;
        let migrator = match backend {
            Backend::Sqlite => sqlx::migrate!("migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("migrations/postgres"),
        };
        migrator.run(&pool).await.map_err(|e| Error::runtime(format!("database migrations: {e}")))?;
        Ok(Db { pool, backend, writer: Arc::new(tokio::sync::Mutex::new(())) })
    }

    /// Begin a transaction that writes (on SQLite, after this process's earlier writers).
    pub async fn begin_write(&self) -> Result<WriteTx> {
        let turn = match self.backend {
            Backend::Sqlite => Some(self.writer.clone().lock_owned().await),
            Backend::Postgres => None,
        };
        Ok(WriteTx { tx: self.pool.begin().await.map_err(db_error)?, _turn: turn })
    }

    /// Load the study's tasks into an empty database, or check that the database holds this study's tasks.
    pub async fn sync_tasks(&self, study: &Study) -> Result<()> {
        let mut rows = self.task_rows().await?;
        if rows.is_empty() {
            match self.insert_tasks(study).await {
                Ok(()) => return Ok(()),
                // Another server process loaded them at the same moment: check what it loaded.
                Err(e) => {
                    rows = self.task_rows().await?;
                    if rows.is_empty() {
                        return Err(e);
                    }
                }
            }
        }
        let mut same = rows.len() == study.tasks.len();
        for (i, (r, t)) in rows.iter().zip(&study.tasks).enumerate() {
            same &= col::<i64>(r, 0)? == i as i64 + 1
                && col::<i64>(r, 1)? == t.instance as i64
                && col::<String>(r, 2)? == t.modality.as_str()
                && (col::<i64>(r, 3)? != 0) == t.qualification;
        }
        if !same {
            return Err(Error::bad_input("the database holds another study's tasks: give each study its own database"));
        }
        Ok(())
    }

    async fn task_rows(&self) -> Result<Vec<sqlx::any::AnyRow>> {
        sqlx::query("SELECT id, instance, modality, qualification, needed FROM tasks ORDER BY id")
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)
    }

    async fn insert_tasks(&self, study: &Study) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        // Many rows per statement: a 100,000-HIT study has hundreds of thousands of items.
        for (c, chunk) in study.tasks.chunks(500).enumerate() {
            let values: Vec<String> = (0..chunk.len())
                .map(|k| format!("(${}, ${}, ${}, ${}, ${})", 5 * k + 1, 5 * k + 2, 5 * k + 3, 5 * k + 4, 5 * k + 5))
                .collect();
            let sql = format!(
                "INSERT INTO tasks (id, instance, modality, qualification, needed) VALUES {}",
                values.join(", ")
            );
            let mut q = sqlx::query(&sql);
            for (k, t) in chunk.iter().enumerate() {
                let needed = if t.qualification { 0 } else { study.rules.judgements as i64 };
                q = q
                    .bind((c * 500 + k) as i64 + 1)
                    .bind(t.instance as i64)
                    .bind(t.modality.as_str())
                    .bind(i64::from(t.qualification))
                    .bind(needed);
            }
            q.execute(&mut *tx).await.map_err(db_error)?;
        }
        sqlx::query(
            "INSERT INTO wanted (modality, remaining) SELECT modality, SUM(needed) FROM tasks \
             WHERE qualification = 0 GROUP BY modality",
        )
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(())
    }

    /// A person with an invite link, labelled exactly `label` (labels are unique).
    pub async fn create_worker(&self, label: &str, status: &str, now_ms: i64) -> Result<WorkerRow> {
        let invite = crate::auth::new_token(16);
        let row =
            sqlx::query("INSERT INTO workers (label, invite, status, created_ms) VALUES ($1, $2, $3, $4) RETURNING id")
                .bind(label)
                .bind(&invite)
                .bind(status)
                .bind(now_ms)
                .fetch_one(&self.pool)
                .await
                .map_err(db_error)?;
        Ok(WorkerRow {
            id: col(&row, 0)?,
            label: label.to_string(),
            invite,
            status: status.to_string(),
            qualification_score: None,
            created_ms: now_ms,
        })
    }

    /// A person labelled `PREFIX-ID` (unique however many invites are made at once).
    pub async fn invite_worker(&self, prefix: &str, status: &str, now_ms: i64) -> Result<WorkerRow> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        let invite = crate::auth::new_token(16);
        let row =
            sqlx::query("INSERT INTO workers (label, invite, status, created_ms) VALUES ($1, $1, $2, $3) RETURNING id")
                .bind(&invite)
                .bind(status)
                .bind(now_ms)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error)?;
        let id: i64 = col(&row, 0)?;
        let label = format!("{prefix}-{id}");
        sqlx::query("UPDATE workers SET label = $1 WHERE id = $2")
            .bind(&label)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(WorkerRow { id, label, invite, status: status.to_string(), qualification_score: None, created_ms: now_ms })
    }

    pub async fn workers(&self) -> Result<Vec<WorkerRow>> {
        let rows =
            sqlx::query("SELECT id, label, invite, status, qualification_score, created_ms FROM workers ORDER BY id")
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
        rows.iter().map(worker_row).collect()
    }

    pub async fn worker(&self, id: i64) -> Result<Option<WorkerRow>> {
        let row =
            sqlx::query("SELECT id, label, invite, status, qualification_score, created_ms FROM workers WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error)?;
        row.as_ref().map(worker_row).transpose()
    }

    pub async fn worker_by_invite(&self, invite: &str) -> Result<Option<WorkerRow>> {
        let row = sqlx::query(
            "SELECT id, label, invite, status, qualification_score, created_ms FROM workers WHERE invite = $1",
        )
        .bind(invite)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        row.as_ref().map(worker_row).transpose()
    }

    pub async fn create_session(&self, worker_id: Option<i64>, admin: bool, now_ms: i64) -> Result<SessionRow> {
        let s = SessionRow {
            token: crate::auth::new_token(32),
            worker_id,
            admin,
            csrf: crate::auth::new_token(32),
            created_ms: now_ms,
        };
        sqlx::query("INSERT INTO sessions (token, worker_id, admin, csrf, created_ms) VALUES ($1, $2, $3, $4, $5)")
            .bind(&s.token)
            .bind(worker_id)
            .bind(i64::from(admin))
            .bind(&s.csrf)
            .bind(now_ms)
            .execute(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(s)
    }

    pub async fn session(&self, token: &str) -> Result<Option<SessionRow>> {
        let row = sqlx::query("SELECT token, worker_id, admin, csrf, created_ms FROM sessions WHERE token = $1")
            .bind(token)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)?;
        row.map(|r| {
            Ok(SessionRow {
                token: col(&r, 0)?,
                worker_id: col(&r, 1)?,
                admin: col::<i64>(&r, 2)? != 0,
                csrf: col(&r, 3)?,
                created_ms: col(&r, 4)?,
            })
        })
        .transpose()
    }

    pub async fn delete_session(&self, token: &str) -> Result<()> {
        sqlx::query("DELETE FROM sessions WHERE token = $1").bind(token).execute(&self.pool).await.map_err(db_error)?;
        Ok(())
    }

    /// Every assignment (with its HIT number), in id order; `worker` limits to one person.
    pub async fn assignments(&self, worker: Option<i64>) -> Result<Vec<AssignmentRow>> {
        let sql = format!(
            "SELECT {ASSIGNMENT_COLUMNS} FROM assignments a JOIN hits h ON h.id = a.hit_id {} ORDER BY a.id",
            if worker.is_some() { "WHERE a.worker_id = $1" } else { "" }
        );
        let mut q = sqlx::query(&sql);
        if let Some(w) = worker {
            q = q.bind(w);
        }
        let rows = q.fetch_all(&self.pool).await.map_err(db_error)?;
        rows.iter().map(assignment_row).collect()
    }

    pub async fn assignment(&self, id: i64) -> Result<Option<AssignmentRow>> {
        let sql =
            format!("SELECT {ASSIGNMENT_COLUMNS} FROM assignments a JOIN hits h ON h.id = a.hit_id WHERE a.id = $1");
        let row = sqlx::query(&sql).bind(id).fetch_optional(&self.pool).await.map_err(db_error)?;
        row.as_ref().map(assignment_row).transpose()
    }

    /// Withdraw an open assignment (its item timed out and others gave every wanted judgement).
    pub async fn release(&self, id: i64) -> Result<()> {
        let mut w = self.begin_write().await?;
        let rows = sqlx::query(
            "UPDATE assignments SET status = $1, holds = 0 WHERE id = $2 AND status = $3 AND holds = 1 RETURNING task_id",
        )
        .bind(DISCARDED)
        .bind(id)
        .bind(OPEN)
        .fetch_all(&mut *w.tx)
        .await
        .map_err(db_error)?;
        let mut tally = crate::queue::Tally::default();
        crate::queue::give_back(&mut w.tx, &mut tally, &rows).await?;
        crate::queue::settle(&mut w.tx, tally).await?;
        sqlx::query("UPDATE assignments SET status = $1 WHERE id = $2 AND status = $3")
            .bind(DISCARDED)
            .bind(id)
            .bind(OPEN)
            .execute(&mut *w.tx)
            .await
            .map_err(db_error)?;
        w.commit().await?;
        Ok(())
    }

    /// The person's last HIT (every assignment of it, in position order); empty before their first HIT.
    /// A person's open items are all in their last HIT (see [`last_hit_state`]).
    pub async fn last_hit(&self, worker: i64) -> Result<Vec<AssignmentRow>> {
        let sql = format!(
            "SELECT {ASSIGNMENT_COLUMNS} FROM assignments a JOIN hits h ON h.id = a.hit_id \
             WHERE a.hit_id = (SELECT id FROM hits WHERE worker_id = $1 ORDER BY seq DESC LIMIT 1) \
             ORDER BY a.position"
        );
        let rows = sqlx::query(&sql).bind(worker).fetch_all(&self.pool).await.map_err(db_error)?;
        rows.iter().map(assignment_row).collect()
    }

    /// Judgements held per task recomputed from the assignments (submitted ones, plus open ones made at or after
    /// `open_since_ms`): what the queue's counts stand for, for checks.
    pub async fn task_load(&self, open_since_ms: i64) -> Result<BTreeMap<i64, usize>> {
        let rows = sqlx::query(
            "SELECT task_id, COUNT(*) FROM assignments WHERE status = $1 OR (status = $2 AND created_ms >= $3) \
             GROUP BY task_id",
        )
        .bind(DONE)
        .bind(OPEN)
        .bind(open_since_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        rows.iter().map(|r| Ok((col::<i64>(r, 0)?, col::<i64>(r, 1)? as usize))).collect()
    }
}

/// Insert a HIT for `worker` holding `tasks` in this order (taken from the queue in the same transaction);
/// returns the HIT's id. Study items' assignments count in their item's judgements (`holds`).
pub async fn insert_hit(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    worker: i64,
    seq: i64,
    qualification: bool,
    tasks: &[i64],
    now_ms: i64,
) -> Result<i64> {
    let hit: i64 = sqlx::query(
        "INSERT INTO hits (worker_id, seq, qualification, created_ms) VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(worker)
    .bind(seq)
    .bind(i64::from(qualification))
    .bind(now_ms)
    .fetch_one(&mut **tx)
    .await
    .map_err(db_error)
    .and_then(|r| col(&r, 0))?;
    for (position, task) in tasks.iter().enumerate() {
        sqlx::query(
            "INSERT INTO assignments (hit_id, worker_id, task_id, position, status, created_ms, holds) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(hit)
        .bind(worker)
        .bind(task)
        .bind(position as i64)
        .bind(OPEN)
        .bind(now_ms)
        .bind(i64::from(!qualification))
        .execute(&mut **tx)
        .await
        .map_err(db_error)?;
    }
    Ok(hit)
}

/// Lock person `worker`'s row for the rest of `tx` and read their status: their requests that change anything
/// run one after the other, also across server processes (on SQLite this first write also takes the database's
/// write lock at once, so the transaction never has to upgrade from reading).
pub async fn lock_worker(tx: &mut sqlx::Transaction<'static, sqlx::Any>, worker: i64) -> Result<String> {
    let row = sqlx::query("UPDATE workers SET status = status WHERE id = $1 RETURNING status")
        .bind(worker)
        .fetch_one(&mut **tx)
        .await
        .map_err(db_error)?;
    col(&row, 0)
}

/// The person's last HIT number (0 before their first HIT) and whether it has open items. Open items are only
/// ever in a person's last HIT (a new HIT is handed out only when none is open), so they are found through
/// `hits`, whose rows never change, rather than an index on the status, which on PostgreSQL fills with dead
/// entries between vacuums as items are answered (at 100,000 HITs that scan had cut the rate by five).
pub async fn last_hit_state(tx: &mut sqlx::Transaction<'static, sqlx::Any>, worker: i64) -> Result<(i64, bool)> {
    let Some(hit) = sqlx::query("SELECT id, seq FROM hits WHERE worker_id = $1 ORDER BY seq DESC LIMIT 1")
        .bind(worker)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error)?
    else {
        return Ok((0, false));
    };
    let (id, seq): (i64, i64) = (col(&hit, 0)?, col(&hit, 1)?);
    let open = sqlx::query("SELECT id FROM assignments WHERE hit_id = $1 AND status = $2 LIMIT 1")
        .bind(id)
        .bind(OPEN)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error)?;
    Ok((seq, open.is_some()))
}

/// What a submission did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// Stored now.
    Stored,
    /// The same answer was already stored (a retried submit): nothing changed.
    Repeated,
    /// A different answer was already stored, or the assignment was discarded.
    Conflict(String),
}

/// Store `answer` for open assignment `id` inside `tx`. On [`Submitted::Stored`] the caller applies what follows
/// from it (worker status, censoring) in the same transaction and commits; it answers the request only after the
/// commit, so an acknowledged submission is stored. Otherwise nothing was written.
pub async fn store_answer(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    id: i64,
    answer: &str,
    now_ms: i64,
) -> Result<Submitted> {
    let updated =
        sqlx::query("UPDATE assignments SET status = $1, submitted_ms = $2, answer = $3 WHERE id = $4 AND status = $5")
            .bind(DONE)
            .bind(now_ms)
            .bind(answer)
            .bind(id)
            .bind(OPEN)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?
            .rows_affected();
    if updated == 1 {
        return Ok(Submitted::Stored);
    }
    let row = sqlx::query("SELECT status, answer FROM assignments WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error)?;
    let Some(r) = row else { return Ok(Submitted::Conflict("no such item".into())) };
    let (status, stored): (String, Option<String>) = (col(&r, 0)?, col(&r, 1)?);
    // The same answer again (a retried submit, also after that submit censored its author) changes nothing.
    Ok(if stored.as_deref() == Some(answer) && (status == DONE || status == DISCARDED) {
        Submitted::Repeated
    } else if status == DONE {
        Submitted::Conflict("this item was already submitted with another answer; answers cannot be changed".into())
    } else {
        Submitted::Conflict("this item was withdrawn from you and is no longer open".into())
    })
}

fn worker_row(r: &sqlx::any::AnyRow) -> Result<WorkerRow> {
    Ok(WorkerRow {
        id: col(r, 0)?,
        label: col(r, 1)?,
        invite: col(r, 2)?,
        status: col(r, 3)?,
        qualification_score: col(r, 4)?,
        created_ms: col(r, 5)?,
    })
}

fn assignment_row(r: &sqlx::any::AnyRow) -> Result<AssignmentRow> {
    Ok(AssignmentRow {
        id: col(r, 0)?,
        hit_id: col(r, 1)?,
        hit_seq: col(r, 2)?,
        worker_id: col(r, 3)?,
        task_id: col(r, 4)?,
        position: col(r, 5)?,
        status: col(r, 6)?,
        created_ms: col(r, 7)?,
        submitted_ms: col(r, 8)?,
        answer: col(r, 9)?,
    })
}

/// Held by the one server process of a SQLite study (released when the process ends, however it ends).
#[derive(Debug)]
pub struct ServerLock {
    _file: std::fs::File,
}

/// A SQLite database takes one writer, so one server process: claim `<database file>.serve-lock` for this
/// process, or say that another process serves it. PostgreSQL takes several processes: `None`.
pub fn claim_server(url: &str) -> Result<Option<ServerLock>> {
    let Some(rest) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) else {
        return Ok(None);
    };
    let path = rest.split('?').next().unwrap_or(rest);
    if path.is_empty() || path == ":memory:" {
        return Ok(None);
    }
    let lock = format!("{path}.serve-lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|e| Error::bad_input(format!("{lock}: cannot open the server lock: {e}")))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(ServerLock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::usage(format!(
            "another `stepwise annotate serve` is serving the SQLite database {path}: SQLite takes one writer, so \
             a study on SQLite has one server process. Stop the other one, or run several processes on one \
             PostgreSQL database (--database postgres://USER@HOST/DB)"
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::bad_input(format!("{lock}: cannot lock: {e}"))),
    }
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

/// Submitted judgements of one task, on the pool or inside a transaction.
pub async fn done_count<'e, E>(db: E, task_id: i64) -> Result<usize>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let r = sqlx::query("SELECT COUNT(*) FROM assignments WHERE task_id = $1 AND status = $2")
        .bind(task_id)
        .bind(DONE)
        .fetch_one(db)
        .await
        .map_err(db_error)?;
    Ok(col::<i64>(&r, 0)? as usize)
}

/// Task id → (instance, modality) of a study (ids are index + 1).
pub fn task_spec(study: &Study, task_id: i64) -> Option<(usize, Modality, bool)> {
    let i = usize::try_from(task_id.checked_sub(1)?).ok()?;
    study.tasks.get(i).map(|t| (t.instance, t.modality, t.qualification))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sqlite_database_has_one_server() {
        let td = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", td.path().join("a.sqlite").display());
        let held = claim_server(&url).unwrap();
        assert!(held.is_some());
        let e = claim_server(&url).unwrap_err().to_string();
        assert!(e.contains("one server process") && e.contains("PostgreSQL"), "{e}");
        drop(held);
        assert!(claim_server(&url).unwrap().is_some(), "free again once the first server is gone");
        assert!(claim_server("postgres://u@h/db").unwrap().is_none());
    }

    #[test]
    fn redact_hides_the_password_only() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("sqlite:///tmp/a.sqlite"), "sqlite:///tmp/a.sqlite");
    }
}
