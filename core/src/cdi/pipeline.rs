//! A job's batches committed in order, each built while the one before it commits.
//!
//! A batch's unit of work (its rows applied, the job's counts, the cursor moved) is
//! built on its predecessor's results as if they were committed ([`Tx::settle`]), so
//! on a store whose commits run elsewhere (a writer thread, a remote database) the
//! building and the committing overlap, as the queue applier's do. Nothing is
//! promised earlier than before: a batch counts once its own commit has returned.
//! Should a commit fail on contention (a request wrote one of the batch's profiles,
//! an operator changed the integration), what was built on it is dropped and both
//! batches are committed the plain way ([`commit_prepared`]); a batch that cannot
//! be built (a row too large for its profile) is committed the plain way too, which
//! sets that row aside.

use std::cell::Cell;

use super::integration::Cursor;
use super::job::RowError;
use super::resume::next_cursor;
use super::sync::{apply_batch, commit_prepared, fail_rows, Begun, PreparedBatch};
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::ids::IdGen;
use crate::repo::{Retired, Tx};
use crate::store::{ChangeSet, CommitError, Store};

/// A batch whose change set is being committed, kept to be committed again the
/// plain way should that fail on contention.
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

/// Commits the batches of one job, in the order they are pushed.
pub struct Pipeline<'s, S: Store> {
    store: &'s S,
    begun: &'s Begun,
    /// The cursor once every batch pushed so far has committed.
    cursor: Option<Cursor>,
    /// The unit of work the next batch is built in, on top of the one in flight.
    tx: Option<Tx<'s, S>>,
    in_flight: Option<(ChangeSet, InFlight)>,
    built: u64,
    /// What building the last batch let go of (see [`Pipeline::take_retired`]).
    retired: Option<Retired>,
}

impl<'s, S: Store> Pipeline<'s, S> {
    /// A pipeline for job `begun`, whose rows are read after `start`.
    pub fn new(store: &'s S, begun: &'s Begun, start: Option<Cursor>) -> Pipeline<'s, S> {
        Pipeline { store, begun, cursor: start, tx: None, in_flight: None, built: 0, retired: None }
    }

    /// Builds `batch` (`continues`: the next row shares its last `UPDATED_AT`) while
    /// the batch before it commits; returns once that commit has returned.
    pub async fn push(&mut self, batch: PreparedBatch, continues: bool, ctx: Ctx) -> Result<(), ApiError> {
        let Some(to) = next_cursor(self.cursor.as_ref(), &batch.rows, continues) else { return Ok(()) };
        let (store, begun, after) = (self.store, self.begun, self.cursor.clone());
        self.built += 1;
        let mut ids = IdGen::derive(ctx.seed, "cdi-pipeline", self.built);
        let tx = self.tx.get_or_insert_with(|| Tx::new(store, begun.integration.workspace.clone()));
        let in_flight = self.in_flight.take();
        let oversized = Cell::new(None);
        let commit = async {
            match in_flight {
                Some((changes, f)) => Some((store.commit(changes).await, f)),
                None => None,
            }
        };
        let build = async {
            let (rows, prepared) = (&batch.rows, &batch.prepared);
            apply_batch(tx, &mut ids, begun, after.as_ref(), &to, rows, prepared, ctx.now, &oversized).await?;
            if tx.take_oversized().is_some() {
                return Err(ApiError::bad("a row is too large for its profile"));
            }
            Ok::<(ChangeSet, Retired), ApiError>(tx.settle_retiring()?)
        };
        let (committed, built) = futures_util::future::join(commit, build).await;
        let redo = match committed {
            None | Some((Ok(()), _)) => None,
            Some((Err(CommitError::Conflict), f)) => Some(f),
            Some((Err(CommitError::Store(e)), _)) => return Err(e.into()),
        };
        match (redo, built) {
            (None, Ok((changes, retired))) => {
                self.retired = Some(retired);
                self.in_flight = Some((changes, InFlight { after, batch, continues }));
                self.cursor = Some(to);
                Ok(())
            }
            // What was built is void: both batches go the plain way, one after the other.
            (redo, _) => {
                self.tx = None;
                if let Some(f) = redo {
                    f.redo(store, begun, ctx).await?;
                }
                let (_, moved) = commit_prepared(store, begun, after.as_ref(), batch, continues, ctx).await?;
                self.cursor = moved;
                Ok(())
            }
        }
    }

    /// What building the last batch let go of (the profiles of the batch before it),
    /// for the host to free on another thread; left here, it is freed at the next
    /// batch.
    pub fn take_retired(&mut self) -> Option<Retired> {
        self.retired.take()
    }

    /// Counts rows that could not be read as failed, once the batch in flight has
    /// committed (they change the job that batch changes).
    pub async fn fail_rows(&mut self, failed: Vec<RowError>, ctx: Ctx) -> Result<(), ApiError> {
        self.flush(ctx).await?;
        fail_rows(self.store, self.begun, failed, ctx).await
    }

    /// Commits the batch in flight; what comes next is built afresh.
    pub async fn flush(&mut self, ctx: Ctx) -> Result<(), ApiError> {
        self.tx = None;
        let Some((changes, f)) = self.in_flight.take() else { return Ok(()) };
        match self.store.commit(changes).await {
            Ok(()) => Ok(()),
            Err(CommitError::Conflict) => f.redo(self.store, self.begun, ctx).await,
            Err(CommitError::Store(e)) => Err(e.into()),
        }
    }
}
