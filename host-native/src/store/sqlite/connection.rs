//! Opening the database: its pragmas, the numbered migrations, reader connections,
//! and the background checkpointer.

use std::path::Path;
use std::sync::Arc;

use engage_core::store::{StoreError, Table};
use rusqlite::{Connection, TransactionBehavior};

use super::base::{err, Background};
use super::shared::Shared;
use super::statements;

/// Points identifier entries written before `0004_ident_rows` at their profiles'
/// rows (tbl 3): a profile's key is its entry's workspace (up to the first U+001F)
/// and service id. Only here, not in the shared migration: D1 never reads the
/// column, and rewriting every entry there is billed and bounded in time. 2 s for
/// 1M users (Intel machine).
macro_rules! FILL_IDENT_ROWS {
    () => {
        "UPDATE idents SET at = (
            SELECT rowid FROM docs
            WHERE tbl = 3 AND key = substr(idents.key, 1, instr(idents.key, char(31))) || CAST(idents.value AS TEXT)
        );"
    };
}

/// The numbered migrations, shared with the edge host (here with the fill above).
pub(super) const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_init", include_str!("../../../../migrations/0001_init.sql")),
    ("0002_guard", include_str!("../../../../migrations/0002_guard.sql")),
    ("0003_idents", include_str!("../../../../migrations/0003_idents.sql")),
    ("0004_ident_rows", concat!(include_str!("../../../../migrations/0004_ident_rows.sql"), FILL_IDENT_ROWS!())),
];

pub(super) const MAIN_PAGE_SIZE: i64 = 1024;

pub(super) fn open(path: &Path, page_size: i64) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(err)?;
    stable_plans(&conn)?;
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

/// Keeps a prepared statement's plan whatever values are bound. Otherwise SQLite
/// plans `LIMIT ?` with the bound number, marks the statement to be prepared again
/// whenever that parameter is bound, and so parses and plans every scan and queue
/// read anew (4% of the server's CPU under a burst of track requests, perf).
fn stable_plans(conn: &Connection) -> Result<(), StoreError> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(err)?;
    Ok(())
}

/// Page cache of the writer connection, KiB: part of the server's memory budget
/// (docs/performance.md); larger caches were no faster (SQLite walks the cache at
/// every commit). Public so that the benchmarks' bare writers take the same cache.
pub const WRITER_CACHE_KIB: i64 = 32 << 10;

/// WAL size at which a committing connection checkpoints by itself.
pub(super) const WAL_HIGH_WATER: i64 = 1 << 30;

/// How often the background checkpointer copies the WAL into the database. Rarely:
/// applying rewrites profiles at random over the whole table, and a checkpoint
/// writes each page it finds in the WAL once, however often it was rewritten, in
/// file order. Measured with the track_load bench (1M profiles): every 500 ms the
/// scattered small writes held applying to ~180 batches/s and their syncs pushed
/// acknowledgement p99 to ~360 ms; every 3 s applying ran at ~350 batches/s (every
/// 10 s: ~320, with longer stalls of acknowledgements at each checkpoint).
pub(super) const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3);

/// Copies the WAL into the database in the background, so that the applier's
/// thread spends its time applying: a checkpoint is mostly waiting on writes and
/// syncs of scattered pages, and on a 2-core machine it overlaps with applying.
/// PASSIVE never waits for the writer or readers. The WAL starts over from its
/// beginning only at a write that finds everything in it copied, which a checkpoint
/// running beside a busy writer never achieves; so each round ends with a closing,
/// short checkpoint of what was appended meanwhile, with commits held off (after
/// passes beside the writer that keep it short: [`catch_up`]). Without
/// it the WAL grew to `WAL_HIGH_WATER`, and the commit that then had to checkpoint
/// it all at once stalled acknowledgements for a second (measured). The thread ends
/// when the store is dropped (the sender goes away).
pub(super) fn spawn_checkpointer(path: &Path, shared: Arc<Shared>) -> Result<Background<()>, StoreError> {
    let conn = open_reader(path)?;
    let path = path.to_path_buf();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("engage-checkpoint".into())
        .spawn(move || {
            crate::priority::background();
            // The WAL's length in frames once the checkpoint is done (`None`: it failed).
            let checkpoint = |c: &Connection| match c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1)) {
                Ok(frames) => Some(frames),
                Err(e) => {
                    tracing::warn!("background checkpoint failed: {e}");
                    None
                }
            };
            let wal = wal_path(&path);
            let mut changes_seen = None;
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_INTERVAL) {
                catch_up(|| checkpoint(&conn));
                let mut writer = shared.writer.lock().unwrap_or_else(|e| e.into_inner());
                checkpoint(&writer.conn);
                shared.sync_applied(&mut writer);
                // Only a quiet database gives space back: the queue drained and nothing
                // written for a whole round. A warehouse sync writes with the queue
                // drained, and truncating its WAL every round made each next round's
                // frames land in new blocks, which the kernel zeroes (perf: 6% of the
                // commit thread beside another build, 2% on a quiet machine).
                let changes = writer.conn.total_changes();
                let quiet = changes_seen.replace(changes) == Some(changes);
                if let Some(queue) = shared.queue.as_ref().filter(|q| quiet && q.log.is_drained()) {
                    reclaim(&writer.conn, &wal, &queue.log);
                }
            }
        })
        .map_err(|e| StoreError(format!("cannot start the checkpointer: {e}")))?;
    Ok(Background::new(stop, thread))
}

/// Most passes a round makes beside the writer before its closing pass.
const CATCH_UP_PASSES: usize = 4;

/// Frames a closing pass may find to copy, at most, without another pass first:
/// 4 MiB of the main database's pages.
const CLOSING_FRAMES: i64 = (4 << 20) / MAIN_PAGE_SIZE;

/// Checkpoints beside the writer (`pass`: one PASSIVE checkpoint, giving the WAL's
/// length in frames) until what the writer appended during the last pass is at most
/// [`CLOSING_FRAMES`], so that the closing pass, which holds commits off, has little
/// left to copy. A round's first pass copies what 3 s of writing appended; with
/// one pass only, the closing pass copied what was appended during it: on a
/// warehouse sync of 1M rows, 0.4 s with every commit held (perf, 2026-12-05).
fn catch_up(mut pass: impl FnMut() -> Option<i64>) {
    let Some(mut frames) = pass() else { return };
    for _ in 0..CATCH_UP_PASSES {
        // A WAL that started over (shorter than before) was all copied.
        match pass() {
            Some(now) if now - frames > CLOSING_FRAMES => frames = now,
            _ => return,
        }
    }
}

/// The WAL file of the database at `db`.
fn wal_path(db: &Path) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

/// A WAL at most this large is left as it is when the queue drains.
const RECLAIM_WAL_ABOVE: u64 = 4 << 20;

/// With the queue drained, gives the disk back what applying it used: the WAL is
/// checkpointed and truncated (when larger than [`RECLAIM_WAL_ABOVE`]) and the
/// queue's spare segments deleted. Not under load: freeing blocks is what held the
/// queue's fdatasyncs on a file system mounted with `discard` (see `queue_log`).
fn reclaim(writer: &Connection, wal: &Path, log: &super::queue_log::QueueLog) {
    let wal_bytes = std::fs::metadata(wal).map_or(0, |m| m.len());
    if wal_bytes > RECLAIM_WAL_ABOVE {
        match writer.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0)) {
            Ok(0) => tracing::info!("queue drained: WAL of {} MiB truncated", wal_bytes >> 20),
            Ok(_) => tracing::debug!("queue drained: WAL still in use by a reader, truncated later"),
            Err(e) => tracing::warn!("truncating the WAL failed: {e}"),
        }
    }
    let freed = log.drop_spares();
    if freed > 0 {
        tracing::info!("queue drained: {} MiB of spare queue segments deleted", freed >> 20);
    }
}

/// A connection for reads only. It skips the writer's set-up: `journal_mode` in
/// particular takes a lock, and many requests opening readers at once (a server's
/// first second under load) queued on it for tens of milliseconds each.
pub(super) fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(err)?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(err)?;
    stable_plans(&conn)?;
    // No memory map: every page a reader touched through it stayed in the server's
    // resident memory (the whole database, on a busy server). A small page cache:
    // under writes it is dropped at the start of nearly every read transaction
    // anyway, so it only serves the pages one transaction (a batch read) shares.
    conn.pragma_update(None, "mmap_size", 0).map_err(err)?;
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB).map_err(err)?;
    // Parse the schema and prepare the most common read now, not in a request: a
    // cold server's first requests otherwise all did it at once.
    for table in [Table::Profile, Table::Ident] {
        conn.prepare_cached(statements::of(table).read_one).map_err(err)?;
    }
    Ok(conn)
}

/// Page cache of each reader connection, KiB (up to `MAX_IDLE_READERS` of them).
const READER_CACHE_KIB: i64 = 256;

/// Reader connections opened with the store, so a cold server answers its first
/// burst of requests without opening connections on the way: with 16, the first
/// 0.4 s of a 1000 req/s load over 64 connections waited 100-260 ms (requests opened
/// the missing readers all at once); with 64, under 10 ms.
pub(super) const INITIAL_READERS: usize = 64;

/// Brings the schema up to date, in one transaction. A database of a newer schema
/// than this binary knows is refused: reading it with the older layout would miss
/// data that moved (identifier entries since `0003_idents`) and write beside it.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(err)?;
    let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(err)?;
    let known = MIGRATIONS.len() as i64;
    if current > known {
        return Err(StoreError(format!(
            "the database has schema version {current}, written by a newer engage; this one knows up to {known}: \
             run the newer version (downgrading is not supported)"
        )));
    }
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate() {
        if (i as i64) < current {
            continue;
        }
        // An existing database may have data to move: say so, since it can take
        // minutes (0003_idents: 12 s for 1M users, 10 min for 10M, AMD machine).
        let started = std::time::Instant::now();
        if current > 0 {
            tracing::info!("upgrading the database: migration {name} (on a large database this can take minutes)");
        }
        tx.execute_batch(sql).map_err(err)?;
        if current > 0 {
            tracing::info!("migration {name} done in {:.1} s", started.elapsed().as_secs_f64());
        }
    }
    tx.pragma_update(None, "user_version", known).map_err(err)?;
    tx.commit().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::{catch_up, CATCH_UP_PASSES, CLOSING_FRAMES};

    /// The passes `catch_up` makes when the WAL's length after each is as given.
    fn passes(lengths: &[Option<i64>]) -> usize {
        let mut made = 0;
        catch_up(|| {
            made += 1;
            lengths.get(made - 1).copied().flatten()
        });
        made
    }

    #[test]
    fn passes_beside_the_writer_go_on_while_each_finds_much_appended() {
        // 50,000 frames appended during the first pass, then few: one more pass.
        assert_eq!(passes(&[Some(100_000), Some(150_000), Some(150_000 + CLOSING_FRAMES)]), 3);
        // Nothing appended, or a WAL that started over: no more passes.
        assert_eq!(passes(&[Some(100_000), Some(100_000)]), 2);
        assert_eq!(passes(&[Some(100_000), Some(12)]), 2);
        // A failed pass ends the round's passes beside the writer.
        assert_eq!(passes(&[None]), 1);
        assert_eq!(passes(&[Some(100_000), None]), 2);
        // A writer that outruns the checkpoints: the passes are bounded.
        let growing: Vec<Option<i64>> = (1..20).map(|n| Some(n * 100_000)).collect();
        assert_eq!(passes(&growing), 1 + CATCH_UP_PASSES);
    }
}
