//! The exported user written straight from the profile is the same JSON, byte for
//! byte, as the `Value` the export built before (members in key order, the last of
//! two of one name kept).

use serde_json::{json, Value};

use super::user::ExportUser;
use crate::ids::{Email, ExternalId, Phone, ServiceId};
use crate::profile::states::GlobalState;
use crate::profile::{Profile, Summary};
use crate::time::Timestamp;

fn at(ms: i64) -> Timestamp {
    Timestamp(1_767_225_600_000 + ms)
}

/// A profile with every kind of field the export writes.
fn rich() -> Profile {
    let mut p = Profile::new(ServiceId::parse("65a1b2c3d4e5f6a7b8c9d0e1").expect("id"), at(0));
    p.updated_at = at(5_000);
    p.external_id = ExternalId::parse("u-1");
    p.aliases.insert("crm".into(), "c-9".into());
    p.aliases.insert("app".into(), "a \"quoted\" name".into());
    p.email = Email::parse("Ann@Example.com");
    p.phone = Phone::parse("+14155550100");
    p.standard.insert("first_name".into(), json!("Ann"));
    p.standard.insert("country".into(), json!("FR"));
    p.standard.insert("current_location".into(), json!({"longitude": 2.35, "latitude": 48.85}));
    p.custom.insert("plan".into(), json!("pro"));
    p.custom.insert("nested".into(), json!({"b": [1, 2.5, null], "a": true}));
    p.events.insert("login".into(), Summary { first: at(1_000), last: at(2_000), count: 3 });
    p.purchases.insert("sku-1".into(), Summary { first: at(1_500), last: at(1_500), count: 1 });
    p.total_revenue = 19.5;
    p.email_subscribe = Some(GlobalState::OptedIn);
    p.push_subscribe = Some(GlobalState::Unsubscribed);
    p.email_hard_bounced = true;
    p
}

fn written(p: &Profile, only: Option<&[String]>, groups: Option<Vec<Value>>) -> String {
    serde_json::to_string(&ExportUser { profile: p, only, groups }).expect("serializes")
}

#[test]
fn every_field_in_key_order_as_a_value_writes_it() {
    let p = rich();
    let groups = vec![json!({"id": "g1", "status": "subscribed"})];
    let expected = json!({
        "created_at": at(0).to_rfc3339(),
        "updated_at": at(5_000).to_rfc3339(),
        "service_id": "65a1b2c3d4e5f6a7b8c9d0e1",
        "external_id": "u-1",
        "user_aliases": [
            {"alias_name": "a \"quoted\" name", "alias_label": "app"},
            {"alias_name": "c-9", "alias_label": "crm"},
        ],
        "email": "ann@example.com",
        "phone": "+14155550100",
        "first_name": "Ann",
        "country": "FR",
        "current_location": {"longitude": 2.35, "latitude": 48.85},
        "custom_attributes": {"plan": "pro", "nested": {"b": [1, 2.5, null], "a": true}},
        "custom_events": [{"name": "login", "first": at(1_000).to_rfc3339(), "last": at(2_000).to_rfc3339(), "count": 3}],
        "purchases": [{"name": "sku-1", "first": at(1_500).to_rfc3339(), "last": at(1_500).to_rfc3339(), "count": 1}],
        "total_revenue": 19.5,
        "email_subscribe": "opted_in",
        "push_subscribe": "unsubscribed",
        "email_hard_bounced": true,
        "subscription_groups": groups,
    });
    assert_eq!(written(&p, None, Some(groups)), expected.to_string());
}

#[test]
fn fields_to_export_restrict_and_empty_parts_are_left_out() {
    let p = rich();
    let only = ["braze_id".to_string(), "standard_attributes".to_string(), "purchases".to_string()];
    let expected = json!({
        "service_id": "65a1b2c3d4e5f6a7b8c9d0e1",
        "first_name": "Ann",
        "country": "FR",
        "current_location": {"longitude": 2.35, "latitude": 48.85},
        "purchases": [{"name": "sku-1", "first": at(1_500).to_rfc3339(), "last": at(1_500).to_rfc3339(), "count": 1}],
    });
    assert_eq!(written(&p, Some(&only), None), expected.to_string());
    let only = ["country".to_string()];
    assert_eq!(written(&p, Some(&only), None), r#"{"country":"FR"}"#);

    // A bare profile: no aliases, attributes, events or purchases, so no revenue.
    let bare = Profile::new(ServiceId::parse("65a1b2c3d4e5f6a7b8c9d0e2").expect("id"), at(0));
    let expected = json!({
        "created_at": at(0).to_rfc3339(),
        "updated_at": at(0).to_rfc3339(),
        "service_id": "65a1b2c3d4e5f6a7b8c9d0e2",
        "email_hard_bounced": false,
    });
    assert_eq!(written(&bare, None, None), expected.to_string());
}

#[test]
fn a_member_named_twice_keeps_the_last_and_revenue_that_is_not_finite_is_null() {
    let mut p = rich();
    // A standard attribute of a name the export also writes itself: the later
    // member wins, as inserting into a map did.
    p.standard.insert("email".into(), json!("standard@example.com"));
    p.standard.insert("total_revenue".into(), json!("early"));
    p.total_revenue = f64::INFINITY;
    let out: Value = serde_json::from_str(&written(&p, None, None)).expect("json");
    assert_eq!(out["email"], json!("standard@example.com"));
    assert_eq!(out["total_revenue"], Value::Null);
    let text = written(&p, None, None);
    assert_eq!(text.matches("\"email\":").count(), 1, "{text}");
    assert_eq!(text.matches("\"total_revenue\":").count(), 1, "{text}");
}
