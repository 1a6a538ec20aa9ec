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
