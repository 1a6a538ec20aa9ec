//! Black-box tests: POST /users/identify, /users/merge, /users/delete,
//! /users/alias/new, /users/alias/update, and the prioritization they share.
//! Every result is read back through /users/export/ids. One file per operation;
//! the helpers they share are here.

mod aliases;
mod delete;
mod external_ids;
mod identify;
mod merge;
mod prioritization;

pub(super) use engage_tests::{redact, tick, Api, Reply};
pub(super) use serde_json::{json, Value};

pub(super) const T1: &str = "2024-01-10T00:00:00Z";
pub(super) const T2: &str = "2024-02-20T00:00:00Z";
pub(super) const T3: &str = "2024-03-30T00:00:00Z";

pub(super) const MERGE_NOT_ARRAY: &str = "'merge_updates' must be an array of objects";
pub(super) const MERGE_TOO_MANY: &str = "a single request may not contain more than 50 merge updates";
pub(super) const MERGE_BAD_IDENTIFIER: &str = "identifiers must be objects with an 'external_id' property that is a string, 'user_alias' property that is an object, 'email' property that is a string, or 'phone' property that is a string";
pub(super) const MERGE_EXTRA_KEYS: &str =
    "'merge_updates' must only have 'identifier_to_merge' and 'identifier_to_keep'";

pub(super) fn alias(name: &str, label: &str) -> Value {
    json!({"alias_name": name, "alias_label": label})
}

/// Creates (or updates) an alias-only profile with the given attributes.
pub(super) async fn anon(api: &Api, name: &str, label: &str, attrs: Value) {
    let mut obj = attrs.as_object().cloned().unwrap_or_default();
    obj.insert("user_alias".into(), alias(name, label));
    obj.insert("_update_existing_only".into(), json!(false));
    api.track(json!({"attributes": [obj]})).await;
}

pub(super) async fn by_alias(api: &Api, name: &str, label: &str) -> Value {
    api.users(json!({"user_aliases": [alias(name, label)]})).await.into_iter().next().unwrap_or(Value::Null)
}

pub(super) async fn by_email(api: &Api, email: &str) -> Vec<Value> {
    api.users(json!({"email_address": email})).await
}

pub(super) fn ext(x: &str) -> Value {
    json!({"external_id": x})
}

pub(super) fn upd(merge: Value, keep: Value) -> Value {
    json!({"identifier_to_merge": merge, "identifier_to_keep": keep})
}

pub(super) async fn merge(api: &Api, updates: Vec<Value>) -> Reply {
    api.post("/users/merge", json!({"merge_updates": updates})).await
}

pub(super) fn identify_alias(x: &str, name: &str, label: &str) -> Value {
    json!({"external_id": x, "user_alias": alias(name, label)})
}

pub(super) fn custom(u: &Value) -> Value {
    u.get("custom_attributes").cloned().unwrap_or(Value::Null)
}

/// A body that is not JSON, or not the JSON each endpoint reads, is a 400 with the
/// platform's message: the identity endpoints, and export, which reads users back.
#[tokio::test]
async fn malformed_bodies_are_400s_with_the_platforms_message() {
    let api = Api::new().await;
    let object = "The request body must be a JSON object";
    let cases = [
        ("/users/identify", object),
        ("/users/delete", object),
        ("/users/export/ids", object),
        ("/users/merge", MERGE_NOT_ARRAY),
        ("/users/alias/new", "'user_aliases' must be an array of objects"),
        ("/users/alias/update", "'alias_updates' must be an array of objects"),
    ];
    for (path, not_object) in cases {
        let r = api.call("POST", path, Some(b"{not json".to_vec())).await;
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        let message = r.body["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("Invalid JSON body: "), "{path}: {message}");
        let r = api.call("POST", path, Some(b"[1]".to_vec())).await;
        assert_eq!((r.status, r.body["message"].as_str()), (400, Some(not_object)), "{path}: {}", r.body);
    }
}
