//! Black-box tests: subscription groups and the global email state
//! (`/subscription/status/set`, `/v2/subscription/status/set`,
//! `/subscription/user/status`, `/subscription/status/get`, `/email/status`,
//! `/email/blocklist`, `/email/blacklist`), read back through the status
//! endpoints and `/users/export/ids`.

mod email_state;
mod lists;
mod reads;
mod set_v1;
mod set_v2;

use engage_tests::{Api, Reply};
use serde_json::{json, Value};

pub(super) const BOTH: &str = "Either an email address or a phone number should be provided, but not both.";
pub(super) const BAD_GROUP: &str = "'subscription_group_id' must be a valid subscription group UUID";
/// The platform's answer to a group id no group has (recorded by public clients).
pub(super) const UNKNOWN_GROUP: &str = "Invalid subscription group ID";
pub(super) const BAD_GROUP_STATE: &str =
    "'subscription_state' for a subscription group must be 'subscribed' or 'unsubscribed'";
pub(super) const TOO_MANY: &str = "The max number of ids per request was exceeded";

pub(super) async fn users(api: &Api, attributes: Value) {
    api.track(json!({ "attributes": attributes })).await;
}

pub(super) async fn set_v1(api: &Api, body: Value) -> Reply {
    api.post("/subscription/status/set", body).await
}

pub(super) async fn set_v2(api: &Api, groups: Value) -> Reply {
    api.post("/v2/subscription/status/set", json!({ "subscription_groups": groups })).await
}

/// The `status` object of `/subscription/status/get` (asserting 200).
pub(super) async fn status_of(api: &Api, group: &str, query: &str) -> Value {
    let r = api.get(&format!("/subscription/status/get?subscription_group_id={group}&{query}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["status"].clone()
}

/// The stored status of a group for an external id, as `/subscription/status/get` reads it.
pub(super) async fn status(api: &Api, group: &str, external_id: &str) -> String {
    status_of(api, group, &format!("external_id={external_id}")).await[external_id]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A user's exported `subscription_groups` entry for a group (`Null` when absent).
pub(super) async fn exported(api: &Api, external_id: &str, group: &str) -> Value {
    let u = api.user(external_id).await;
    let list = u["subscription_groups"].as_array().cloned().unwrap_or_default();
    list.into_iter().find(|g| g["id"] == group).unwrap_or(Value::Null)
}

pub(super) fn success() -> Value {
    json!({"message": "success"})
}

pub(super) fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("u{i}")).collect()
}

#[tokio::test]
async fn an_unknown_group_id_is_a_400_with_the_platform_message_everywhere() {
    let api = Api::new().await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com"}])).await;
    let v1 = set_v1(
        &api,
        json!({"subscription_group_id": "nope", "subscription_state": "subscribed", "external_id": ["u1"]}),
    )
    .await;
    let v2 = set_v2(
        &api,
        json!([{"subscription_group_id": "nope", "subscription_state": "subscribed", "external_ids": ["u1"]}]),
    )
    .await;
    let get = api.get("/subscription/status/get?subscription_group_id=nope&external_id=u1").await;
    for r in [v1, v2, get] {
        assert_eq!((r.status, r.body), (400, json!({"message": UNKNOWN_GROUP})));
    }
    let missing = set_v1(&api, json!({"subscription_state": "subscribed", "external_id": ["u1"]})).await;
    assert_eq!((missing.status, missing.body), (400, json!({"message": BAD_GROUP})));
}

#[tokio::test]
async fn groups_belong_to_their_workspace() {
    let api = Api::new().await;
    let other = Api::new().await;
    let g = other.group("News", "email").await;
    users(&api, json!([{"external_id": "u1"}])).await;
    let r =
        set_v1(&api, json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ["u1"]}))
            .await;
    assert_eq!((r.status, r.body), (400, json!({"message": UNKNOWN_GROUP})));
}
