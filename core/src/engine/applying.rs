//! The applier's turns on the engine. A turn applies the queued jobs of one
//! partition of the queue (a store of one partition: the queue), the next in turn
//! of those this process holds ([`Store::lease_partitions`], renewed about every
//! second), so that servers sharing a store apply different partitions at once.

use std::sync::atomic::Ordering;

use super::Engine;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::store::Store;
use crate::time::Timestamp;
use crate::track;
use crate::track::pressure::UNMEASURED_ROUNDS;
use crate::track::queue::QueueRun;

/// How often an applier renews its leases of partitions (ms): well within the
/// lease a store grants (PostgreSQL: three seconds).
const RENEW_EVERY_MS: i64 = 1_000;

/// Most times `Config::apply_batch` a batch of one partition's jobs takes.
const BATCH_SCALE: u16 = 16;

/// Batches one turn applies of one partition, when there are several.
const PARTITION_ROUNDS: usize = 4;

/// Most batches a background applier's turn runs to repay what requests catching up
/// took of the gate (`Gate::owed`): as many whole jobs as they applied
/// parts of, before it lets them go first again. Reading through a backlog costs about
/// what applying it does (each job a read touches is decoded whole), so neither can
/// stop the other. Before, a turn stopped after one batch whenever a request waited:
/// two clients reading through a backlog of 98,140 jobs of 50 users (a read applying
/// its user's ~1,000 queued jobs, 1.5 s, while the other waited) left the applier one
/// batch a cycle, and 1,245 jobs were applied in 600 s (2026-12-04, 7a459d4). Bounded
/// so that a read waits for seconds, not minutes.
pub const OWED_ROUNDS_MAX: usize = 2_048;

/// The partitions this process applies, and whose turn is next.
#[derive(Default)]
pub(super) struct Lanes {
    held: Vec<u16>,
    /// When the leases were renewed (ms; `None` before the first turn).
    renewed_at: Option<i64>,
    next: usize,
}

impl<S: Store> Engine<S> {
    /// Applies up to one batch of queued jobs. Hosts call this from a background task.
    pub async fn apply_queued(&self, ctx: Ctx) -> Result<QueueRun, ApiError> {
        self.apply_queued_up_to(ctx, self.config.apply_batch).await
    }

    /// Applies up to `max_jobs` queued jobs (at least one) of the partition of the
    /// oldest, in one unit of work: for a host that keeps its turns short while
    /// requests are arriving.
    pub async fn apply_queued_up_to(&self, ctx: Ctx, max_jobs: usize) -> Result<QueueRun, ApiError> {
        let mut backlog = self.gate.backlog.lock().await;
        let part = match self.store.partitions() {
            1 => 0,
            _ => self.store.queued(0, 1).await?.first().map_or(0, |j| j.part),
        };
        let run = track::queue::apply_batch(&self.store, &mut backlog, self.queue_seed(ctx), part, max_jobs).await?;
        self.gate.progress_at.store(ctx.now.0, Ordering::SeqCst);
        drop(backlog);
        self.note_applied(&run, ctx.now).await;
        Ok(run)
    }

    /// Whether the background applier should hold off now instead of taking a turn,
    /// the host judging that requests are `saturating` it (see
    /// [`crate::track::pressure::Pressure::defer`]). With a backlog bound, only while
    /// the appliers' rate is measured and the backlog is within half the bound.
    pub fn defers_applying(&self, saturating: bool, now: Timestamp) -> bool {
        self.gate.pressure.defer(saturating, self.backlog_within_half(saturating), now)
    }

    /// With a backlog bound and requests `saturating` the server, whether the backlog
    /// is within half the bound (judged by this process's own view of the queue's
    /// tail, which its acknowledgements keep current); `None` otherwise.
    fn backlog_within_half(&self, saturating: bool) -> Option<bool> {
        let pressure = &self.gate.pressure;
        match self.config.max_backlog_secs {
            Some(max) if saturating => Some(pressure.measured() && pressure.within(max / 2)),
            _ => None,
        }
    }

    /// Applies up to `rounds` batches of queued jobs of the next partition this
    /// process holds that has any, each prepared while the one before it commits,
    /// for hosts whose store commits on another thread or machine. Stops after the
    /// first batch when requests wait for their turn to catch up (after as many as it
    /// owes them, [`OWED_ROUNDS_MAX`]), or when the applier
    /// should hold off for requests that `saturate` the server (the host's judgement;
    /// see [`Engine::defers_applying`]). Empty when no partition held had a job.
    pub async fn apply_queued_pipelined(
        &self,
        ctx: Ctx,
        rounds: usize,
        saturated: &dyn Fn() -> bool,
    ) -> Result<QueueRun, ApiError> {
        let bounded = self.config.max_backlog_secs.is_some();
        let pressure = &self.gate.pressure;
        pressure.turn_started(ctx.now);
        // Partitions of jobs split by user hold a few of each request's operations:
        // a batch takes more of them, though fewer than the partitions share a
        // request, so that a read waiting for the gate waits for less.
        let batch = self.config.apply_batch * usize::from(self.store.partitions().min(BATCH_SCALE));
        let owed = self.gate.owed.swap(0, Ordering::SeqCst).div_ceil(batch.max(1)).min(OWED_ROUNDS_MAX);
        let rounds = rounds.max(owed);
        // Until the appliers' rate is measured the backlog bound refuses nothing: short
        // turns measure it within seconds of the first backlog.
        let rounds = if bounded && !pressure.measured() { rounds.min(UNMEASURED_ROUNDS) } else { rounds };
        // One partition's turn stays short, so that leases are renewed in time.
        let rounds = if self.store.partitions() > 1 { rounds.min(PARTITION_ROUNDS) } else { rounds };
        let held = self.held_partitions(ctx).await?;
        // Of those held, the partitions with jobs, asked in one call rather than by
        // looking into each in turn.
        let busy = match self.store.partitions() {
            1 => held.clone(),
            _ => self.store.busy_partitions(&held).await?,
        };
        if let (Some(reads), false, false) = (&self.gate.reads, busy.is_empty(), self.store.finds_by_name()) {
            // The requests' index of the backlog kept up with the queue here, so that
            // a read finds it current instead of indexing a backlog itself.
            reads.lock().await.refresh(&self.store).await?;
        }
        let mut run = QueueRun::default();
        for _ in 0..held.len() {
            let part = {
                let mut lanes = self.lanes();
                let part = held[lanes.next % held.len()];
                lanes.next = lanes.next.wrapping_add(1);
                part
            };
            if !busy.contains(&part) {
                continue;
            }
            let mut backlog = self.gate.backlog.lock().await;
            // Batches applied so far (the closure is asked after each).
            let batches = std::cell::Cell::new(0);
            // A turn begun before a burst saturated the server ends with its batch: it
            // would otherwise run through the burst on the CPU acknowledging needs.
            let waiting = || {
                batches.set(batches.get() + 1);
                (batches.get() >= owed && self.requests_waiting()) || {
                    let saturating = saturated();
                    pressure.would_defer(saturating, self.backlog_within_half(saturating), ctx.now)
                }
            };
            run = track::queue::apply_pipelined(
                &self.store,
                &mut backlog,
                self.queue_seed(ctx),
                part,
                batch,
                rounds,
                &waiting,
            )
            .await?;
            self.gate.progress_at.store(ctx.now.0, Ordering::SeqCst);
            drop(backlog);
            if !run.is_empty() {
                break;
            }
        }
        if bounded {
            pressure.turn_ended(ctx.now, run.applied + run.set_aside, self.backlog_left().await);
        }
        if run.is_empty() {
            pressure.ran_dry();
        }
        Ok(run)
    }

    /// Gives up the partitions this process applies (a host's applier stopping), so
    /// that other servers sharing the store take them over at once.
    pub async fn stop_applying(&self) -> Result<(), ApiError> {
        *self.lanes() = Lanes::default();
        Ok(self.store.release_partitions().await?)
    }

    /// The partitions this process applies, their leases renewed when due.
    async fn held_partitions(&self, ctx: Ctx) -> Result<Vec<u16>, ApiError> {
        let due = self.lanes().renewed_at.is_none_or(|at| ctx.now.0.saturating_sub(at) >= RENEW_EVERY_MS);
        if due {
            let held = self.store.lease_partitions().await?;
            let mut lanes = self.lanes();
            lanes.held = held;
            lanes.renewed_at = Some(ctx.now.0);
        }
        Ok(self.lanes().held.clone())
    }

    fn lanes(&self) -> std::sync::MutexGuard<'_, Lanes> {
        self.gate.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }
}
