//! Black-box tests: POST /users/track/sync.

use engage_tests::Api;
use serde_json::json;

#[tokio::test]
async fn sync_attributes_return_only_the_requested_custom_attributes() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "other": 1, "n": 1}]})).await;
    let r =
        api.post("/users/track/sync", json!({"attributes": [{"external_id": "u1", "n": {"inc": 2}, "s": "x"}]})).await;
    assert_eq!(r.status, 201);
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "message": "success",
      "users": [
        {
          "custom_attributes": {
            "n": 3,
            "s": "x"
          },
          "external_id": "u1"
        }
      ]
    }
    "#);
}

#[tokio::test]
async fn sync_events_return_the_event_summary() {
    let api = Api::new().await;
    let ev = |t: &str| json!({"events": [{"email": "a@example.com", "name": "rented_movie", "time": t}]});
    api.post("/users/track/sync", ev("2022-01-01T00:00:00Z")).await;
    let r = api.post("/users/track/sync", ev("2022-12-06T18:20:45Z")).await;
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "message": "success",
      "users": [
        {
          "custom_events": [
            {
              "count": 2,
              "first": "2022-01-01T00:00:00.000Z",
              "last": "2022-12-06T18:20:45.000Z",
              "name": "rented_movie"
            }
          ],
          "email": "a@example.com"
        }
      ]
    }
    "#);
}

#[tokio::test]
async fn sync_purchases_return_the_purchase_summary() {
    let api = Api::new().await;
    let alias = json!({"alias_name": "device123", "alias_label": "my_device_identifier"});
    api.track(json!({"attributes": [{"user_alias": alias, "_update_existing_only": false}]})).await;
    let r = api
        .post(
            "/users/track/sync",
            json!({"purchases": [{"user_alias": alias, "product_id": "Completed Order", "currency": "USD", "price": 9.5,
                "time": "2022-12-06T18:20:45Z"}]}),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(
        r.body["users"],
        json!([{"user_alias": alias, "purchase_events": [{"product_id": "Completed Order",
            "first": "2022-12-06T18:20:45.000Z", "last": "2022-12-06T18:20:45.000Z", "count": 1}]}])
    );
}

#[tokio::test]
async fn sync_for_a_missing_user_with_update_existing_only_returns_no_users() {
    let api = Api::new().await;
    let r = api
        .post(
            "/users/track/sync",
            json!({"attributes": [{"external_id": "nobody", "_update_existing_only": true, "a": 1}]}),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body, json!({"message": "success", "users": []}));
    assert_eq!(api.user("nobody").await, serde_json::Value::Null);
}

#[tokio::test]
async fn sync_accepts_exactly_one_object() {
    let api = Api::new().await;
    let r = api
        .post(
            "/users/track/sync",
            json!({"attributes": [{"external_id": "u1", "a": 1}], "events": [{"external_id": "u1", "name": "e", "time": "2024-01-01T00:00:00Z"}]}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["message"], json!("A request may contain only one attribute, event or purchase object"));
    assert_eq!(api.user("u1").await, serde_json::Value::Null);
    let r = api.post("/users/track/sync", json!({"attributes": [{"external_id": "u1"}, {"external_id": "u2"}]})).await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn sync_sees_every_write_acknowledged_before_it() {
    let api = Api::new().await;
    for _ in 0..5 {
        api.track(json!({"attributes": [{"external_id": "u1", "n": {"inc": 1}}]})).await;
    }
    let r = api.post("/users/track/sync", json!({"attributes": [{"external_id": "u1", "n": {"inc": 1}}]})).await;
    assert_eq!(r.body["users"][0]["custom_attributes"]["n"], json!(6));
}
