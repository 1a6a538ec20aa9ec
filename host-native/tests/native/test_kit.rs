//! The test kit on the command line: a throwaway database, a known key, fixtures,
//! a settable clock, strict media types, reset and seed commands, and the mistakes
//! that used to fail silently (a mistyped --db, a second server on one file, a port
//! without a host, coloured log files, an unknown key with no hint).

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{engage, engage_result, Conn, Server};

const KEY: &str = "ci-known-key-0123456789abcdef0123456789";
const ADMIN: &str = "kit-test-admin-token-0123456789abcdef";

pub(crate) fn example_seed() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/seed.example.json").to_string_lossy().into_owned()
}

/// Stops a server as an operator does (SIGTERM) and waits for it to exit.
pub(crate) fn stop(server: &mut Server) {
    let _ = Command::new("kill").arg(server.child.id().to_string()).status();
    let started = Instant::now();
    while server.child.try_wait().ok().flatten().is_none() {
        assert!(started.elapsed() < Duration::from_secs(30), "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn raw(conn: &mut Conn, method: &str, path: &str, headers: &str, body: &str) -> support::Reply {
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Content-Length: {}\r\n\r\n{body}", body.len());
    std::io::Write::write_all(conn.stream(), head.as_bytes()).unwrap();
    conn.read_reply().unwrap()
}

#[test]
fn an_ephemeral_server_with_a_known_key_fixtures_a_test_clock_and_strict_types() {
    let args = ["--ephemeral", "--api-key", KEY, "--admin-token", ADMIN, "--seed", &example_seed(), "--test-clock"];
    let mut server =
        Server::start(Path::new("engage.db"), &[&args[..], &["--strict", "--link-ttl-secs", "600"]].concat(), &[]);
    let mut conn = server.conn();
    // The known key and the file's keys work at once; the file's users are there.
    let track = json!({"attributes": [{"external_id": "k1", "first_name": "Kit"}]});
    assert_eq!(conn.post("/users/track", KEY, &track).unwrap().status, 201);
    let seeded =
        conn.post("/users/export/ids", "shop-test-key-0123456789abcdef01234567", &json!({"external_ids": ["ada"]}));
    let ada = seeded.unwrap().json()["users"][0].clone();
    assert_eq!((&ada["first_name"], &ada["custom_attributes"]["plan"]), (&json!("Ada"), &json!("pro")), "{ada}");

    // --strict: a body not labelled JSON is a 415 in the platform's shape.
    let plain = raw(
        &mut conn,
        "POST",
        "/users/track",
        &format!("Authorization: Bearer {KEY}\r\nContent-Type: text/plain\r\n"),
        &track.to_string(),
    );
    assert_eq!(plain.status, 415);
    assert!(plain.json()["message"].as_str().unwrap().contains("application/json"));

    // The clock: a link made now expires when the clock passes its lifetime.
    let shop = "shop-test-key-0123456789abcdef01234567";
    let centers = conn.send("GET", "/preference_center/v1/list", shop, None).unwrap().json();
    let center = centers["preference_centers"][0]["preference_center_api_id"].as_str().unwrap().to_string();
    let link = conn.send("GET", &format!("/preference_center/v1/{center}/url/ada"), shop, None).unwrap().json();
    let url = link["preference_center_url"].as_str().unwrap().to_string();
    let page_path = &url[url.find("/preferences/").unwrap()..];
    assert_eq!(raw(&mut conn, "GET", page_path, "", "").status, 200);
    let moved = conn.post("/_engage/clock", ADMIN, &json!({"advance_secs": 601})).unwrap();
    assert_eq!(moved.status, 200, "{}", moved.json());
    assert_eq!(raw(&mut conn, "GET", page_path, "", "").status, 403, "the link expired on the test clock");
    // What is stamped with the time now follows the clock too.
    let set = conn.post("/_engage/clock", ADMIN, &json!({"now": "2031-05-01T00:00:00Z"})).unwrap().json();
    assert_eq!(set["now"], "2031-05-01T00:00:00.000Z");
    let later = json!({"attributes": [{"external_id": "k2", "first_name": "Later"}]});
    assert_eq!(conn.post("/users/track", KEY, &later).unwrap().status, 201);
    let k2 = conn.post("/users/export/ids", KEY, &json!({"external_ids": ["k2"]})).unwrap().json();
    let created = k2["users"][0]["created_at"].as_str().unwrap_or_default().to_string();
    assert!(created.starts_with("2031-05-01T00:00"), "{k2}");

    // The database was in a temporary directory, gone when the server stops.
    let log = server.log_text();
    let dir = log.split("ephemeral database in ").nth(1).and_then(|r| r.split(' ').next()).expect("the log names it");
    assert!(Path::new(dir).exists());
    stop(&mut server);
    assert!(!Path::new(dir).exists(), "{dir} is left behind");
    assert!(!server.log_text().contains('\u{1b}'), "no colour codes in a log file");
}

#[test]
fn an_in_memory_database_is_a_throwaway_one_and_a_short_key_is_refused() {
    let mut server = Server::start(Path::new(":memory:"), &["--api-key", KEY], &[]);
    let mut conn = server.conn();
    assert_eq!(conn.post("/users/track", KEY, &json!({"attributes": [{"external_id": "m"}]})).unwrap().status, 201);
    stop(&mut server);
    assert!(!Path::new(":memory:").exists() && !Path::new(":memory:-queue.lock").exists());
    let (ok, _, err) = engage_result(&["serve", "--ephemeral", "--api-key", "short-key", "--listen", "127.0.0.1:0"]);
    assert!(!ok && err.contains("32"), "{err}");
    let (ok, _, err) = engage_result(&["serve", "--ephemeral", "--db", "other.db"]);
    assert!(!ok && err.contains("leave out --db"), "{err}");
}

#[test]
fn seed_and_reset_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kit.db");
    let db = db.to_str().unwrap();
    let (ok, out, err) = engage_result(&["seed", "--db", db, &example_seed()]);
    assert!(ok && out.contains("loaded 11 entries") && err.contains("made a new database"), "{out}{err}");
    let (ok, out, _) = engage_result(&["seed", "--db", db, &example_seed()]);
    assert!(ok && out.contains("already loaded"), "{out}");
    assert_eq!(engage(&["keys", "list", "--db", db]).lines().count(), 2);

    // A bad file: the path of the entry, nothing stored, no database made.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"workspaces": {"w": {"groups": [{"id": "g", "name": "G", "channel": "fax"}]}}}"#).unwrap();
    let fresh = dir.path().join("fresh.db");
    let (ok, _, err) = engage_result(&["seed", "--db", fresh.to_str().unwrap(), bad.to_str().unwrap()]);
    assert!(!ok && err.contains("workspaces.w.groups[0]: 'channel'"), "{err}");
    assert!(!fresh.exists());

    let (ok, out, _) = engage_result(&["reset", "--db", db]);
    assert!(ok && out.contains("removed"), "{out}");
    assert_eq!(engage(&["keys", "list", "--db", db]).lines().count(), 2, "keys stay");
    let (ok, out, _) = engage_result(&["seed", "--db", db, &example_seed()]);
    assert!(ok && out.contains("loaded 11 entries"), "after a reset the file loads again: {out}");
    let (ok, _, _) = engage_result(&["reset", "--db", db, "--keep", "none"]);
    assert!(ok);
    assert_eq!(engage(&["keys", "list", "--db", db]), "");
    let (ok, _, err) = engage_result(&["reset", "--db", db, "--keep", "some"]);
    assert!(!ok && err.contains("--keep"), "{err}");

    // With a server on the database, the commands point to its routes.
    let mut server = Server::start(Path::new(db), &[], &[]);
    let (ok, _, err) = engage_result(&["reset", "--db", db]);
    assert!(!ok && err.contains("POST /_engage/reset"), "{err}");
    stop(&mut server);
}

#[test]
fn mistakes_that_used_to_fail_silently_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("mistyped.db");
    let missing = missing.to_str().unwrap();
    for args in [
        &["keys", "list", "--db", missing][..],
        &["workspaces", "list", "--db", missing],
        &["cdi", "list", "--db", missing],
    ] {
        let (ok, _, err) = engage_result(args);
        assert!(!ok && err.contains("no database at"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no database was made");

    let (ok, _, err) = engage_result(&["serve", "--listen", "8080", "--db", missing]);
    assert!(!ok && err.contains("--listen 127.0.0.1:8080"), "{err}");

    // A second server on a file another one serves is refused before it starts.
    let db = dir.path().join("one.db");
    let key = support::key(&db);
    let server = Server::start(&db, &[], &[]);
    let (ok, _, err) = engage_result(&["serve", "--db", db.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    assert!(!ok && err.contains("another engage server runs on"), "{err}");

    // An unknown key: the log says which database this server serves.
    let mut conn = server.conn();
    assert_eq!(conn.post("/users/track", "not-a-key", &json!({})).unwrap().status, 401);
    assert_eq!(conn.post("/users/track", &key, &json!({"attributes": [{"external_id": "x"}]})).unwrap().status, 201);
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.log_text().contains(&format!("this server serves {}", db.display())), "{}", server.log_text());

    // The landing page says how to build a playground that is not there.
    let landing = raw(&mut conn, "GET", "/", "", "");
    let html = String::from_utf8_lossy(&landing.body).into_owned();
    assert!(html.contains("bash www/build.sh") && !html.contains("href=\"/playground/\""), "{html}");

    // `engage backup` reads ENGAGE_DB as every other command does.
    let out = Command::new(env!("CARGO_BIN_EXE_engage"))
        .args(["backup", "--to", dir.path().join("copy.db").to_str().unwrap()])
        .env("ENGAGE_DB", &db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _: Value = json!(null);
}

/// Every boolean `ENGAGE_*` variable takes `1`/`0` and `true`/`false` (and nothing
/// else): `ENGAGE_EPHEMERAL=1` is `--ephemeral`, `=0` is its absence.
#[test]
fn boolean_variables_take_one_and_zero_as_well_as_true_and_false() {
    // Each command runs in a directory of its own: nothing is made in the tests' one.
    let run = |dir: &Path, args: &[&str], var: &str, value: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_engage"))
            .args(args)
            .current_dir(dir)
            .env(var, value)
            .env_remove("ENGAGE_LISTEN")
            .env_remove("ENGAGE_DB")
            .output()
            .expect("run engage");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let scratch = tempfile::tempdir().unwrap();
    let ephemeral = |value: &str| {
        let args = ["serve", "--db", "other.db", "--listen", "not an address"];
        run(scratch.path(), &args, "ENGAGE_EPHEMERAL", value)
    };
    for on in ["1", "true", "TRUE", "yes"] {
        // Ephemeral: a --db is refused.
        assert!(ephemeral(on).contains("leave out --db"), "ENGAGE_EPHEMERAL={on}: {}", ephemeral(on));
    }
    for off in ["0", "false"] {
        // Not ephemeral: the address is what is refused.
        let err = ephemeral(off);
        assert!(err.contains("not an address") && !err.contains("leave out --db"), "ENGAGE_EPHEMERAL={off}: {err}");
    }
    assert!(ephemeral("maybe").contains("invalid value"), "{}", ephemeral("maybe"));
    let clean = tempfile::tempdir().unwrap();
    for var in ["ENGAGE_STRICT", "ENGAGE_TEST_CLOCK", "ENGAGE_NO_RATE_LIMITS", "ENGAGE_JOURNAL_BODIES", "ENGAGE_FAULTS"]
    {
        let err = run(clean.path(), &["serve", "--api-key", "short-key"], var, "1");
        assert!(err.contains("32") && !err.contains("invalid value '1'"), "{var}=1: {err}");
    }
    // A key refused is refused before anything is made.
    assert_eq!(std::fs::read_dir(clean.path()).unwrap().count(), 0, "nothing made");
}

/// An `--ephemeral` server keeps bodies, so a test can verify what its code sent:
/// the body filter matches what a request body contains, and a key never shows.
#[test]
fn an_ephemeral_server_matches_calls_by_what_their_bodies_contain() {
    let server = Server::start(Path::new(":memory:"), &["--api-key", KEY, "--admin-token", ADMIN], &[]);
    let mut conn = server.conn();
    let admin = ADMIN;
    let body = json!({"attributes": [{"external_id": "b1", "plan": "pro"}], "events": [{"external_id": "b1", "name": "paid", "time": "2026-01-01T00:00:00Z"}]});
    assert_eq!(conn.post("/users/track", KEY, &body).unwrap().status, 201);
    assert_eq!(conn.post("/users/track", KEY, &json!({"attributes": [{"external_id": "b2"}]})).unwrap().status, 201);
    let count = |conn: &mut Conn, filter: Value| {
        let r = conn.send("POST", "/_engage/requests/count", admin, Some(&filter)).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.json()["count"].as_u64().unwrap()
    };
    assert_eq!(count(&mut conn, json!({"body": {"attributes": [{"plan": "pro"}]}})), 1);
    assert_eq!(count(&mut conn, json!({"body": {"events": [{"name": "paid"}]}, "path": "/users/track"})), 1);
    assert_eq!(count(&mut conn, json!({"body": {"attributes": [{"external_id": "b3"}]}})), 0);
    let r = conn
        .send("POST", "/_engage/requests/find", admin, Some(&json!({"body": {"attributes": [{"external_id": "b2"}]}})))
        .unwrap();
    let found = r.json();
    assert_eq!(found["requests"][0]["request_body"], json!({"attributes": [{"external_id": "b2"}]}), "{found}");
    assert_eq!(found["requests"][0]["response_body"]["message"], "success", "{found}");
    assert!(!found.to_string().contains(KEY), "no key: {found}");
}

/// Faults (`--ephemeral` has them): a 429 answered as real limiting answers it, a
/// 503 in the error shape, a delay; a faulted request changes nothing and is
/// journaled with its fault; removed faults are gone.
#[test]
fn injected_faults_answer_as_the_platform_does_and_change_nothing() {
    let server = Server::start(Path::new(":memory:"), &["--api-key", KEY, "--admin-token", ADMIN], &[]);
    let mut conn = server.conn();
    let post =
        |conn: &mut Conn, path: &str, auth: &str, body: Value| conn.send("POST", path, auth, Some(&body)).unwrap();
    let added = post(
        &mut conn,
        "/_engage/faults",
        ADMIN,
        json!({"path": "/users/track", "status": 429, "times": 2, "retry_after_secs": 3}),
    );
    assert_eq!(added.status, 201, "{}", String::from_utf8_lossy(&added.body));
    let fault = added.json()["id"].as_str().unwrap().to_string();
    let track = |user: &str| json!({"attributes": [{"external_id": user}]});
    let mut limited = Vec::new();
    for user in ["f1", "f2"] {
        let r = post(&mut conn, "/users/track", KEY, track(user));
        assert_eq!((r.status, r.json()), (429, json!({"message": "Over rate limit"})));
        limited.push(r);
    }
    assert_eq!(post(&mut conn, "/users/track", KEY, track("f3")).status, 201, "two times, then gone");
    // The shape of a real 429: ten preference-center writes a minute.
    let center =
        |n: usize| json!({"name": format!("c{n}"), "preference_center_page_html": "x", "confirmation_page_html": "y"});
    let real = (0..11).map(|n| post(&mut conn, "/preference_center/v1", KEY, center(n))).last().unwrap();
    assert_eq!(real.status, 429);
    for name in ["x-ratelimit-retry-after", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "content-type"]
    {
        assert_eq!(limited[0].header(name).is_some(), real.header(name).is_some(), "{name}");
    }
    assert_eq!(
        (limited[0].header("retry-after"), limited[0].header("x-ratelimit-retry-after")),
        (Some("3"), Some("3"))
    );
    // Nothing of the faulted requests was stored; both are journaled with the fault.
    let export = post(&mut conn, "/users/export/ids", KEY, json!({"external_ids": ["f1", "f2", "f3"]})).json();
    assert_eq!(export["invalid_user_ids"], json!(["f1", "f2"]), "{export}");
    let found = post(&mut conn, "/_engage/requests/find", ADMIN, json!({"status": 429, "path": "/users/track"})).json();
    let faults: Vec<&Value> = found["requests"].as_array().unwrap().iter().map(|r| &r["fault"]).collect();
    assert_eq!(faults, [&json!(fault), &json!(fault)], "{found}");

    // A 503 until removed, and a delay alone.
    let id = post(
        &mut conn,
        "/_engage/faults",
        ADMIN,
        json!({"method": "post", "path": "/users/export/ids", "status": 503, "probability": 1}),
    )
    .json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = post(&mut conn, "/users/export/ids", KEY, json!({"external_ids": ["f3"]}));
    assert_eq!((r.status, r.header("retry-after").is_some(), r.json()["message"].is_string()), (503, true, true));
    let listed = conn.send("GET", "/_engage/faults", ADMIN, None).unwrap().json();
    assert_eq!(listed["faults"][0]["id"], json!(id), "{listed}");
    assert_eq!(conn.send("DELETE", &format!("/_engage/faults/{id}"), ADMIN, None).unwrap().status, 200);
    assert_eq!(conn.send("DELETE", &format!("/_engage/faults/{id}"), ADMIN, None).unwrap().status, 404);
    assert_eq!(post(&mut conn, "/users/export/ids", KEY, json!({"external_ids": ["f3"]})).status, 201);
    post(&mut conn, "/_engage/faults", ADMIN, json!({"path": "/users/export/ids", "delay_ms": 300, "times": 1}));
    let started = Instant::now();
    let r = post(&mut conn, "/users/export/ids", KEY, json!({"external_ids": ["f3"]}));
    assert_eq!(r.status, 201, "a delay alone: the normal answer");
    assert!(started.elapsed() >= Duration::from_millis(300), "answered after the delay");
    assert_eq!(r.json()["users"][0]["external_id"], "f3");
    // Out of shape: a 400; a server without faults: 404 (the black-box suite's).
    assert_eq!(post(&mut conn, "/_engage/faults", ADMIN, json!({"status": 200})).status, 400);
}
