//! The queue as an operator, a metrics scrape or a readiness probe sees it: how
//! many jobs wait, and how long the oldest has.

use serde::Serialize;

use super::record;
use crate::store::{Store, StoreError};

/// The queue's backlog as an operator (or a metrics scrape) sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BacklogState {
    /// Jobs queued, not yet passed by the appliers (some may have been applied
    /// early, for requests that needed them).
    pub pending: u64,
    /// The newest job's sequence number.
    pub tail: u64,
    /// The oldest job not applied.
    pub oldest_seq: Option<u64>,
    /// How long it has waited, in seconds.
    pub oldest_age_seconds: Option<f64>,
}

/// The queue's backlog now. A partitioned queue's jobs are counted by the store:
/// the span from its oldest job to the tail also holds jobs other partitions have
/// passed (a server on PostgreSQL reported 126,883 pending with 93,386 queued).
pub async fn backlog_state<S: Store>(store: &S, now: crate::time::Timestamp) -> Result<BacklogState, StoreError> {
    let tail = store.queue_tail().await?;
    let oldest = oldest(store, now).await?;
    let pending = match (store.queued_count().await?, oldest) {
        (Some(count), _) => count,
        (None, Some((seq, _))) => tail.saturating_sub(seq) + 1,
        (None, None) => 0,
    };
    Ok(BacklogState {
        pending,
        tail,
        oldest_seq: oldest.map(|(seq, _)| seq),
        oldest_age_seconds: oldest.and_then(|(_, age)| age),
    })
}

/// How long the oldest job queued has waited, in seconds (`None` for an empty queue,
/// or a job that does not decode).
pub async fn oldest_age<S: Store>(store: &S, now: crate::time::Timestamp) -> Result<Option<f64>, StoreError> {
    Ok(oldest(store, now).await?.and_then(|(_, age)| age))
}

/// The oldest job queued, and how long it has waited.
async fn oldest<S: Store>(store: &S, now: crate::time::Timestamp) -> Result<Option<(u64, Option<f64>)>, StoreError> {
    let Some(job) = store.queued(0, 1).await?.pop() else { return Ok(None) };
    let at = record::decode(&job.job).ok().map(|j| j.at);
    Ok(Some((job.seq, at.map(|at| (now.0 - at.0).max(0) as f64 / 1000.0))))
}
