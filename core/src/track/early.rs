//! The records of queued operations applied ahead of the queue ([`Table::QueueEarly`]):
//! their keys, written with the operations' effects, and read back at start-up by
//! whoever must know which queued operations are no longer pending.

use std::collections::BTreeSet;

use crate::store::{Store, StoreError, Table, MAX_SCAN};

/// One operation of a queued job: its sequence number and its index in the job.
pub type OpKey = (u64, u32);

/// The store key of partition `part`'s turn, on a store several servers share: every
/// application of the partition's jobs (a batch in order, or operations applied
/// early for a request) reads it before the jobs, the records of those applied
/// early and what the jobs touch, and commits it a version on. Two applications
/// that overlap conflict and the later one reads again: one never applies a job
/// the other applied meanwhile, even where a profile it wrote was deleted since
/// and looks as it did (which a profile's own version cannot tell). Not a record:
/// it does not parse as one.
pub fn turn_key(part: u16) -> String {
    format!("turn/{part:05}")
}

/// The store key of the record of an operation applied early.
pub fn early_key((seq, op): OpKey) -> String {
    format!("{seq:020}/{op:05}")
}

/// The operations of jobs `first..=last` recorded as applied early: one scan of
/// the keys sharing the two numbers' leading digits, read past them.
pub async fn read_early_between<S: Store>(store: &S, first: u64, last: u64) -> Result<Vec<OpKey>, StoreError> {
    let (a, b) = (format!("{first:020}"), format!("{last:020}"));
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let mut out = Vec::new();
    for (key, _) in store.scan(Table::QueueEarly, &a[..common], MAX_SCAN).await? {
        if let Some(k) = parse(&key).filter(|(seq, _)| (first..=last).contains(seq)) {
            out.push(k);
        }
    }
    Ok(out)
}

fn parse(key: &str) -> Option<OpKey> {
    let (seq, op) = key.split_once('/')?;
    Some((seq.parse().ok()?, op.parse().ok()?))
}

/// Every operation recorded as applied early.
pub async fn read_early<S: Store>(store: &S) -> Result<BTreeSet<OpKey>, StoreError> {
    let mut early = BTreeSet::new();
    for (key, _) in store.scan(Table::QueueEarly, "", MAX_SCAN).await? {
        early.extend(parse(&key));
    }
    Ok(early)
}
