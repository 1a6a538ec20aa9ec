//! PyPI `edx-braze-client` (Open edX): its client sends the learner's integer id as
//! `external_id`, and its tests mock the platform's answers (201 for export).

use serde_json::json;

use super::{replay, Recorded};
use engage_tests::Api;

#[tokio::test]
async fn identify_users_with_an_integer_lms_id() {
    let api = Api::new().await;
    api.post(
        "/users/alias/new",
        json!({"user_aliases": [{"alias_name": "learner@example.com", "alias_label": "billing"}]}),
    )
    .await;
    replay(&api, Recorded {
        method: "POST",
        path: "/users/identify",
        body: Some(json!({"aliases_to_identify": [{"external_id": 42, "user_alias": {"alias_name": "learner@example.com", "alias_label": "billing"}}]})),
        status: 201,
        answer: json!({"aliases_processed": 1, "message": "success"}),
    })
    .await;
    let exported =
        api.post("/users/export/ids", json!({"external_ids": ["42"], "fields_to_export": ["external_id"]})).await;
    assert_eq!((exported.status, &exported.body["users"][0]["external_id"]), (201, &json!("42")));
}

#[tokio::test]
async fn track_user_with_an_integer_id_and_python_isoformat_times() {
    let api = Api::new().await;
    replay(&api, Recorded {
        method: "POST",
        path: "/users/track",
        body: Some(json!({
            "attributes": [{"external_id": 42, "email": "learner@example.com"}],
            "events": [{"external_id": 42, "name": "edx.bi.user.account.registered", "time": "2024-05-01T10:00:00.123456+00:00"}]
        })),
        status: 201,
        answer: json!({"attributes_processed": 1, "events_processed": 1, "message": "success"}),
    })
    .await;
}
