//! The native storage: the SQLite [`Store`](engage_core::Store), its document cache
//! in front, the durable queue log beside it, and the writeback pacer; and the
//! PostgreSQL store (`postgres/`) that several servers share.

pub mod commit;
pub mod connection;
pub mod doc_cache;
pub mod native;
pub mod postgres;
pub mod queue;
pub mod queue_log;
pub mod sqlite;
pub mod writeback;

pub use native::NativeStore;
pub use sqlite::{Options, SqliteStore, DEFAULT_CACHE_MIB};
