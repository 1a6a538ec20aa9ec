//! Migrations of the PostgreSQL store: `migrations/postgres/`, applied in order at
//! start under an advisory lock (servers starting together apply each once), each
//! recorded in `engage_migrations`.

use deadpool_postgres::Pool;
use engage_core::store::StoreError;

use super::{pool_err, store_err};

/// The migrations, in order (`0001_init` is `migrations/` 0001 and 0002 of SQLite and
/// D1; later ones are PostgreSQL's own).
pub const MIGRATIONS: [(&str, &str); 2] = [
    ("0001_init", include_str!("../../../../migrations/postgres/0001_init.sql")),
    ("0002_rate_windows", include_str!("../../../../migrations/postgres/0002_rate_windows.sql")),
];

/// The advisory lock key of migrating (any fixed number; "engage" in ASCII).
const MIGRATION_LOCK: i64 = 0x656e_6761_6765;

/// Applies the migrations `pool`'s database lacks.
pub async fn migrate(pool: Pool) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(pool_err)?;
    let tx = client.transaction().await.map_err(store_err)?;
    // Held until this transaction ends: one server migrates at a time.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(store_err)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS engage_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        .await
        .map_err(store_err)?;
    for (name, sql) in MIGRATIONS {
        let done =
            tx.query_opt("SELECT 1 FROM engage_migrations WHERE name = $1", &[&name]).await.map_err(store_err)?;
        if done.is_none() {
            tx.batch_execute(sql).await.map_err(store_err)?;
            tx.execute("INSERT INTO engage_migrations (name) VALUES ($1)", &[&name]).await.map_err(store_err)?;
        }
    }
    tx.commit().await.map_err(store_err)
}
