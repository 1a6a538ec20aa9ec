//! `engage cdi` as an operator uses it: `kill -9` in the middle of a sync (the
//! killed job keeps what its committed batches did, the next job resumes after
//! them, and every row's effect lands exactly once: each row adds 1 to a counter,
//! and the counters add up), and `engage cdi sync` beside a running server (the
//! server runs the job; the command waits for it and prints it).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;
use support::engage_output;

use engage::store::SqliteStore;
use engage_core::provision::{create_key, Permission, WorkspaceName};
use engage_core::{Config, Engine, Method, Request};
use support::Server;

const ROWS: usize = 60_000;
const USERS: usize = 100;

#[test]
fn a_killed_job_loses_no_row_and_applies_none_twice() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w.db");
    let db = dir.path().join("engage.db");
    let db_arg = db.to_str().unwrap();
    let mut conn = rusqlite::Connection::open(&warehouse).unwrap();
    conn.execute_batch("CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT)").unwrap();
    let tx = conn.transaction().unwrap();
    for n in 0..ROWS {
        tx.execute(
            "INSERT INTO T VALUES (?1, ?2, '{\"visits\": {\"inc\": 1}}')",
            [format!("{}", 1_704_067_200 + n as i64), format!("u{}", n % USERS)],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let source = format!("sqlite:{}", warehouse.display());
    let out = engage_output(&[
        "cdi",
        "create",
        "--db",
        db_arg,
        "--workspace",
        "w",
        "--name",
        "t",
        "--source",
        &source,
        "--table",
        "T",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();

    // Start a job and kill it once it has committed some batches but not all.
    let mut child = Command::new(env!("CARGO_BIN_EXE_engage"))
        .args(["cdi", "sync", &id, "--db", db_arg])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let list = String::from_utf8(engage_output(&["cdi", "list", "--db", db_arg]).stdout).unwrap();
        let reader = rusqlite::Connection::open(&db).unwrap();
        // The cursor moves with every committed batch: stop as soon as one landed.
        let moved: i64 = reader
            .query_row("SELECT count(*) FROM docs WHERE tbl = 14 AND value LIKE '%\"cursor\":{%'", [], |r| r.get(0))
            .unwrap_or(0);
        if moved > 0 || (!list.contains("running") && started.elapsed() > Duration::from_secs(30)) {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // The next job (a new owner) closes the killed one and resumes after its last commit.
    let out = engage_output(&["cdi", "sync", &id, "--db", db_arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let second: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(second["job"], 2);
    let resumed = second["rows_synced"].as_u64().unwrap() as usize;
    assert!(resumed < ROWS, "the first job committed something before it was killed");

    let store = SqliteStore::open(&db).unwrap();
    let engine = Engine::new(store, Config::default());
    let ws = WorkspaceName::parse("w").unwrap();
    let key = pollster::block_on(create_key(engine.store(), &ws, Permission::ALL.to_vec(), engage::ctx())).unwrap();
    let export = |ids: Vec<String>| {
        let req = Request::new(Method::Post, "/users/export/ids")
            .header("Authorization", &format!("Bearer {key}"))
            .body(serde_json::json!({"external_ids": ids}).to_string());
        pollster::block_on(engine.handle(req, engage::ctx())).json_body()
    };
    let mut total = 0;
    for chunk in (0..USERS).collect::<Vec<_>>().chunks(50) {
        let users = export(chunk.iter().map(|n| format!("u{n}")).collect());
        for u in users["users"].as_array().unwrap() {
            total += u["custom_attributes"]["visits"].as_u64().unwrap() as usize;
        }
    }
    assert_eq!(total, ROWS, "every row applied exactly once");
    let status = |seq: u64| {
        let path = format!("/cdi/integrations/{id}/job_sync_status");
        let req = Request::new(Method::Get, &path).header("Authorization", &format!("Bearer {key}"));
        let body = pollster::block_on(engine.handle(req, engage::ctx())).json_body();
        body["results"][(2 - seq) as usize].clone()
    };
    let killed = status(1);
    eprintln!("killed job: {killed}; resumed job synced {resumed}");
    assert_eq!(killed["job_status"], "error");
    assert_eq!(killed["rows_synced"].as_u64().unwrap() as usize + resumed, ROWS, "{killed}");
}

#[test]
fn sync_beside_a_running_server_is_run_by_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w.db");
    let db = dir.path().join("engage.db");
    let db_arg = db.to_str().unwrap();
    let conn = rusqlite::Connection::open(&warehouse).unwrap();
    conn.execute_batch(
        "CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT);
         INSERT INTO T VALUES ('2024-01-01T00:00:00Z', 'u1', '{\"plan\": \"gold\"}');
         INSERT INTO T VALUES ('2024-01-01T00:00:01Z', 'u2', 'broken');",
    )
    .unwrap();
    let server = Server::start(&db, &[], &[]);
    let source = format!("sqlite:{}", warehouse.display());
    let out = engage_output(&["cdi", "create", "--db", db_arg, "--name", "t", "--source", &source, "--table", "T"]);
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let out = engage_output(&["cdi", "sync", &id, "--db", db_arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&job["job_status"], &job["rows_synced"], &job["rows_failed_with_errors"]),
        (&serde_json::json!("partial"), &serde_json::json!(1), &serde_json::json!(1))
    );
    assert!(job["row_errors"][0]["reason"].as_str().unwrap().contains("not valid JSON"), "{job}");
    let list = String::from_utf8(engage_output(&["cdi", "list", "--db", db_arg]).stdout).unwrap();
    assert!(list.contains(&id) && list.contains("partial"), "{list}");
    drop(server);
}

/// Waits until `engage cdi list` shows a job running.
fn until_running(db: &str) {
    let started = Instant::now();
    loop {
        let list = String::from_utf8(engage_output(&["cdi", "list", "--db", db]).stdout).unwrap();
        if list.contains("\trunning\t") {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no job started: {list}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn integrations_sync_side_by_side_and_sync_says_at_once_when_the_server_stops() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w.db");
    let db = dir.path().join("engage.db");
    let db_arg = db.to_str().unwrap();
    let conn = rusqlite::Connection::open(&warehouse).unwrap();
    conn.execute_batch(
        "CREATE TABLE BIG (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT);
         CREATE TABLE SMALL (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT);
         INSERT INTO SMALL VALUES ('2024-01-01T00:00:00Z', 'small', '{\"n\": 1}');",
    )
    .unwrap();
    // Long enough to still run while a small job starts, runs and ends beside it.
    conn.execute(
        "INSERT INTO BIG WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 199999) \
         SELECT 1704067200 + i, 'u' || (i % 100), '{\"visits\": {\"inc\": 1}}' FROM n",
        [],
    )
    .unwrap();
    let mut server = Server::start(&db, &[], &[]);
    let source = format!("sqlite:{}", warehouse.display());
    let create = |name: &str, table: &str| {
        let out =
            engage_output(&["cdi", "create", "--db", db_arg, "--name", name, "--source", &source, "--table", table]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let (big, small, again) = (create("big", "BIG"), create("small", "SMALL"), create("again", "BIG"));
    let background = |id: &str| {
        Command::new(env!("CARGO_BIN_EXE_engage"))
            .args(["cdi", "sync", id, "--db", db_arg])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // While the server runs a long job, another integration's job runs beside it.
    let mut long = background(&big);
    until_running(db_arg);
    let started = Instant::now();
    let out = engage_output(&["cdi", "sync", &small, "--db", db_arg]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&job["job_status"], &job["rows_synced"]), (&serde_json::json!("success"), &serde_json::json!(1)));
    let list = String::from_utf8(engage_output(&["cdi", "list", "--db", db_arg]).stdout).unwrap();
    eprintln!("the small job took {:?} beside the big one", started.elapsed());
    assert!(list.lines().any(|l| l.starts_with(&big) && l.contains("\trunning\t")), "the big job still runs: {list}");
    assert!(long.wait().unwrap().success());

    // The server dies while a command waits for its job: the command says so at once.
    let waiting = background(&again);
    until_running(db_arg);
    server.kill();
    let killed = Instant::now();
    let out = waiting.wait_with_output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("the server stopped"), "{said}");
    assert!(killed.elapsed() < Duration::from_secs(5), "said at once, not at the timeout: {:?}", killed.elapsed());
}

#[test]
fn integrations_are_managed_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("engage.db");
    let db_arg = db.to_str().unwrap();
    let warehouse = dir.path().join("w.db");
    rusqlite::Connection::open(&warehouse)
        .unwrap()
        .execute_batch(
            "CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT);
             INSERT INTO T VALUES ('2024-01-01T00:00:00Z', 'c1', '{\"n\": 1}');",
        )
        .unwrap();
    let ok = |args: &[&str]| {
        let out = engage_output(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // A relative source is made absolute against this command's directory.
    let out = Command::new(env!("CARGO_BIN_EXE_engage"))
        .current_dir(dir.path())
        .args(["cdi", "create", "--db", db_arg, "--name", "c", "--source", "sqlite:w.db", "--table", "T"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let state: serde_json::Value =
        serde_json::from_str(&ok(&["cdi", "update", &id, "--db", db_arg, "--name", "renamed", "--schedule", "1h"]))
            .unwrap();
    assert_eq!(
        (&state["integration_name"], state["next_scheduled_run"].is_string()),
        (&serde_json::json!("renamed"), true)
    );
    let state: serde_json::Value = serde_json::from_str(&ok(&["cdi", "pause", &id, "--db", db_arg])).unwrap();
    assert_eq!(state["integration_status"], "paused");
    let refused = engage_output(&["cdi", "sync", &id, "--db", db_arg]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("paused"));
    ok(&["cdi", "resume", &id, "--db", db_arg]);
    let job: serde_json::Value = serde_json::from_str(&ok(&["cdi", "sync", &id, "--db", db_arg])).unwrap();
    assert_eq!(job["rows_synced"], 1, "the relative path was resolved where it was given: {job}");
    ok(&["cdi", "rewind", &id, "--db", db_arg, "--start"]);
    let job: serde_json::Value = serde_json::from_str(&ok(&["cdi", "sync", &id, "--db", db_arg])).unwrap();
    assert_eq!(job["rows_synced"], 1, "read again from the start: {job}");
    let jobs: serde_json::Value = serde_json::from_str(&ok(&["cdi", "jobs", &id, "--db", db_arg])).unwrap();
    assert_eq!(jobs["jobs"].as_array().map(Vec::len), Some(2));
    ok(&["cdi", "delete", &id, "--db", db_arg]);
    assert_eq!(ok(&["cdi", "list", "--db", db_arg]), "");
    assert!(!engage_output(&["cdi", "delete", &id, "--db", db_arg]).status.success());
}

/// Runs `engage args` with its output going into a pipe whose reading end is
/// already closed (a reader such as `head` that has had enough): its exit status
/// and what it said on stderr.
fn into_closed_pipe(args: &[&str]) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out =
        Command::new(env!("CARGO_BIN_EXE_engage")).args(args).stdout(writer).stderr(Stdio::piped()).output().unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn output_into_a_closed_pipe_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w.db");
    rusqlite::Connection::open(&warehouse)
        .unwrap()
        .execute_batch("CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT)")
        .unwrap();
    let db = dir.path().join("engage.db");
    let db_arg = db.to_str().unwrap();
    let source = format!("sqlite:{}", warehouse.display());
    let out = engage_output(&["cdi", "create", "--db", db_arg, "--name", "p", "--source", &source, "--table", "T"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    for args in [
        vec!["cdi", "sync", &id, "--db", db_arg],
        vec!["cdi", "jobs", &id, "--db", db_arg],
        vec!["cdi", "list", "--db", db_arg],
        vec!["workspaces", "list", "--db", db_arg],
    ] {
        let (status, stderr) = into_closed_pipe(&args);
        assert!(status.success() && stderr.is_empty(), "engage {args:?}: {status}, stderr: {stderr}");
    }
    // The job ran before its output had nowhere to go.
    let jobs: serde_json::Value =
        serde_json::from_slice(&engage_output(&["cdi", "jobs", &id, "--db", db_arg]).stdout).unwrap();
    assert_eq!(jobs["jobs"][0]["job_status"], "success", "{jobs}");
}
