//! Black-box tests: POST /v2/subscription/status/set.

use engage_tests::Api;
use serde_json::json;

use super::{ids, set_v2, status, success, users, BOTH};

#[tokio::test]
async fn v2_sets_several_groups_and_mixes_email_and_sms_groups_by_external_ids() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1"}, {"external_id": "u2"}])).await;
    let r = set_v2(
        &api,
        json!([
            {"subscription_group_id": news, "subscription_state": "subscribed", "external_ids": ["u1", "u2"]},
            {"subscription_group_id": texts, "subscription_state": "unsubscribed", "external_ids": ["u1"]}
        ]),
    )
    .await;
    assert_eq!((r.status, r.body), (201, success()));
    assert_eq!(status(&api, &news, "u1").await, "Subscribed");
    assert_eq!(status(&api, &news, "u2").await, "Subscribed");
    assert_eq!(status(&api, &texts, "u1").await, "Unsubscribed");
    assert_eq!(status(&api, &texts, "u2").await, "Unknown");
}

#[tokio::test]
async fn v2_sets_email_groups_by_emails_and_sms_groups_by_phones_in_separate_calls() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let promo = api.group("Promo", "email").await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    let r = set_v2(
        &api,
        json!([
            {"subscription_group_id": news, "subscription_state": "subscribed", "emails": ["a@example.com"]},
            {"subscription_group_id": promo, "subscription_state": "unsubscribed", "emails": "a@example.com"}
        ]),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = set_v2(
        &api,
        json!([{"subscription_group_id": texts, "subscription_state": "subscribed", "phones": ["+14155550100"]}]),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(status(&api, &news, "u1").await, "Subscribed");
    assert_eq!(status(&api, &promo, "u1").await, "Unsubscribed");
    assert_eq!(status(&api, &texts, "u1").await, "Subscribed");
}

#[tokio::test]
async fn v2_emails_and_phones_in_one_request_are_rejected_and_nothing_is_set() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    let r = set_v2(
        &api,
        json!([
            {"subscription_group_id": news, "subscription_state": "subscribed", "emails": ["a@example.com"]},
            {"subscription_group_id": texts, "subscription_state": "subscribed", "phones": ["+14155550100"]}
        ]),
    )
    .await;
    assert_eq!((r.status, r.body), (400, json!({"message": BOTH})));
    let one_entry = json!([{"subscription_group_id": news, "subscription_state": "subscribed", "emails": ["a@example.com"], "phones": ["+14155550100"]}]);
    assert_eq!(set_v2(&api, one_entry).await.body, json!({"message": BOTH}));
    assert_eq!(status(&api, &news, "u1").await, "Unknown");
    assert_eq!(status(&api, &texts, "u1").await, "Unknown");
}

#[tokio::test]
async fn v2_emails_for_an_sms_group_and_phones_for_an_email_group_are_rejected() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    let r = set_v2(
        &api,
        json!([{"subscription_group_id": texts, "subscription_state": "subscribed", "emails": ["a@example.com"]}]),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = set_v2(
        &api,
        json!([{"subscription_group_id": news, "subscription_state": "subscribed", "phones": ["+14155550100"]}]),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(status(&api, &news, "u1").await, "Unknown");
}

#[tokio::test]
async fn v2_rejects_phones_not_in_e164() {
    let api = Api::new().await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "phone": "+14155550100"}])).await;
    for bad in ["14155550100", "+1-415-555-0100", "+0123456", "phone"] {
        let r = set_v2(&api, json!([{"subscription_group_id": texts, "subscription_state": "subscribed", "phones": ["+14155550100", bad]}])).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert_eq!(r.body["message"], "The value provided for the 'phones' field is not a valid E.164 phone number.");
    }
    assert_eq!(status(&api, &texts, "u1").await, "Unknown");
}

#[tokio::test]
async fn v2_accepts_use_double_opt_in_logic_at_the_top_level_and_per_group() {
    let api = Api::new().await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "phone": "+14155550100"}])).await;
    let entry = json!({"subscription_group_id": texts, "subscription_state": "subscribed", "phones": ["+14155550100"], "use_double_opt_in_logic": true});
    let r = api
        .post("/v2/subscription/status/set", json!({"subscription_groups": [entry], "use_double_opt_in_logic": false}))
        .await;
    assert_eq!((r.status, r.body), (201, success()));
    assert_eq!(status(&api, &texts, "u1").await, "Subscribed");
    let bad = json!({"subscription_group_id": texts, "subscription_state": "unsubscribed", "external_ids": ["u1"], "use_double_opt_in_logic": "true"});
    assert_eq!(set_v2(&api, json!([bad])).await.status, 400);
    let r =
        api.post("/v2/subscription/status/set", json!({"subscription_groups": [], "use_double_opt_in_logic": 1})).await;
    assert_eq!(r.status, 400);
    assert_eq!(status(&api, &texts, "u1").await, "Subscribed");
}

#[tokio::test]
async fn v2_bounds_and_shapes_are_checked_before_anything_is_written() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let promo = api.group("Promo", "email").await;
    users(&api, json!([{"external_id": "u1"}])).await;
    let ok = |g: &str| json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_ids": ["u1"]});
    let cases = [
        // 51 distinct identifiers across two entries.
        json!([ok(&news), {"subscription_group_id": promo, "subscription_state": "subscribed", "external_ids": ids(52)[2..].to_vec()}]),
        json!([ok(&news), {"subscription_group_id": promo, "subscription_state": "subscribed", "external_ids": ids(51)}]),
        json!([ok(&news), {"subscription_group_id": promo, "subscription_state": "maybe", "external_ids": ["u1"]}]),
        json!([ok(&news), {"subscription_group_id": promo, "subscription_state": "subscribed", "external_ids": {"id": "u1"}}]),
        json!([ok(&news), {"subscription_group_id": promo, "subscription_state": "subscribed"}]),
        json!([ok(&news), {"subscription_group_id": promo, "subscription_state": "subscribed", "external_ids": ["u1"], "emails": ["a@example.com"]}]),
        json!([ok(&news), "not an object"]),
        json!([]),
        json!({"not": "an array"}),
    ];
    for groups in cases {
        let r = set_v2(&api, groups.clone()).await;
        assert_eq!(r.status, 400, "{groups} -> {}", r.body);
    }
    assert_eq!(status(&api, &news, "u1").await, "Unknown");
    // The same 50 identifiers in two groups are 50 users: accepted.
    let two = json!([
        {"subscription_group_id": news, "subscription_state": "subscribed", "external_ids": ids(50)},
        {"subscription_group_id": promo, "subscription_state": "subscribed", "external_ids": ids(50)}
    ]);
    let r = set_v2(&api, two).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["errors"].as_array().map(Vec::len), Some(49));
    assert_eq!(status(&api, &promo, "u1").await, "Subscribed");
}
