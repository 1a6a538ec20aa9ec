//! PostgreSQL tables (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`), and what
//! speaks its protocol (Redshift), through the tokio-postgres driver on a runtime
//! of the job's own. Unquoted PostgreSQL names are lower case: the table and its
//! columns are matched without regard to case.

use std::pin::pin;

use engage_core::warehouse::Cursor;
use engage_core::Timestamp;
use futures_util::StreamExt;
use tokio::runtime::Runtime;
use tokio_postgres::{Client, NoTls};

use super::{quoted, Columns, Source, SourceError};
use crate::store::postgres::reason;

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

/// The URL without its `password_env=NAME` parameter, and NAME: the environment
/// variable the password is read from when connecting, so that it is not stored
/// with the integration.
fn password_env(source: &str) -> (String, Option<String>) {
    let Some((base, query)) = source.split_once('?') else { return (source.to_string(), None) };
    let mut var = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("password_env=") {
            Some(name) => {
                var = Some(name.to_string());
                false
            }
            None => true,
        })
        .collect();
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    (url, var)
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
        let (url, password_env) = password_env(source);
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|_| SourceError::Config("the postgres:// URL is not valid".into()))?;
        if let Some(var) = password_env {
            let password = std::env::var(&var).map_err(|_| {
                SourceError::Config(format!("the password variable {var} is not set in the server's environment"))
            })?;
            config.password(password);
        }
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
        // A `timestamp` without time zone is UTC, also where it meets the cursor.
        runtime
            .block_on(timed(client.batch_execute("SET TIME ZONE 'UTC'")))?
            .map_err(|e| SourceError::Config(format!("cannot set the session's time zone: {}", reason(&e))))?;
        Ok(PostgresSource { runtime, client, found: None })
    }
}

/// The query of the rows after a cursor (`$1`, text: a time, or `-infinity`), oldest
/// first: it compares and orders by the `UPDATED_AT` column itself, so an index on
/// it (`CREATE INDEX ON table ("UPDATED_AT")`) serves an incremental job. `infinity`
/// and `-infinity` have no place on the cursor and are not read (they failed every
/// job).
///
/// Rows of one time are ordered by their other columns as text (bytes, nulls
/// first), the order of [`engage_core::warehouse::Within`]. `resuming`: the cursor
/// is inside a group, and the rows from its place on are read (`$2` its exact time,
/// `$3` to `$9` its seven columns).
pub fn incremental_sql(schema: &str, name: &str, columns: &Columns, resuming: bool) -> String {
    let col = |i: usize| {
        columns.names[i].as_deref().map(|c| format!("{}::text", quoted(c))).unwrap_or_else(|| "NULL::text".into())
    };
    let ts = columns.names[0].as_deref().map(quoted).unwrap_or_default();
    // Milliseconds since the epoch, rounded down: the cursor's unit.
    let key = format!("floor(extract(epoch from {ts}) * 1000)::bigint");
    let rest: Vec<String> = (1..8).map(col).collect();
    let order: Vec<String> = rest.iter().map(|c| format!("{c} COLLATE \"C\" NULLS FIRST")).collect();
    let place = if resuming {
        // A null sorts first: each column compares as (not null, text).
        let pair = |c: &str| format!("{c} IS NOT NULL, COALESCE({c}, '') COLLATE \"C\"");
        let mine: Vec<String> = rest.iter().map(|c| pair(c)).collect();
        let theirs: Vec<String> = (3..10).map(|n| pair(&format!("${n}::text"))).collect();
        format!(" AND ROW({ts}, {}) >= ROW($2::text::timestamptz, {})", mine.join(", "), theirs.join(", "))
    } else {
        String::new()
    };
    format!(
        "SELECT {key} AS k, {ts}::text, {} FROM {}.{} \
         WHERE {ts} >= $1::text::timestamptz AND {ts} > '-infinity' AND {ts} < 'infinity'{place} \
         ORDER BY {ts}, {}",
        rest.join(", "),
        quoted(schema),
        quoted(name),
        order.join(", ")
    )
}

/// The rows without a time on the cursor (NULL, ±infinity), each column as text. Said
/// as equalities, which an index on the time column answers (`NOT isfinite(ts)` made
/// every job read the whole table).
pub fn unreadable_sql(schema: &str, name: &str, columns: &Columns) -> String {
    let ts = columns.names[0].as_deref().map(quoted).unwrap_or_default();
    let rest: Vec<String> = (1..8)
        .map(|i| columns.names[i].as_deref().map(|c| format!("{}::text", quoted(c))).unwrap_or("NULL::text".into()))
        .collect();
    format!(
        "SELECT {ts}::text, {} FROM {}.{} WHERE {ts} IS NULL OR {ts} = 'infinity' OR {ts} = '-infinity'",
        rest.join(", "),
        quoted(schema),
        quoted(name)
    )
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
        after: Option<&Cursor>,
        each: &mut dyn FnMut(super::Read) -> Result<(), String>,
    ) -> Result<(), SourceError> {
        let (schema, name) = match &self.found {
            Some(found) => found.clone(),
            None => {
                self.columns(table)?;
                self.found.clone().unwrap_or_default()
            }
        };
        let within = after.and_then(|c| c.within.as_ref());
        let sql = incremental_sql(&schema, &name, columns, within.is_some());
        // Rows at least a millisecond after the cursor (the same rows as a key, in
        // milliseconds rounded down, greater than the cursor's), or from its
        // millisecond on when it stands inside a group; compared on the column
        // itself so that an index on it is used.
        let from = match after {
            None => "-infinity".to_string(),
            Some(c) if c.within.is_some() => c.updated_at.to_rfc3339(),
            Some(c) => Timestamp(c.updated_at.0.saturating_add(1)).to_rfc3339(),
        };
        let mut params: Vec<Option<String>> = vec![Some(from)];
        if let Some(w) = within {
            params.extend(w.tie.iter().cloned());
        }
        let runtime = &self.runtime;
        let client = &self.client;
        runtime.block_on(async {
            // A query that cannot start (a column of the wrong type, no access) is the
            // integration's configuration; a failure while reading is the job's.
            // Rows without a time on the cursor first (NULL, ±infinity): they fail.
            let odd = unreadable_sql(&schema, &name, columns);
            let unreadable = timed(client.query(&odd, &[]))
                .await?
                .map_err(|e| SourceError::Config(format!("cannot read the table: {}", reason(&e))))?;
            for r in unreadable {
                let mut values: [Option<String>; 7] = Default::default();
                for (i, v) in values.iter_mut().enumerate() {
                    *v = r.try_get(i + 1).map_err(read)?;
                }
                let raw: Option<String> = r.try_get(0).map_err(read)?;
                each(super::read(None, raw, values)).map_err(SourceError::Read)?;
            }
            let stream = timed(client.query_raw(&sql, params))
                .await?
                .map_err(|e| SourceError::Config(format!("cannot read the table: {}", reason(&e))))?;
            let mut stream = pin!(stream);
            while let Some(r) = timed(stream.next()).await? {
                let r = r.map_err(read)?;
                let mut values: [Option<String>; 7] = Default::default();
                for (i, v) in values.iter_mut().enumerate() {
                    *v = r.try_get(i + 2).map_err(read)?;
                }
                let key: i64 = r.try_get(0).map_err(read)?;
                let exact: Option<String> = r.try_get(1).map_err(read)?;
                each(super::read(Some(key), exact, values)).map_err(SourceError::Read)?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test server's URL (tests/run.sh starts one; CI must have it).
    fn url() -> Option<String> {
        let url = std::env::var("ENGAGE_TEST_POSTGRES_URL").ok();
        assert!(url.is_some() || std::env::var("CI").is_err(), "CI must run this: set ENGAGE_TEST_POSTGRES_URL");
        url
    }

    #[test]
    fn a_password_can_come_from_the_server_s_environment() {
        assert_eq!(password_env("postgres://u@h/db"), ("postgres://u@h/db".into(), None));
        assert_eq!(
            password_env("postgres://u@h/db?password_env=WH_PASS&sslmode=disable"),
            ("postgres://u@h/db?sslmode=disable".into(), Some("WH_PASS".into()))
        );
        let Some(url) = url() else { return };
        let named = format!("{url}?password_env=ENGAGE_TEST_UNSET_PASSWORD_VARIABLE");
        let Err(SourceError::Config(why)) = PostgresSource::open(&named) else { panic!("refused") };
        assert!(why.contains("ENGAGE_TEST_UNSET_PASSWORD_VARIABLE is not set"), "{why}");
        // The test server trusts loopback: any password from the variable logs in.
        let named = format!("{url}?password_env=PATH");
        assert!(PostgresSource::open(&named).is_ok());
    }

    /// The planner's plan for `sql`, one line a step.
    fn explain(source: &mut PostgresSource, sql: &str) -> String {
        let rows = source.runtime.block_on(source.client.query(&format!("EXPLAIN {sql}"), &[])).unwrap();
        rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn an_incremental_job_reads_through_an_index_on_updated_at() {
        let Some(url) = url() else { return };
        let mut source = PostgresSource::open(&url).unwrap();
        let table = format!("plan_{}", std::process::id());
        let setup = format!(
            "DROP TABLE IF EXISTS {table}; \
             CREATE TABLE {table} (\"UPDATED_AT\" timestamp, \"EXTERNAL_ID\" text, \"PAYLOAD\" text); \
             INSERT INTO {table} SELECT timestamp '2024-01-01' + n * interval '1 second', 'u' || n, '{{}}' \
               FROM generate_series(1, 20000) AS n; \
             INSERT INTO {table} VALUES ('infinity', 'forever', '{{}}'), ('-infinity', 'never', '{{}}'), (NULL, 'none', '{{}}'); \
             CREATE INDEX ON {table} (\"UPDATED_AT\"); ANALYZE {table};"
        );
        source.runtime.block_on(source.client.batch_execute(&setup)).unwrap();
        let columns =
            Columns::check(&source.columns(&table).unwrap(), engage_core::warehouse::DataKind::Users).unwrap();
        let (schema, name) = source.found.clone().unwrap();
        // Both after a time, and from a place inside a group of one time.
        for resuming in [false, true] {
            let mut sql = incremental_sql(&schema, &name, &columns, resuming);
            for n in (3..10).rev() {
                sql = sql.replace(&format!("${n}::text"), "'u1'::text");
            }
            let sql = sql
                .replace("$2::text", "'2024-01-01T05:30:00Z'::text")
                .replace("$1::text", "'2024-01-01T05:30:00.001Z'::text");
            let plan = explain(&mut source, &sql);
            assert!(plan.contains("Index"), "the index on UPDATED_AT is used (resuming: {resuming}):\n{plan}");
        }
        // The rows without a time are found through the index too, not by reading the table.
        let plan = explain(&mut source, &unreadable_sql(&schema, &name, &columns));
        assert!(plan.contains("Index") && !plan.contains("Seq Scan"), "{plan}");
        // The rows after a cursor, oldest first, the infinities left out, none twice.
        let (mut seen, mut unreadable) = (Vec::new(), Vec::new());
        let after = Cursor { updated_at: Timestamp::parse("2024-01-01T03:19:59Z").unwrap(), within: None };
        source
            .rows_after(&table, &columns, Some(&after), &mut |r| {
                match r {
                    super::super::Read::Row(r) => seen.push(r.external_id.unwrap()),
                    super::super::Read::Unreadable(raw, _) => unreadable.push(raw),
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(seen.len(), 20000 - 11999, "{:?}", &seen[..3]);
        assert_eq!((seen[0].as_str(), seen.last().map(String::as_str)), ("u12000", Some("u20000")));
        unreadable.sort();
        assert_eq!(unreadable, [None, Some("-infinity".to_string()), Some("infinity".to_string())]);
        source.runtime.block_on(source.client.batch_execute(&format!("DROP TABLE {table}"))).unwrap();
    }
}
