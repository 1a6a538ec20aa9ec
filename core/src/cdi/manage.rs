//! What operators and the host's runner do with integrations: create, change, pause
//! and resume, rewind and delete one, ask for a job now, find the integrations
//! that are due.

use super::integration::{all, get, Cursor, Integration, JobStatus, Spec, INTEGRATION_TABLE, MAX_INTEGRATIONS};
use super::job::jobs_prefix;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::ids::{IdGen, WorkspaceName};
use crate::repo::transact::transact;
use crate::store::{Store, Table, MAX_SCAN};
use crate::time::Timestamp;

/// Creates an integration in `ws` (a scheduled one is due at once) and the
/// workspace's cursor-signing secret if it has none yet.
pub async fn create<S: Store>(store: &S, ws: &WorkspaceName, spec: &Spec, ctx: Ctx) -> Result<Integration, ApiError> {
    let warehouse = spec.check()?;
    if all(store).await?.len() >= MAX_INTEGRATIONS {
        return Err(ApiError::bad(format!("a deployment has at most {MAX_INTEGRATIONS} integrations")));
    }
    transact(store, ws, ctx.seed, async |tx, ids| {
        let i = Integration {
            id: ids.uuid(),
            workspace: ws.clone(),
            name: spec.name.trim().to_string(),
            kind: spec.kind,
            warehouse,
            source: spec.source.clone(),
            table: spec.table.clone(),
            schedule_secs: spec.schedule_secs,
            contact_emails: spec.contact_emails.clone(),
            created_at: ctx.now,
            updated_at: ctx.now,
            cursor: None,
            jobs: 0,
            last_job: None,
            next_run: spec.schedule_secs.map(|_| ctx.now),
            paused: false,
        };
        if tx.doc::<Integration>(INTEGRATION_TABLE, &i.id).await?.is_some() {
            return Err(ApiError::Busy);
        }
        if tx.doc::<String>(Table::CdiSecret, ws.as_str()).await?.is_none() {
            tx.put_doc(Table::CdiSecret, ws.as_str(), &IdGen::derive(ctx.seed, "cdi-secret", 0).token(32))?;
        }
        tx.put_doc(INTEGRATION_TABLE, &i.id, &i)?;
        Ok(i)
    })
    .await
}

/// What an operator changes of an integration; `None` leaves a field as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Update {
    /// A new name.
    pub name: Option<String>,
    /// A new source URL (the cursor is kept: rewind to read the new one from the start).
    pub source: Option<String>,
    /// A new table.
    pub table: Option<String>,
    /// A new schedule; `Some(None)`: on demand only.
    pub schedule_secs: Option<Option<u64>>,
    /// New contacts.
    pub contact_emails: Option<Vec<String>>,
    /// Pause (`true`) or resume (`false`).
    pub paused: Option<bool>,
}

fn missing(id: &str) -> ApiError {
    ApiError::NotFound(format!("no integration '{id}'"))
}

/// Changes integration `id` as `u` says, checked as a new one would be. A changed
/// schedule (or a resumed integration with one) is due at once.
pub async fn update<S: Store>(store: &S, id: &str, u: &Update, ctx: Ctx) -> Result<Integration, ApiError> {
    let i = get(store, id).await?.ok_or_else(|| missing(id))?;
    let spec = Spec {
        name: u.name.clone().unwrap_or(i.name),
        source: u.source.clone().unwrap_or(i.source),
        table: u.table.clone().unwrap_or(i.table),
        kind: i.kind,
        schedule_secs: u.schedule_secs.unwrap_or(i.schedule_secs),
        contact_emails: u.contact_emails.clone().unwrap_or(i.contact_emails),
    };
    let warehouse = spec.check()?;
    transact(store, &i.workspace, ctx.seed, async |tx, _| {
        let mut cur: Integration = tx.doc(INTEGRATION_TABLE, id).await?.ok_or_else(|| missing(id))?;
        let rescheduled = cur.schedule_secs != spec.schedule_secs || (u.paused == Some(false) && cur.paused);
        cur.name = spec.name.trim().to_string();
        cur.source = spec.source.clone();
        cur.warehouse = warehouse;
        cur.table = spec.table.clone();
        cur.schedule_secs = spec.schedule_secs;
        cur.contact_emails = spec.contact_emails.clone();
        if let Some(paused) = u.paused {
            cur.paused = paused;
        }
        if rescheduled {
            cur.next_run = cur.schedule_secs.map(|_| ctx.now);
        }
        cur.updated_at = ctx.now;
        tx.put_doc(INTEGRATION_TABLE, id, &cur)?;
        Ok(cur)
    })
    .await
}

/// Moves integration `id`'s cursor: the next job reads the rows after `to` (`None`:
/// the whole table). Refused while a job runs (its batches commit against the cursor).
pub async fn rewind<S: Store>(store: &S, id: &str, to: Option<Timestamp>, ctx: Ctx) -> Result<Integration, ApiError> {
    let i = get(store, id).await?.ok_or_else(|| missing(id))?;
    transact(store, &i.workspace, ctx.seed, async |tx, _| {
        let mut cur: Integration = tx.doc(INTEGRATION_TABLE, id).await?.ok_or_else(|| missing(id))?;
        if matches!(cur.last_job, Some((_, JobStatus::Running))) {
            return Err(ApiError::Conflict(
                "a job of this integration is running: rewind it once the job has ended".into(),
            ));
        }
        cur.cursor = to.map(|updated_at| Cursor { updated_at, within: None });
        cur.updated_at = ctx.now;
        tx.put_doc(INTEGRATION_TABLE, id, &cur)?;
        Ok(cur)
    })
    .await
}

/// Deletes integration `id`, its jobs and any request to run it; `false` when there
/// was none. A job running meanwhile stops at its next batch (its integration is gone).
pub async fn delete<S: Store>(store: &S, id: &str, ctx: Ctx) -> Result<bool, ApiError> {
    let Some(i) = get(store, id).await? else { return Ok(false) };
    let jobs: Vec<String> = store
        .scan(Table::CdiJob, &jobs_prefix(&i.workspace, id), MAX_SCAN)
        .await?
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    transact(store, &i.workspace, ctx.seed, async |tx, _| {
        for key in &jobs {
            tx.delete_doc(Table::CdiJob, key);
        }
        tx.delete_doc(Table::CdiRequest, id);
        tx.delete_doc(Table::CdiBatches, id);
        tx.delete_doc(INTEGRATION_TABLE, id);
        Ok(())
    })
    .await?;
    Ok(true)
}

/// Asks the process that runs syncs (the server) to run integration `id` now.
pub async fn request_run<S: Store>(store: &S, id: &str, ctx: Ctx) -> Result<(), ApiError> {
    let i = get(store, id).await?.ok_or_else(|| ApiError::NotFound(format!("no integration '{id}'")))?;
    if i.paused {
        return Err(ApiError::Conflict("the integration is paused: resume it first".into()));
    }
    transact(store, &i.workspace, ctx.seed, async |tx, _| {
        tx.put_doc(Table::CdiRequest, id, &ctx.now)?;
        Ok(())
    })
    .await
}

/// Whether a run of integration `id` was asked for and not yet taken.
pub async fn requested<S: Store>(store: &S, id: &str) -> Result<bool, ApiError> {
    Ok(store.get(Table::CdiRequest, id).await?.is_some())
}

/// Takes back a request nobody took.
pub async fn withdraw<S: Store>(store: &S, id: &str, ctx: Ctx) -> Result<(), ApiError> {
    let i = get(store, id).await?.ok_or_else(|| ApiError::NotFound(format!("no integration '{id}'")))?;
    transact(store, &i.workspace, ctx.seed, async |tx, _| {
        tx.delete_doc(Table::CdiRequest, id);
        Ok(())
    })
    .await
}

/// The integrations due now: asked for ([`request_run`], the request is taken) or
/// past their next scheduled run; at most `max` of them, none of those in `busy`
/// (their jobs are running: a request to run one again waits until it ends).
pub async fn due<S: Store>(
    store: &S,
    now: Timestamp,
    seed: [u8; 16],
    busy: &[String],
    max: usize,
) -> Result<Vec<Integration>, ApiError> {
    let requested: Vec<String> =
        store.scan(Table::CdiRequest, "", MAX_SCAN).await?.into_iter().map(|(k, _)| k).collect();
    let mut out = Vec::new();
    for i in all(store).await? {
        if out.len() >= max {
            break;
        }
        if i.paused || busy.contains(&i.id) {
            continue;
        }
        if requested.contains(&i.id) {
            let id = i.id.clone();
            transact(store, &i.workspace, seed, async |tx, _| {
                tx.delete_doc(Table::CdiRequest, &id);
                Ok(())
            })
            .await?;
            out.push(i);
        } else if i.next_run.is_some_and(|t| t <= now) {
            out.push(i);
        }
    }
    Ok(out)
}
