//! Engine-level tests of the subscription and email endpoints on the memory store.

use serde_json::{json, Value};

use crate::http::Method;
use crate::subscriptions::groups::Channel;
use crate::testkit::Kit;

#[test]
fn email_status_for_an_unlinked_address_applies_when_a_profile_gets_it() {
    let w = Kit::new();
    let (status, body) =
        w.post("/email/status", json!({"email": "Later@Example.com", "subscription_state": "opted_in"}));
    assert_eq!((status, body), (201, json!({"message": "success"})));
    w.track_attributes(json!([{"external_id": "u1", "email": "later@example.com"}]));
    assert_eq!(w.user("u1")["email_subscribe"], "opted_in");
}

#[test]
fn blocklisting_an_unlinked_address_marks_the_profile_that_gets_it() {
    let w = Kit::new();
    assert_eq!(w.post("/email/blocklist", json!({"email": ["b@example.com"]})).0, 201);
    w.track_attributes(json!([{"email": "b@example.com", "first_name": "B"}]));
    let users = w.users(json!({"email_address": "b@example.com"}));
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["email_subscribe"], "unsubscribed");
    assert_eq!(users[0]["email_hard_bounced"], true);
}

#[test]
fn track_email_subscribe_moves_a_remembered_address_state_too() {
    let w = Kit::new();
    w.post("/email/status", json!({"email": "a@example.com", "subscription_state": "unsubscribed"}));
    w.track_attributes(json!([{"external_id": "u1", "email": "a@example.com"}]));
    w.track_attributes(json!([{"external_id": "u1", "email_subscribe": "subscribed"}]));
    // A second profile getting the address inherits the latest state, not the older one.
    w.track_attributes(json!([{"external_id": "u2", "email": "a@example.com"}]));
    assert_eq!(w.user("u2")["email_subscribe"], "subscribed");
}

#[test]
fn v1_set_by_external_id_updates_every_user_sharing_the_email() {
    let w = Kit::new();
    let g = w.group(Channel::Email);
    w.track_attributes(json!([
        {"external_id": "u1", "email": "s@example.com"},
        {"external_id": "u2", "email": "s@example.com"},
        {"external_id": "u3", "email": "other@example.com"}
    ]));
    let body = json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": "u1"});
    assert_eq!(w.post("/subscription/status/set", body).0, 201);
    for (u, expected) in [("u1", json!("Subscribed")), ("u2", json!("Subscribed")), ("u3", Value::Null)] {
        assert_eq!(w.user(u)["subscription_groups"][0]["status"], expected, "{u}");
    }
}

#[test]
fn v2_with_one_bad_entry_writes_nothing() {
    let w = Kit::new();
    let g = w.group(Channel::Email);
    w.track_attributes(json!([{"external_id": "u1"}]));
    let body = json!({"subscription_groups": [
        {"subscription_group_id": g, "subscription_state": "subscribed", "external_ids": ["u1"]},
        {"subscription_group_id": "no-such-group", "subscription_state": "subscribed", "external_ids": ["u1"]}
    ]});
    let (status, body) = w.post("/v2/subscription/status/set", body);
    assert_eq!((status, body["message"].as_str()), (400, Some(super::UNKNOWN_GROUP)));
    assert!(w.user("u1").get("subscription_groups").is_none());
}

#[test]
fn line_groups_change_only_the_named_user() {
    let w = Kit::new();
    let g = w.group(Channel::Line);
    w.track_attributes(
        json!([{"external_id": "u1", "phone": "+14155550100"}, {"external_id": "u2", "phone": "+14155550100"}]),
    );
    let body = json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ["u1"]});
    assert_eq!(w.post("/subscription/status/set", body).0, 201);
    assert_eq!(w.user("u1")["subscription_groups"][0]["status"], "Subscribed");
    assert!(w.user("u2").get("subscription_groups").is_none());
    let by_phone = json!({"subscription_group_id": g, "subscription_state": "subscribed", "phone": ["+14155550100"]});
    assert_eq!(w.post("/subscription/status/set", by_phone).0, 400);
}

#[test]
fn status_get_decodes_an_unencoded_plus_in_a_phone() {
    let w = Kit::new();
    let g = w.group(Channel::Sms);
    w.track_attributes(json!([{"external_id": "u1", "phone": "+14155550100", "subscription_groups": [
        {"subscription_group_id": g, "subscription_state": "unsubscribed"}
    ]}]));
    let (status, body) = w.call(
        Method::Get,
        &format!("/subscription/status/get?subscription_group_id={g}&phone=+14155550100"),
        Value::Null,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"]["+14155550100"], "Unsubscribed");
}
