//! `engage backup`: a copy taken while a server is under load holds every request
//! acknowledged before the backup started, whole, and a server started on the copy
//! applies its queued part; a copy without a server; refusals.

use crate::support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::{engage_output, key, read_counts, Conn, Server};

const ADMIN: &str = "backup-admin-token-0123456789abcdef";

/// `engage backup --db DB --to TO`, which must succeed: its summary line.
fn backup(db: &Path, to: &Path) -> String {
    let out = engage_output(&["backup", "--db", db.to_str().unwrap(), "--to", to.to_str().unwrap()]);
    assert!(out.status.success(), "engage backup: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The number of queued jobs a backup's summary reports.
fn queued_jobs(summary: &str) -> u64 {
    let before = summary.split(" queued jobs").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap_or_else(|_| panic!("no queued jobs in {summary:?}"))
}

/// One track request for `user` (two attributes and an event): whether it was
/// acknowledged. A `503` for the backlog bound acknowledges nothing (the checks
/// below prove it): the client waits the `Retry-After` it names, as a real one would.
/// With one job a commit a fast machine acknowledges past the bound within seconds.
fn track(conn: &mut Conn, key: &str, user: &str) -> bool {
    let r = conn.post("/users/track", key, &support::counted_track(user)).expect("track");
    if r.status == 503 {
        let body = String::from_utf8_lossy(&r.body);
        assert!(body.contains("too many writes are waiting"), "{body}");
        let secs: u64 = r.header("retry-after").and_then(|s| s.parse().ok()).expect("Retry-After");
        std::thread::sleep(Duration::from_secs(secs.min(1)));
        return false;
    }
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    true
}

/// Track requests from one client until `stop`, counted per user once acknowledged.
fn client(port: u16, key: &str, id: usize, stop: &AtomicBool, acked: &Mutex<HashMap<String, u64>>) {
    let mut conn = Conn::open(port).unwrap();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let user = format!("c{id}-u{}", (i * 7 + id as u64) % 20);
        i += 1;
        if track(&mut conn, key, &user) {
            *acked.lock().unwrap().entry(user).or_default() += 1;
        }
    }
}

/// Jobs still queued on a server.
fn pending(server: &Server) -> u64 {
    server.conn().send("GET", "/_engage/queue", ADMIN, None).unwrap().json()["pending"].as_u64().unwrap()
}

#[test]
fn a_backup_under_load_holds_everything_acknowledged_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let copy = dir.path().join("restore").join("copy.db");
    std::fs::create_dir(copy.parent().unwrap()).unwrap();
    let key = key(&db);
    // One job a commit: applying lags, so the copy has a queued part to carry.
    let args = ["--no-rate-limits", "--admin-token", ADMIN, "--apply-batch", "1"];
    let server = Server::start(&db, &args, &[]);
    let acked = Mutex::new(HashMap::new());
    let stop = AtomicBool::new(false);
    let (mut before, mut summary) = (HashMap::new(), String::new());
    let mut took = Duration::ZERO;
    std::thread::scope(|s| {
        for c in 0..6 {
            let (key, stop, acked) = (&key, &stop, &acked);
            s.spawn(move || client(server.port, key, c, stop, acked));
        }
        std::thread::sleep(Duration::from_millis(1500));
        before = acked.lock().unwrap().clone();
        let started = Instant::now();
        summary = backup(&db, &copy);
        took = started.elapsed();
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
    });
    let after = acked.into_inner().unwrap();
    let users: Vec<String> = after.keys().cloned().collect();
    eprintln!(
        "backup under load ({took:?}, {} requests acknowledged before it, {} in all): {summary}",
        before.values().sum::<u64>(),
        after.values().sum::<u64>()
    );
    assert!(queued_jobs(&summary) > 0, "the copy carries queued jobs: {summary}");
    // The original is untouched: every acknowledged request, once and whole.
    let original = read_counts(&server, &key, &users);
    for user in &users {
        let want = after[user];
        assert_eq!(original.get(user), Some(&(want, want, want)), "{user} on the original server");
    }
    drop(server);
    // The copy, on a server of its own: its queue is applied.
    let restored = Server::start(&copy, &args, &[]);
    let found = read_counts(&restored, &key, &users);
    for user in &users {
        let (n, m, hits) = found.get(user).copied().unwrap_or((0, 0, 0));
        let (at_start, at_end) = (before.get(user).copied().unwrap_or(0), after[user]);
        assert!(n == m && m == hits, "{user}: half-applied in the copy (n {n}, m {m}, events {hits})");
        assert!(n >= at_start, "{user}: {at_start} acknowledged before the backup, {n} in the copy");
        assert!(n <= at_end, "{user}: {n} in the copy, only {at_end} ever acknowledged");
    }
    let started = Instant::now();
    while pending(&restored) > 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "the copy's queue did not drain");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_backup_without_a_server_copies_the_queue_it_left() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let copy = dir.path().join("copy.db");
    let key = key(&db);
    let args = ["--no-rate-limits", "--admin-token", ADMIN, "--apply-batch", "1"];
    let mut server = Server::start(&db, &args, &[]);
    let mut conn = server.conn();
    let users: Vec<String> = (0..5).map(|i| format!("u{i}")).collect();
    for i in 0..200 {
        track(&mut conn, &key, &users[i % 5]);
    }
    server.kill();
    let summary = backup(&db, &copy);
    eprintln!("backup without a server: {summary}");
    let restored = Server::start(&copy, &args, &[]);
    let found = read_counts(&restored, &key, &users);
    for user in &users {
        assert_eq!(found.get(user), Some(&(40, 40, 40)), "{user} in the copy");
    }
}

#[test]
fn a_backup_refuses_to_overwrite_and_names_a_missing_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    key(&db);
    let (db_arg, existing) = (db.to_str().unwrap(), dir.path().join("existing.db"));
    std::fs::write(&existing, b"keep me").unwrap();
    let out = engage_output(&["backup", "--db", db_arg, "--to", existing.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");

    let missing = dir.path().join("missing.db");
    let to = dir.path().join("copy.db");
    let out = engage_output(&["backup", "--db", missing.to_str().unwrap(), "--to", to.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("missing.db does not exist"), "{err}");
    assert!(!to.exists() && !missing.exists(), "nothing was created");

    let out = engage_output(&["backup", "--to", to.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--db"), "{err}");
    assert!(!to.exists());
}
