//! Load benchmark of the track write path: full `/users/track` batches (75
//! attributes + 75 events + 75 purchases, each on a random existing profile) sent
//! at a fixed offered rate against the release server over N pre-seeded profiles.
//!
//! Reports acknowledged requests/s, latency percentiles measured from each
//! request's scheduled send time (so a stalled server cannot hide its queueing),
//! the rate at which the backlog is applied, and the time to drain it.
//!
//! `cargo bench -p engage --bench track_load`; knobs (environment):
//! `BENCH_PROFILES` (1000000), `BENCH_RATE` (1000 req/s), `BENCH_SECONDS` (60),
//! `BENCH_CONNECTIONS` (64), `BENCH_TARGET` (a base URL: load an already running
//! server instead, e.g. wrangler dev; then `BENCH_KEY` is its API key and seeding
//! and backlog measurement are skipped).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

// The suite's seeds, request bodies and HTTP client (`benches/suite`); this run uses a part of each.
#[allow(dead_code)]
#[path = "suite/bodies.rs"]
mod bodies;
#[allow(dead_code)]
#[path = "suite/load.rs"]
mod load;
#[allow(dead_code)]
#[path = "suite/seed.rs"]
mod seed;

use bytes::Bytes;
use engage::server::{run, SharedEngine};
use engage::store::SqliteStore;
use engage_core::provision::{self, Permission, WorkspaceName};
use engage_core::{Config, Engine};

/// Removes this run's database and queue when the run ends.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        seed::remove_db(&self.0);
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Jobs applied so far (the cursor in the database).
fn applied(db: &Path) -> i64 {
    let c = rusqlite::Connection::open(db).expect("open");
    c.query_row("SELECT applied FROM queue_cursor", [], |r| r.get(0)).expect("cursor")
}

/// CPU seconds used so far by this process's threads, summed by thread name.
fn cpu_by_thread() -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let tick = 100.0; // USER_HZ on Linux
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        let ticks: f64 = fields.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
            + fields.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
        *out.entry(name).or_insert(0.0) += ticks / tick;
    }
    out
}

/// Cores each thread name used between two readings `seconds` apart (the busy ones).
fn cpu_used(
    before: &std::collections::BTreeMap<String, f64>,
    after: &std::collections::BTreeMap<String, f64>,
    seconds: f64,
) -> String {
    let used: Vec<String> = after
        .iter()
        .map(|(name, t)| (name, t - before.get(name).copied().unwrap_or(0.0)))
        .filter(|(_, t)| *t > 0.05)
        .map(|(name, t)| format!("{name} {:.2}", t / seconds))
        .collect();
    used.join(", ")
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` probes; nothing to run there.
    }
    let profiles = env_or("BENCH_PROFILES", 1_000_000);
    let rate = env_or("BENCH_RATE", 1000);
    let seconds = env_or("BENCH_SECONDS", 60);
    let connections = env_or("BENCH_CONNECTIONS", 64) as usize;
    let target = std::env::var("BENCH_TARGET").ok();

    let root = seed::root();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();

    let (base, key, db) = match &target {
        Some(t) => (t.trim_end_matches('/').to_string(), std::env::var("BENCH_KEY").expect("BENCH_KEY"), None),
        None => {
            let seed = seed::seed(profiles);
            let db = root.join("run.db");
            seed::fresh_copy(&seed, &db);
            let store = SqliteStore::open(&db).unwrap();
            let ws = WorkspaceName::parse("bench").unwrap();
            let key = pollster::block_on(provision::create_key(&store, &ws, Permission::ALL.to_vec(), engage::ctx()))
                .unwrap();
            let config = Config {
                rate_limits: false,
                apply_batch: std::env::var("BENCH_APPLY_BATCH")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(engage::server::APPLY_BATCH),
                applies_in_background: true,
                ..Config::default()
            };
            let engine: SharedEngine = Arc::new(Engine::new(engage::store::NativeStore::Sqlite(store), config));
            let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
            let addr = listener.local_addr().unwrap();
            runtime.spawn(async move { run(engine, listener, std::future::pending()).await });
            (format!("http://{addr}"), key, Some(db))
        }
    };

    // Removes this run's database and queue when the run ends, so the next run frees
    // nothing at its start: freeing GBs of blocks on a file system mounted with
    // `discard` kept the disk busy into the first second of the next load.
    let _cleanup = db.clone().map(RemoveOnDrop);
    eprintln!("generating request bodies");
    let mut rng = bodies::Rng(0x9E37_79B9_7F4A_7C15);
    let bodies: Arc<Vec<Bytes>> = Arc::new(
        (0..1000).map(|_| Bytes::from(bodies::track_batch(&mut rng, profiles, bodies::Users::Uniform))).collect(),
    );
    eprintln!(
        "body size {} bytes; offering {rate} req/s for {seconds}s over {connections} connections",
        bodies[0].len()
    );

    let total = rate * seconds;
    let client = load::client(connections);
    let target = Arc::new(load::Target { base, key });
    let limiter = Arc::new(tokio::sync::Semaphore::new(connections));
    let cpu_before = cpu_by_thread();
    let started = Instant::now();
    let results = runtime.block_on(async {
        let mut handles = Vec::with_capacity(total as usize);
        for i in 0..total {
            let scheduled = started + Duration::from_secs_f64(i as f64 / rate as f64);
            tokio::time::sleep_until(scheduled.into()).await;
            let permit = limiter.clone().acquire_owned().await.unwrap();
            let req = load::Req {
                method: hyper::Method::POST,
                path: "/users/track".to_string(),
                body: bodies[(i % 1000) as usize].clone(),
            };
            let (client, target) = (client.clone(), target.clone());
            handles.push(tokio::spawn(async move {
                let outcome = load::send(&client, &target, &req, 201).await;
                drop(permit);
                (outcome, scheduled.elapsed().as_micros() as u64, Instant::now())
            }));
        }
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.push(h.await.unwrap());
        }
        out
    });
    let load_elapsed = started.elapsed().as_secs_f64();
    let cpu_after = cpu_by_thread();
    let acked = results.iter().filter(|r| r.0.is_ok()).count();
    let first_failure = results.iter().find_map(|r| r.0.as_ref().err());
    let mut lat: Vec<u64> = results.iter().filter(|r| r.0.is_ok()).map(|r| r.1).collect();
    lat.sort_unstable();
    let last_ack = results.iter().map(|r| r.2).max().unwrap_or(started);
    let ack_window = last_ack.duration_since(started).as_secs_f64();

    println!("track load: {profiles} profiles, offered {rate} req/s x {seconds}s, {} bytes/request", bodies[0].len());
    println!(
        "  acknowledged: {acked}/{total} ({} failed) in {ack_window:.1}s = {:.0} req/s",
        total as usize - acked,
        acked as f64 / ack_window
    );
    if let Some(failure) = first_failure {
        println!("  first failure: {failure}");
    }
    println!(
        "  latency from scheduled send: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        pct(&lat, 0.5),
        pct(&lat, 0.9),
        pct(&lat, 0.99),
        pct(&lat, 1.0)
    );
    println!(
        "  CPU during load (cores, by thread name; client and server share tokio-rt-worker): {}",
        cpu_used(&cpu_before, &cpu_after, load_elapsed)
    );
    if std::env::var("BENCH_TIMELINE").is_ok() {
        // p99 of each second of scheduled sends: tells a steady state from stalls.
        // BENCH_TIMELINE=<10..1000> buckets by that many ms instead (the first seconds of a cold server).
        let bucket_ms = match env_or("BENCH_TIMELINE", 1000) {
            ms @ 10..=1000 => ms,
            _ => 1000,
        };
        let per = ((rate * bucket_ms) / 1000).max(1) as usize;
        for (s, chunk) in results.chunks(per).enumerate() {
            let mut l: Vec<u64> = chunk.iter().filter(|r| r.0.is_ok()).map(|r| r.1).collect();
            l.sort_unstable();
            let at = s as u64 * bucket_ms;
            println!(
                "    second {}.{:03}: p50 {:.1} ms, p99 {:.1} ms",
                at / 1000,
                at % 1000,
                pct(&l, 0.5),
                pct(&l, 0.99)
            );
        }
    }
    if let Some(db) = db {
        // A fresh copy of the seed: every acknowledged request is one queued job.
        let (applied_at_end, tail) = (applied(&db), acked as i64);
        println!(
            "  applied during load: {applied_at_end} batches ({:.0} batches/s, {:.0} objects/s)",
            applied_at_end as f64 / load_elapsed,
            applied_at_end as f64 * 225.0 / load_elapsed
        );
        // BENCH_DRAIN_SECONDS bounds the wait (a 60 s load leaves a backlog that
        // takes many minutes): the rate is then measured over that window.
        let drain_limit = Duration::from_secs(env_or("BENCH_DRAIN_SECONDS", u64::MAX / 4));
        let drain_started = Instant::now();
        let cpu_drain_before = cpu_by_thread();
        let mut now_applied = applied_at_end;
        let timeline = std::env::var("BENCH_TIMELINE").is_ok();
        let (mut mark, mut mark_at) = (now_applied, Instant::now());
        while now_applied < tail && drain_started.elapsed() < drain_limit {
            std::thread::sleep(Duration::from_millis(200));
            now_applied = applied(&db);
            if timeline && mark_at.elapsed() >= Duration::from_secs(5) {
                // The apply rate of each 5 s of the drain: tells warm-up from steady state.
                let rate = (now_applied - mark) as f64 / mark_at.elapsed().as_secs_f64();
                println!("    drain {:.0}s: {rate:.0} batches/s", drain_started.elapsed().as_secs_f64());
                (mark, mark_at) = (now_applied, Instant::now());
            }
        }
        let drained = drain_started.elapsed().as_secs_f64();
        println!(
            "  CPU while draining (cores, by thread name): {}",
            cpu_used(&cpu_drain_before, &cpu_by_thread(), drained)
        );
        let peak_rss = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l[6..].trim().to_string()))
            .unwrap_or_default();
        println!("  peak resident memory (server and load generator): {peak_rss}");
        if now_applied < tail {
            let done = now_applied - applied_at_end;
            println!(
                "  backlog: {done} of {} batches applied in {drained:.1}s after the load = {:.0} batches/s ({:.0} objects/s)",
                tail - applied_at_end,
                done as f64 / drained,
                done as f64 * 225.0 / drained
            );
            return;
        }
        let all = started.elapsed().as_secs_f64();
        println!(
            "  backlog of {} batches drained in {drained:.1}s; overall apply rate {:.0} batches/s = {:.0} objects/s",
            tail - applied_at_end,
            tail as f64 / all,
            tail as f64 * 225.0 / all
        );
    }
}
