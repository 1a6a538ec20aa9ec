//! Black-box tests: authentication, permissions, routing and limits.

use engage_tests::{admin, host, send, Api};
use serde_json::json;

#[tokio::test]
async fn a_missing_or_unknown_key_is_401() {
    let r = send("POST", "/users/track", &[], Some(b"{}".to_vec())).await;
    assert_eq!(r.status, 401);
    assert!(r.body["message"].is_string());
    let r = send("POST", "/users/track", &[("Authorization", "Bearer nope")], Some(b"{}".to_vec())).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body, json!({"message": "Invalid API key: nope"}), "the platform names the key it did not find");
    let r = send("POST", "/users/track", &[("Authorization", "Basic abc")], Some(b"{}".to_vec())).await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn a_key_without_the_endpoint_permission_is_403_and_changes_nothing() {
    let api = Api::with_permissions(json!(["users.export.ids"])).await;
    let r = api.post("/users/track", json!({"attributes": [{"external_id": "u1", "a": 1}]})).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body, json!({"message": "Access Denied: this API key lacks the 'users.track' permission"}));
    assert_eq!(api.user("u1").await, serde_json::Value::Null);
}

#[tokio::test]
async fn permissions_are_checked_per_endpoint() {
    let api = Api::with_permissions(json!(["users.track"])).await;
    assert_eq!(api.post("/users/track", json!({"attributes": [{"external_id": "u1"}]})).await.status, 201);
    assert_eq!(api.post("/users/track/sync", json!({"attributes": [{"external_id": "u1"}]})).await.status, 403);
    assert_eq!(api.post("/users/export/ids", json!({"external_ids": ["u1"]})).await.status, 403);
}

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405() {
    let api = Api::new().await;
    let r = api.get("/users/nothing-here").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body, json!({"message": "Invalid URL"}));
    let r = api.get("/users/track").await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
    assert!(r.body["message"].is_string());
}

#[tokio::test]
async fn oversized_bodies_are_413_and_store_nothing() {
    let api = Api::new().await;
    let big = format!("{{\"attributes\":[{{\"external_id\":\"u1\",\"pad\":\"{}\"}}]}}", "x".repeat(5 * 1024 * 1024));
    let r = api.call("POST", "/users/track", Some(big.into_bytes())).await;
    assert_eq!(r.status, 413);
    assert!(r.body["message"].is_string());
    assert_eq!(api.user("u1").await, serde_json::Value::Null);
}

#[tokio::test]
async fn responses_carry_rate_limit_headers() {
    let api = Api::new().await;
    let r = api.post("/users/export/ids", json!({"external_ids": ["x"]})).await;
    let limit: u64 = r.header("x-ratelimit-limit").unwrap().parse().unwrap();
    let remaining: u64 = r.header("x-ratelimit-remaining").unwrap().parse().unwrap();
    assert!(remaining < limit);
    assert!(r.header("x-ratelimit-reset").unwrap().parse::<u64>().unwrap() >= 1);
}

/// Each endpoint's rate limit as the reference's Limits table gives it (or, where the
/// reference is silent, the platform's documented default), in its answer's
/// `X-RateLimit-Limit`; endpoints the reference says share a limit count against one
/// another (reference-rule rate-limit-values).
#[tokio::test]
async fn every_endpoint_answers_its_documented_rate_limit() {
    let api = Api::new().await;
    let post = |path: &'static str| ("POST", path);
    let get = |path: &'static str| ("GET", path);
    for ((method, path), limit, window) in [
        (post("/users/track"), 3_000, 3),
        (post("/users/track/sync"), 500, 60),
        (post("/users/identify"), 20_000, 60),
        (post("/users/merge"), 20_000, 60),
        (post("/users/delete"), 20_000, 60),
        (post("/users/alias/new"), 20_000, 60),
        (post("/users/alias/update"), 20_000, 60),
        (post("/subscription/status/set"), 5_000, 60),
        (post("/v2/subscription/status/set"), 5_000, 60),
        (get("/subscription/user/status?external_id=a"), 250_000, 3_600),
        (get("/subscription/status/get?external_id=a"), 250_000, 3_600),
        (post("/email/status"), 250_000, 3_600),
        (post("/email/blacklist"), 250_000, 3_600),
        (get("/sms/invalid_phone_numbers?phone_numbers=12183095514"), 250_000, 3_600),
        (post("/preference_center/v1"), 10, 60),
        (get("/preference_center/v1/list"), 1_000, 60),
        (get("/cdi/integrations"), 50, 60),
    ] {
        let r = match method {
            "GET" => api.get(path).await,
            _ => api.post(path, json!({})).await,
        };
        assert_ne!(r.status, 429, "{method} {path}");
        assert_eq!(r.header("x-ratelimit-limit"), Some(limit.to_string().as_str()), "{method} {path}: {}", r.body);
        let reset: u64 = r.header("x-ratelimit-reset").and_then(|v| v.parse().ok()).expect("reset");
        assert!((1..=window).contains(&reset), "{method} {path}: reset {reset} in a {window} s window");
    }
    // Shared: identify, merge, delete and the alias endpoints count as one; v1 and v2
    // of the subscription update as one; the other buckets apart.
    let remaining = |r: &engage_tests::Reply| -> u64 {
        r.header("x-ratelimit-remaining").and_then(|v| v.parse().ok()).expect("remaining")
    };
    let first = remaining(&api.post("/users/identify", json!({})).await);
    assert_eq!(remaining(&api.post("/users/alias/update", json!({})).await), first - 1);
    let set = remaining(&api.post("/subscription/status/set", json!({})).await);
    assert_eq!(remaining(&api.post("/v2/subscription/status/set", json!({})).await), set - 1);
    assert_eq!(remaining(&api.post("/users/merge", json!({})).await), first - 2, "not counted by the other bucket");
}

#[tokio::test]
async fn operator_routes_need_the_admin_token() {
    let r = send("POST", "/_engage/keys", &[("Authorization", "Bearer wrong")], Some(b"{}".to_vec())).await;
    assert_eq!(r.status, 401);
    let r = admin("POST", "/_engage/keys", json!({"workspace": "bad name!"})).await;
    assert_eq!(r.status, 400);
    let r = admin("POST", "/_engage/keys", json!({"permissions": ["users.fly"]})).await;
    assert_eq!(r.status, 400);
    assert!(!host().base.is_empty());
}
