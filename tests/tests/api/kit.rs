//! The test kit under `/_engage/` (admin token): fixtures, a workspace's reset
//! between two tests, the request journal, finding users, and the inspector's
//! session. Every host has them; each test here works in workspaces of its own
//! (the suite runs in parallel, so nothing here resets the whole deployment).

use engage_tests::{admin, host, send, unique_workspace, Api, Reply};
use serde_json::{json, Value};

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

async fn export(key: &str, external_id: &str) -> Reply {
    let body = json!({"external_ids": [external_id]}).to_string().into_bytes();
    let auth = bearer(key);
    send("POST", "/users/export/ids", &[("Authorization", &auth), ("Content-Type", "application/json")], Some(body))
        .await
}

fn seed(ws: &str, key: &str) -> Value {
    json!({"workspaces": {ws: {
        "keys": [{"key": key, "permissions": "all"}],
        "groups": [{"id": format!("{ws}-news"), "name": "News", "channel": "email"}],
        "users": [{"attributes": [{"external_id": "seeded-1", "email": "seeded@example.com", "plan": "pro"}],
                   "events": [{"external_id": "seeded-1", "name": "joined", "time": "2026-01-01T00:00:00Z"}]}],
        "subscriptions": [{"subscription_groups": [{"subscription_group_id": format!("{ws}-news"),
                           "subscription_state": "subscribed", "external_ids": ["seeded-1"]}]}],
    }}})
}

#[tokio::test]
async fn a_fixtures_file_loads_through_the_api_s_rules_once_and_a_bad_one_loads_nothing() {
    let ws = unique_workspace();
    let key = format!("{ws}-key-0123456789abcdef0123456789");
    let r = admin("POST", "/_engage/seed", seed(&ws, &key)).await;
    assert_eq!((r.status, &r.body["already_loaded"], &r.body["loaded"]), (200, &json!(false), &json!(4)), "{}", r.body);
    let user = &export(&key, "seeded-1").await.body["users"][0];
    assert_eq!(
        (&user["custom_attributes"]["plan"], &user["custom_events"][0]["name"]),
        (&json!("pro"), &json!("joined"))
    );
    assert_eq!(user["subscription_groups"][0]["id"], json!(format!("{ws}-news")), "{user}");
    // The same file again: nothing changes (the event is not counted twice).
    let again = admin("POST", "/_engage/seed", seed(&ws, &key)).await;
    assert_eq!((again.status, &again.body["already_loaded"]), (200, &json!(true)));
    assert_eq!(export(&key, "seeded-1").await.body["users"][0]["custom_events"][0]["count"], 1);

    // A bad entry: a 400 naming its path, and nothing of the file is stored.
    let other = unique_workspace();
    let other_key = format!("{other}-key-0123456789abcdef0123456789");
    let mut bad = seed(&other, &other_key);
    bad["workspaces"][&other]["users"]
        .as_array_mut()
        .expect("users")
        .push(json!({"attributes": [{"first_name": "nobody"}]}));
    let r = admin("POST", "/_engage/seed", bad).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let message = r.body["message"].as_str().expect("message");
    assert!(message.starts_with(&format!("workspaces.{other}.users[1]: 400")), "{message}");
    assert_eq!(export(&other_key, "seeded-1").await.status, 401, "the file's key was not made");
    for (body, needle) in [
        (json!({"users": []}), "unknown field 'users'"),
        (json!({"workspaces": {"w": {"keys": [{"key": "short"}]}}}), "workspaces.w.keys[0]: an API key must be 32"),
        (json!([]), "must be an object"),
    ] {
        let r = admin("POST", "/_engage/seed", body).await;
        assert!(r.status == 400 && r.body["message"].as_str().is_some_and(|m| m.contains(needle)), "{}", r.body);
    }
}

#[tokio::test]
async fn a_workspace_reset_between_two_tests_keeps_its_keys_unless_asked() {
    let api = Api::new().await;
    assert_eq!(api.track(json!({"attributes": [{"external_id": "r1", "color": "red"}]})).await.status, 201);
    let other = Api::new().await;
    assert_eq!(other.track(json!({"attributes": [{"external_id": "r1", "color": "blue"}]})).await.status, 201);

    // The acknowledged write is applied, then removed.
    let r = admin("POST", &format!("/_engage/reset?workspace={}", api.workspace), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body["removed"].as_u64().is_some_and(|n| n >= 2), "{}", r.body);
    let after = export(&api.key, "r1").await;
    assert_eq!((after.status, &after.body["users"]), (201, &json!([])), "the key still works; the user is gone");
    assert_eq!(export(&other.key, "r1").await.body["users"][0]["custom_attributes"]["color"], "blue", "others stay");
    // The workspace is used again at once.
    assert_eq!(api.track(json!({"attributes": [{"external_id": "r2"}]})).await.status, 201);
    assert_eq!(api.user("r2").await["external_id"], "r2");

    let r = admin("POST", &format!("/_engage/reset?workspace={}&keep=none", api.workspace), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(export(&api.key, "r2").await.status, 401, "keep=none takes the keys too");
    for bad in ["keep=all", "workspace=a%20b", "colour=red"] {
        assert_eq!(admin("POST", &format!("/_engage/reset?{bad}"), json!({})).await.status, 400, "{bad}");
    }
    let no_token = send("POST", "/_engage/reset", &[("Authorization", "Bearer nope")], None).await;
    assert_eq!(no_token.status, 401);
}

#[tokio::test]
async fn the_journal_shows_requests_by_route_and_finding_users_reads_them() {
    // The journal is a server's own.
    let api = Api::new().await.pinned();
    let r = api
        .track(json!({"attributes": [{"external_id": "j-1", "email": "journal@example.com", "tier": "gold"}]}))
        .await;
    let id = r.header("x-request-id").expect("request id").to_string();
    let journal = admin("GET", "/_engage/journal?limit=500", Value::Null).await;
    assert_eq!(journal.status, 200);
    let entry = journal.body["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .find(|e| e["request_id"] == id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("request {id} is not in the journal: {}", journal.body));
    assert_eq!(
        (&entry["method"], &entry["route"], &entry["status"]),
        (&json!("POST"), &json!("/users/track"), &json!(201))
    );
    assert!(!journal.text().contains(&api.key), "no key in the journal");
    assert!(
        journal.body["requests"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| !e["route"].as_str().unwrap().starts_with("/_engage")),
        "the operator's own requests are not journaled"
    );

    // Found by any identifier, queued writes applied first.
    let by = |q: &str| {
        let path = format!("/_engage/workspaces/{}/users?{q}", api.workspace);
        async move { admin("GET", &path, Value::Null).await }
    };
    for q in ["q=j-1", "q=journal%40example.com", "email=journal%40example.com", "external_id=j-1"] {
        let r = by(q).await;
        assert_eq!(r.body["users"][0]["custom_attributes"]["tier"], "gold", "{q}: {}", r.body);
    }
    assert_eq!(by("q=nobody").await.body["users"], json!([]));
    assert_eq!(by("").await.status, 400);
}

#[tokio::test]
async fn the_inspector_signs_in_with_the_admin_token_and_its_session_needs_a_header_to_write() {
    let page = send("GET", "/_engage/inspector", &[], None).await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("name=\"token\""), "a login form without a session");
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let wrong = send("POST", "/_engage/inspector/login", &form, Some(b"token=nope".to_vec())).await;
    assert_eq!(wrong.status, 401);
    let token = format!("token={}", host().admin_token);
    let signed = send("POST", "/_engage/inspector/login", &form, Some(token.into_bytes())).await;
    assert_eq!((signed.status, signed.header("location")), (303, Some("/_engage/inspector")));
    let set_cookie = signed.header("set-cookie").expect("a session cookie").to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    let cookie = set_cookie.split(';').next().expect("cookie").to_string();

    let app = send("GET", "/_engage/inspector", &[("Cookie", &cookie)], None).await;
    assert!(app.text().contains("Recent requests"));
    assert_eq!(send("GET", "/_engage/journal", &[("Cookie", &cookie)], None).await.status, 200);
    assert_eq!(send("GET", "/_engage/workspaces", &[("Cookie", &cookie)], None).await.status, 200);
    let ws = unique_workspace();
    let reset = format!("/_engage/reset?workspace={ws}");
    assert_eq!(send("POST", &reset, &[("Cookie", &cookie)], None).await.status, 400, "a write without the header");
    let with = [("Cookie", cookie.as_str()), ("X-Engage-Inspector", "1")];
    assert_eq!(send("POST", &reset, &with, None).await.status, 200);
    // A value of the right shape that no sign-in made.
    let forged = format!("{}{}", &cookie[..cookie.len() - 1], if cookie.ends_with('0') { '1' } else { '0' });
    assert_eq!(send("GET", "/_engage/journal", &[("Cookie", &forged)], None).await.status, 401);
}

#[tokio::test]
async fn the_clock_is_only_there_with_a_test_clock() {
    // The suite's servers run without one: the route does not exist.
    let r = admin("POST", "/_engage/clock", json!({"advance_secs": 60})).await;
    assert_eq!(r.status, 404, "{}", r.body);
}

#[tokio::test]
async fn a_file_loaded_twice_at_once_or_after_one_workspace_s_reset_loads_each_part_once() {
    let (a, b) = (unique_workspace(), unique_workspace());
    let key = |ws: &str| format!("{ws}-key-0123456789abcdef0123456789");
    let part = |ws: &str| {
        json!({"keys": [{"key": key(ws)}],
               "users": [{"events": [{"external_id": "twice", "name": "seeded", "time": "2026-01-01T00:00:00Z"}]}]})
    };
    let file = json!({"workspaces": {a.as_str(): part(&a), b.as_str(): part(&b)}});
    let (one, two) =
        tokio::join!(admin("POST", "/_engage/seed", file.clone()), admin("POST", "/_engage/seed", file.clone()));
    assert_eq!((one.status, two.status), (200, 200), "{} {}", one.body, two.body);
    let count = |ws: String| async move {
        export(&format!("{ws}-key-0123456789abcdef0123456789"), "twice").await.body["users"][0]["custom_events"][0]
            ["count"]
            .clone()
    };
    assert_eq!((count(a.clone()).await, count(b.clone()).await), (json!(1), json!(1)), "each part loaded once");

    // A reset of one workspace loads that part again, and only that part.
    assert_eq!(admin("POST", &format!("/_engage/reset?workspace={a}"), json!({})).await.status, 200);
    let again = admin("POST", "/_engage/seed", file).await;
    assert_eq!((again.status, &again.body["already_loaded"]), (200, &json!(false)), "{}", again.body);
    assert_eq!((count(a).await, count(b).await), (json!(1), json!(1)));
}

/// Verifying calls (WireMock's `find` and `count`): the journal's requests by method,
/// path or route, workspace, status and time; `DELETE /_engage/requests` forgets a
/// workspace's. This server keeps no bodies, so a body filter says how to get them
/// (`host-native/tests/native/test_kit.rs` matches bodies on an `--ephemeral` one).
#[tokio::test]
async fn a_test_finds_and_counts_the_calls_its_code_made_and_forgets_them() {
    // The journal is a server's own.
    let api = Api::new().await.pinned();
    let other = Api::new().await.pinned();
    let since = admin("POST", "/_engage/requests/count", json!({})).await;
    assert_eq!(since.status, 200, "{}", since.body);
    for user in ["v1", "v2"] {
        assert_eq!(api.track(json!({"attributes": [{"external_id": user}]})).await.status, 201);
    }
    assert_eq!(api.post("/users/track", json!({"attributes": "nope"})).await.status, 400);
    assert_eq!(other.track(json!({"attributes": [{"external_id": "v1"}]})).await.status, 201);
    let ws = api.workspace.clone();
    let count = |filter: Value| async move {
        let r = admin("POST", "/_engage/requests/count", filter).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["count"].as_u64().expect("count")
    };
    assert_eq!(count(json!({"workspace": ws})).await, 3);
    assert_eq!(count(json!({"workspace": ws, "method": "post", "path": "/users/track", "status": 201})).await, 2);
    assert_eq!(count(json!({"workspace": ws, "status": 400})).await, 1);
    assert_eq!(count(json!({"workspace": ws, "since": "2999-01-01T00:00:00Z"})).await, 0);
    let found = admin("POST", "/_engage/requests/find", json!({"workspace": ws, "status": 201})).await;
    assert_eq!(found.status, 200, "{}", found.body);
    let requests = found.body["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), 2);
    for r in requests {
        assert_eq!(
            (&r["method"], &r["route"], &r["path"], &r["workspace"]),
            (&json!("POST"), &json!("/users/track"), &json!("/users/track"), &json!(ws))
        );
        assert!(r["request_id"].is_string() && r["at"].is_string(), "{r}");
        assert!(!r.to_string().contains(&api.key), "a key is never kept: {r}");
    }
    assert!(requests[0]["at"].as_str() >= requests[1]["at"].as_str(), "newest first");

    // Bodies are not kept here: a body filter says so.
    let r = admin("POST", "/_engage/requests/count", json!({"body": {"attributes": [{"external_id": "v1"}]}})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body["message"].as_str().is_some_and(|m| m.contains("--journal-bodies")), "{}", r.body);
    for bad in [json!({"verb": "GET"}), json!({"status": "201"}), json!({"since": "yesterday"}), json!([1])] {
        assert_eq!(admin("POST", "/_engage/requests/find", bad.clone()).await.status, 400, "{bad}");
    }

    // Forgetting one workspace's leaves the other's.
    let r = admin("DELETE", &format!("/_engage/requests?workspace={ws}"), Value::Null).await;
    assert_eq!((r.status, &r.body["cleared"]), (200, &json!(3)), "{}", r.body);
    assert_eq!(count(json!({"workspace": ws})).await, 0);
    assert_eq!(count(json!({"workspace": other.workspace})).await, 1);
    assert_eq!(admin("DELETE", "/_engage/requests?workspace=a&workspace=b", Value::Null).await.status, 400);
    // This server was started without faults: their routes do not exist
    // (host-native/tests/native/test_kit.rs injects them on an `--ephemeral` one).
    let r = admin("POST", "/_engage/faults", json!({"path": "/users/track", "status": 503})).await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(api.track(json!({"attributes": [{"external_id": "v3"}]})).await.status, 201);
}

/// A workspace of its own for a test, in one call; a snapshot of it put back in
/// one unit of work; its state as a fixtures file that loads back to an equal
/// state. Each host keeps snapshots in its memory (the edge: its isolate's).
#[tokio::test]
async fn a_test_s_own_workspace_goes_back_to_a_snapshot_and_its_state_loads_back_equal() {
    let ws = unique_workspace();
    let made = admin("POST", "/_engage/workspaces", json!({"name": ws})).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let key = made.body["api_key"].as_str().expect("api_key").to_string();
    assert_eq!(admin("POST", "/_engage/workspaces", json!({"name": ws})).await.status, 409, "taken");
    let track = |user: &'static str| {
        let key = key.clone();
        async move {
            let body = json!({"attributes": [{"external_id": user, "email": format!("{user}@example.com")}]});
            let auth = bearer(&key);
            let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
            send("POST", "/users/track", &headers, Some(body.to_string().into_bytes())).await.status
        }
    };
    assert_eq!(track("s1").await, 201);
    let saved = admin("POST", &format!("/_engage/snapshots/start?workspace={ws}"), Value::Null).await;
    assert_eq!(saved.status, 201, "{}", saved.body);
    assert_eq!((&saved.body["name"], &saved.body["workspace"]), (&json!("start"), &json!(ws)));
    assert_eq!(track("s2").await, 201);
    let restored = admin("POST", &format!("/_engage/snapshots/start/restore?workspace={ws}"), Value::Null).await;
    assert_eq!(restored.status, 200, "{}", restored.body);
    assert_eq!(export(&key, "s2").await.body["users"], json!([]), "written after the snapshot: gone");
    assert_eq!(export(&key, "s1").await.body["users"][0]["email"], "s1@example.com");
    let missing = admin("POST", &format!("/_engage/snapshots/nope/restore?workspace={ws}"), Value::Null).await;
    assert_eq!(missing.status, 404);

    // The state: out, the workspace removed, back in, equal; the key works again.
    let state = admin("GET", &format!("/_engage/state?workspace={ws}"), Value::Null).await;
    assert_eq!(state.status, 200, "{}", state.body);
    let documents = state.body["workspaces"][&ws]["documents"].as_array().expect("documents").len();
    assert!(documents >= 5, "{}", state.body);
    assert_eq!(admin("POST", &format!("/_engage/reset?workspace={ws}&keep=none"), json!({})).await.status, 200);
    assert_eq!(export(&key, "s1").await.status, 401);
    let loaded = admin("POST", "/_engage/seed", state.body.clone()).await;
    assert_eq!(loaded.status, 200, "{}", loaded.body);
    let again = admin("GET", &format!("/_engage/state?workspace={ws}"), Value::Null).await;
    assert_eq!(again.body, state.body);
    assert_eq!(export(&key, "s1").await.body["users"][0]["email"], "s1@example.com");
    assert_eq!(
        admin("DELETE", &format!("/_engage/snapshots/start?workspace={ws}"), Value::Null).await.status,
        404,
        "the workspace's removal took its snapshots"
    );
}
