//! The records of queued operations applied ahead of the queue ([`Table::QueueEarly`]):
//! their keys, written with the operations' effects, and read back at start-up by
//! whoever must know which queued operations are no longer pending.

use std::collections::BTreeSet;

use crate::store::{Store, StoreError, Table, MAX_SCAN};

/// One operation of a queued job: its sequence number and its index in the job.
pub type OpKey = (u64, u32);

/// The store key of the record of an operation applied early.
pub fn early_key((seq, op): OpKey) -> String {
    format!("{seq:020}/{op:05}")
}

/// Every operation recorded as applied early.
pub async fn read_early<S: Store>(store: &S) -> Result<BTreeSet<OpKey>, StoreError> {
    let mut early = BTreeSet::new();
    for (key, _) in store.scan(Table::QueueEarly, "", MAX_SCAN).await? {
        if let Some((seq, op)) = key.split_once('/') {
            if let (Ok(seq), Ok(op)) = (seq.parse(), op.parse()) {
                early.insert((seq, op));
            }
        }
    }
    Ok(early)
}
