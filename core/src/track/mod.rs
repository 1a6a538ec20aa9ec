//! `/users/track` and `/users/track/sync`. A request is parsed without reading the
//! store ([`parse`]); the groups it names are looked up and the job queued durably
//! (async) or applied in one unit of work (sync) by [`apply`]; [`queue`] applies
//! queued jobs in batches, through the same [`apply::apply_op`].

pub mod apply;
pub mod backlog;
pub mod parse;
pub mod queue;
pub mod schema;
mod sync;

#[cfg(test)]
mod early_tests;
#[cfg(test)]
mod size_tests;

pub use sync::track_sync;

use self::apply::look_up_groups;
use self::parse::{nothing_valid, TrackJob};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Response, Then};
use crate::ids::{IdGen, WorkspaceName};
use crate::repo::codec::encode;
use crate::repo::Tx;
use crate::store::Store;

/// Refuses (400, naming the bound) a job that would take a profile over the bound
/// on a profile's size, as the profiles are stored now: the job is applied to a unit
/// of work that is never committed. Jobs queued before it are not in the store yet,
/// so the applier checks again and sets aside a job that no longer fits.
async fn refuse_oversized<S: Store>(store: &S, job: &TrackJob, ctx: Ctx) -> Result<(), ApiError> {
    let mut tx = Tx::new(store, job.workspace.clone());
    let mut ids = IdGen::derive(ctx.seed, "size check", 0);
    let idents: Vec<_> = job.ops.iter().map(|op| op.target().ident.clone()).collect();
    tx.prefetch(&idents).await?;
    for op in &job.ops {
        apply::apply_op(&mut tx, op, job.at, &mut ids).await?;
    }
    match tx.take_oversized() {
        Some(message) => Err(ApiError::bad(message)),
        None => Ok(()),
    }
}

/// POST /users/track: parse, look up the groups named, queue durably, answer 201;
/// the host is asked to apply the queue soon.
pub async fn track<S: Store>(store: &S, ws: &WorkspaceName, body: &[u8], ctx: Ctx) -> Result<Response, ApiError> {
    let obj = parse::body_object(body)?;
    let arrays = parse::arrays(&obj, parse::MAX_OBJECTS)?;
    let parsed = look_up_groups(store, ws, parse::parse(&arrays, ctx.now)).await?;
    if parsed.ops.is_empty() {
        return Err(nothing_valid(&parsed.errors));
    }
    let body = parsed.success_body();
    let ops = parsed.ops.into_iter().map(|(_, op)| op).collect();
    let job = TrackJob { workspace: ws.clone(), at: ctx.now, ops };
    refuse_oversized(store, &job, ctx).await?;
    store.enqueue(encode(&job)?).await?;
    Ok(Response::json(201, &body).then(Then::ApplyQueue))
}
