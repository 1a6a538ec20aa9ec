//! Ruby's `braze_ruby` (and its predecessor `appboy`): its VCR cassettes
//! (`spec/fixtures/responses/**`, recorded 2020-2021 against the platform) hold
//! these requests and answers. Its factories send ids as numbers and times as
//! Ruby's `Time#to_s`.

use serde_json::json;

use super::{replay, Recorded};
use engage_tests::{send, Api};

#[tokio::test]
async fn track_with_numeric_ids_and_ruby_times() {
    let api = Api::new().await;
    let time = "2019-02-15 00:00:00 -0500";
    replay(&api, Recorded {
        method: "POST",
        path: "/users/track",
        body: Some(json!({
            "attributes": [{"external_id": 1, "foo": "bar"}],
            "events": [{"external_id": 1, "name": "test-event", "time": time}],
            "purchases": [{"external_id": 1, "product_id": 1, "currency": "USD", "price": 1, "time": time}]
        })),
        status: 201,
        answer: json!({"attributes_processed": 1, "events_processed": 1, "purchases_processed": 1, "message": "success"}),
    })
    .await;
}

#[tokio::test]
async fn delete_and_export_by_numeric_ids() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "400"}, {"external_id": "401"}, {"external_id": "402"}, {"external_id": "12345"}]}))
        .await;
    replay(
        &api,
        Recorded {
            method: "POST",
            path: "/users/delete",
            body: Some(json!({"external_ids": [400, 401, 402]})),
            status: 201,
            answer: json!({"deleted": 3, "message": "success"}),
        },
    )
    .await;
    let exported = api.post("/users/export/ids", json!({"external_ids": [12345]})).await;
    assert_eq!(exported.status, 201, "recorded: 201");
    assert_eq!(exported.body["users"][0]["external_id"], "12345", "the id comes back as a string");
    assert_eq!(exported.body["message"], "success");
}

#[tokio::test]
async fn identify_with_a_numeric_external_id() {
    let api = Api::new().await;
    api.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "abc", "alias_label": "foo"}]})).await;
    replay(&api, Recorded {
        method: "POST",
        path: "/users/identify",
        body: Some(json!({"aliases_to_identify": [{"external_id": 12345, "user_alias": {"alias_name": "abc", "alias_label": "foo"}}]})),
        status: 201,
        answer: json!({"aliases_processed": 1, "message": "success"}),
    })
    .await;
}

#[tokio::test]
async fn create_user_aliases_nested() {
    let api = Api::new().await;
    replay(
        &api,
        Recorded {
            method: "POST",
            path: "/users/alias/new",
            body: Some(json!({"user_aliases": [{"user_alias": {"alias_name": "abc", "alias_label": "foo"}}]})),
            status: 201,
            answer: json!({"aliases_processed": 1, "message": "success"}),
        },
    )
    .await;
}

#[tokio::test]
async fn subscription_status_set_v1_and_v2_with_one_external_id() {
    let api = Api::new().await;
    let group = api.group("News", "email").await;
    api.track(json!({"attributes": [{"external_id": "test-user-1"}]})).await;
    for (path, body) in [
        (
            "/subscription/status/set",
            json!({"external_id": "test-user-1", "subscription_group_id": group, "subscription_state": "subscribed"}),
        ),
        (
            "/v2/subscription/status/set",
            json!({"subscription_groups": [{"external_id": "test-user-1", "subscription_group_id": group, "subscription_state": "subscribed"}]}),
        ),
    ] {
        replay(
            &api,
            Recorded { method: "POST", path, body: Some(body), status: 201, answer: json!({"message": "success"}) },
        )
        .await;
    }
    let unknown = json!({"external_id": "test-user-1", "subscription_group_id": "0a0a0a0a-0000-4000-8000-000000000000", "subscription_state": "subscribed"});
    replay(
        &api,
        Recorded {
            method: "POST",
            path: "/subscription/status/set",
            body: Some(unknown),
            status: 400,
            answer: json!({"message": "Invalid subscription group ID"}),
        },
    )
    .await;
}

#[tokio::test]
async fn email_status_for_an_address_no_user_has() {
    let api = Api::new().await;
    replay(
        &api,
        Recorded {
            method: "POST",
            path: "/email/status",
            body: Some(json!({"email": "nobody-yet@example.com", "subscription_state": "subscribed"})),
            status: 201,
            answer: json!({"message": "success"}),
        },
    )
    .await;
}

#[tokio::test]
async fn rename_and_remove_external_ids() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "abc"}]})).await;
    replay(&api, Recorded {
        method: "POST",
        path: "/users/external_ids/rename",
        body: Some(json!({"external_id_renames": [{"current_external_id": "abc", "new_external_id": "foo"}]})),
        status: 201,
        answer: json!({"rename_errors": [], "external_ids": [{"current_external_id": "abc", "new_external_id": "foo"}], "message": "success"}),
    })
    .await;
    replay(
        &api,
        Recorded {
            method: "POST",
            path: "/users/external_ids/remove",
            body: Some(json!({"external_ids": ["abc"]})),
            status: 201,
            answer: json!({"removed_ids": ["abc"], "removal_errors": [], "message": "success"}),
        },
    )
    .await;
}

#[tokio::test]
async fn an_unknown_key_is_named_in_the_answer() {
    let r = send(
        "POST",
        "/users/track",
        &[("Authorization", "Bearer non-existent"), ("Content-Type", "application/json")],
        Some(b"{}".to_vec()),
    )
    .await;
    assert_eq!((r.status, r.body), (401, json!({"message": "Invalid API key: non-existent"})));
}
