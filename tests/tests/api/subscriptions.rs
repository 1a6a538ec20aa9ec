//! Black-box tests: subscription groups and the global email state
//! (`/subscription/status/set`, `/v2/subscription/status/set`,
//! `/subscription/user/status`, `/subscription/status/get`, `/email/status`,
//! `/email/blocklist`, `/email/blacklist`), read back through the status
//! endpoints and `/users/export/ids`.

use engage_tests::{redact, Api, Reply};
use serde_json::{json, Value};

const BOTH: &str = "Either an email address or a phone number should be provided, but not both.";
const BAD_GROUP: &str = "'subscription_group_id' must be a valid subscription group UUID";
const BAD_GROUP_STATE: &str = "'subscription_state' for a subscription group must be 'subscribed' or 'unsubscribed'";
const TOO_MANY: &str = "The max number of ids per request was exceeded";

async fn users(api: &Api, attributes: Value) {
    api.track(json!({ "attributes": attributes })).await;
}

async fn set_v1(api: &Api, body: Value) -> Reply {
    api.post("/subscription/status/set", body).await
}

async fn set_v2(api: &Api, groups: Value) -> Reply {
    api.post("/v2/subscription/status/set", json!({ "subscription_groups": groups })).await
}

/// The `status` object of `/subscription/status/get` (asserting 200).
async fn status_of(api: &Api, group: &str, query: &str) -> Value {
    let r = api.get(&format!("/subscription/status/get?subscription_group_id={group}&{query}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["status"].clone()
}

/// The stored status of a group for an external id, as `/subscription/status/get` reads it.
async fn status(api: &Api, group: &str, external_id: &str) -> String {
    status_of(api, group, &format!("external_id={external_id}")).await[external_id]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A user's exported `subscription_groups` entry for a group (`Null` when absent).
async fn exported(api: &Api, external_id: &str, group: &str) -> Value {
    let u = api.user(external_id).await;
    let list = u["subscription_groups"].as_array().cloned().unwrap_or_default();
    list.into_iter().find(|g| g["id"] == group).unwrap_or(Value::Null)
}

fn success() -> Value {
    json!({"message": "success"})
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("u{i}")).collect()
}

// ---- groups as data -------------------------------------------------------------

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
    let missing = set_v1(&api, json!({"subscription_state": "subscribed", "external_id": ["u1"]})).await;
    for r in [v1, v2, get, missing] {
        assert_eq!((r.status, r.body), (400, json!({"message": BAD_GROUP})));
    }
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
    assert_eq!((r.status, r.body), (400, json!({"message": BAD_GROUP})));
}

// ---- v1 -------------------------------------------------------------------------

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
        (base(json!({"external_id": 7})), None),
        (base(json!({"external_id": [7]})), None),
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

// ---- v2 -------------------------------------------------------------------------

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
        json!([ok(&news), {"subscription_group_id": promo, "subscription_state": "subscribed", "external_ids": "u1"}]),
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

// ---- GET /subscription/user/status -----------------------------------------------

#[tokio::test]
async fn user_status_lists_only_groups_in_the_users_history() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let texts = api.group("Texts", "sms").await;
    let _untouched = api.group("Fresh", "email").await;
    users(
        &api,
        json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}, {"external_id": "u2"}]),
    )
    .await;
    set_v1(&api, json!({"subscription_group_id": news, "subscription_state": "subscribed", "external_id": ["u1"]}))
        .await;
    set_v1(&api, json!({"subscription_group_id": texts, "subscription_state": "unsubscribed", "external_id": ["u1"]}))
        .await;
    let r = api.get("/subscription/user/status?external_id=u1").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut body = r.body.clone();
    if let Some(list) = body["users"][0]["subscription_groups"].as_array_mut() {
        list.sort_by_key(|g| g["name"].as_str().unwrap_or_default().to_string());
    }
    insta::assert_json_snapshot!(redact(body), @r#"
    {
      "message": "success",
      "total_count": 1,
      "users": [
        {
          "email": "a@example.com",
          "external_id": "u1",
          "phone": "+14155550100",
          "subscription_groups": [
            {
              "channel": "email",
              "id": "[redacted]",
              "name": "News",
              "status": "Subscribed"
            },
            {
              "channel": "sms",
              "id": "[redacted]",
              "name": "Texts",
              "status": "Unsubscribed"
            }
          ]
        }
      ]
    }
    "#);
    let r = api.get("/subscription/user/status?external_id=u2").await;
    assert_eq!(
        r.body,
        json!({"users": [{"external_id": "u2", "email": null, "phone": null, "subscription_groups": []}], "total_count": 1, "message": "success"})
    );
}

#[tokio::test]
async fn user_status_takes_repeated_keys_with_and_without_brackets() {
    let api = Api::new().await;
    users(&api, json!([{"external_id": "u1"}, {"external_id": "u2"}, {"external_id": "u3"}])).await;
    for query in
        ["external_id[]=u1&external_id[]=u2", "external_id=u1&external_id=u2", "external_id%5B%5D=u1&external_id=u2"]
    {
        let r = api.get(&format!("/subscription/user/status?{query}")).await;
        assert_eq!(r.status, 200, "{query}: {}", r.body);
        let got: Vec<&str> =
            r.body["users"].as_array().unwrap().iter().filter_map(|u| u["external_id"].as_str()).collect();
        assert_eq!(got, ["u1", "u2"], "{query}");
        assert_eq!(r.body["total_count"], 2);
    }
}

#[tokio::test]
async fn user_status_returns_users_sharing_an_email_separately() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    users(&api, json!([{"external_id": "u1", "email": "s@example.com"}])).await;
    users(&api, json!([{"external_id": "u2", "email": "s@example.com"}])).await;
    set_v1(&api, json!({"subscription_group_id": news, "subscription_state": "subscribed", "email": "s@example.com"}))
        .await;
    let r = api.get("/subscription/user/status?email=s%40example.com").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["total_count"], 2);
    let list = r.body["users"].as_array().unwrap();
    assert_eq!(list.iter().map(|u| u["external_id"].clone()).collect::<Vec<_>>(), [json!("u1"), json!("u2")]);
    for u in list {
        assert_eq!(u["subscription_groups"][0]["status"], "Subscribed");
        assert_eq!(u["email"], "s@example.com");
    }
}

#[tokio::test]
async fn user_status_pages_with_limit_and_offset_and_counts_every_user() {
    let api = Api::new().await;
    let attrs: Vec<Value> = ids(5).iter().map(|u| json!({"external_id": u})).collect();
    users(&api, json!(attrs)).await;
    let q: String = ids(5).iter().map(|u| format!("external_id[]={u}&")).collect();
    let page = |r: &Reply| -> Vec<String> {
        r.body["users"].as_array().unwrap().iter().map(|u| u["external_id"].as_str().unwrap().to_string()).collect()
    };
    let r = api.get(&format!("/subscription/user/status?{q}limit=2&offset=1")).await;
    assert_eq!((page(&r), r.body["total_count"].clone()), (vec!["u1".to_string(), "u2".to_string()], json!(5)));
    let r = api.get(&format!("/subscription/user/status?{q}offset=4")).await;
    assert_eq!(page(&r), ["u4"]);
    let r = api.get(&format!("/subscription/user/status?{q}offset=9")).await;
    assert_eq!((page(&r).len(), r.body["total_count"].clone()), (0, json!(5)));
    let r = api.get(&format!("/subscription/user/status?{q}limit=100")).await;
    assert_eq!(page(&r).len(), 5);
}

#[tokio::test]
async fn user_status_rejects_bad_limits_too_many_ids_and_bad_combinations() {
    let api = Api::new().await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    let fifty_one: String = ids(51).iter().map(|u| format!("external_id[]={u}&")).collect();
    let cases = [
        ("external_id=u1&limit=101", None),
        ("external_id=u1&limit=0", None),
        ("external_id=u1&limit=ten", None),
        ("external_id=u1&offset=-1", None),
        (fifty_one.as_str(), Some(TOO_MANY)),
        ("email=a%40example.com&phone=%2B14155550100", Some(BOTH)),
        ("phone=4155550100", None),
        ("email=not-an-email", None),
        ("external_id=", None),
        ("", None),
    ];
    for (query, message) in cases {
        let r = api.get(&format!("/subscription/user/status?{query}")).await;
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        if let Some(m) = message {
            assert_eq!(r.body, json!({"message": m}), "{query}");
        }
    }
    let r = api.get("/subscription/user/status?phone=%2B14155550100").await;
    assert_eq!((r.status, r.body["users"][0]["external_id"].clone()), (200, json!("u1")));
}

#[tokio::test]
async fn user_status_lists_an_identifier_matching_no_user_as_a_non_fatal_error() {
    let api = Api::new().await;
    users(&api, json!([{"external_id": "u1"}])).await;
    let r = api.get("/subscription/user/status?external_id=u1&external_id=ghost").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["total_count"], 1);
    assert_eq!(r.body["errors"], json!([{"type": "No user found with this external_id", "external_id": "ghost"}]));
}

// ---- GET /subscription/status/get ------------------------------------------------

#[tokio::test]
async fn status_get_reports_subscribed_unsubscribed_and_unknown_per_identifier() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    users(&api, json!([{"external_id": "1"}, {"external_id": "2"}, {"external_id": "3"}])).await;
    set_v1(&api, json!({"subscription_group_id": g, "subscription_state": "unsubscribed", "external_id": ["1"]})).await;
    set_v1(&api, json!({"subscription_group_id": g, "subscription_state": "subscribed", "external_id": ["2"]})).await;
    let r = api
        .get(&format!(
            "/subscription/status/get?subscription_group_id={g}&external_id[]=1&external_id[]=2&external_id[]=3"
        ))
        .await;
    assert_eq!(
        (r.status, r.body),
        (200, json!({"status": {"1": "Unsubscribed", "2": "Subscribed", "3": "Unknown"}, "message": "success"}))
    );
}

#[tokio::test]
async fn status_get_by_email_or_phone_and_external_id_wins_over_them() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let texts = api.group("Texts", "whatsapp").await;
    users(
        &api,
        json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}, {"external_id": "u2", "email": "b@example.com"}]),
    )
    .await;
    set_v1(
        &api,
        json!({"subscription_group_id": news, "subscription_state": "subscribed", "email": ["a@example.com"]}),
    )
    .await;
    set_v1(
        &api,
        json!({"subscription_group_id": texts, "subscription_state": "unsubscribed", "phone": ["+14155550100"]}),
    )
    .await;
    assert_eq!(
        status_of(&api, &news, "email=a%40example.com&email=b%40example.com").await,
        json!({"a@example.com": "Subscribed", "b@example.com": "Unknown"})
    );
    assert_eq!(status_of(&api, &texts, "phone=%2B14155550100").await, json!({"+14155550100": "Unsubscribed"}));
    // With an external id, the email is not used.
    assert_eq!(status_of(&api, &news, "external_id=u2&email=a%40example.com").await, json!({"u2": "Unknown"}));
}

#[tokio::test]
async fn status_get_rejects_email_with_phone_wrong_channels_and_bad_input() {
    let api = Api::new().await;
    let news = api.group("News", "email").await;
    let texts = api.group("Texts", "sms").await;
    users(&api, json!([{"external_id": "u1", "email": "a@example.com", "phone": "+14155550100"}])).await;
    let r = api
        .get(&format!(
            "/subscription/status/get?subscription_group_id={news}&email=a%40example.com&phone=%2B14155550100"
        ))
        .await;
    assert_eq!((r.status, r.body), (400, json!({"message": BOTH})));
    // With an external id the same pair is fine.
    let r = api.get(&format!("/subscription/status/get?subscription_group_id={news}&external_id=u1&email=a%40example.com&phone=%2B14155550100")).await;
    assert_eq!(r.status, 200);
    let fifty_one: String = ids(51).iter().map(|u| format!("&external_id[]={u}")).collect();
    for query in [
        format!("subscription_group_id={texts}&email=a%40example.com"),
        format!("subscription_group_id={news}&phone=%2B14155550100"),
        format!("subscription_group_id={texts}&phone=4155550100"),
        format!("subscription_group_id={news}"),
        format!("subscription_group_id={news}{fifty_one}"),
        "external_id=u1".to_string(),
    ] {
        let r = api.get(&format!("/subscription/status/get?{query}")).await;
        assert_eq!(r.status, 400, "{query}: {}", r.body);
    }
}

#[tokio::test]
async fn status_get_lists_an_identifier_matching_no_user_as_unknown_and_in_errors() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    let r = api.get(&format!("/subscription/status/get?subscription_group_id={g}&email=ghost%40example.com")).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        json!({"status": {"ghost@example.com": "Unknown"}, "message": "success",
               "errors": [{"type": "No user found with this email", "email": "ghost@example.com"}]})
    );
}

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
