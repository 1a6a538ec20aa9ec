//! POST /users/identify.

use super::*;

#[tokio::test]
async fn identify_gives_a_new_external_id_to_the_alias_only_profile() {
    let api = Api::new().await;
    anon(&api, "anon-1", "device", json!({"color": "red"})).await;
    let r =
        api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "anon-1", "device")]})).await;
    assert_eq!(r.status, 201);
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "aliases_processed": 1,
      "message": "success"
    }
    "#);
    let u = api.user("u1").await;
    assert_eq!(u["user_aliases"], json!([alias("anon-1", "device")]));
    assert_eq!(custom(&u), json!({"color": "red"}));
    assert_eq!(by_alias(&api, "anon-1", "device").await["external_id"], "u1");
}

#[tokio::test]
async fn identify_into_an_existing_user_merges_every_field_and_removes_the_anonymous_profile() {
    let api = Api::new().await;
    api.track(json!({
        "attributes": [{"external_id": "u1", "first_name": "Al", "email": "al@example.com", "color": "blue",
                        "date_of_first_session": "2024-01-05T00:00:00Z", "date_of_last_session": "2024-01-06T00:00:00Z"}],
        "events": [{"external_id": "u1", "name": "play", "time": T2}],
        "purchases": [{"external_id": "u1", "product_id": "sku", "currency": "USD", "price": 2.0, "time": T2}]
    }))
    .await;
    anon(
        &api,
        "anon-1",
        "device",
        json!({
            "first_name": "Alex", "last_name": "Sterling", "gender": "M", "dob": "1990-02-03", "phone": "+14155550100",
            "time_zone": "Europe/Berlin", "home_city": "Berlin", "language": "de", "country": "DE",
            "email": "anon@example.com", "color": "red", "size": 4,
            "date_of_first_session": "2024-01-01T00:00:00Z", "date_of_last_session": "2024-01-09T00:00:00Z"
        }),
    )
    .await;
    let who = json!({"user_alias": alias("anon-1", "device")});
    let with = |extra: Value| {
        let mut o = who.as_object().cloned().unwrap();
        o.extend(extra.as_object().cloned().unwrap());
        Value::Object(o)
    };
    api.track(json!({
        "events": [with(json!({"name": "play", "time": T1})), with(json!({"name": "play", "time": T3})), with(json!({"name": "quit", "time": T1}))],
        "purchases": [with(json!({"product_id": "sku", "currency": "USD", "price": 3.0, "quantity": 2, "time": T3}))]
    }))
    .await;

    let r =
        api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "anon-1", "device")]})).await;
    assert_eq!((r.status, r.body), (201, json!({"aliases_processed": 1, "message": "success"})));

    let u = api.user("u1").await;
    insta::assert_json_snapshot!(redact(u), @r#"
    {
      "country": "DE",
      "created_at": "[redacted]",
      "custom_attributes": {
        "color": "blue",
        "size": 4
      },
      "custom_events": [
        {
          "count": 3,
          "first": "2024-01-10T00:00:00.000Z",
          "last": "2024-03-30T00:00:00.000Z",
          "name": "play"
        },
        {
          "count": 1,
          "first": "2024-01-10T00:00:00.000Z",
          "last": "2024-01-10T00:00:00.000Z",
          "name": "quit"
        }
      ],
      "date_of_first_session": "2024-01-01T00:00:00.000Z",
      "date_of_last_session": "2024-01-09T00:00:00.000Z",
      "dob": "1990-02-03",
      "email": "al@example.com",
      "email_hard_bounced": false,
      "external_id": "u1",
      "first_name": "Al",
      "gender": "M",
      "home_city": "Berlin",
      "language": "de",
      "last_name": "Sterling",
      "phone": "+14155550100",
      "purchases": [
        {
          "count": 3,
          "first": "2024-02-20T00:00:00.000Z",
          "last": "2024-03-30T00:00:00.000Z",
          "name": "sku"
        }
      ],
      "service_id": "[redacted]",
      "time_zone": "Europe/Berlin",
      "total_revenue": 8.0,
      "updated_at": "[redacted]",
      "user_aliases": [
        {
          "alias_label": "device",
          "alias_name": "anon-1"
        }
      ]
    }
    "#);
    // The anonymous profile is gone: its email names nobody, its alias names u1.
    assert!(by_email(&api, "anon@example.com").await.is_empty());
    assert_eq!(by_alias(&api, "anon-1", "device").await["external_id"], "u1");
}

#[tokio::test]
async fn several_aliases_attach_to_one_external_id() {
    let api = Api::new().await;
    anon(&api, "d-1", "device", json!({"a": 1})).await;
    anon(&api, "c-1", "crm", json!({"b": 2})).await;
    anon(&api, "w-1", "web", json!({"c": 3})).await;
    let r = api
        .post(
            "/users/identify",
            json!({"aliases_to_identify": [
                identify_alias("u1", "d-1", "device"), identify_alias("u1", "c-1", "crm"), identify_alias("u1", "w-1", "web")
            ]}),
        )
        .await;
    assert_eq!((r.status, r.body), (201, json!({"aliases_processed": 3, "message": "success"})));
    let u = api.user("u1").await;
    assert_eq!(custom(&u), json!({"a": 1, "b": 2, "c": 3}));
    assert_eq!(u["user_aliases"], json!([alias("c-1", "crm"), alias("d-1", "device"), alias("w-1", "web")]));
    for (n, l) in [("d-1", "device"), ("c-1", "crm"), ("w-1", "web")] {
        assert_eq!(by_alias(&api, n, l).await["external_id"], "u1");
    }
}

#[tokio::test]
async fn identify_does_not_merge_when_the_user_already_has_an_alias_with_that_label() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "color": "blue"}]})).await;
    let r = api
        .post(
            "/users/alias/new",
            json!({"user_aliases": [{"external_id": "u1", "alias_name": "mine", "alias_label": "device"}]}),
        )
        .await;
    assert_eq!(r.status, 201);
    anon(&api, "other", "device", json!({"size": 4})).await;
    let r =
        api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "other", "device")]})).await;
    assert_eq!(r.status, 201);
    let u = api.user("u1").await;
    assert_eq!(custom(&u), json!({"color": "blue"}));
    assert_eq!(u["user_aliases"], json!([alias("mine", "device")]));
    let other = by_alias(&api, "other", "device").await;
    assert_eq!(custom(&other), json!({"size": 4}));
    assert!(other.get("external_id").is_none());
}

#[tokio::test]
async fn emails_to_identify_identifies_the_email_only_profile() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"email": "e@example.com", "plan": "free"}]})).await;
    let r = api
        .post("/users/identify", json!({"emails_to_identify": [{"external_id": "u1", "email": "e@example.com", "prioritization": ["unidentified"]}]}))
        .await;
    assert_eq!((r.status, r.body), (201, json!({"aliases_processed": 0, "message": "success"})));
    let u = api.user("u1").await;
    assert_eq!(u["email"], "e@example.com");
    assert_eq!(custom(&u), json!({"plan": "free"}));
    assert_eq!(by_email(&api, "e@example.com").await.len(), 1);
}

#[tokio::test]
async fn phone_numbers_to_identify_merges_the_phone_only_profile_into_the_user() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"phone": "+14155550100", "plan": "free"}]})).await;
    api.track(json!({"attributes": [{"external_id": "u1", "plan": "gold"}]})).await;
    let r = api
        .post(
            "/users/identify",
            json!({"phone_numbers_to_identify": [{"external_id": "u1", "phone": "+14155550100", "prioritization": ["unidentified", "most_recently_updated"]}]}),
        )
        .await;
    assert_eq!(r.status, 201);
    let u = api.user("u1").await;
    assert_eq!(u["phone"], "+14155550100");
    assert_eq!(custom(&u), json!({"plan": "gold"}));
    let by_phone = api.users(json!({"phone": "+14155550100"})).await;
    assert_eq!(by_phone.len(), 1);
    assert_eq!(by_phone[0]["external_id"], "u1");
}

#[tokio::test]
async fn identify_with_more_than_50_entries_is_rejected() {
    let api = Api::new().await;
    let many: Vec<Value> = (0..51).map(|i| identify_alias("u1", &format!("a{i}"), "device")).collect();
    let r = api.post("/users/identify", json!({"aliases_to_identify": many})).await;
    assert_eq!(
        (r.status, r.body),
        (
            400,
            json!({"message": "a single request may not contain more than 50 aliases, emails or phone numbers to identify"})
        )
    );
    let fifty: Vec<Value> = (0..50).map(|i| identify_alias("u1", &format!("a{i}"), "device")).collect();
    assert_eq!(api.post("/users/identify", json!({"aliases_to_identify": fifty})).await.status, 201);
}

#[tokio::test]
async fn identify_rejects_bodies_without_entries_or_with_invalid_ones() {
    let api = Api::new().await;
    let r = api.post("/users/identify", json!({})).await;
    assert_eq!(
        (r.status, r.body),
        (
            400,
            json!({"message": "one of 'aliases_to_identify', 'emails_to_identify' or 'phone_numbers_to_identify' is required"})
        )
    );
    // Arrays that are all empty name nobody: the same 400.
    let r = api.post("/users/identify", json!({"aliases_to_identify": [], "emails_to_identify": null})).await;
    assert_eq!(r.status, 400);
    assert!(r.body["message"].as_str().is_some_and(|m| m.contains("is required")), "{}", r.body);
    let r = api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("undefined", "a", "l")]})).await;
    assert_eq!((r.status, r.body), (400, json!({"message": "provided external_id is blacklisted and disallowed"})));
    // One invalid entry rejects the request: the valid one before it is not applied.
    anon(&api, "a", "l", json!({})).await;
    let r = api
        .post(
            "/users/identify",
            json!({"aliases_to_identify": [identify_alias("u1", "a", "l"), {"external_id": "u2"}]}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(api.user("u1").await, Value::Null);
}

#[tokio::test]
async fn identifying_an_alias_that_does_not_exist_creates_nothing() {
    let api = Api::new().await;
    let r =
        api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "ghost", "device")]})).await;
    assert_eq!((r.status, r.body), (201, json!({"aliases_processed": 1, "message": "success"})));
    assert_eq!(api.user("u1").await, Value::Null);
    assert_eq!(by_alias(&api, "ghost", "device").await, Value::Null);
    // An existing user does not gain the missing alias either.
    api.track(json!({"attributes": [{"external_id": "u2"}]})).await;
    api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u2", "ghost", "device")]})).await;
    assert!(api.user("u2").await.get("user_aliases").is_none());
}

#[tokio::test]
async fn identifying_the_same_alias_twice_is_harmless_and_a_second_external_id_is_ignored() {
    let api = Api::new().await;
    anon(&api, "a", "device", json!({"n": 1})).await;
    let body =
        json!({"aliases_to_identify": [identify_alias("u1", "a", "device"), identify_alias("u1", "a", "device")]});
    assert_eq!(api.post("/users/identify", body.clone()).await.status, 201);
    assert_eq!(api.post("/users/identify", body).await.status, 201);
    let u = api.user("u1").await;
    assert_eq!(custom(&u), json!({"n": 1}));
    assert_eq!(u["user_aliases"], json!([alias("a", "device")]));
    // The profile is identified now: identifying it as someone else does nothing.
    api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u2", "a", "device")]})).await;
    assert_eq!(api.user("u2").await, Value::Null);
    assert_eq!(by_alias(&api, "a", "device").await["external_id"], "u1");
}

/// An identified user `u1` and a newer anonymous profile share an email.
async fn shared_email_setup() -> Api {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "email": "s@example.com", "who": "known"}]})).await;
    tick().await;
    anon(&api, "anon", "device", json!({"email": "s@example.com", "who": "anon", "only_anon": true})).await;
    assert_eq!(by_email(&api, "s@example.com").await.len(), 2);
    api
}

async fn identify_email(api: &Api, x: &str, prioritization: Value) {
    let r = api
        .post("/users/identify", json!({"emails_to_identify": [{"external_id": x, "email": "s@example.com", "prioritization": prioritization}]}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn email_shared_by_identified_and_anonymous_profiles_under_each_prioritization() {
    // unidentified: the anonymous profile is chosen and folded into u1.
    let api = shared_email_setup().await;
    identify_email(&api, "u1", json!(["unidentified"])).await;
    assert_eq!(custom(&api.user("u1").await), json!({"who": "known", "only_anon": true}));
    assert_eq!(by_email(&api, "s@example.com").await.len(), 1);

    // most_recently_updated: the anonymous profile is the newer one: same result.
    let api = shared_email_setup().await;
    identify_email(&api, "u1", json!(["most_recently_updated"])).await;
    assert_eq!(custom(&api.user("u1").await), json!({"who": "known", "only_anon": true}));
    assert_eq!(by_email(&api, "s@example.com").await.len(), 1);

    // identified / least_recently_updated: u1 itself is chosen; it already has the id: nothing changes.
    for p in [json!(["identified"]), json!(["least_recently_updated"])] {
        let api = shared_email_setup().await;
        identify_email(&api, "u1", p).await;
        assert_eq!(custom(&api.user("u1").await), json!({"who": "known"}));
        assert_eq!(by_email(&api, "s@example.com").await.len(), 2);
    }

    // unidentified with a new external id: the anonymous profile gets it; u1 is untouched.
    let api = shared_email_setup().await;
    identify_email(&api, "u2", json!(["unidentified"])).await;
    assert_eq!(custom(&api.user("u2").await), json!({"who": "anon", "only_anon": true}));
    assert_eq!(custom(&api.user("u1").await), json!({"who": "known"}));

    // identified with another external id: the chosen profile is u1, identified already: skipped.
    let api = shared_email_setup().await;
    identify_email(&api, "u2", json!(["identified"])).await;
    assert_eq!(api.user("u2").await, Value::Null);
    assert_eq!(by_email(&api, "s@example.com").await.len(), 2);
}
