//! What operators and the host's runner do with integrations: create one, ask for
//! a job now, find the integrations that are due.

use super::integration::{all, get, Integration, Spec, INTEGRATION_TABLE, MAX_INTEGRATIONS};
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
    let i = get(store, id).await?.ok_or_else(|| ApiError::NotFound(format!("no integration '{id}'")))?;
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
