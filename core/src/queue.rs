//! The asynchronous write path. `/users/track` validates a request and appends it to
//! the store's durable queue (one sequential write), then answers 201. Appliers take
//! queued jobs in large batches, apply them through one unit of work per workspace
//! (so a profile touched by many jobs is read and written once), and commit the
//! profile writes together with the queue acknowledgement: a job is applied exactly
//! once, and two appliers racing simply retry.

use std::collections::BTreeMap;

use crate::apply::apply_op;
use crate::auth::WorkspaceName;
use crate::error::ApiError;
use crate::ids::{IdGen, Identifier};
use crate::repo::{decode, Tx};
use crate::store::{ChangeSet, CommitError, QueueAck, Store};
use crate::track::TrackJob;

/// Jobs applied per commit by default.
pub const DEFAULT_BATCH: usize = 64;
pub use crate::repo::MAX_ATTEMPTS;

/// Applies up to `max_jobs` of the oldest queued jobs in one commit; returns how
/// many were applied (0 when the queue is empty).
pub async fn apply_batch<S: Store>(store: &S, seed: [u8; 16], max_jobs: usize) -> Result<usize, ApiError> {
    for attempt in 0..MAX_ATTEMPTS {
        let jobs = store.queued(max_jobs.max(1)).await?;
        let Some(last) = jobs.last() else { return Ok(0) };
        let through = last.seq;
        // Distinct ids for every batch and attempt: the same request seed may drive
        // several batches (catch-up) and then the request's own handler.
        let mut ids = IdGen::derive(seed, "queue", jobs[0].seq.wrapping_mul(64).wrapping_add(attempt as u64));
        // A job that cannot be decoded was not written by this version: it is
        // acknowledged without effect rather than blocking the queue forever.
        let decoded: Vec<TrackJob> = jobs.iter().filter_map(|q| decode::<TrackJob>(&q.job).ok()).collect();
        let mut txs: BTreeMap<WorkspaceName, Tx<'_, S>> = BTreeMap::new();
        let mut targets: BTreeMap<&WorkspaceName, Vec<Identifier>> = BTreeMap::new();
        for job in &decoded {
            targets.entry(&job.workspace).or_default().extend(job.ops.iter().map(|op| op.target().ident.clone()));
        }
        for (ws, idents) in targets {
            let tx = txs.entry(ws.clone()).or_insert_with(|| Tx::new(store, ws.clone()));
            tx.prefetch(&idents).await?;
        }
        for job in &decoded {
            let tx = txs.entry(job.workspace.clone()).or_insert_with(|| Tx::new(store, job.workspace.clone()));
            for op in &job.ops {
                apply_op(tx, op, job.at, &mut ids).await?;
            }
        }
        let mut changes = ChangeSet::default();
        for tx in txs.into_values() {
            changes.ops.extend(tx.into_changes().ops);
        }
        changes.ack = Some(QueueAck { through, count: jobs.len() as u64 });
        match store.commit(changes).await {
            Ok(()) => return Ok(jobs.len()),
            Err(CommitError::Conflict) => continue,
            Err(CommitError::Store(e)) => return Err(e.into()),
        }
    }
    Err(ApiError::Busy)
}

/// Applies every job acknowledged before this call (jobs queued meanwhile may be
/// applied too). Reads call this first, so they see every acknowledged write.
pub async fn catch_up<S: Store>(store: &S, seed: [u8; 16], batch: usize) -> Result<(), ApiError> {
    let tail = store.queue_tail().await?;
    loop {
        match store.queued(1).await?.first() {
            Some(j) if j.seq <= tail => {
                apply_batch(store, seed, batch).await?;
            }
            _ => return Ok(()),
        }
    }
}
