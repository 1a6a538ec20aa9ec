//! The CDI phase: a warehouse table of users rows (3 to 5 attributes each, one user
//! a row, distinct `UPDATED_AT`s) synced by `engage serve`, against a plain copy of
//! the same table in the same run: a Rust reader (rusqlite or tokio-postgres) and a
//! rusqlite writer, one row each into an indexed SQLite table (WAL, synchronous
//! FULL as Engage's commits, 1,000 rows a transaction).
//!
//! Beside them, the least a sync's commits could cost: the store's own writes of as
//! many new users (a profile and an identifier entry each, 1 KiB pages as the
//! server's, as many a transaction as a sync commits: `BATCH_ROWS`), with nothing
//! read, parsed, looked up or checkpointed (the server checkpoints on another
//! thread), and again with SQLite's own checkpoints in the writing thread, as the
//! plain copy has them.
//! Against the plain copy, the first is the ratio a sync would reach were all its
//! other work free and on the other core (docs/performance.md, the warehouse sync's
//! bound; first measured 2026-11-29, a6d8101). And a bare two-thread sync: the
//! table read sorted and its payloads parsed and encoded on one thread, the same
//! writes on the other, which is the most a sync that reads and parses could
//! reach against the writes alone.
//!
//! Sources: a SQLite file (made once under `target/bench`), and PostgreSQL when
//! `ENGAGE_TEST_POSTGRES_URL` names a server (`source tests/postgres.sh &&
//! start_postgres` starts one); the table is made there for the run and dropped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::load::Outcome;
use crate::server::Server;
use crate::warehouse::{external_key_of, open_store, row, service_key, Writer};
use crate::{seed, set_name, Row};

/// The SQLite warehouse of `rows` rows (made once).
fn sqlite_warehouse(rows: u64) -> PathBuf {
    let path = seed::root().join(format!("warehouse-v1-{rows}.db"));
    if path.exists() {
        return path;
    }
    let tmp = path.with_extension("partial");
    let _ = std::fs::remove_file(&tmp);
    let mut conn = rusqlite::Connection::open(&tmp).expect("warehouse");
    conn.execute_batch("CREATE TABLE USERS (UPDATED_AT TEXT NOT NULL, EXTERNAL_ID TEXT, PAYLOAD TEXT)").unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx.prepare("INSERT INTO USERS VALUES (?1, ?2, ?3)").unwrap();
        for n in 0..rows {
            let (ts, id, payload) = row(n);
            insert.execute([ts, id, payload]).unwrap();
        }
    }
    tx.commit().unwrap();
    drop(conn);
    std::fs::rename(&tmp, &path).expect("rename warehouse");
    path
}

fn postgres_url() -> Option<String> {
    std::env::var("ENGAGE_TEST_POSTGRES_URL").ok()
}

fn pg<T>(url: &str, work: impl AsyncFnOnce(&tokio_postgres::Client) -> T) -> T {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect to PostgreSQL");
        tokio::spawn(conn);
        work(&client).await
    })
}

/// Makes the PostgreSQL table of `rows` rows (the same rows as the SQLite one).
fn postgres_warehouse(url: &str, table: &str, rows: u64) {
    let sql = format!(
        "DROP TABLE IF EXISTS {table};
         CREATE TABLE {table} (updated_at timestamptz NOT NULL, external_id text, payload text);
         INSERT INTO {table}
           SELECT timestamptz '2025-01-01 00:00:00+00' + n * interval '1 millisecond', 'u' || n,
             '{{' || concat_ws(', ',
               '\"first_name\": \"F' || (n % 9973) || '\"',
               '\"plan\": \"' || (ARRAY['free','pro','team','enterprise'])[n % 4 + 1] || '\"',
               '\"score\": ' || (n % 1000),
               CASE WHEN n % 3 >= 1 THEN '\"city\": \"C' || (n % 311) || '\"' END,
               CASE WHEN n % 3 = 2 THEN '\"beta\": ' || (n % 2 = 0) END) || '}}'
           FROM generate_series(0, {last}) AS n;
         CREATE INDEX ON {table} (updated_at);
         ANALYZE {table};",
        last = rows - 1
    );
    pg(url, async |c| c.batch_execute(&sql).await.expect("make the PostgreSQL table"));
}

/// Times a plain copy: `read` hands every row of the table to the writer and says
/// how many it read; rows per second.
fn plain_copy(rows: u64, read: impl FnOnce(&mut Writer) -> u64) -> f64 {
    let target = seed::root().join("copy.db");
    seed::remove_db(&target);
    let started = Instant::now();
    let mut w = Writer::open(&target);
    let n = read(&mut w);
    w.finish();
    assert_eq!(n, rows, "the plain copy read every row");
    let rate = n as f64 / started.elapsed().as_secs_f64();
    seed::remove_db(&target);
    rate
}

/// The plain copy of the SQLite table: rows per second.
fn copy_sqlite(source: &Path, rows: u64) -> f64 {
    plain_copy(rows, |w| {
        let src = rusqlite::Connection::open_with_flags(source, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let mut stmt = src.prepare("SELECT UPDATED_AT, EXTERNAL_ID, PAYLOAD FROM USERS ORDER BY UPDATED_AT").unwrap();
        let mut it = stmt.query([]).unwrap();
        let mut n = 0;
        while let Some(r) = it.next().unwrap() {
            let (ts, id, payload): (String, String, String) = (r.get(0).unwrap(), r.get(1).unwrap(), r.get(2).unwrap());
            w.write(&ts, &id, &payload);
            n += 1;
        }
        n
    })
}

/// The plain copy of the PostgreSQL table: rows per second.
fn copy_postgres(url: &str, table: &str, rows: u64) -> f64 {
    let sql = format!("SELECT updated_at::text, external_id, payload FROM {table} ORDER BY updated_at");
    plain_copy(rows, |w| {
        pg(url, async |c| {
            let stream = c.query_raw(&sql, std::iter::empty::<String>()).await.unwrap();
            let mut stream = std::pin::pin!(stream);
            let mut n = 0u64;
            while let Some(r) = stream.next().await {
                let r = r.unwrap();
                w.write(r.get(0), r.get(1), r.get(2));
                n += 1;
            }
            n
        })
    })
}

/// The store's writes alone of `rows` new users: users per second (see the module's
/// comment). `checkpoints`: SQLite's own, in the writing thread, as the plain copy
/// has them; without, none (the server checkpoints on a thread of its own).
fn writes_alone(rows: u64, checkpoints: bool) -> f64 {
    let path = seed::root().join("writes-alone.db");
    seed::remove_db(&path);
    let mut store = open_store(&path, 1024, false).expect("the store's tables");
    if !checkpoints {
        store.conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    }
    let rate = store.write_users(rows, engage::cdi::BATCH_ROWS as u64).expect("the store's writes");
    drop(store);
    seed::remove_db(&path);
    rate
}

/// The least a sync that reads and parses could do on two threads: one reads the
/// table sorted (as the plain copy does), parses each payload and encodes the new
/// user's profile, `BATCH_ROWS` rows a batch, up to `READ_AHEAD` batches ahead; the other writes
/// them as the store's writes alone do (nothing looked up, no checkpoints). Rows
/// per second from the query's start to the last commit: against the writes alone,
/// the ratio a sync could reach with nothing of Engage's own between the two.
fn bare_sync(source: &Path, rows: u64) -> f64 {
    let path = seed::root().join("bare-sync-pipeline.db");
    seed::remove_db(&path);
    let mut store = open_store(&path, 1024, false).expect("the store's tables");
    store.conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    type Batch = Vec<(String, String, Vec<u8>)>;
    let (send, batches) = std::sync::mpsc::sync_channel::<Batch>(engage::cdi::READ_AHEAD);
    let started = Instant::now();
    let reader = {
        let source = source.to_path_buf();
        std::thread::spawn(move || {
            let src =
                rusqlite::Connection::open_with_flags(&source, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
            let mut stmt =
                src.prepare("SELECT UPDATED_AT, EXTERNAL_ID, PAYLOAD FROM USERS ORDER BY UPDATED_AT").unwrap();
            let mut it = stmt.query([]).unwrap();
            let (mut n, mut batch): (u64, Batch) = (0, Vec::with_capacity(engage::cdi::BATCH_ROWS));
            while let Some(r) = it.next().unwrap() {
                let (ts, id, payload): (String, String, String) =
                    (r.get(0).unwrap(), r.get(1).unwrap(), r.get(2).unwrap());
                let attrs: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&payload).unwrap();
                let profile = serde_json::json!({
                    "external_id": id, "created_at": ts, "custom_attributes": attrs, "updated_at": ts,
                });
                batch.push((service_key(n), external_key_of(&id), serde_json::to_vec(&profile).unwrap()));
                n += 1;
                if batch.len() == engage::cdi::BATCH_ROWS {
                    send.send(std::mem::replace(&mut batch, Vec::with_capacity(engage::cdi::BATCH_ROWS))).unwrap();
                }
            }
            if !batch.is_empty() {
                send.send(batch).unwrap();
            }
            n
        })
    };
    for batch in batches {
        store.write_batch(batch.into_iter()).expect("the bare sync's writes");
    }
    let n = reader.join().expect("the bare sync's reader");
    let rate = n as f64 / started.elapsed().as_secs_f64();
    assert_eq!(n, rows, "the bare sync read every row");
    drop(store);
    seed::remove_db(&path);
    rate
}

/// Syncs the table through `engage serve` (its runner, as a deployment runs it):
/// rows per second from the job's start to its end, and the server's peak RSS.
fn engage_sync(source: &str, table: &str, rows: u64) -> (f64, f64, f64) {
    let server = Server::start(&seed::seed(0), &[]);
    server.reset_peak();
    let created = server.operator(
        "POST",
        "/_engage/cdi/integrations",
        &serde_json::json!({"workspace": "bench", "name": "bench", "source": source, "table": table, "kind": "users"}),
    );
    let id = created["integration_id"].as_str().unwrap_or_else(|| panic!("integration: {created}")).to_string();
    server.operator("POST", &format!("/_engage/cdi/integrations/{id}/sync"), &serde_json::json!({}));
    let started = Instant::now();
    let job = loop {
        std::thread::sleep(Duration::from_millis(200));
        let jobs = server.operator("GET", &format!("/_engage/cdi/integrations/{id}/jobs"), &serde_json::Value::Null);
        let job = jobs["jobs"][0].clone();
        if job["job_status"].as_str().is_some_and(|s| s != "running") {
            break job;
        }
        assert!(started.elapsed() < Duration::from_secs(3600), "the sync did not end: {job}");
    };
    assert_eq!(job["rows_synced"].as_u64(), Some(rows), "every row synced: {job}");
    let time = |k: &str| engage_core::Timestamp::parse(job[k].as_str().unwrap()).unwrap().0;
    let secs = (time("sync_finish_time") - time("sync_start_time")) as f64 / 1000.0;
    (rows as f64 / secs.max(1e-3), server.peak_rss_mib(), server.peak_anon_mib())
}

/// The phase's rows: each source, plain copy and Engage.
pub fn phase(rows: u64) -> Vec<Row> {
    let mut out = Vec::new();
    let (alone, checkpointed) = (writes_alone(rows, false), writes_alone(rows, true));
    let wh = sqlite_warehouse(rows);
    let bare = bare_sync(&wh, rows);
    let mut report = |label: &str, copy: f64, (ours, rss, anon): (f64, f64, f64)| {
        let outcome =
            Outcome { sent: rows as usize, ok: rows as usize, rate: ours, latencies: vec![], first_failure: None };
        out.push(Row {
            endpoint: format!("CDI sync, users rows from {label}"),
            set: format!("{} rows", set_name(rows)),
            offered: "one job".into(),
            outcome,
            rss_mib: rss,
            anon_mib: anon,
            note: format!(
                "achieved = rows/s; plain copy (Rust reader, rusqlite writer) {copy:.0} rows/s: ratio {:.2}; \
                 the store's writes alone {alone:.0} users/s: {:.2} of the plain copy, the sync {:.2} of them; \
                 with their checkpoints {checkpointed:.0}: {:.2} of the plain copy; a bare two-thread sync \
                 (sorted read, payloads parsed, profiles encoded, the same writes beside) {bare:.0} rows/s: {:.2} \
                 of the writes alone",
                ours / copy.max(1e-9),
                alone / copy.max(1e-9),
                ours / alone.max(1e-9),
                checkpointed / copy.max(1e-9),
                bare / alone.max(1e-9)
            ),
        });
        eprintln!("{}", crate::line(out.last().unwrap()));
    };
    let copy = copy_sqlite(&wh, rows);
    let ours = engage_sync(&format!("sqlite:{}", wh.display()), "USERS", rows);
    report("SQLite", copy, ours);
    match postgres_url() {
        Some(url) => {
            let table = format!("bench_users_{}", std::process::id());
            postgres_warehouse(&url, &table, rows);
            let copy = copy_postgres(&url, &table, rows);
            let ours = engage_sync(&url, &table, rows);
            report("PostgreSQL", copy, ours);
            pg(&url, async |c| c.batch_execute(&format!("DROP TABLE {table}")).await.unwrap());
        }
        None => eprintln!("cdi: no PostgreSQL (set ENGAGE_TEST_POSTGRES_URL): the PostgreSQL rows are skipped"),
    }
    out
}
