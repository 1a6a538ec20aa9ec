//! What the host supplies per request. The core reads no clock and no RNG: the
//! time and the randomness come in here, so tests pass fixed values.

use crate::time::Timestamp;

/// What the host supplies per request: the core reads no clock and no RNG.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// The current time: the deployment's clock, which a test clock moves.
    pub now: Timestamp,
    /// The real time, which no test clock moves: what bounds credentials that
    /// must not outlive their time whatever a test does with `now` (the
    /// inspector's sessions).
    pub wall: Timestamp,
    /// Fresh random bytes (ids are derived from them).
    pub seed: [u8; 16],
}

impl Ctx {
    /// A context whose clock is the real time (no test clock).
    pub fn new(now: Timestamp, seed: [u8; 16]) -> Ctx {
        Ctx { now, wall: now, seed }
    }
}
