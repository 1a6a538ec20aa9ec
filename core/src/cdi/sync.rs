//! The rules of a sync job; the host reads the source. A job begins (closing a job
//! a crashed run left `running`), commits batches, and finishes:
//!
//! - [`begin`] records a `running` job and returns the cursor to read after.
//! - [`commit_batch`] applies one batch of rows through the same code as
//!   `/users/track` (per row: parse, look up groups, `apply_op`) or `/users/delete`,
//!   and in the same unit of work adds the batch's counts to the job and moves the
//!   integration's cursor to the batch's last row. A crash loses the whole batch
//!   or none of it; the next job reads after the last committed one. A batch that
//!   ends inside a group of rows sharing one `UPDATED_AT` records its place in
//!   the group ([`super::resume`]), so a group of any size syncs.
//! - [`finish`] sets the job's status from its counts (or the failure) and the
//!   integration's next scheduled run.

use super::integration::{get, Cursor, DataKind, Integration, JobStatus, INTEGRATION_TABLE};
use super::job::{job_key, Job, RowError};
use super::resume::next_cursor;
use super::rows::{Row, Work};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::ids::IdGen;
use crate::json::Json;
use crate::repo::transact::transact;
use crate::repo::Tx;
use crate::store::{Store, Table};
use crate::time::Timestamp;
use crate::track::apply::{apply_op, look_up_groups};
use crate::track::parse::{self, TrackOp};
use crate::users::prioritization::pick;

/// Where a job starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Begun {
    /// The integration as it was when the job began.
    pub integration: Integration,
    /// The job's sequence number.
    pub seq: u64,
}

impl Begun {
    /// The randomness of one batch of this job (`n`: which), from a context's: ids
    /// a batch makes are its job's own even where every context's randomness is the
    /// same (`--id-seed`), so two jobs, or two batches, never draw the same ones.
    pub fn batch_seed(&self, seed: [u8; 16], n: &str) -> [u8; 16] {
        crate::ids::derived_seed(&[&seed, self.integration.id.as_bytes(), &self.seq.to_le_bytes(), n.as_bytes()])
    }
}

/// Most jobs an integration keeps (the oldest go first).
pub const MAX_JOBS: u64 = 1000;

/// Why a begun job could not go on.
pub const INTERRUPTED: &str =
    "the job was interrupted before it finished (the next job resumed after its last committed batch)";

/// Reads job `seq` of an integration.
pub async fn job<S: Store>(store: &S, i: &Integration, seq: u64) -> Result<Option<Job>, ApiError> {
    match store.get(Table::CdiJob, &job_key(&i.workspace, &i.id, seq)).await? {
        Some(e) => Ok(Some(crate::repo::codec::decode(&e.value)?)),
        None => Ok(None),
    }
}

/// Starts a job of integration `id`: a job left `running` by a crash is closed as
/// `error` (its counts are what it committed), and a new `running` job recorded.
pub async fn begin<S: Store>(store: &S, id: &str, ctx: Ctx) -> Result<Begun, ApiError> {
    let first = get(store, id).await?.ok_or_else(|| ApiError::NotFound(format!("no integration '{id}'")))?;
    let ws = first.workspace.clone();
    transact(store, &ws, ctx.seed, async |tx, _| {
        let mut i: Integration =
            tx.doc(INTEGRATION_TABLE, id).await?.ok_or_else(|| ApiError::NotFound(format!("no integration '{id}'")))?;
        close_stale(tx, &mut i, ctx.now).await?;
        i.jobs += 1;
        // An integration keeps its last MAX_JOBS jobs: the status list reads them all.
        if i.jobs > MAX_JOBS {
            tx.delete_doc(Table::CdiJob, &job_key(&ws, id, i.jobs - MAX_JOBS));
        }
        let mut job = Job::start(i.jobs, ctx.now);
        // A job that syncs nothing new still reports where the integration stands.
        job.last_timestamp_synced = i.cursor.as_ref().map(|c| c.updated_at);
        i.last_job = Some((ctx.now, JobStatus::Running));
        i.updated_at = ctx.now;
        tx.put_doc(Table::CdiJob, &job_key(&ws, id, i.jobs), &job)?;
        tx.put_doc(INTEGRATION_TABLE, id, &i)?;
        Ok(Begun { seq: i.jobs, integration: i })
    })
    .await
}

/// Closes a job a crashed process left `running` (the host calls this for every
/// integration when it starts running jobs, so no job stays `running` for ever).
pub async fn close_interrupted<S: Store>(store: &S, i: &Integration, ctx: Ctx) -> Result<(), ApiError> {
    if !matches!(i.last_job, Some((_, JobStatus::Running))) {
        return Ok(());
    }
    transact(store, &i.workspace, ctx.seed, async |tx, _| {
        let Some(mut current) = tx.doc::<Integration>(INTEGRATION_TABLE, &i.id).await? else { return Ok(()) };
        if close_stale(tx, &mut current, ctx.now).await? {
            tx.put_doc(INTEGRATION_TABLE, &i.id, &current)?;
        }
        Ok(())
    })
    .await
}

/// In a unit of work: closes the integration's last job as `error` (interrupted)
/// if it is still `running`; says whether it did.
async fn close_stale<S: Store>(tx: &mut Tx<'_, S>, i: &mut Integration, now: Timestamp) -> Result<bool, ApiError> {
    if i.jobs == 0 {
        return Ok(false);
    }
    let key = job_key(&i.workspace, &i.id, i.jobs);
    let Some(mut stale) = tx.doc::<Job>(Table::CdiJob, &key).await? else { return Ok(false) };
    if stale.status != JobStatus::Running {
        return Ok(false);
    }
    stale.status = JobStatus::Error;
    stale.failure = Some(INTERRUPTED.into());
    stale.finished_at = Some(now);
    i.last_job = Some((stale.started_at, JobStatus::Error));
    tx.put_doc(Table::CdiJob, &key, &stale)?;
    Ok(true)
}

/// What one committed batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Rows synced.
    pub synced: u64,
    /// Rows that failed.
    pub failed: u64,
}

/// A row ready to apply, or why it failed.
pub(super) enum Prepared {
    Track(TrackOp),
    Delete(crate::ids::Identifier),
    Failed(String),
}

/// Parses a batch's rows (each on its own, so one row's errors never reach
/// another) and looks up the subscription groups they name.
async fn prepare<S: Store>(
    store: &S,
    i: &Integration,
    rows: &[Row],
    now: Timestamp,
) -> Result<Vec<Prepared>, ApiError> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push(match row.work(i.kind) {
            Err(reason) => Prepared::Failed(reason),
            Ok(Work::Delete(ident)) => Prepared::Delete(ident),
            Ok(Work::Track(array, object)) => {
                let items = vec![Json::Object(object)];
                let parsed = look_up_groups(
                    store,
                    &i.workspace,
                    parse::parse(&[(array, &items)], now, crate::dialect::Dialect::Platform),
                )
                .await?;
                match (parsed.errors.first(), parsed.ops.into_iter().next()) {
                    (None, Some((_, op))) => Prepared::Track(op),
                    (Some(e), _) => Prepared::Failed(e["type"].as_str().unwrap_or("invalid row").to_string()),
                    (None, None) => Prepared::Failed("the row holds nothing to sync".into()),
                }
            }
        });
    }
    Ok(out)
}

/// Applies the batch's rows in order. A row that would take a profile over a bound
/// on its size ([`crate::profile::Profile::size_error`]) stops the unit of
/// work and is named in `oversized`, so the batch is applied again without it: it
/// fails alone, and the rows around it go on.
async fn apply_rows<S: Store>(
    tx: &mut Tx<'_, S>,
    prepared: &[Prepared],
    now: Timestamp,
    ids: &mut IdGen,
    oversized: &std::cell::Cell<Option<(usize, String)>>,
) -> Result<(), ApiError> {
    // The batch's profiles in two store reads, not one or two a row.
    let idents: Vec<_> = prepared
        .iter()
        .filter_map(|p| match p {
            Prepared::Track(op) => Some(op.target().ident.clone()),
            Prepared::Delete(ident) => Some(ident.clone()),
            Prepared::Failed(_) => None,
        })
        .collect();
    tx.prefetch(&idents).await?;
    for (at, p) in prepared.iter().enumerate() {
        match p {
            Prepared::Track(op) => {
                apply_op(tx, op, now, ids).await?;
                if let Some(why) = tx.take_oversized() {
                    oversized.set(Some((at, why.clone())));
                    return Err(ApiError::bad(why));
                }
            }
            Prepared::Delete(ident) => {
                if let Some(id) = pick(tx, ident, None).await?.one() {
                    tx.delete_profile(&id).await?;
                }
            }
            Prepared::Failed(_) => {}
        }
    }
    Ok(())
}

/// A batch read and parsed, ready to commit: parsing needs no unit of work, so a
/// host may parse the next batch while the one before commits.
pub struct PreparedBatch {
    pub(super) rows: Vec<Row>,
    pub(super) prepared: Vec<Prepared>,
}

/// Parses a batch of the rows of integration `i` (each row on its own).
pub async fn prepare_batch<S: Store>(
    store: &S,
    i: &Integration,
    rows: Vec<Row>,
    now: Timestamp,
) -> Result<PreparedBatch, ApiError> {
    let prepared = prepare(store, i, &rows, now).await?;
    Ok(PreparedBatch { rows, prepared })
}

/// Commits one batch of job `seq`: the rows' effects, the job's counts and the
/// integration's cursor, together. `after` is the cursor the batch was read after:
/// should the integration have moved on meanwhile (another runner), nothing is
/// written and the job is told so. `group_continues`: the next row shares the
/// last one's `UPDATED_AT`. Returns the report and the new cursor.
pub async fn commit_batch<S: Store>(
    store: &S,
    begun: &Begun,
    after: Option<&Cursor>,
    rows: &[Row],
    group_continues: bool,
    ctx: Ctx,
) -> Result<(BatchReport, Option<Cursor>), ApiError> {
    let batch = prepare_batch(store, &begun.integration, rows.to_vec(), ctx.now).await?;
    commit_prepared(store, begun, after, batch, group_continues, ctx).await
}

/// [`commit_batch`] of a batch parsed by [`prepare_batch`].
pub async fn commit_prepared<S: Store>(
    store: &S,
    begun: &Begun,
    after: Option<&Cursor>,
    batch: PreparedBatch,
    group_continues: bool,
    ctx: Ctx,
) -> Result<(BatchReport, Option<Cursor>), ApiError> {
    let PreparedBatch { rows, mut prepared } = batch;
    let Some(to) = next_cursor(after, &rows, group_continues) else {
        return Ok((BatchReport::default(), after.cloned()));
    };
    let ws = begun.integration.workspace.clone();
    // Each pass either commits or finds one more row too large for its profile.
    loop {
        let oversized = std::cell::Cell::new(None);
        let seed = begun.batch_seed(ctx.seed, &format!("{to:?}"));
        let committed = transact(store, &ws, seed, async |tx, ids| {
            let report = apply_batch(tx, ids, begun, after, &to, &rows, &prepared, ctx.now, &oversized).await?;
            Ok((report, Some(to.clone())))
        })
        .await;
        match (committed, oversized.take()) {
            (Err(_), Some((at, why))) => prepared[at] = Prepared::Failed(why),
            (committed, _) => return committed,
        }
    }
}

/// In a unit of work: applies a batch of job `begun` read after the cursor `after`,
/// adds its counts to the job and moves the integration's cursor to `to`. A row too
/// large for its profile fails the unit of work and is named in `oversized`.
#[allow(clippy::too_many_arguments)] // one unit of work's inputs, shared by two callers
pub(super) async fn apply_batch<S: Store>(
    tx: &mut Tx<'_, S>,
    ids: &mut IdGen,
    begun: &Begun,
    after: Option<&Cursor>,
    to: &Cursor,
    rows: &[Row],
    prepared: &[Prepared],
    now: Timestamp,
    oversized: &std::cell::Cell<Option<(usize, String)>>,
) -> Result<BatchReport, ApiError> {
    let i = &begun.integration;
    let mut current: Integration =
        tx.doc(INTEGRATION_TABLE, &i.id).await?.ok_or_else(|| ApiError::NotFound("integration deleted".into()))?;
    if current.cursor.as_ref() != after || current.jobs != begun.seq {
        return Err(ApiError::bad("the integration's cursor moved: another job is running"));
    }
    let key = job_key(&i.workspace, &i.id, begun.seq);
    let mut job: Job = tx.doc(Table::CdiJob, &key).await?.ok_or_else(|| ApiError::NotFound("job".into()))?;
    apply_rows(tx, prepared, now, ids, oversized).await?;
    let mut report = BatchReport::default();
    for (row, p) in rows.iter().zip(prepared) {
        match p {
            Prepared::Failed(reason) => {
                report.failed += 1;
                job.fail_row(RowError {
                    updated_at: Some(row.updated_at),
                    identifier: row.describe(),
                    reason: reason.clone(),
                });
            }
            _ => {
                report.synced += 1;
                job.rows_synced += 1;
            }
        }
    }
    job.last_timestamp_synced = Some(to.updated_at);
    current.cursor = Some(to.clone());
    // Read and written by every batch: one built on a batch whose commit failed
    // expects a version that nothing else gives it ([`Table::CdiBatches`]).
    let batches: u64 = tx.doc(Table::CdiBatches, &i.id).await?.unwrap_or(0);
    tx.put_doc(Table::CdiBatches, &i.id, &(batches + 1))?;
    tx.put_doc(Table::CdiJob, &key, &job)?;
    tx.put_doc(INTEGRATION_TABLE, &i.id, &current)?;
    Ok(report)
}

/// Counts rows that could not be read as failed on job `seq` (their reasons kept,
/// the first ones only), without moving the cursor: they have no place on it.
pub async fn fail_rows<S: Store>(store: &S, begun: &Begun, failed: Vec<RowError>, ctx: Ctx) -> Result<(), ApiError> {
    let i = &begun.integration;
    let key = job_key(&i.workspace, &i.id, begun.seq);
    transact(store, &i.workspace, ctx.seed, async |tx, _| {
        let mut job: Job = tx.doc(Table::CdiJob, &key).await?.ok_or_else(|| ApiError::NotFound("job".into()))?;
        for e in &failed {
            job.fail_row(e.clone());
        }
        tx.put_doc(Table::CdiJob, &key, &job)?;
        Ok(())
    })
    .await
}

/// Ends job `seq`: its status from its counts, or `failure` (a status and why) when
/// the source could not be read; the integration's next run follows its schedule.
pub async fn finish<S: Store>(
    store: &S,
    begun: &Begun,
    failure: Option<(JobStatus, String)>,
    ctx: Ctx,
) -> Result<Job, ApiError> {
    let i = &begun.integration;
    let ws = i.workspace.clone();
    transact(store, &ws, ctx.seed, async |tx, _| {
        let mut current: Integration =
            tx.doc(INTEGRATION_TABLE, &i.id).await?.ok_or_else(|| ApiError::NotFound("integration deleted".into()))?;
        let key = job_key(&ws, &i.id, begun.seq);
        let mut job: Job = tx.doc(Table::CdiJob, &key).await?.ok_or_else(|| ApiError::NotFound("job".into()))?;
        if job.status != JobStatus::Running {
            return Ok(job);
        }
        job.status = match &failure {
            Some((status, _)) => *status,
            None => job.outcome(),
        };
        job.failure = failure.as_ref().map(|(_, why)| why.clone());
        job.finished_at = Some(ctx.now.max(job.started_at));
        if current.jobs == begun.seq {
            current.last_job = Some((job.started_at, job.status));
        }
        current.updated_at = ctx.now;
        let interval = |s: u64| i64::try_from(s).unwrap_or(i64::MAX).saturating_mul(1000);
        current.next_run = current.schedule_secs.map(|s| Timestamp(ctx.now.0.saturating_add(interval(s))));
        tx.put_doc(Table::CdiJob, &key, &job)?;
        tx.put_doc(INTEGRATION_TABLE, &i.id, &current)?;
        Ok(job)
    })
    .await
}

/// True when the kind reads a `PAYLOAD` column (every kind but deletes).
pub fn reads_payload(kind: DataKind) -> bool {
    kind != DataKind::Deletes
}
