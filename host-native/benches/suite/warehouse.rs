//! The warehouse rows and the plain copy's writer, shared by the suite's CDI phase
//! and the layouts bench (`benches/layouts.rs` includes this file), so that both
//! measure against the same yardstick. Only rusqlite and the core: no suite module.

use std::path::Path;

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
    conn: rusqlite::Connection,
    pending: usize,
}

impl Writer {
    /// Opens a writer on a new database at `path` (none may be there).
    pub fn open(path: &Path) -> Writer {
        let conn = rusqlite::Connection::open(path).unwrap();
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
