//! Migrations of the PostgreSQL store: `migrations/postgres/`, applied in order at
//! start under an advisory lock (servers starting together apply each once), each
//! recorded in `engage_migrations`.

use deadpool_postgres::Pool;
use engage_core::store::StoreError;

use super::{pool_err, store_err};

/// The migrations, in order (`0001_init` is `migrations/` 0001 and 0002 of SQLite and
/// D1; later ones are PostgreSQL's own).
pub const MIGRATIONS: [(&str, &str); 4] = [
    ("0001_init", include_str!("../../../../migrations/postgres/0001_init.sql")),
    ("0002_rate_windows", include_str!("../../../../migrations/postgres/0002_rate_windows.sql")),
    ("0003_queue_partitions", include_str!("../../../../migrations/postgres/0003_queue_partitions.sql")),
    ("0004_queue_names", include_str!("../../../../migrations/postgres/0004_queue_names.sql")),
];

/// Jobs moved at a time while the queue is split into partitions.
const SPLIT_CHUNK: i64 = 1000;

/// The advisory lock key of migrating (any fixed number; "engage" in ASCII).
const MIGRATION_LOCK: i64 = 0x656e_6761_6765;

/// Partitions a database gets when it is made, unless `ENGAGE_QUEUE_PARTITIONS` says.
pub const DEFAULT_PARTITIONS: u16 = 64;

/// Most partitions a database may have.
pub const MAX_PARTITIONS: u16 = 1024;

/// The partitions a new database gets: `ENGAGE_QUEUE_PARTITIONS` (1 to 1024), or 64.
pub fn partitions_wanted() -> Result<u16, StoreError> {
    match std::env::var("ENGAGE_QUEUE_PARTITIONS") {
        Err(_) => Ok(DEFAULT_PARTITIONS),
        Ok(n) => n.trim().parse().ok().filter(|n| (1..=MAX_PARTITIONS).contains(n)).ok_or_else(|| {
            StoreError(format!("ENGAGE_QUEUE_PARTITIONS must be a number from 1 to {MAX_PARTITIONS}, not {n:?}"))
        }),
    }
}

/// Applies the migrations `pool`'s database lacks.
/// `parts`: the partitions of the queue, if this makes them.
pub async fn migrate(pool: Pool, parts: u16) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(pool_err)?;
    let tx = client.transaction().await.map_err(store_err)?;
    // Held until this transaction ends: one server migrates at a time.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(store_err)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS engage_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        .await
        .map_err(store_err)?;
    let mut split = false;
    for (name, sql) in MIGRATIONS {
        let done =
            tx.query_opt("SELECT 1 FROM engage_migrations WHERE name = $1", &[&name]).await.map_err(store_err)?;
        if done.is_none() {
            tx.batch_execute(sql).await.map_err(store_err)?;
            split |= name == "0003_queue_partitions";
            tx.execute("INSERT INTO engage_migrations (name) VALUES ($1)", &[&name]).await.map_err(store_err)?;
        }
    }
    // After every migration, so that the jobs are queued as this version queues them.
    if split {
        split_queue(&tx, parts).await.map_err(store_err)?;
    }
    tx.commit().await.map_err(store_err)
}

/// Moves the jobs of the one queue into partitions, in queue order: each job is
/// split into the jobs of the partitions its users are in (as a request is at
/// acknowledgement), numbered after every job so far, so that each partition keeps
/// the order they were acknowledged in. Nothing of a job is applied yet: the one
/// cursor's jobs at or below it were applied and deleted by the appliers.
async fn split_queue(tx: &deadpool_postgres::Transaction<'_>, parts: u16) -> Result<(), tokio_postgres::Error> {
    tx.execute(
        "INSERT INTO queue_parts (part, applied) SELECT g, 0 FROM generate_series(0, $1 - 1) AS g",
        &[&i32::from(parts)],
    )
    .await?;
    let applied: i64 = tx.query_one("SELECT applied FROM queue_cursor WHERE id = 1", &[]).await?.get(0);
    tx.execute("DELETE FROM queue WHERE seq <= $1", &[&applied]).await?;
    tx.execute("UPDATE queue_parts SET applied = $1", &[&applied]).await?;
    let mut after = applied;
    loop {
        let rows = tx
            .query(
                "SELECT seq, job FROM queue WHERE part IS NULL AND seq > $1 ORDER BY seq LIMIT $2",
                &[&after, &SPLIT_CHUNK],
            )
            .await?;
        let Some(last) = rows.last().map(|r| r.get::<_, i64>(0)) else { break };
        // PostgreSQL's queue holds JSON records (`Store::queues_json`).
        let jobs: Vec<_> =
            rows.iter().flat_map(|row| engage_core::queue::split_record(row.get(1), parts, true)).collect();
        tx.execute("DELETE FROM queue WHERE part IS NULL AND seq > $1 AND seq <= $2", &[&after, &last]).await?;
        tx.execute(super::write::ENQUEUE, &super::write::enqueued(jobs).params()).await?;
        after = last;
    }
    tx.batch_execute("ALTER TABLE queue ALTER COLUMN part SET NOT NULL; DROP TABLE queue_cursor;").await
}
