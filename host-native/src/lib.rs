//! Engage's native host: the SQLite store and the hyper server, used by the
//! `engage` binary and by the load benchmark.

pub mod backup;
pub mod cdi;
pub mod conn;
pub mod engine;
pub mod framing;
pub mod metrics;
pub mod playground;
pub mod priority;
pub mod server;
pub mod store;

use engage_core::{Ctx, Timestamp};

/// The host's context for one request: the wall clock and fresh OS randomness.
pub fn ctx() -> Ctx {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let mut seed = [0u8; 16];
    // Without OS randomness we must not mint keys or ids.
    getrandom::fill(&mut seed).expect("the operating system's random source is unavailable");
    Ctx { now: Timestamp(now), seed }
}
