//! The sustainable rate (issue 39): the highest offered rate of full track batches
//! at which a load of a minute leaves the backlog flat: every batch acknowledged
//! and, by the load's end, applied. Searched the same way for Engage and for the
//! bare pipeline (`baseline::bare_pipeline`), each probe on a fresh server.

use std::sync::Arc;

use crate::load::{self, Outcome, Req, Target};

/// One probe: a load at `rate` batches/s and what it left.
pub struct Probe {
    pub rate: u64,
    pub out: Outcome,
    /// Acknowledged batches not applied when the load ended.
    pub pending: u64,
    pub seconds: u64,
}

impl Probe {
    /// Flat: everything offered was acknowledged, and what was left to apply at the
    /// end is at most [`SLACK`] of the offer plus [`IN_FLIGHT`] batches.
    pub fn flat(&self) -> bool {
        let offered = self.rate * self.seconds;
        self.out.sent as u64 == offered
            && self.out.ok == self.out.sent
            && self.pending as f64 <= SLACK * offered as f64 + IN_FLIGHT as f64
    }

    /// Batches applied per second during the load.
    pub fn applied(&self) -> f64 {
        (self.out.ok as u64).saturating_sub(self.pending) as f64 / self.seconds as f64
    }

    pub fn describe(&self) -> String {
        format!(
            "{}/s: {}, applied {:.0}/s, left {}, p99 {:.0} ms",
            self.rate,
            if self.flat() { "flat" } else { "grows" },
            self.applied(),
            self.pending,
            self.out.pct(0.99)
        )
    }
}

/// The part of a flat load that may be left unapplied at its end.
const SLACK: f64 = 0.03;

/// Track batches (jobs) a server keeping up may still hold when the load ends: those
/// its applier is reading and committing, four of its batches of jobs (64 by default).
const IN_FLIGHT: u64 = 4 * engage::server::APPLY_BATCH as u64;

/// At most this many probes a search.
const MAX_PROBES: usize = 7;

/// Runs `requests` at `rate`/s for `seconds` against `target` and reads the backlog left.
pub fn probe(
    rt: &tokio::runtime::Runtime,
    target: &Target,
    requests: Arc<Vec<Req>>,
    rate: u64,
    seconds: u64,
    pending: impl FnOnce() -> u64,
) -> Probe {
    let out = load::open_loop(rt, target, requests, 201, rate, seconds, 64);
    Probe { rate, out, pending: pending(), seconds }
}

/// The highest flat rate found from `start` (grown by half while flat, cut by a
/// third while not, then halved between the two until they are within 5%), and the
/// probes made, in order.
pub fn search(start: u64, mut run: impl FnMut(u64) -> Probe) -> (u64, Vec<Probe>) {
    let (mut flat, mut grows): (u64, Option<u64>) = (0, None);
    let mut probes: Vec<Probe> = Vec::new();
    let mut rate = start.max(1);
    while probes.len() < MAX_PROBES {
        let p = run(rate);
        eprintln!("  sustainable rate probe {}", p.describe());
        if p.flat() {
            flat = flat.max(rate);
        } else {
            grows = Some(grows.map_or(rate, |g| g.min(rate)));
        }
        probes.push(p);
        rate = match grows {
            None => rate + rate / 2,
            // Nothing flat yet; even 1/s growing ends the search.
            Some(1) if flat == 0 => break,
            Some(g) if flat == 0 => (g * 2 / 3).max(1),
            Some(g) => {
                if (g - flat) as f64 <= 0.05 * flat as f64 || g - flat <= 1 {
                    break;
                }
                (flat + g) / 2
            }
        };
    }
    (flat, probes)
}
