//! Black-box tests: GET /subscription/user/status and GET /subscription/status/get.

use engage_tests::{redact, tick, Api, Reply};
use serde_json::{json, Value};

use super::{ids, set_v1, status_of, users, BOTH, TOO_MANY};

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
    tick().await;
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
