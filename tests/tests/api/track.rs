//! Black-box tests: POST /users/track.

use engage_tests::{redact, tick, Api};
use serde_json::{json, Value};

const T: &str = "2024-03-01T10:00:00Z";

#[tokio::test]
async fn track_answers_201_with_processed_counts() {
    let api = Api::new().await;
    let r = api
        .track(json!({
            "attributes": [{"external_id": "u1", "first_name": "Ann"}],
            "events": [{"external_id": "u1", "name": "login", "time": T}],
            "purchases": [{"external_id": "u1", "product_id": "p", "currency": "USD", "price": 1.5, "time": T}]
        }))
        .await;
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "attributes_processed": 1,
      "events_processed": 1,
      "message": "success",
      "purchases_processed": 1
    }
    "#);
    assert!(r.header("x-ratelimit-limit").is_some());
}

#[tokio::test]
async fn counts_are_present_only_for_arrays_that_were_sent() {
    let api = Api::new().await;
    let r = api.track(json!({"events": [{"external_id": "u1", "name": "e", "time": T}]})).await;
    assert_eq!(r.body, json!({"message": "success", "events_processed": 1}));
}

#[tokio::test]
async fn standard_and_custom_attributes_are_stored_and_exported() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{
        "external_id": "u1",
        "first_name": "Ann", "last_name": "Lee", "email": "Ann@Example.com", "phone": "+14155550100",
        "gender": "F", "dob": "1990-02-03", "country": "de", "home_city": "Berlin", "language": "DE",
        "time_zone": "Europe/Berlin", "email_subscribe": "opted_in", "push_subscribe": "subscribed",
        "plan": "pro", "vip": true, "visits": 3, "score": 4.5, "tags": ["a", "b", "a"],
        "address": {"city": "Berlin", "since": {"$time": "2020-05-28"}, "rooms": [1, 2]},
        "signup": {"$time": "2021-01-01T12:00:00+02:00"}
    }]}))
    .await;
    let u = api.user("u1").await;
    insta::assert_json_snapshot!(redact(u), @r#"
    {
      "country": "DE",
      "created_at": "[redacted]",
      "custom_attributes": {
        "address": {
          "city": "Berlin",
          "rooms": [
            1,
            2
          ],
          "since": "2020-05-28T00:00:00.000Z"
        },
        "plan": "pro",
        "score": 4.5,
        "signup": "2021-01-01T10:00:00.000Z",
        "tags": [
          "a",
          "b"
        ],
        "vip": true,
        "visits": 3
      },
      "dob": "1990-02-03",
      "email": "ann@example.com",
      "email_hard_bounced": false,
      "email_subscribe": "opted_in",
      "external_id": "u1",
      "first_name": "Ann",
      "gender": "F",
      "home_city": "Berlin",
      "language": "de",
      "last_name": "Lee",
      "phone": "+14155550100",
      "push_subscribe": "subscribed",
      "service_id": "[redacted]",
      "time_zone": "Europe/Berlin",
      "updated_at": "[redacted]"
    }
    "#);
}

#[tokio::test]
async fn null_removes_an_attribute() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "a": 1, "b": 2, "first_name": "X"}]})).await;
    api.track(json!({"attributes": [{"external_id": "u1", "a": null, "first_name": null}]})).await;
    let u = api.user("u1").await;
    assert_eq!(u["custom_attributes"], json!({"b": 2}));
    assert!(u.get("first_name").is_none());
}

#[tokio::test]
async fn inc_and_array_operations_apply_in_order() {
    let api = Api::new().await;
    api.track(json!({"attributes": [
        {"external_id": "u1", "n": {"inc": 5}, "list": ["x", "y", "z"]},
        {"external_id": "u1", "n": {"inc": -2}, "list": {"add": ["x", "w"], "remove": ["y"]}}
    ]}))
    .await;
    let u = api.user("u1").await;
    assert_eq!(u["custom_attributes"]["n"], json!(3));
    assert_eq!(u["custom_attributes"]["list"], json!(["z", "x", "w"]));
}

#[tokio::test]
async fn arrays_of_objects_support_add_update_and_remove() {
    let api = Api::new().await;
    api.track(
        json!({"attributes": [{"external_id": "u1", "pets": [{"id": 1, "type": "dog"}, {"id": 2, "type": "cat"}]}]}),
    )
    .await;
    api.track(json!({"attributes": [{"external_id": "u1", "_merge_objects": true,
        "pets": {"$update": [{"$identifier_key": "id", "$identifier_value": 2, "$new_object": {"name": "Tom"}}]}}]}))
        .await;
    api.track(json!({"attributes": [{"external_id": "u1",
        "pets": {"$remove": [{"$identifier_key": "type", "$identifier_value": "dog"}]}}]}))
        .await;
    api.track(json!({"attributes": [{"external_id": "u1", "pets": {"$add": [{"id": 3, "type": "fish"}]}}]})).await;
    let u = api.user("u1").await;
    assert_eq!(
        u["custom_attributes"]["pets"],
        json!([{"id": 2, "type": "cat", "name": "Tom"}, {"id": 3, "type": "fish"}])
    );
}

#[tokio::test]
async fn fifty_parallel_increments_of_one_attribute_sum_exactly() {
    let api = Api::new().await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            api.track(json!({"attributes": [{"external_id": "counter", "n": {"inc": 1}}]})).await.status
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 201);
    }
    assert_eq!(api.user("counter").await["custom_attributes"]["n"], json!(50));
}

#[tokio::test]
async fn fifty_parallel_sync_increments_sum_exactly() {
    let api = Api::new().await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            api.post("/users/track/sync", json!({"attributes": [{"external_id": "c", "n": {"inc": 1}}]})).await.status
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 201);
    }
    assert_eq!(api.user("c").await["custom_attributes"]["n"], json!(50));
}

#[tokio::test]
async fn each_event_object_is_one_occurrence_and_summaries_track_first_last_count() {
    let api = Api::new().await;
    let e = |t: &str| json!({"external_id": "u1", "name": "play", "time": t, "properties": {"song": "x"}});
    api.track(json!({"events": [e(T), e(T), e("2024-01-01T00:00:00Z"), e("2024-06-01T00:00:00+02:00")]})).await;
    let u = api.user("u1").await;
    assert_eq!(
        u["custom_events"],
        json!([{"name": "play", "first": "2024-01-01T00:00:00.000Z", "last": "2024-05-31T22:00:00.000Z", "count": 4}])
    );
}

#[tokio::test]
async fn purchases_are_summarised_per_product_and_quantity_counts() {
    let api = Api::new().await;
    let p = |q: u64, t: &str| json!({"external_id": "u1", "product_id": "book", "currency": "EUR", "price": 10.0, "quantity": q, "time": t});
    api.track(json!({"purchases": [p(2, T), p(1, "2024-01-01T00:00:00Z")]})).await;
    let u = api.user("u1").await;
    assert_eq!(
        u["purchases"],
        json!([{"name": "book", "first": "2024-01-01T00:00:00.000Z", "last": "2024-03-01T10:00:00.000Z", "count": 3}])
    );
    assert_eq!(u["total_revenue"], json!(30.0));
}

#[tokio::test]
async fn update_existing_only_true_creates_nothing() {
    let api = Api::new().await;
    let r = api.track(json!({"attributes": [{"external_id": "ghost", "_update_existing_only": true, "a": 1}]})).await;
    assert_eq!(r.body["attributes_processed"], json!(1));
    assert_eq!(api.user("ghost").await, Value::Null);
}

#[tokio::test]
async fn alias_profiles_are_created_only_when_update_existing_only_is_false() {
    let api = Api::new().await;
    let alias = |name: &str| json!({"alias_name": name, "alias_label": "crm"});
    api.track(json!({"attributes": [
        {"user_alias": alias("omitted"), "a": 1},
        {"user_alias": alias("created"), "_update_existing_only": false, "a": 2}
    ]}))
    .await;
    let users = api.users(json!({"user_aliases": [alias("omitted"), alias("created")]})).await;
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["user_aliases"], json!([alias("created")]));
    assert_eq!(users[0]["custom_attributes"], json!({"a": 2}));
    assert!(users[0].get("external_id").is_none());
}

#[tokio::test]
async fn an_unknown_email_creates_an_email_only_profile_without_alias() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"email": "new@example.com", "plan": "free"}]})).await;
    let users = api.users(json!({"email_address": "new@example.com"})).await;
    assert_eq!(users.len(), 1);
    assert_eq!(users[0]["email"], json!("new@example.com"));
    assert!(users[0].get("user_aliases").is_none());
    assert!(users[0].get("external_id").is_none());
}

#[tokio::test]
async fn email_and_phone_together_identify_by_email() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"email": "both@example.com", "phone": "+14155550101", "x": 1}]})).await;
    let by_email = api.users(json!({"email_address": "both@example.com"})).await;
    assert_eq!(by_email.len(), 1);
    assert_eq!(by_email[0]["phone"], json!("+14155550101"));
}

#[tokio::test]
async fn phone_identifiers_must_be_e164() {
    let api = Api::new().await;
    let r =
        api.track(json!({"attributes": [{"phone": "4155550100", "x": 1}, {"phone": "+14155550100", "x": 2}]})).await;
    assert_eq!(r.body["attributes_processed"], json!(1));
    assert_eq!(r.body["errors"][0]["index"], json!(0));
    assert_eq!(r.body["errors"][0]["input_array"], json!("attributes"));
    let users = api.users(json!({"phone": "+14155550100"})).await;
    assert_eq!(users[0]["custom_attributes"], json!({"x": 2}));
}

#[tokio::test]
async fn an_update_by_shared_email_goes_to_the_most_recently_updated_identified_profile() {
    let api = Api::new().await;
    api.track(json!({"attributes": [
        {"external_id": "old", "email": "shared@example.com"},
        {"email": "solo@example.com"}
    ]}))
    .await;
    tick().await;
    api.track(json!({"attributes": [{"external_id": "new", "email": "shared@example.com"}]})).await;
    tick().await;
    api.track(json!({"attributes": [{"email": "shared@example.com", "picked": true}]})).await;
    assert_eq!(api.user("new").await["custom_attributes"]["picked"], json!(true));
    assert!(api.user("old").await.get("custom_attributes").is_none());
}

#[tokio::test]
async fn non_fatal_errors_are_listed_and_the_rest_is_processed() {
    let api = Api::new().await;
    let r = api
        .track(json!({
            "attributes": [
                {"external_id": "ok", "a": 1},
                {"first_name": "nobody"},
                {"external_id": "x", "user_alias": {"alias_name": "a", "alias_label": "b"}},
                "not an object"
            ],
            "events": [
                {"external_id": "undefined", "name": "e", "time": T},
                {"external_id": "ok", "name": "e"},
                {"external_id": "ok", "name": "e", "time": T}
            ]
        }))
        .await;
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "attributes_processed": 1,
      "errors": [
        {
          "index": 1,
          "input_array": "attributes",
          "type": "one of 'external_id', 'user_alias', 'service_id', 'email' or 'phone' is required"
        },
        {
          "index": 2,
          "input_array": "attributes",
          "type": "only one of 'external_id', 'user_alias', 'service_id' may be given, found external_id, user_alias"
        },
        {
          "index": 3,
          "input_array": "attributes",
          "type": "each object must be a JSON object"
        },
        {
          "index": 0,
          "input_array": "events",
          "type": "provided external_id is blacklisted and disallowed"
        },
        {
          "index": 1,
          "input_array": "events",
          "type": "'time' is required: an ISO 8601 time with an offset or Z"
        }
      ],
      "events_processed": 1,
      "message": "success"
    }
    "#);
    let u = api.user("ok").await;
    assert_eq!(u["custom_events"][0]["count"], json!(1));
    assert_eq!(api.user("undefined").await, Value::Null);
}

#[tokio::test]
async fn invalid_values_skip_only_that_attribute() {
    let api = Api::new().await;
    let r = api
        .track(json!({"attributes": [{
            "external_id": "u1", "long": "x".repeat(256), "country": "Germany", "email": "not-an-email", "kept": 1
        }]}))
        .await;
    assert_eq!(r.body["errors"].as_array().unwrap().len(), 3, "{}", r.body);
    let u = api.user("u1").await;
    assert_eq!(u["custom_attributes"], json!({"kept": 1}));
    assert!(u.get("country").is_none() && u.get("email").is_none());
}

#[tokio::test]
async fn an_invalid_nested_value_excludes_every_nested_update_of_the_request() {
    let api = Api::new().await;
    let r = api
        .track(json!({"attributes": [
            {"external_id": "u1", "good": {"a": 1}, "flat": "kept"},
            {"external_id": "u2", "bad": {"when": {"$time": "not a time"}}}
        ]}))
        .await;
    assert_eq!(r.body["attributes_processed"], json!(2));
    assert!(r.body["errors"][0]["type"].as_str().unwrap().contains("nested"));
    assert_eq!(api.user("u1").await["custom_attributes"], json!({"flat": "kept"}));
}

#[tokio::test]
async fn invalid_events_and_purchases_are_rejected_one_by_one() {
    let api = Api::new().await;
    let r = api
        .track(json!({"purchases": [
            {"external_id": "u1", "product_id": "p", "currency": "DOLLARS", "price": 1, "time": T},
            {"external_id": "u1", "product_id": "p", "currency": "USD", "price": "1", "time": T},
            {"external_id": "u1", "product_id": "p", "currency": "USD", "price": 1, "quantity": 101, "time": T},
            {"external_id": "u1", "product_id": "p", "currency": "USD", "price": 1, "time": "yesterday"},
            {"external_id": "u1", "product_id": "p", "currency": "USD", "price": 1, "time": T}
        ]}))
        .await;
    assert_eq!(r.body["purchases_processed"], json!(1));
    let idx: Vec<u64> = r.body["errors"].as_array().unwrap().iter().map(|e| e["index"].as_u64().unwrap()).collect();
    assert_eq!(idx, vec![0, 1, 2, 3]);
    assert_eq!(api.user("u1").await["purchases"][0]["count"], json!(1));
}

#[tokio::test]
async fn more_than_75_objects_is_a_fatal_error_and_nothing_is_stored() {
    let api = Api::new().await;
    let attrs: Vec<Value> = (0..76).map(|i| json!({"external_id": format!("u{i}"), "a": 1})).collect();
    let r = api.post("/users/track", json!({"attributes": attrs})).await;
    assert_eq!(r.status, 400);
    assert!(r.body["message"].as_str().unwrap().starts_with("Max Input Length Exceeded"));
    assert!(r.body["errors"].is_array());
    assert_eq!(api.user("u0").await, Value::Null);
    let ok: Vec<Value> = (0..75).map(|i| json!({"external_id": format!("u{i}"), "a": 1})).collect();
    assert_eq!(api.track(json!({"attributes": ok})).await.body["attributes_processed"], json!(75));
}

#[tokio::test]
async fn a_request_with_nothing_valid_is_a_fatal_error() {
    let api = Api::new().await;
    for body in [json!({}), json!({"attributes": [{"first_name": "x"}]}), json!({"events": []})] {
        let r = api.post("/users/track", body).await;
        assert_eq!(r.status, 400);
        assert_eq!(
            r.body["message"],
            json!("Valid data must be provided in the 'attributes', 'events', or 'purchases' fields.")
        );
        assert!(r.body["errors"].is_array());
    }
}

#[tokio::test]
async fn malformed_bodies_are_fatal_400s() {
    let api = Api::new().await;
    for raw in [&b"{not json"[..], b"[1,2]", b"", b"{\"attributes\": {}}", b"{\"events\": 5}"] {
        let r = api.call("POST", "/users/track", Some(raw.to_vec())).await;
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(raw));
        assert!(r.body["message"].is_string());
        assert!(r.body["errors"].is_array());
    }
}

#[tokio::test]
async fn subscription_states_in_attributes_reach_every_user_sharing_the_email() {
    let api = Api::new().await;
    let group = api.group("Newsletter", "email").await;
    api.track(json!({"attributes": [
        {"external_id": "a", "email": "family@example.com"},
        {"external_id": "b", "email": "family@example.com"}
    ]}))
    .await;
    let r = api
        .track(json!({"attributes": [{"external_id": "a", "email_subscribe": "unsubscribed",
        "subscription_groups": [
            {"subscription_group_id": group, "subscription_state": "subscribed"},
            {"subscription_group_id": "no-such-group", "subscription_state": "subscribed"}
        ]}]}))
        .await;
    assert_eq!(r.body["errors"][0]["type"], json!("'subscription_group_id' must be a valid subscription group UUID"));
    assert_eq!(r.body["errors"][0]["index"], json!(0));
    for id in ["a", "b"] {
        let u = api.user(id).await;
        assert_eq!(u["email_subscribe"], json!("unsubscribed"), "{id}");
        assert_eq!(u["subscription_groups"][0]["status"], json!("Subscribed"), "{id}");
        assert_eq!(u["subscription_groups"][0]["channel"], json!("email"), "{id}");
    }
}

#[tokio::test]
async fn huge_prices_are_refused_and_revenue_stays_readable() {
    let api = Api::new().await;
    let p = |price: f64| json!({"external_id": "rich", "product_id": "x", "currency": "USD", "price": price, "quantity": 100, "time": T});
    let r = api.track(json!({"purchases": [p(1e308), p(1e15), p(1e15)]})).await;
    assert_eq!(r.body["purchases_processed"], json!(2));
    assert_eq!(r.body["errors"][0]["index"], json!(0));
    let u = api.user("rich").await;
    assert_eq!(u["total_revenue"], json!(2e17));
    assert_eq!(u["purchases"][0]["count"], json!(200));
}

#[tokio::test]
async fn event_properties_may_hold_100_kb_of_json_and_no_more() {
    let api = Api::new().await;
    // `{"blob":"…"}` is the string's length plus 11 bytes of compact JSON.
    let e = |user: &str, n: usize| json!({"external_id": user, "name": "big", "time": T, "properties": {"blob": "x".repeat(n)}});
    let r = api.track(json!({"events": [e("fits", 102_400 - 11), e("over", 102_400 - 10)]})).await;
    assert_eq!(r.body["events_processed"], json!(1));
    assert_eq!(r.body["errors"], json!([{"type": "'properties' exceeds 100 KB", "input_array": "events", "index": 1}]));
    assert_eq!(api.user("fits").await["custom_events"][0]["count"], json!(1));
    assert_eq!(api.user("over").await, Value::Null);
}

/// Requests sent to one profile as fast as possible, past its bound of 1,000 custom
/// attributes: each is answered by what the ones acknowledged before it queued, so
/// every `201` is applied whole and readable, every refusal is a `400` naming the
/// bound, and no job is set aside.
#[tokio::test]
async fn every_201_to_a_profile_at_its_bound_is_applied_and_none_is_set_aside() {
    // One server's count of what its acknowledged jobs add to a profile (servers
    // sharing a database count apart: docs/decisions/postgres.md, postgres-ledger).
    let api = Api::new().await.pinned();
    let body = |round: usize| {
        let mut user = serde_json::Map::new();
        user.insert("external_id".into(), json!("crowded"));
        for i in 0..100 {
            user.insert(format!("r{round}_{i}"), json!(i));
        }
        json!({"attributes": [user]})
    };
    let mut sent = Vec::new();
    for round in 0..14 {
        let api = api.clone();
        let b = body(round);
        sent.push(tokio::spawn(async move {
            // A 503 (contention: the edge answers it rather than wait) acknowledged
            // nothing: retry it, as a client does.
            for _ in 0..50 {
                let r = api.post("/users/track", b.clone()).await;
                if r.status != 503 {
                    return (round, r);
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("still 503 after 50 tries");
        }));
    }
    let mut accepted = Vec::new();
    for task in sent {
        let (round, r) = task.await.unwrap();
        match r.status {
            201 => accepted.push(round),
            400 => assert!(r.body["message"].as_str().unwrap().contains("a profile keeps at most 1000"), "{}", r.body),
            other => panic!("{other}: {}", r.body),
        }
    }
    assert_eq!(accepted.len(), 10, "exactly as many as fit: {accepted:?}");
    let user = api.user("crowded").await;
    let custom = user["custom_attributes"].as_object().unwrap();
    for round in &accepted {
        for i in 0..100 {
            assert_eq!(custom.get(&format!("r{round}_{i}")), Some(&json!(i)), "round {round} key {i} was acknowledged");
        }
    }
    assert_eq!(custom.len(), 1000);
    let aside = engage_tests::admin("GET", "/_engage/queue/set-aside", json!(null)).await;
    assert_eq!(aside.status, 200);
    let ours = aside.body["jobs"].as_array().unwrap().iter().filter(|j| j.to_string().contains(&api.workspace)).count();
    assert_eq!(ours, 0, "{}", aside.body);
}
