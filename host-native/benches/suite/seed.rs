//! Seed databases: N identified profiles written through the store's own commit in
//! chunks of 20,000 (bulk: 1M in about 15 s), made once per size and kept under
//! `target/bench`; every run works on a fresh copy.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use engage::store::SqliteStore;
use engage_core::provision::{self, WorkspaceName};
use engage_core::{Ctx, Store, Timestamp};
use serde_json::json;

/// Where seeds, runs and baselines live.
pub fn root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&root).expect("create target/bench");
    root
}

/// The seed database of `profiles` profiles in workspace `bench`, made if missing.
/// The name changes with the storage layout (v3: page sizes per file; v4: the identifier index in a table of its own;
/// v5: identifier entries say which row their profile is in), so a stale
/// seed is never reused.
pub fn seed(profiles: u64) -> PathBuf {
    let path = root().join(format!("seed-v5-{profiles}.db"));
    if path.exists() {
        return path;
    }
    eprintln!("seeding {profiles} profiles into {} (once)", path.display());
    let tmp = path.with_extension("partial");
    remove_db(&tmp);
    let store = SqliteStore::open(&tmp).expect("open seed db");
    let ws = WorkspaceName::parse("bench").unwrap();
    let started = Instant::now();
    let custom = json!({"plan": "free"}).as_object().cloned().unwrap_or_default();
    let mut n = 0;
    while n < profiles {
        let chunk = 20_000.min(profiles - n);
        // A seed of its own per chunk, so service ids never repeat.
        let mut seed = [42u8; 16];
        seed[..8].copy_from_slice(&n.to_le_bytes());
        let ctx = Ctx::new(Timestamp(1_700_000_000_000), seed);
        let changes =
            provision::seed_profiles(&store, &ws, (n..n + chunk).map(user), &custom, ctx).expect("seed change set");
        pollster::block_on(store.commit(changes)).expect("seed commit");
        n += chunk;
        if n % 1_000_000 == 0 {
            eprintln!("  {n} profiles after {:.0}s", started.elapsed().as_secs_f64());
        }
    }
    // Dropping the store joins its threads: no connection of theirs is left to hold
    // the WAL, so the checkpoint below can empty it.
    drop(store);
    checkpoint_whole(&tmp);
    std::fs::rename(&tmp, &path).expect("rename seed");
    remove_side_files(&tmp);
    eprintln!("seeded {profiles} profiles in {:.1}s", started.elapsed().as_secs_f64());
    path
}

/// The external id of seeded profile `i`.
pub fn user(i: u64) -> String {
    format!("user-{i}")
}

/// Removes a database and the queue log, lock and WAL files beside it.
pub fn remove_db(db: &Path) {
    remove_side_files(db);
    let _ = std::fs::remove_file(db);
}

fn remove_side_files(db: &Path) {
    let name = db.file_name().unwrap().to_string_lossy().into_owned();
    for e in std::fs::read_dir(db.parent().unwrap()).unwrap().flatten() {
        let other = e.file_name().to_string_lossy().into_owned();
        if other.starts_with(&format!("{name}-")) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Copies every frame of `db`'s WAL into the database and empties the WAL, or
/// panics: a copy of the database file alone is whole only then. Checks the
/// checkpoint's answer (busy, WAL frames, frames copied) instead of assuming it, and
/// that the WAL is empty before anyone deletes it.
pub fn checkpoint_whole(db: &Path) {
    let c = rusqlite::Connection::open(db).expect("open");
    for attempt in 0.. {
        let (busy, log, done): (i64, i64, i64) = c
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("checkpoint");
        if busy == 0 && log == done {
            break;
        }
        assert!(
            attempt < 100,
            "{}: the WAL could not be checkpointed (busy {busy}, {done} of {log} frames)",
            db.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(c);
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let left = std::fs::metadata(PathBuf::from(wal)).map(|m| m.len()).unwrap_or(0);
    assert_eq!(left, 0, "{}: the WAL still holds {left} bytes after the checkpoint", db.display());
}

/// A fresh, synced copy of the seed at `to` (whatever was there is removed first).
pub fn fresh_copy(seed: &Path, to: &Path) {
    checkpoint_whole(seed);
    remove_db(to);
    std::fs::copy(seed, to).expect("copy");
    // Flush the copy now, or its writeback competes with the first seconds of load.
    std::fs::File::open(to).and_then(|f| f.sync_all()).expect("sync copy");
    settle_disk(to.parent().unwrap());
}

/// Waits until a small write and fdatasync is fast again (at most 30 s): the copy
/// and whatever an earlier run freed are still being written back and discarded, and
/// the first acknowledgements of the load would wait behind them.
fn settle_disk(dir: &Path) {
    use std::io::Write;
    let _ = std::process::Command::new("sync").status();
    let path = dir.join("settle.probe");
    let Ok(mut f) = std::fs::File::create(&path) else { return };
    let started = Instant::now();
    let mut fast = 0;
    while fast < 20 && started.elapsed() < Duration::from_secs(30) {
        let t = Instant::now();
        let ok = f.write_all(&[0u8; 4096]).and_then(|()| f.sync_data()).is_ok();
        fast = if ok && t.elapsed() < Duration::from_millis(2) { fast + 1 } else { 0 };
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
}
