//! Warehouse syncs on the native host: reading tables (SQLite, PostgreSQL) behind
//! [`Source`], and running jobs through the core's steps. Only the process that
//! owns the database (the server, or a command with no server on it) runs jobs:
//! they write profiles, and the owner's cache must see every write.

pub mod cli;
mod postgres;
mod sqlite;

use std::time::Duration;

use engage_core::warehouse::{self, Begun, Cursor, Integration, Job, JobStatus, Resume, Row, RowError, Warehouse};
use engage_core::Timestamp;

use crate::ctx;
use engage_core::store::Store;

/// Rows per committed batch (at most [`READ_AHEAD`] more are read and parsed
/// ahead of the one committing). A batch's unit of work, change set and pages
/// stay warm in the processor's caches: a sync of 1M new users through a server
/// took 3.8 s in batches of 750 or 1,000 rows, 3.9-4.5 s of 1,500, 4.0-4.3 s of
/// 2,000 and 4.4-4.5 s of 4,000, with CPU time following (2026-12-05, 3efec23,
/// two alternated runs each). Since a batch's leftovers are freed on the building
/// thread (e623e85), 750 beat 1,000 in 10 of 13 alternated jobs, by about 5%, and
/// 500 or 600 were no faster than 750 (2026-12-05). The black-box test
/// `rows_sharing_a_timestamp_across_a_batch_boundary_are_synced_once` places groups
/// of one `UPDATED_AT` across the 750th and 1,500th rows: it speaks HTTP and cannot
/// read this constant, so it moves with it.
pub const BATCH_ROWS: usize = 750;

/// How long a source may take to answer a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a source may go silent while a job reads it (a query starting, the next
/// row arriving) before the job gives up with `error`.
pub const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a source could not be read.
#[derive(Debug)]
pub enum SourceError {
    /// The integration cannot work as configured: unreachable, no such table, a
    /// required column missing (`config_error`).
    Config(String),
    /// Reading failed part way (`error`; committed batches stay).
    Read(String),
}

pub use engage_core::warehouse::{Columns, COLUMNS};

/// A warehouse table's rows, oldest `UPDATED_AT` first.
pub trait Source: Send {
    /// The table's column names (a missing table is a [`SourceError::Config`]).
    fn columns(&mut self, table: &str) -> Result<Vec<String>, SourceError>;

    /// Calls `each` with every row whose `UPDATED_AT` cannot be read as a time (first),
    /// then every row after the cursor `after`, oldest first, rows of one time in
    /// the order of [`engage_core::warehouse::Within`] (a cursor inside a group: from
    /// its place on, that row included); stops at the first error `each` returns.
    fn rows_after(
        &mut self,
        table: &str,
        columns: &Columns,
        after: Option<&Cursor>,
        each: &mut dyn FnMut(Read) -> Result<(), String>,
    ) -> Result<(), SourceError>;
}

/// A row as a source read it.
pub enum Read {
    /// A row with its `UPDATED_AT`.
    Row(Row),
    /// A row whose `UPDATED_AT` is not a time this sync reads (as the table holds
    /// it; `None`: NULL), with its other columns.
    Unreadable(Option<String>, Row),
}

/// A row from its key (milliseconds; `None`: unreadable), its `UPDATED_AT` as the
/// source holds it (its exact time, ordering rows of one millisecond; or what could
/// not be read), and the other seven columns in [`COLUMNS`] order.
pub fn read(key: Option<i64>, raw: Option<String>, columns: [Option<String>; 7]) -> Read {
    match key {
        Some(ms) => Read::Row(Row::from_columns(Timestamp(ms), raw, columns)),
        None => Read::Unreadable(raw, Row::from_columns(Timestamp(0), None, columns)),
    }
}

/// Opens an integration's source.
fn open(i: &Integration) -> Result<Box<dyn Source>, SourceError> {
    match i.warehouse {
        Warehouse::Sqlite => Ok(Box::new(sqlite::SqliteSource::open(&i.source)?)),
        Warehouse::Postgres => Ok(Box::new(postgres::PostgresSource::open(&i.source)?)),
    }
}

/// `schema.table` as a quoted SQL name (the core allows only letters, digits, `_`,
/// `$` and one dot in it, so quoting cannot be escaped).
pub fn quoted_table(table: &str) -> String {
    table.split('.').map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(".")
}

/// A column's name quoted for SQL.
pub fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Where a job's time and randomness come from: the host's (`crate::ctx`), or the
/// engine's for background work (`--id-seed`).
pub type Clock<'a> = &'a (dyn Fn() -> engage_core::Ctx + Sync);

/// Runs one job of `i` now and returns it as finished.
pub fn run<S: Store + Sync>(store: &S, i: &Integration, clock: Clock<'_>) -> Result<Job, String> {
    let begun = pollster::block_on(warehouse::begin(store, &i.id, clock())).map_err(|e| format!("{e:?}"))?;
    let failure = match sync_rows(store, &begun, clock) {
        Ok(()) => None,
        Err(SourceError::Config(why)) => Some((JobStatus::ConfigError, why)),
        Err(SourceError::Read(why)) => Some((JobStatus::Error, why)),
    };
    pollster::block_on(warehouse::finish(store, &begun, failure, clock())).map_err(|e| format!("{e:?}"))
}

fn sync_rows<S: Store + Sync>(store: &S, begun: &Begun, clock: Clock<'_>) -> Result<(), SourceError> {
    let mut source = open(&begun.integration)?;
    sync_from(store, begun, source.as_mut(), BATCH_ROWS, clock)
}

/// What the reading thread hands the committing one, in the source's order.
enum Step {
    /// Rows whose `UPDATED_AT` could not be read: counted failed.
    Unreadable(Vec<RowError>),
    /// A parsed batch, and whether the next row shares its last `UPDATED_AT`.
    Batch(warehouse::PreparedBatch, bool),
}

/// Batches read and parsed ahead of the one committing.
pub const READ_AHEAD: usize = 4;

/// Syncs the rows of `source` after the integration's cursor, `batch_rows` a batch.
fn sync_from<S: Store + Sync>(
    store: &S,
    begun: &Begun,
    source: &mut dyn Source,
    batch_rows: usize,
    clock: Clock<'_>,
) -> Result<(), SourceError> {
    let i = &begun.integration;
    let columns = Columns::check(&source.columns(&i.table)?, i.kind).map_err(SourceError::Config)?;
    let start = i.cursor.clone();
    // One thread reads and parses the source while this one commits the batches:
    // the source's query, parsing and the store's commit overlap.
    let (send, steps) = std::sync::mpsc::sync_channel::<Step>(READ_AHEAD);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let reading = Reading { columns: &columns, start: start.clone(), batch_rows };
            read_batches(store, begun, source, reading, send, clock)
        });
        let committed = commit_steps(store, begun, start.clone(), steps, clock);
        // A commit that failed dropped the receiver: the reader stops at its next send.
        let read = reader.join().unwrap_or_else(|_| Err(SourceError::Read("the reading thread failed".into())));
        match (committed, read) {
            (Err(why), _) => Err(SourceError::Read(why)),
            (Ok(()), read) => read,
        }
    })
}

/// Commits what the reader sends, in order, until it stops: each batch is built
/// while the one before it commits (the store's writer thread).
fn commit_steps<S: Store>(
    store: &S,
    begun: &Begun,
    cursor: Option<Cursor>,
    steps: std::sync::mpsc::Receiver<Step>,
    clock: Clock<'_>,
) -> Result<(), String> {
    let mut pipeline = warehouse::Pipeline::new(store, begun, cursor);
    for step in steps {
        match step {
            Step::Unreadable(failed) => pollster::block_on(pipeline.fail_rows(failed, clock()))
                .map_err(|e| format!("recording failed rows failed: {e:?}"))?,
            Step::Batch(batch, continues) => {
                pollster::block_on(pipeline.push(batch, continues, clock()))
                    .map_err(|e| format!("committing a batch failed: {e:?}"))?;
            }
        }
    }
    pollster::block_on(pipeline.flush(clock())).map_err(|e| format!("committing a batch failed: {e:?}"))
}

/// What a job reads: the columns checked, after which cursor, how many rows a batch.
struct Reading<'a> {
    columns: &'a Columns,
    start: Option<Cursor>,
    batch_rows: usize,
}

/// Reads the source after `start`, parses its rows in batches, and sends them.
fn read_batches<S: Store>(
    store: &S,
    begun: &Begun,
    source: &mut dyn Source,
    reading: Reading<'_>,
    send: std::sync::mpsc::SyncSender<Step>,
    clock: Clock<'_>,
) -> Result<(), SourceError> {
    let Reading { columns, start, batch_rows } = reading;
    let i = &begun.integration;
    let stopped = || "the job stopped committing".to_string();
    let ship = |rows: Vec<Row>, continues: bool| -> Result<(), String> {
        let batch = pollster::block_on(warehouse::prepare_batch(store, i, rows, clock().now))
            .map_err(|e| format!("reading a batch failed: {e:?}"))?;
        send.send(Step::Batch(batch, continues)).map_err(|_| stopped())
    };
    let mut batch: Vec<Row> = Vec::with_capacity(batch_rows);
    // The rows at the cursor's place that earlier batches committed are read again.
    let mut resume = Resume::new(start.as_ref());
    // Rows whose UPDATED_AT cannot be read come first; they fail, counted with the job.
    let mut unreadable: Vec<RowError> = Vec::new();
    source.rows_after(&i.table, columns, start.as_ref(), &mut |read| {
        let row = match read {
            Read::Unreadable(raw, row) => {
                let reason = match raw {
                    None => "UPDATED_AT is NULL".to_string(),
                    Some(text) => format!(
                        "UPDATED_AT '{}' is not a time this sync reads (RFC 3339, or seconds since the epoch)",
                        text.chars().take(64).collect::<String>()
                    ),
                };
                unreadable.push(RowError { updated_at: None, identifier: row.describe(), reason });
                return Ok(());
            }
            Read::Row(row) => row,
        };
        if !resume.admit(&row) {
            return Ok(());
        }
        if !unreadable.is_empty() {
            send.send(Step::Unreadable(std::mem::take(&mut unreadable))).map_err(|_| stopped())?;
        }
        // A batch may end inside a group of rows sharing one UPDATED_AT: the cursor
        // then records the place of its last row, so a group of any size syncs.
        if batch.len() >= batch_rows {
            let continues = batch.last().is_some_and(|l| l.updated_at == row.updated_at);
            ship(std::mem::replace(&mut batch, Vec::with_capacity(batch_rows)), continues)?;
        }
        batch.push(row);
        Ok(())
    })?;
    if !unreadable.is_empty() {
        send.send(Step::Unreadable(unreadable)).map_err(|_| SourceError::Read(stopped()))?;
    }
    if !batch.is_empty() {
        ship(batch, false).map_err(SourceError::Read)?;
    }
    Ok(())
}

/// Most jobs run at once (one per integration): a long job does not hold the others
/// up, and the sources and the database are not swamped.
pub const MAX_PARALLEL_JOBS: usize = 4;

/// Runs what is due (scheduled, or asked for by `engage cdi sync`), until `stop`:
/// each job on a thread of its own, up to [`MAX_PARALLEL_JOBS`] at once, one per
/// integration. Stopping waits for the jobs running.
pub fn spawn_runner(
    engine: crate::engine::SharedEngine,
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("engage-cdi".into())
        .spawn(move || {
            crate::priority::background();
            let store = engine.store();
            let clocked = engine.clone();
            let clock = move || clocked.background_ctx(ctx());
            // Only the database's owner runs jobs (they write profiles its cache holds).
            if !store.is_owner() {
                tracing::warn!("cdi: another process owns the database; this server runs no syncs");
                return;
            }
            // On a database several servers share, one of them runs the syncs.
            let Some(mut lease) = runner_lease(store, &stopping) else { return };
            // A job a crash left running is closed now, not when its integration next runs.
            match pollster::block_on(warehouse::all(store)) {
                Ok(all) => {
                    for i in all {
                        if let Err(e) = pollster::block_on(warehouse::close_interrupted(store, &i, clock())) {
                            tracing::error!("cdi integration {}: closing its interrupted job failed: {e:?}", i.id);
                        }
                    }
                }
                Err(e) => tracing::error!("cdi: reading integrations failed: {e:?}"),
            }
            let mut running: Vec<(String, std::thread::JoinHandle<()>)> = Vec::new();
            let mut turn = 0u64;
            while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
                turn += 1;
                // A lease whose connection broke is no longer held: another server may
                // run the syncs now. Wait for the jobs running, then for the lease.
                if let (crate::store::NativeStore::Postgres(pg), Some(held)) = (store, &lease) {
                    if turn.is_multiple_of(20) && !pg.still_held(held) {
                        tracing::warn!("cdi: the sync runner's lease was lost; waiting to take it again");
                        for (_, job) in running.drain(..) {
                            let _ = job.join();
                        }
                        match runner_lease(store, &stopping) {
                            Some(again) => lease = again,
                            None => break,
                        }
                    }
                }
                running.retain(|(_, job)| !job.is_finished());
                let busy: Vec<String> = running.iter().map(|(id, _)| id.clone()).collect();
                let room = MAX_PARALLEL_JOBS.saturating_sub(running.len());
                let now = clock();
                match pollster::block_on(warehouse::due(store, now.now, now.seed, &busy, room)) {
                    Ok(due) => {
                        for i in due {
                            let engine = engine.clone();
                            let id = i.id.clone();
                            let job = std::thread::Builder::new().name("engage-cdi-job".into()).spawn(move || {
                                crate::priority::background();
                                let clock = || engine.background_ctx(ctx());
                                log_job(&i, run(engine.store(), &i, &clock));
                            });
                            match job {
                                Ok(job) => running.push((id, job)),
                                Err(e) => tracing::error!("cdi integration {id}: cannot start a job thread: {e}"),
                            }
                        }
                    }
                    Err(e) => tracing::error!("cdi: reading integrations failed: {e:?}"),
                }
                // Due work is looked for four times a second: an on-demand run
                // (`engage cdi sync` beside a server) starts at once.
                std::thread::sleep(Duration::from_millis(250));
            }
            for (_, job) in running {
                let _ = job.join();
            }
        })
        .expect("spawn the cdi thread")
}

/// On PostgreSQL, waits until this server holds the sync runner's lease (`None`:
/// stopped first); on SQLite, at once.
fn runner_lease(
    store: &crate::store::NativeStore,
    stopping: &std::sync::atomic::AtomicBool,
) -> Option<Option<crate::store::postgres::Lease>> {
    let crate::store::NativeStore::Postgres(pg) = store else { return Some(None) };
    let mut said = false;
    while !stopping.load(std::sync::atomic::Ordering::SeqCst) {
        match pg.try_lease(crate::store::postgres::SYNC_RUNNER_LOCK) {
            Ok(Some(lease)) => {
                tracing::info!("cdi: this server runs the warehouse syncs");
                return Some(Some(lease));
            }
            Ok(None) if !said => {
                tracing::info!("cdi: another server runs the warehouse syncs; this one takes over if it stops");
                said = true;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("cdi: cannot take the sync runner's lease: {e}"),
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    None
}

/// One line per finished job: the source URL may carry a password, so the id only.
fn log_job(i: &Integration, outcome: Result<Job, String>) {
    match outcome {
        Ok(job) => tracing::info!(
            "cdi integration {}: job {} {} ({} synced, {} failed){}{}",
            i.id,
            job.seq,
            job.status.as_str(),
            job.rows_synced,
            job.rows_failed,
            job.failure.as_deref().map(|f| format!(": {f}")).unwrap_or_default(),
            job.errors.first().map(|e| format!("; first row error: {}", e.reason)).unwrap_or_default()
        ),
        Err(e) => tracing::error!("cdi integration {}: {e}", i.id),
    }
}

#[cfg(test)]
mod tests;
