//! `--id-seed N`: a server whose answers are the same, byte for byte, each time it
//! is started alike and sent the same requests (the `Date` header aside), so that a
//! test can keep snapshots of answers. Every id the server makes comes from the
//! randomness of a request's context, or the queue's: here both come from `N`,
//! the request's from how many requests came before it, the queue's from `N`
//! alone (ids of queued work depend on the job and its target, never on how the
//! queue was cut into batches: `crate::ids::IdGen::for_op`). The clock stands
//! still at [`START`] until a test moves it (`POST /_engage/clock`): no answer
//! depends on when it was sent.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::ctx::Ctx;
use crate::time::Timestamp;

/// Where the clock of a server started with `--id-seed` stands at first:
/// 2026-01-01T00:00:00Z.
pub const START: Timestamp = Timestamp(1_767_225_600_000);

/// The randomness and time of a server started with `--id-seed`.
pub struct Fixed {
    seed: u64,
    requests: AtomicU64,
    now: AtomicI64,
}

fn derive(seed: u64, what: &[u8], n: u64) -> [u8; 16] {
    crate::ids::derived_seed(&[&seed.to_le_bytes(), what, &n.to_le_bytes()])
}

impl Fixed {
    /// From `--id-seed N`.
    pub fn new(seed: u64) -> Fixed {
        Fixed { seed, requests: AtomicU64::new(0), now: AtomicI64::new(START.0) }
    }

    /// The context of the next request: its randomness from N and the number of
    /// requests before it, the clock where it stands. Real time stays real (what
    /// bounds the inspector's sessions).
    pub fn next(&self, host: Ctx) -> Ctx {
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        Ctx { now: Timestamp(self.now.load(Ordering::SeqCst)), wall: host.wall, seed: derive(self.seed, b"request", n) }
    }

    /// The context of background work (warehouse syncs): the clock where it stands,
    /// the queue's randomness (what such work makes derives its ids from its job,
    /// `crate::cdi::sync::Begun::batch_seed`).
    pub fn background(&self, host: Ctx) -> Ctx {
        Ctx { now: Timestamp(self.now.load(Ordering::SeqCst)), wall: host.wall, seed: self.queue_seed() }
    }

    /// The randomness of every application of the queue.
    pub fn queue_seed(&self) -> [u8; 16] {
        derive(self.seed, b"queue", 0)
    }

    /// Moves the clock (`POST /_engage/clock`).
    pub fn set_now(&self, now: Timestamp) {
        self.now.store(now.0, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_contexts_in_the_same_order_and_the_clock_stands_still() {
        let host = |ms| Ctx::new(Timestamp(ms), [9; 16]);
        let (a, b, c) = (Fixed::new(7), Fixed::new(7), Fixed::new(8));
        let first = a.next(host(1));
        assert_eq!(first.seed, b.next(host(2)).seed);
        assert_eq!(first.now, START);
        assert_ne!(first.seed, a.next(host(3)).seed);
        assert_ne!(first.seed, c.next(host(1)).seed);
        assert_eq!(a.queue_seed(), b.queue_seed());
        a.set_now(Timestamp(START.0 + 5));
        assert_eq!(a.next(host(1)).now, Timestamp(START.0 + 5));
    }
}
