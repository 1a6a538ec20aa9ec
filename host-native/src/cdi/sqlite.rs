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
        register_canonical_ms(&conn).map_err(read)?;
        Ok(SqliteSource { conn })
    }
}

fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        // Checked whole first: valid text (nearly every column) is copied once, where
        // the lossy decoder walked it chunk by chunk (4% of the reading thread,
        // callgrind).
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(match std::str::from_utf8(t) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(t).into_owned(),
        }),
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

/// [`full_time_key`], with two shortcuts first for the common cases, each giving the
/// value the full expression gives, or NULL, and then the next one decides:
/// [`canonical_ms`] for `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, then a date as text that
/// SQLite reads as it is (`YYYY-...`, upper-case, no leading space). On a 1M-row
/// table the full expression alone took 1.4 s, a third of the query. With SQLite's
/// `unixepoch` first, a sync's first batch committed 0.53-0.60 s after it began;
/// with the canonical parse before it, 0.42-0.49 s (and 2.5% fewer instructions in
/// all).
fn time_key(ts: &str) -> String {
    format!(
        "COALESCE({CANONICAL_MS}({ts}), \
                  CASE WHEN typeof({ts}) = 'text' AND substr({ts}, 5, 1) = '-' \
                  THEN CAST(ROUND(unixepoch({ts}, 'subsec') * 1000) AS INTEGER) END, {})",
        full_time_key(ts)
    )
}

/// The SQL name of [`canonical_ms`] on a source's connection.
const CANONICAL_MS: &str = "engage_canonical_ms";

/// Registers [`canonical_ms`] on `conn` (text in, milliseconds or NULL out).
fn register_canonical_ms(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC | FunctionFlags::SQLITE_INNOCUOUS;
    conn.create_scalar_function(CANONICAL_MS, 1, flags, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Text(t) => canonical_ms(t),
            _ => None,
        })
    })
}

/// Milliseconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.digits]Z` (upper-case `T`
/// and `Z`, a real calendar day, hours below 24), exactly as SQLite's
/// `unixepoch(ts, 'subsec') * 1000` rounds it; `None` for anything else, which
/// SQLite's own functions then read. The fraction is computed in the same
/// floating-point steps as SQLite's date parser (`parseHhMmSs`, `computeJD`), so the
/// millisecond it rounds to is the same.
fn canonical_ms(t: &[u8]) -> Option<i64> {
    if t.len() < 20 || t[4] != b'-' || t[7] != b'-' || t[10] != b'T' || t[13] != b':' || t[16] != b':' {
        return None;
    }
    let num = |at: usize, len: usize| -> Option<i64> {
        t[at..at + len].iter().try_fold(0i64, |n, &b| b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0')))
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if d < 1 || d > month_days || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let mut rest = &t[19..];
    let mut ms = 0.0f64;
    if let [b'.', digits @ ..] = rest {
        let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        let mut scale = 1.0f64;
        for &b in &digits[..n] {
            ms = ms * 10.0 + f64::from(b - b'0');
            scale *= 10.0;
        }
        ms /= scale;
        if ms > 0.999 {
            ms = 0.999;
        }
        rest = &digits[n..];
    }
    if rest != b"Z" {
        return None;
    }
    // Days since 1970-01-01 of the proleptic Gregorian date (Howard Hinnant's
    // days_from_civil).
    let (y, mo) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let s = sec as f64 + ms;
    Some(days * 86_400_000 + h * 3_600_000 + mi * 60_000 + (s * 1000.0 + 0.5) as i64)
}

#[cfg(test)]
mod tests {
    use super::{full_time_key, time_key};
    use rusqlite::types::Value;

    #[test]
    fn the_time_keys_shortcut_gives_what_the_full_expression_gives() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        super::register_canonical_ms(&conn).unwrap();
        let sql = format!("SELECT {}, {}", time_key("?1"), full_time_key("?1"));
        let text = |s: &str| Value::Text(s.into());
        let values = [
            text("2026-02-01T10:00:00Z"),
            text("2026-02-01T10:00:00.123Z"),
            text("2026-02-01T10:00:00.1234567Z"),
            text("2026-02-01T10:00:00.9995Z"),
            text("2026-02-01T10:00:00.0005Z"),
            text("2026-02-01T10:00:00.Z"),
            text("2026-02-29T10:00:00Z"),
            text("2024-02-29T23:59:59.999Z"),
            text("2026-04-31T10:00:00Z"),
            text("2026-02-01T24:00:00Z"),
            text("2026-02-01T10:00:60Z"),
            text("2026-02-01T10:00:00ZZ"),
            text("2026-02-01T10:00:00Z "),
            text("0000-01-01T00:00:00Z"),
            text("9999-12-31T23:59:59.999Z"),
            text("1969-12-31T23:59:59.5Z"),
            text("2026-02-01T1a:00:00Z"),
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

    /// The canonical parse against SQLite's own reading, on timestamps drawn across
    /// years 0-9999 with 0 to 9 fraction digits (many ending in 5, where rounding
    /// could go either way).
    #[test]
    fn the_canonical_parse_gives_what_sqlite_gives() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut st = conn.prepare("SELECT CAST(ROUND(unixepoch(?1, 'subsec') * 1000) AS INTEGER)").unwrap();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..20_000 {
            let digits = next(10) as usize;
            let fraction: String = (0..digits)
                .map(|i| if i + 1 == digits && next(2) == 0 { '5' } else { char::from(b'0' + next(10) as u8) })
                .collect();
            let ts = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}{}Z",
                next(10_000),
                1 + next(12),
                1 + next(28),
                next(24),
                next(60),
                next(60),
                if digits > 0 { "." } else { "" },
                fraction
            );
            let sqlite: Option<i64> = st.query_row([&ts], |r| r.get(0)).unwrap();
            assert_eq!(super::canonical_ms(ts.as_bytes()), sqlite, "{ts}");
        }
    }
}
