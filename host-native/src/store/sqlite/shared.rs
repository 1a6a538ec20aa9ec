//! The state commits share: the writer connection with what it knows about
//! durability, the queue and the document cache.

use std::sync::Mutex;

use rusqlite::Connection;

use super::doc_cache::DocCache;
use super::queue::Queue;

/// The main database's writer, with what it knows about durability.
pub(super) struct Writer {
    pub(super) conn: Connection,
    /// Highest queue sequence applied by a commit that may not be on disk yet.
    pub(super) applied_not_synced: Option<u64>,
    /// When the writer last made everything durable.
    pub(super) last_sync: std::time::Instant,
}

/// How long an applied batch may stay only in the OS cache before it is synced.
pub(super) const APPLY_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// What commits need: the writer connection, the queue and the document cache.
pub(super) struct Shared {
    pub(super) writer: Mutex<Writer>,
    /// The queue, unless another process (a running server) owns it.
    pub(super) queue: Option<Queue>,
    /// Profiles and identifier entries in memory; only the queue's owner keeps one
    /// (see [`super::doc_cache`] for why that keeps it coherent).
    pub(super) cache: Option<DocCache>,
}
