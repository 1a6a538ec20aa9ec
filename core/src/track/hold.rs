//! How far a partition's next jobs may be applied now: up to its next barrier
//! that is not yet free ([`super::barrier`]).

use super::barrier::Barrier;
use crate::store::{QueuedJob, Store, StoreError};

/// True when a record may hold a barrier: its bytes name the field (the JSON and
/// MessagePack records both spell field names). A user's value that happens to
/// hold the word only costs a decode.
pub fn may_hold(record: &[u8]) -> bool {
    record.windows(7).any(|w| w == b"barrier")
}

/// Whether the job `seq` with barrier `b` may be applied now.
pub async fn ready<S: Store>(store: &S, seq: u64, b: &Barrier) -> Result<bool, StoreError> {
    match b {
        Barrier::Main { stubs } => {
            for stub in stubs {
                let at = seq.saturating_add_signed(stub.offset);
                let head = store.queued_in(stub.part, 0, 1).await?;
                if head.first().map(|j| j.seq) != Some(at) {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Barrier::Stub { main } => {
            let main = seq.saturating_add_signed(*main);
            // Applied: no longer queued.
            Ok(store.queued(main.saturating_sub(1), 1).await?.first().map(|j| j.seq) != Some(main))
        }
    }
}

/// The jobs of one partition, read in order, as far as may be applied now: up to
/// the first held at a barrier (left out), or through the first barrier that is
/// ready (the last of the batch).
pub async fn cut<S: Store>(store: &S, mut jobs: Vec<QueuedJob>) -> Result<Vec<QueuedJob>, StoreError> {
    if store.partitions() <= 1 {
        return Ok(jobs);
    }
    for i in 0..jobs.len() {
        if !may_hold(&jobs[i].job) {
            continue;
        }
        // A corrupt record holds nothing here: the applier sets it aside.
        let Ok(Some(b)) = super::record::barrier(&jobs[i].job) else { continue };
        let keep = if ready(store, jobs[i].seq, &b).await? { i + 1 } else { i };
        jobs.truncate(keep);
        break;
    }
    Ok(jobs)
}
