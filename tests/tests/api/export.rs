//! Black-box tests: POST /users/export/ids.

use engage_tests::Api;
use serde_json::{json, Value};

#[tokio::test]
async fn unknown_identifiers_are_listed_as_invalid() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "known", "a": 1}]})).await;
    let r = api.post("/users/export/ids", json!({"external_ids": ["known", "unknown"]})).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["users"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["invalid_user_ids"], json!(["unknown"]));
    assert_eq!(r.body["message"], json!("success"));
}

#[tokio::test]
async fn more_than_50_ids_are_rejected() {
    let api = Api::new().await;
    let ids: Vec<String> = (0..51).map(|i| format!("u{i}")).collect();
    let r = api.post("/users/export/ids", json!({"external_ids": ids})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body, json!({"message": "The max number of external_ids and aliases per request was exceeded"}));
}

#[tokio::test]
async fn fields_to_export_restricts_the_fields() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "first_name": "A", "x": 1}]})).await;
    let users =
        api.users(json!({"external_ids": ["u1"], "fields_to_export": ["first_name", "custom_attributes"]})).await;
    assert_eq!(users, vec![json!({"first_name": "A", "custom_attributes": {"x": 1}})]);
    let r = api.post("/users/export/ids", json!({"external_ids": ["u1"], "fields_to_export": ["shoe_size"]})).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn export_by_email_returns_every_user_with_that_email() {
    let api = Api::new().await;
    api.track(json!({"attributes": [
        {"external_id": "a", "email": "s@example.com"},
        {"external_id": "b", "email": "s@example.com"},
        {"external_id": "c", "email": "other@example.com"}
    ]}))
    .await;
    let mut ids: Vec<String> = api
        .users(json!({"email_address": "S@example.com"}))
        .await
        .iter()
        .map(|u| u["external_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, vec!["a", "b"]);
}

#[tokio::test]
async fn export_by_service_id_finds_the_profile() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1"}]})).await;
    let sid = api.user("u1").await["service_id"].as_str().unwrap().to_string();
    let users = api.users(json!({"service_id": sid})).await;
    assert_eq!(users[0]["external_id"], json!("u1"));
}

#[tokio::test]
async fn bad_export_bodies_are_400s() {
    let api = Api::new().await;
    for body in
        [json!({}), json!({"external_ids": "u1"}), json!({"external_ids": [1.5]}), json!({"phone": "123"}), json!([])]
    {
        let r = api.post("/users/export/ids", body.clone()).await;
        assert_eq!(r.status, 400, "{body}");
        assert!(r.body["message"].is_string());
    }
}

#[tokio::test]
async fn workspaces_never_see_each_other() {
    let a = Api::new().await;
    let b = Api::new().await;
    a.track(json!({"attributes": [{"external_id": "same", "owner": "a"}]})).await;
    b.track(json!({"attributes": [{"external_id": "same", "owner": "b"}]})).await;
    assert_eq!(a.user("same").await["custom_attributes"]["owner"], json!("a"));
    assert_eq!(b.user("same").await["custom_attributes"]["owner"], json!("b"));
    let c = Api::new().await;
    assert_eq!(c.user("same").await, Value::Null);
}
