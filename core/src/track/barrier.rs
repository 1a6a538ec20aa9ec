//! Barriers between the queue's partitions. An operation that names users of two
//! partitions (one by external id that gives the user an email address, whose
//! later operations sit in the address's partition) must apply after every
//! operation acknowledged before it in both, and before every one acknowledged
//! after it. So the parts of a request joined by such operations are queued as one
//! job, the main, in the lowest of their partitions, with a stub in each of the
//! others, all in the one transaction that queues the request:
//!
//! - the main is applied once each stub heads its partition (every job queued
//!   there before it is applied);
//! - a stub holds its partition until the main is applied, then is passed.
//!
//! The main and its stubs are numbered one after the other, so two barriers never
//! interleave: the oldest barrier not yet passed is always reached in every
//! partition it names, and the queue never stalls.

use serde::{Deserialize, Serialize};

/// How a job of a request that spans partitions waits on the others.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Barrier {
    /// The job with the operations, applied once each stub heads its partition.
    Main {
        /// Its stubs.
        stubs: Vec<StubAt>,
    },
    /// Holds its partition until the main job is applied.
    Stub {
        /// The main job's sequence number less this one's (negative).
        main: i64,
    },
}

/// Where a main job's stub is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StubAt {
    /// Its partition.
    pub part: u16,
    /// Its sequence number less the main job's.
    pub offset: i64,
}
