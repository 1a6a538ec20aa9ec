//! POST /users/delete.

use super::*;

#[tokio::test]
async fn delete_accepts_every_identifier_kind_in_one_request() {
    let api = Api::new().await;
    api.track(json!({"attributes": [
        {"external_id": "x1"},
        {"external_id": "x2"},
        {"email": "e@example.com"},
        {"phone": "+14155550100"}
    ]}))
    .await;
    anon(&api, "al", "crm", json!({})).await;
    let sid = api.user("x2").await["service_id"].as_str().unwrap().to_string();
    let r = api
        .post(
            "/users/delete",
            json!({
                "external_ids": ["x1", "nobody"],
                "user_aliases": [alias("al", "crm")],
                "service_ids": [sid],
                "email_addresses": [{"email": "e@example.com", "prioritization": ["unidentified"]}],
                "phone_numbers": [{"phone": "+14155550100", "prioritization": ["most_recently_updated"]}]
            }),
        )
        .await;
    assert_eq!(r.status, 201);
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "deleted": 5,
      "message": "success"
    }
    "#);
    let left = api
        .users(json!({"external_ids": ["x1", "x2"], "user_aliases": [alias("al", "crm")], "email_address": "e@example.com", "phone": "+14155550100"}))
        .await;
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn nothing_of_a_deleted_user_can_be_read_back() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    api.track(json!({
        "attributes": [{"external_id": "u1", "email": "u1@example.com", "phone": "+14155550111", "first_name": "Ann", "x": 1,
                        "subscription_groups": [{"subscription_group_id": g, "subscription_state": "subscribed"}]}],
        "events": [{"external_id": "u1", "name": "e", "time": T1}],
        "purchases": [{"external_id": "u1", "product_id": "p", "currency": "USD", "price": 1.0, "time": T1}]
    }))
    .await;
    api.post(
        "/users/alias/new",
        json!({"user_aliases": [{"external_id": "u1", "alias_name": "a1", "alias_label": "crm"}]}),
    )
    .await;
    let sid = api.user("u1").await["service_id"].as_str().unwrap().to_string();
    let r = api.post("/users/delete", json!({"external_ids": ["u1"]})).await;
    assert_eq!((r.status, r.body), (201, json!({"deleted": 1, "message": "success"})));
    let r = api
        .post(
            "/users/export/ids",
            json!({"external_ids": ["u1"], "user_aliases": [alias("a1", "crm")], "service_id": sid,
                   "email_address": "u1@example.com", "phone": "+14155550111"}),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["users"], json!([]));
    assert_eq!(r.body["invalid_user_ids"].as_array().map(Vec::len), Some(5));
}

#[tokio::test]
async fn delete_then_track_the_same_external_id_starts_a_fresh_profile() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "first_name": "Ann", "x": 1}], "events": [{"external_id": "u1", "name": "e", "time": T1}]})).await;
    let old = api.user("u1").await["service_id"].clone();
    assert_eq!(api.post("/users/delete", json!({"external_ids": ["u1"]})).await.body["deleted"], 1);
    api.track(json!({"attributes": [{"external_id": "u1", "y": 2}]})).await;
    let u = api.user("u1").await;
    assert_ne!(u["service_id"], old);
    assert_eq!(custom(&u), json!({"y": 2}));
    assert!(u.get("first_name").is_none());
    assert!(u.get("custom_events").is_none());
}

#[tokio::test]
async fn delete_by_email_follows_prioritization() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "email": "s@example.com"}]})).await;
    anon(&api, "anon", "device", json!({"email": "s@example.com"})).await;
    let del = |p: Value| {
        api.post("/users/delete", json!({"email_addresses": [{"email": "s@example.com", "prioritization": p}]}))
    };
    let r = del(json!(["unidentified"])).await;
    assert_eq!(r.body["deleted"], 1);
    assert_eq!(by_alias(&api, "anon", "device").await, Value::Null);
    assert_eq!(api.user("u1").await["email"], "s@example.com");
    let r = del(json!(["identified"])).await;
    assert_eq!(r.body["deleted"], 1);
    assert_eq!(api.user("u1").await, Value::Null);
    let r = del(json!(["identified"])).await;
    assert_eq!((r.status, r.body), (201, json!({"deleted": 0, "message": "success"})));
}

#[tokio::test]
async fn delete_with_more_than_50_entries_in_all_is_rejected() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u0"}]})).await;
    let ids: Vec<String> = (0..30).map(|i| format!("u{i}")).collect();
    let aliases: Vec<Value> = (0..21).map(|i| alias(&format!("a{i}"), "l")).collect();
    let r = api.post("/users/delete", json!({"external_ids": ids, "user_aliases": aliases})).await;
    assert_eq!(
        (r.status, r.body),
        (400, json!({"message": "a single request may not contain more than 50 users to delete"}))
    );
    assert!(api.user("u0").await.is_object());
    let ids: Vec<String> = (0..50).map(|i| format!("u{i}")).collect();
    let r = api.post("/users/delete", json!({"external_ids": ids})).await;
    assert_eq!((r.status, r.body["deleted"].clone()), (201, json!(1)));
}

#[tokio::test]
async fn delete_rejects_bodies_without_identifiers_or_with_malformed_entries() {
    let api = Api::new().await;
    let r = api.post("/users/delete", json!({})).await;
    assert_eq!(
        (r.status, r.body),
        (
            400,
            json!({"message": "one of 'external_ids', 'user_aliases', 'service_ids', 'email_addresses' or 'phone_numbers' is required"})
        )
    );
    let r = api.post("/users/delete", json!({"phone_numbers": ["+14155550100"]})).await;
    assert_eq!(
        (r.status, r.body),
        (
            400,
            json!({"message": "each entry of 'phone_numbers' must be an object with 'phone' (a valid E.164 phone number) and 'prioritization'"})
        )
    );
    let r = api.post("/users/delete", json!({"external_ids": "u1"})).await;
    assert_eq!((r.status, r.body), (400, json!({"message": "'external_ids' must be an array"})));
}
