//! The release server under load from several clients: `kill -9` at random moments
//! loses no acknowledged request and applies none twice or half; reads during a long
//! backlog never fail and see every acknowledged write of the users they read; a full
//! disk answers 503 and the server recovers by itself when space returns.
//!
//! Run by tests/run.sh: `cargo test --release -p engage --features reliability-tests
//! --test reliability -- --nocapture --test-threads 1`. ENGAGE_CRASH_KILLS (default 5)
//! sets the number of kills; ENGAGE_BACKLOG_LOAD_SECS (default 15) the load before
//! the backlog is read through.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{key, percentile, read_counts, Conn, Server};

const ADMIN: &str = "reliability-admin";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A small pseudo-random sequence (the tests need spread, not quality).
struct Rng(u64);

impl Rng {
    fn new(salt: u64) -> Rng {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        Rng(u64::from(nanos) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Waits until the queue is empty (every acknowledged job applied).
fn drained(server: &Server, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let state = server.conn().send("GET", "/_engage/queue", ADMIN, None).expect("queue state").json();
        if state["pending"] == json!(0) {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "the queue did not drain: {state}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[derive(Default)]
struct Tally {
    /// Requests answered 201, by user.
    acked: HashMap<String, u64>,
    /// Requests sent without an answer (the server died): applied or not.
    unsure: HashMap<String, u64>,
}

/// One client: track requests until the server goes away or `stop` is set.
fn client(port: u16, key: &str, id: usize, stop: &AtomicBool, tally: &Mutex<Tally>) {
    let Ok(mut conn) = Conn::open(port) else { return };
    let mut rng = Rng::new(id as u64);
    while !stop.load(Ordering::Relaxed) {
        let user = format!("c{id}-u{}", rng.below(20));
        match conn.post("/users/track", key, &support::counted_track(&user)) {
            Ok(r) if r.status == 201 => *tally.lock().unwrap().acked.entry(user).or_default() += 1,
            Ok(r) => panic!("track answered {}: {}", r.status, String::from_utf8_lossy(&r.body)),
            Err(_) => {
                *tally.lock().unwrap().unsure.entry(user).or_default() += 1;
                return;
            }
        }
    }
}

#[test]
fn kill_9_under_load_loses_nothing_acknowledged_and_applies_nothing_twice_or_half() {
    let kills = env_or("ENGAGE_CRASH_KILLS", 5);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    let args = ["--no-rate-limits", "--admin-token", ADMIN];
    let tally = Mutex::new(Tally::default());
    let mut rng = Rng::new(99);
    for round in 0..kills {
        let mut server = Server::start(&db, &args, &[]);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for c in 0..6 {
                let (key, stop, tally) = (&key, &stop, &tally);
                s.spawn(move || client(server.port, key, c, stop, tally));
            }
            std::thread::sleep(Duration::from_millis(300 + rng.below(1500)));
            let pending = server.conn().send("GET", "/_engage/queue", ADMIN, None).map(|r| r.json()["pending"].clone());
            server.kill();
            eprintln!("kill {}: {} jobs pending when killed", round + 1, pending.unwrap_or(Value::Null));
        });
    }
    let server = Server::start(&db, &args, &[]);
    let drain = drained(&server, Duration::from_secs(300));
    let tally = tally.into_inner().unwrap();
    let users: Vec<String> = tally.acked.keys().chain(tally.unsure.keys()).cloned().collect();
    let found = read_counts(&server, &key, &users);
    let (mut acked_total, mut unsure_total) = (0, 0);
    for user in &users {
        let acked = tally.acked.get(user).copied().unwrap_or(0);
        let unsure = tally.unsure.get(user).copied().unwrap_or(0);
        let (n, m, hits) = found.get(user).copied().unwrap_or((0, 0, 0));
        assert!(n == m && m == hits, "{user}: half-applied (n {n}, m {m}, events {hits})");
        assert!(n >= acked, "{user}: {acked} acknowledged, {n} applied: lost");
        assert!(n <= acked + unsure, "{user}: {n} applied, only {acked} + {unsure} sent: applied twice");
        acked_total += acked;
        unsure_total += unsure;
    }
    eprintln!(
        "crash test: {kills} kills, {acked_total} acknowledged requests verified ({unsure_total} unanswered at a kill), {} users, backlog drained {drain:?} after the last restart",
        users.len()
    );
    assert!(acked_total > 0);
}

#[test]
fn reads_during_a_long_backlog_answer_and_see_every_acknowledged_write() {
    let load_secs = env_or("ENGAGE_BACKLOG_LOAD_SECS", 15);
    const USERS: u64 = 5000;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = key(&db);
    // One job a commit: applying is slow, so the load leaves a long backlog.
    let server = Server::start(&db, &["--no-rate-limits", "--admin-token", ADMIN, "--apply-batch", "1"], &[]);
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..USERS).map(|_| AtomicU64::new(0)).collect());
    let loading = AtomicBool::new(true);
    let reading = AtomicBool::new(true);
    let (latencies, failures, stale) = (Mutex::new(Vec::new()), AtomicUsize::new(0), Mutex::new(Vec::new()));
    let sent = AtomicU64::new(0);
    let mut backlog = Value::Null;
    let mut drain = Duration::ZERO;
    std::thread::scope(|s| {
        for c in 0..8 {
            let (key, acked, loading, sent) = (&key, &acked, &loading, &sent);
            s.spawn(move || {
                let mut conn = Conn::open(server.port).unwrap();
                let mut rng = Rng::new(c);
                while loading.load(Ordering::Relaxed) {
                    let users: Vec<u64> = (0..50).map(|_| rng.below(USERS)).collect();
                    let attributes: Vec<Value> =
                        users.iter().map(|u| json!({"external_id": format!("u{u}"), "n": {"inc": 1}})).collect();
                    let r = conn.post("/users/track", key, &json!({"attributes": attributes})).unwrap();
                    assert_eq!(r.status, 201);
                    sent.fetch_add(1, Ordering::Relaxed);
                    for u in users {
                        acked[u as usize].fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
        for c in 0..2 {
            let (key, acked, reading, latencies, failures, stale) =
                (&key, &acked, &reading, &latencies, &failures, &stale);
            s.spawn(move || {
                let mut conn = Conn::open(server.port).unwrap();
                let mut rng = Rng::new(100 + c);
                while reading.load(Ordering::Relaxed) {
                    let u = rng.below(USERS);
                    let before = acked[u as usize].load(Ordering::SeqCst);
                    let started = Instant::now();
                    let r = conn.post("/users/export/ids", key, &json!({"external_ids": [format!("u{u}")]})).unwrap();
                    latencies.lock().unwrap().push(started.elapsed());
                    if r.status != 200 {
                        failures.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let n = r.json()["users"][0]["custom_attributes"]["n"].as_u64().unwrap_or(0);
                    if n < before {
                        stale.lock().unwrap().push(format!("u{u}: {before} acknowledged before the read, {n} read"));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        std::thread::sleep(Duration::from_secs(load_secs));
        loading.store(false, Ordering::Relaxed);
        backlog = server.conn().send("GET", "/_engage/queue", ADMIN, None).unwrap().json();
        drain = drained(&server, Duration::from_secs(600));
        reading.store(false, Ordering::Relaxed);
    });
    let mut latencies = latencies.into_inner().unwrap();
    let reads = latencies.len();
    let (p50, p99, max) =
        (percentile(&mut latencies, 50.0), percentile(&mut latencies, 99.0), percentile(&mut latencies, 100.0));
    eprintln!(
        "backlog test: {} track requests (50 users each) in {load_secs} s; at the end of the load {backlog}; drained {drain:?} later; {reads} reads meanwhile: p50 {p50:?}, p99 {p99:?}, max {max:?}",
        sent.load(Ordering::Relaxed)
    );
    assert_eq!(failures.load(Ordering::Relaxed), 0, "reads failed during the backlog");
    let stale = stale.into_inner().unwrap();
    assert!(stale.is_empty(), "reads missed acknowledged writes: {stale:?}");
    assert!(reads > 0 && backlog["pending"].as_u64().unwrap_or(0) > 0, "there was a backlog to read through");
}

/// Mounts a tmpfs of `mib` MiB at `dir` (the test runs as root, as CI does).
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    fn mount(dir: &std::path::Path, mib: u64) -> SmallFs {
        std::fs::create_dir_all(dir).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs", dir.to_str().unwrap()])
            .status()
            .expect("run mount");
        assert!(status.success(), "mounting a small file system needs root (CI runs as root)");
        SmallFs(dir.to_path_buf())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes a file until the file system is full.
fn fill(path: &std::path::Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![7u8; 64 * 1024];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn a_full_disk_answers_503_loses_nothing_and_recovers_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SmallFs::mount(&dir.path().join("small"), 48);
    let db = fs.0.join("e.db");
    let key = key(&db);
    let args = ["--no-rate-limits", "--admin-token", ADMIN];
    // The log on the same file system: the server must outlive a log it cannot write.
    let mut server = Server::start_logging(&db, &args, &[], Some(fs.0.join("engage.log")));
    let mut conn = server.conn();
    let log = server.log.clone();
    let mut acked: HashMap<String, u64> = HashMap::new();
    let mut track = |conn: &mut Conn, i: u64| {
        let user = format!("d{}", i % 10);
        let r = conn
            .post("/users/track", &key, &json!({"attributes": [{"external_id": user, "n": {"inc": 1}}]}))
            .unwrap_or_else(|e| panic!("{e}: {}", std::fs::read_to_string(&log).unwrap_or_default()));
        if r.status == 201 {
            *acked.entry(user).or_default() += 1;
        }
        r
    };
    for i in 0..100 {
        assert_eq!(track(&mut conn, i).status, 201);
    }
    let ballast = fs.0.join("ballast");
    fill(&ballast);
    let mut refused = 0;
    for i in 100..300 {
        let r = track(&mut conn, i);
        match r.status {
            201 => {}
            503 => {
                assert_eq!(r.json(), json!({"message": "Service Unavailable: storage failure, retry"}));
                refused += 1;
            }
            other => panic!("track answered {other} on a full disk"),
        }
    }
    assert!(refused > 0, "the disk was full: appends were refused");
    let r = conn.post("/users/track/sync", &key, &json!({"attributes": [{"external_id": "sync", "n": 1}]})).unwrap();
    assert!(matches!(r.status, 201 | 503), "{}", r.status);
    let sync_acked = r.status == 201;
    std::fs::remove_file(&ballast).unwrap();
    // Space is back: the same server takes and applies writes again.
    for i in 300..400 {
        let r = track(&mut conn, i);
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    drained(&server, Duration::from_secs(60));
    let users: Vec<String> = (0..10).map(|i| format!("d{i}")).collect();
    let check = |server: &Server| {
        let found = read_counts(server, &key, &users);
        for user in &users {
            assert_eq!(found.get(user).map(|c| c.0), acked.get(user).copied(), "{user}");
        }
    };
    check(&server);
    // Nothing is corrupted: a restart (after a kill) reads the same.
    server.kill();
    let server = Server::start(&db, &args, &[]);
    check(&server);
    let sync = read_counts(&server, &key, &["sync".to_string()]);
    assert_eq!(sync.contains_key("sync"), sync_acked, "a sync write is stored exactly when it was acknowledged");
    eprintln!(
        "disk-full test: {refused} track requests answered 503 while full; {} acknowledged, all present",
        acked.values().sum::<u64>()
    );
}
