//! POST /users/alias/new and /users/alias/update.

use super::*;

#[tokio::test]
async fn alias_new_without_external_id_creates_an_alias_only_profile() {
    let api = Api::new().await;
    let r = api.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "n1", "alias_label": "crm"}]})).await;
    assert_eq!(r.status, 201);
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "aliases_processed": 1,
      "message": "success"
    }
    "#);
    let u = by_alias(&api, "n1", "crm").await;
    assert_eq!(u["user_aliases"], json!([alias("n1", "crm")]));
    assert!(u.get("external_id").is_none());
    // Creating it again does not make a second profile.
    api.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "n1", "alias_label": "crm"}]})).await;
    assert_eq!(api.users(json!({"user_aliases": [alias("n1", "crm")]})).await.len(), 1);
}

#[tokio::test]
async fn alias_new_adds_an_alias_to_an_identified_user_once_per_label() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1"}]})).await;
    let entry = |name: &str, label: &str| json!({"external_id": "u1", "alias_name": name, "alias_label": label});
    let r = api
        .post(
            "/users/alias/new",
            json!({"user_aliases": [entry("first", "crm"), entry("second", "crm"), entry("d", "device")]}),
        )
        .await;
    assert_eq!((r.status, r.body), (201, json!({"aliases_processed": 3, "message": "success"})));
    assert_eq!(api.user("u1").await["user_aliases"], json!([alias("first", "crm"), alias("d", "device")]));
    assert_eq!(by_alias(&api, "second", "crm").await, Value::Null);
}

#[tokio::test]
async fn alias_new_for_an_unknown_external_id_adds_nothing() {
    let api = Api::new().await;
    let r = api
        .post(
            "/users/alias/new",
            json!({"user_aliases": [{"external_id": "ghost", "alias_name": "n", "alias_label": "crm"}]}),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(by_alias(&api, "n", "crm").await, Value::Null);
    assert_eq!(api.user("ghost").await, Value::Null);
}

#[tokio::test]
async fn alias_new_rejects_malformed_entries() {
    let api = Api::new().await;
    let r = api.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "n"}]})).await;
    assert_eq!(
        (r.status, r.body),
        (400, json!({"message": "each entry of 'user_aliases' needs 'alias_label', a non-empty string"}))
    );
    let many: Vec<Value> = (0..51).map(|i| json!({"alias_name": format!("n{i}"), "alias_label": "l"})).collect();
    let r = api.post("/users/alias/new", json!({"user_aliases": many})).await;
    assert_eq!(
        (r.status, r.body),
        (400, json!({"message": "a single request may not contain more than 50 'user_aliases'"}))
    );
}

#[tokio::test]
async fn alias_update_renames_an_alias_and_keeps_the_profile() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "x": 1}]})).await;
    api.post(
        "/users/alias/new",
        json!({"user_aliases": [{"external_id": "u1", "alias_name": "old", "alias_label": "crm"}]}),
    )
    .await;
    let r = api
        .post(
            "/users/alias/update",
            json!({"alias_updates": [{"alias_label": "crm", "old_alias_name": "old", "new_alias_name": "new"}]}),
        )
        .await;
    assert_eq!((r.status, r.body), (201, json!({"message": "success"})));
    assert_eq!(by_alias(&api, "old", "crm").await, Value::Null);
    let u = by_alias(&api, "new", "crm").await;
    assert_eq!(u["external_id"], "u1");
    assert_eq!(u["user_aliases"], json!([alias("new", "crm")]));
}

#[tokio::test]
async fn alias_update_of_a_missing_alias_or_to_a_taken_name_changes_nothing() {
    let api = Api::new().await;
    api.post(
        "/users/alias/new",
        json!({"user_aliases": [{"alias_name": "a", "alias_label": "crm"}, {"alias_name": "b", "alias_label": "crm"}]}),
    )
    .await;
    let upd = |old: &str, new: &str| json!({"alias_label": "crm", "old_alias_name": old, "new_alias_name": new});
    let r = api.post("/users/alias/update", json!({"alias_updates": [upd("ghost", "c"), upd("a", "b")]})).await;
    assert_eq!(r.status, 201);
    assert_eq!(by_alias(&api, "c", "crm").await, Value::Null);
    assert_eq!(by_alias(&api, "a", "crm").await["user_aliases"], json!([alias("a", "crm")]));
    assert_eq!(by_alias(&api, "b", "crm").await["user_aliases"], json!([alias("b", "crm")]));
}

#[tokio::test]
async fn profiles_created_after_a_catch_up_never_replace_existing_ones() {
    // The queue catch-up and the request's own handler must not mint the same ids.
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u", "keep": 1}]})).await;
    let r = api
        .post(
            "/users/alias/new",
            json!({"user_aliases": [
                {"external_id": "u", "alias_name": "a1", "alias_label": "crm"},
                {"alias_name": "a2", "alias_label": "crm"}
            ]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(api.user("u").await["custom_attributes"]["keep"], json!(1));
    let users = api.users(json!({"user_aliases": [{"alias_name": "a2", "alias_label": "crm"}]})).await;
    assert_eq!(users.len(), 1);
    assert!(users[0].get("external_id").is_none());
}
