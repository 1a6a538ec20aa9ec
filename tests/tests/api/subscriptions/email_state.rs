//! Black-box tests: one state model (track, global masking, re-subscribe), /email/status, the blocklist, and export.

use engage_tests::{redact, Api};
use serde_json::json;

use super::{exported, set_v1, set_v2, status, success, users, TOO_MANY};

// ---- one state model: track, masking, re-subscribe --------------------------------

#[tokio::test]
async fn track_subscription_groups_and_email_subscribe_use_the_same_state_as_the_endpoints() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    users(
        &api,
        json!([{"external_id": "u1", "email": "s@example.com"}, {"external_id": "u2", "email": "s@example.com"}]),
    )
    .await;
    users(
        &api,
        json!([{"external_id": "u1", "email_subscribe": "opted_in",
                "subscription_groups": [{"subscription_group_id": news, "subscription_state": "subscribed"}]}]),
    )
    .await;
    // Track's change reached the user sharing the email, and the endpoints read it.
    assert_eq!(status(&api, &news, "u2").await, "Subscribed");
    assert_eq!(api.user("u2").await["email_subscribe"], "opted_in");
    set_v1(&api, json!({"subscription_group_id": news, "subscription_state": "unsubscribed", "external_id": ["u2"]}))
        .await;
    assert_eq!(status(&api, &news, "u1").await, "Unsubscribed");
}

#[tokio::test]
async fn global_unsubscribe_masks_every_email_group_but_reads_return_the_stored_status() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let promo = api.group("Promo", "email").await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    let r = set_v2(
        &api,
        json!([
            {"subscription_group_id": news, "subscription_state": "subscribed", "external_ids": ["u1"]},
            {"subscription_group_id": promo, "subscription_state": "unsubscribed", "external_ids": ["u1"]},
            {"subscription_group_id": texts, "subscription_state": "subscribed", "external_ids": ["u1"]}
        ]),
    )
    .await;
    assert_eq!(r.status, 201);
    let r = api.post("/email/status", json!({"email": "a@example.com", "subscription_state": "unsubscribed"})).await;
    assert_eq!(r.status, 201);
    // Reads return the last stored group status...
    assert_eq!(status(&api, &news, "u1").await, "Subscribed");
    // ...while the effective status shows the global mask on email groups only.
    let e = exported(&api, "u1", &news).await;
    assert_eq!((e["status"].clone(), e["effective_status"].clone()), (json!("Subscribed"), json!("Unsubscribed")));
    assert_eq!(exported(&api, "u1", &texts).await["effective_status"], "Subscribed");
    assert_eq!(api.user("u1").await["email_subscribe"], "unsubscribed");
}

#[tokio::test]
async fn global_resubscribe_returns_each_group_to_its_stored_status() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let promo = api.group("Promo", "email").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com"}])).await;
    set_v1(&api, json!({"subscription_group_id": news, "subscription_state": "subscribed", "external_id": ["u1"]}))
        .await;
    set_v1(&api, json!({"subscription_group_id": promo, "subscription_state": "unsubscribed", "external_id": ["u1"]}))
        .await;
    users(&api, json!([{"external_id": "u1", "email_subscribe": "unsubscribed"}])).await;
    assert_eq!(exported(&api, "u1", &news).await["effective_status"], "Unsubscribed");
    // A group change while globally unsubscribed is stored, and still masked.
    set_v1(&api, json!({"subscription_group_id": promo, "subscription_state": "subscribed", "external_id": ["u1"]}))
        .await;
    assert_eq!(exported(&api, "u1", &promo).await["effective_status"], "Unsubscribed");
    set_v1(&api, json!({"subscription_group_id": promo, "subscription_state": "unsubscribed", "external_id": ["u1"]}))
        .await;
    let r = api.post("/email/status", json!({"email": ["a@example.com"], "subscription_state": "subscribed"})).await;
    assert_eq!(r.status, 201);
    let (n, p) = (exported(&api, "u1", &news).await, exported(&api, "u1", &promo).await);
    assert_eq!((n["status"].clone(), n["effective_status"].clone()), (json!("Subscribed"), json!("Subscribed")));
    assert_eq!((p["status"].clone(), p["effective_status"].clone()), (json!("Unsubscribed"), json!("Unsubscribed")));
}

// ---- /email/status and the blocklist ----------------------------------------------

#[tokio::test]
async fn email_status_sets_each_global_state_on_every_profile_with_the_address() {
    let api = Api::new().await;
    users(
        &api,
        json!([{"external_id": "u1", "email": "a@example.com"}, {"external_id": "u2", "email": "a@example.com"}, {"external_id": "u3", "email": "b@example.com"}]),
    )
    .await;
    for state in ["opted_in", "unsubscribed", "subscribed"] {
        let r = api
            .post("/email/status", json!({"email": ["a@example.com", "B@example.com"], "subscription_state": state}))
            .await;
        assert_eq!((r.status, r.body), (201, success()));
        for u in ["u1", "u2", "u3"] {
            assert_eq!(api.user(u).await["email_subscribe"], state, "{u}");
        }
    }
}

#[tokio::test]
async fn email_status_for_an_address_on_no_profile_applies_when_a_profile_gets_it() {
    let api = Api::new().await;
    let r = api.post("/email/status", json!({"email": "later@example.com", "subscription_state": "opted_in"})).await;
    assert_eq!((r.status, r.body), (201, success()));
    assert!(api.users(json!({"email_address": "later@example.com"})).await.is_empty());
    users(&api, json!([{"external_id": "u1", "first_name": "Ann"}])).await;
    users(&api, json!([{"external_id": "u1", "email": "later@example.com"}])).await;
    assert_eq!(api.user("u1").await["email_subscribe"], "opted_in");
    // An email-only profile created by track inherits it too.
    api.post("/email/status", json!({"email": "solo@example.com", "subscription_state": "unsubscribed"})).await;
    users(&api, json!([{"email": "solo@example.com", "first_name": "Solo"}])).await;
    let solo = api.users(json!({"email_address": "solo@example.com"})).await;
    assert_eq!(solo.len(), 1);
    assert_eq!(solo[0]["email_subscribe"], "unsubscribed");
}

#[tokio::test]
async fn email_status_rejects_bad_states_bounds_and_addresses_and_writes_nothing() {
    let api = Api::new().await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "email_subscribe": "subscribed"}])).await;
    let fifty_one: Vec<String> = (0..51).map(|i| format!("e{i}@example.com")).collect();
    let cases = [
        (
            json!({"email": "a@example.com", "subscription_state": "maybe"}),
            Some("'subscription_state' must be 'subscribed', 'unsubscribed', or 'opted_in'"),
        ),
        (json!({"email": "a@example.com", "subscription_state": "Unsubscribed"}), None),
        (json!({"email": "a@example.com"}), None),
        (json!({"email": fifty_one, "subscription_state": "unsubscribed"}), Some(TOO_MANY)),
        (
            json!({"email": ["a@example.com", "nope"], "subscription_state": "unsubscribed"}),
            Some("The value provided for the 'email' field is not a valid email."),
        ),
        (json!({"email": [], "subscription_state": "unsubscribed"}), None),
        (json!({"email": 3, "subscription_state": "unsubscribed"}), None),
        (json!({"subscription_state": "unsubscribed"}), None),
    ];
    for (body, message) in cases {
        let r = api.post("/email/status", body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        if let Some(m) = message {
            assert_eq!(r.body, json!({"message": m}), "{body}");
        }
    }
    assert_eq!(api.user("u1").await["email_subscribe"], "subscribed");
    let fifty: Vec<String> = (0..50).map(|i| format!("e{i}@example.com")).collect();
    assert_eq!(
        api.post("/email/status", json!({"email": fifty, "subscription_state": "unsubscribed"})).await.status,
        201
    );
}

#[tokio::test]
async fn blocklist_and_blacklist_unsubscribe_and_mark_a_hard_bounce() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    users(
        &api,
        json!([{"external_id": "u1", "email": "a@example.com", "email_subscribe": "opted_in"},
               {"external_id": "u2", "email": "b@example.com", "email_subscribe": "subscribed"},
               {"external_id": "u3", "email": "c@example.com"}]),
    )
    .await;
    set_v1(&api, json!({"subscription_group_id": news, "subscription_state": "subscribed", "external_id": ["u1"]}))
        .await;
    let r = api.post("/email/blocklist", json!({"email": ["a@example.com"]})).await;
    assert_eq!((r.status, r.body), (201, success()));
    let r = api.post("/email/blacklist", json!({"email": "b@example.com"})).await;
    assert_eq!((r.status, r.body), (201, success()));
    for u in ["u1", "u2"] {
        let user = api.user(u).await;
        assert_eq!(
            (user["email_subscribe"].clone(), user["email_hard_bounced"].clone()),
            (json!("unsubscribed"), json!(true)),
            "{u}"
        );
    }
    assert_eq!(api.user("u3").await["email_hard_bounced"], false);
    // The group status is kept; the global state masks it.
    let e = exported(&api, "u1", &news).await;
    assert_eq!((e["status"].clone(), e["effective_status"].clone()), (json!("Subscribed"), json!("Unsubscribed")));
}

#[tokio::test]
async fn an_address_blocked_before_any_profile_has_it_is_applied_when_it_appears() {
    let api = Api::new().await;
    assert_eq!(api.post("/email/blocklist", json!({"email": "early@example.com"})).await.status, 201);
    users(&api, json!([{"external_id": "u1", "email": "early@example.com", "first_name": "Ann"}])).await;
    let u = api.user("u1").await;
    assert_eq!((u["email_subscribe"].clone(), u["email_hard_bounced"].clone()), (json!("unsubscribed"), json!(true)));
}

#[tokio::test]
async fn blocklist_rejects_more_than_50_and_invalid_addresses() {
    let api = Api::new().await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com"}])).await;
    let fifty_one: Vec<String> = (0..51).map(|i| format!("e{i}@example.com")).collect();
    for body in [
        json!({"email": fifty_one}),
        json!({"email": ["a@example.com", "bad"]}),
        json!({"email": null}),
        json!({"email": {"a": 1}}),
    ] {
        for path in ["/email/blocklist", "/email/blacklist"] {
            let r = api.post(path, body.clone()).await;
            assert_eq!(r.status, 400, "{path} {body}: {}", r.body);
        }
    }
    assert_eq!(api.user("u1").await["email_hard_bounced"], false);
}

// ---- export ------------------------------------------------------------------------

#[tokio::test]
async fn export_shows_the_global_state_hard_bounce_and_every_group_status() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    set_v1(&api, json!({"subscription_group_id": news, "subscription_state": "subscribed", "external_id": ["u1"]}))
        .await;
    set_v1(
        &api,
        json!({"subscription_group_id": texts, "subscription_state": "unsubscribed", "phone": ["+14155550100"]}),
    )
    .await;
    api.post("/email/blocklist", json!({"email": "a@example.com"})).await;
    let fields = json!(["external_id", "email_subscribe", "email_hard_bounced", "subscription_groups"]);
    let mut u = api.users(json!({"external_ids": ["u1"], "fields_to_export": fields})).await.remove(0);
    if let Some(list) = u["subscription_groups"].as_array_mut() {
        list.sort_by_key(|g| g["name"].as_str().unwrap_or_default().to_string());
    }
    insta::assert_json_snapshot!(redact(u), @r#"
    {
      "email_hard_bounced": true,
      "email_subscribe": "unsubscribed",
      "external_id": "u1",
      "subscription_groups": [
        {
          "channel": "email",
          "effective_status": "Unsubscribed",
          "id": "[redacted]",
          "name": "News",
          "status": "Subscribed"
        },
        {
          "channel": "sms",
          "effective_status": "Unsubscribed",
          "id": "[redacted]",
          "name": "Texts",
          "status": "Unsubscribed"
        }
      ]
    }
    "#);
}
