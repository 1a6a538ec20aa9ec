//! Probes as an attacker would make them, against a release of the server of its
//! own per test (docs/security.md says which attacker each surface assumes):
//! guessing the admin token, a session that outlives its sign-out or its database,
//! secrets that reach the request journal, and log lines forged through data.

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use support::{Conn, Server};

const ADMIN: &str = "security-admin-token-0123456789abcdef";
const KEY: &str = "security-known-key-0123456789abcdef0123";

/// A request with these header lines (each ending in CRLF) and body.
fn raw(conn: &mut Conn, method: &str, path: &str, headers: &str, body: &str) -> support::Reply {
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Content-Length: {}\r\n\r\n{body}", body.len());
    std::io::Write::write_all(conn.stream(), head.as_bytes()).unwrap();
    conn.read_reply().unwrap()
}

fn sign_in(conn: &mut Conn, token: &str) -> support::Reply {
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    raw(conn, "POST", "/_engage/inspector/login", form, &format!("token={token}"))
}

fn journal(conn: &mut Conn) -> Value {
    let r = conn.send("GET", "/_engage/journal", ADMIN, None).unwrap();
    assert_eq!(r.status, 200);
    r.json()
}

#[test]
fn an_admin_token_shorter_than_32_characters_is_refused_at_start() {
    for args in [&["--admin-token", "a"][..], &["--admin-token", "dev-admin-token"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_engage"))
            .args(["serve", "--ephemeral", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("at least 32 characters"), "{err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_engage"))
        .args(["serve", "--ephemeral", "--listen", "127.0.0.1:0"])
        .env("ENGAGE_ADMIN_TOKEN", "short")
        .output()
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("32"));
}

#[test]
fn wrong_admin_tokens_are_throttled_per_client_and_the_throttle_says_when_to_retry() {
    let server = Server::start(Path::new(":memory:"), &["--admin-token", ADMIN], &[]);
    let mut conn = server.conn();
    let mut statuses = Vec::new();
    for i in 0..30 {
        let wrong = format!("{ADMIN}-{i}");
        statuses.push(conn.send("GET", "/_engage/journal", &wrong, None).unwrap().status);
    }
    let first_limited = statuses.iter().position(|s| *s == 429).expect("throttled");
    assert!(statuses[..first_limited].iter().all(|s| *s == 401), "{statuses:?}");
    assert!((10..=20).contains(&first_limited), "{statuses:?}");
    assert!(statuses[first_limited..].iter().all(|s| *s == 429), "{statuses:?}");
    // While throttled, even the right token waits (guessing learns nothing), and the
    // answer says when to come back.
    let right = conn.send("GET", "/_engage/journal", ADMIN, None).unwrap();
    assert_eq!(right.status, 429);
    let retry: u64 = right.header("retry-after").and_then(|v| v.parse().ok()).expect("Retry-After");
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(right.header("x-ratelimit-retry-after").and_then(|v| v.parse().ok()), Some(retry));
    // The login form is throttled with them.
    let login = sign_in(&mut conn, ADMIN);
    assert_eq!(login.status, 429);
    assert!(login.header("retry-after").is_some());
    // API keys are not the admin token's business: the API answers as before.
    assert_eq!(
        conn.send("POST", "/users/track", "no-such-key-0123456789abcdef0123", Some(&json!({}))).unwrap().status,
        401
    );
}

#[test]
fn a_session_ends_at_sign_out_holds_on_its_own_database_only_and_is_secure_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--admin-token", ADMIN, "--test-clock", "--public-url", "https://engage.example.test"];
    let a = Server::start(&dir.path().join("a.db"), &args, &[]);
    let b = Server::start(&dir.path().join("b.db"), &args, &[]);
    let mut conn = a.conn();
    let signed = sign_in(&mut conn, ADMIN);
    assert_eq!(signed.status, 303);
    let set_cookie = signed.header("set-cookie").expect("cookie").to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    assert!(set_cookie.contains("; Secure"), "the public URL is https: {set_cookie}");
    let cookie = format!("Cookie: {}\r\n", set_cookie.split(';').next().unwrap());
    assert_eq!(raw(&mut conn, "GET", "/_engage/journal", &cookie, "").status, 200);

    // The test clock moves the deployment's time, not the session's.
    let far = conn.post("/_engage/clock", ADMIN, &json!({"now": "9999-01-01T00:00:00Z"})).unwrap();
    assert_eq!(far.status, 200);
    let fresh = sign_in(&mut conn, ADMIN);
    let fresh_cookie = format!("Cookie: {}\r\n", fresh.header("set-cookie").unwrap().split(';').next().unwrap());
    let back = conn.post("/_engage/clock", ADMIN, &json!({"now": "2026-01-01T00:00:00Z"})).unwrap();
    assert_eq!(back.status, 200);
    for c in [&cookie, &fresh_cookie] {
        assert_eq!(raw(&mut conn, "GET", "/_engage/journal", c, "").status, 200, "a session lasts by real time");
    }

    // Another server with the same admin token does not know the session.
    assert_eq!(raw(&mut b.conn(), "GET", "/_engage/journal", &cookie, "").status, 401);

    // Signing out ends it on the server: the cookie, kept, reads and changes nothing.
    let out = raw(&mut conn, "POST", "/_engage/inspector/logout", &format!("{cookie}X-Engage-Inspector: 1\r\n"), "");
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(raw(&mut conn, "GET", "/_engage/journal", &cookie, "").status, 401);
    let reset = raw(&mut conn, "POST", "/_engage/reset", &format!("{cookie}X-Engage-Inspector: 1\r\n"), "");
    assert_eq!(reset.status, 401, "a reset with a signed-out session");
    let page = raw(&mut conn, "GET", "/_engage/inspector", &cookie, "");
    assert!(String::from_utf8_lossy(&page.body).contains("name=\"token\""), "the login form again");
    // The other session is untouched.
    assert_eq!(raw(&mut conn, "GET", "/_engage/journal", &fresh_cookie, "").status, 200);

    // A write with a live session from a page that is not the inspector's.
    let from = |origin: &str| {
        format!("{fresh_cookie}X-Engage-Inspector: 1\r\nOrigin: {origin}\r\nContent-Type: application/json\r\n")
    };
    let body = r#"{"workspace": "attacker", "permissions": "all"}"#;
    for origin in ["null", "https://evil.example"] {
        let made = raw(&mut conn, "POST", "/_engage/keys", &from(origin), body);
        assert_eq!(made.status, 403, "{origin}: {}", String::from_utf8_lossy(&made.body));
    }
    let made = raw(&mut conn, "POST", "/_engage/keys", &from("http://127.0.0.1"), body);
    assert_eq!(made.status, 201, "{}", String::from_utf8_lossy(&made.body));
}

#[test]
fn no_password_or_link_token_reaches_the_journal_whatever_the_body_s_shape() {
    let args = ["--admin-token", ADMIN, "--api-key", KEY, "--journal-bodies"];
    let server = Server::start(Path::new(":memory:"), &args, &[]);
    let mut conn = server.conn();
    let origin = "https://idp.example.test";
    let scim = conn.post("/_engage/scim-tokens", ADMIN, &json!({"origin": origin})).unwrap();
    assert_eq!(scim.status, 201);
    let token = scim.json()["token"].as_str().unwrap().to_string();
    let scim_headers = format!(
        "Authorization: Bearer {token}\r\nX-Request-Origin: {origin}\r\nContent-Type: application/scim+json\r\n"
    );
    // A create whose body is not JSON at all.
    let malformed = r#"{"userName": "ada@example.com", "password": "hunter2-malformed","#;
    assert_eq!(raw(&mut conn, "POST", "/scim/v2/Users", &scim_headers, malformed).status, 400);
    // A create, then a PATCH that replaces the password by path.
    let create = json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "ada@example.com",
        "name": {"givenName": "Ada", "familyName": "L"}, "department": "engineering", "password": "hunter2-create"});
    let made = raw(&mut conn, "POST", "/scim/v2/Users", &scim_headers, &create.to_string());
    assert_eq!(made.status, 201, "{}", String::from_utf8_lossy(&made.body));
    let id = made.json()["id"].as_str().unwrap().to_string();
    let patch = json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{"op": "replace", "path": "password", "value": "hunter2-patch"}]});
    raw(&mut conn, "PATCH", &format!("/scim/v2/Users/{id}"), &scim_headers, &patch.to_string());

    // A page that prints the bare token, and a body that carries one.
    let page = r#"<p>code {{preference_center_submit_url | split: "/" | last}}</p>"#;
    let center = json!({"name": "leaky", "preference_center_page_html": page, "confirmation_page_html": "<p>ok</p>"});
    let made = conn.post("/preference_center/v1", KEY, &center).unwrap().json();
    let center_id = made["preference_center_api_id"].as_str().unwrap().to_string();
    conn.post("/users/track", KEY, &json!({"attributes": [{"external_id": "u1", "email": "u1@example.com"}]})).unwrap();
    let link = conn.send("GET", &format!("/preference_center/v1/{center_id}/url/u1"), KEY, None).unwrap().json();
    let url = link["preference_center_url"].as_str().unwrap().to_string();
    let link_token = url.rsplit('/').next().unwrap().to_string();
    let shown = raw(&mut conn, "GET", &format!("/preferences/{link_token}"), "", "");
    assert!(String::from_utf8_lossy(&shown.body).contains(&link_token), "the page prints it");
    let carried = json!({"attributes": [{"external_id": "u1", "last_link": link_token}]});
    conn.post("/users/track", KEY, &carried).unwrap();

    let all = journal(&mut conn).to_string();
    for secret in ["hunter2", &link_token] {
        assert!(!all.contains(secret), "{secret} in the journal: {all}");
    }
    assert!(all.contains("[token]") && all.contains("[not kept]"), "{all}");
}

#[test]
fn data_can_never_forge_a_line_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let warehouse = dir.path().join("w.db");
    let db = dir.path().join("engage.db");
    let forged = "2026-12-01T00:00:00.000000Z ERROR engage: forged by a warehouse row";
    let source = rusqlite::Connection::open(&warehouse).unwrap();
    source.execute_batch("CREATE TABLE T (UPDATED_AT TEXT, EXTERNAL_ID TEXT, PAYLOAD TEXT)").unwrap();
    source.execute("INSERT INTO T VALUES (?1, 'u1', '{}')", [format!("not a time\n{forged}\r\u{1b}[2J")]).unwrap();
    drop(source);
    let db_arg = db.to_str().unwrap();
    let src = format!("sqlite:{}", warehouse.display());
    let id = support::engage(&[
        "cdi",
        "create",
        "--db",
        db_arg,
        "--workspace",
        "w",
        "--name",
        "t",
        "--source",
        &src,
        "--table",
        "T",
    ]);
    for format in ["text", "json"] {
        let log = dir.path().join(format!("{format}.log"));
        let mut server = Server::start_logging(&db, &["--log-format", format], &[], Some(log.clone()));
        let out =
            Command::new(env!("CARGO_BIN_EXE_engage")).args(["cdi", "sync", &id, "--db", db_arg]).output().unwrap();
        // The job ends in error (its one row has no time to sync by): the command says so.
        assert!(String::from_utf8_lossy(&out.stderr).contains("error"), "{out:?}");
        server.kill();
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("ERROR engage: forged by"), "the row's error is logged: {text}");
        for line in text.lines() {
            assert!(!line.starts_with("2026-12-01T00:00:00.000000Z"), "a forged line: {line}");
            assert!(!line.contains('\u{1b}') && !line.contains('\r'), "a control character: {line:?}");
            if format == "json" {
                serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            }
        }
    }
}
