//! The queue of wanted judgements, kept in the database as counts (`tasks.held`, `wanted`, `assignments.holds`;
//! see `migrations/*/0002_queue.sql`) and changed in the same transaction as the assignment or answer that
//! changes it. Handing out a HIT then reads indexes instead of counting every assignment, so its cost does not
//! grow with the study; and an item is only handed out by a conditional update of its count, which the database
//! applies one at a time, so several server processes on one PostgreSQL database never hand out an item's
//! judgement twice.
//!
//! The rules are [`crate::schedule`]'s (the pure statement, tested without a database); a test checks that
//! both choose the same HITs.

use sqlx::Transaction;
use stepwise_core::Result;

use crate::db::{col, db_error};
use crate::schedule::modality_order;
use crate::study::{Modality, Study};

type Tx = Transaction<'static, sqlx::Any>;

/// Changes to the judgements each modality still wants, made by one transaction and written by [`settle`] just
/// before it commits. Every transaction thus locks the item rows it changes first and the `wanted` rows last,
/// so two server processes taking overlapping items cannot each hold a row the other waits for.
#[derive(Debug, Default)]
pub struct Tally(std::collections::BTreeMap<String, i64>);

/// Write a transaction's [`Tally`] (in modality order).
pub async fn settle(tx: &mut Tx, tally: Tally) -> Result<()> {
    for (modality, change) in tally.0 {
        if change != 0 {
            sqlx::query("UPDATE wanted SET remaining = remaining + $1 WHERE modality = $2")
                .bind(change)
                .bind(&modality)
                .execute(&mut **tx)
                .await
                .map_err(db_error)?;
        }
    }
    Ok(())
}

/// Stop counting open assignments made before `open_before_ms` (past the assignment timeout): their items are
/// wanted again. The people who hold them may still answer ([`count_again`]).
pub async fn expire(tx: &mut Tx, tally: &mut Tally, open_before_ms: i64) -> Result<()> {
    // The status is written out (not bound) so that the planner uses the partial index `assignments_holding`.
    let rows = sqlx::query(
        "UPDATE assignments SET holds = 0 WHERE status = 'open' AND holds = 1 AND created_ms < $1 RETURNING task_id",
    )
    .bind(open_before_ms)
    .fetch_all(&mut **tx)
    .await
    .map_err(db_error)?;
    give_back(tx, tally, &rows).await
}

/// Take one judgement of study item `task` for a new assignment, if it still wants one (false: it is full).
pub async fn take(tx: &mut Tx, tally: &mut Tally, task: i64) -> Result<bool> {
    let row = sqlx::query("UPDATE tasks SET held = held + 1 WHERE id = $1 AND held < needed RETURNING modality")
        .bind(task)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error)?;
    let Some(row) = row else { return Ok(false) };
    *tally.0.entry(col(&row, 0)?).or_default() -= 1;
    Ok(true)
}

/// Assignment `id` was just submitted: if it had stopped counting (past the timeout), its answer counts again.
pub async fn count_again(tx: &mut Tx, tally: &mut Tally, id: i64) -> Result<()> {
    let row = sqlx::query("UPDATE assignments SET holds = 1 WHERE id = $1 AND holds = 0 RETURNING task_id")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error)?;
    if let Some(row) = row {
        shift(tx, tally, col(&row, 0)?, 1).await?;
    }
    Ok(())
}

/// Assignments that stop counting (withdrawn, or their author censored): give their judgements back.
/// `rows` are `RETURNING task_id` rows of an update that set `holds = 0` where it was 1.
pub async fn give_back(tx: &mut Tx, tally: &mut Tally, rows: &[sqlx::any::AnyRow]) -> Result<()> {
    let mut tasks = rows.iter().map(|r| col::<i64>(r, 0)).collect::<Result<Vec<i64>>>()?;
    // Ascending ids: transactions lock item rows in one order.
    tasks.sort_unstable();
    for chunk in tasks.chunk_by(|a, b| a == b) {
        shift(tx, tally, chunk[0], -(chunk.len() as i64)).await?;
    }
    Ok(())
}

/// `held += delta` for one item, and the change in what its modality still wants (an item held beyond what it
/// needs, e.g. after a late answer, wants nothing rather than a negative amount).
async fn shift(tx: &mut Tx, tally: &mut Tally, task: i64, delta: i64) -> Result<()> {
    let row = sqlx::query("UPDATE tasks SET held = held + $1 WHERE id = $2 RETURNING held, needed, modality")
        .bind(delta)
        .bind(task)
        .fetch_one(&mut **tx)
        .await
        .map_err(db_error)?;
    let (held, needed, modality): (i64, i64, String) = (col(&row, 0)?, col(&row, 1)?, col(&row, 2)?);
    let wanted = |h: i64| (needed - h).max(0);
    *tally.0.entry(modality).or_default() += wanted(held) - wanted(held - delta);
    Ok(())
}

/// Judgements still wanted per modality, as written so far.
pub async fn wanted<'e, E>(db: E) -> Result<Vec<(Modality, i64)>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let rows = sqlx::query("SELECT modality, remaining FROM wanted").fetch_all(db).await.map_err(db_error)?;
    rows.iter()
        .map(|r| {
            let name: String = col(r, 0)?;
            let m = Modality::parse(&name)
                .ok_or_else(|| stepwise_core::Error::runtime(format!("database: unknown modality {name:?}")))?;
            Ok((m, col::<i64>(r, 1)?))
        })
        .collect()
}

/// The next study HIT for `worker`, whose next HIT number is `next_seq` (the rules of
/// [`crate::schedule::next_hit`]), taken from the queue inside `tx`; empty when nothing is left for them.
/// The caller inserts the HIT in the same transaction.
pub async fn next_hit(tx: &mut Tx, tally: &mut Tally, study: &Study, worker: i64, next_seq: i64) -> Result<Vec<i64>> {
    let rules = &study.rules;
    // An item of an instance the person had in another modality at HIT `seq` is barred while
    // `next_seq - seq <= gap`, i.e. `seq >= next_seq - gap`; with no gap, ever.
    let barred_from = rules.modality_gap.map_or(i64::MIN, |gap| next_seq - i64::from(gap));
    // What is written, plus this transaction's changes not yet written (the expiry just before).
    let wanted: Vec<(Modality, usize)> = wanted(&mut **tx)
        .await?
        .into_iter()
        .map(|(m, r)| (m, r + tally.0.get(m.as_str()).copied().unwrap_or(0)))
        .filter(|&(_, r)| r > 0)
        .map(|(m, r)| (m, r as usize))
        .collect();
    for modality in modality_order(&wanted) {
        // Items of this modality in queue order that still want judgements and that this person may take:
        // the partial index `tasks_wanted` holds exactly the candidates; each is checked against the person's
        // history through the instance index, then the (worker, task) index. CROSS JOIN keeps SQLite to that
        // order (left to right); otherwise it may walk all of the person's assignments for every candidate.
        let rows = sqlx::query(
            "SELECT t.id, t.instance FROM tasks t \
             WHERE t.modality = $1 AND t.qualification = 0 AND t.held < t.needed \
             AND NOT EXISTS (SELECT 1 FROM tasks t2 \
                 CROSS JOIN assignments a \
                 JOIN hits h ON h.id = a.hit_id \
                 WHERE a.task_id = t2.id AND a.worker_id = $2 \
                 AND t2.instance = t.instance AND t2.qualification = 0 \
                 AND (t2.modality = t.modality OR h.seq >= $3)) \
             ORDER BY t.id LIMIT $4",
        )
        .bind(modality.as_str())
        .bind(worker)
        .bind(barred_from)
        .bind(rules.hit_size as i64)
        .fetch_all(&mut **tx)
        .await
        .map_err(db_error)?;
        let mut hit = Vec::with_capacity(rows.len());
        let mut instances = Vec::with_capacity(rows.len());
        for r in &rows {
            let (id, instance): (i64, i64) = (col(r, 0)?, col(r, 1)?);
            if !instances.contains(&instance) && take(tx, tally, id).await? {
                instances.push(instance);
                hit.push(id);
            }
        }
        if !hit.is_empty() {
            return Ok(hit);
        }
    }
    Ok(Vec::new())
}
