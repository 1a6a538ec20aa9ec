//! POST /users/merge.

use super::*;

#[tokio::test]
async fn merge_fills_missing_fields_sums_summaries_and_removes_the_source() {
    let api = Api::new().await;
    api.track(json!({
        "attributes": [{"external_id": "old", "first_name": "Alex", "last_name": "Old", "email": "old@example.com",
                        "phone": "+14155550100", "country": "FR", "visits": 3, "tier": "silver",
                        "date_of_first_session": "2023-12-01T00:00:00Z", "date_of_last_session": "2024-01-02T00:00:00Z"}],
        "events": [{"external_id": "old", "name": "play", "time": T1}, {"external_id": "old", "name": "quit", "time": T1}],
        "purchases": [{"external_id": "old", "product_id": "sku", "currency": "USD", "price": 1.5, "time": T3}]
    }))
    .await;
    api.track(json!({
        "attributes": [{"external_id": "new", "last_name": "Sterling", "visits": 9,
                        "date_of_first_session": "2024-01-01T00:00:00Z", "date_of_last_session": "2024-01-01T00:00:00Z"}],
        "events": [{"external_id": "new", "name": "play", "time": T2}, {"external_id": "new", "name": "play", "time": T2}],
        "purchases": [{"external_id": "new", "product_id": "sku", "currency": "USD", "price": 4.0, "time": T2}]
    }))
    .await;
    let r = merge(&api, vec![upd(ext("old"), ext("new"))]).await;
    assert_eq!(r.status, 202);
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "message": "success"
    }
    "#);
    assert_eq!(api.user("old").await, Value::Null);
    let u = api.user("new").await;
    insta::assert_json_snapshot!(redact(u), @r#"
    {
      "country": "FR",
      "created_at": "[redacted]",
      "custom_attributes": {
        "tier": "silver",
        "visits": 9
      },
      "custom_events": [
        {
          "count": 3,
          "first": "2024-01-10T00:00:00.000Z",
          "last": "2024-02-20T00:00:00.000Z",
          "name": "play"
        },
        {
          "count": 1,
          "first": "2024-01-10T00:00:00.000Z",
          "last": "2024-01-10T00:00:00.000Z",
          "name": "quit"
        }
      ],
      "date_of_first_session": "2023-12-01T00:00:00.000Z",
      "date_of_last_session": "2024-01-02T00:00:00.000Z",
      "email": "old@example.com",
      "email_hard_bounced": false,
      "external_id": "new",
      "first_name": "Alex",
      "last_name": "Sterling",
      "phone": "+14155550100",
      "purchases": [
        {
          "count": 2,
          "first": "2024-02-20T00:00:00.000Z",
          "last": "2024-03-30T00:00:00.000Z",
          "name": "sku"
        }
      ],
      "service_id": "[redacted]",
      "total_revenue": 5.5,
      "updated_at": "[redacted]"
    }
    "#);
    // The source's identifiers now name the kept user (email) or nobody (external id).
    let e = by_email(&api, "old@example.com").await;
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["external_id"], "new");
}

#[tokio::test]
async fn merge_keeps_the_targets_subscription_states_and_adds_the_missing_ones() {
    let api = Api::new().await;
    let g1 = api.group("News", "email").await;
    let g2 = api.group("Deals", "email").await;
    let sub = |g: &str, s: &str| json!({"subscription_group_id": g, "subscription_state": s});
    api.track(json!({"attributes": [{"external_id": "src", "email": "src@example.com", "email_subscribe": "opted_in",
        "push_subscribe": "subscribed", "subscription_groups": [sub(&g1, "subscribed"), sub(&g2, "subscribed")]}]}))
        .await;
    api.track(
        json!({"attributes": [{"external_id": "dst", "email": "dst@example.com", "email_subscribe": "unsubscribed",
        "subscription_groups": [sub(&g1, "unsubscribed")]}]}),
    )
    .await;
    assert_eq!(merge(&api, vec![upd(ext("src"), ext("dst"))]).await.status, 202);
    let u = api.user("dst").await;
    assert_eq!(u["email"], "dst@example.com");
    assert_eq!(u["email_subscribe"], "unsubscribed");
    assert_eq!(u["push_subscribe"], "subscribed");
    let status = |g: &str| {
        u["subscription_groups"].as_array().unwrap().iter().find(|x| x["id"] == g).map(|x| x["status"].clone())
    };
    assert_eq!(status(&g1), Some(json!("Unsubscribed")));
    assert_eq!(status(&g2), Some(json!("Subscribed")));
}

#[tokio::test]
async fn merge_errors_are_the_spec_messages_word_for_word() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "a", "x": 1}, {"external_id": "b"}]})).await;
    let good = upd(ext("a"), ext("b"));
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), MERGE_NOT_ARRAY),
        (json!({"merge_updates": "a"}), MERGE_NOT_ARRAY),
        (json!({"merge_updates": [good.clone(), 5]}), MERGE_NOT_ARRAY),
        (json!({"merge_updates": vec![good.clone(); 51]}), MERGE_TOO_MANY),
        (json!({"merge_updates": [good.clone(), upd(json!({"external_id": true}), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (json!({"merge_updates": [upd(json!({"user_alias": "name"}), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (
            json!({"merge_updates": [upd(json!({"email": ["a@example.com"], "prioritization": ["identified"]}), ext("b"))]}),
            MERGE_BAD_IDENTIFIER,
        ),
        (
            json!({"merge_updates": [upd(json!({"phone": 14155550100u64, "prioritization": ["identified"]}), ext("b"))]}),
            MERGE_BAD_IDENTIFIER,
        ),
        (
            json!({"merge_updates": [upd(json!({"external_id": "a", "phone": "+14155550100"}), ext("b"))]}),
            MERGE_BAD_IDENTIFIER,
        ),
        (json!({"merge_updates": [upd(json!("a"), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (
            json!({"merge_updates": [good.clone(), {"identifier_to_merge": ext("a"), "identifier_to_keep": ext("b"), "extra": 1}]}),
            MERGE_EXTRA_KEYS,
        ),
        (json!({"merge_updates": [{"identifier_to_merge": ext("a")}]}), MERGE_EXTRA_KEYS),
    ];
    for (body, message) in cases {
        let r = api.post("/users/merge", body.clone()).await;
        assert_eq!((r.status, r.body), (400, json!({"message": message})), "{body}");
    }
    // Nothing of a rejected request was applied.
    assert_eq!(custom(&api.user("a").await), json!({"x": 1}));
    // 50 updates are fine.
    assert_eq!(merge(&api, vec![good; 50]).await.status, 202);
    assert_eq!(api.user("a").await, Value::Null);
    assert_eq!(custom(&api.user("b").await), json!({"x": 1}));
}

#[tokio::test]
async fn merge_skips_updates_whose_identifiers_name_no_user_or_several() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "a", "x": 1}, {"external_id": "b"}, {"external_id": "c"}]})).await;
    anon(&api, "s1", "l", json!({"email": "twice@example.com"})).await;
    anon(&api, "s2", "l", json!({"email": "twice@example.com"})).await;
    let r = merge(
        &api,
        vec![
            upd(ext("ghost"), ext("b")),
            upd(ext("a"), ext("ghost")),
            upd(json!({"email": "twice@example.com", "prioritization": ["unidentified"]}), ext("c")),
            upd(ext("a"), ext("b")),
        ],
    )
    .await;
    assert_eq!((r.status, r.body), (202, json!({"message": "success"})));
    assert_eq!(custom(&api.user("b").await), json!({"x": 1}));
    assert_eq!(api.user("a").await, Value::Null);
    assert_eq!(api.user("ghost").await, Value::Null);
    assert!(api.user("c").await.get("email").is_none());
    assert_eq!(by_email(&api, "twice@example.com").await.len(), 2);
}

#[tokio::test]
async fn merging_a_user_into_itself_changes_nothing() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "a", "email": "a@example.com", "x": 1}]})).await;
    let before = api.user("a").await;
    let r = merge(
        &api,
        vec![
            upd(ext("a"), ext("a")),
            upd(json!({"email": "a@example.com", "prioritization": ["identified"]}), ext("a")),
        ],
    )
    .await;
    assert_eq!(r.status, 202);
    assert_eq!(api.user("a").await, before);
}

#[tokio::test]
async fn merge_of_two_identified_users_frees_the_source_external_id() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "a", "x": 1}, {"external_id": "b", "y": 2}]})).await;
    assert_eq!(merge(&api, vec![upd(ext("a"), ext("b"))]).await.status, 202);
    let b = api.user("b").await;
    assert_eq!(custom(&b), json!({"x": 1, "y": 2}));
    assert_eq!(api.user("a").await, Value::Null);
    // `a` names nobody now: tracking it starts a fresh profile.
    api.track(json!({"attributes": [{"external_id": "a", "z": 3}]})).await;
    assert_eq!(custom(&api.user("a").await), json!({"z": 3}));
    assert_eq!(custom(&api.user("b").await), json!({"x": 1, "y": 2}));
}

#[tokio::test]
async fn merge_finds_users_by_alias_email_and_phone() {
    let api = Api::new().await;
    anon(&api, "al", "crm", json!({"from_alias": true})).await;
    api.track(json!({"attributes": [{"email": "e@example.com", "from_email": true}]})).await;
    api.track(json!({"attributes": [{"phone": "+14155550100", "from_phone": true}]})).await;
    api.track(json!({"attributes": [{"external_id": "keep"}]})).await;
    let r = merge(
        &api,
        vec![
            upd(json!({"user_alias": alias("al", "crm")}), ext("keep")),
            upd(json!({"email": "E@Example.com", "prioritization": ["unidentified"]}), ext("keep")),
            upd(
                json!({"phone": "+14155550100", "prioritization": ["most_recently_updated"]}),
                json!({"user_alias": alias("al", "crm")}),
            ),
        ],
    )
    .await;
    assert_eq!(r.status, 202);
    let u = api.user("keep").await;
    assert_eq!(custom(&u), json!({"from_alias": true, "from_email": true, "from_phone": true}));
    assert_eq!(u["email"], "e@example.com");
    assert_eq!(u["phone"], "+14155550100");
    assert_eq!(u["user_aliases"], json!([alias("al", "crm")]));
    assert_eq!(api.users(json!({"phone": "+14155550100"})).await.len(), 1);
}

#[tokio::test]
async fn a_merge_chain_in_one_request_is_applied_in_request_order() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "a", "a": 1}, {"external_id": "b", "b": 2}, {"external_id": "c", "c": 3}]})).await;
    let r = merge(&api, vec![upd(ext("a"), ext("b")), upd(ext("b"), ext("c"))]).await;
    assert_eq!(r.status, 202);
    assert_eq!(api.user("a").await, Value::Null);
    assert_eq!(api.user("b").await, Value::Null);
    assert_eq!(custom(&api.user("c").await), json!({"a": 1, "b": 2, "c": 3}));

    // In the other order, B is already gone when A is to be merged into it: A stays.
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "a", "a": 1}, {"external_id": "b", "b": 2}, {"external_id": "c", "c": 3}]})).await;
    let r = merge(&api, vec![upd(ext("b"), ext("c")), upd(ext("a"), ext("b"))]).await;
    assert_eq!(r.status, 202);
    assert_eq!(custom(&api.user("a").await), json!({"a": 1}));
    assert_eq!(api.user("b").await, Value::Null);
    assert_eq!(custom(&api.user("c").await), json!({"b": 2, "c": 3}));
}
