//! The test kit's costs, as a suite that uses it pays them:
//! `cargo bench -p engage --bench kit` starts the release `engage serve` (a
//! throwaway database, as a test suite runs it) and prints:
//! - per-test overhead: a new workspace with its key, then its removal
//!   (`POST /_engage/workspaces`, `POST /_engage/reset?workspace=W&keep=none`), the
//!   median and p95 of the pair over `KIT_TESTS` (500) tests;
//! - a snapshot of a workspace of `KIT_USERS` (10,000) users: its restore after a
//!   test changed 100 of them, against resetting the workspace and loading the
//!   same fixtures again, the median of 5 each;
//! - the request journal's memory: the server's resident memory before and after
//!   `KIT_REQUESTS` (100,000) journaled requests with 1 KiB bodies kept whole, against
//!   the journal's documented bound (1,000 entries, 16 MiB of bodies).

#[path = "../tests/native/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{percentile, Conn, Server};

const ADMIN: &str = "kit-bench-admin-token-0123456789abcdef";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn ok(conn: &mut Conn, method: &str, path: &str, auth: &str, body: Option<&Value>) -> Value {
    let r = conn.send(method, path, auth, body).expect("the server answered");
    assert!(r.status < 300, "{method} {path}: {} {}", r.status, String::from_utf8_lossy(&r.body));
    serde_json::from_slice(&r.body).unwrap_or(Value::Null)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn fixture_overhead(server: &Server) {
    let mut conn = server.conn();
    let tests = env_or("KIT_TESTS", 500);
    let mut took = Vec::with_capacity(tests);
    for n in 0..tests {
        let started = Instant::now();
        let made = ok(&mut conn, "POST", "/_engage/workspaces", ADMIN, Some(&json!({"name": format!("bench-{n}")})));
        assert!(made["api_key"].is_string());
        ok(&mut conn, "POST", &format!("/_engage/reset?workspace=bench-{n}&keep=none"), ADMIN, None);
        took.push(started.elapsed());
    }
    let (p50, p95) = (percentile(&mut took, 50.0), percentile(&mut took, 95.0));
    println!(
        "| per-test overhead (workspace + key, then removed) | {tests} tests | median {:.2} ms, p95 {:.2} ms |",
        ms(p50),
        ms(p95)
    );
}

/// The fixtures file of `users` users in workspace `ws`, as a suite writes one.
fn fixtures(ws: &str, key: &str, users: usize) -> Value {
    let batches: Vec<Value> = (0..users)
        .collect::<Vec<_>>()
        .chunks(75)
        .map(|chunk| {
            let attributes: Vec<Value> = chunk
                .iter()
                .map(|i| json!({"external_id": format!("u{i}"), "email": format!("u{i}@example.com"), "first_name": "Ann", "plan": "pro", "visits": i % 97}))
                .collect();
            json!({"attributes": attributes})
        })
        .collect();
    json!({"workspaces": {ws: {"keys": [{"key": key, "permissions": "all"}], "users": batches}}})
}

fn snapshot_restore(server: &Server) {
    let mut conn = server.conn();
    let users = env_or("KIT_USERS", 10_000);
    let key = "kit-bench-key-0123456789abcdef0123456789";
    let file = fixtures("snap", key, users);
    ok(&mut conn, "POST", "/_engage/seed", ADMIN, Some(&file));
    let saved = ok(&mut conn, "POST", "/_engage/snapshots/seeded?workspace=snap", ADMIN, None);
    let (mut restores, mut reseeds) = (Vec::new(), Vec::new());
    for round in 0..5 {
        // A test's changes: 100 users changed, 10 new (two requests of 55).
        for half in 0..2 {
            let changed: Vec<Value> = (0..55)
                .map(|i| json!({"external_id": format!("u{}", (half * 55 + i) * 7 + round), "plan": "free"}))
                .collect();
            ok(&mut conn, "POST", "/users/track", key, Some(&json!({"attributes": changed})));
        }
        let started = Instant::now();
        ok(&mut conn, "POST", "/_engage/snapshots/seeded/restore?workspace=snap", ADMIN, None);
        restores.push(started.elapsed());
    }
    for _ in 0..5 {
        let started = Instant::now();
        ok(&mut conn, "POST", "/_engage/reset?workspace=snap", ADMIN, None);
        ok(&mut conn, "POST", "/_engage/seed", ADMIN, Some(&file));
        reseeds.push(started.elapsed());
    }
    // After a reload every profile has new ids: the restore writes the whole workspace.
    let started = Instant::now();
    let whole = ok(&mut conn, "POST", "/_engage/snapshots/seeded/restore?workspace=snap", ADMIN, None);
    let rewrite = started.elapsed();
    let (restore, reseed) = (percentile(&mut restores, 50.0), percentile(&mut reseeds, 50.0));
    println!(
        "| snapshot restore ({} documents) | {users} users, 110 changed | median {:.1} ms; reset + seed again {:.1} ms; ratio {:.3} |",
        saved["documents"],
        ms(restore),
        ms(reseed),
        restore.as_secs_f64() / reseed.as_secs_f64()
    );
    println!(
        "| snapshot restore, every document different | {users} users | {:.1} ms ({} written, {} removed) |",
        ms(rewrite),
        whole["written"],
        whole["removed"]
    );
}

fn journal_memory(server: &Server) {
    let mut conn = server.conn();
    let requests = env_or("KIT_REQUESTS", 100_000);
    let made = ok(&mut conn, "POST", "/_engage/workspaces", ADMIN, Some(&json!({"name": "journal"})));
    let key = made["api_key"].as_str().expect("key").to_string();
    let padding = "x".repeat(1000);
    let before = server.rss();
    let mut peak = before;
    for n in 0..requests {
        let body = json!({"attributes": [{"external_id": format!("j{}", n % 1000), "note": padding}]});
        ok(&mut conn, "POST", "/users/track", &key, Some(&body));
        if n % 10_000 == 0 {
            peak = peak.max(server.rss());
        }
    }
    let after = server.rss();
    let kept = ok(&mut conn, "GET", "/_engage/journal", ADMIN, None);
    println!(
        "| journal memory | {requests} requests, 1 KiB bodies kept | RSS {:.1} MiB before, {:.1} MiB after (peak {:.1}); {} entries kept; bound 1,000 entries, 16 MiB of bodies |",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        peak.max(after) as f64 / 1048576.0,
        kept["requests"].as_array().map_or(0, Vec::len)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter picks phases by name.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wants = |name: &str| only.is_empty() || only.iter().any(|o| name.contains(o.as_str()));
    println!("| measure | set | result |\n|---|---|---|");
    let start = || Server::start(Path::new(":memory:"), &["--admin-token", ADMIN, "--no-rate-limits"], &[]);
    if wants("overhead") {
        fixture_overhead(&start());
    }
    if wants("snapshot") {
        snapshot_restore(&start());
    }
    if wants("journal") {
        journal_memory(&start());
    }
}
