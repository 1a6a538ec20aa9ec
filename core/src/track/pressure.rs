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

/// The most jobs this process acknowledges past a backlog before any rate is
/// measured; jobs queued before it started do not count (a restart with a long
/// queue waits for the rate, as ever). The appliers measure their rate within
/// seconds of a backlog forming unless they get no CPU at all: a closed loop of
/// acknowledgements on a quiet 2-core machine kept the idle-class appliers from
/// finishing a single turn for 15 s, and 40,000 jobs (717 MiB) were acknowledged
/// past a 3-s bound. Refusing here frees the CPU that lets them run and measure.
pub const UNMEASURED_MAX_PENDING: u64 = 4 * MIN_PENDING;

/// How long one rate measurement lasts, in milliseconds.
const WINDOW_MS: i64 = 2000;

/// How long the queue's tail, once read from the store, stands in for it when a
/// request checks the bound: this process's own enqueues move it meanwhile (their
/// numbers also count other servers' jobs queued before them), so at most what other
/// servers queued in the last second is missing from it, against a bound of many
/// seconds of applying. Read for every request, it was a round trip of every
/// acknowledgement on PostgreSQL.
pub const TAIL_FRESH_MS: i64 = 1000;

/// Most batches a background applier's turn pipelines while no rate is measured:
/// a turn is measured once it ends, and a full turn may last many seconds (64
/// batches at 140 batches/s, 7 s), through which nothing bounded the backlog.
pub const UNMEASURED_ROUNDS: usize = 4;

/// How long the server counts as saturated after the host last saw it so, ms:
/// requests come and go, and a turn begun in a gap runs a batch on the CPU the next
/// requests need. The edge's drainer counts an isolate busy as long.
pub const SATURATED_MEMORY_MS: i64 = 1_000;

/// Longest the background applier holds off for requests at a stretch: from the
/// first time it holds off until it next finds nothing to apply. Past it, it applies
/// until then, whether requests saturate the server or not. The edge's drainer waits
/// as long: a burst is acknowledged first and applied after it, and a saturating load
/// that goes on is still applied. A stretch ends only when the queue runs dry, not
/// when requests let up for a moment: a load that saturated the server on and off
/// would otherwise start a new stretch at each lapse, for as long as it lasted. Under
/// the minute after which `/readyz` reports a queue with nothing applied as not ready.
pub const DEFER_LIMIT_MS: i64 = 45_000;

/// Measures the appliers' rate and the queue's cursor, shared by the engine's
/// acknowledgements and its appliers.
#[derive(Default)]
pub struct Pressure {
    /// Every job at or before this sequence number is applied (or set aside).
    through: AtomicU64,
    /// `through` was learned (an applier moved it, or the queue was read once).
    known: std::sync::atomic::AtomicBool,
    meter: Mutex<Meter>,
    /// The background applier's last turn: when it started, the jobs it applied, and
    /// whether jobs were left waiting. Measured when the next turn starts, which is
    /// when this one's time is known (the core reads no clock).
    last_turn: Mutex<Option<(Timestamp, u64, bool)>>,
    /// The queue's tail when a backlog bound was first checked: jobs after it were
    /// acknowledged by this process.
    first_tail: std::sync::OnceLock<u64>,
    /// The queue's tail as last read from the store, or moved past by this process's
    /// own enqueues since.
    tail: AtomicU64,
    /// When the tail was last read from the store (ms), once it was.
    tail_read_at: Mutex<Option<i64>>,
    /// Whether the background applier holds off for requests (see [`Pressure::defer`]).
    hold: Mutex<Hold>,
}

/// The background applier holding off while requests saturate the server.
#[derive(Default)]
struct Hold {
    /// When the applier first held off since it last found nothing to apply (ms):
    /// the stretch [`DEFER_LIMIT_MS`] bounds.
    since: Option<i64>,
    /// When the host last saw them saturate it (ms).
    seen: Option<i64>,
    /// Whether the applier holds off now: the time is not its rate's.
    holding: bool,
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

    /// The queue's tail as of `now`, when it was read from the store within
    /// [`TAIL_FRESH_MS`] (a clock that went back makes it stale).
    pub fn fresh_tail(&self, now: Timestamp) -> Option<u64> {
        let read_at = (*self.tail_read_at.lock().unwrap_or_else(|e| e.into_inner()))?;
        (0..TAIL_FRESH_MS).contains(&(now.0 - read_at)).then(|| self.tail.load(Ordering::SeqCst))
    }

    /// The store said the queue's tail is `tail` at `now`.
    pub fn tail_read(&self, tail: u64, now: Timestamp) {
        self.tail.fetch_max(tail, Ordering::SeqCst);
        *self.tail_read_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(now.0);
    }

    /// This process queued jobs numbered up to `seq`.
    pub fn enqueued(&self, seq: u64) {
        self.tail.fetch_max(seq, Ordering::SeqCst);
    }

    /// The cursor, once known (`None` before anything was applied or read).
    pub fn through(&self) -> Option<u64> {
        self.known.load(Ordering::SeqCst).then(|| self.through.load(Ordering::SeqCst))
    }

    /// An applier's turn applied `applied` jobs at `now`; `backlog` says whether
    /// jobs were left waiting (only then is the rate the appliers' capacity).
    pub fn note_applied(&self, applied: usize, backlog: bool, now: Timestamp) {
        if self.hold.lock().unwrap_or_else(|e| e.into_inner()).holding {
            // A request's catch-up while the applier holds off: a window opened now
            // would count the time held as applying, and lower the rate.
            return;
        }
        let mut m = self.meter.lock().unwrap_or_else(|e| e.into_inner());
        match (m.since, backlog) {
            (None, false) => {}
            (None, true) => {
                m.since = Some(now.0);
                m.applied = 0;
            }
            (Some(since), _) => {
                m.applied += applied as u64;
                m.close_window(since, now.0, backlog);
            }
        }
    }

    /// A background applier's turn starts at `now`: the turn before it (if any) is
    /// measured over its whole length, from its start to this one's.
    pub fn turn_started(&self, now: Timestamp) {
        let last = self.last_turn.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((started, applied, backlog)) = last {
            let mut m = self.meter.lock().unwrap_or_else(|e| e.into_inner());
            if !backlog {
                // The queue ran dry: the turn measured the offer, not the capacity.
                m.since = None;
                return;
            }
            // The window takes in the whole turn: a request's catch-up may have opened
            // it after the turn started, and the turn's jobs counted over the shorter
            // window made the rate look several times higher than it was.
            let since = m.since.map_or(started.0, |since| since.min(started.0));
            m.since = Some(since);
            m.applied += applied;
            m.close_window(since, now.0, true);
        }
    }

    /// The turn that started at `started` applied `applied` jobs; `backlog`: jobs
    /// were left waiting.
    pub fn turn_ended(&self, started: Timestamp, applied: usize, backlog: bool) {
        *self.last_turn.lock().unwrap_or_else(|e| e.into_inner()) = Some((started, applied as u64, backlog));
    }

    /// Whether the background applier holds off at `now` instead of taking a turn:
    /// requests are `saturating` the server (the host's judgement: on the native
    /// host, its request lanes kept busy) or were within [`SATURATED_MEMORY_MS`], for at most
    /// [`DEFER_LIMIT_MS`] at a stretch, and, with a backlog bound, while the backlog
    /// is `within` half of it (`None`: no bound). Acknowledging first is what the
    /// queue is for: on two cores the applier's turns beside a closed load of full
    /// batches cost a third of what was acknowledged (docs/performance.md). Applied
    /// at full speed once half the bound is used, a bounded backlog still turns an
    /// overload into 503s; a load that goes on is applied after the limit, until
    /// the queue runs dry, so nothing waits unapplied for longer than that because of it.
    pub fn defer(&self, saturating: bool, within: Option<bool>, now: Timestamp) -> bool {
        let mut hold = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        // A clock moved back (the test kit's) ends a hold rather than prolong it.
        if hold.since.is_some_and(|since| now.0 < since) || hold.seen.is_some_and(|seen| now.0 < seen) {
            *hold = Hold::default();
            return false;
        }
        if saturating {
            hold.seen = Some(now.0);
        }
        if hold.seen.is_none_or(|seen| now.0 - seen >= SATURATED_MEMORY_MS) {
            // Requests let up: the applier applies, and the stretch goes on until it
            // finds nothing to apply ([`Pressure::ran_dry`]).
            hold.holding = false;
            return false;
        }
        let defer = Self::holds(*hold.since.get_or_insert(now.0), within, now);
        if defer && !hold.holding {
            // The last turn ends here, and no rate window spans the time held.
            self.turn_started(now);
            self.meter.lock().unwrap_or_else(|e| e.into_inner()).since = None;
        }
        hold.holding = defer;
        defer
    }

    /// The background applier found nothing to apply: a stretch of holding off
    /// ends, and the next saturating load may be held off for [`DEFER_LIMIT_MS`] again.
    pub fn ran_dry(&self) {
        *self.hold.lock().unwrap_or_else(|e| e.into_inner()) = Hold::default();
    }

    /// What [`Pressure::defer`] would answer, changing nothing: a turn under way
    /// asks it between its batches, and stops to hold off.
    pub fn would_defer(&self, saturating: bool, within: Option<bool>, now: Timestamp) -> bool {
        let hold = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        saturating && Self::holds(hold.since.unwrap_or(now.0), within, now)
    }

    /// Whether to hold off at `now` while requests saturate the server since `since`.
    fn holds(since: i64, within: Option<bool>, now: Timestamp) -> bool {
        within.unwrap_or(true) && (0..DEFER_LIMIT_MS).contains(&(now.0 - since))
    }

    /// Whether the jobs acknowledged past the cursor, as far as this process knows
    /// (its own enqueues move the tail), are within `secs` of applying at the
    /// measured rate. False while the cursor is unknown.
    pub fn within(&self, secs: u64) -> bool {
        let (tail, through) = (self.tail.load(Ordering::SeqCst), self.through());
        through.is_some_and(|through| self.wait_secs(tail.saturating_sub(through), tail, secs).is_none())
    }

    /// Whether the appliers' rate has been measured (until then nothing is refused).
    pub fn measured(&self) -> bool {
        self.meter.lock().unwrap_or_else(|e| e.into_inner()).rate.is_some()
    }

    /// Seconds to wait before a new job would start within `max_secs` of applying,
    /// with `pending` jobs waiting and the queue's last job at `tail`; `None`: go ahead.
    pub fn wait_secs(&self, pending: u64, tail: u64, max_secs: u64) -> Option<u64> {
        let first_tail = *self.first_tail.get_or_init(|| tail);
        if pending <= MIN_PENDING {
            return None;
        }
        let Some(rate) = self.meter.lock().unwrap_or_else(|e| e.into_inner()).rate else {
            let ours = tail.saturating_sub(first_tail).min(pending);
            return (ours > UNMEASURED_MAX_PENDING).then_some(1);
        };
        let ahead = pending as f64 / rate.max(0.001);
        (ahead > max_secs as f64).then(|| ((ahead - max_secs as f64).ceil() as u64).clamp(1, 60))
    }
}

impl Meter {
    /// Ends the window begun at `since` once it lasted [`WINDOW_MS`] by `now`: the
    /// rate it measured joins the smoothed one; the next window starts now if a
    /// backlog remains.
    fn close_window(&mut self, since: i64, now: i64, backlog: bool) {
        let took = now - since;
        if took >= WINDOW_MS {
            let measured = self.applied as f64 * 1000.0 / took as f64;
            self.rate = Some(match self.rate {
                Some(r) => 0.5 * r + 0.5 * measured,
                None => measured,
            });
            self.since = backlog.then_some(now);
            self.applied = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_is_refused_only_past_the_bound_at_the_measured_rate() {
        let p = Pressure::default();
        assert_eq!(p.wait_secs(UNMEASURED_MAX_PENDING, 0, 30), None, "no rate measured yet");
        p.note_applied(0, true, Timestamp(0));
        p.note_applied(100, true, Timestamp(1000));
        p.note_applied(100, true, Timestamp(2000));
        // 200 jobs in 2 s: 100 jobs/s.
        assert_eq!(p.wait_secs(MIN_PENDING, 0, 1), None, "short backlogs always pass");
        assert_eq!(p.wait_secs(2900, 0, 30), None);
        assert_eq!(p.wait_secs(3100, 0, 30), Some(1));
        assert_eq!(p.wait_secs(4500, 0, 30), Some(15));
        assert_eq!(p.wait_secs(1_000_000, 0, 30), Some(60), "at most a minute");
    }

    #[test]
    fn with_no_rate_measured_a_long_backlog_is_refused_anyway() {
        let p = Pressure::default();
        // Started with 20,000 jobs queued by an earlier process (tail 20,000): those pass.
        assert_eq!(p.wait_secs(20_000, 20_000, 3), None, "a restart's queue waits for the rate");
        let tail = 20_000 + UNMEASURED_MAX_PENDING;
        assert_eq!(p.wait_secs(tail, tail, 3), None);
        assert_eq!(p.wait_secs(tail + 1, tail + 1, 3), Some(1), "appliers starved of CPU measure nothing");
        assert_eq!(p.wait_secs(tail + 50_000, tail + 50_000, 600), Some(1), "whatever the bound");
        // Once measured, the rate decides: 1,000 jobs/s allows 40,000 jobs within 60 s.
        p.note_applied(0, true, Timestamp(0));
        p.note_applied(2000, true, Timestamp(2000));
        assert_eq!(p.wait_secs(40_000, tail + 50_000, 60), None);
    }

    #[test]
    fn a_turn_is_measured_from_its_start_to_the_next_ones() {
        let p = Pressure::default();
        p.turn_started(Timestamp(0));
        p.turn_ended(Timestamp(0), 300, true);
        assert!(!p.measured(), "a turn's length is known when the next one starts");
        p.turn_started(Timestamp(1500));
        p.turn_ended(Timestamp(1500), 150, true);
        assert!(!p.measured(), "1.5 s is not a window yet");
        // 450 jobs from 0 to 3 s: 150 jobs/s, the first turn counted whole.
        p.turn_started(Timestamp(3000));
        assert!(p.measured());
        assert_eq!(p.wait_secs(4_500, 0, 30), None);
        assert_eq!(p.wait_secs(6_000, 0, 30), Some(10));
        // A turn that emptied the queue measures nothing.
        p.turn_ended(Timestamp(3000), 10, false);
        p.turn_started(Timestamp(60_000));
        assert_eq!(p.wait_secs(6_000, 0, 30), Some(10));
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
        assert_eq!(p.wait_secs(5_000, 0, 30), Some(20));
    }

    #[test]
    fn a_turn_is_measured_over_its_whole_length_when_a_catch_up_opened_the_window_during_it() {
        let p = Pressure::default();
        // A background turn applies 3,000 jobs from 0 to 7.1 s; a request's catch-up
        // at 5 s applies 10 more while a backlog is waiting.
        p.turn_started(Timestamp(0));
        p.turn_ended(Timestamp(0), 3_000, true);
        p.note_applied(10, true, Timestamp(5_000));
        p.turn_started(Timestamp(7_100));
        assert!(p.measured());
        // About 423 jobs/s (3,000 in 7.1 s), not 1,429 (3,000 in the 2.1 s since the
        // catch-up): 1,500 pending are 3.5 s of applying, past a 3-s bound.
        assert_eq!(p.wait_secs(1_500, 0, 3), Some(1));
        assert_eq!(p.wait_secs(1_250, 0, 3), None);
    }

    #[test]
    fn with_no_bound_the_applier_holds_off_for_a_saturating_load_up_to_the_limit() {
        let p = Pressure::default();
        assert!(!p.defer(false, None, Timestamp(0)), "nothing to hold off for");
        assert!(p.defer(true, None, Timestamp(1_000)));
        assert!(p.defer(true, None, Timestamp(1_000 + DEFER_LIMIT_MS - 1)));
        assert!(!p.defer(true, None, Timestamp(1_000 + DEFER_LIMIT_MS)), "a load that goes on is applied");
        assert!(!p.defer(true, None, Timestamp(120_000)), "until it finds nothing to apply");
        assert!(!p.defer(false, None, Timestamp(121_000)));
        assert!(!p.defer(true, None, Timestamp(122_000)), "requests letting up start no new stretch");
        p.ran_dry();
        assert!(p.defer(true, None, Timestamp(123_000)), "once the queue ran dry, the next burst is held off again");
    }

    #[test]
    fn a_load_that_saturates_on_and_off_is_held_off_for_the_limit_in_all() {
        // Saturated for a second, then not for two, over and over: each lapse lets the
        // applier run, and holding off ends for good once the stretch reaches the limit.
        let p = Pressure::default();
        let mut held_after_limit = false;
        for cycle in 0..60 {
            let start = cycle * 3_000;
            for ms in (start..start + 3_000).step_by(100) {
                let held = p.defer(ms < start + 1_000, None, Timestamp(ms));
                held_after_limit |= held && ms >= DEFER_LIMIT_MS;
            }
        }
        assert!(!held_after_limit, "a stretch lasts at most the limit, lapses or not");
        p.ran_dry();
        assert!(p.defer(true, None, Timestamp(200_000)), "a new stretch once nothing was left to apply");
    }

    #[test]
    fn with_a_bound_the_applier_holds_off_only_while_the_backlog_is_within_half_of_it() {
        let p = Pressure::default();
        assert!(p.defer(true, Some(true), Timestamp(0)));
        assert!(!p.defer(true, Some(false), Timestamp(1)), "half the bound used: it applies");
        assert!(p.defer(true, Some(true), Timestamp(2)), "and holds off again below it");
        assert!(p.defer(false, Some(true), Timestamp(3)), "a gap between requests");
        assert!(!p.defer(false, Some(true), Timestamp(2 + SATURATED_MEMORY_MS)), "requests let up");
        assert!(p.defer(true, Some(true), Timestamp(10_000)));
        assert!(!p.defer(true, Some(true), Timestamp(10_000 + DEFER_LIMIT_MS)), "a load that goes on is applied");
    }

    #[test]
    fn time_held_off_is_not_measured_as_applying() {
        let p = Pressure::default();
        p.turn_started(Timestamp(0));
        p.turn_ended(Timestamp(0), 300, true);
        // The turn ends where holding off begins: 300 jobs in 2 s, 150 jobs/s.
        assert!(p.defer(true, None, Timestamp(2_000)));
        assert!(p.measured());
        // A request's catch-up while held off, then a minute held off.
        p.note_applied(10, true, Timestamp(5_000));
        assert!(!p.defer(false, None, Timestamp(60_000)));
        p.turn_started(Timestamp(60_000));
        p.turn_ended(Timestamp(60_000), 300, true);
        p.turn_started(Timestamp(62_000));
        // Still 150 jobs/s: 4,500 pending are 30 s of applying.
        assert_eq!(p.wait_secs(4_500, 0, 30), None);
        assert_eq!(p.wait_secs(6_000, 0, 30), Some(10));
    }

    #[test]
    fn a_turn_asks_without_changing_anything_and_the_backlog_is_judged_by_this_processs_tail() {
        let p = Pressure::default();
        assert!(p.would_defer(true, None, Timestamp(0)));
        assert!(!p.would_defer(false, None, Timestamp(0)));
        assert!(p.defer(true, None, Timestamp(0)), "asking did not start the limit's clock");
        assert!(!p.would_defer(true, None, Timestamp(DEFER_LIMIT_MS)));
        assert!(!p.defer(false, None, Timestamp(SATURATED_MEMORY_MS)));
        assert!(!p.within(30), "the cursor is unknown");
        p.applied_through(1_000);
        p.note_applied(0, true, Timestamp(0));
        p.note_applied(200, true, Timestamp(2_000));
        // 100 jobs/s; this process queued up to 4,000: 3,000 pending, 30 s of applying.
        p.enqueued(4_000);
        assert!(p.within(30));
        assert!(!p.within(29));
    }

    #[test]
    fn a_clock_moved_back_ends_a_hold_instead_of_prolonging_it() {
        let p = Pressure::default();
        assert!(p.defer(true, None, Timestamp(100_000)));
        // The test kit sets the clock a day back: the hold does not last a day.
        assert!(!p.defer(false, None, Timestamp(100_000 - 86_400_000)));
        assert!(p.defer(true, None, Timestamp(200_000)));
        assert!(!p.would_defer(true, None, Timestamp(200_000 - 86_400_000)));
        assert!(!p.defer(true, None, Timestamp(200_000 - 86_400_000)));
    }
}
