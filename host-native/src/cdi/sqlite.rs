//! SQLite tables (`sqlite:PATH`), opened read-only. `UPDATED_AT` is ISO 8601 text
//! (a time zone, or UTC; `T` and `Z` in either case) or a number of seconds since
//! the epoch; a row whose `UPDATED_AT` is neither is read as unreadable.

use engage_core::warehouse::Cursor;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::{quoted, quoted_table, Columns, Source, SourceError};

/// A SQLite database read as a warehouse.
pub struct SqliteSource {
    conn: Connection,
}

fn read(e: rusqlite::Error) -> SourceError {
    SourceError::Read(e.to_string())
}

impl SqliteSource {
    /// Opens `sqlite:PATH` read-only; a missing file is a configuration error.
    pub fn open(source: &str) -> Result<SqliteSource, SourceError> {
        let path = source.strip_prefix("sqlite:").unwrap_or(source);
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(|e| SourceError::Config(format!("cannot open the SQLite database: {e}")))?;
        conn.busy_timeout(super::CONNECT_TIMEOUT).map_err(read)?;
        // The sorted query sorts the whole table before its first row (1.6-1.8 s for 1M
        // rows, while nothing else runs): a helper thread sorts beside it (1.4-1.6 s).
        conn.pragma_update(None, "threads", 1).map_err(read)?;
        Ok(SqliteSource { conn })
    }
}

fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    }
}

impl Source for SqliteSource {
    fn columns(&mut self, table: &str) -> Result<Vec<String>, SourceError> {
        let name = table.rsplit('.').next().unwrap_or(table);
        let config = |e: rusqlite::Error| SourceError::Config(format!("cannot read the SQLite database: {e}"));
        let mut stmt = self.conn.prepare("SELECT name FROM pragma_table_info(?1)").map_err(config)?;
        let names: Vec<String> =
            stmt.query_map([name], |r| r.get(0)).map_err(config)?.collect::<Result<_, _>>().map_err(config)?;
        if names.is_empty() {
            return Err(SourceError::Config(format!("no table '{table}' in the SQLite database")));
        }
        Ok(names)
    }

    fn rows_after(
        &mut self,
        table: &str,
        columns: &Columns,
        after: Option<&Cursor>,
        each: &mut dyn FnMut(super::Read) -> Result<(), String>,
    ) -> Result<(), SourceError> {
        let col = |i: usize| columns.names[i].as_deref().map(quoted).unwrap_or_else(|| "NULL".into());
        let ts = col(0);
        let key = time_key(&ts);
        // Every column as text: rows of one time are ordered by these (bytes, nulls
        // first), and a cursor's place is compared with them.
        let values: Vec<String> = (1..8).map(|i| format!("CAST({} AS TEXT) AS v{i}", col(i))).collect();
        let names: Vec<String> = (1..8).map(|i| format!("v{i}")).collect();
        let within = after.and_then(|c| c.within.as_ref());
        let place = if within.is_some() {
            // A null sorts first: each column compares as (not null, text).
            let pair = |c: &str| format!("{c} IS NOT NULL, COALESCE({c}, '')");
            let mine: Vec<String> = names.iter().map(|c| pair(c)).collect();
            let theirs: Vec<String> = (3..10).map(|n| pair(&format!("?{n}"))).collect();
            format!(" OR (k = ?1 AND (raw, {}) >= (?2, {}))", mine.join(", "), theirs.join(", "))
        } else {
            String::new()
        };
        // Rows whose time cannot be read (NULL keys) come first: SQLite orders NULL first.
        // `LIMIT -1` (no limit) keeps SQLite from flattening the subquery into the outer
        // one, which put the key's expression in every place `k` is named and computed
        // it three times a row: on a 1M-row table a sync's first write came at 3.6 s,
        // now at 2.6 s.
        let sql = format!(
            "SELECT k, raw, {} FROM (SELECT {key} AS k, CAST({ts} AS TEXT) AS raw, {} FROM {} LIMIT -1) \
             WHERE k > ?1 OR k IS NULL{place} ORDER BY k, raw, {}",
            names.join(", "),
            values.join(", "),
            quoted_table(table),
            names.join(", ")
        );
        let mut params: Vec<rusqlite::types::Value> = vec![after.map_or(i64::MIN, |c| c.updated_at.0).into()];
        if let Some(w) = within {
            params.extend(w.tie.iter().map(|v| v.clone().map_or(rusqlite::types::Value::Null, Into::into)));
        }
        // A query that cannot start (not a database, no access) is the integration's
        // configuration; a failure while reading is the job's.
        let config = |e: rusqlite::Error| SourceError::Config(e.to_string());
        let mut stmt = self.conn.prepare(&sql).map_err(config)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(params)).map_err(config)?;
        while let Some(r) = rows.next().map_err(read)? {
            let mut values: [Option<String>; 7] = Default::default();
            for (i, v) in values.iter_mut().enumerate() {
                *v = r.get_ref(i + 2).map(text).map_err(read)?;
            }
            let key: Option<i64> = r.get(0).map_err(read)?;
            let raw: Option<String> = r.get_ref(1).map(text).map_err(read)?;
            each(super::read(key, raw, values)).map_err(SourceError::Read)?;
        }
        Ok(())
    }
}

/// Milliseconds since the epoch of the column `ts`: one key for ordering, comparing and
/// the cursor. Numbers (also written as text) are seconds since the epoch.
fn full_time_key(ts: &str) -> String {
    format!(
        "CASE WHEN typeof({ts}) IN ('integer', 'real') \
               OR (typeof({ts}) = 'text' AND trim({ts}) <> '' AND trim({ts}) NOT GLOB '*[^0-9.]*') \
         THEN CAST(ROUND(CAST({ts} AS REAL) * 1000) AS INTEGER) \
         ELSE CAST(ROUND(unixepoch(upper(trim({ts})), 'subsec') * 1000) AS INTEGER) END"
    )
}

/// [`full_time_key`], with a shortcut first for the common case: a date as text that
/// SQLite reads as it is (`YYYY-...`, upper-case, no leading space). The shortcut gives
/// the value the full expression gives, or NULL, and then the full expression decides.
/// On a 1M-row table the full expression alone took 1.4 s, a third of the query; the
/// shortcut 0.3 s.
fn time_key(ts: &str) -> String {
    format!(
        "COALESCE(CASE WHEN typeof({ts}) = 'text' AND substr({ts}, 5, 1) = '-' \
                  THEN CAST(ROUND(unixepoch({ts}, 'subsec') * 1000) AS INTEGER) END, {})",
        full_time_key(ts)
    )
}

#[cfg(test)]
mod tests {
    use super::{full_time_key, time_key};
    use rusqlite::types::Value;

    #[test]
    fn the_time_keys_shortcut_gives_what_the_full_expression_gives() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let sql = format!("SELECT {}, {}", time_key("?1"), full_time_key("?1"));
        let text = |s: &str| Value::Text(s.into());
        let values = [
            text("2026-02-01T10:00:00Z"),
            text("2026-02-01T10:00:00.123Z"),
            text("2026-02-01T10:00:00.1234567Z"),
            text("2026-02-01t10:00:16z"),
            text("2026-02-01T10:00:16z"),
            text("2026-02-01 10:00:16"),
            text("2026-02-01T10:00:17+02:00"),
            text("2026-02-01T10:00:17-05:30"),
            text("2026-02-01T10:00:17+0200"),
            text(" 2026-02-01T10:00:16Z"),
            text("2026-02-01T10:00:16Z "),
            text("2026-02-01"),
            text("2026-13-01T10:00:00Z"),
            text("1700-"),
            text("1.2e-05"),
            text("1769940016"),
            text(" 1769940016.5 "),
            text("Feb 1 2026 10:00:07"),
            text(""),
            Value::Integer(1_769_940_016),
            Value::Real(1.2e-5),
            Value::Real(-1.5e-7),
            Value::Blob(b"2026-02-01T10:00:00Z".to_vec()),
            Value::Null,
        ];
        for v in values {
            let (fast, full): (Option<i64>, Option<i64>) =
                conn.query_row(&sql, [&v], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            assert_eq!(fast, full, "{v:?}");
        }
    }
}
