//! A job's batches committed in order, each built while the one before it commits.
//!
//! A batch's unit of work (its rows applied, the job's counts, the cursor moved) is
//! built on its predecessor's results as if they were committed ([`Tx::settle`]), so
//! on a store whose commits run elsewhere (a writer thread, a remote database) the
//! building and the committing overlap, as the queue applier's do. A built batch is
//! handed to the store as the next one starts and, on a store that commits in order,
//! waited for only before the one after that is built: neither side waits for the
//! other while both have work. (When each batch waited for its predecessor's commit,
//! the builder and the writer each idled while the other finished: a sync of 1M rows,
//! four runs of each, alternating, took 21.1-22.8 s, against 21.0-21.7 s.) A batch
//! built on one whose commit then fails cannot commit: both write one document that
//! nothing else writes ([`crate::store::Table::CdiBatches`]). Nothing is promised
//! earlier than before: a batch counts once its own commit has returned.
//! Should a commit fail on contention (a request wrote one of the batch's profiles,
//! an operator changed the integration), what was built on it is dropped and the
//! batches are committed the plain way ([`commit_prepared`]), in order; a batch that
//! cannot be built (a row too large for its profile) is committed the plain way too,
//! which sets that row aside. After a batch that found none of its users in the
//! store, the next take theirs as new without looking them up, checked at commit
//! ([`Tx::assume_new`]; docs/decisions/cdi.md#cdi-new-users-unread); a commit that
//! conflicts turns the lookups back on. A landed batch (its rows and parsed
//! objects) is freed here as it lands, on the building thread, as the profiles
//! [`Tx::settle`] lets go of are: freed on a thread of their own, the building
//! thread's next allocations came cold from the allocator's arenas, and 1M-row
//! jobs through a server took longer (docs/performance.md).

use std::cell::Cell;

use super::integration::Cursor;
use super::job::RowError;
use super::resume::next_cursor;
use super::sync::{apply_batch, commit_prepared, fail_rows, Begun, PreparedBatch};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::ids::IdGen;
use crate::repo::Tx;
use crate::store::{start_commit, ChangeSet, CommitError, StartedCommit, Store, StoreError};

/// A batch whose change set is built or being committed, kept to be committed again
/// the plain way should that fail on contention.
struct InFlight {
    after: Option<Cursor>,
    batch: PreparedBatch,
    continues: bool,
}

impl InFlight {
    /// Commits the batch the plain way, after its pipelined commit failed on contention.
    async fn redo<S: Store>(self, store: &S, begun: &Begun, ctx: Ctx) -> Result<(), ApiError> {
        commit_prepared(store, begun, self.after.as_ref(), self.batch, self.continues, ctx).await.map(|_| ())
    }
}

/// A batch handed to the store: its commit started, its outcome not yet read.
struct Submitted<'s> {
    commit: StartedCommit<'s>,
    batch: InFlight,
}

/// Commits the batches of one job, in the order they are pushed.
pub struct Pipeline<'s, S: Store> {
    store: &'s S,
    begun: &'s Begun,
    /// The cursor once every batch pushed so far has committed.
    cursor: Option<Cursor>,
    /// The unit of work the next batch is built in, on top of the one built last.
    tx: Option<Tx<'s, S>>,
    /// Handed to the store; everything before it has committed.
    submitted: Option<Submitted<'s>>,
    /// Built on `submitted` as if it had committed; handed to the store at the next push.
    built: Option<(ChangeSet, InFlight)>,
    count: u64,
    /// Whether the next batch takes the users it names as new without looking them
    /// up ([`Tx::assume_new`]): after a batch that found none of its users in the
    /// store, until a commit conflicts.
    assume_new: bool,
}

impl<'s, S: Store> Pipeline<'s, S> {
    /// A pipeline for job `begun`, whose rows are read after `start`.
    pub fn new(store: &'s S, begun: &'s Begun, start: Option<Cursor>) -> Pipeline<'s, S> {
        Pipeline { store, begun, cursor: start, tx: None, submitted: None, built: None, count: 0, assume_new: false }
    }

    /// Builds `batch` (`continues`: the next row shares its last `UPDATED_AT`) while
    /// the batch before it commits: that one is handed to the store first, and the
    /// one before it waited for.
    pub async fn push(&mut self, batch: PreparedBatch, continues: bool, ctx: Ctx) -> Result<(), ApiError> {
        let Some(to) = next_cursor(self.cursor.as_ref(), &batch.rows, continues) else { return Ok(()) };
        let (store, begun) = (self.store, self.begun);
        if !self.hand_over(ctx).await? {
            let (_, moved) = commit_prepared(store, begun, self.cursor.as_ref(), batch, continues, ctx).await?;
            self.cursor = moved;
            return Ok(());
        }
        let after = self.cursor.clone();
        self.count += 1;
        let mut ids = IdGen::new(begun.batch_seed(ctx.seed, &format!("pipeline {}", self.count)));
        let tx = self.tx.get_or_insert_with(|| Tx::new(store, begun.integration.workspace.clone()));
        tx.assume_new(self.assume_new);
        let oversized = Cell::new(None);
        let built = async {
            let (rows, prepared) = (&batch.rows, &batch.prepared);
            apply_batch(tx, &mut ids, begun, after.as_ref(), &to, rows, prepared, ctx.now, &oversized).await?;
            if tx.take_oversized().is_some() {
                return Err(ApiError::bad("a row is too large for its profile"));
            }
            Ok::<ChangeSet, ApiError>(tx.settle()?)
        }
        .await;
        // A batch whose every user was looked up and none found: the next is taken as
        // new users too (a first import), with no lookups.
        let (looked_up, found) = tx.take_lookups();
        self.assume_new |= looked_up > 0 && found == 0;
        match built {
            Ok(changes) => {
                self.built = Some((changes, InFlight { after, batch, continues }));
                self.cursor = Some(to);
                Ok(())
            }
            // What was built is void: the batch goes the plain way, after every one
            // before it.
            Err(_) => {
                self.tx = None;
                if let Some(last) = self.submitted.take() {
                    self.land(last, ctx).await?;
                }
                let (_, moved) = commit_prepared(store, begun, after.as_ref(), batch, continues, ctx).await?;
                self.cursor = moved;
                Ok(())
            }
        }
    }

    /// Hands the batch built last to the store, and waits for the one handed over
    /// before it, which this batch's predecessor was built on. On a store that may
    /// reorder commits, the earlier one is waited for first. False when a commit
    /// failed on contention and the batches were committed the plain way.
    async fn hand_over(&mut self, ctx: Ctx) -> Result<bool, ApiError> {
        if self.built.is_none() {
            return Ok(true);
        }
        if !self.store.commits_in_order() {
            if let Some(earlier) = self.submitted.take() {
                if !self.land(earlier, ctx).await? {
                    return Ok(false);
                }
            }
        }
        let Some((changes, f)) = self.built.take() else { return Ok(true) };
        let next = Submitted { commit: start_commit(self.store, changes).await, batch: f };
        match self.submitted.replace(next) {
            Some(earlier) => self.land(earlier, ctx).await,
            None => Ok(true),
        }
    }

    /// Waits for `earlier`'s commit. Should it have failed on contention, the batch
    /// handed to the store after it (built on it, so failing too) is waited for, and
    /// both are committed the plain way, in order; what was built is dropped, and
    /// false returned.
    async fn land(&mut self, earlier: Submitted<'s>, ctx: Ctx) -> Result<bool, ApiError> {
        match earlier.commit.await {
            Ok(()) => return Ok(true),
            Err(CommitError::Conflict) => {}
            Err(CommitError::Store(e)) => return Err(e.into()),
        }
        self.tx = None;
        // Perhaps a user taken as new was not: users are looked up again.
        self.assume_new = false;
        let mut redo = vec![earlier.batch];
        // Its outcome is read before anything is committed again, so no plain commit
        // can overtake it on a store that commits on several connections.
        if let Some(later) = self.submitted.take() {
            match later.commit.await {
                Err(CommitError::Conflict) => redo.push(later.batch),
                Err(CommitError::Store(e)) => return Err(e.into()),
                // It expects the integration's cursor where the failed commit would
                // have moved it.
                Ok(()) => {
                    return Err(StoreError("a batch committed though the one it was built on did not".into()).into())
                }
            }
        }
        if let Some((_, built)) = self.built.take() {
            redo.push(built);
        }
        for f in redo {
            f.redo(self.store, self.begun, ctx).await?;
        }
        Ok(false)
    }

    /// Counts rows that could not be read as failed, once the batch in flight has
    /// committed (they change the job that batch changes).
    pub async fn fail_rows(&mut self, failed: Vec<RowError>, ctx: Ctx) -> Result<(), ApiError> {
        self.flush(ctx).await?;
        fail_rows(self.store, self.begun, failed, ctx).await
    }

    /// Commits every batch pushed so far; what comes next is built afresh.
    pub async fn flush(&mut self, ctx: Ctx) -> Result<(), ApiError> {
        let landed = self.hand_over(ctx).await?;
        self.tx = None;
        match self.submitted.take() {
            Some(last) if landed => self.land(last, ctx).await.map(|_| ()),
            _ => Ok(()),
        }
    }
}
