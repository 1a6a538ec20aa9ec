//! How far behind the queue's appliers are, in seconds of applying: the jobs
//! acknowledged and not yet applied, over the rate at which jobs were applied while
//! there was a backlog. `/users/track` answers `503` (nothing acknowledged) once a
//! request would start past the bound, so an overload turns into a bounded
//! backlog, bounded memory and bounded staleness rather than minutes of both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::time::Timestamp;

/// A backlog this short is never refused, whatever the measured rate (a cold
/// server has measured none).
pub const MIN_PENDING: u64 = 1024;

/// How long one rate measurement lasts, in milliseconds.
const WINDOW_MS: i64 = 2000;

/// Measures the appliers' rate and the queue's cursor, shared by the engine's
/// acknowledgements and its appliers.
#[derive(Default)]
pub struct Pressure {
    /// Every job at or before this sequence number is applied (or set aside).
    through: AtomicU64,
    /// `through` was learned (an applier moved it, or the queue was read once).
    known: std::sync::atomic::AtomicBool,
    meter: Mutex<Meter>,
}

#[derive(Default)]
struct Meter {
    /// When the current window started (ms), or `None` when no backlog was seen.
    since: Option<i64>,
    applied: u64,
    /// Jobs per second while there was a backlog (smoothed), once measured.
    rate: Option<f64>,
}

impl Pressure {
    /// The queue cursor passed `through`.
    pub fn applied_through(&self, through: u64) {
        self.through.fetch_max(through, Ordering::SeqCst);
        self.known.store(true, Ordering::SeqCst);
    }

    /// The cursor, once known (`None` before anything was applied or read).
    pub fn through(&self) -> Option<u64> {
        self.known.load(Ordering::SeqCst).then(|| self.through.load(Ordering::SeqCst))
    }

    /// An applier's turn applied `applied` jobs at `now`; `backlog` says whether
    /// jobs were left waiting (only then is the rate the appliers' capacity).
    pub fn note_applied(&self, applied: usize, backlog: bool, now: Timestamp) {
        let mut m = self.meter.lock().unwrap_or_else(|e| e.into_inner());
        match (m.since, backlog) {
            (None, false) => {}
            (None, true) => {
                m.since = Some(now.0);
                m.applied = 0;
            }
            (Some(since), _) => {
                m.applied += applied as u64;
                let took = now.0 - since;
                if took >= WINDOW_MS {
                    let measured = m.applied as f64 * 1000.0 / took as f64;
                    m.rate = Some(match m.rate {
                        Some(r) => 0.5 * r + 0.5 * measured,
                        None => measured,
                    });
                    m.since = backlog.then_some(now.0);
                    m.applied = 0;
                }
            }
        }
    }

    /// Seconds to wait before a new job would start within `max_secs` of applying,
    /// with `pending` jobs waiting; `None`: go ahead.
    pub fn wait_secs(&self, pending: u64, max_secs: u64) -> Option<u64> {
        if pending <= MIN_PENDING {
            return None;
        }
        let rate = self.meter.lock().unwrap_or_else(|e| e.into_inner()).rate?;
        let ahead = pending as f64 / rate.max(0.001);
        (ahead > max_secs as f64).then(|| ((ahead - max_secs as f64).ceil() as u64).clamp(1, 60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_is_refused_only_past_the_bound_at_the_measured_rate() {
        let p = Pressure::default();
        assert_eq!(p.wait_secs(1_000_000, 30), None, "no rate measured yet");
        p.note_applied(0, true, Timestamp(0));
        p.note_applied(100, true, Timestamp(1000));
        p.note_applied(100, true, Timestamp(2000));
        // 200 jobs in 2 s: 100 jobs/s.
        assert_eq!(p.wait_secs(MIN_PENDING, 1), None, "short backlogs always pass");
        assert_eq!(p.wait_secs(2900, 30), None);
        assert_eq!(p.wait_secs(3100, 30), Some(1));
        assert_eq!(p.wait_secs(4500, 30), Some(15));
        assert_eq!(p.wait_secs(1_000_000, 30), Some(60), "at most a minute");
    }

    #[test]
    fn idle_appliers_do_not_lower_the_rate() {
        let p = Pressure::default();
        p.note_applied(0, true, Timestamp(0));
        p.note_applied(200, false, Timestamp(2000));
        // The queue was empty: idle turns are not measured.
        p.note_applied(0, false, Timestamp(60_000));
        p.note_applied(0, false, Timestamp(90_000));
        // Still 100 jobs/s: 5,000 pending are 50 s, 20 past the bound.
        assert_eq!(p.wait_secs(5_000, 30), Some(20));
    }
}
