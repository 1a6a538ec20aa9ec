//! Storage layouts of the profile table compared with SQLite alone, no server: the
//! question the performance issues keep asking of the `docs` table (`WITHOUT ROWID`,
//! a larger page), answered by measuring the three kinds of work that would change:
//!
//! 1. a warehouse sync's writes: new users, each a profile and an identifier entry
//!    naming it, 1,000 a transaction as a sync commits (the suite's
//!    `Store::write_users`, shared);
//! 2. the applier's: 200,000 profiles read and rewritten at random, each one event
//!    longer, 225 a transaction (a full track batch);
//! 3. an export's reads: 20,000 requests of 50 random users, each an identifier entry
//!    then its profile, on a reader connection with the server's 256 KiB cache.
//!
//! Every layout keeps `idents` as it is (`WITHOUT ROWID`, migration 0003); WAL,
//! `synchronous = FULL` and a 32 MiB writer cache as the server's writer.
//!
//! First, the yardstick of the first kind: the writes of the suite's warehouse
//! baseline (its plain copy, `benches/suite/cdi.rs`, with the same rows and writer:
//! `benches/suite/warehouse.rs`), one row each into one table with a text primary
//! key, without reading a source.
//!
//! `cargo bench -p engage --bench layouts`; `BENCH_USERS` (default 3000000) users,
//! `BENCH_LAYOUTS` (default `1024:rowid,4096:rowid,2048:without,4096:without`).
//! The latest results are in docs/performance.md (its current figures, and the
//! layouts tried and not kept).

use std::time::Instant;

use rusqlite::{params, Connection};

/// A layout: the page size, and whether `docs` is `WITHOUT ROWID`.
struct Layout {
    page: i64,
    without_rowid: bool,
}

impl Layout {
    fn parse(text: &str) -> Layout {
        let (page, kind) = text.split_once(':').expect("BENCH_LAYOUTS: page:rowid or page:without");
        Layout { page: page.parse().expect("a page size"), without_rowid: kind == "without" }
    }

    fn name(&self) -> String {
        format!("{} B pages, docs {}", self.page, if self.without_rowid { "WITHOUT ROWID" } else { "with rowids" })
    }
}

/// xorshift64: the same random users for every layout.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The warehouse rows and the plain copy's writer of the suite's CDI phase.
#[path = "suite/warehouse.rs"]
mod warehouse;

/// The plain copy's writes of `users` warehouse rows, made as the suite's CDI
/// phase makes them and written by its writer: users written per second.
fn plain_copy_writes(users: u64, dir: &std::path::Path) -> f64 {
    let path = dir.join("plain-copy.db");
    let started = Instant::now();
    let mut w = warehouse::Writer::open(&path);
    for n in 0..users {
        let (ts, id, payload) = warehouse::row(n);
        w.write(&ts, &id, &payload);
    }
    w.finish();
    let rate = users as f64 / started.elapsed().as_secs_f64();
    remove_db(&path);
    rate
}

/// Removes a database and its WAL and shared-memory files.
fn remove_db(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.to_path_buf().into_os_string();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
}

const EVENT: &[u8] = b"{\"event\":\"viewed_item\",\"count\":1,\"first\":1735689600000}";

fn run(layout: &Layout, users: u64, dir: &std::path::Path) -> rusqlite::Result<()> {
    let path = dir.join(format!("layout-{}-{}.db", layout.page, layout.without_rowid));
    let mut store = warehouse::open_store(&path, layout.page, layout.without_rowid)?;
    let inserted = store.write_users(users, 1000)?;
    let mut c = store.conn;
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let mib = std::fs::metadata(&path).map_or(0, |m| m.len() >> 20);

    let mut random = 12_345u64;
    let rewrites = 200_000u64;
    let started = Instant::now();
    for _ in 0..rewrites / 225 {
        let tx = c.transaction()?;
        {
            let mut read = tx.prepare_cached("SELECT version, value FROM docs WHERE tbl = 1 AND key = ?1")?;
            let mut write = tx.prepare_cached("UPDATE docs SET version = ?1, value = ?2 WHERE tbl = 1 AND key = ?3")?;
            for _ in 0..225 {
                let key = warehouse::service_key(next(&mut random) % users);
                let (version, mut value): (i64, Vec<u8>) = read.query_row([&key], |r| Ok((r.get(0)?, r.get(1)?)))?;
                value.extend_from_slice(EVENT);
                write.execute(params![version + 1, value, key])?;
            }
        }
        tx.commit()?;
    }
    let rewritten = (rewrites / 225 * 225) as f64 / started.elapsed().as_secs_f64();
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;

    let reader = Connection::open(&path)?;
    reader.pragma_update(None, "cache_size", -256)?;
    let requests = 20_000;
    let started = Instant::now();
    for _ in 0..requests {
        let mut ident = reader.prepare_cached("SELECT value FROM idents WHERE tbl = 4 AND key = ?1")?;
        let keys: Vec<Vec<u8>> = (0..50)
            .map(|_| ident.query_row([warehouse::external_key(next(&mut random) % users)], |r| r.get(0)))
            .collect::<Result<_, _>>()?;
        let mut doc = reader.prepare_cached("SELECT value FROM docs WHERE tbl = 1 AND key = ?1")?;
        for key in keys {
            let _: Vec<u8> = doc.query_row([String::from_utf8_lossy(&key)], |r| r.get(0))?;
        }
    }
    let exported = requests as f64 / started.elapsed().as_secs_f64();
    println!("| {} | {users} | {inserted:.0} | {rewritten:.0} | {exported:.0} | {mib} |", layout.name());
    drop(reader);
    drop(c);
    remove_db(&path);
    Ok(())
}

fn main() {
    let users = std::env::var("BENCH_USERS").ok().and_then(|v| v.parse().ok()).unwrap_or(3_000_000);
    let layouts =
        std::env::var("BENCH_LAYOUTS").unwrap_or_else(|_| "1024:rowid,4096:rowid,2048:without,4096:without".into());
    let dir = tempfile::tempdir().expect("a temporary directory");
    println!("| layout | users | new users/s (1,000 a transaction) | profiles rewritten/s (225 a transaction) | exports of 50/s | file, MiB |");
    println!("|---|---|---|---|---|---|");
    let plain = plain_copy_writes(users, dir.path());
    println!(
        "| the plain copy's writes (one table, text primary key, 4096 B pages) | {users} | {plain:.0} | - | - | - |"
    );
    for layout in layouts.split(',').map(Layout::parse) {
        run(&layout, users, dir.path()).expect("the layout's run");
    }
}
