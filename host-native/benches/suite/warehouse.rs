//! The warehouse rows, the plain copy's writer, and the store's own writes of new
//! users, shared by the suite's CDI phase and the layouts bench (`benches/layouts.rs`
//! includes this file), so that both measure against the same yardstick. Only
//! rusqlite and the core: no suite module.

use std::path::Path;
use std::time::Instant;

use rusqlite::{params, Connection};

const PLANS: [&str; 4] = ["free", "pro", "team", "enterprise"];

/// Row `n`: its `UPDATED_AT` (milliseconds apart), external id and payload (3 to 5
/// attributes).
pub fn row(n: u64) -> (String, String, String) {
    let fields = [
        format!("\"first_name\": \"F{}\"", n % 9973),
        format!("\"plan\": \"{}\"", PLANS[(n % 4) as usize]),
        format!("\"score\": {}", n % 1000),
        format!("\"city\": \"C{}\"", n % 311),
        format!("\"beta\": {}", n.is_multiple_of(2)),
    ];
    let take = 3 + (n % 3) as usize;
    let payload = format!("{{{}}}", fields[..take].join(", "));
    let at = 1_735_689_600_000 + n as i64; // 2025-01-01, one row a millisecond
    let ts = engage_core::Timestamp(at).to_rfc3339();
    (ts, format!("u{n}"), payload)
}

/// The plain copy's writer: one row each into an indexed table (WAL, synchronous
/// FULL as Engage's commits, SQLite's default page size and cache), 1,000 rows a
/// transaction.
pub struct Writer {
    conn: Connection,
    pending: usize,
}

impl Writer {
    /// Opens a writer on a new database at `path` (none may be there).
    pub fn open(path: &Path) -> Writer {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
             CREATE TABLE users (external_id TEXT PRIMARY KEY, updated_at TEXT NOT NULL, payload TEXT NOT NULL);
             BEGIN",
        )
        .unwrap();
        Writer { conn, pending: 0 }
    }

    pub fn write(&mut self, ts: &str, id: &str, payload: &str) {
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO users VALUES (?1, ?2, ?3)")
            .unwrap()
            .execute([id, ts, payload])
            .unwrap();
        self.pending += 1;
        if self.pending == 1000 {
            self.conn.execute_batch("COMMIT; BEGIN").unwrap();
            self.pending = 0;
        }
    }

    pub fn finish(self) {
        self.conn.execute_batch("COMMIT").unwrap();
    }
}

/// A new user's profile as the warehouse rows make it (about 190 bytes).
pub fn profile(n: u64) -> Vec<u8> {
    format!(
        "{{\"external_id\":\"u{n}\",\"created_at\":\"2025-01-01T00:00:00.000Z\",\"custom_attributes\":\
         {{\"first_name\":\"F{}\",\"plan\":\"pro\",\"score\":{},\"city\":\"C{}\"}},\"updated_at\":\"2025-01-01T00:00:00.000Z\"}}",
        n % 9973,
        n % 1000,
        n % 311
    )
    .into_bytes()
}

/// User `n`'s profile key: a service id made in order, as the server makes them.
pub fn service_key(n: u64) -> String {
    format!("w\u{1f}{:08x}a1b2c3d4e5{:06x}", 1_735_689_600 + n / 5000, n)
}

/// User `n`'s identifier entry key.
pub fn external_key(n: u64) -> String {
    external_key_of(&format!("u{n}"))
}

/// The identifier entry key of external id `id`.
pub fn external_key_of(id: &str) -> String {
    format!("w\u{1f}x\u{1f}{id}")
}

/// A database with the store's two tables of documents, as [`open_store`] makes it.
pub struct Store {
    /// The writer's connection.
    pub conn: Connection,
    /// Whether `docs` has rowids (an identifier entry then records its profile's).
    rowids: bool,
}

/// A new database at `path` with the store's two tables of documents as the
/// migrations make them (`docs` optionally `WITHOUT ROWID`), `page`-byte pages, and
/// the server's writer settings: WAL, `synchronous = FULL`, its cache
/// (`WRITER_CACHE_KIB`).
pub fn open_store(path: &Path, page: i64, without_rowid: bool) -> rusqlite::Result<Store> {
    let c = Connection::open(path)?;
    c.pragma_update(None, "page_size", page)?;
    c.pragma_update(None, "journal_mode", "WAL")?;
    c.pragma_update(None, "synchronous", "FULL")?;
    c.pragma_update(None, "cache_size", -engage::store::sqlite::connection::WRITER_CACHE_KIB)?;
    c.execute_batch(&format!(
        "CREATE TABLE docs (tbl INTEGER NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, value BLOB NOT NULL,
           PRIMARY KEY (tbl, key)){};
         CREATE TABLE idents (tbl INTEGER NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, value BLOB NOT NULL,
           at INTEGER, PRIMARY KEY (tbl, key)) WITHOUT ROWID;",
        if without_rowid { " WITHOUT ROWID" } else { "" }
    ))?;
    Ok(Store { conn: c, rowids: !without_rowid })
}

impl Store {
    /// The store's writes of `users` new users and nothing else, `per_tx` a
    /// transaction: each a profile, then an identifier entry naming it (and its row,
    /// where `docs` has rowids). No source is read, no payload parsed, no identifier
    /// looked up: the least a sync's commits do. Users written per second.
    pub fn write_users(&mut self, users: u64, per_tx: u64) -> rusqlite::Result<f64> {
        let started = Instant::now();
        for first in (0..users).step_by(per_tx as usize) {
            let batch = (first..(first + per_tx).min(users)).map(|n| (service_key(n), external_key(n), profile(n)));
            self.write_batch(batch)?;
        }
        Ok(users as f64 / started.elapsed().as_secs_f64())
    }

    /// Writes new users in one transaction, each a profile (profile key, document)
    /// and then the identifier entry (key) naming it.
    pub fn write_batch(&mut self, users: impl Iterator<Item = (String, String, Vec<u8>)>) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut doc = tx.prepare_cached("INSERT INTO docs (tbl, key, version, value) VALUES (1, ?1, 1, ?2)")?;
            let mut ident =
                tx.prepare_cached("INSERT INTO idents (tbl, key, version, value, at) VALUES (4, ?1, 1, ?2, ?3)")?;
            for (key, external, profile) in users {
                doc.execute(params![key, profile])?;
                let at = self.rowids.then(|| tx.last_insert_rowid());
                ident.execute(params![external, key.as_bytes(), at])?;
            }
        }
        tx.commit()
    }
}
