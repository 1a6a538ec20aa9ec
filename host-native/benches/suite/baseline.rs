//! The two baselines the figures are compared with, run in the same session:
//! a bare hyper + serde server that parses a body and answers without storing
//! anything, and a bare rusqlite writer that applies the same objects as plain
//! row-per-object read-modify-writes, one transaction per batch.

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rusqlite::{params, Connection};
use serde_json::Value;

use crate::bodies::{Rng, Users};
use crate::seed::{root, user};

/// Starts the bare server on `rt` and returns its base URL: every request's body is
/// parsed into a `serde_json::Value` and answered 201 `{"message":"success"}`.
pub fn bare_server(rt: &tokio::runtime::Runtime) -> String {
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                    let (status, answer) = match serde_json::from_slice::<Value>(&body) {
                        Ok(_) => (201, &br#"{"message":"success"}"#[..]),
                        Err(_) => (400, &br#"{"message":"bad json"}"#[..]),
                    };
                    let resp = Response::builder()
                        .status(status)
                        .header("Content-Type", "application/json")
                        .body(Full::new(Bytes::from_static(answer)))
                        .expect("response");
                    Ok::<_, Infallible>(resp)
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    format!("http://{addr}")
}

/// A profile-like document (the seed's profiles are about this size).
fn doc(i: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "external_id": user(i), "created": 1_700_000_000_000u64, "custom": {"plan": "free"},
        "events": {}, "purchases": {}, "visits": 0
    }))
    .unwrap()
}

/// The bare writer's table of `profiles` rows, made once.
fn bare_db(profiles: u64) -> PathBuf {
    let path = root().join(format!("bare-{profiles}.db"));
    if path.exists() {
        return path;
    }
    let tmp = path.with_extension("partial");
    let _ = std::fs::remove_file(&tmp);
    let mut c = Connection::open(&tmp).expect("open");
    c.execute_batch("PRAGMA page_size = 1024; PRAGMA journal_mode = WAL; CREATE TABLE docs (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        .expect("schema");
    let tx = c.transaction().expect("tx");
    {
        let mut st = tx.prepare("INSERT INTO docs (key, value) VALUES (?1, ?2)").expect("prepare");
        for i in 0..profiles {
            st.execute(params![user(i), doc(i)]).expect("insert");
        }
    }
    tx.commit().expect("commit");
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").expect("checkpoint");
    drop(c);
    std::fs::rename(&tmp, &path).expect("rename");
    path
}

/// Objects per second the bare writer applies over `seconds`: batches of 225
/// objects on users drawn like the track load's, each object a read of its row, a
/// JSON decode, one counter bumped, an encode and a write, one transaction (WAL,
/// synchronous NORMAL, like the server's applier) per batch.
pub fn bare_writer(profiles: u64, users: Users, seconds: u64) -> f64 {
    let db = root().join("bare-run.db");
    let _ = std::fs::remove_file(&db);
    std::fs::copy(bare_db(profiles), &db).expect("copy");
    let mut c = Connection::open(&db).expect("open");
    c.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL").expect("pragmas");
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let (started, mut objects) = (Instant::now(), 0u64);
    while started.elapsed() < Duration::from_secs(seconds) {
        let tx = c.transaction().expect("tx");
        {
            let mut read = tx.prepare_cached("SELECT value FROM docs WHERE key = ?1").expect("prepare");
            let mut write = tx.prepare_cached("UPDATE docs SET value = ?2 WHERE key = ?1").expect("prepare");
            for _ in 0..225 {
                let key = user(users.pick(&mut rng, profiles));
                let value: Vec<u8> = read.query_row(params![key], |r| r.get(0)).expect("read");
                let mut v: Value = serde_json::from_slice(&value).expect("decode");
                v["visits"] = (v["visits"].as_u64().unwrap_or(0) + 1).into();
                write.execute(params![key, serde_json::to_vec(&v).expect("encode")]).expect("write");
            }
        }
        tx.commit().expect("commit");
        objects += 225;
    }
    let rate = objects as f64 / started.elapsed().as_secs_f64();
    drop(c);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    rate
}
