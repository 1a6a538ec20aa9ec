//! What the host supplies per request. The core reads no clock and no RNG: the
//! time and the randomness come in here, so tests pass fixed values.

use crate::time::Timestamp;

/// What the host supplies per request: the core reads no clock and no RNG.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// The current time.
    pub now: Timestamp,
    /// Fresh random bytes (ids are derived from them).
    pub seed: [u8; 16],
}
