//! Running the server as an operator would: configured by `ENGAGE_*` variables
//! alone, logging one line per request (as JSON on demand) with no key, token or
//! email in it, and keys and workspaces listed and revoked from the command line;
//! and a store that stops leaves no thread behind.

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use engage::store::SqliteStore;
use engage_core::store::{ChangeSet, Expect, Op, Store, Table};
use serde_json::{json, Value};
use support::{engage, wal_bytes, Conn};

#[test]
fn every_serve_flag_has_an_environment_variable_shown_in_help() {
    let help = engage(&["serve", "--help"]);
    let flags: Vec<&str> = help.lines().filter_map(|l| l.trim().strip_prefix("--")).collect();
    assert!(flags.len() >= 14, "{help}");
    for flag in flags {
        let name = flag.split([' ', '<']).next().unwrap();
        if name == "help" {
            continue;
        }
        let var = format!("ENGAGE_{}", name.to_uppercase().replace('-', "_"));
        assert!(help.contains(&format!("[env: {var}")), "--{name} has no {var}: {help}");
    }
}

#[test]
fn configured_by_environment_alone_it_logs_json_lines_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let key = support::key(&db);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = dir.path().join("server.log");
    let admin = "operator-secret-token-0123456789abcdef";
    let mut child = Command::new(env!("CARGO_BIN_EXE_engage"))
        .arg("serve")
        .env("ENGAGE_DB", &db)
        .env("ENGAGE_LISTEN", format!("127.0.0.1:{port}"))
        .env("ENGAGE_LOG_FORMAT", "json")
        .env("ENGAGE_ADMIN_TOKEN", admin)
        .env("ENGAGE_NO_RATE_LIMITS", "true")
        .env("ENGAGE_IDLE_TIMEOUT_SECS", "5")
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while Conn::open(port).is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "the server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut conn = Conn::open(port).unwrap();
    let email = "secret.person@example.com";
    let body = json!({"attributes": [{"external_id": "private-id-77", "email": email}]});
    assert_eq!(conn.post("/users/track", &key, &body).unwrap().status, 201);
    let r = conn.post("/users/export/ids", &key, &json!({"email_address": email})).unwrap();
    assert_eq!(r.status, 201);
    let id = r.header("x-request-id").unwrap().to_string();
    assert_eq!(conn.post("/users/track", "wrong-key", &body).unwrap().status, 401);
    let listed = conn.send("GET", "/_engage/keys", admin, None).unwrap();
    assert_eq!(listed.status, 200);
    let r = conn
        .send("GET", &format!("/subscription/user/status?external_id=private-id-77&email={email}"), &key, None)
        .unwrap();
    assert!(r.status < 500);
    let _ = child.kill();
    let _ = child.wait();

    let text = std::fs::read_to_string(&log).unwrap();
    for secret in [key.as_str(), admin, email, "private-id-77", "wrong-key", "secret.person"] {
        assert!(!text.contains(secret), "'{secret}' is in the log:\n{text}");
    }
    let lines: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"))).collect();
    let requests: Vec<&Value> = lines.iter().filter(|l| l["target"] == json!("engage::request")).collect();
    assert_eq!(requests.len(), 5, "one line per request: {text}");
    let export = requests.iter().find(|l| l["request_id"] == json!(id)).expect("the export's line");
    assert_eq!(export["route"], json!("/users/export/ids"));
    assert_eq!(export["method"], json!("POST"));
    assert_eq!(export["status"], json!(201));
    assert!(export["micros"].as_u64().is_some(), "{export}");
    assert!(requests.iter().any(|l| l["route"] == json!("/subscription/user/status")), "routes, not paths");
}

#[test]
fn keys_and_workspaces_are_listed_and_revoked_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    let db = db.to_str().unwrap();
    let secret = engage(&["keys", "create", "--db", db, "--workspace", "shop", "--permissions", "users.track"]);
    engage(&["keys", "create", "--db", db, "--workspace", "blog"]);
    let list = engage(&["keys", "list", "--db", db]);
    assert!(!list.contains(&secret), "no secret in the list");
    let rows: Vec<Vec<&str>> = list.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2, "{list}");
    let shop = rows.iter().find(|r| r[1] == "shop").expect("shop's key");
    assert_eq!((shop[2], shop[4]), ("users.track", "never"));
    assert_eq!(shop[0].len(), 16);
    let workspaces = engage(&["workspaces", "list", "--db", db]);
    let names: Vec<&str> = workspaces.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(names, ["blog", "shop"], "{workspaces}");
    assert!(workspaces.lines().all(|l| l.ends_with("\t1")), "{workspaces}");

    engage(&["keys", "revoke", "--db", db, shop[0]]);
    let list = engage(&["keys", "list", "--db", db]);
    assert_eq!(list.lines().count(), 1);
    assert!(!list.contains("shop"), "{list}");
    let out =
        Command::new(env!("CARGO_BIN_EXE_engage")).args(["keys", "revoke", "--db", db, shop[0]]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no API key with id"), "{out:?}");
}

// Here, in a test process that opens no other store: threads are counted by name,
// and the library's unit tests open stores side by side (once the two counts below
// fell between another test's store starting and this one's stopping: [7, 7] → [7, 7]).
fn store_threads() -> Vec<String> {
    let names = std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten();
    let names = names.filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok());
    names.map(|n| n.trim().to_string()).filter(|n| n.starts_with("engage-")).collect()
}

#[test]
fn a_dropped_store_leaves_no_thread_and_its_wal_can_be_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let store = SqliteStore::open(&db).unwrap();
    for i in 0..50 {
        let op = Op::Put { table: Table::Group, key: format!("k{i}"), value: b"{}".to_vec(), expect: Expect::Any };
        pollster::block_on(store.commit(ChangeSet { ops: vec![op], ack: None })).unwrap();
    }
    // Thread names are cut to 15 bytes.
    let count = |name: &str| store_threads().iter().filter(|n| n.as_str() == name).count();
    let before = [count("engage-checkpoi"), count("engage-apply-db")];
    assert!(before.iter().all(|&n| n >= 1), "{:?}", store_threads());
    drop(store);
    // This store's checkpointer and apply writer are gone when drop returns.
    let after = [count("engage-checkpoi"), count("engage-apply-db")];
    assert_eq!(after, [0, 0], "{before:?} → {after:?}: {:?}", store_threads());
    let c = rusqlite::Connection::open(&db).unwrap();
    let (busy, log, done): (i64, i64, i64) =
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    assert_eq!((busy, log, done), (0, 0, 0), "the WAL is emptied: nobody holds it");
    assert_eq!(wal_bytes(&db), 0);
}

#[test]
fn the_wal_is_given_back_once_writes_stop_and_not_while_they_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let store = SqliteStore::open(&db).unwrap();
    // Writes with the queue drained, as a warehouse sync's: a 4 KB document every few
    // milliseconds, through more than two of the checkpointer's 3-s rounds after the
    // WAL passed the 4 MiB it would be cut back from.
    let (mut i, mut high, mut shrank, mut over_since) = (0u64, 0u64, None, None::<Instant>);
    while over_since.is_none_or(|t| t.elapsed() < Duration::from_secs(7)) {
        let ops = (0..4)
            .map(|n| Op::Put {
                table: Table::Group,
                key: format!("k{i}-{n}"),
                value: vec![b'x'; 4000],
                expect: Expect::Any,
            })
            .collect();
        pollster::block_on(store.commit(ChangeSet { ops, ack: None })).unwrap();
        i += 1;
        let wal = wal_bytes(&db);
        if wal < high && shrank.is_none() {
            shrank = Some((high, wal));
        }
        high = high.max(wal);
        if wal > 4 << 20 && over_since.is_none() {
            over_since = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(shrank, None, "the WAL was cut back while writes went on (bytes before, after)");
    // Quiet now: within two rounds the WAL is truncated.
    let stopped = Instant::now();
    while wal_bytes(&db) > 4 << 20 && stopped.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = wal_bytes(&db);
    assert!(
        left <= 4 << 20,
        "WAL of {} MiB {:?} after the writes stopped (at most {} MiB)",
        left >> 20,
        stopped.elapsed(),
        high >> 20
    );
}
