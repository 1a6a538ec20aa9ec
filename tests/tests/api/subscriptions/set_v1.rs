//! Black-box tests: POST /subscription/status/set (v1).

use engage_tests::Api;
use serde_json::{json, Value};

use super::{exported, ids, set_v1, status, success, users, BAD_GROUP, BAD_GROUP_STATE, BOTH, TOO_MANY};

#[tokio::test]
async fn v1_set_by_external_id_answers_201_success_and_is_read_back() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    users(&api, json!([{"external_id": "u1"}, {"external_id": "u2"}])).await;
    let r = set_v1(
        &api,
        json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ["u1", "u2"]}),
    )
    .await;
    assert_eq!((r.status, r.body), (201, success()));
    let r =
        set_v1(&api, json!({"subscription_group_id": g, "subscription_state": "unsubscribed", "external_id": "u2"}))
            .await;
    assert_eq!(r.status, 201);
    assert_eq!(status(&api, &g, "u1").await, "Subscribed");
    assert_eq!(status(&api, &g, "u2").await, "Unsubscribed");
    assert_eq!(exported(&api, "u1", &g).await["status"], "Subscribed");
}

#[tokio::test]
async fn v1_set_by_email_updates_every_user_sharing_the_email() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    users(
        &api,
        json!([
            {"external_id": "u1", "email": "shared@example.com"},
            {"external_id": "u2", "email": "shared@example.com"},
            {"external_id": "u3", "email": "solo@example.com"},
            {"external_id": "u4", "email": "other@example.com"}
        ]),
    )
    .await;
    let r = set_v1(
        &api,
        json!({"subscription_group_id": g, "subscription_state": "subscribed", "email": "Shared@Example.com"}),
    )
    .await;
    assert_eq!((r.status, r.body), (201, success()));
    let r = set_v1(
        &api,
        json!({"subscription_group_id": g, "subscription_state": "unsubscribed", "email": ["solo@example.com"]}),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(status(&api, &g, "u1").await, "Subscribed");
    assert_eq!(status(&api, &g, "u2").await, "Subscribed");
    assert_eq!(status(&api, &g, "u3").await, "Unsubscribed");
    assert_eq!(status(&api, &g, "u4").await, "Unknown");
}

#[tokio::test]
async fn v1_set_by_phone_updates_every_user_sharing_the_phone() {
    let api = Api::new().await;
    let g = api.group("Texts", "sms").await;
    users(
        &api,
        json!([
            {"external_id": "u1", "phone": "+14155550100"},
            {"external_id": "u2", "phone": "+14155550100"},
            {"external_id": "u3", "phone": "+14155550199"}
        ]),
    )
    .await;
    let r = set_v1(
        &api,
        json!({"subscription_group_id": g, "subscription_state": "subscribed", "phone": ["+14155550100"]}),
    )
    .await;
    assert_eq!((r.status, r.body), (201, success()));
    assert_eq!(status(&api, &g, "u1").await, "Subscribed");
    assert_eq!(status(&api, &g, "u2").await, "Subscribed");
    assert_eq!(status(&api, &g, "u3").await, "Unknown");
}

#[tokio::test]
async fn v1_set_by_external_id_also_updates_users_sharing_its_email_or_phone() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let texts = api.group("Texts", "whatsapp").await;
    users(
        &api,
        json!([
            {"external_id": "u1", "email": "s@example.com", "phone": "+14155550100"},
            {"external_id": "u2", "email": "s@example.com"},
            {"external_id": "u3", "phone": "+14155550100"}
        ]),
    )
    .await;
    set_v1(&api, json!({"subscription_group_id": news, "subscription_state": "subscribed", "external_id": ["u1"]}))
        .await;
    set_v1(&api, json!({"subscription_group_id": texts, "subscription_state": "subscribed", "external_id": ["u1"]}))
        .await;
    assert_eq!(status(&api, &news, "u2").await, "Subscribed");
    assert_eq!(status(&api, &news, "u3").await, "Unknown");
    assert_eq!(status(&api, &texts, "u3").await, "Subscribed");
    assert_eq!(status(&api, &texts, "u2").await, "Unknown");
}

#[tokio::test]
async fn v1_email_and_phone_together_are_rejected_with_the_platform_message() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    let body = json!({"subscription_group_id": g, "subscription_state": "subscribed", "email": "a@example.com", "phone": "+14155550100"});
    let r = set_v1(&api, body).await;
    assert_eq!((r.status, r.body), (400, json!({"message": BOTH})));
    assert_eq!(status(&api, &g, "u1").await, "Unknown");
}

#[tokio::test]
async fn v1_channel_rules_email_groups_take_email_and_phone_groups_take_phone() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let sms = api.group("Texts", "sms").await;
    let rcs = api.group("Rich", "rcs").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    let phone_for_email =
        json!({"subscription_group_id": news, "subscription_state": "subscribed", "phone": "+14155550100"});
    let email_for_sms =
        json!({"subscription_group_id": sms, "subscription_state": "subscribed", "email": "a@example.com"});
    let email_for_rcs =
        json!({"subscription_group_id": rcs, "subscription_state": "subscribed", "email": "a@example.com"});
    for body in [phone_for_email, email_for_sms, email_for_rcs] {
        let r = set_v1(&api, body).await;
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body["message"].as_str().unwrap().contains("cannot be used with the"), "{}", r.body);
    }
    let phone_for_rcs =
        json!({"subscription_group_id": rcs, "subscription_state": "subscribed", "phone": "+14155550100"});
    assert_eq!(set_v1(&api, phone_for_rcs).await.status, 201);
    assert_eq!(status(&api, &rcs, "u1").await, "Subscribed");
    assert_eq!(status(&api, &news, "u1").await, "Unknown");
    assert_eq!(status(&api, &sms, "u1").await, "Unknown");
}

#[tokio::test]
async fn v1_bad_state_wrong_types_and_bad_phones_are_400s_that_write_nothing() {
    let api = Api::new().await;
    let g = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "phone": "+14155550100"}])).await;
    let base = |extra: Value| {
        let mut b = json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ["u1"]});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let cases = [
        (base(json!({"subscription_state": "opted_in"})), Some(BAD_GROUP_STATE)),
        (base(json!({"subscription_state": 1})), Some(BAD_GROUP_STATE)),
        (base(json!({"external_id": true})), None),
        (base(json!({"external_id": [1.5]})), None),
        (base(json!({"external_id": []})), None),
        (base(json!({"external_id": [""]})), None),
        (base(json!({"phone": ["4155550100"]})), None),
        (base(json!({"phone": ["+1 415 555 0100"]})), None),
        (base(json!({"phone": {"n": "+14155550100"}})), None),
        (base(json!({"use_double_opt_in_logic": "yes"})), None),
        (base(json!({"subscription_group_id": 5})), Some(BAD_GROUP)),
        (json!({"subscription_group_id": g, "subscription_state": "subscribed"}), None),
        (json!(["not", "an", "object"]), None),
    ];
    for (body, message) in cases {
        let r = set_v1(&api, body.clone()).await;
        assert_eq!(r.status, 400, "{body} -> {}", r.body);
        assert!(r.body["message"].is_string(), "{}", r.body);
        if let Some(m) = message {
            assert_eq!(r.body["message"], m, "{body}");
        }
    }
    let r = api.call("POST", "/subscription/status/set", Some(b"{not json".to_vec())).await;
    assert_eq!(r.status, 400);
    assert_eq!(status(&api, &g, "u1").await, "Unknown");
}

#[tokio::test]
async fn v1_more_than_50_identifiers_is_rejected_and_50_are_accepted() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    let attrs: Vec<Value> = ids(50).iter().map(|u| json!({"external_id": u})).collect();
    users(&api, json!(attrs)).await;
    let mut many = ids(50);
    many.push("u50".into());
    let r = set_v1(&api, json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": many}))
        .await;
    assert_eq!((r.status, r.body), (400, json!({"message": TOO_MANY})));
    assert_eq!(status(&api, &g, "u0").await, "Unknown");
    let emails: Vec<String> = (0..51).map(|i| format!("e{i}@example.com")).collect();
    let r =
        set_v1(&api, json!({"subscription_group_id": g, "subscription_state": "subscribed", "email": emails})).await;
    assert_eq!((r.status, r.body), (400, json!({"message": TOO_MANY})));
    let r =
        set_v1(&api, json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ids(50)}))
            .await;
    assert_eq!(r.status, 201);
    assert_eq!(status(&api, &g, "u49").await, "Subscribed");
}

#[tokio::test]
async fn v1_an_identifier_matching_no_user_is_a_non_fatal_error() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    users(&api, json!([{"external_id": "u1"}])).await;
    let r = set_v1(
        &api,
        json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ["u1", "ghost"]}),
    )
    .await;
    assert_eq!(r.status, 201);
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "errors": [
        {
          "external_id": "ghost",
          "type": "No user found with this external_id"
        }
      ],
      "message": "success"
    }
    "#);
    assert_eq!(status(&api, &g, "u1").await, "Subscribed");
    // No profile was created for the unknown identifiers.
    let r = set_v1(
        &api,
        json!({"subscription_group_id": g, "subscription_state": "subscribed", "email": "nobody@example.com"}),
    )
    .await;
    assert_eq!(r.body["errors"], json!([{"type": "No user found with this email", "email": "nobody@example.com"}]));
    assert!(api.users(json!({"email_address": "nobody@example.com"})).await.is_empty());
}
