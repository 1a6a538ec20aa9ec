//! The SQLite store. Documents and the queue cursor live in the database; the
//! queue itself is an append-only log beside it ([`crate::queue_log`]) with its own
//! writer thread, so that acknowledging a `/users/track` request (one sequential
//! append and fsync) never waits behind an applier's large commit. A job is applied
//! exactly once: its effects and the cursor move in one transaction of the
//! database, and log segments are deleted only after that commit is durable.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use engage_core::store::{
    expectation_holds, next_version, ChangeSet, CommitError, Entry, Expect, Op, QueuedJob, Store, StoreError, Table,
};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::doc_cache::{self, DocCache};
use crate::queue_log::QueueLog;

/// The numbered migrations, shared with the edge host.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_init", include_str!("../../migrations/0001_init.sql")),
    ("0002_guard", include_str!("../../migrations/0002_guard.sql")),
];

fn err(e: rusqlite::Error) -> StoreError {
    StoreError(e.to_string())
}

/// The main database's writer, with what it knows about durability.
struct Writer {
    conn: Connection,
    /// Highest queue sequence applied by a commit that may not be on disk yet.
    applied_not_synced: Option<u64>,
    /// When the writer last made everything durable.
    last_sync: std::time::Instant,
}

/// How long an applied batch may stay only in the OS cache before it is synced.
const APPLY_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// Idle reader connections kept open. Opening one costs a schema parse, so it is
/// sized for every request of a busy server reading at once.
const MAX_IDLE_READERS: usize = 128;

/// A SQLite-backed [`Store`].
pub struct SqliteStore {
    path: PathBuf,
    /// The writer and the queue, shared with the apply writer thread.
    shared: Arc<Shared>,
    readers: Mutex<Vec<Connection>>,
    /// Hands the queue applier's commits to their own thread (see `spawn_apply_writer`).
    apply_writer: std::sync::mpsc::Sender<ApplyCommit>,
    /// Keeps the background checkpointer running (the queue's owner runs one).
    _checkpointer: Option<std::sync::mpsc::Sender<()>>,
    /// Keeps the writeback pacer running (the queue's owner runs one).
    _writeback: Option<std::sync::mpsc::Sender<()>>,
}

/// What commits need: the writer connection, the queue and the document cache.
struct Shared {
    writer: Mutex<Writer>,
    /// The queue, unless another process (a running server) owns it.
    queue: Option<Queue>,
    /// Profiles and identifier entries in memory; only the queue's owner keeps one
    /// (see [`crate::doc_cache`] for why that keeps it coherent).
    cache: Option<DocCache>,
}

/// Settings of a store.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Most bytes of profiles and identifier entries kept in memory.
    pub cache_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { cache_bytes: 1 << 30 }
    }
}

/// A queue applier's change set and where to answer.
type ApplyCommit = (ChangeSet, tokio::sync::oneshot::Sender<Result<(), CommitError>>);

/// Commits the queue applier's change sets on a thread of their own, at background
/// priority: the applier's future awaits the answer, so an applier that prepares its
/// next batch meanwhile ([`engage_core::queue::apply_pipelined`]) uses a second core.
/// Other commits answer requests and run on the caller's thread. The thread ends when
/// the store is dropped.
fn spawn_apply_writer(shared: Arc<Shared>) -> Result<std::sync::mpsc::Sender<ApplyCommit>, StoreError> {
    let (tx, rx) = std::sync::mpsc::channel::<ApplyCommit>();
    std::thread::Builder::new()
        .name("engage-apply-db".into())
        .spawn(move || {
            crate::priority::background();
            while let Ok((changes, reply)) = rx.recv() {
                let _ = reply.send(shared.commit(changes));
            }
        })
        .map_err(|e| StoreError(format!("cannot start the apply writer: {e}")))?;
    Ok(tx)
}

/// Page size of the main database. Applying a batch rewrites one page per profile
/// it touches, at random over the whole table, so the bytes written to the WAL (and
/// again at checkpoint) scale with the page size: small pages.
const MAIN_PAGE_SIZE: i64 = 1024;

fn open(path: &Path, page_size: i64) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(err)?;
    // Only takes effect on a new database (before WAL mode is set).
    conn.pragma_update(None, "page_size", page_size).map_err(err)?;
    // WAL: readers never block the writer. FULL: a commit is on disk before we answer 2xx.
    conn.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
    conn.pragma_update(None, "synchronous", "FULL").map_err(err)?;
    conn.pragma_update(None, "foreign_keys", "ON").map_err(err)?;
    // The writer's page cache survives its own commits (a reader's is dropped at every
    // commit of another connection), so it holds the pages applying rewrites. No
    // memory map here: pages read through the map are not kept in that cache.
    conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB).map_err(err)?;
    // Checkpoints are the background checkpointer's work (see `spawn_checkpointer`);
    // a committing connection checkpoints by itself only when the WAL has grown this
    // large anyway, which bounds it should the checkpointer fall behind.
    conn.pragma_update(None, "wal_autocheckpoint", WAL_HIGH_WATER / page_size).map_err(err)?;
    // After a checkpoint the WAL starts over from its beginning; only a file grown
    // past the high-water mark is cut back. Cutting it back at every checkpoint frees
    // hundreds of MB of blocks that the next round allocates again, and on a file
    // system mounted with `discard` each such truncation held the queue's fdatasyncs
    // for tens of ms (see `queue_log`).
    conn.pragma_update(None, "journal_size_limit", WAL_HIGH_WATER).map_err(err)?;
    Ok(conn)
}

/// Page cache of the writer connection, KiB.
const WRITER_CACHE_KIB: i64 = 256 << 10;

/// WAL size at which a committing connection checkpoints by itself.
const WAL_HIGH_WATER: i64 = 1 << 30;

/// How often the background checkpointer copies the WAL into the database. Rarely:
/// applying rewrites profiles at random over the whole table, and a checkpoint
/// writes each page it finds in the WAL once, however often it was rewritten, in
/// file order. Measured with the track_load bench (1M profiles): every 500 ms the
/// scattered small writes held applying to ~180 batches/s and their syncs pushed
/// acknowledgement p99 to ~360 ms; every 3 s applying ran at ~350 batches/s (every
/// 10 s: ~320, with longer stalls of acknowledgements at each checkpoint).
const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3);

/// Copies the WAL into the database in the background, so that the applier's
/// thread spends its time applying: a checkpoint is mostly waiting on writes and
/// syncs of scattered pages, and on a 2-core machine it overlaps with applying.
/// PASSIVE never waits for the writer or readers. The WAL starts over from its
/// beginning only at a write that finds everything in it copied, which a checkpoint
/// running beside a busy writer never achieves; so each round ends with a second,
/// short checkpoint of what was appended meanwhile, with commits held off. Without
/// it the WAL grew to `WAL_HIGH_WATER`, and the commit that then had to checkpoint
/// it all at once stalled acknowledgements for a second (measured). The thread ends
/// when the store is dropped (the sender goes away).
fn spawn_checkpointer(path: &Path, shared: Arc<Shared>) -> Result<std::sync::mpsc::Sender<()>, StoreError> {
    let conn = open_reader(path)?;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("engage-checkpoint".into())
        .spawn(move || {
            crate::priority::background();
            let checkpoint = |c: &Connection| {
                if let Err(e) = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::warn!("background checkpoint failed: {e}");
                }
            };
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_INTERVAL) {
                checkpoint(&conn);
                let writer = shared.writer.lock().unwrap_or_else(|e| e.into_inner());
                checkpoint(&writer.conn);
            }
        })
        .map_err(|e| StoreError(format!("cannot start the checkpointer: {e}")))?;
    Ok(stop)
}

/// A connection for reads only. It skips the writer's set-up: `journal_mode` in
/// particular takes a lock, and many requests opening readers at once (a server's
/// first second under load) queued on it for tens of milliseconds each.
fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(err)?;
    conn.pragma_update(None, "mmap_size", 4_i64 << 30).map_err(err)?;
    conn.pragma_update(None, "cache_size", -8_192_i64).map_err(err)?;
    // Parse the schema and prepare the most common read now, not in a request: a
    // cold server's first requests otherwise all did it at once.
    conn.prepare_cached(READ_ONE).map_err(err)?;
    Ok(conn)
}

/// Reads one document.
const READ_ONE: &str = "SELECT version, value FROM docs WHERE tbl = ?1 AND key = ?2";

/// Reader connections opened with the store, so a cold server answers its first
/// burst of requests without opening connections on the way: with 16, the first
/// 0.4 s of a 1000 req/s load over 64 connections waited 100-260 ms (requests opened
/// the missing readers all at once); with 64, under 10 ms.
const INITIAL_READERS: usize = 64;

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
    let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(err)?;
    for (i, (_, sql)) in MIGRATIONS.iter().enumerate() {
        if (i as i64) < current {
            continue;
        }
        tx.execute_batch(sql).map_err(err)?;
    }
    tx.pragma_update(None, "user_version", MIGRATIONS.len() as i64).map_err(err)?;
    tx.commit().map_err(err)
}

impl SqliteStore {
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
                Some(Queue { appender: spawn_appender(log.clone()), log })
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
            _checkpointer: checkpointer,
            _writeback: if owner { crate::writeback::spawn(path) } else { None },
            path: path.to_path_buf(),
            shared,
            readers: Mutex::new((0..initial_readers).map(|_| open_reader(path)).collect::<Result<_, _>>()?),
        })
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
            None => {
                open_reader(&self.path)?
            }
        };
        let out = f(&conn).map_err(err);
        let mut pool = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < MAX_IDLE_READERS {
            pool.push(conn);
        }
        out
    }

    fn read_one(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        self.with_reader(|c| {
            c.prepare_cached(READ_ONE)?
                .query_row(params![table.id(), key], |r| entry_at(r, 0))
                .optional()
        })
    }

    /// The documents of `keys` that exist, by key, with their rowids.
    fn read_many(&self, table: Table, keys: &[String]) -> Result<HashMap<String, (Entry, i64)>, StoreError> {
        // One statement per chunk of keys, parameterised (SQLite allows 32766 parameters).
        let mut found: HashMap<String, (Entry, i64)> = HashMap::with_capacity(keys.len());
        for chunk in keys.chunks(500) {
            let placeholders = vec!["?"; chunk.len()].join(",");
            let sql = format!("SELECT key, version, value, rowid FROM docs WHERE tbl = ? AND key IN ({placeholders})");
            let mut read = |c: &Connection| -> Result<(), rusqlite::Error> {
                let mut st = c.prepare_cached(&sql)?;
                let params = std::iter::once(rusqlite::types::Value::Integer(table.id()))
                    .chain(chunk.iter().map(|k| rusqlite::types::Value::Text(k.clone())));
                let mut rows = st.query(rusqlite::params_from_iter(params))?;
                while let Some(r) = rows.next()? {
                    found.insert(r.get(0)?, (entry_at(r, 1)?, r.get(3)?));
                }
                Ok(())
            };
            // Batch reads come from appliers about to rewrite what they read: through the
            // writer's connection (when idle) the pages are then in its cache for the write.
            match self.shared.writer.try_lock() {
                Ok(w) => read(&w.conn).map_err(err)?,
                Err(_) => self.with_reader(read)?,
            }
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

/// Updates a document found by its rowid, checking that the row still holds it.
/// The `+` keeps SQLite from looking the key up in its index instead.
const UPDATE_BY_ROWID: &str =
    "UPDATE docs SET version = ?1, value = ?2 WHERE rowid = ?3 AND +tbl = ?4 AND +key = ?5 AND version = ?6";

/// What one operation of a commit did.
enum Applied {
    /// Its expectation failed: the commit is refused.
    Refused,
    /// Written, in this row when known.
    Done(Option<i64>),
}

impl Shared {
    /// Applies `op`; `rowid` is where the document it updates was last seen (a hint:
    /// see [`crate::doc_cache`]).
    fn apply_op(tx: &rusqlite::Transaction<'_>, op: &Op, rowid: Option<i64>) -> Result<Applied, rusqlite::Error> {
        match op {
            Op::Put { table, key, value, expect } => match expect {
                Expect::Version(v) => {
                    let (version, expected) = (next_version(Some(*v)) as i64, *v as i64);
                    if let Some(rowid) = rowid {
                        let mut st = tx.prepare_cached(UPDATE_BY_ROWID)?;
                        if st.execute(params![version, value, rowid, table.id(), key, expected])? == 1 {
                            return Ok(Applied::Done(Some(rowid)));
                        }
                    }
                    let mut st = tx.prepare_cached(
                        "UPDATE docs SET version = ?1, value = ?2 WHERE tbl = ?3 AND key = ?4 AND version = ?5
                         RETURNING rowid",
                    )?;
                    let rowid: Option<i64> =
                        st.query_row(params![version, value, table.id(), key, expected], |r| r.get(0)).optional()?;
                    Ok(rowid.map_or(Applied::Refused, |r| Applied::Done(Some(r))))
                }
                Expect::Absent => {
                    let mut st = tx.prepare_cached(
                        "INSERT OR IGNORE INTO docs (tbl, key, version, value) VALUES (?1, ?2, 1, ?3)",
                    )?;
                    let written = st.execute(params![table.id(), key, value])? == 1;
                    Ok(if written { Applied::Done(Some(tx.last_insert_rowid())) } else { Applied::Refused })
                }
                Expect::Any => {
                    let mut st = tx.prepare_cached(
                        "INSERT INTO docs (tbl, key, version, value) VALUES (?1, ?2, 1, ?3)
                         ON CONFLICT (tbl, key) DO UPDATE SET version = version + 1, value = excluded.value",
                    )?;
                    st.execute(params![table.id(), key, value])?;
                    Ok(Applied::Done(None))
                }
            },
            Op::Delete { table, key, expect } => {
                let current: Option<i64> = tx
                    .prepare_cached("SELECT version FROM docs WHERE tbl = ?1 AND key = ?2")?
                    .query_row(params![table.id(), key], |r| r.get(0))
                    .optional()?;
                if !expectation_holds(*expect, current.map(|v| v as u64)) {
                    return Ok(Applied::Refused);
                }
                tx.prepare_cached("DELETE FROM docs WHERE tbl = ?1 AND key = ?2")?.execute(params![table.id(), key])?;
                Ok(Applied::Done(None))
            }
        }
    }

    fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        // The queue's tail only grows: jobs at or below it now exist at commit too.
        // Without the queue (another process owns it) there is nothing to acknowledge.
        let tail = self.queue.as_ref().map_or(0, |q| q.log.tail());
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // Applying queued jobs need not be synced at once: the jobs stay durable in the
        // queue file until the cursor that covers them is on disk, and replaying them
        // after a power loss gives the same result. Skipping that fsync keeps the
        // applier's large commits from stalling the queue's small ones. Every other
        // commit answers a request, so it is synced before the 2xx (and syncs the
        // applier's earlier commits with it: one WAL, in order).
        let applying = changes.ack.is_some();
        w.conn.pragma_update(None, "synchronous", if applying { "NORMAL" } else { "FULL" }).map_err(err)?;
        let hints = match &self.cache {
            Some(cache) => cache.rowids(&changes.ops),
            None => vec![None; changes.ops.len()],
        };
        let tx = w.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
        let mut rowids = Vec::with_capacity(changes.ops.len());
        for (op, hint) in changes.ops.iter().zip(hints) {
            match Self::apply_op(&tx, op, hint).map_err(err)? {
                Applied::Done(rowid) => rowids.push(rowid),
                Applied::Refused => return Err(CommitError::Conflict), // dropping `tx` rolls back
            }
        }
        if let Some(ack) = changes.ack {
            let applied: i64 =
                tx.query_row("SELECT applied FROM queue_cursor WHERE id = 1", [], |r| r.get(0)).map_err(err)?;
            // Queue sequence numbers above the cursor have no gaps (AUTOINCREMENT, and
            // rows are deleted only at or below a durable cursor), so the jobs in
            // (applied, through] number exactly through - applied. Another applier
            // that got there first moved the cursor: conflict.
            let applied = applied as u64;
            if applied >= ack.through || ack.through > tail || ack.through - applied != ack.count {
                return Err(CommitError::Conflict);
            }
            tx.execute("UPDATE queue_cursor SET applied = ?1 WHERE id = 1", params![ack.through as i64])
                .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        if let Some(cache) = &self.cache {
            // The change set is done with: its documents move into the cache.
            cache.committed(changes.ops.into_iter().zip(rowids));
        }
        if let Some(ack) = changes.ack {
            w.applied_not_synced = Some(ack.through);
        }
        let mut durable = !applying;
        if applying && w.last_sync.elapsed() >= APPLY_SYNC_INTERVAL {
            // A small FULL commit syncs the whole WAL, and with it every earlier commit.
            durable = w.conn.pragma_update(None, "synchronous", "FULL").is_ok()
                && w.conn.execute("UPDATE queue_cursor SET applied = applied WHERE id = 1", []).is_ok();
        }
        if durable {
            w.last_sync = std::time::Instant::now();
            if let Some(through) = w.applied_not_synced.take() {
                // The cursor covering these jobs is durable: their rows can go.
                // Failing here only leaves rows that `queued` already skips.
                if let Some(q) = &self.queue {
                    let _ = q.appender.send(QueueMsg::Trim(through));
                }
            }
        }
        Ok(())
    }
}

/// The queue log and its writer thread.
struct Queue {
    log: Arc<QueueLog>,
    /// Senders are shared by all requests without a lock: at a cold start a lock here
    /// made a convoy of request threads (its holder preempted among dozens).
    appender: std::sync::mpsc::Sender<QueueMsg>,
}

/// Work for the queue writer thread.
enum QueueMsg {
    /// Append a job; answer with its sequence number once it is on disk.
    Append(Vec<u8>, std::sync::mpsc::SyncSender<Result<u64, StoreError>>),
    /// Forget applied jobs up to this sequence number.
    Trim(u64),
}

/// Most jobs made durable by one sync of the queue log.
const GROUP_COMMIT_MAX: usize = 256;

/// The queue's single writer: it appends every job waiting at that moment with one
/// write and one sync, so one fsync acknowledges many concurrent requests.
fn spawn_appender(log: Arc<QueueLog>) -> std::sync::mpsc::Sender<QueueMsg> {
    let (tx, rx) = std::sync::mpsc::channel::<QueueMsg>();
    std::thread::Builder::new()
        .name("engage-queue".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut jobs = Vec::new();
                let mut replies = Vec::new();
                let mut trim: Option<u64> = None;
                let mut next = Some(first);
                while let Some(m) = next {
                    match m {
                        QueueMsg::Append(job, reply) => {
                            jobs.push(job);
                            replies.push(reply);
                        }
                        QueueMsg::Trim(t) => trim = Some(trim.map_or(t, |x| x.max(t))),
                    }
                    next = if replies.len() < GROUP_COMMIT_MAX { rx.try_recv().ok() } else { None };
                }
                if !jobs.is_empty() {
                    match log.append(&jobs) {
                        Ok(seqs) => {
                            for (reply, seq) in replies.into_iter().zip(seqs) {
                                let _ = reply.send(Ok(seq));
                            }
                        }
                        Err(e) => {
                            for reply in replies {
                                let _ = reply.send(Err(e.clone()));
                            }
                        }
                    }
                }
                if let Some(t) = trim {
                    log.trim(t);
                }
            }
        })
        .expect("spawn the queue writer thread");
    tx
}

/// A document from its row: `version` in column `at`, `value` in the next.
fn entry_at(r: &rusqlite::Row<'_>, at: usize) -> Result<Entry, rusqlite::Error> {
    Ok(Entry { version: r.get::<_, i64>(at)? as u64, value: r.get(at + 1)? })
}

/// The applied cursor.
fn cursor(c: &Connection) -> Result<u64, rusqlite::Error> {
    c.query_row("SELECT applied FROM queue_cursor WHERE id = 1", [], |r| r.get::<_, i64>(0)).map(|v| v as u64)
}

/// Moves pending jobs from the SQLite queue file of earlier versions (`<db>-queue`)
/// into the log, keeping their sequence numbers, then removes that file.
fn import_sqlite_queue(db: &Path, applied: u64, log: &QueueLog) -> Result<(), StoreError> {
    let mut name = db.as_os_str().to_owned();
    name.push("-queue");
    let old = PathBuf::from(name);
    if !old.is_file() {
        return Ok(());
    }
    let jobs: Vec<(u64, Vec<u8>)> = {
        let c = Connection::open(&old).map_err(err)?;
        let tables: i64 = c
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'queue'", [], |r| r.get(0))
            .map_err(err)?;
        if tables > 0 {
            let mut st = c.prepare("SELECT seq, job FROM queue WHERE seq > ?1 ORDER BY seq").map_err(err)?;
            let rows = st
                .query_map(params![applied as i64], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)))
                .map_err(err)?;
            rows.collect::<Result<_, _>>().map_err(err)?
        } else {
            Vec::new()
        }
    };
    if !jobs.is_empty() {
        let seqs = log.append(&jobs.iter().map(|(_, j)| j.clone()).collect::<Vec<_>>())?;
        if seqs.iter().zip(&jobs).any(|(new, (old, _))| new != old) {
            return Err(StoreError("the old queue file's jobs do not follow the applied cursor".into()));
        }
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut p = old.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    Ok(())
}

impl Store for SqliteStore {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        if self.shared.cache.is_some() && doc_cache::cached(table) {
            // One path through the cache and its fill lock: `get_many`'s.
            return Ok(self.get_many(table, &[key.to_string()]).await?.pop().flatten());
        }
        self.read_one(table, key)
    }

    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        // Keys are text; the range [prefix, prefix + U+10FFFF) holds exactly the keys
        // that start with the prefix.
        let upper = format!("{prefix}\u{10FFFF}");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with_reader(|c| {
            let mut st = c.prepare_cached(
                "SELECT key, version, value FROM docs WHERE tbl = ?1 AND key >= ?2 AND key < ?3 ORDER BY key LIMIT ?4",
            )?;
            let rows = st.query_map(params![table.id(), prefix, upper, limit], |r| {
                Ok((r.get::<_, String>(0)?, entry_at(r, 1)?))
            })?;
            rows.filter(|r| r.as_ref().map_or(true, |(k, _)| k.starts_with(prefix))).collect()
        })
    }

    async fn get_many(&self, table: Table, keys: &[String]) -> Result<Vec<Option<Entry>>, StoreError> {
        let Some(cache) = self.shared.cache.as_ref().filter(|_| doc_cache::cached(table)) else {
            let found = self.read_many(table, keys)?;
            return Ok(keys.iter().map(|k| found.get(k).map(|(entry, _)| entry.clone())).collect());
        };
        let mut out = cache.get_many(table, keys);
        let missing: Vec<String> = keys.iter().zip(&out).filter(|(_, hit)| hit.is_none()).map(|(k, _)| k.clone()).collect();
        if missing.is_empty() {
            return Ok(out);
        }
        let fill = cache.begin_fill();
        let found = self.read_many(table, &missing)?;
        for (k, slot) in keys.iter().zip(out.iter_mut()) {
            if slot.is_none() {
                *slot = found.get(k).map(|(entry, _)| entry.clone());
            }
        }
        cache.fill(&fill, table, found.into_iter().map(|(k, (entry, rowid))| (k, entry, rowid)));
        Ok(out)
    }

    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        if changes.ack.is_none() {
            return self.shared.commit(changes);
        }
        let stopped = || CommitError::Store(StoreError("the apply writer stopped".into()));
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.apply_writer.send((changes, reply)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.queue()?
            .appender
            .send(QueueMsg::Append(job, reply))
            .map_err(|_| StoreError("the queue writer stopped".into()))?;
        answer.recv().map_err(|_| StoreError("the queue writer stopped".into()))?
    }

    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        let Some(q) = &self.shared.queue else { return Ok(Vec::new()) };
        let applied = self.with_reader(cursor)?;
        q.log.read_after(applied.max(after), limit)
    }

    async fn queue_tail(&self) -> Result<u64, StoreError> {
        self.tail()
    }
}

#[cfg(test)]
mod conformance {
    use super::SqliteStore;

    /// A new store in a directory of its own, removed when the test ends.
    fn fresh() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
        (dir, store)
    }

    engage_core::store_conformance_tests!(fresh(), |fixture| fixture.1);
}

#[cfg(test)]
mod rowid_hints {
    use engage_core::store::{Expect, Op, Table};
    use rusqlite::{params, Connection, TransactionBehavior};

    use super::{migrate, open, Applied, Shared, MAIN_PAGE_SIZE, UPDATE_BY_ROWID};

    /// A migrated database in a directory of its own (removed when dropped).
    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(&dir.path().join("t.db"), MAIN_PAGE_SIZE).unwrap();
        migrate(&mut c).unwrap();
        (dir, c)
    }

    fn put(key: &str, value: &str, expect: Expect) -> Op {
        Op::Put { table: Table::Profile, key: key.into(), value: value.as_bytes().to_vec(), expect }
    }

    fn apply(c: &mut Connection, op: &Op, hint: Option<i64>) -> Option<Option<i64>> {
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
        let out = match Shared::apply_op(&tx, op, hint).unwrap() {
            Applied::Done(rowid) => Some(rowid),
            Applied::Refused => None,
        };
        tx.commit().unwrap();
        out
    }

    fn value(c: &Connection, key: &str) -> (i64, String) {
        c.query_row("SELECT version, CAST(value AS TEXT) FROM docs WHERE tbl = ?1 AND key = ?2", params![Table::Profile.id(), key], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
    }

    #[test]
    fn updates_go_by_the_hinted_row_and_a_wrong_hint_falls_back_to_the_key() {
        let (_dir, mut c) = db();
        let a = apply(&mut c, &put("a", "a1", Expect::Absent), None).unwrap().unwrap();
        let b = apply(&mut c, &put("b", "b1", Expect::Absent), None).unwrap().unwrap();
        assert_ne!(a, b);
        assert_eq!(apply(&mut c, &put("a", "a2", Expect::Version(1)), Some(a)), Some(Some(a)));
        // A hint naming another document's row never writes that row.
        assert_eq!(apply(&mut c, &put("a", "a3", Expect::Version(2)), Some(b)), Some(Some(a)));
        assert_eq!(apply(&mut c, &put("a", "a4", Expect::Version(3)), Some(9_999)), Some(Some(a)));
        assert_eq!(value(&c, "a"), (4, "a4".into()));
        assert_eq!(value(&c, "b"), (1, "b1".into()));
        // A stale version is refused, whichever way the row is found.
        assert_eq!(apply(&mut c, &put("a", "x", Expect::Version(1)), Some(a)), None);
        assert_eq!(apply(&mut c, &put("a", "x", Expect::Version(1)), None), None);
        assert_eq!(value(&c, "a"), (4, "a4".into()));
    }

    #[test]
    fn the_hinted_update_finds_its_row_by_rowid_not_by_the_key_index() {
        let (_dir, c) = db();
        let plan: Vec<String> = c
            .prepare(&format!("EXPLAIN QUERY PLAN {UPDATE_BY_ROWID}"))
            .unwrap()
            .query_map(params![2, "", 1, 1, "", 1], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert!(plan[0].contains("INTEGER PRIMARY KEY (rowid=?)"), "{plan:?}");
    }
}
