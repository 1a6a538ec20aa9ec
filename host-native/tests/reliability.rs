//! The release server under load from several clients: `kill -9` at random moments
//! loses no acknowledged request and applies none twice or half; reads during a long
//! backlog never fail and see every acknowledged write of the users they read; a full
//! disk answers 503 and the server recovers by itself when space returns.
//!
//! Run by tests/run.sh: `cargo test --release -p engage
//! --test reliability -- --nocapture --test-threads 1`. ENGAGE_CRASH_KILLS (default 5)
//! sets the number of kills; ENGAGE_BACKLOG_LOAD_SECS (default 15) the load before
//! the backlog is read through. The backlog runs print their figures (requests,
//! refusals, pending, drain time, server RSS, read latencies during load and drain).

#[path = "native/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{key, percentile, read_counts, Conn, Server};

const ADMIN: &str = "reliability-admin-token-0123456789abcdef";

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

/// Clears its flags when dropped, a panic's unwinding included.
struct StopOnDrop<'a, const N: usize>([&'a AtomicBool; N]);

impl<const N: usize> Drop for StopOnDrop<'_, N> {
    fn drop(&mut self) {
        self.0.iter().for_each(|flag| flag.store(false, Ordering::Relaxed));
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
            // The backlog bound: nothing acknowledged, retry (a restarted server refuses
            // until it has measured its appliers' rate, once it acknowledged 4,096 jobs).
            Ok(r) if r.status == 503 => std::thread::sleep(Duration::from_millis(100)),
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

/// One backlog run: `clients` send track requests of `per_request` users for
/// `load_secs`, two readers export one user at a time meanwhile and until the queue
/// has drained, and the server's memory is sampled.
struct Backlog {
    per_request: u64,
    users: u64,
    load_secs: u64,
    /// `--max-backlog-secs`.
    bound_secs: u64,
}

#[derive(Debug)]
struct BacklogOutcome {
    sent: u64,
    refused: u64,
    /// `GET /_engage/queue` as the load stopped.
    at_end: Value,
    drain: Duration,
    rss_max: u64,
    /// Read latencies during the load, then during the drain.
    reads_loaded: Vec<Duration>,
    reads_draining: Vec<Duration>,
    failed_reads: usize,
    stale_reads: Vec<String>,
    /// Every user's `n` as acknowledged, and as read back at the end.
    acked: Vec<u64>,
    found: Vec<u64>,
}

impl Backlog {
    fn run(&self) -> BacklogOutcome {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("e.db");
        let key = key(&db);
        // One job a commit (unless ENGAGE_BACKLOG_APPLY_BATCH says otherwise, to try
        // the default): applying is slow, so the load outruns it.
        let bound = self.bound_secs.to_string();
        let batch = env_or("ENGAGE_BACKLOG_APPLY_BATCH", 1).to_string();
        let args = ["--no-rate-limits", "--admin-token", ADMIN, "--apply-batch", &batch, "--max-backlog-secs", &bound];
        let server = Server::start(&db, &args, &[]);
        let acked: Vec<AtomicU64> = (0..self.users).map(|_| AtomicU64::new(0)).collect();
        let (loading, reading) = (AtomicBool::new(true), AtomicBool::new(true));
        let (sent, refused, failed) = (AtomicU64::new(0), AtomicU64::new(0), AtomicUsize::new(0));
        let (loaded, draining, stale) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()), Mutex::new(Vec::new()));
        let (mut at_end, mut drain, mut rss_max) = (Value::Null, Duration::ZERO, 0);
        std::thread::scope(|s| {
            // A failed check below stops the clients too, or the scope would wait for
            // them for ever.
            let _stop = StopOnDrop([&loading, &reading]);
            for c in 0..8 {
                let (key, acked, loading, sent, refused) = (&key, &acked, &loading, &sent, &refused);
                s.spawn(move || {
                    let mut conn = Conn::open(server.port).unwrap();
                    let mut rng = Rng::new(c);
                    while loading.load(Ordering::Relaxed) {
                        let users: Vec<u64> = (0..self.per_request).map(|_| rng.below(self.users)).collect();
                        let attributes: Vec<Value> =
                            users.iter().map(|u| json!({"external_id": format!("u{u}"), "n": {"inc": 1}})).collect();
                        let r = conn.post("/users/track", key, &json!({"attributes": attributes})).unwrap();
                        sent.fetch_add(1, Ordering::Relaxed);
                        match r.status {
                            201 => users.iter().for_each(|&u| {
                                acked[u as usize].fetch_add(1, Ordering::SeqCst);
                            }),
                            503 if self.bound_secs > 0 => {
                                let body = r.json();
                                let message = body["message"].as_str().unwrap_or_default();
                                assert!(
                                    message.starts_with("Service Unavailable: too many writes are waiting"),
                                    "{body}"
                                );
                                let wait: u64 =
                                    r.header("retry-after").and_then(|v| v.parse().ok()).expect("Retry-After");
                                assert!((1..=60).contains(&wait), "{wait}");
                                refused.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(20));
                            }
                            other => panic!("track answered {other}: {}", String::from_utf8_lossy(&r.body)),
                        }
                    }
                });
            }
            for c in 0..2 {
                let (key, acked, loading, reading) = (&key, &acked, &loading, &reading);
                let (loaded, draining, failed, stale) = (&loaded, &draining, &failed, &stale);
                s.spawn(move || {
                    let mut conn = Conn::open(server.port).unwrap();
                    let mut rng = Rng::new(100 + c);
                    while reading.load(Ordering::Relaxed) {
                        let u = rng.below(self.users);
                        let before = acked[u as usize].load(Ordering::SeqCst);
                        let during_load = loading.load(Ordering::Relaxed);
                        let started = Instant::now();
                        let body = json!({"external_ids": [format!("u{u}")]});
                        let r = conn.post("/users/export/ids", key, &body).unwrap();
                        let took = started.elapsed();
                        if during_load { loaded } else { draining }.lock().unwrap().push(took);
                        if r.status != 201 {
                            failed.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        let n = r.json()["users"][0]["custom_attributes"]["n"].as_u64().unwrap_or(0);
                        if n < before {
                            stale
                                .lock()
                                .unwrap()
                                .push(format!("u{u}: {before} acknowledged before the read, {n} read"));
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                });
            }
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(self.load_secs) {
                rss_max = rss_max.max(server.rss());
                std::thread::sleep(Duration::from_millis(200));
            }
            at_end = server.conn().send("GET", "/_engage/queue", ADMIN, None).unwrap().json();
            rss_max = rss_max.max(server.rss());
            loading.store(false, Ordering::Relaxed);
            drain = drained(&server, Duration::from_secs(600));
            reading.store(false, Ordering::Relaxed);
        });
        let users: Vec<String> = (0..self.users).map(|u| format!("u{u}")).collect();
        let counts = read_counts(&server, &key, &users);
        BacklogOutcome {
            sent: sent.into_inner(),
            refused: refused.into_inner(),
            at_end,
            drain,
            rss_max,
            reads_loaded: loaded.into_inner().unwrap(),
            reads_draining: draining.into_inner().unwrap(),
            failed_reads: failed.into_inner(),
            stale_reads: stale.into_inner().unwrap(),
            acked: acked.iter().map(|a| a.load(Ordering::SeqCst)).collect(),
            found: users.iter().map(|u| counts.get(u).map_or(0, |c| c.0)).collect(),
        }
    }
}

impl BacklogOutcome {
    /// Prints the figures, and checks what every run must hold: reads never fail
    /// and see every write acknowledged before them; every 201 applied exactly once.
    fn report_and_check(mut self, what: &str, setup: &Backlog) -> BacklogOutcome {
        let pending = self.at_end["pending"].as_u64().unwrap_or(0);
        let mut line = format!(
            "{what}: {} track requests of {} users in {} s, {} refused 503; {pending} jobs pending as the load stopped, drained {:?} later; server RSS at most {} MiB",
            self.sent, setup.per_request, setup.load_secs, self.refused, self.drain, self.rss_max >> 20
        );
        for (phase, reads) in
            [("during the load", &mut self.reads_loaded), ("during the drain", &mut self.reads_draining)]
        {
            let n = reads.len();
            let (p50, p99, max) = (percentile(reads, 50.0), percentile(reads, 99.0), percentile(reads, 100.0));
            line.push_str(&format!("; {n} reads {phase}: p50 {p50:?}, p99 {p99:?}, max {max:?}"));
        }
        eprintln!("{line}");
        assert_eq!(self.failed_reads, 0, "reads failed during the backlog");
        assert!(self.stale_reads.is_empty(), "reads missed acknowledged writes: {:?}", self.stale_reads);
        assert!(!self.reads_loaded.is_empty(), "reads were answered during the load");
        for (u, (acked, found)) in self.acked.iter().zip(&self.found).enumerate() {
            assert_eq!(acked, found, "u{u}: every 201 applied once, nothing refused applied");
        }
        self
    }
}

#[test]
fn reads_during_a_long_backlog_answer_and_see_every_acknowledged_write() {
    let setup =
        Backlog { per_request: 50, users: 5000, load_secs: env_or("ENGAGE_BACKLOG_LOAD_SECS", 15), bound_secs: 0 };
    let outcome = setup.run().report_and_check("unbounded backlog", &setup);
    assert!(outcome.at_end["pending"].as_u64().unwrap_or(0) > 0, "there was a backlog to read through");
}

#[test]
fn a_hundred_thousand_small_jobs_pending_keep_the_server_under_200_mib() {
    // 45 s: at 30 s a machine whose applier kept up better left 88,246 (CI, 2026-12-02).
    let setup = Backlog { per_request: 1, users: 5000, load_secs: 45, bound_secs: 0 };
    let outcome = setup.run().report_and_check("small jobs", &setup);
    let pending = outcome.at_end["pending"].as_u64().unwrap_or(0);
    assert!(pending >= 100_000, "the load left {pending} jobs pending, fewer than the 100,000 this is about");
    assert!(outcome.rss_max < 200 << 20, "RSS {} MiB", outcome.rss_max >> 20);
}

#[test]
fn the_backlog_is_bounded_in_seconds_of_applying_and_every_201_is_applied() {
    let setup =
        Backlog { per_request: 75, users: 20_000, load_secs: env_or("ENGAGE_BACKLOG_LOAD_SECS", 15), bound_secs: 3 };
    let outcome = setup.run().report_and_check("bounded backlog", &setup);
    assert!(outcome.refused > 0, "the load outran the applier, so some requests were refused");
    // The drain takes about the bound at the rate measured; a generous factor for a
    // busy machine (unbounded, the same load leaves minutes).
    assert!(outcome.drain < Duration::from_secs(setup.bound_secs * 10), "drained {:?} after the load", outcome.drain);
    assert!(outcome.rss_max < 200 << 20, "RSS {} MiB", outcome.rss_max >> 20);
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

/// The WAL's size and the queue's files' (segments and spares), in bytes, beside `db`.
fn leftovers(db: &std::path::Path) -> (u64, u64) {
    let (wal, queue, _) = leftover_files(db);
    (wal, queue)
}

/// The WAL's size, the queue files' total size, and the queue segments' names.
fn leftover_files(db: &std::path::Path) -> (u64, u64, Vec<String>) {
    let wal = support::wal_bytes(db);
    let (mut queue, mut segments) = (0, Vec::new());
    for e in std::fs::read_dir(db.parent().unwrap()).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.contains("-queue.") && (name.ends_with(".spare") || name.ends_with(".log")) {
            queue += e.metadata().map_or(0, |m| m.len());
            if name.ends_with(".log") {
                segments.push(name);
            }
        }
    }
    (wal, queue, segments)
}

#[test]
fn space_comes_back_once_the_backlog_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SmallFs::mount(&dir.path().join("room"), 1024);
    let db = fs.0.join("e.db");
    let key = key(&db);
    let server = Server::start(&db, &["--no-rate-limits", "--admin-token", ADMIN, "--max-backlog-secs", "0"], &[]);
    // 8 clients, one new user a request with a 50 KB list attribute: several 64 MiB
    // queue segments, and profile writes that grow the WAL.
    let sent_bytes = AtomicU64::new(0);
    let (mut wal_max, mut queue_max) = (0, 0);
    // Segments are counted by name: an applier that keeps up deletes each one soon
    // after the next begins, so the bytes present at once say little of how many
    // there were (a faster machine once never held more than 128 MiB).
    let mut segments = std::collections::BTreeSet::new();
    std::thread::scope(|s| {
        for c in 0..8 {
            let (key, sent_bytes) = (&key, &sent_bytes);
            s.spawn(move || {
                let mut conn = Conn::open(server.port).unwrap();
                let list: Vec<String> = (0..200).map(|n| format!("{n:0>250}")).collect();
                let mut i = 0;
                while sent_bytes.load(Ordering::Relaxed) < 200 << 20 {
                    let user = format!("s{c}-{i}");
                    let body = json!({"attributes": [{"external_id": user, "a": i, "list": list}]});
                    let r = conn.post("/users/track", key, &body).unwrap();
                    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
                    sent_bytes.fetch_add(50_000, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
        while sent_bytes.load(Ordering::Relaxed) < 200 << 20 {
            let (wal, queue, names) = leftover_files(&db);
            (wal_max, queue_max) = (wal_max.max(wal), queue_max.max(queue));
            segments.extend(names);
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    drained(&server, Duration::from_secs(300));
    let started = Instant::now();
    let (mut wal, mut queue, names) = leftover_files(&db);
    segments.extend(names);
    // The active segment stays (at most 64 MiB); the WAL goes back to nothing.
    while (wal > 4 << 20 || queue > 64 << 20) && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(250));
        (wal, queue) = leftovers(&db);
        (wal_max, queue_max) = (wal_max.max(wal), queue_max.max(queue));
    }
    eprintln!(
        "space test: during the load WAL up to {} MiB, queue files up to {} MiB, {} segments; {:?} after the queue drained: WAL {} KiB, queue files {} MiB",
        wal_max >> 20,
        queue_max >> 20,
        segments.len(),
        started.elapsed(),
        wal >> 10,
        queue >> 20
    );
    assert!(segments.len() >= 3, "the load filled several queue segments: {segments:?}");
    assert!(queue <= 64 << 20, "retired queue segments are deleted once the queue drains: {} MiB", queue >> 20);
    assert!(wal <= 4 << 20, "the WAL is truncated once the queue drains: {} MiB", wal >> 20);
}
