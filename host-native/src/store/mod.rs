//! The native storage, one folder a backend, over what they share:
//! - `sqlite/`: the embedded SQLite [`Store`](engage_core::Store), its document cache
//!   in front, the durable queue log beside it, and the writeback pacer;
//! - `postgres/`: the PostgreSQL store that several servers share;
//! - `native.rs`: the one a command or server runs on, chosen by `--db`.

pub mod native;
pub mod postgres;
pub mod sqlite;

pub use self::native::NativeStore;
pub use self::sqlite::{Options, SqliteStore, DEFAULT_CACHE_MIB};
