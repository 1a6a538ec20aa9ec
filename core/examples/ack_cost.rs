//! Measures the CPU cost of acknowledging one full /users/track batch on the
//! in-memory store (parse, validate, serialise the job, enqueue) and of applying it.
//! `cargo run --release -p engage-core --example ack_cost`

use std::time::Instant;

use engage_core::provision::{create_key, Permission, WorkspaceName};
use engage_core::store::memory::MemoryStore;
use engage_core::{Config, Ctx, Engine, Method, Request, Timestamp};
use serde_json::{json, Value};

fn main() {
    let engine = Engine::new(MemoryStore::new(), Config { rate_limits: false, ..Config::default() });
    let ws = WorkspaceName::parse("w").unwrap();
    let mut n = 0u64;
    let mut ctx = || {
        n += 1;
        let mut seed = [0u8; 16];
        seed[..8].copy_from_slice(&n.to_le_bytes());
        Ctx::new(Timestamp(1_800_000_000_000), seed)
    };
    let key = pollster::block_on(create_key(engine.store(), &ws, Permission::ALL.to_vec(), ctx())).unwrap();
    let body = |k: u64| {
        let u = |i: u64| format!("user-{}", (k * 7919 + i * 104729) % 1_000_000);
        let attributes: Vec<Value> = (0..75)
            .map(|i| json!({"external_id": u(i), "first_name": "Bench", "visits": {"inc": 1}, "tier": "t1"}))
            .collect();
        let events: Vec<Value> = (0..75).map(|i| json!({"external_id": u(i + 75), "name": "viewed_item", "time": "2026-11-01T10:00:00Z", "properties": {"item": "sku-1", "price": 9.99}})).collect();
        let purchases: Vec<Value> = (0..75).map(|i| json!({"external_id": u(i + 150), "product_id": "sku-1", "currency": "USD", "price": 9.99, "quantity": 1, "time": "2026-11-01T10:00:00Z"})).collect();
        serde_json::to_vec(&json!({"attributes": attributes, "events": events, "purchases": purchases})).unwrap()
    };
    let bodies: Vec<Vec<u8>> =
        (0..std::env::var("BATCHES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)).map(body).collect();
    let started = Instant::now();
    for b in &bodies {
        let req = Request::new(Method::Post, "/users/track")
            .header("Authorization", &format!("Bearer {key}"))
            .body(b.clone());
        let r = pollster::block_on(engine.handle(req, ctx()));
        assert_eq!(r.status, 201);
    }
    let ack = started.elapsed() / bodies.len() as u32;
    if std::env::var("ONLY_ACK").is_ok() {
        println!("acknowledge {ack:?}");
        return;
    }
    let started = Instant::now();
    let mut applied = 0;
    loop {
        let k = pollster::block_on(engine.apply_queued(ctx())).unwrap().applied;
        if k == 0 {
            break;
        }
        applied += k;
    }
    let apply = started.elapsed() / applied as u32;
    println!("per full batch (225 objects): acknowledge {ack:?}, apply {apply:?} (memory store, {applied} batches)");
}
