//! The PostgreSQL [`Store`]: the same documents and queue as SQLite, shared by any
//! number of `engage serve` processes (`--db postgres://...`).
//!
//! Every call runs on the store's own small tokio runtime, which also drives the
//! pool's connections: the core's futures are polled wherever the host polls them
//! (a blocking thread, a command's `block_on`) and only wait on it.
//!
//! Commits run in one transaction at READ COMMITTED. Every expectation is checked
//! by the statement that writes (`UPDATE ... WHERE version = $v`, `INSERT ... ON
//! CONFLICT DO NOTHING`), which takes the row's lock and reads its latest committed
//! version: two servers writing one document never both succeed.

mod leases;
mod schema;
mod write;

use write::write;

use std::future::Future;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use engage_core::store::{ChangeSet, CommitError, Entry, KeyRange, PartJob, QueuedJob, Store, StoreError, Table};
use tokio_postgres::NoTls;

/// Connections each server keeps at most.
pub const POOL_SIZE: usize = 16;

/// How long a call waits for a connection (from the pool, or a new one).
const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// A PostgreSQL database as Engage's store.
pub struct PgStore {
    pool: Pool,
    config: tokio_postgres::Config,
    runtime: Option<tokio::runtime::Runtime>,
    /// Rate-limit counts so far: every so many, expired windows are deleted.
    counted: std::sync::atomic::AtomicU64,
    /// The queue's partitions (`queue_parts`, fixed when the database was made).
    parts: u16,
    /// This process's name as a holder of partitions' leases: random, new at each start.
    holder: String,
}

/// How long a lease of a partition, and a server's place among the appliers, last
/// unless renewed (an applier renews both about every second): a server that
/// stopped or died has its partitions taken over within about this long.
const LEASE_SECS: f64 = 5.0;

/// Rate-limit counts between two sweeps of expired windows.
const SWEEP_EVERY: u64 = 4096;

/// A session-level advisory lock held on a connection of its own: one server of
/// those sharing the database does a job (running warehouse syncs) while it holds
/// it; the lock goes with the connection when that server stops or dies.
pub struct Lease {
    client: std::sync::Arc<tokio_postgres::Client>,
}

/// The advisory lock key of the server that runs warehouse syncs.
pub const SYNC_RUNNER_LOCK: i64 = 0x656e_6761_6764;

impl Drop for PgStore {
    fn drop(&mut self) {
        // Dropping a runtime waits for its tasks, which async code may not do.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// True when `db` names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// What PostgreSQL said (its message and SQLSTATE), or what failed on the way to it:
/// the driver's own text for a server's error is only "db error". Never the URL,
/// which may carry the password. (Warehouse sources say it the same way.)
pub fn reason(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

fn store_err(e: tokio_postgres::Error) -> StoreError {
    StoreError(format!("PostgreSQL: {}", reason(&e)))
}

fn pool_err(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => store_err(e),
        other => StoreError(format!("PostgreSQL: no connection: {other}")),
    }
}

fn job_row(r: tokio_postgres::Row) -> QueuedJob {
    QueuedJob { seq: r.get::<_, i64>(0) as u64, part: r.get::<_, i32>(1) as u16, job: r.get(2) }
}

fn entry(version: i64, value: Vec<u8>) -> Entry {
    Entry { version: version as u64, value }
}

impl PgStore {
    /// Connects to `url` and brings its schema up to date; a new database's queue
    /// gets the partitions `ENGAGE_QUEUE_PARTITIONS` says (64 by default).
    pub fn open(url: &str) -> Result<PgStore, StoreError> {
        PgStore::open_with(url, schema::partitions_wanted()?)
    }

    /// As [`PgStore::open`], giving a new database's queue `parts` partitions (a
    /// database that has its partitions keeps them).
    pub fn open_with(url: &str, parts: u16) -> Result<PgStore, StoreError> {
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|_| StoreError("the postgres:// URL is not valid".into()))?;
        // Every statement planned for its values: a plan made generic while the tables
        // were small (the first executions of a new database's prepared statements)
        // scanned all of `docs` for each batch's keys once it held a million rows
        // (seconds a batch; docs/decisions/postgres.md, postgres-custom-plans).
        let options = format!("{} -c plan_cache_mode=force_custom_plan", config.get_options().unwrap_or_default());
        config.options(options.trim());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("engage-postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError(format!("cannot start the PostgreSQL runtime: {e}")))?;
        let manager =
            Manager::from_config(config.clone(), NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_WAIT))
            .create_timeout(Some(CONNECT_WAIT))
            .recycle_timeout(Some(CONNECT_WAIT))
            .build()
            .map_err(|e| StoreError(format!("cannot make the PostgreSQL pool: {e}")))?;
        let mut name = [0u8; 8];
        getrandom::fill(&mut name).map_err(|e| StoreError(format!("no randomness: {e}")))?;
        let holder = name.iter().map(|b| format!("{b:02x}")).collect();
        let mut store = PgStore { pool, config, runtime: Some(runtime), counted: Default::default(), parts: 1, holder };
        store.block(schema::migrate(store.pool.clone(), parts))??;
        let pool = store.pool.clone();
        let parts: i64 = store.block(async move {
            let client = pool.get().await.map_err(pool_err)?;
            Ok::<i64, StoreError>(
                client.query_one("SELECT count(*) FROM queue_parts", &[]).await.map_err(store_err)?.get(0),
            )
        })??;
        store.parts =
            u16::try_from(parts).ok().filter(|&p| p > 0).ok_or_else(|| StoreError("queue_parts is empty".into()))?;
        Ok(store)
    }

    /// Takes the advisory lock `key` on a new connection, unless another session
    /// holds it (`None`).
    pub fn try_lease(&self, key: i64) -> Result<Option<Lease>, StoreError> {
        let config = self.config.clone();
        self.block(async move {
            let (client, conn) = tokio::time::timeout(CONNECT_WAIT, config.connect(NoTls))
                .await
                .map_err(|_| StoreError("PostgreSQL: no connection in time".into()))?
                .map_err(store_err)?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let held: bool =
                client.query_one("SELECT pg_try_advisory_lock($1)", &[&key]).await.map_err(store_err)?.get(0);
            Ok(held.then(|| Lease { client: std::sync::Arc::new(client) }))
        })?
    }

    /// True while `lease`'s connection (and with it the lock) is alive.
    pub fn still_held(&self, lease: &Lease) -> bool {
        let client = lease.client.clone();
        let alive = self.block(async move {
            tokio::time::timeout(CONNECT_WAIT, client.simple_query("SELECT 1")).await.is_ok_and(|r| r.is_ok())
        });
        alive.unwrap_or(false)
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().unwrap_or_else(|| unreachable!("the runtime lives as long as the store"))
    }

    /// Runs `work` on the store's runtime; the returned future only waits for it.
    fn spawn<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> {
        let handle = self.rt().spawn(work);
        async move { handle.await.map_err(|e| StoreError(format!("PostgreSQL call failed: {e}")))? }
    }

    /// Runs `work` to its end from a thread outside any runtime.
    fn block<T: Send + 'static>(&self, work: impl Future<Output = T> + Send + 'static) -> Result<T, StoreError> {
        self.rt().block_on(self.rt().spawn(work)).map_err(|e| StoreError(format!("PostgreSQL call failed: {e}")))
    }
}

/// The conflict a failed expectation is, or the store's error.
enum Failed {
    Conflict,
    Store(StoreError),
}

impl From<tokio_postgres::Error> for Failed {
    fn from(e: tokio_postgres::Error) -> Failed {
        // Two servers locking the same documents in another order, or a stricter
        // isolation level refusing a write: the unit of work runs again.
        let lost_race = e.code().is_some_and(|c| {
            *c == tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED
                || *c == tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
        });
        if lost_race {
            Failed::Conflict
        } else {
            Failed::Store(store_err(e))
        }
    }
}

async fn commit_in(pool: Pool, changes: ChangeSet) -> Result<Result<(), CommitError>, StoreError> {
    let mut client = pool.get().await.map_err(pool_err)?;
    let tx = client.transaction().await.map_err(store_err)?;
    // The acknowledgement goes in the same round trip as the writes (statements on
    // one connection are sent one after the other without waiting): a partition's
    // jobs through `through` are deleted and its cursor moved. Another applier that
    // took them first deleted them: fewer are found, a conflict. Their rows stay
    // locked until the commit, one round trip later.
    let acked = async {
        let Some(ack) = changes.ack else { return Ok(true) };
        let st = tx
            .prepare_cached(
                "WITH gone AS (DELETE FROM queue WHERE part = $1 AND seq <= $2 RETURNING 1),
                      moved AS (UPDATE queue_parts SET applied = GREATEST(applied, $2) WHERE part = $1)
                 SELECT count(*) FROM gone",
            )
            .await?;
        let deleted: i64 = tx.query_one(&st, &[&i32::from(ack.part), &(ack.through as i64)]).await?.get(0);
        Ok::<_, tokio_postgres::Error>(deleted as u64 == ack.count)
    };
    let (written, acked) = futures_util::future::join(write(&tx, &changes.ops), acked).await;
    match written {
        Ok(()) => {}
        // Dropping `tx` rolls back.
        Err(Failed::Conflict) => return Ok(Err(CommitError::Conflict)),
        Err(Failed::Store(e)) => return Err(e),
    }
    match acked {
        Ok(true) => {}
        Ok(false) => return Ok(Err(CommitError::Conflict)),
        Err(e) => match Failed::from(e) {
            Failed::Conflict => return Ok(Err(CommitError::Conflict)),
            Failed::Store(e) => return Err(e),
        },
    }
    tx.commit().await.map_err(store_err)?;
    Ok(Ok(()))
}

impl Store for PgStore {
    async fn get(&self, table: Table, key: &str) -> Result<Option<Entry>, StoreError> {
        let (pool, key) = (self.pool.clone(), key.to_string());
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client
                .prepare_cached("SELECT version, value FROM docs WHERE tbl = $1 AND key = $2")
                .await
                .map_err(store_err)?;
            let row = client.query_opt(&st, &[&(table.id() as i32), &key]).await.map_err(store_err)?;
            Ok(row.map(|r| entry(r.get(0), r.get(1))))
        })
        .await
    }

    async fn scan(&self, table: Table, prefix: &str, limit: usize) -> Result<Vec<(String, Entry)>, StoreError> {
        let range = KeyRange::prefix(prefix, limit);
        let pool = self.pool.clone();
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client
                .prepare_cached(
                    "SELECT key, version, value FROM docs WHERE tbl = $1 AND key >= $2 AND key < $3 ORDER BY key LIMIT $4",
                )
                .await
                .map_err(store_err)?;
            let limit = i64::try_from(range.limit).unwrap_or(i64::MAX);
            let rows = client
                .query(&st, &[&(table.id() as i32), &range.start, &range.end, &limit])
                .await
                .map_err(store_err)?;
            Ok(rows
                .into_iter()
                .map(|r| (r.get::<_, String>(0), entry(r.get(1), r.get(2))))
                .filter(|(k, _)| range.contains(k))
                .collect())
        })
        .await
    }

    async fn get_many(&self, table: Table, keys: &[String]) -> Result<Vec<Option<Entry>>, StoreError> {
        let (pool, keys) = (self.pool.clone(), keys.to_vec());
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client
                // One index lookup per key, whatever the planner thinks of the table: with
                // `key = ANY($2)` it chose to scan all of a fast-growing `docs` while its
                // statistics still described it small (seconds a batch).
                .prepare_cached(
                    "SELECT d.key, d.version, d.value FROM unnest($2::text[]) AS k(key),
                     LATERAL (SELECT key, version, value FROM docs WHERE tbl = $1 AND key = k.key) AS d",
                )
                .await
                .map_err(store_err)?;
            let rows = client.query(&st, &[&(table.id() as i32), &keys]).await.map_err(store_err)?;
            let found: std::collections::HashMap<String, Entry> =
                rows.into_iter().map(|r| (r.get::<_, String>(0), entry(r.get(1), r.get(2)))).collect();
            // A key asked twice is answered twice.
            Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
        })
        .await
    }

    async fn commit(&self, changes: ChangeSet) -> Result<(), CommitError> {
        match self.spawn(commit_in(self.pool.clone(), changes)).await {
            Ok(outcome) => outcome,
            Err(e) => Err(CommitError::Store(e)),
        }
    }

    /// Servers of two versions may share the queue during an upgrade: JSON, which
    /// every version reads.
    fn queues_json(&self) -> bool {
        true
    }

    async fn enqueue(&self, job: Vec<u8>) -> Result<u64, StoreError> {
        let seqs = self.enqueue_parts(engage_core::queue::split_record(job, self.parts, true)).await?;
        seqs.last().copied().ok_or_else(|| StoreError("nothing was queued".into()))
    }

    fn partitions(&self) -> u16 {
        self.parts
    }

    async fn enqueue_parts(&self, jobs: Vec<PartJob>) -> Result<Vec<u64>, StoreError> {
        if jobs.iter().any(|j| j.part >= self.parts) {
            return Err(StoreError("no such partition of the queue".into()));
        }
        let pool = self.pool.clone();
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client.prepare_cached(write::ENQUEUE).await.map_err(store_err)?;
            let rows = client.query(&st, &write::enqueued(jobs).params()).await.map_err(store_err)?;
            let mut seqs: Vec<u64> = rows.into_iter().map(|r| r.get::<_, i64>(0) as u64).collect();
            seqs.sort_unstable();
            Ok(seqs)
        })
        .await
    }

    async fn queued(&self, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        let pool = self.pool.clone();
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client
                .prepare_cached("SELECT seq, part, job FROM queue WHERE seq > $1 ORDER BY seq LIMIT $2")
                .await
                .map_err(store_err)?;
            let (after, limit) = (i64::try_from(after).unwrap_or(i64::MAX), i64::try_from(limit).unwrap_or(i64::MAX));
            let rows = client.query(&st, &[&after, &limit]).await.map_err(store_err)?;
            Ok(rows.into_iter().map(job_row).collect())
        })
        .await
    }

    /// Applied jobs are deleted, so any row is a queued job; none is read.
    async fn nothing_queued(&self) -> Result<bool, StoreError> {
        let pool = self.pool.clone();
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client.prepare_cached("SELECT EXISTS (SELECT 1 FROM queue)").await.map_err(store_err)?;
            let any: bool = client.query_one(&st, &[]).await.map_err(store_err)?.get(0);
            Ok(!any)
        })
        .await
    }

    async fn queued_at(&self, seqs: &[u64]) -> Result<Vec<QueuedJob>, StoreError> {
        let (pool, seqs) = (self.pool.clone(), seqs.iter().map(|s| *s as i64).collect::<Vec<i64>>());
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client
                .prepare_cached("SELECT seq, part, job FROM queue WHERE seq = ANY($1) ORDER BY seq")
                .await
                .map_err(store_err)?;
            Ok(client.query(&st, &[&seqs]).await.map_err(store_err)?.into_iter().map(job_row).collect())
        })
        .await
    }

    fn finds_by_name(&self) -> bool {
        true
    }

    async fn queued_naming(&self, names: &[i64]) -> Result<Vec<QueuedJob>, StoreError> {
        let (pool, names) = (self.pool.clone(), names.to_vec());
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            // The index of names, and the few jobs without (queued before names were).
            let st = client
                .prepare_cached(
                    "SELECT seq, part, job FROM queue WHERE names && $1::bigint[]
                     UNION ALL SELECT seq, part, job FROM queue WHERE names IS NULL
                     ORDER BY 1",
                )
                .await
                .map_err(store_err)?;
            let rows = client.query(&st, &[&names]).await.map_err(store_err)?;
            Ok(rows.into_iter().map(job_row).collect())
        })
        .await
    }

    async fn busy_partitions(&self, among: &[u16]) -> Result<Vec<u16>, StoreError> {
        let (pool, among) = (self.pool.clone(), among.iter().map(|p| i32::from(*p)).collect::<Vec<i32>>());
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            // One index probe a partition, past its cursor, in one round trip.
            let st = client
                .prepare_cached(
                    "SELECT c.part FROM queue_parts c WHERE c.part = ANY($1)
                     AND EXISTS (SELECT 1 FROM queue q WHERE q.part = c.part AND q.seq > c.applied) ORDER BY c.part",
                )
                .await
                .map_err(store_err)?;
            let rows = client.query(&st, &[&among]).await.map_err(store_err)?;
            Ok(rows.iter().map(|r| r.get::<_, i32>(0) as u16).collect())
        })
        .await
    }

    async fn queued_in(&self, part: u16, after: u64, limit: usize) -> Result<Vec<QueuedJob>, StoreError> {
        let pool = self.pool.clone();
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            // From the partition's cursor: the index skips what was applied and deleted.
            let st = client
                .prepare_cached(
                    "SELECT q.seq, q.part, q.job FROM queue q, queue_parts c
                     WHERE c.part = $1 AND q.part = $1 AND q.seq > GREATEST($2, c.applied) ORDER BY q.seq LIMIT $3",
                )
                .await
                .map_err(store_err)?;
            let (after, limit) = (i64::try_from(after).unwrap_or(i64::MAX), i64::try_from(limit).unwrap_or(i64::MAX));
            let rows = client.query(&st, &[&i32::from(part), &after, &limit]).await.map_err(store_err)?;
            Ok(rows.into_iter().map(job_row).collect())
        })
        .await
    }

    async fn lease_partitions(&self) -> Result<Vec<u16>, StoreError> {
        let (pool, holder, parts) = (self.pool.clone(), self.holder.clone(), i64::from(self.parts));
        self.spawn(async move {
            let mut client = pool.get().await.map_err(pool_err)?;
            let tx = client.transaction().await.map_err(store_err)?;
            leases::renew(&tx, &holder, parts, LEASE_SECS).await.map_err(store_err)?;
            let held = leases::held(&tx, &holder).await.map_err(store_err)?;
            tx.commit().await.map_err(store_err)?;
            Ok(held)
        })
        .await
    }

    async fn release_partitions(&self) -> Result<(), StoreError> {
        let (pool, holder) = (self.pool.clone(), self.holder.clone());
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            leases::release(&client, &holder).await.map_err(store_err)
        })
        .await
    }

    async fn applied_cursors(&self) -> Result<Option<Vec<u64>>, StoreError> {
        let pool = self.pool.clone();
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client.prepare_cached("SELECT applied FROM queue_parts ORDER BY part").await.map_err(store_err)?;
            let rows = client.query(&st, &[]).await.map_err(store_err)?;
            Ok(Some(rows.into_iter().map(|r| r.get::<_, i64>(0) as u64).collect()))
        })
        .await
    }

    async fn queued_count(&self) -> Result<Option<u64>, StoreError> {
        if self.parts <= 1 {
            return Ok(None);
        }
        let pool = self.pool.clone();
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let n: i64 = client.query_one("SELECT count(*) FROM queue", &[]).await.map_err(store_err)?.get(0);
            Ok(Some(n as u64))
        })
        .await
    }

    async fn contended(&self, attempt: u32) {
        // Up to 1, 2, 4 ... 64 ms, at random: writers of one document on several
        // servers (or many requests of one) spread out and take turns.
        let ceiling = 1u64 << attempt.min(6);
        let mut r = [0u8; 8];
        let _ = getrandom::fill(&mut r);
        let wait = Duration::from_micros(u64::from_le_bytes(r) % (ceiling * 1000));
        let _ = self
            .spawn(async move {
                tokio::time::sleep(wait).await;
                Ok(())
            })
            .await;
    }

    async fn count_in_window(&self, key: &str, start: i64, expires: i64) -> Result<Option<u64>, StoreError> {
        let (pool, key) = (self.pool.clone(), key.to_string());
        let sweep = self.counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed).is_multiple_of(SWEEP_EVERY);
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            if sweep {
                client.execute("DELETE FROM rate_windows WHERE expires < $1", &[&start]).await.map_err(store_err)?;
            }
            let st = client
                .prepare_cached(
                    "INSERT INTO rate_windows (key, start, n, expires) VALUES ($1, $2, 1, $3)
                     ON CONFLICT (key, start) DO UPDATE SET n = rate_windows.n + 1 RETURNING n",
                )
                .await
                .map_err(store_err)?;
            let n: i64 = client.query_one(&st, &[&key, &start, &expires]).await.map_err(store_err)?.get(0);
            Ok(Some(n as u64))
        })
        .await
    }

    async fn queue_tail(&self) -> Result<u64, StoreError> {
        let pool = self.pool.clone();
        self.spawn(async move {
            let client = pool.get().await.map_err(pool_err)?;
            let st = client.prepare_cached("SELECT tail FROM queue_tail WHERE id = 1").await.map_err(store_err)?;
            let row = client.query_one(&st, &[]).await.map_err(store_err)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
        .await
    }
}

#[cfg(test)]
mod tests;
