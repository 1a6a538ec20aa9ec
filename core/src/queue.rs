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
use crate::store::{ChangeSet, CommitError, QueueAck, QueuedJob, Store, StoreError};
use crate::track::TrackJob;

/// Jobs applied per commit by default.
pub const DEFAULT_BATCH: usize = 64;
pub use crate::repo::MAX_ATTEMPTS;

/// Applies up to `max_jobs` of the oldest queued jobs in one commit; returns how
/// many were applied (0 when the queue is empty).
pub async fn apply_batch<S: Store>(store: &S, seed: [u8; 16], max_jobs: usize) -> Result<usize, ApiError> {
    for attempt in 0..MAX_ATTEMPTS {
        let jobs = store.queued(0, max_jobs.max(1)).await?;
        let Some(last) = jobs.last() else { return Ok(0) };
        let through = last.seq;
        // Distinct ids for every batch and attempt: the same request seed may drive
        // several batches (catch-up) and then the request's own handler.
        let mut ids = IdGen::derive(seed, "queue", jobs[0].seq.wrapping_mul(64).wrapping_add(attempt as u64));
        let mut txs: BTreeMap<WorkspaceName, Tx<'_, S>> = BTreeMap::new();
        apply_jobs(store, &mut txs, &decode_jobs(&jobs), &mut ids).await?;
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

/// The jobs of a batch. A job that cannot be decoded was not written by this
/// version: it is acknowledged without effect rather than blocking the queue forever.
fn decode_jobs(jobs: &[QueuedJob]) -> Vec<TrackJob> {
    jobs.iter().filter_map(|q| decode::<TrackJob>(&q.job).ok()).collect()
}

/// Applies the operations of `jobs`, in one unit of work per workspace, after reading
/// in one go what they name (so a batch does not pay one store read per object).
async fn apply_jobs<'s, S: Store>(
    store: &'s S,
    txs: &mut BTreeMap<WorkspaceName, Tx<'s, S>>,
    jobs: &[TrackJob],
    ids: &mut IdGen,
) -> Result<(), StoreError> {
    let mut targets: BTreeMap<&WorkspaceName, Vec<Identifier>> = BTreeMap::new();
    for job in jobs {
        targets.entry(&job.workspace).or_default().extend(job.ops.iter().map(|op| op.target().ident.clone()));
    }
    for (ws, idents) in targets {
        txs.entry(ws.clone()).or_insert_with(|| Tx::new(store, ws.clone())).prefetch(&idents).await?;
    }
    for job in jobs {
        let tx = txs.entry(job.workspace.clone()).or_insert_with(|| Tx::new(store, job.workspace.clone()));
        for op in &job.ops {
            apply_op(tx, op, job.at, ids).await?;
        }
    }
    Ok(())
}

/// Applies queued jobs in up to `rounds` batches of `max_jobs`, each batch prepared
/// (the profiles its jobs name read, its operations applied) while the one before
/// it commits:
/// on a store whose commits run elsewhere (a writer thread, a remote database) the
/// two overlap. A batch is built on its predecessor's results as if committed
/// ([`Tx::settle`]); should that commit fail, what was built on it is dropped and
/// one batch is applied the plain way, so contention never stops the queue.
/// Returns how many jobs were applied (0 when the queue is empty).
pub async fn apply_pipelined<S: Store>(
    store: &S,
    seed: [u8; 16],
    max_jobs: usize,
    rounds: usize,
) -> Result<usize, ApiError> {
    let mut txs: BTreeMap<WorkspaceName, Tx<'_, S>> = BTreeMap::new();
    let mut in_flight: Option<(ChangeSet, usize)> = None;
    let mut after = 0;
    let mut applied = 0;
    for _ in 0..rounds.max(1) {
        let jobs = store.queued(after, max_jobs.max(1)).await?;
        let (Some(first), Some(last)) = (jobs.first(), jobs.last()) else { break };
        let through = last.seq;
        // Distinct ids for every batch: each starts at a different sequence number, and
        // every call brings a fresh seed.
        let mut ids = IdGen::derive(seed, "pipeline", first.seq);
        let decoded = decode_jobs(&jobs);
        let commit = async {
            match in_flight.take() {
                Some((changes, n)) => store.commit(changes).await.map(|()| n),
                None => Ok(0),
            }
        };
        let prepare = async {
            apply_jobs(store, &mut txs, &decoded, &mut ids).await?;
            let mut changes = ChangeSet::default();
            for tx in txs.values_mut() {
                changes.ops.extend(tx.settle().ops);
            }
            Ok::<ChangeSet, StoreError>(changes)
        };
        let (committed, prepared) = futures_util::future::join(commit, prepare).await;
        match committed {
            Ok(n) => applied += n,
            Err(CommitError::Conflict) => return Ok(applied + apply_batch(store, seed, max_jobs).await?),
            Err(CommitError::Store(e)) => return Err(e.into()),
        }
        let mut changes = prepared?;
        changes.ack = Some(QueueAck { through, count: jobs.len() as u64 });
        in_flight = Some((changes, jobs.len()));
        after = through;
    }
    if let Some((changes, n)) = in_flight {
        match store.commit(changes).await {
            Ok(()) => applied += n,
            Err(CommitError::Conflict) => return Ok(applied + apply_batch(store, seed, max_jobs).await?),
            Err(CommitError::Store(e)) => return Err(e.into()),
        }
    }
    Ok(applied)
}

/// Applies every job acknowledged before this call (jobs queued meanwhile may be
/// applied too). Reads call this first, so they see every acknowledged write.
pub async fn catch_up<S: Store>(store: &S, seed: [u8; 16], batch: usize) -> Result<(), ApiError> {
    let tail = store.queue_tail().await?;
    loop {
        match store.queued(0, 1).await?.first() {
            Some(j) if j.seq <= tail => {
                apply_batch(store, seed, batch).await?;
            }
            _ => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use serde_json::json;

    use super::*;
    use crate::merge::testkit::Kit;
    use crate::store::memory::MemoryStore;
    use crate::store::{Entry, Table};

    /// Twelve requests in which each batch depends on the one before: one counter
    /// and one event on the same user everywhere, and a user created in each request
    /// and updated again in the next.
    fn enqueue_chained(kit: &Kit) {
        for i in 0..12 {
            let mut attributes = vec![
                json!({"external_id": "u1", "visits": {"inc": 1}}),
                json!({"external_id": format!("new-{i}"), "first_name": "Ann"}),
            ];
            if i > 0 {
                attributes.push(json!({"external_id": format!("new-{}", i - 1), "last_name": "Lee"}));
            }
            let events = vec![json!({"external_id": "u1", "name": "played", "time": "2026-11-01T10:00:00Z"})];
            kit.track(json!({"attributes": attributes, "events": events}));
        }
    }

    fn check_chained(kit: &Kit) {
        let u1 = kit.user("u1");
        assert_eq!(u1["custom_attributes"]["visits"], json!(12), "{u1}");
        assert_eq!(u1["custom_events"][0]["count"], json!(12), "{u1}");
        for i in 0..12 {
            let users = kit.users(json!({"external_ids": [format!("new-{i}")]}));
            assert_eq!(users.len(), 1, "new-{i} exists exactly once");
            assert_eq!(users[0]["first_name"], json!("Ann"));
            assert_eq!(users[0]["last_name"], if i < 11 { json!("Lee") } else { serde_json::Value::Null });
        }
    }

    #[test]
    fn pipelined_batches_build_on_the_one_still_committing() {
        let kit = Kit::new();
        enqueue_chained(&kit);
        // Two jobs a batch: six batches, each reading what the one before wrote. Had a
        // batch missed it (a stale profile or identifier), its commit would conflict and
        // the call would stop early.
        let store = Interfering { inner: kit.engine().store(), commits: Cell::new(0), fail_every: 0 };
        let applied = pollster::block_on(queue_run(&store, 2, 100));
        assert_eq!(applied, 12);
        assert!(pollster::block_on(kit.engine().store().queued(0, 10)).unwrap().is_empty());
        check_chained(&kit);
    }

    async fn queue_run<S: Store>(store: &S, batch: usize, rounds: usize) -> usize {
        apply_pipelined(store, [7; 16], batch, rounds).await.unwrap()
    }

    /// A store whose applier commits land only after the applier has prepared its
    /// next batch (they wait one poll, as a commit on another thread would), and whose
    /// every `fail_every`-th applier commit fails as if another writer had committed first.
    struct Interfering<'a> {
        inner: &'a MemoryStore,
        commits: Cell<u32>,
        fail_every: u32,
    }

    /// Pending once, then ready.
    struct YieldOnce(bool);

    impl std::future::Future for YieldOnce {
        type Output = ();
        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
            if self.0 {
                return std::task::Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }

    impl Store for Interfering<'_> {
        async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
            self.inner.get(table, key).await
        }
        async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
            self.inner.scan(table, prefix, limit).await
        }
        async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
            if changes.ack.is_some() {
                YieldOnce(false).await;
                self.commits.set(self.commits.get() + 1);
                if self.fail_every > 0 && self.commits.get().is_multiple_of(self.fail_every) {
                    return Err(CommitError::Conflict);
                }
            }
            self.inner.commit(changes).await
        }
        async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
            self.inner.enqueue(job).await
        }
        async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
            self.inner.queued(after, limit).await
        }
        async fn queue_tail(&self) -> Result<u64, StoreError> {
            self.inner.queue_tail().await
        }
    }

    #[test]
    fn a_shared_email_given_in_the_batch_still_committing_is_found() {
        let kit = Kit::new();
        kit.track(json!({"attributes": [{"external_id": "old", "email": "shared@example.com"}]}));
        kit.track(json!({"attributes": [{"external_id": "new", "email": "shared@example.com"}]}));
        kit.track(json!({"attributes": [{"email": "shared@example.com", "picked": true}]}));
        // One job a batch: the third is prepared while the second (which gave "new" the
        // address) is still committing, so only the unit of work knows "new" has it.
        let store = Interfering { inner: kit.engine().store(), commits: Cell::new(0), fail_every: 0 };
        assert_eq!(pollster::block_on(queue_run(&store, 1, 100)), 3);
        assert_eq!(kit.user("new")["custom_attributes"]["picked"], json!(true));
        assert!(kit.user("old").get("custom_attributes").is_none());
    }

    #[test]
    fn a_failed_commit_voids_what_was_built_on_it_and_nothing_is_lost_or_doubled() {
        let kit = Kit::new();
        enqueue_chained(&kit);
        let store = Interfering { inner: kit.engine().store(), commits: Cell::new(0), fail_every: 3 };
        let mut calls = 0;
        while !pollster::block_on(store.queued(0, 1)).unwrap().is_empty() {
            calls += 1;
            assert!(calls < 50, "the queue does not drain");
            pollster::block_on(queue_run(&store, 2, 100));
        }
        assert!(calls > 1, "commits failed, so the pipeline was restarted");
        check_chained(&kit);
    }
}
