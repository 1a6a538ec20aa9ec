//! `/users/track`'s acknowledgement on the engine: the backlog bound, the fast
//! size check, and catching up first when that is what the check needs.

use super::Engine;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::http::{Response, Then};
use crate::ids::{Identifier, WorkspaceName};
use crate::store::Store;
use crate::time::Timestamp;
use crate::track;
use crate::track::queue::QueueRun;

impl<S: Store> Engine<S> {
    /// `/users/track`, applying the queued jobs of its users first when that is what
    /// it takes to tell whether it keeps within their profiles' bounds.
    /// `caught_up`: the host applied everything queued just before (see
    /// [`Engine::handle_caught_up`]).
    pub(super) async fn track(
        &self,
        ws: &WorkspaceName,
        body: &[u8],
        ctx: Ctx,
        caught_up: bool,
    ) -> Result<Response, ApiError> {
        if let Some(max_secs) = self.config.max_backlog_secs {
            self.refuse_past_backlog_bound(max_secs, ctx.now).await?;
        }
        let tracked =
            track::track(&self.store, &self.gate.ledger, ws, body, ctx, caught_up, self.config.dialect()).await?;
        let seeds = match self.answered(tracked) {
            Ok(response) => return Ok(response),
            // Caught up by the host, and still a request for these users came between.
            Err(_) if caught_up => return Err(ApiError::Busy),
            Err(seeds) => seeds,
        };
        if !self.config.applies_in_background {
            // One thread (the edge, the playground): waiting here for the queue's turn
            // would be waiting on another request (the edge's runtime cancels that as
            // hung). Nothing was done: the host applies the queue in its own turn and
            // hands the request back; a host that cannot sends this 503.
            return Ok(ApiError::Busy.into_response().then(Then::CatchUpFirst));
        }
        // Requests checked exactly take turns, so that they do not keep finding each
        // other's reservations.
        let _turn = self.gate.exact.lock().await;
        let mut seeds = seeds;
        for _ in 0..4 {
            self.catch_up(ws, seeds, ctx).await?;
            let tracked =
                track::track(&self.store, &self.gate.ledger, ws, body, ctx, true, self.config.dialect()).await?;
            seeds = match self.answered(tracked) {
                Ok(response) => return Ok(response),
                Err(more) => more,
            };
        }
        // Other requests for these users kept arriving between turns.
        Err(ApiError::Busy)
    }

    /// A request that was queued: its answer, its jobs counted by the backlog bound.
    /// One that must catch up first: the users to catch up with.
    fn answered(&self, tracked: track::Tracked) -> Result<Response, Vec<Identifier>> {
        match tracked {
            track::Tracked::Done(response, last) => {
                self.gate.pressure.enqueued(last);
                Ok(response)
            }
            track::Tracked::CatchUp(seeds) => Err(seeds),
        }
    }

    /// On a host without background threads, the answer for a `/users/track` that
    /// finds another request counting the queue for the ledger: nothing done, not
    /// counted against the rate limit, [`Then::RunAgainSoon`] (see
    /// [`crate::track::ledger::Ledger::load_unless_loading`]). `None`: go on.
    pub(super) async fn ledger_not_ready(&self, ctx: Ctx) -> Result<Option<Response>, ApiError> {
        if self.config.applies_in_background || self.gate.ledger.load_unless_loading(&self.store, ctx.now).await? {
            return Ok(None);
        }
        Ok(Some(ApiError::Busy.into_response().then(Then::RunAgainSoon)))
    }

    /// Refuses (503, nothing acknowledged) a new job while the queue holds more than
    /// `max_secs` of applying. The tail is read from the store at most once a
    /// [`crate::track::pressure::TAIL_FRESH_MS`].
    async fn refuse_past_backlog_bound(&self, max_secs: u64, now: Timestamp) -> Result<(), ApiError> {
        let pressure = &self.gate.pressure;
        let tail = match pressure.fresh_tail(now) {
            Some(tail) => tail,
            None => {
                let tail = self.store.queue_tail().await?;
                pressure.tail_read(tail, now);
                tail
            }
        };
        let through = match pressure.through() {
            Some(through) => through,
            None => {
                // Nothing applied by this engine yet: the cursor is where the queue starts.
                let first = self.store.queued(0, 1).await?.first().map_or(tail, |j| j.seq.saturating_sub(1));
                pressure.applied_through(first);
                first
            }
        };
        match pressure.wait_secs(tail.saturating_sub(through), tail, max_secs) {
            Some(retry_after) => Err(ApiError::Backlogged { retry_after }),
            None => Ok(()),
        }
    }

    /// An applier's turn applied `run`: measures the appliers' rate.
    pub(super) async fn note_applied(&self, run: &QueueRun, now: Timestamp) {
        if self.config.max_backlog_secs.is_some() {
            let left = self.backlog_left().await;
            self.gate.pressure.note_applied(run.applied + run.set_aside, left, now);
        }
    }

    /// Whether jobs are left waiting past the queue cursor the appliers reached.
    pub(super) async fn backlog_left(&self) -> bool {
        let through = self.gate.pressure.through().unwrap_or(0);
        self.store.queue_tail().await.is_ok_and(|tail| tail > through)
    }
}
