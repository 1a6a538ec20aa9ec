//! The baselines the figures are compared with, run in the same session: a bare
//! hyper + serde server that parses a body and answers without storing anything; a
//! bare rusqlite writer that applies the same objects as plain row-per-object
//! read-modify-writes, one transaction per batch; and, for the endpoints, bare
//! hyper + rusqlite servers that read 50 documents by key (export) or make one
//! durable read-modify-write per request (`/users/track/sync`); and a bare pipeline
//! of the three (parse, group fdatasync, writer) for the sustainable rate.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rusqlite::{params, Connection};
use serde_json::Value;

use engage::store::sqlite::connection::WRITER_CACHE_KIB;

use crate::bodies::{Rng, Users};
use crate::seed::{root, user};

/// Serves HTTP/1.1 on a new port on `rt`: every request's body is read whole and
/// `answer` gives the status and JSON body. Returns the base URL.
fn serve<F, Fut>(rt: &tokio::runtime::Runtime, answer: F) -> String
where
    F: Fn(Bytes) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = (u16, Vec<u8>)> + Send + 'static,
{
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().expect("addr");
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let answer = answer.clone();
                    async move {
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let (status, body) = answer(body).await;
                        let resp = Response::builder()
                            .status(status)
                            .header("Content-Type", "application/json")
                            .body(Full::new(Bytes::from(body)))
                            .expect("response");
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    format!("http://{addr}")
}

const SUCCESS: &[u8] = br#"{"message":"success"}"#;

/// Starts the bare server on `rt` and returns its base URL: every request's body is
/// parsed into a `serde_json::Value` and answered 201 `{"message":"success"}`.
pub fn bare_server(rt: &tokio::runtime::Runtime) -> String {
    serve(rt, |body| async move {
        match serde_json::from_slice::<Value>(&body) {
            Ok(_) => (201, SUCCESS.to_vec()),
            Err(_) => (400, br#"{"message":"bad json"}"#.to_vec()),
        }
    })
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
    // A cache that holds the whole table while it is built: the keys (`user-{i}`)
    // arrive out of text order, and a 10M-row build spilling a small cache to disk
    // would take the better part of an hour. Runs open the copy with Engage's writer cache.
    c.execute_batch("PRAGMA page_size = 1024; PRAGMA journal_mode = WAL; PRAGMA cache_size = -4000000; CREATE TABLE docs (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
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
    let db = bare_copy(profiles, "run");
    let mut c = open_writer(&db, "NORMAL");
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let (started, mut objects) = (Instant::now(), 0u64);
    while started.elapsed() < Duration::from_secs(seconds) {
        let keys: Vec<String> = (0..225).map(|_| user(users.pick(&mut rng, profiles))).collect();
        apply_objects(&mut c, &keys);
        objects += 225;
    }
    let rate = objects as f64 / started.elapsed().as_secs_f64();
    drop(c);
    crate::seed::remove_db(&db);
    rate
}

/// A bare baseline's writing connection on `db`: WAL, `synchronous` as given, and
/// the page cache of Engage's writer connection ([`WRITER_CACHE_KIB`]), so that a
/// floor has the memory Engage has and both lose the same to a larger table.
fn open_writer(db: &Path, synchronous: &str) -> Connection {
    let c = Connection::open(db).expect("open");
    c.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; PRAGMA cache_size = -{WRITER_CACHE_KIB}"
    ))
    .expect("pragmas");
    c
}

/// The bare writer's unit of work: one transaction in which each of `keys` is a read
/// of its row, a JSON decode, one counter bumped, an encode and a write.
fn apply_objects(c: &mut Connection, keys: &[String]) {
    let tx = c.transaction().expect("tx");
    {
        let mut read = tx.prepare_cached("SELECT value FROM docs WHERE key = ?1").expect("prepare");
        let mut write = tx.prepare_cached("UPDATE docs SET value = ?2 WHERE key = ?1").expect("prepare");
        for key in keys {
            let value: Vec<u8> = read.query_row(params![key], |r| r.get(0)).expect("read");
            let mut v: Value = serde_json::from_slice(&value).expect("decode");
            v["visits"] = (v["visits"].as_u64().unwrap_or(0) + 1).into();
            write.execute(params![key, serde_json::to_vec(&v).expect("encode")]).expect("write");
        }
    }
    tx.commit().expect("commit");
}

/// A bare hyper server whose every request runs `handle` on a blocking thread with
/// the request's body, answering `status` and what `handle` returns (500 and the
/// reason when it fails).
fn bare_with<F>(rt: &tokio::runtime::Runtime, status: u16, handle: F) -> String
where
    F: Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync + 'static,
{
    let handle = Arc::new(handle);
    serve(rt, move |body| {
        let handle = handle.clone();
        async move {
            match tokio::task::spawn_blocking(move || handle(&body)).await {
                Ok(Ok(answer)) => (status, answer),
                Ok(Err(e)) => (500, e.into_bytes()),
                Err(e) => (500, e.to_string().into_bytes()),
            }
        }
    })
}

/// A fresh copy of the bare writer's table of `profiles` rows, for one baseline:
/// flushed and the disk settled as for Engage's runs ([`crate::seed::fresh_copy`]),
/// so that no baseline runs beside the writeback of its own copy (gigabytes at 10M).
fn bare_copy(profiles: u64, name: &str) -> PathBuf {
    let db = root().join(format!("bare-{name}.db"));
    crate::seed::fresh_copy(&bare_db(profiles), &db);
    db
}

thread_local! {
    /// Each blocking thread's own read connection to the export baseline's table.
    static READER: std::cell::RefCell<Option<Connection>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` on this thread's read connection in `cell`, opening it to `db` at the
/// thread's first request.
fn with_reader<T>(
    cell: &'static std::thread::LocalKey<std::cell::RefCell<Option<Connection>>>,
    db: &Path,
    f: impl FnOnce(&Connection) -> Result<T, String>,
) -> Result<T, String> {
    cell.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(Connection::open(db).map_err(|e| e.to_string())?);
        }
        f(cell.as_ref().expect("opened"))
    })
}

/// The export baseline: bare hyper + rusqlite. Each request's `external_ids` are
/// read by key from a table of `profiles` documents (one connection per thread, as
/// the server's readers) and written back as a JSON array of the documents.
pub fn bare_export_server(rt: &tokio::runtime::Runtime, profiles: u64) -> String {
    let db = bare_copy(profiles, "export");
    bare_with(rt, 201, move |body| {
        let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let ids = v["external_ids"].as_array().ok_or("no external_ids")?;
        with_reader(&READER, &db, |c| {
            let mut st = c.prepare_cached("SELECT value FROM docs WHERE key = ?1").map_err(|e| e.to_string())?;
            let mut users = Vec::with_capacity(ids.len());
            for id in ids {
                let value: Vec<u8> =
                    st.query_row(params![id.as_str().unwrap_or("")], |r| r.get(0)).map_err(|e| e.to_string())?;
                users.push(serde_json::from_slice::<Value>(&value).map_err(|e| e.to_string())?);
            }
            serde_json::to_vec(&serde_json::json!({"users": users, "message": "success"})).map_err(|e| e.to_string())
        })
    })
}

thread_local! {
    /// Each blocking thread's own read connection to the copy of Engage's seed.
    static SEED_READER: std::cell::RefCell<Option<Connection>> = const { std::cell::RefCell::new(None) };
}

/// The export baseline on Engage's own tables: as [`bare_export_server`], but each
/// user is read from a copy of the seed the server runs on, as the server finds
/// it: the identifier entry by key (`idents`, workspace `bench`), then the
/// profile at the row the entry names. It separates what the layout costs (larger
/// records, a second table) from what the server adds over plain reads.
pub fn bare_export_on_seed_server(rt: &tokio::runtime::Runtime, seed: &Path) -> String {
    let db = root().join("bare-export-seed.db");
    crate::seed::fresh_copy(seed, &db);
    bare_with(rt, 201, move |body| {
        let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let ids = v["external_ids"].as_array().ok_or("no external_ids")?;
        with_reader(&SEED_READER, &db, |c| {
            let mut entry =
                c.prepare_cached("SELECT at FROM idents WHERE tbl = 4 AND key = ?1").map_err(|e| e.to_string())?;
            let mut profile = c.prepare_cached("SELECT value FROM docs WHERE rowid = ?1").map_err(|e| e.to_string())?;
            let mut users = Vec::with_capacity(ids.len());
            for id in ids {
                let key = format!("bench\u{1f}x\u{1f}{}", id.as_str().unwrap_or(""));
                let at: i64 = entry.query_row(params![key], |r| r.get(0)).map_err(|e| format!("{key}: {e}"))?;
                let value: Vec<u8> = profile.query_row(params![at], |r| r.get(0)).map_err(|e| e.to_string())?;
                users.push(serde_json::from_slice::<Value>(&value).map_err(|e| e.to_string())?);
            }
            serde_json::to_vec(&serde_json::json!({"users": users, "message": "success"})).map_err(|e| e.to_string())
        })
    })
}

/// The `/users/track/sync` baseline: bare hyper + rusqlite, one durable
/// read-modify-write transaction per request (`synchronous = FULL`, WAL) on the
/// document of the first event's `external_id`: read, decode, a counter bumped,
/// encode, write, commit.
pub fn bare_sync_server(rt: &tokio::runtime::Runtime, profiles: u64) -> String {
    let db = bare_copy(profiles, "sync");
    let conn = Mutex::new(open_writer(&db, "FULL"));
    bare_with(rt, 201, move |body| {
        let v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let key = v["events"][0]["external_id"].as_str().ok_or("no external_id")?.to_string();
        let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
        let tx = c.transaction().map_err(|e| e.to_string())?;
        let value: Vec<u8> = tx
            .prepare_cached("SELECT value FROM docs WHERE key = ?1")
            .and_then(|mut st| st.query_row(params![key], |r| r.get(0)))
            .map_err(|e| e.to_string())?;
        let mut doc: Value = serde_json::from_slice(&value).map_err(|e| e.to_string())?;
        doc["visits"] = (doc["visits"].as_u64().unwrap_or(0) + 1).into();
        let encoded = serde_json::to_vec(&doc).map_err(|e| e.to_string())?;
        tx.prepare_cached("UPDATE docs SET value = ?2 WHERE key = ?1")
            .and_then(|mut st| st.execute(params![key, encoded]))
            .map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())?;
        Ok(SUCCESS.to_vec())
    })
}

/// The acknowledgement baseline with durability counted: bare hyper + serde, each
/// parsed body appended to a file, and one `fdatasync` per group of the requests
/// waiting meanwhile (group commit) before any of them is answered 201.
pub fn bare_durable_server(rt: &tokio::runtime::Runtime) -> String {
    group_commit_server(rt, "bare-queue.log", |_| (), |()| {}, Arc::default())
}

/// Serves bodies as [`bare_durable_server`] does; `keep` takes what is kept of each
/// parsed body, and `then` is given it once the body is durable (before its 201).
/// Once `stop` is set, the next group is not written and its requests answer 500.
fn group_commit_server<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    log: &str,
    keep: impl Fn(&Value) -> T + Send + Sync + 'static,
    mut then: impl FnMut(T) + Send + 'static,
    stop: Arc<AtomicBool>,
) -> String {
    use std::io::Write;
    type Waiting<T> = (Bytes, T, tokio::sync::oneshot::Sender<()>);
    let (tx, rx) = std::sync::mpsc::channel::<Waiting<T>>();
    let path = root().join(log);
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("queue file");
    std::thread::spawn(move || {
        while let Ok(first) = rx.recv() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let mut group = vec![first];
            group.extend(rx.try_iter());
            for (body, _, _) in &group {
                file.write_all(&(body.len() as u32).to_le_bytes()).expect("write");
                file.write_all(body).expect("write");
            }
            file.sync_data().expect("fdatasync");
            for (_, kept, done) in group {
                then(kept);
                let _ = done.send(());
            }
        }
    });
    let (tx, keep) = (Arc::new(Mutex::new(tx)), Arc::new(keep));
    serve(rt, move |body| {
        let (tx, keep) = (tx.clone(), keep.clone());
        async move {
            let Ok(parsed) = serde_json::from_slice::<Value>(&body) else {
                return (400, br#"{"message":"bad json"}"#.to_vec());
            };
            let kept = keep(&parsed);
            let (done, wait) = tokio::sync::oneshot::channel();
            let sent = tx.lock().unwrap_or_else(|e| e.into_inner()).send((body, kept, done)).is_ok();
            if sent && wait.await.is_ok() {
                (201, SUCCESS.to_vec())
            } else {
                (500, br#"{"message":"not stored"}"#.to_vec())
            }
        }
    })
}

/// The bare pipeline, the sustainable rate's baseline: bare hyper + serde parse
/// (the objects' `external_id`s taken from the parsed body), each body appended to a
/// file with one `fdatasync` per group of waiting requests before their 201, and one
/// rusqlite writer applying every accepted batch as [`bare_writer`] does (each
/// object a read, decode, bump, encode and write; one transaction per batch),
/// behind the acknowledgements. Once it is dropped its threads do no more work: each
/// ends at its next message (the listener, like every bare server's, stays idle).
pub struct BarePipeline {
    pub base: String,
    accepted: Arc<AtomicU64>,
    applied: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl BarePipeline {
    /// Accepted batches not yet applied.
    pub fn pending(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst).saturating_sub(self.applied.load(Ordering::SeqCst))
    }
}

impl Drop for BarePipeline {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts a bare pipeline on `rt` over a fresh copy of the bare table of `profiles` rows.
pub fn bare_pipeline(rt: &tokio::runtime::Runtime, profiles: u64) -> BarePipeline {
    let db = bare_copy(profiles, "pipeline");
    let (accepted, applied, stop) =
        (Arc::<AtomicU64>::default(), Arc::<AtomicU64>::default(), Arc::<AtomicBool>::default());
    let (to_writer, batches) = std::sync::mpsc::channel::<Vec<String>>();
    {
        let (applied, stop) = (applied.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut c = open_writer(&db, "NORMAL");
            while let Ok(keys) = batches.recv() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                apply_objects(&mut c, &keys);
                applied.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let base = group_commit_server(
        rt,
        "bare-pipeline.log",
        |parsed| {
            let objects =
                ["attributes", "events", "purchases"].iter().flat_map(|k| parsed[*k].as_array().into_iter().flatten());
            objects.filter_map(|o| o["external_id"].as_str().map(str::to_string)).collect::<Vec<String>>()
        },
        {
            let accepted = accepted.clone();
            move |keys| {
                accepted.fetch_add(1, Ordering::SeqCst);
                let _ = to_writer.send(keys);
            }
        },
        stop.clone(),
    );
    BarePipeline { base, accepted, applied, stop }
}
