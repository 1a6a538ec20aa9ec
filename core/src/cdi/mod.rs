//! Warehouse syncs (CDI, `/cdi/integrations`). Engage runs the syncs itself: the
//! host reads rows from a warehouse table; the rules are here.
//!
//! - `integration.rs`: an integration (table, kind of rows, schedule, cursor) and
//!   its list entry; `job.rs`: a job and its counts.
//! - `rows.rs`: a source row → a `/users/track` object or a user to delete (pure).
//! - `sync.rs`: begin a job, commit a batch (effects, counts and cursor in one
//!   unit of work), finish it.
//! - `cursor.rs`: opaque, signed page cursors and the `Link` header; `read.rs`:
//!   the two list endpoints.
//!
//! Integrations are made by the operator (`engage cdi create`), not by the API.

pub mod cursor;
pub mod integration;
pub mod job;
pub mod read;
pub mod rows;
pub mod sync;

use self::integration::{Integration, Spec};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::ids::{IdGen, WorkspaceName};
use crate::repo::codec::decode;
use crate::repo::transact::transact;
use crate::routes::Cdi;
use crate::store::{Store, Table, MAX_SCAN};
use crate::time::Timestamp;

/// The table of integrations, keyed by id (ids are unique across workspaces).
pub const INTEGRATION_TABLE: Table = Table::CdiIntegration;

/// Most integrations a deployment keeps (listings read them all).
pub const MAX_INTEGRATIONS: usize = 1000;

/// Answers a CDI endpoint.
pub async fn handle<S: Store>(
    store: &S,
    endpoint: Cdi,
    ws: &WorkspaceName,
    req: &Request,
) -> Result<Response, ApiError> {
    match endpoint {
        Cdi::Integrations => read::integrations(store, ws, req).await,
        Cdi::JobSyncStatus(id) => read::jobs(store, ws, &id, req).await,
    }
}

/// Every integration of the deployment, oldest first.
pub async fn all<S: Store>(store: &S) -> Result<Vec<Integration>, ApiError> {
    let mut out = Vec::new();
    for (_, e) in store.scan(INTEGRATION_TABLE, "", MAX_SCAN).await? {
        out.push(decode::<Integration>(&e.value)?);
    }
    out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(out)
}

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

/// Asks the process that runs syncs (the server) to run integration `id` now.
pub async fn request_run<S: Store>(store: &S, id: &str, ctx: Ctx) -> Result<(), ApiError> {
    let i = sync::integration(store, id).await?.ok_or_else(|| ApiError::NotFound(format!("no integration '{id}'")))?;
    transact(store, &i.workspace, ctx.seed, async |tx, _| {
        tx.put_doc(Table::CdiRequest, id, &ctx.now)?;
        Ok(())
    })
    .await
}

/// The integrations due now: asked for ([`request_run`], the request is taken) or
/// past their next scheduled run.
pub async fn due<S: Store>(store: &S, now: Timestamp, seed: [u8; 16]) -> Result<Vec<Integration>, ApiError> {
    let requested: Vec<String> =
        store.scan(Table::CdiRequest, "", MAX_SCAN).await?.into_iter().map(|(k, _)| k).collect();
    let mut out = Vec::new();
    for i in all(store).await? {
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

#[cfg(test)]
mod tests;
