//! The background applier: one thread that applies queued track jobs in turns,
//! yielding to requests waiting for the gate, and waiting for new jobs when idle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::ctx;
use crate::engine::SharedEngine;
use crate::metrics::METRICS;

/// Longest the applier leaves the gate to requests waiting for it before its own turn.
const YIELD_MAX: Duration = Duration::from_millis(50);

/// Longest an applier that found nothing to apply waits before it looks again.
const IDLE_WAIT: Duration = Duration::from_millis(250);

/// Batches the applier pipelines before it drains the pipeline and starts over.
const APPLY_ROUNDS: usize = 64;

/// How often an applier holding off for requests looks again.
const HOLD_POLL: Duration = Duration::from_millis(5);

/// Applies queued track jobs in the background. A request applies first only the
/// queued jobs concerning its users, so this is what applies the rest.
/// `saturated`: whether requests saturate the server now (the lanes' judgement); the
/// engine decides whether the applier then holds off (`Engine::defers_applying`).
pub(crate) fn spawn_applier(
    engine: SharedEngine,
    stopping: Arc<AtomicBool>,
    saturated: impl Fn() -> bool + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let thread = std::thread::Builder::new().name("engage-applier".into());
    thread
        .spawn(move || {
            crate::priority::background();
            while !stopping.load(Ordering::SeqCst) {
                // A burst is acknowledged first, and applied once it lets up (or the
                // backlog grows long: the engine's rule).
                if engine.defers_applying(saturated(), crate::now()) {
                    std::thread::sleep(HOLD_POLL);
                    METRICS.held_seconds.inc_by(HOLD_POLL.as_secs_f64());
                    continue;
                }
                // Requests waiting for their turn take it first: the gate is not fair, and
                // a turn started the moment the last one ended would take it again
                // before a woken request thread runs (on a busy machine, every time).
                // Up to `YIELD_MAX`, so a stream of reads cannot stop the queue.
                let since = std::time::Instant::now();
                while engine.requests_waiting() && since.elapsed() < YIELD_MAX {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let seen = engine.store().jobs_enqueued();
                match pollster::block_on(engine.apply_queued_pipelined(ctx(), APPLY_ROUNDS, &saturated)) {
                    Ok(run) => {
                        if !run.is_empty() {
                            METRICS.applied_batches.inc();
                            METRICS.applied_jobs.inc_by(run.applied as u64);
                            METRICS.set_aside_jobs.inc_by(run.set_aside as u64);
                        }
                        if let Some(note) = run.set_aside_note() {
                            tracing::error!("{note}");
                        }
                        if run.is_empty() {
                            // Nothing to apply: wait for a job rather than look again
                            // every few milliseconds (an idle server spent 5-11% of a
                            // core on that). The timeout is a safety net.
                            engine.store().wait_for_jobs(seen, IDLE_WAIT);
                        }
                    }
                    Err(e) => {
                        tracing::error!("applying queued jobs failed: {e:?}");
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            }
            // Servers sharing the store take this one's partitions at once.
            if let Err(e) = pollster::block_on(engine.stop_applying()) {
                tracing::warn!(
                    "giving up the queue's partitions failed (they are taken over once their leases run out): {e:?}"
                );
            }
        })
        .expect("spawn the applier thread")
}
