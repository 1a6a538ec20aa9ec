//! The store a native command or server runs on: the embedded SQLite file (the
//! default), or a PostgreSQL database that several servers share, chosen by the
//! `--db` value (`postgres://...` or a file path).

use std::path::Path;

use engage_core::store::{ChangeSet, CommitError, Entry, PartJob, QueuedJob, Store, StoreError, Table};

use super::postgres::{is_postgres_url, PgStore};
use super::sqlite::{Options, SqliteStore};

/// Longest a server sharing a PostgreSQL queue leaves it unlooked at while idle (it
/// polled every 2 ms, 5-10% of a core on an idle server).
pub const POLL_SHARED_QUEUE: std::time::Duration = std::time::Duration::from_millis(20);

/// One of the native stores.
pub enum NativeStore {
    /// A SQLite file, one process writing.
    Sqlite(SqliteStore),
    /// A PostgreSQL database, any number of servers.
    Postgres(PgStore),
}

/// What `--db` names, for messages: a path, or a PostgreSQL database without its
/// credentials.
pub fn describe(db: &Path) -> String {
    let text = db.to_string_lossy();
    if !is_postgres_url(&text) {
        return db.display().to_string();
    }
    // postgres://user:password@host/db → postgres://host/db
    let (scheme, rest) = text.split_once("://").unwrap_or(("postgres", &text));
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let rest = rest.split_once('?').map_or(rest, |(r, _)| r);
    format!("{scheme}://{rest}")
}

impl NativeStore {
    /// Opens `db`: a `postgres://` URL, or a SQLite file (created when missing).
    pub fn open_with(db: &Path, options: Options) -> Result<NativeStore, String> {
        let opened = match db.to_str().filter(|d| is_postgres_url(d)) {
            Some(url) => PgStore::open(url).map(NativeStore::Postgres),
            None => SqliteStore::open_with(db, options).map(NativeStore::Sqlite),
        };
        opened.map_err(|e| format!("cannot open {}: {e}", describe(db)))
    }

    /// [`NativeStore::open_with`] with the default settings.
    pub fn open(db: &Path) -> Result<NativeStore, String> {
        NativeStore::open_with(db, Options::default())
    }

    /// Opens a database that must exist: commands that only read or change what is
    /// there never make one (a mistyped `--db` would otherwise look empty).
    pub fn open_existing(db: &Path) -> Result<NativeStore, String> {
        if !is_postgres_url(&db.to_string_lossy()) && !db.exists() {
            return Err(format!("no database at {}: check --db (or ENGAGE_DB)", db.display()));
        }
        NativeStore::open(db)
    }

    /// Opens a database, making it when it does not exist, and then saying so on
    /// standard error.
    pub fn open_or_create(db: &Path) -> Result<NativeStore, String> {
        let new = !is_postgres_url(&db.to_string_lossy()) && !db.exists();
        let store = NativeStore::open(db)?;
        if new {
            eprintln!("engage: made a new database at {}", db.display());
        }
        Ok(store)
    }

    /// True when this process may apply writes to profiles: always on PostgreSQL
    /// (every server reads through to the database); on SQLite, the process that
    /// owns the file's queue.
    pub fn is_owner(&self) -> bool {
        match self {
            NativeStore::Sqlite(s) => s.is_owner(),
            NativeStore::Postgres(_) => true,
        }
    }

    /// How many jobs this process has enqueued: a count for [`NativeStore::wait_for_jobs`].
    pub fn jobs_enqueued(&self) -> u64 {
        match self {
            NativeStore::Sqlite(s) => s.jobs_enqueued(),
            NativeStore::Postgres(_) => 0,
        }
    }

    /// Waits, once the queue was found empty, until there may be jobs to apply: a job
    /// enqueued after [`NativeStore::jobs_enqueued`] said `seen`, or `timeout` (SQLite:
    /// only this process enqueues, so it hears of every job). Servers sharing a
    /// PostgreSQL queue do not hear of each other's jobs, so they look again after
    /// [`POLL_SHARED_QUEUE`] at most.
    pub fn wait_for_jobs(&self, seen: u64, timeout: std::time::Duration) {
        match self {
            NativeStore::Sqlite(s) => s.wait_for_jobs(seen, timeout),
            NativeStore::Postgres(_) => std::thread::sleep(timeout.min(POLL_SHARED_QUEUE)),
        }
    }

    /// The SQLite store, when this is one.
    pub fn sqlite(&self) -> Option<&SqliteStore> {
        match self {
            NativeStore::Sqlite(s) => Some(s),
            NativeStore::Postgres(_) => None,
        }
    }
}

impl Store for NativeStore {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.get(table, key).await,
            NativeStore::Postgres(s) => s.get(table, key).await,
        }
    }

    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.scan(table, prefix, limit).await,
            NativeStore::Postgres(s) => s.scan(table, prefix, limit).await,
        }
    }

    async fn get_many(&self, table: Table, keys: &[String]) -> Result<Vec<Option<Entry>>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.get_many(table, keys).await,
            NativeStore::Postgres(s) => s.get_many(table, keys).await,
        }
    }

    async fn get_named(
        &self,
        keys: &[String],
        held: impl Fn(&str) -> bool,
    ) -> Result<Vec<Option<(Entry, Option<Entry>)>>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.get_named(keys, held).await,
            NativeStore::Postgres(s) => s.get_named(keys, held).await,
        }
    }

    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        match self {
            NativeStore::Sqlite(s) => s.commit(changes).await,
            NativeStore::Postgres(s) => s.commit(changes).await,
        }
    }

    fn commits_in_order(&self) -> bool {
        match self {
            NativeStore::Sqlite(s) => s.commits_in_order(),
            NativeStore::Postgres(s) => s.commits_in_order(),
        }
    }

    fn queues_json(&self) -> bool {
        match self {
            NativeStore::Sqlite(s) => s.queues_json(),
            NativeStore::Postgres(s) => s.queues_json(),
        }
    }

    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.enqueue(job).await,
            NativeStore::Postgres(s) => s.enqueue(job).await,
        }
    }

    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.queued(after, limit).await,
            NativeStore::Postgres(s) => s.queued(after, limit).await,
        }
    }

    fn partitions(&self) -> u16 {
        match self {
            NativeStore::Sqlite(s) => s.partitions(),
            NativeStore::Postgres(s) => s.partitions(),
        }
    }

    fn finds_by_name(&self) -> bool {
        match self {
            NativeStore::Sqlite(s) => s.finds_by_name(),
            NativeStore::Postgres(s) => s.finds_by_name(),
        }
    }

    async fn queued_naming(&self, names: &[i64]) -> Result<Vec<QueuedJob>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.queued_naming(names).await,
            NativeStore::Postgres(s) => s.queued_naming(names).await,
        }
    }

    async fn enqueue_parts(&self, jobs: Vec<PartJob>) -> Result<Vec<u64>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.enqueue_parts(jobs).await,
            NativeStore::Postgres(s) => s.enqueue_parts(jobs).await,
        }
    }

    async fn queued_in(&self, part: u16, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.queued_in(part, after, limit).await,
            NativeStore::Postgres(s) => s.queued_in(part, after, limit).await,
        }
    }

    async fn busy_partitions(&self, among: &[u16]) -> Result<Vec<u16>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.busy_partitions(among).await,
            NativeStore::Postgres(s) => s.busy_partitions(among).await,
        }
    }

    async fn lease_partitions(&self) -> Result<Vec<u16>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.lease_partitions().await,
            NativeStore::Postgres(s) => s.lease_partitions().await,
        }
    }

    async fn release_partitions(&self) -> Result<(), StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.release_partitions().await,
            NativeStore::Postgres(s) => s.release_partitions().await,
        }
    }

    async fn applied_cursors(&self) -> Result<Option<Vec<u64>>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.applied_cursors().await,
            NativeStore::Postgres(s) => s.applied_cursors().await,
        }
    }

    async fn queue_tail(&self) -> Result<u64, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.queue_tail().await,
            NativeStore::Postgres(s) => s.queue_tail().await,
        }
    }

    async fn nothing_queued(&self) -> Result<bool, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.nothing_queued().await,
            NativeStore::Postgres(s) => s.nothing_queued().await,
        }
    }

    async fn queued_at(&self, seqs: &[u64]) -> Result<Vec<QueuedJob>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.queued_at(seqs).await,
            NativeStore::Postgres(s) => s.queued_at(seqs).await,
        }
    }

    async fn queued_count(&self) -> Result<Option<u64>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.queued_count().await,
            NativeStore::Postgres(s) => s.queued_count().await,
        }
    }

    async fn count_in_window(&self, key: &str, start: i64, expires: i64) -> Result<Option<u64>, StoreError> {
        match self {
            NativeStore::Sqlite(s) => s.count_in_window(key, start, expires).await,
            NativeStore::Postgres(s) => s.count_in_window(key, start, expires).await,
        }
    }

    async fn contended(&self, attempt: u32) {
        match self {
            NativeStore::Sqlite(s) => s.contended(attempt).await,
            NativeStore::Postgres(s) => s.contended(attempt).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_named_without_its_credentials() {
        assert_eq!(
            describe(Path::new("postgres://u:secret@db.example:5432/engage?sslmode=disable")),
            "postgres://db.example:5432/engage"
        );
        assert_eq!(describe(Path::new("postgresql://db/engage")), "postgresql://db/engage");
        assert_eq!(describe(Path::new("data/engage.db")), "data/engage.db");
    }
}
