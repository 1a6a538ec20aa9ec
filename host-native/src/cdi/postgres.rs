//! PostgreSQL tables (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`), and what
//! speaks its protocol (Redshift), through the tokio-postgres driver on a runtime
//! of the job's own. Unquoted PostgreSQL names are lower case: the table and its
//! columns are matched without regard to case.

use std::pin::pin;

use engage_core::warehouse::Row;
use engage_core::Timestamp;
use futures_util::StreamExt;
use tokio::runtime::Runtime;
use tokio_postgres::{Client, NoTls};

use super::{quoted, Columns, Source, SourceError};

/// A PostgreSQL database read as a warehouse.
pub struct PostgresSource {
    runtime: Runtime,
    client: Client,
    /// The table's schema and name as the database spells them (after `columns`).
    found: Option<(String, String)>,
}

fn read(e: tokio_postgres::Error) -> SourceError {
    SourceError::Read(reason(&e))
}

/// What PostgreSQL said (its message and SQLSTATE), or what failed on the way to it:
/// the driver's own text for a server's error is only "db error". Never the URL,
/// which may carry the password.
fn reason(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

/// A step of reading that must not take longer than [`super::READ_TIMEOUT`].
async fn timed<T>(step: impl std::future::Future<Output = T>) -> Result<T, SourceError> {
    tokio::time::timeout(super::READ_TIMEOUT, step)
        .await
        .map_err(|_| SourceError::Read("PostgreSQL went silent while the job read it".into()))
}

impl PostgresSource {
    /// Connects; an unreachable server or refused login is a configuration error.
    pub fn open(source: &str) -> Result<PostgresSource, SourceError> {
        // Never put the URL in a message: it may carry a password.
        let mut config: tokio_postgres::Config =
            source.parse().map_err(|_| SourceError::Config("the postgres:// URL is not valid".into()))?;
        config.connect_timeout(super::CONNECT_TIMEOUT);
        config.keepalives_idle(std::time::Duration::from_secs(30));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SourceError::Read(format!("cannot start a runtime: {e}")))?;
        // The connect timeout covers TCP only: the whole login is bounded too.
        let (client, connection) = runtime
            .block_on(async { tokio::time::timeout(super::CONNECT_TIMEOUT, config.connect(NoTls)).await })
            .map_err(|_| SourceError::Config("PostgreSQL did not answer the login in time".into()))?
            .map_err(|e| SourceError::Config(format!("cannot connect to PostgreSQL: {}", reason(&e))))?;
        runtime.spawn(async move {
            let _ = connection.await;
        });
        Ok(PostgresSource { runtime, client, found: None })
    }
}

impl Source for PostgresSource {
    fn columns(&mut self, table: &str) -> Result<Vec<String>, SourceError> {
        let (schema, name) = match table.split_once('.') {
            Some((s, n)) => (Some(s.to_string()), n.to_string()),
            None => (None, table.to_string()),
        };
        let client = &self.client;
        let rows = self
            .runtime
            .block_on(timed(client.query(
                "SELECT table_schema, table_name, column_name FROM information_schema.columns \
                 WHERE lower(table_name) = lower($2) \
                   AND (($1::text IS NULL AND table_schema = current_schema()) OR lower(table_schema) = lower($1::text)) \
                 ORDER BY ordinal_position",
                &[&schema, &name],
            )))?
            .map_err(|e| SourceError::Config(format!("cannot read the table's columns: {}", reason(&e))))?;
        let Some(first) = rows.first() else {
            return Err(SourceError::Config(format!("no table '{table}' in the PostgreSQL database")));
        };
        self.found = Some((first.get(0), first.get(1)));
        Ok(rows.iter().map(|r| r.get::<_, String>(2)).collect())
    }

    fn rows_after(
        &mut self,
        table: &str,
        columns: &Columns,
        after: Option<Timestamp>,
        each: &mut dyn FnMut(Row) -> Result<(), String>,
    ) -> Result<(), SourceError> {
        let (schema, name) = match &self.found {
            Some(found) => found.clone(),
            None => {
                self.columns(table)?;
                self.found.clone().unwrap_or_default()
            }
        };
        let col = |i: usize| {
            columns.names[i].as_deref().map(|c| format!("{}::text", quoted(c))).unwrap_or_else(|| "NULL::text".into())
        };
        let ts = columns.names[0].as_deref().map(quoted).unwrap_or_default();
        // Milliseconds since the epoch (a timestamp without time zone read as UTC):
        // one key for ordering, comparing and the cursor. `infinity` has none (a cast
        // of it failed every job): such a row is not read.
        let key = format!("(CASE WHEN isfinite({ts}) THEN floor(extract(epoch from {ts}) * 1000)::bigint END)");
        let rest: Vec<String> = (1..8).map(col).collect();
        let sql = format!(
            "SELECT {key} AS k, {} FROM {}.{} WHERE {key} > $1 ORDER BY 1",
            rest.join(", "),
            quoted(&schema),
            quoted(&name)
        );
        let param = after.map_or(i64::MIN, |t| t.0);
        let runtime = &self.runtime;
        let client = &self.client;
        runtime.block_on(async {
            // A query that cannot start (a column of the wrong type, no access) is the
            // integration's configuration; a failure while reading is the job's.
            let stream = timed(client.query_raw(&sql, [param]))
                .await?
                .map_err(|e| SourceError::Config(format!("cannot read the table: {}", reason(&e))))?;
            let mut stream = pin!(stream);
            while let Some(r) = timed(stream.next()).await? {
                let r = r.map_err(read)?;
                let mut values: [Option<String>; 7] = Default::default();
                for (i, v) in values.iter_mut().enumerate() {
                    *v = r.try_get(i + 1).map_err(read)?;
                }
                let row = super::row(r.try_get::<_, i64>(0).map_err(read)?, values);
                each(row).map_err(SourceError::Read)?;
            }
            Ok(())
        })
    }
}
