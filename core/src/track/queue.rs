//! The asynchronous write path. `/users/track` validates a request and appends it to
//! the store's durable queue (one sequential write), then answers 201. Appliers take
//! queued jobs in large batches, apply them through one unit of work per workspace
//! (so a profile touched by many jobs is read and written once), and commit the
//! profile writes together with the queue acknowledgement: a job is applied exactly
//! once, and two appliers racing simply retry.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::apply::apply_op;
use super::backlog::{early_key, Backlog, Named, OpKey};
use super::early::turn_key;
use super::hold;
use super::ledger::Applied;
use super::parse::TrackJob;
use super::record;
use crate::error::ApiError;
use crate::ids::{IdGen, Identifier, WorkspaceName};
use crate::repo::codec::encode;
use crate::repo::transact::MAX_ATTEMPTS;
use crate::repo::Tx;
use crate::store::{
    start_commit, ChangeSet, CommitError, Expect, Op, QueueAck, QueuedJob, StartedCommit, Store, StoreError, Table,
};

/// The outcome of one run of the queue applier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueRun {
    /// Jobs applied.
    pub applied: usize,
    /// Jobs that could not be decoded: kept aside (readable at the operator route
    /// `GET /_engage/queue/set-aside`) and acknowledged, so they no longer block the queue.
    pub set_aside: usize,
}

impl QueueRun {
    /// Both runs together.
    pub fn plus(self, other: QueueRun) -> QueueRun {
        QueueRun { applied: self.applied + other.applied, set_aside: self.set_aside + other.set_aside }
    }

    /// True when the run found the queue empty.
    pub fn is_empty(&self) -> bool {
        self.applied == 0 && self.set_aside == 0
    }

    /// What a host logs when jobs had to be set aside.
    pub fn set_aside_note(&self) -> Option<String> {
        (self.set_aside > 0).then(|| {
            format!(
                "{} queued job(s) could not be decoded: kept aside (operator route GET /_engage/queue/set-aside) and acknowledged",
                self.set_aside
            )
        })
    }
}

/// Jobs applied per commit by default.
pub const DEFAULT_BATCH: usize = 64;

/// Applies up to `max_jobs` of the oldest queued jobs of partition `part` in one
/// commit; returns how many were applied (0 when the partition is empty). Jobs the
/// backlog says were applied early are skipped, and their records deleted with the
/// acknowledgement.
pub async fn apply_batch<S: Store>(
    store: &S,
    backlog: &mut Backlog,
    seed: [u8; 16],
    part: u16,
    max_jobs: usize,
) -> Result<QueueRun, ApiError> {
    backlog.load(store).await?;
    for _ in 0..MAX_ATTEMPTS {
        // The partition's turn first: whatever was applied of it before is read below.
        let turn = match backlog.shared() {
            true => Some(turns(store, &[part]).await?[0]),
            false => None,
        };
        let jobs = hold::cut(store, store.queued_in(part, 0, max_jobs.max(1)).await?).await?;
        let (Some(first), Some(last)) = (jobs.first(), jobs.last()) else {
            backlog.ledger().settle();
            return Ok(QueueRun::default());
        };
        // Every job of the partition before its oldest pending one is applied: by
        // this process or, on a store several servers share, by another's applier.
        backlog.applied_through(part, first.seq - 1);
        let (first, through) = (first.seq, last.seq);
        backlog.reload_early(store, first, through).await?;
        // Ids per operation (`IdGen::for_op`): the same in any batch and attempt (an
        // attempt that did not commit made nothing).
        let (batch, txs) = prepare(store, &jobs, backlog, seed).await?;
        let applied = backlog.ledger().applied(&batch.jobs);
        let mut changes = ChangeSet { ops: batch.kept_ops(), ack: None };
        changes.ops.extend(turn.map(|expect| turn_op(part, expect)).transpose()?);
        for tx in txs.into_values() {
            changes.ops.extend(tx.into_changes()?.ops);
        }
        changes.ack = Some(QueueAck { part, through, count: jobs.len() as u64 });
        match store.commit(changes).await {
            Ok(()) => {
                backlog.applied_through(part, through);
                backlog.early_passed(&batch.passed);
                backlog.ledger().release(applied);
                return Ok(batch.run());
            }
            Err(CommitError::Conflict) => continue,
            Err(CommitError::Store(e)) => return Err(e.into()),
        }
    }
    Err(ApiError::Busy)
}

/// Applies the queued operations `keys` (pending, in queue order, closed as
/// [`Backlog::concerning`] makes them) ahead of the queue, in one commit with the
/// records that make the in-order applier skip them. `held`: their jobs, when the
/// caller has just read them (on a shared store they are read again after each
/// partition's turn, so these only say which partitions to take).
pub async fn apply_early<S: Store>(
    store: &S,
    backlog: &mut Backlog,
    seed: [u8; 16],
    keys: &[OpKey],
    held: Option<Vec<(QueuedJob, TrackJob)>>,
) -> Result<QueueRun, ApiError> {
    if keys.is_empty() {
        return Ok(QueueRun::default());
    }
    let mut wanted: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for &(seq, op) in keys {
        wanted.entry(seq).or_default().push(op);
    }
    // The jobs the caller decoded: a record is never changed, so its job read
    // again (on a shared store) is the same.
    let mut decoded: BTreeMap<u64, TrackJob> = BTreeMap::new();
    let mut queued = match held {
        Some(jobs) => {
            let mut queued = Vec::with_capacity(jobs.len());
            for (q, job) in jobs.into_iter().filter(|(q, _)| wanted.contains_key(&q.seq)) {
                decoded.insert(q.seq, job);
                queued.push(q);
            }
            queued
        }
        None => still_queued(store, backlog, wanted.keys().copied()).await?,
    };
    if queued.is_empty() {
        return Ok(QueueRun::default());
    }
    for _ in 0..MAX_ATTEMPTS {
        let mut jobs: Vec<(u64, TrackJob)> = Vec::new();
        let mut records: Vec<OpKey> = Vec::new();
        let mut changes = ChangeSet::default();
        if backlog.shared() {
            // Each partition's turn, read before its jobs (again) and what they touch.
            let mut parts: Vec<u16> = queued.iter().map(|q| q.part).collect();
            parts.sort_unstable();
            parts.dedup();
            for (part, expect) in parts.iter().zip(turns(store, &parts).await?) {
                changes.ops.push(turn_op(*part, expect)?);
            }
            let seqs: Vec<u64> = queued.iter().map(|q| q.seq).collect();
            queued = still_queued(store, backlog, seqs.into_iter()).await?;
            if queued.is_empty() {
                return Ok(QueueRun::default());
            }
        }
        for q in &queued {
            let whole = match decoded.entry(q.seq) {
                std::collections::btree_map::Entry::Occupied(known) => known.into_mut(),
                std::collections::btree_map::Entry::Vacant(new) => {
                    // A job that cannot be decoded names nobody: it is not in the set.
                    let Ok(job) = record::decode(&q.job) else { continue };
                    new.insert(job)
                }
            };
            // On a shared store, another server's request may have applied some first.
            let early = backlog.early_ops(q.seq);
            let ops: Vec<u32> = wanted[&q.seq].iter().copied().filter(|op| !early.contains(op)).collect();
            if ops.is_empty() {
                continue;
            }
            records.extend(ops.iter().map(|&op| (q.seq, op)));
            // Only the operations taken are copied (one or two of a job's 75, usually).
            let job = TrackJob {
                workspace: whole.workspace.clone(),
                at: whole.at,
                ops: ops.iter().filter_map(|&i| whole.ops.get(i as usize).cloned()).collect(),
                barrier: whole.barrier.clone(),
            };
            jobs.push((q.seq, job));
        }
        let mut txs = BTreeMap::new();
        apply_jobs(store, &mut txs, &jobs, seed).await?;
        for tx in txs.into_values() {
            changes.ops.extend(tx.into_changes()?.ops);
        }
        for &key in &records {
            let value = encode(&serde_json::json!({}))?;
            changes.ops.push(Op::Put { table: Table::QueueEarly, key: early_key(key), value, expect: Expect::Absent });
        }
        match store.commit(changes).await {
            Ok(()) => {
                backlog.applied_early(&records);
                backlog.ledger().release(backlog.ledger().applied(&jobs));
                // Committed: a failed look at the queue's head only leaves the set
                // as it is until the next one.
                let _ = backlog.prune_early(store).await;
                return Ok(QueueRun { applied: jobs.len(), set_aside: 0 });
            }
            // Another writer (a request, not an applier: the gate keeps those apart)
            // changed one of these profiles first: read again.
            Err(CommitError::Conflict) => {
                // On a shared store: another server's request applied some of these
                // early, or its applier applied their jobs.
                // (The next attempt reads which jobs are left.)
                if backlog.shared() {
                    let (first, last) = (queued[0].seq, queued[queued.len() - 1].seq);
                    backlog.reload_early(store, first, last).await?;
                }
            }
            Err(CommitError::Store(e)) => return Err(e.into()),
        }
    }
    Err(ApiError::Busy)
}

/// What each partition's turn (see [`super::early::turn_key`]) is expected at: its
/// version now, or absent.
async fn turns<S: Store>(store: &S, parts: &[u16]) -> Result<Vec<Expect>, StoreError> {
    let keys: Vec<String> = parts.iter().map(|&p| turn_key(p)).collect();
    let found = store.get_many(Table::QueueEarly, &keys).await?;
    Ok(found.into_iter().map(|e| e.map_or(Expect::Absent, |e| Expect::Version(e.version))).collect())
}

/// The write that takes partition `part`'s turn from where `expect` says it is.
fn turn_op(part: u16, expect: Expect) -> Result<Op, StoreError> {
    Ok(Op::Put { table: Table::QueueEarly, key: turn_key(part), value: encode(&serde_json::json!({}))?, expect })
}

/// The jobs `seqs` (in order) still queued. Pending jobs stay in the queue until
/// their partition's cursor passes them: a job gone is one the cursor passed
/// meanwhile (another process's applier, on a store that several servers share),
/// applied already, with every job of its partition before it.
async fn still_queued<S: Store>(
    store: &S,
    backlog: &mut Backlog,
    seqs: impl Iterator<Item = u64>,
) -> Result<Vec<QueuedJob>, StoreError> {
    let seqs: Vec<u64> = seqs.collect();
    let still = store.queued_at(&seqs).await?;
    let mut kept = still.iter().map(|j| j.seq).peekable();
    for seq in seqs {
        // Both in order: a job not among those still queued is gone.
        if kept.next_if_eq(&seq).is_none() {
            backlog.job_gone(seq);
        }
    }
    Ok(still)
}

/// A queued job that could not be decoded (written by another version, or damaged),
/// as kept in [`Table::SetAside`] for an operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAside {
    /// Its queue sequence number.
    pub seq: u64,
    /// Why it could not be decoded.
    pub error: String,
    /// The job as queued: its text, or its bytes in hex when they are not UTF-8.
    pub job: String,
    /// True when `job` is hex.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hex: bool,
}

/// The store key of a set-aside job: its sequence number, zero-padded so keys sort
/// in queue order.
pub fn set_aside_key(seq: u64) -> String {
    format!("{seq:020}")
}

/// The write that keeps job `q` aside, with why, for an operator.
fn set_aside_op(q: &QueuedJob, error: String) -> Result<Op, StoreError> {
    let (job, hex) = match record::text(&q.job) {
        Some(text) => (text, false),
        None => (q.job.iter().map(|b| format!("{b:02x}")).collect(), true),
    };
    let record = SetAside { seq: q.seq, error, job, hex };
    Ok(Op::Put { table: Table::SetAside, key: set_aside_key(q.seq), value: encode(&record)?, expect: Expect::Any })
}

/// The decoded jobs of a batch, and the writes that keep aside those that could not
/// be decoded: they are acknowledged with the batch (so they do not block the queue
/// forever) but never dropped. Jobs applied early are left out, and their records
/// deleted with the batch.
struct Batch {
    jobs: Vec<(u64, TrackJob)>,
    set_aside: Vec<Op>,
    early: Vec<Op>,
    /// The operations whose early records `early` deletes.
    passed: Vec<OpKey>,
}

impl Batch {
    /// The batch of `queued`, less the jobs applied early, with those in `refused`
    /// (and those that cannot be decoded) set aside.
    fn decode(queued: &[QueuedJob], backlog: &Backlog) -> Result<Batch, StoreError> {
        let mut batch = Batch {
            jobs: Vec::with_capacity(queued.len()),
            set_aside: Vec::new(),
            early: Vec::new(),
            passed: Vec::new(),
        };
        for q in queued {
            let early = backlog.early_ops(q.seq);
            for &op in &early {
                batch.passed.push((q.seq, op));
                batch.early.push(Op::Delete {
                    table: Table::QueueEarly,
                    key: early_key((q.seq, op)),
                    expect: Expect::Any,
                });
            }
            match record::decode(&q.job) {
                Ok(mut job) => {
                    if !early.is_empty() {
                        let ops = std::mem::take(&mut job.ops).into_iter().enumerate();
                        job.ops = ops.filter(|(i, _)| !early.contains(&(*i as u32))).map(|(_, op)| op).collect();
                    }
                    if !job.ops.is_empty() {
                        batch.jobs.push((q.seq, job));
                    }
                }
                Err(e) => batch.set_aside.push(set_aside_op(q, e.0)?),
            }
        }
        Ok(batch)
    }

    /// The writes of the batch besides the jobs' effects.
    fn kept_ops(&self) -> Vec<Op> {
        self.set_aside.iter().chain(&self.early).cloned().collect()
    }

    fn run(&self) -> QueueRun {
        QueueRun { applied: self.jobs.len(), set_aside: self.set_aside.len() }
    }
}

/// Decodes and applies a batch in fresh units of work, again without any job that
/// would take a profile over the bound on a profile's size (set aside instead).
async fn prepare<'s, S: Store>(
    store: &'s S,
    queued: &[QueuedJob],
    backlog: &Backlog,
    seed: [u8; 16],
) -> Result<(Batch, BTreeMap<WorkspaceName, Tx<'s, S>>), StoreError> {
    let batch = Batch::decode(queued, backlog)?;
    let mut txs = BTreeMap::new();
    apply_jobs(store, &mut txs, &batch.jobs, seed).await?;
    Ok((batch, txs))
}

/// Applies the operations of `jobs`, in one unit of work per workspace, after reading
/// in one go what they name (so a batch does not pay one store read per object).
async fn apply_jobs<'s, S: Store>(
    store: &'s S,
    txs: &mut BTreeMap<WorkspaceName, Tx<'s, S>>,
    jobs: &[(u64, TrackJob)],
    seed: [u8; 16],
) -> Result<(), StoreError> {
    let mut targets: BTreeMap<&WorkspaceName, Vec<Identifier>> = BTreeMap::new();
    for (_, job) in jobs {
        targets.entry(&job.workspace).or_default().extend(job.ops.iter().map(|op| op.target().ident.clone()));
    }
    for (ws, idents) in targets {
        txs.entry(ws.clone()).or_insert_with(|| Tx::new(store, ws.clone())).prefetch(&idents).await?;
    }
    for (seq, job) in jobs {
        let tx = txs.entry(job.workspace.clone()).or_insert_with(|| Tx::new(store, job.workspace.clone()));
        for op in &job.ops {
            apply_op(tx, op, job.at, &mut IdGen::for_op(seed, *seq, &op.target().ident)).await?;
        }
        // A job acknowledged is applied: the bounds on a profile's size were checked
        // when it was acknowledged, counting the jobs queued before it
        // (`super::ledger`), so a job is never set aside for one.
        tx.untouch();
    }
    Ok(())
}

/// Applies queued jobs of partition `part` in up to `rounds` batches of `max_jobs`, each batch prepared
/// (the profiles its jobs name read, its operations applied) while the one before
/// it commits:
/// on a store whose commits run elsewhere (a writer thread, a remote database) the
/// two overlap. A batch is built on its predecessor's results as if committed
/// ([`Tx::settle`]); should that commit fail, what was built on it is dropped and
/// one batch is applied the plain way, so contention never stops the queue. On a
/// store that commits in order ([`Store::commits_in_order`]) a built batch is handed
/// over as the next one starts, and waited for only before the one after that is
/// built, so that neither side waits for the other while both have work; a batch
/// built on one that failed cannot commit, since its acknowledgement expects the
/// queue's cursor exactly where that one would have left it.
/// After the first batch it stops early when `yield_now` says requests are waiting
/// for their turn. Returns how many jobs were applied (0 when the queue is empty).
pub async fn apply_pipelined<S: Store>(
    store: &S,
    backlog: &mut Backlog,
    seed: [u8; 16],
    part: u16,
    max_jobs: usize,
    rounds: usize,
    yield_now: &dyn Fn() -> bool,
) -> Result<QueueRun, ApiError> {
    backlog.load(store).await?;
    let in_order = store.commits_in_order();
    let mut txs: BTreeMap<WorkspaceName, Tx<'_, S>> = BTreeMap::new();
    // Built on `submitted` as if it had committed, and what it does once it has.
    let mut built: Option<(ChangeSet, Landing)> = None;
    // Handed to the store; every batch before it has committed.
    let mut submitted: Option<(StartedCommit<'_>, Landing)> = None;
    let mut after = 0;
    let mut done = QueueRun::default();
    // Set when a pipelined commit failed on contention: one batch goes the plain way.
    let mut contended = false;
    // On a shared store, the version the partition's turn is expected at.
    let mut turn: Option<Expect> = None;
    let rounds_run: Result<(), ApiError> = async {
        for round in 0..rounds.max(1) {
            if round > 0 && yield_now() {
                break;
            }
            if after == 0 && backlog.shared() {
                turn = Some(turns(store, &[part]).await?[0]);
            }
            let jobs = hold::cut(store, store.queued_in(part, after, max_jobs.max(1)).await?).await?;
            let (Some(first), Some(last)) = (jobs.first(), jobs.last()) else { break };
            if after == 0 {
                // As in `apply_batch`: the jobs before the oldest pending one are applied.
                backlog.applied_through(part, first.seq - 1);
            }
            let (first, through) = (first.seq, last.seq);
            backlog.reload_early(store, first, through).await?;
            let batch = Batch::decode(&jobs, backlog)?;
            if !hand_over(store, in_order, &mut built, &mut submitted, backlog, &mut done).await? {
                contended = true;
                return Ok(());
            }
            apply_jobs(store, &mut txs, &batch.jobs, seed).await?;
            let mut changes = ChangeSet { ops: batch.kept_ops(), ack: None };
            if let Some(expect) = turn {
                // Each batch takes the partition's turn on from the one before it.
                changes.ops.push(turn_op(part, expect)?);
                turn = Some(Expect::Version(match expect {
                    Expect::Version(v) => v + 1,
                    _ => 1,
                }));
            }
            for tx in txs.values_mut() {
                changes.ops.extend(tx.settle()?.ops);
            }
            changes.ack = Some(QueueAck { part, through, count: jobs.len() as u64 });
            let applied = backlog.ledger().applied(&batch.jobs);
            let landing = Landing { run: batch.run(), part, through, applied, passed: batch.passed };
            built = Some((changes, landing));
            after = through;
        }
        Ok(())
    }
    .await;
    if let Err(e) = rounds_run {
        // What was handed over may have committed: it is counted before the error goes up.
        if let Some(last) = submitted.take() {
            land(last, backlog, &mut done).await?;
        }
        return Err(e);
    }
    if !contended && hand_over(store, in_order, &mut built, &mut submitted, backlog, &mut done).await? {
        if let Some(last) = submitted.take() {
            contended = !land(last, backlog, &mut done).await?;
        }
    } else {
        contended = true;
    }
    if contended {
        return Ok(done.plus(apply_batch(store, backlog, seed, part, max_jobs).await?));
    }
    if done.is_empty() {
        // Nothing queued: the names this applier released are taken off now.
        backlog.ledger().settle();
    }
    Ok(done)
}

/// Hands the batch built last to the store and waits for the one handed over before
/// it (on a store that may reorder commits, that one first). False when a commit
/// failed on contention: the one handed over after it, built on it, has failed too,
/// and nothing is left in the store's hands.
async fn hand_over<'s, S: Store>(
    store: &'s S,
    in_order: bool,
    built: &mut Option<(ChangeSet, Landing)>,
    submitted: &mut Option<(StartedCommit<'s>, Landing)>,
    backlog: &mut Backlog,
    done: &mut QueueRun,
) -> Result<bool, ApiError> {
    let Some((changes, landing)) = built.take() else { return Ok(true) };
    if !in_order {
        if let Some(earlier) = submitted.take() {
            if !land(earlier, backlog, done).await? {
                return Ok(false);
            }
        }
    }
    let next = (start_commit(store, changes).await, landing);
    let Some(earlier) = submitted.replace(next) else { return Ok(true) };
    if land(earlier, backlog, done).await? {
        return Ok(true);
    }
    if let Some(later) = submitted.take() {
        land(later, backlog, done).await?;
    }
    Ok(false)
}

/// What a pipelined batch does once its commit has returned.
struct Landing {
    run: QueueRun,
    part: u16,
    through: u64,
    applied: Applied,
    passed: Vec<OpKey>,
}

/// Waits for a pipelined batch's commit and, once it has committed, counts it: false
/// when it failed on contention (nothing of it is stored).
async fn land(
    (commit, landing): (StartedCommit<'_>, Landing),
    backlog: &mut Backlog,
    done: &mut QueueRun,
) -> Result<bool, ApiError> {
    match commit.await {
        Ok(()) => {
            backlog.applied_through(landing.part, landing.through);
            backlog.early_passed(&landing.passed);
            backlog.ledger().release(landing.applied);
            *done = done.plus(landing.run);
            Ok(true)
        }
        Err(CommitError::Conflict) => Ok(false),
        Err(CommitError::Store(e)) => Err(e.into()),
    }
}

/// Applies every job acknowledged before this call (jobs queued meanwhile may be
/// applied too): how hosts without a background applier keep read-your-writes.
pub async fn catch_up<S: Store>(
    store: &S,
    backlog: &mut Backlog,
    seed: [u8; 16],
    batch: usize,
) -> Result<QueueRun, ApiError> {
    let tail = store.queue_tail().await?;
    let mut done = QueueRun::default();
    loop {
        // The partition of the oldest job, until every job through the tail is applied.
        match store.queued(0, 1).await?.first() {
            Some(j) if j.seq <= tail => done = done.plus(apply_batch(store, backlog, seed, j.part, batch).await?),
            _ => return Ok(done),
        }
    }
}

/// Applies, ahead of the queue, the queued jobs that may touch the profiles a
/// request names (see [`super::backlog`]): how a host whose background applier owns
/// the backlog keeps read-your-writes without waiting for all of it.
pub async fn catch_up_for<S: Store>(
    store: &S,
    backlog: &mut Backlog,
    ws: &WorkspaceName,
    seeds: Vec<Identifier>,
    seed: [u8; 16],
) -> Result<QueueRun, ApiError> {
    if store.finds_by_name() {
        let Named { keys, jobs, handled } = backlog.concerning_named(store, ws, seeds).await?;
        let run = apply_early(store, backlog, seed, &keys, Some(jobs)).await?;
        backlog.handled(handled);
        return Ok(run);
    }
    backlog.refresh(store).await?;
    let keys = backlog.concerning(store, ws, seeds).await?;
    apply_early(store, backlog, seed, &keys, None).await
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
