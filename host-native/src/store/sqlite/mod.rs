//! The SQLite store. Documents and the queue cursor live in the database; the
//! queue itself is an append-only log beside it ([`queue_log`]) with its own
//! writer thread, so that acknowledging a `/users/track` request (one sequential
//! append and fsync) never waits behind an applier's large commit. A job is applied
//! exactly once: its effects and the cursor move in one transaction of the
//! database, and log segments are deleted only after that commit is durable.

use foldhash::{HashMap, HashMapExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use engage_core::store::{
    named_wanted, ChangeSet, CommitError, Entry, KeyRange, PartJob, QueuedJob, Store, StoreError, Table,
};
use rusqlite::{params, Connection, OptionalExtension};

pub mod commit;
pub mod connection;
pub mod doc_cache;
pub mod queue;
pub mod queue_log;
mod statements;
pub mod writeback;

mod base;
mod names;
mod shared;

pub(crate) use self::base::{err, Background};
use self::connection::{migrate, open, open_reader, spawn_checkpointer, INITIAL_READERS, MAIN_PAGE_SIZE};
use self::doc_cache::DocCache;
use self::queue::{import_sqlite_queue, Queue};
use self::queue_log::QueueLog;
use self::shared::{Shared, Writer};

/// Idle reader connections kept open. Opening one costs a schema parse, so it is
/// sized for every request of a busy server reading at once.
pub(super) const MAX_IDLE_READERS: usize = 128;

/// A document and the row that holds it, where known (for an identifier entry, the
/// row of the profile it names: see `migrations/0004_ident_rows.sql`).
type Located = (Entry, Option<i64>);

/// A SQLite-backed [`Store`].
pub struct SqliteStore {
    path: PathBuf,
    /// The writer and the queue, shared with the apply writer thread.
    shared: Arc<Shared>,
    readers: Mutex<Vec<Connection>>,
    /// Hands the queue applier's commits to their own thread (see `spawn_apply_writer`).
    apply_writer: Background<ApplyCommit>,
    /// Hands requests' commits to the thread that commits them in groups (see `spawn_group_writer`).
    group_writer: Background<ApplyCommit>,
    /// Requests waiting after a lost commit (see `back_off`).
    backing_off: std::sync::atomic::AtomicUsize,
    /// Keeps the background checkpointer running (the queue's owner runs one).
    _checkpointer: Option<Background<()>>,
    /// Keeps the writeback pacer running (the queue's owner runs one).
    _writeback: Option<Background<()>>,
    /// Jobs enqueued by this store so far, for an idle applier to wait on.
    enqueued: (Mutex<u64>, Condvar),
}

/// Settings of a store.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Most bytes of profiles and identifier entries kept in memory.
    pub cache_bytes: usize,
}

/// The document cache's default size, MiB. Part of the server's memory budget
/// (200 MiB resident at 10M profiles under full track load, docs/performance.md):
/// the applier reads profiles at random, so a cache much smaller than the data set
/// hits little either way, and the benchmark's cache phase measures what 1 GiB buys.
/// 24 since 2026-11-28 (b21a9e3): at 32 the 10M scale phase peaked at 199-202 MiB
/// under uniform load, at 24 at 188-191, with the same rates applied (four runs of
/// each, in turn).
pub const DEFAULT_CACHE_MIB: usize = 24;

impl Default for Options {
    fn default() -> Self {
        Options { cache_bytes: DEFAULT_CACHE_MIB << 20 }
    }
}

/// A change set to commit on a writer thread, and where to answer.
pub(super) type ApplyCommit = (ChangeSet, tokio::sync::oneshot::Sender<Result<(), CommitError>>);

/// Commits the queue applier's change sets on a thread of their own, at background
/// priority: the applier's future awaits the answer, so an applier that prepares its
/// next batch meanwhile ([`engage_core::queue::apply_pipelined`]) uses a second core.
/// Other commits answer requests and run on the caller's thread. The thread ends when
/// the store is dropped.
fn spawn_apply_writer(shared: Arc<Shared>) -> Result<Background<ApplyCommit>, StoreError> {
    let (tx, rx) = std::sync::mpsc::channel::<ApplyCommit>();
    let thread = std::thread::Builder::new()
        .name("engage-apply-db".into())
        .spawn(move || {
            crate::priority::background();
            while let Ok((changes, reply)) = rx.recv() {
                let _ = reply.send(shared.commit(changes));
            }
        })
        .map_err(|e| StoreError(format!("cannot start the apply writer: {e}")))?;
    Ok(Background::new(tx, thread))
}

/// Most change sets committed together in one transaction.
const MAX_GROUP: usize = 64;

/// Commits requests' change sets on a thread of its own, in groups: each round takes
/// every change set that arrived while the previous round was committing (up to
/// [`MAX_GROUP`]) and commits them in one transaction with one fsync
/// ([`Shared::commit_group`]). Committing on the request's own thread instead held a
/// runtime worker through every fsync, so concurrent requests could never share one.
/// The thread ends when the store is dropped.
fn spawn_group_writer(shared: Arc<Shared>) -> Result<Background<ApplyCommit>, StoreError> {
    let (tx, rx) = std::sync::mpsc::channel::<ApplyCommit>();
    let thread = std::thread::Builder::new()
        .name("engage-commit".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut group = vec![first];
                while group.len() < MAX_GROUP {
                    match rx.try_recv() {
                        Ok(next) => group.push(next),
                        Err(_) => break,
                    }
                }
                let (sets, replies): (Vec<ChangeSet>, Vec<_>) = group.into_iter().unzip();
                for (reply, outcome) in replies.into_iter().zip(shared.commit_group(sets)) {
                    let _ = reply.send(outcome);
                }
            }
        })
        .map_err(|e| StoreError(format!("cannot start the commit writer: {e}")))?;
    Ok(Background::new(tx, thread))
}

/// Page size of the main database. Applying a batch rewrites one page per profile
/// it touches, at random over the whole table, so the bytes written to the WAL (and
/// again at checkpoint) scale with the page size: small pages.
impl SqliteStore {
    /// True when this process owns the database's queue (a server, or a command run
    /// with no server on it): only the owner applies writes to profiles, so that a
    /// running server's cache stays coherent.
    pub fn is_owner(&self) -> bool {
        self.shared.queue.is_some()
    }

    /// Opens (creating and migrating when needed) the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, Options::default())
    }

    /// Opens the database at `path` with these settings.
    pub fn open_with(path: &Path, options: Options) -> Result<SqliteStore, StoreError> {
        let mut writer = open(path, MAIN_PAGE_SIZE)?;
        migrate(&mut writer)?;
        let applied = cursor(&writer).map_err(err)?;
        let queue = match QueueLog::open(path, applied)? {
            Some(log) => {
                let log = Arc::new(log);
                import_sqlite_queue(path, applied, &log)?;
                Some(Queue::start(log, applied))
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            writer: Mutex::new(Writer { conn: writer, applied_not_synced: None, last_sync: std::time::Instant::now() }),
            cache: queue.as_ref().map(|_| DocCache::new(options.cache_bytes)),
            queue,
        });
        // The queue's owner is the server; a command beside it reads a few documents
        // and leaves background work to the server.
        let owner = shared.queue.is_some();
        let checkpointer = if owner { Some(spawn_checkpointer(path, shared.clone())?) } else { None };
        let initial_readers = if owner { INITIAL_READERS } else { 1 };
        Ok(SqliteStore {
            apply_writer: spawn_apply_writer(shared.clone())?,
            group_writer: spawn_group_writer(shared.clone())?,
            backing_off: std::sync::atomic::AtomicUsize::new(0),
            _checkpointer: checkpointer,
            _writeback: if owner { writeback::spawn(path) } else { None },
            path: path.to_path_buf(),
            shared,
            readers: Mutex::new((0..initial_readers).map(|_| open_reader(path)).collect::<Result<_, _>>()?),
            enqueued: (Mutex::new(0), Condvar::new()),
        })
    }

    /// How many jobs this store has enqueued: a count for [`SqliteStore::wait_for_jobs`].
    pub fn jobs_enqueued(&self) -> u64 {
        *self.enqueued.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until a job is enqueued after [`SqliteStore::jobs_enqueued`] said `seen`,
    /// or `timeout`. Only the queue's owner enqueues, so it hears of every job.
    pub fn wait_for_jobs(&self, seen: u64, timeout: Duration) {
        let (count, arrived) = &self.enqueued;
        let guard = count.lock().unwrap_or_else(|e| e.into_inner());
        let _ = arrived.wait_timeout_while(guard, timeout, |n| *n == seen);
    }

    /// Waits a random time after a request's commit lost to another (full jitter, in a
    /// window of 1 ms per request backing off at the same moment, at most 50 ms), so
    /// that its retry does not meet the same rivals in the same group again: requests
    /// racing for one profile all read it, land in one group, and only one of them
    /// wins; retrying in lockstep, fifty of them ran out of attempts (503). A server's
    /// request lanes run many requests on one thread (`crate::lanes`), so the wait is
    /// awaited on the runtime's timer where there is one; a caller outside any
    /// runtime (a command of the CLI) has the thread to itself and sleeps.
    async fn back_off(&self) {
        // Counted off also when the request is dropped while it waits.
        let (_rival, rivals) = crate::Counted::new(&self.backing_off);
        let mut random = [0u8; 8];
        let _ = getrandom::fill(&mut random);
        let window_us = (rivals as u64 * 1_000).min(50_000);
        let wait = Duration::from_micros(u64::from_le_bytes(random) % window_us.max(1));
        match tokio::runtime::Handle::try_current() {
            Ok(_) => tokio::time::sleep(wait).await,
            Err(_) => std::thread::sleep(wait),
        }
    }

    /// Appends `job`, which names `names`, once on disk.
    async fn append(&self, job: Vec<u8>, names: Vec<i64>) -> Result<u64, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.queue()?.appender.send((job, names, reply)).map_err(|_| StoreError("the queue writer stopped".into()))?;
        let seq = answer.await.map_err(|_| StoreError("the queue writer stopped".into()))??;
        let (count, arrived) = &self.enqueued;
        *count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        arrived.notify_all();
        Ok(seq)
    }

    fn queue(&self) -> Result<&Queue, StoreError> {
        self.shared
            .queue
            .as_ref()
            .ok_or_else(|| StoreError("the track queue belongs to another running engage process".into()))
    }

    fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>) -> Result<T, StoreError> {
        let conn = self.readers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let conn = match conn {
            Some(c) => c,
            None => open_reader(&self.path)?,
        };
        let out = f(&conn).map_err(err);
        let mut pool = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < MAX_IDLE_READERS {
            pool.push(conn);
        }
        out
    }

    /// Runs a batch read on the writer's connection when it is idle, else on a
    /// reader. Batch reads come from appliers about to rewrite what they read:
    /// through the writer's connection the pages are then in its cache for the write.
    fn with_idle_writer_or_reader(
        &self,
        read: impl FnOnce(&Connection) -> Result<(), rusqlite::Error>,
    ) -> Result<(), StoreError> {
        match self.shared.writer.try_lock() {
            Ok(w) => read(&w.conn).map_err(err),
            Err(_) => self.with_reader(read),
        }
    }

    fn read_one(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        self.with_reader(|c| {
            c.prepare_cached(statements::of(table).read_one)?
                .query_row(params![table.id(), key], |r| entry_at(r, 0))
                .optional()
        })
    }

    /// The documents of `keys`, in order, each with its row where known (for an
    /// identifier entry, its profile's); `hints` (empty, or one per key) say at which
    /// row each may be. Through the document cache, for the tables it holds.
    fn get_many_at(
        &self,
        table: Table,
        keys: &[String],
        hints: &[Option<i64>],
    ) -> Result<Vec<Option<Located>>, StoreError> {
        // Nothing to read: not even the cache's lock, which the applier's threads
        // (idle class) also hold.
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let hint = |i: usize| hints.get(i).copied().flatten();
        let Some(cache) = self.shared.cache.as_ref().filter(|_| doc_cache::cached(table)) else {
            let hints: Vec<Option<i64>> = (0..keys.len()).map(hint).collect();
            let found = self.read_many_at(table, keys, &hints)?;
            return Ok(keys.iter().map(|k| found.get(k).cloned()).collect());
        };
        let mut out = cache.get_many_at(table, keys);
        let (mut missing, mut missing_hints) = (Vec::new(), Vec::new());
        for (i, (k, hit)) in keys.iter().zip(&out).enumerate() {
            if hit.is_none() {
                missing.push(k.clone());
                missing_hints.push(hint(i));
            }
        }
        crate::metrics::METRICS.cache_hits.inc_by((keys.len() - missing.len()) as u64);
        crate::metrics::METRICS.cache_misses.inc_by(missing.len() as u64);
        if missing.is_empty() {
            return Ok(out);
        }
        let fill = cache.begin_fill();
        let found = self.read_many_at(table, &missing, &missing_hints)?;
        for (k, slot) in keys.iter().zip(out.iter_mut()) {
            if slot.is_none() {
                *slot = found.get(k).cloned();
            }
        }
        cache.fill(&fill, table, found.into_iter().map(|(k, (entry, rowid))| (k, entry, rowid)));
        Ok(out)
    }

    /// [`SqliteStore::read_many`], reading first at the rows `hints` name (one per key).
    fn read_many_at(
        &self,
        table: Table,
        keys: &[String],
        hints: &[Option<i64>],
    ) -> Result<HashMap<String, Located>, StoreError> {
        let rows: Vec<(i64, &str)> = keys.iter().zip(hints).filter_map(|(k, h)| Some(((*h)?, k.as_str()))).collect();
        let mut found = match statements::of(table).read_rows {
            Some(sql) if !rows.is_empty() => self.read_rows(table, sql, &rows)?,
            _ => HashMap::new(),
        };
        // Without hints (every new user of a warehouse sync), the keys as they are.
        if found.is_empty() {
            return self.read_many(table, keys);
        }
        let rest: Vec<String> = keys.iter().filter(|k| !found.contains_key(*k)).cloned().collect();
        if !rest.is_empty() {
            found.extend(self.read_many(table, &rest)?);
        }
        Ok(found)
    }

    /// The documents found at `rows` (rowid, key): a rowid is only a hint, so a row
    /// counts only if it still holds that document (a profile deleted and created
    /// again, or a database copied by `VACUUM`, has another). By key.
    fn read_rows(&self, table: Table, sql: &str, rows: &[(i64, &str)]) -> Result<HashMap<String, Located>, StoreError> {
        let mut found: HashMap<String, Located> = HashMap::with_capacity(rows.len());
        for chunk in rows.chunks(500) {
            let wanted: HashMap<i64, &str> = chunk.iter().copied().collect();
            let sql = format!("{sql}({})", vec!["?"; chunk.len()].join(","));
            let read = |c: &Connection| -> Result<(), rusqlite::Error> {
                let mut st = c.prepare_cached(&sql)?;
                let mut rs = st.query(rusqlite::params_from_iter(chunk.iter().map(|(rowid, _)| *rowid)))?;
                while let Some(r) = rs.next()? {
                    let rowid: i64 = r.get(0)?;
                    let holds = r.get::<_, i64>(1)? == table.id()
                        && wanted
                            .get(&rowid)
                            .is_some_and(|k| r.get_ref(2).ok().and_then(|v| v.as_str().ok()) == Some(*k));
                    if holds {
                        found.insert(r.get(2)?, (entry_at(r, 3)?, Some(rowid)));
                    }
                }
                Ok(())
            };
            self.with_idle_writer_or_reader(read)?;
        }
        Ok(found)
    }

    /// The documents of `keys` that exist, by key, with their rowids (in a table
    /// that has them; for identifier entries, their profiles' rows where known).
    fn read_many(&self, table: Table, keys: &[String]) -> Result<HashMap<String, (Entry, Option<i64>)>, StoreError> {
        // One statement per chunk of keys, parameterised (SQLite allows 32766 parameters).
        let mut found: HashMap<String, (Entry, Option<i64>)> = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(500) {
            let placeholders = vec!["?"; chunk.len()].join(",");
            let sql = format!("{}({placeholders})", statements::of(table).read_many);
            let read = |c: &Connection| -> Result<(), rusqlite::Error> {
                let mut st = c.prepare_cached(&sql)?;
                let params = std::iter::once(rusqlite::types::Value::Integer(table.id()))
                    .chain(chunk.iter().map(|k| rusqlite::types::Value::Text(k.clone())));
                let mut rows = st.query(rusqlite::params_from_iter(params))?;
                while let Some(r) = rows.next()? {
                    found.insert(r.get(0)?, (entry_at(r, 1)?, r.get(3)?));
                }
                Ok(())
            };
            self.with_idle_writer_or_reader(read)?;
        }
        Ok(found)
    }

    fn tail(&self) -> Result<u64, StoreError> {
        match &self.shared.queue {
            Some(q) => Ok(q.log.tail()),
            // Without the queue nothing is pending as far as this process can tell.
            None => self.with_reader(cursor),
        }
    }
}

/// The entry in columns `at` (version) and `at + 1` (value) of a row.
pub(super) fn entry_at(r: &rusqlite::Row<'_>, at: usize) -> Result<Entry, rusqlite::Error> {
    Ok(Entry { version: r.get::<_, i64>(at)? as u64, value: r.get(at + 1)? })
}

/// The applied cursor.
pub(super) fn cursor(c: &Connection) -> Result<u64, rusqlite::Error> {
    c.query_row("SELECT applied FROM queue_cursor WHERE id = 1", [], |r| r.get::<_, i64>(0)).map(|v| v as u64)
}

/// Moves pending jobs from the SQLite queue file of earlier versions (`<db>-queue`)
impl Store for SqliteStore {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        if self.shared.cache.is_some() && doc_cache::cached(table) {
            // One path through the cache and its fill lock: `get_many`'s.
            return Ok(self.get_many(table, &[key.to_string()]).await?.pop().flatten());
        }
        self.read_one(table, key)
    }

    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        let range = KeyRange::prefix(prefix, limit);
        self.with_reader(|c| {
            let mut st = c.prepare_cached(statements::of(table).scan)?;
            let rows = st.query_map(params![table.id(), range.start, range.end, range.limit as i64], |r| {
                Ok((r.get::<_, String>(0)?, entry_at(r, 1)?))
            })?;
            rows.filter(|r| r.as_ref().map_or(true, |(k, _)| range.contains(k))).collect()
        })
    }

    async fn get_many(&self, table: Table, keys: &[String]) -> Result<Vec<Option<Entry>>, StoreError> {
        let found = self.get_many_at(table, keys, &[])?;
        Ok(found.into_iter().map(|e| e.map(|(entry, _)| entry)).collect())
    }

    /// Reads each profile at the row its identifier entry says it is (checked:
    /// see [`SqliteStore::read_rows`]), one B-tree descent instead of two.
    async fn get_named(
        &self,
        keys: &[String],
        held: impl Fn(&str) -> bool,
    ) -> Result<Vec<Option<(Entry, Option<Entry>)>>, StoreError> {
        let idents = self.get_many_at(Table::Ident, keys, &[])?;
        let wanted: Vec<Option<String>> =
            keys.iter().zip(&idents).map(|(k, e)| named_wanted(k, e.as_ref().map(|(e, _)| e), &held)).collect();
        let (mut named, mut hints) = (Vec::new(), Vec::new());
        for (key, e) in wanted.iter().zip(&idents) {
            if let (Some(key), Some((_, at))) = (key, e) {
                named.push(key.clone());
                hints.push(*at);
            }
        }
        let mut profiles = self.get_many_at(Table::Profile, &named, &hints)?.into_iter();
        Ok(idents
            .into_iter()
            .zip(wanted)
            .map(|(e, wanted)| {
                let (e, _) = e?;
                Some((e, wanted.and_then(|_| profiles.next().flatten()).map(|(p, _)| p)))
            })
            .collect())
    }

    /// Commits with a queue acknowledgement go to the apply writer's thread, the others
    /// to the group writer's: each thread takes its commits from one channel, in turn.
    fn commits_in_order(&self) -> bool {
        true
    }

    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        let started = std::time::Instant::now();
        let is_ack = changes.ack.is_some();
        let writer = if is_ack { &self.apply_writer } else { &self.group_writer };
        let stopped = || CommitError::Store(StoreError("the store's writer stopped".into()));
        let (reply, answer) = tokio::sync::oneshot::channel();
        if !writer.send((changes, reply)) {
            return Err(stopped());
        }
        let out = answer.await.map_err(|_| stopped())?;
        if out == Err(CommitError::Conflict) && !is_ack {
            self.back_off().await;
        }
        crate::metrics::METRICS.commit_seconds.observe(started.elapsed().as_secs_f64());
        out
    }

    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        // Queued without its names (not by a request): they are read from the record.
        let names = engage_core::queue::record_names(&job);
        self.append(job, names).await
    }

    async fn enqueue_parts(&self, jobs: Vec<PartJob>) -> Result<Vec<u64>, StoreError> {
        let mut jobs = jobs.into_iter();
        match (jobs.next(), jobs.next()) {
            (Some(PartJob { part: 0, job, names }), None) => Ok(vec![self.append(job, names).await?]),
            _ => Err(StoreError("this store's queue has one partition".into())),
        }
    }

    /// The queue's owner keeps the names of the users its jobs name (`names`).
    fn finds_by_name(&self) -> bool {
        self.is_owner()
    }

    async fn queued_naming(&self, names: &[i64]) -> Result<Vec<QueuedJob>, StoreError> {
        let q = self.queue()?;
        let applied = self.with_reader(cursor)?;
        let mut found = Vec::new();
        for seq in q.names.naming(&q.log, names, applied)? {
            // Applied since, and its record forgotten: no longer queued.
            found.extend(q.log.read_after(seq - 1, 1)?.into_iter().filter(|j| j.seq == seq));
        }
        Ok(found)
    }

    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        let Some(q) = &self.shared.queue else { return Ok(Vec::new()) };
        let applied = self.with_reader(cursor)?;
        q.log.read_after(applied.max(after), limit)
    }

    /// From the log's index in memory and the applied cursor: no job's record is read.
    async fn nothing_queued(&self) -> Result<bool, StoreError> {
        let Some(q) = &self.shared.queue else { return Ok(true) };
        if q.log.is_drained() {
            return Ok(true);
        }
        // The index keeps applied jobs until the cursor saying so is durable.
        let applied = self.with_reader(cursor)?;
        Ok(!q.log.holds_after(applied))
    }

    async fn queue_tail(&self) -> Result<u64, StoreError> {
        self.tail()
    }
}

#[cfg(test)]
mod conformance;
