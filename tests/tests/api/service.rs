//! Black-box tests: the service's own routes (landing page, health, readiness,
//! metrics), request ids, and the operator's key and workspace management.

use engage_tests::{admin, send, unique_workspace, Api};
use serde_json::{json, Value};

#[tokio::test]
async fn the_landing_page_health_and_readiness_need_no_key() {
    let r = send("GET", "/", &[], None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let page = r.text();
    for link in ["href=\"/openapi.json\"", "href=\"/healthz\"", "href=\"/_engage/inspector\""] {
        assert!(page.contains(link), "{link} in {page}");
    }
    // The playground's link where the host serves it, else how to build it.
    assert!(page.contains("href=\"/playground/\"") || page.contains("bash www/build.sh"), "{page}");
    // Which build answers: the version on the page and in /healthz, with the commit
    // where the host's build knew it (native: from git; the edge: none).
    let version = env!("CARGO_PKG_VERSION");
    assert!(page.contains(&format!("<footer>Engage {version}")), "{page}");
    let r = send("GET", "/healthz", &[], None).await;
    assert_eq!((r.status, &r.body["status"], &r.body["version"]), (200, &json!("ok"), &json!(version)), "{}", r.body);
    match r.body.get("commit") {
        None => assert_eq!(r.body.as_object().map(|o| o.len()), Some(2), "{}", r.body),
        Some(commit) => {
            let commit = commit.as_str().unwrap_or_default();
            assert!(commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "{}", r.body);
            assert!(page.contains(&format!("<footer>Engage {version} (commit {commit})</footer>")), "{page}");
        }
    }
    let r = send("GET", "/readyz", &[], None).await;
    assert_eq!((r.status, r.body), (200, json!({"status": "ready"})));
}

#[tokio::test]
async fn every_response_carries_a_request_id_echoed_or_made() {
    let api = Api::new().await;
    let given = api.post("/users/export/ids", json!({"external_ids": ["x"]})).await;
    let id = given.header("x-request-id").expect("an id").to_string();
    assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let again = send("GET", "/healthz", &[], None).await;
    assert_ne!(again.header("x-request-id"), Some(id.as_str()), "a new id per request");
    let echoed = send("GET", "/healthz", &[("X-Request-Id", "trace-42.a:b_c")], None).await;
    assert_eq!(echoed.header("x-request-id"), Some("trace-42.a:b_c"));
    // Not a sane token (spaces, too long): replaced, not echoed.
    let odd = send("GET", "/nowhere", &[("X-Request-Id", "a b")], None).await;
    assert_eq!(odd.status, 404);
    assert_ne!(odd.header("x-request-id"), Some("a b"));
    let long = "x".repeat(129);
    let r = send("GET", "/healthz", &[("X-Request-Id", &long)], None).await;
    assert_eq!(r.header("x-request-id").map(str::len), Some(32));
}

#[tokio::test]
async fn keys_are_listed_without_secrets_and_revoked_at_once() {
    let ws = unique_workspace();
    let api = Api::in_workspace(&ws, json!(["users.export.ids", "users.track"])).await;
    assert_eq!(api.post("/users/export/ids", json!({"external_ids": ["x"]})).await.status, 201);
    let list = admin("GET", "/_engage/keys", Value::Null).await;
    assert_eq!(list.status, 200, "{}", list.text());
    assert!(!list.text().contains(&api.key), "no secret in the list");
    let mine: Vec<&Value> =
        list.body["keys"].as_array().unwrap().iter().filter(|k| k["workspace"] == json!(ws)).collect();
    assert_eq!(mine.len(), 1, "{}", list.text());
    let key = mine[0];
    let id = key["id"].as_str().unwrap().to_string();
    assert!(id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
    assert_eq!(key["permissions"], json!(["users.export.ids", "users.track"]));
    assert_eq!(key["hint"], json!(&api.key[..8]));
    assert!(key["created_at"].as_str().unwrap().ends_with('Z'), "{key}");
    assert!(key["last_used_at"].is_string(), "the request above was noted: {key}");

    let workspaces = admin("GET", "/_engage/workspaces", Value::Null).await;
    let entry = workspaces.body["workspaces"].as_array().unwrap().iter().find(|w| w["name"] == json!(ws)).cloned();
    assert_eq!(entry.map(|w| w["keys"].clone()), Some(json!(1)), "{}", workspaces.text());

    let r = admin("DELETE", &format!("/_engage/keys/{id}"), Value::Null).await;
    assert_eq!((r.status, r.body), (200, json!({"revoked": id})));
    let r = api.post("/users/export/ids", json!({"external_ids": ["x"]})).await;
    assert_eq!(
        (r.status, r.body),
        (401, json!({"message": format!("Invalid API key: {}", api.key)})),
        "revoked at once"
    );
    let r = admin("DELETE", &format!("/_engage/keys/{id}"), Value::Null).await;
    assert_eq!((r.status, r.body), (404, json!({"message": format!("no API key with id '{id}'")})));
    let r = admin("DELETE", "/_engage/keys/not-an-id", Value::Null).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body, json!({"message": "a key id is 16 hex digits (see the key list)"}));
    let r = send("GET", "/_engage/keys", &[("Authorization", &format!("Bearer {}", api.key))], None).await;
    assert_eq!(r.status, 401, "operator routes take the admin token only");
}

/// A sample's value by metric name and labels, from Prometheus' text format.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text format");
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .reduce(|a, b| a + b)
}

#[tokio::test]
async fn metrics_count_requests_and_show_the_queue() {
    let first = send("GET", "/metrics", &[], None).await;
    if first.status == 404 {
        // A host that keeps no metrics (the edge: its platform counts requests) says so.
        assert_eq!(first.body, json!({"message": "Not Found: this host keeps no metrics"}));
        return;
    }
    assert_eq!(first.status, 200);
    assert!(first.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    // A server's metrics count its own requests.
    let api = Api::new().await.pinned();
    let track = [("route", "/users/track"), ("method", "POST"), ("status", "201")];
    let before = sample(&first.text(), "engage_http_requests_total", &track).unwrap_or(0.0);
    for i in 0..3 {
        let r = api.track(json!({"attributes": [{"external_id": format!("m{i}"), "a": 1}]})).await;
        assert_eq!(r.status, 201);
    }
    let text = send("GET", "/metrics", &[], None).await.text();
    let after = sample(&text, "engage_http_requests_total", &track).expect("track requests counted");
    assert!(after >= before + 3.0, "{before} → {after}");
    for name in [
        "engage_queue_pending_jobs",
        "engage_queue_oldest_job_age_seconds",
        "engage_queue_applied_jobs_total",
        "engage_store_commit_duration_seconds_count",
        "engage_profile_cache_hits_total",
        "engage_open_connections",
    ] {
        assert!(sample(&text, name, &[]).is_some(), "{name} in {text}");
    }
    let latency = sample(&text, "engage_http_request_duration_seconds_count", &[("route", "/users/track")]);
    assert!(latency.unwrap_or(0.0) >= 3.0, "latency observed");
    // Raw paths never become labels: only route patterns.
    assert!(!text.contains("m0") && !text.contains(&api.key));
}

#[tokio::test]
async fn head_is_answered_as_get_without_the_body() {
    let get = send("GET", "/healthz", &[], None).await;
    let head = send("HEAD", "/healthz", &[], None).await;
    assert_eq!((head.status, head.header("content-type")), (200, get.header("content-type")));
    assert!(head.raw.is_empty(), "{}", head.text());
    let page = send("HEAD", "/", &[], None).await;
    assert_eq!((page.status, page.header("content-type")), (200, Some("text/html; charset=utf-8")));
    assert!(page.raw.is_empty());
    // An API route: credentials and permissions as for its GET.
    let api = Api::new().await;
    let auth = format!("Bearer {}", api.key);
    let listed = send("HEAD", "/preference_center/v1/list", &[("Authorization", &auth)], None).await;
    assert_eq!(listed.status, 200);
    assert!(listed.raw.is_empty());
    assert_eq!(send("HEAD", "/preference_center/v1/list", &[], None).await.status, 401);
    // A path that takes no GET takes no HEAD; where GET is allowed, so is HEAD.
    let track = send("HEAD", "/users/track", &[], None).await;
    assert_eq!((track.status, track.header("allow")), (405, Some("POST")));
    let wrong = send("DELETE", "/healthz", &[], None).await;
    assert_eq!((wrong.status, wrong.header("allow")), (405, Some("GET, HEAD")));
}
