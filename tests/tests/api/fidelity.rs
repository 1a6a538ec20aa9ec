//! What the hosted platform accepts beyond the reference, and its own status codes
//! and words, replayed in the shapes public clients send (docs/decisions/fidelity.md
//! says where each was seen). `--strict` refusing each form is tested in
//! host-native/tests/native/strict.rs.

use engage_tests::{send, Api};
use serde_json::{json, Value};

fn alias(name: &str, label: &str) -> Value {
    json!({"alias_name": name, "alias_label": label})
}

/// braze_ruby's factories and edx-braze-client send ids as JSON numbers; the
/// platform read them as their decimal text (recorded answers: 201).
/// fidelity-number-ids
#[tokio::test]
async fn numbers_as_identifiers_name_the_user_of_their_decimal_text() {
    let api = Api::new().await;
    let r = api
        .post(
            "/users/track",
            json!({"attributes": [{"external_id": 1, "foo": "bar"}],
                   "events": [{"external_id": 1, "name": "e", "time": "2019-02-15T00:00:00Z"}],
                   "purchases": [{"external_id": 1, "product_id": 1, "currency": "USD", "price": 1.5, "time": "2019-02-15T00:00:00Z"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"attributes_processed": 1, "events_processed": 1, "purchases_processed": 1, "message": "success"})
    );
    let exported = api.post("/users/export/ids", json!({"external_ids": [1]})).await;
    assert_eq!(exported.status, 201, "{}", exported.body);
    let user = &exported.body["users"][0];
    assert_eq!(user["external_id"], "1", "identifiers come back as strings: {user}");
    assert_eq!(user["custom_attributes"]["foo"], "bar");
    assert_eq!(user["purchases"][0]["name"], "1", "{user}");
    // Identify, merge and delete name users by numbers too.
    assert_eq!(api.post("/users/alias/new", json!({"user_aliases": [alias("anon-2", "dev")]})).await.status, 201);
    let r = api
        .post(
            "/users/identify",
            json!({"aliases_to_identify": [{"external_id": 2, "user_alias": alias("anon-2", "dev")}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(api.user("2").await["user_aliases"][0]["alias_name"], "anon-2", "identified as \"2\"");
    let merge = json!({"merge_updates": [{"identifier_to_merge": {"external_id": 1}, "identifier_to_keep": {"external_id": 3}}]});
    api.track(json!({"attributes": [{"external_id": "3"}]})).await;
    assert_eq!(api.post("/users/merge", merge).await.status, 202);
    assert_eq!(api.user("3").await["custom_attributes"]["foo"], "bar", "merged from the user named 1");
    let deleted = api.post("/users/delete", json!({"external_ids": [3, 400, 401]})).await;
    assert_eq!((deleted.status, deleted.body["deleted"].clone()), (201, json!(1)), "{}", deleted.body);
    assert_eq!(api.user("3").await, Value::Null);
    // Not every number is an id.
    for bad in [json!(1.5), json!(9_007_199_254_740_992u64)] {
        let r = api.post("/users/export/ids", json!({"external_ids": [bad]})).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        let r = api.post("/users/track", json!({"attributes": [{"external_id": bad, "a": 1}]})).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
}

/// Event and purchase times as Ruby's `Time#to_s`, PHP, .NET and the platform's
/// own examples write them. fidelity-time-forms
#[tokio::test]
async fn event_times_in_the_forms_clients_send_are_read_as_the_platform_reads_them() {
    let api = Api::new().await;
    let forms = [
        ("2019-02-15 00:00:00 -0500", "2019-02-15T05:00:00.000Z"),
        ("2019-02-15T00:00:00+00:00", "2019-02-15T00:00:00.000Z"),
        ("2024-01-01T00:00:00.1234567+00:00", "2024-01-01T00:00:00.123Z"),
        ("2013-07-16T19:20:30+1:00", "2013-07-16T18:20:30.000Z"),
        ("2015-02-20T13:14:47", "2015-02-20T13:14:47.000Z"),
        ("2019-02-15T00:00:00:250-0500", "2019-02-15T05:00:00.250Z"),
    ];
    for (i, (time, want)) in forms.iter().enumerate() {
        let user = format!("t{i}");
        let r = api.post("/users/track", json!({"events": [{"external_id": user, "name": "e", "time": time}]})).await;
        assert_eq!((r.status, &r.body["events_processed"]), (201, &json!(1)), "{time}: {}", r.body);
        let event = &api.user(&user).await["custom_events"][0];
        assert_eq!(event["first"], json!(want), "{time}: {event}");
    }
    let r = api.post("/users/track", json!({"events": [{"external_id": "x", "name": "e", "time": "yesterday"}]})).await;
    assert_eq!(r.status, 400, "{}", r.body);
}

/// braze_ruby's README and client send aliases nested in `user_alias`.
/// fidelity-nested-alias
#[tokio::test]
async fn a_nested_user_alias_in_alias_new_makes_the_alias() {
    let api = Api::new().await;
    let r = api.post("/users/alias/new", json!({"user_aliases": [{"user_alias": alias("abc", "foo")}]})).await;
    assert_eq!((r.status, r.body), (201, json!({"aliases_processed": 1, "message": "success"})));
    assert_eq!(api.users(json!({"user_aliases": [alias("abc", "foo")]})).await.len(), 1, "the alias exists");
}

/// braze_ruby sends v2 entries with v1's singular `external_id`; the platform's
/// Postman collection names `email` and `external_id` too. fidelity-singular-fields
#[tokio::test]
async fn v2_entries_naming_users_with_singular_fields_set_their_states() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    api.track(json!({"attributes": [{"external_id": "u1", "email": "u1@example.com"}, {"external_id": "u2", "email": "u2@example.com"}]}))
        .await;
    let body = json!({"subscription_groups": [
        {"subscription_group_id": g, "subscription_state": "subscribed", "external_id": "u1"},
        {"subscription_group_id": g, "subscription_state": "subscribed", "external_ids": 2}]});
    let r = api.post("/v2/subscription/status/set", body).await;
    assert_eq!((r.status, r.body["message"].clone()), (201, json!("success")), "{}", r.body);
    let r = api.get(&format!("/subscription/status/get?subscription_group_id={g}&external_id=u1")).await;
    assert_eq!(r.body["status"]["u1"], "Subscribed", "{}", r.body);
    let r = api.post(
        "/v2/subscription/status/set",
        json!({"subscription_groups": [{"subscription_group_id": g, "subscription_state": "unsubscribed", "email": "u2@example.com"}]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

/// The platform's own status codes and words, as recorded by public clients.
/// fidelity-status-codes
#[tokio::test]
async fn status_codes_and_messages_are_the_platform_s() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1"}]})).await;
    let r = api.post("/users/export/ids", json!({"external_ids": ["u1", "nobody"]})).await;
    assert_eq!(r.status, 201, "export answers 201");
    assert_eq!(r.body["invalid_user_ids"], json!(["nobody"]));
    let r = send("POST", "/users/track", &[("Authorization", "Bearer non-existent")], Some(b"{}".to_vec())).await;
    assert_eq!((r.status, r.body), (401, json!({"message": "Invalid API key: non-existent"})));
    let r = api
        .post("/subscription/status/set", json!({"subscription_group_id": "0a0a0a0a-0000-4000-8000-000000000000", "subscription_state": "subscribed", "external_id": "u1"}))
        .await;
    assert_eq!((r.status, r.body), (400, json!({"message": "Invalid subscription group ID"})));
}

/// What the platform still takes but Engage does not: a key in the body is no
/// credential here (it would be kept by logs and journals). fidelity-not-taken
#[tokio::test]
async fn a_key_in_the_body_is_no_credential() {
    let api = Api::new().await;
    let body = json!({"api_key": api.key, "attributes": [{"external_id": "u1"}]}).to_string().into_bytes();
    let r = send("POST", "/users/track", &[("Content-Type", "application/json")], Some(body)).await;
    assert_eq!(r.status, 401, "{}", r.body);
}
