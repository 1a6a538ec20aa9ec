//! The test kit's state routes on the native server: a workspace per test with its
//! key, snapshots and their restore, a clock per workspace, the state as a
//! fixtures file that loads back to an equal state (`GET /_engage/state`,
//! `--state`), and `--id-seed`'s answers, the same on two servers.

use crate::support;
use crate::test_kit::{example_seed, stop};

use std::path::Path;

use serde_json::{json, Value};
use support::{engage_result, Conn, Server};

const ADMIN: &str = "state-test-admin-token-0123456789abcdef";

fn call(conn: &mut Conn, method: &str, path: &str, auth: &str, body: Option<Value>) -> (u16, Value) {
    let r = conn.send(method, path, auth, body.as_ref()).unwrap();
    let json = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, json)
}

fn new_workspace(conn: &mut Conn, name: &str) -> String {
    let (status, made) = call(conn, "POST", "/_engage/workspaces", ADMIN, Some(json!({"name": name})));
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["name"], name);
    made["api_key"].as_str().unwrap().to_string()
}

fn exported(conn: &mut Conn, key: &str, ids: &[&str]) -> Value {
    let (status, body) = call(conn, "POST", "/users/export/ids", key, Some(json!({"external_ids": ids})));
    assert_eq!(status, 201, "{body}");
    body
}

fn track(conn: &mut Conn, key: &str, user: &str) {
    let (status, body) =
        call(conn, "POST", "/users/track", key, Some(json!({"attributes": [{"external_id": user, "plan": "p"}]})));
    assert_eq!(status, 201, "{body}");
}

#[test]
fn a_workspace_per_test_its_snapshots_and_its_clock_stay_its_own() {
    let server = Server::start(Path::new(":memory:"), &["--admin-token", ADMIN, "--test-clock"], &[]);
    let mut conn = server.conn();
    let (k1, k2) = (new_workspace(&mut conn, "t1"), new_workspace(&mut conn, "t2"));
    // A name taken, a key given that exists, bad bodies: refused, nothing made.
    let given = "t3-key-0123456789abcdef0123456789abcdef";
    for (body, status) in [
        (json!({"name": "t1"}), 409),
        (json!({"name": "t3", "api_key": k1}), 409),
        (json!({"name": "t3", "api_key": "short"}), 400),
        (json!({"name": "a b"}), 400),
        (json!({}), 400),
        (json!({"name": "t3", "colour": "red"}), 400),
    ] {
        let (got, answer) = call(&mut conn, "POST", "/_engage/workspaces", ADMIN, Some(body.clone()));
        assert_eq!(got, status, "{body}: {answer}");
    }
    let (status, made) =
        call(&mut conn, "POST", "/_engage/workspaces", ADMIN, Some(json!({"name": "t3", "api_key": given})));
    assert_eq!((status, &made["api_key"]), (201, &json!(given)), "{made}");
    let (_, listed) = call(&mut conn, "GET", "/_engage/workspaces", ADMIN, None);
    assert_eq!(listed["workspaces"].as_array().unwrap().len(), 3, "{listed}");

    // A snapshot of t1; what t1 does afterwards is undone by its restore, what t2
    // does stays.
    track(&mut conn, &k1, "a1");
    let (status, saved) = call(&mut conn, "POST", "/_engage/snapshots/base?workspace=t1", ADMIN, None);
    assert_eq!(status, 201, "{saved}");
    assert!(saved["documents"].as_u64().unwrap() >= 4, "{saved}");
    assert_eq!(call(&mut conn, "POST", "/_engage/snapshots/base?workspace=t2", ADMIN, None).0, 201);
    track(&mut conn, &k1, "a2");
    let (s, _) = call(
        &mut conn,
        "POST",
        "/email/status",
        &k1,
        Some(json!({"email": "a1@example.com", "subscription_state": "unsubscribed"})),
    );
    assert!(s < 300);
    track(&mut conn, &k2, "b1");
    let (status, restored) = call(&mut conn, "POST", "/_engage/snapshots/base/restore?workspace=t1", ADMIN, None);
    assert_eq!(status, 200, "{restored}");
    assert!(restored["removed"].as_u64().unwrap() >= 2, "a2's profile and identifiers: {restored}");
    let t1 = exported(&mut conn, &k1, &["a1", "a2"]);
    assert_eq!((t1["users"].as_array().unwrap().len(), &t1["invalid_user_ids"]), (1, &json!(["a2"])), "{t1}");
    assert_eq!(exported(&mut conn, &k2, &["b1"])["users"].as_array().unwrap().len(), 1, "t2 keeps its own");
    // Restoring twice changes nothing more.
    let (_, again) = call(&mut conn, "POST", "/_engage/snapshots/base/restore?workspace=t1", ADMIN, None);
    assert_eq!((&again["written"], &again["removed"]), (&json!(0), &json!(0)), "{again}");
    let (_, shelf) = call(&mut conn, "GET", "/_engage/snapshots", ADMIN, None);
    let names: Vec<(&str, &str)> = shelf["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["workspace"].as_str().unwrap(), s["name"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("t1", "base"), ("t2", "base")], "{shelf}");
    for (method, path, status) in [
        ("POST", "/_engage/snapshots/nope/restore?workspace=t1", 404),
        ("POST", "/_engage/snapshots/base/restore", 404),
        ("POST", "/_engage/snapshots/a%20b?workspace=t1", 400),
        ("POST", "/_engage/snapshots/x?workspace=t1&workspace=t2", 400),
        ("DELETE", "/_engage/snapshots/base?workspace=t2", 200),
        ("DELETE", "/_engage/snapshots/base?workspace=t2", 404),
    ] {
        let (got, answer) = call(&mut conn, method, path, ADMIN, None);
        assert_eq!(got, status, "{method} {path}: {answer}");
    }

    // t1's clock moves; t2's does not.
    let (status, moved) =
        call(&mut conn, "POST", "/_engage/clock?workspace=t1", ADMIN, Some(json!({"now": "2031-05-01T00:00:00Z"})));
    assert_eq!((status, &moved["now"]), (200, &json!("2031-05-01T00:00:00.000Z")), "{moved}");
    track(&mut conn, &k1, "a3");
    track(&mut conn, &k2, "b2");
    let created = |v: Value| v["users"][0]["created_at"].as_str().unwrap_or_default().to_string();
    assert!(created(exported(&mut conn, &k1, &["a3"])).starts_with("2031-05-01T00:00"));
    assert!(!created(exported(&mut conn, &k2, &["b2"])).starts_with("2031"));
    let (_, advanced) =
        call(&mut conn, "POST", "/_engage/clock?workspace=t1", ADMIN, Some(json!({"advance_secs": 86400})));
    assert!(advanced["now"].as_str().unwrap().starts_with("2031-05-02T00:00"), "{advanced}");

    // Rate-limit windows and link expiry follow the workspace's clock: ten centers a
    // minute, then a 429 until t1's minute is over; t2's count is its own.
    let center =
        |n: usize| json!({"name": format!("c{n}"), "preference_center_page_html": "x", "confirmation_page_html": "y"});
    let mut last = 0;
    for n in 0..11 {
        last = call(&mut conn, "POST", "/preference_center/v1", &k1, Some(center(n))).0;
    }
    assert_eq!(last, 429);
    assert_eq!(call(&mut conn, "POST", "/preference_center/v1", &k2, Some(center(0))).0, 201, "t2 counts apart");
    call(&mut conn, "POST", "/_engage/clock?workspace=t1", ADMIN, Some(json!({"advance_secs": 61})));
    let (status, made) = call(&mut conn, "POST", "/preference_center/v1", &k1, Some(center(11)));
    assert_eq!(status, 201, "a new minute on t1's clock: {made}");
    let id = made["preference_center_api_id"].as_str().unwrap().to_string();
    track(&mut conn, &k1, "linked");
    let (_, link) = call(&mut conn, "GET", &format!("/preference_center/v1/{id}/url/linked?expires_in=600"), &k1, None);
    let url = link["preference_center_url"].as_str().unwrap().to_string();
    let page = &url[url.find("/preferences/").unwrap()..];
    assert_eq!(conn.send("GET", page, "", None).unwrap().status, 200);
    call(&mut conn, "POST", "/_engage/clock?workspace=t2", ADMIN, Some(json!({"advance_secs": 3600})));
    assert_eq!(conn.send("GET", page, "", None).unwrap().status, 200, "another workspace's clock moved");
    call(&mut conn, "POST", "/_engage/clock?workspace=t1", ADMIN, Some(json!({"advance_secs": 601})));
    assert_eq!(conn.send("GET", page, "", None).unwrap().status, 403, "expired on t1's clock");

    // Removed with keep=none: its key, its snapshots and its clock are gone.
    let (status, _) = call(&mut conn, "POST", "/_engage/reset?workspace=t1&keep=none", ADMIN, None);
    assert_eq!(status, 200);
    assert_eq!(call(&mut conn, "POST", "/users/export/ids", &k1, Some(json!({"external_ids": ["a1"]}))).0, 401);
    let (_, shelf) = call(&mut conn, "GET", "/_engage/snapshots?workspace=t1", ADMIN, None);
    assert_eq!(shelf["snapshots"], json!([]));
    assert_eq!(new_workspace(&mut conn, "t1").len(), 36, "the name is free again");
}

#[test]
fn the_state_loads_back_to_an_equal_state_and_a_state_file_outlives_the_server() {
    let shop = "shop-test-key-0123456789abcdef01234567";
    let server = Server::start(Path::new(":memory:"), &["--admin-token", ADMIN, "--seed", &example_seed()], &[]);
    let mut conn = server.conn();
    track(&mut conn, shop, "extra");
    let (status, _) = call(
        &mut conn,
        "POST",
        "/users/alias/new",
        shop,
        Some(json!({"user_aliases": [{"external_id": "extra", "alias_name": "x1", "alias_label": "crm"}]})),
    );
    assert!(status < 300);
    let (status, before) = call(&mut conn, "GET", "/_engage/state", ADMIN, None);
    assert_eq!(status, 200);
    assert!(before["workspaces"]["shop"]["documents"].as_array().unwrap().len() > 10, "{before}");
    assert!(before["documents"].as_array().is_some_and(|d| !d.is_empty()), "the SCIM user: {before}");
    assert!(!before.to_string().contains(shop), "keys only by their hash");
    // Everything goes; the file loads it back, equal, keys and all.
    assert_eq!(call(&mut conn, "POST", "/_engage/reset?keep=none", ADMIN, None).0, 200);
    assert_eq!(call(&mut conn, "POST", "/users/export/ids", shop, Some(json!({"external_ids": ["ada"]}))).0, 401);
    let (status, loaded) = call(&mut conn, "POST", "/_engage/seed", ADMIN, Some(before.clone()));
    assert_eq!(status, 200, "{loaded}");
    let (_, after) = call(&mut conn, "GET", "/_engage/state", ADMIN, None);
    assert_eq!(after, before);
    let ada = exported(&mut conn, shop, &["ada", "extra"]);
    assert_eq!(ada["users"].as_array().unwrap().len(), 2, "{ada}");
    // One workspace's state holds that workspace's documents only.
    let (_, one) = call(&mut conn, "GET", "/_engage/state?workspace=shop", ADMIN, None);
    assert_eq!((one["workspaces"].as_object().unwrap().len(), one.get("documents")), (1, None), "{one}");
    // A document listed under a workspace it does not belong to is refused whole.
    let mut wrong = one.clone();
    wrong["workspaces"]["other"] = wrong["workspaces"]["shop"].clone();
    let (status, refused) = call(&mut conn, "POST", "/_engage/seed", ADMIN, Some(wrong));
    assert_eq!(status, 400);
    assert!(refused["message"].as_str().unwrap().contains("does not belong to workspace 'other'"), "{refused}");

    // --state: written at a clean stop, loaded at the next start.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.json");
    let file_arg = file.to_str().unwrap();
    let args = ["--ephemeral", "--admin-token", ADMIN, "--state", file_arg];
    let mut first = Server::start(Path::new("engage.db"), &args, &[]);
    let mut conn = first.conn();
    let key = new_workspace(&mut conn, "kept");
    track(&mut conn, &key, "k1");
    stop(&mut first);
    assert!(file.exists(), "{}", first.log_text());
    let second = Server::start(Path::new("engage.db"), &args, &[]);
    let mut conn = second.conn();
    assert_eq!(exported(&mut conn, &key, &["k1"])["users"][0]["custom_attributes"]["plan"], "p");
    // Only a throwaway server takes a state file.
    let db = dir.path().join("kept.db");
    let (ok, _, err) =
        engage_result(&["serve", "--db", db.to_str().unwrap(), "--state", file_arg, "--listen", "127.0.0.1:0"]);
    assert!(!ok && err.contains("--state is for a throwaway server"), "{err}");
}

/// An answer: status, headers (but `date`) and body.
type Answer = (u16, Vec<(String, String)>, String);

/// What one script of requests answers.
fn script(server: &Server) -> Vec<Answer> {
    let mut conn = server.conn();
    let mut out = Vec::new();
    let mut send = |method: &str, path: &str, auth: &str, extra: &[(&str, &str)], body: Option<Value>| {
        let r = conn.send_with(method, path, auth, extra, body.as_ref()).unwrap();
        let headers = r.headers.iter().filter(|(k, _)| k != "date").cloned().collect();
        out.push((r.status, headers, String::from_utf8_lossy(&r.body).to_string()));
        serde_json::from_slice::<Value>(&r.body).unwrap_or(Value::Null)
    };
    let made = send("POST", "/_engage/workspaces", ADMIN, &[], Some(json!({"name": "w"})));
    let key = made["api_key"].as_str().unwrap().to_string();
    let users = json!({"attributes": [{"external_id": "u1"}, {"user_alias": {"alias_name": "a", "alias_label": "l"}}],
        "events": [{"external_id": "u2", "name": "e", "time": "2026-01-01T00:00:00Z"}]});
    send("POST", "/users/track", &key, &[], Some(users));
    send("POST", "/users/track/sync", &key, &[], Some(json!({"attributes": [{"external_id": "u3"}]})));
    send("POST", "/users/export/ids", &key, &[], Some(json!({"external_ids": ["u1", "u2", "u3"]})));
    let center =
        json!({"name": "prefs", "preference_center_page_html": "<p>x</p>", "confirmation_page_html": "<p>y</p>"});
    let c = send("POST", "/preference_center/v1", &key, &[], Some(center));
    let id = c["preference_center_api_id"].as_str().unwrap_or("none").to_string();
    send("GET", &format!("/preference_center/v1/{id}/url/u1"), &key, &[], None);
    let token = send("POST", "/_engage/scim-tokens", ADMIN, &[], Some(json!({"origin": "example.com"})));
    let token = token["token"].as_str().unwrap_or_default().to_string();
    let scim = json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ops@example.com",
        "name": {"givenName": "O", "familyName": "P"}, "department": "engineering", "permissions": {"companyPermissions": ["admin"]}});
    send("POST", "/scim/v2/Users", &token, &[("X-Request-Origin", "example.com")], Some(scim));
    send("POST", "/_engage/clock", ADMIN, &[], Some(json!({"advance_secs": 60})));
    send("GET", "/_engage/state", ADMIN, &[], None);
    out
}

#[test]
fn two_servers_with_one_id_seed_answer_the_same_byte_for_byte() {
    // One public URL: links name it, not the port each listens on.
    let args = ["--admin-token", ADMIN, "--id-seed", "42", "--public-url", "http://engage.test"];
    let (a, b) = (Server::start(Path::new(":memory:"), &args, &[]), Server::start(Path::new(":memory:"), &args, &[]));
    let (first, second) = (script(&a), script(&b));
    assert!(first.iter().all(|(status, _, _)| *status < 300), "{first:?}");
    for (n, (x, y)) in first.iter().zip(&second).enumerate() {
        assert_eq!(x, y, "answer {n}");
    }
    // A warehouse sync's new profiles: their ids come from the job, not from when it ran.
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w.db");
    rusqlite::Connection::open(&warehouse)
        .unwrap()
        .execute_batch(
            "CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT);
             INSERT INTO T VALUES ('2024-01-01T00:00:00Z', 'c1', '{\"plan\": \"gold\"}');
             INSERT INTO T VALUES ('2024-01-01T00:00:01Z', 'c2', '{\"plan\": \"tin\"}');",
        )
        .unwrap();
    let source = format!("sqlite:{}", warehouse.display());
    let synced = |server: &Server| {
        let mut conn = server.conn();
        let spec = json!({"workspace": "w", "name": "n", "source": source, "table": "T"});
        let (status, made) = call(&mut conn, "POST", "/_engage/cdi/integrations", ADMIN, Some(spec));
        assert_eq!(status, 201, "{made}");
        let id = made["integration_id"].as_str().unwrap().to_string();
        call(&mut conn, "POST", &format!("/_engage/cdi/integrations/{id}/sync"), ADMIN, None);
        let started = std::time::Instant::now();
        loop {
            let (_, jobs) = call(&mut conn, "GET", &format!("/_engage/cdi/integrations/{id}/jobs"), ADMIN, None);
            if jobs["jobs"].as_array().is_some_and(|j| j.iter().any(|j| j["job_status"] == "success")) {
                break;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(30), "{jobs}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let key = first[0].2.split('"').nth(3).unwrap().to_string();
        let (_, users) =
            call(&mut conn, "POST", "/users/export/ids", &key, Some(json!({"external_ids": ["c1", "c2"]})));
        (id, users["users"].clone())
    };
    let (one, two) = (synced(&a), synced(&b));
    assert_eq!(one.1.as_array().map(Vec::len), Some(2), "{one:?}");
    assert_eq!(one, two);
    // Another seed, other ids.
    let c = Server::start(
        Path::new(":memory:"),
        &["--admin-token", ADMIN, "--id-seed", "43", "--public-url", "http://engage.test"],
        &[],
    );
    assert_ne!(script(&c)[0].2, first[0].2);
}
