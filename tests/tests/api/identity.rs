//! Black-box tests: POST /users/identify, /users/merge, /users/delete,
//! /users/alias/new, /users/alias/update, and the prioritization they share.
//! Every result is read back through /users/export/ids.

use engage_tests::{redact, tick, Api, Reply};
use serde_json::{json, Value};

const T1: &str = "2024-01-10T00:00:00Z";
const T2: &str = "2024-02-20T00:00:00Z";
const T3: &str = "2024-03-30T00:00:00Z";

const MERGE_NOT_ARRAY: &str = "'merge_updates' must be an array of objects";
const MERGE_TOO_MANY: &str = "a single request may not contain more than 50 merge updates";
const MERGE_BAD_IDENTIFIER: &str = "identifiers must be objects with an 'external_id' property that is a string, 'user_alias' property that is an object, 'email' property that is a string, or 'phone' property that is a string";
const MERGE_EXTRA_KEYS: &str = "'merge_updates' must only have 'identifier_to_merge' and 'identifier_to_keep'";

fn alias(name: &str, label: &str) -> Value {
    json!({"alias_name": name, "alias_label": label})
}

/// Creates (or updates) an alias-only profile with the given attributes.
async fn anon(api: &Api, name: &str, label: &str, attrs: Value) {
    let mut obj = attrs.as_object().cloned().unwrap_or_default();
    obj.insert("user_alias".into(), alias(name, label));
    obj.insert("_update_existing_only".into(), json!(false));
    api.track(json!({"attributes": [obj]})).await;
}

async fn by_alias(api: &Api, name: &str, label: &str) -> Value {
    api.users(json!({"user_aliases": [alias(name, label)]})).await.into_iter().next().unwrap_or(Value::Null)
}

async fn by_email(api: &Api, email: &str) -> Vec<Value> {
    api.users(json!({"email_address": email})).await
}

fn ext(x: &str) -> Value {
    json!({"external_id": x})
}

fn upd(merge: Value, keep: Value) -> Value {
    json!({"identifier_to_merge": merge, "identifier_to_keep": keep})
}

async fn merge(api: &Api, updates: Vec<Value>) -> Reply {
    api.post("/users/merge", json!({"merge_updates": updates})).await
}

fn identify_alias(x: &str, name: &str, label: &str) -> Value {
    json!({"external_id": x, "user_alias": alias(name, label)})
}

fn custom(u: &Value) -> Value {
    u.get("custom_attributes").cloned().unwrap_or(Value::Null)
}

// ---------------------------------------------------------------- prioritization

#[tokio::test]
async fn prioritization_may_not_hold_both_identified_and_unidentified() {
    let api = Api::new().await;
    let both = json!(["identified", "unidentified"]);
    let msg = json!({"message": "'prioritization' may contain only one of 'identified' and 'unidentified'"});
    let r = merge(&api, vec![upd(json!({"email": "a@example.com", "prioritization": both}), ext("b"))]).await;
    assert_eq!((r.status, r.body), (400, msg.clone()));
    let r = api
        .post("/users/identify", json!({"emails_to_identify": [{"external_id": "x", "email": "a@example.com", "prioritization": both}]}))
        .await;
    assert_eq!((r.status, r.body), (400, msg.clone()));
    let r = api.post("/users/delete", json!({"email_addresses": [{"email": "a@example.com", "prioritization": both}]})).await;
    assert_eq!((r.status, r.body), (400, msg));
}

#[tokio::test]
async fn prioritization_is_required_for_email_and_phone_identifiers() {
    let api = Api::new().await;
    let msg = json!({"message": "'prioritization' is required with an 'email' or 'phone' identifier"});
    let r = merge(&api, vec![upd(json!({"phone": "+14155550100"}), ext("b"))]).await;
    assert_eq!((r.status, r.body), (400, msg.clone()));
    let r = api.post("/users/identify", json!({"phone_numbers_to_identify": [{"external_id": "x", "phone": "+14155550100"}]})).await;
    assert_eq!((r.status, r.body), (400, msg.clone()));
    let r = api.post("/users/delete", json!({"email_addresses": [{"email": "a@example.com"}]})).await;
    assert_eq!((r.status, r.body), (400, msg));
}

#[tokio::test]
async fn prioritization_values_must_be_known_and_non_empty() {
    let api = Api::new().await;
    for bad in [json!([]), json!(["newest"]), json!("identified"), json!([1])] {
        let r = merge(&api, vec![upd(json!({"email": "a@example.com", "prioritization": bad}), ext("b"))]).await;
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(
            r.body["message"],
            "'prioritization' must be a non-empty array of 'identified', 'unidentified', 'most_recently_updated' or 'least_recently_updated'"
        );
    }
}

#[tokio::test]
async fn least_recently_updated_is_refused_for_delete_but_allowed_for_merge_and_identify() {
    let api = Api::new().await;
    let least = json!(["least_recently_updated"]);
    let r = api.post("/users/delete", json!({"email_addresses": [{"email": "a@example.com", "prioritization": least}]})).await;
    assert_eq!(
        (r.status, r.body),
        (400, json!({"message": "'least_recently_updated' is not allowed in the prioritization of /users/delete"}))
    );
    let r = merge(&api, vec![upd(json!({"email": "a@example.com", "prioritization": least}), ext("b"))]).await;
    assert_eq!(r.status, 202);
    let r = api
        .post("/users/identify", json!({"emails_to_identify": [{"external_id": "x", "email": "a@example.com", "prioritization": least}]}))
        .await;
    assert_eq!(r.status, 201);
}

#[tokio::test]
async fn when_several_users_still_match_after_prioritization_nothing_is_done() {
    let api = Api::new().await;
    // Two anonymous profiles with the same email, and an identified user.
    anon(&api, "a1", "device", json!({"email": "shared@example.com", "n": 1})).await;
    anon(&api, "a2", "device", json!({"email": "shared@example.com", "n": 2})).await;
    api.track(json!({"attributes": [{"external_id": "keep", "k": true}]})).await;
    let unidentified = json!(["unidentified"]);

    let r = api
        .post("/users/identify", json!({"emails_to_identify": [{"external_id": "new", "email": "shared@example.com", "prioritization": unidentified}]}))
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(api.user("new").await, Value::Null);

    let r = merge(&api, vec![upd(json!({"email": "shared@example.com", "prioritization": unidentified}), ext("keep"))]).await;
    assert_eq!(r.status, 202);
    assert_eq!(custom(&api.user("keep").await), json!({"k": true}));

    let r = api.post("/users/delete", json!({"email_addresses": [{"email": "shared@example.com", "prioritization": unidentified}]})).await;
    assert_eq!((r.status, r.body), (201, json!({"deleted": 0, "message": "success"})));
    assert_eq!(by_email(&api, "shared@example.com").await.len(), 2);
}

// ---------------------------------------------------------------- identify

#[tokio::test]
async fn identify_gives_a_new_external_id_to_the_alias_only_profile() {
    let api = Api::new().await;
    anon(&api, "anon-1", "device", json!({"color": "red"})).await;
    let r = api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "anon-1", "device")]})).await;
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
    anon(&api, "anon-1", "device", json!({
        "first_name": "Alex", "last_name": "Sterling", "gender": "M", "dob": "1990-02-03", "phone": "+14155550100",
        "time_zone": "Europe/Berlin", "home_city": "Berlin", "language": "de", "country": "DE",
        "email": "anon@example.com", "color": "red", "size": 4,
        "date_of_first_session": "2024-01-01T00:00:00Z", "date_of_last_session": "2024-01-09T00:00:00Z"
    }))
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

    let r = api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "anon-1", "device")]})).await;
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
    let r = api.post("/users/alias/new", json!({"user_aliases": [{"external_id": "u1", "alias_name": "mine", "alias_label": "device"}]})).await;
    assert_eq!(r.status, 201);
    anon(&api, "other", "device", json!({"size": 4})).await;
    let r = api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "other", "device")]})).await;
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
        (400, json!({"message": "a single request may not contain more than 50 aliases, emails or phone numbers to identify"}))
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
        (400, json!({"message": "one of 'aliases_to_identify', 'emails_to_identify' or 'phone_numbers_to_identify' is required"}))
    );
    let r = api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("undefined", "a", "l")]})).await;
    assert_eq!((r.status, r.body), (400, json!({"message": "provided external_id is blacklisted and disallowed"})));
    // One invalid entry rejects the request: the valid one before it is not applied.
    anon(&api, "a", "l", json!({})).await;
    let r = api
        .post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "a", "l"), {"external_id": "u2"}]}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(api.user("u1").await, Value::Null);
}

#[tokio::test]
async fn identifying_an_alias_that_does_not_exist_creates_nothing() {
    let api = Api::new().await;
    let r = api.post("/users/identify", json!({"aliases_to_identify": [identify_alias("u1", "ghost", "device")]})).await;
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
    let body = json!({"aliases_to_identify": [identify_alias("u1", "a", "device"), identify_alias("u1", "a", "device")]});
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

// ---------------------------------------------------------------- merge

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
    api.track(json!({"attributes": [{"external_id": "dst", "email": "dst@example.com", "email_subscribe": "unsubscribed",
        "subscription_groups": [sub(&g1, "unsubscribed")]}]}))
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
        (json!({"merge_updates": [good.clone(), upd(json!({"external_id": 7}), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (json!({"merge_updates": [upd(json!({"user_alias": "name"}), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (json!({"merge_updates": [upd(json!({"email": ["a@example.com"], "prioritization": ["identified"]}), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (json!({"merge_updates": [upd(json!({"phone": 14155550100u64, "prioritization": ["identified"]}), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (json!({"merge_updates": [upd(json!({"external_id": "a", "phone": "+14155550100"}), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (json!({"merge_updates": [upd(json!("a"), ext("b"))]}), MERGE_BAD_IDENTIFIER),
        (json!({"merge_updates": [good.clone(), {"identifier_to_merge": ext("a"), "identifier_to_keep": ext("b"), "extra": 1}]}), MERGE_EXTRA_KEYS),
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
        vec![upd(ext("a"), ext("a")), upd(json!({"email": "a@example.com", "prioritization": ["identified"]}), ext("a"))],
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
            upd(json!({"phone": "+14155550100", "prioritization": ["most_recently_updated"]}), json!({"user_alias": alias("al", "crm")})),
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

// ---------------------------------------------------------------- delete

#[tokio::test]
async fn delete_accepts_every_identifier_kind_in_one_request() {
    let api = Api::new().await;
    api.track(json!({"attributes": [
        {"external_id": "x1"},
        {"external_id": "x2"},
        {"email": "e@example.com"},
        {"phone": "+14155550100"}
    ]}))
    .await;
    anon(&api, "al", "crm", json!({})).await;
    let sid = api.user("x2").await["service_id"].as_str().unwrap().to_string();
    let r = api
        .post(
            "/users/delete",
            json!({
                "external_ids": ["x1", "nobody"],
                "user_aliases": [alias("al", "crm")],
                "service_ids": [sid],
                "email_addresses": [{"email": "e@example.com", "prioritization": ["unidentified"]}],
                "phone_numbers": [{"phone": "+14155550100", "prioritization": ["most_recently_updated"]}]
            }),
        )
        .await;
    assert_eq!(r.status, 201);
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "deleted": 5,
      "message": "success"
    }
    "#);
    let left = api
        .users(json!({"external_ids": ["x1", "x2"], "user_aliases": [alias("al", "crm")], "email_address": "e@example.com", "phone": "+14155550100"}))
        .await;
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn nothing_of_a_deleted_user_can_be_read_back() {
    let api = Api::new().await;
    let g = api.group("News", "email").await;
    api.track(json!({
        "attributes": [{"external_id": "u1", "email": "u1@example.com", "phone": "+14155550111", "first_name": "Ann", "x": 1,
                        "subscription_groups": [{"subscription_group_id": g, "subscription_state": "subscribed"}]}],
        "events": [{"external_id": "u1", "name": "e", "time": T1}],
        "purchases": [{"external_id": "u1", "product_id": "p", "currency": "USD", "price": 1.0, "time": T1}]
    }))
    .await;
    api.post("/users/alias/new", json!({"user_aliases": [{"external_id": "u1", "alias_name": "a1", "alias_label": "crm"}]})).await;
    let sid = api.user("u1").await["service_id"].as_str().unwrap().to_string();
    let r = api.post("/users/delete", json!({"external_ids": ["u1"]})).await;
    assert_eq!((r.status, r.body), (201, json!({"deleted": 1, "message": "success"})));
    let r = api
        .post(
            "/users/export/ids",
            json!({"external_ids": ["u1"], "user_aliases": [alias("a1", "crm")], "service_id": sid,
                   "email_address": "u1@example.com", "phone": "+14155550111"}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["users"], json!([]));
    assert_eq!(r.body["invalid_user_ids"].as_array().map(Vec::len), Some(5));
}

#[tokio::test]
async fn delete_then_track_the_same_external_id_starts_a_fresh_profile() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "first_name": "Ann", "x": 1}], "events": [{"external_id": "u1", "name": "e", "time": T1}]})).await;
    let old = api.user("u1").await["service_id"].clone();
    assert_eq!(api.post("/users/delete", json!({"external_ids": ["u1"]})).await.body["deleted"], 1);
    api.track(json!({"attributes": [{"external_id": "u1", "y": 2}]})).await;
    let u = api.user("u1").await;
    assert_ne!(u["service_id"], old);
    assert_eq!(custom(&u), json!({"y": 2}));
    assert!(u.get("first_name").is_none());
    assert!(u.get("custom_events").is_none());
}

#[tokio::test]
async fn delete_by_email_follows_prioritization() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "email": "s@example.com"}]})).await;
    anon(&api, "anon", "device", json!({"email": "s@example.com"})).await;
    let del = |p: Value| api.post("/users/delete", json!({"email_addresses": [{"email": "s@example.com", "prioritization": p}]}));
    let r = del(json!(["unidentified"])).await;
    assert_eq!(r.body["deleted"], 1);
    assert_eq!(by_alias(&api, "anon", "device").await, Value::Null);
    assert_eq!(api.user("u1").await["email"], "s@example.com");
    let r = del(json!(["identified"])).await;
    assert_eq!(r.body["deleted"], 1);
    assert_eq!(api.user("u1").await, Value::Null);
    let r = del(json!(["identified"])).await;
    assert_eq!((r.status, r.body), (201, json!({"deleted": 0, "message": "success"})));
}

#[tokio::test]
async fn delete_with_more_than_50_entries_in_all_is_rejected() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u0"}]})).await;
    let ids: Vec<String> = (0..30).map(|i| format!("u{i}")).collect();
    let aliases: Vec<Value> = (0..21).map(|i| alias(&format!("a{i}"), "l")).collect();
    let r = api.post("/users/delete", json!({"external_ids": ids, "user_aliases": aliases})).await;
    assert_eq!((r.status, r.body), (400, json!({"message": "a single request may not contain more than 50 users to delete"})));
    assert!(api.user("u0").await.is_object());
    let ids: Vec<String> = (0..50).map(|i| format!("u{i}")).collect();
    let r = api.post("/users/delete", json!({"external_ids": ids})).await;
    assert_eq!((r.status, r.body["deleted"].clone()), (201, json!(1)));
}

#[tokio::test]
async fn delete_rejects_bodies_without_identifiers_or_with_malformed_entries() {
    let api = Api::new().await;
    let r = api.post("/users/delete", json!({})).await;
    assert_eq!(
        (r.status, r.body),
        (400, json!({"message": "one of 'external_ids', 'user_aliases', 'service_ids', 'email_addresses' or 'phone_numbers' is required"}))
    );
    let r = api.post("/users/delete", json!({"phone_numbers": ["+14155550100"]})).await;
    assert_eq!(
        (r.status, r.body),
        (400, json!({"message": "each entry of 'phone_numbers' must be an object with 'phone' (a valid E.164 phone number) and 'prioritization'"}))
    );
    let r = api.post("/users/delete", json!({"external_ids": "u1"})).await;
    assert_eq!((r.status, r.body), (400, json!({"message": "'external_ids' must be an array"})));
}

// ---------------------------------------------------------------- aliases

#[tokio::test]
async fn alias_new_without_external_id_creates_an_alias_only_profile() {
    let api = Api::new().await;
    let r = api.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "n1", "alias_label": "crm"}]})).await;
    assert_eq!(r.status, 201);
    insta::assert_json_snapshot!(r.body, @r#"
    {
      "aliases_processed": 1,
      "message": "success"
    }
    "#);
    let u = by_alias(&api, "n1", "crm").await;
    assert_eq!(u["user_aliases"], json!([alias("n1", "crm")]));
    assert!(u.get("external_id").is_none());
    // Creating it again does not make a second profile.
    api.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "n1", "alias_label": "crm"}]})).await;
    assert_eq!(api.users(json!({"user_aliases": [alias("n1", "crm")]})).await.len(), 1);
}

#[tokio::test]
async fn alias_new_adds_an_alias_to_an_identified_user_once_per_label() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1"}]})).await;
    let entry = |name: &str, label: &str| json!({"external_id": "u1", "alias_name": name, "alias_label": label});
    let r = api.post("/users/alias/new", json!({"user_aliases": [entry("first", "crm"), entry("second", "crm"), entry("d", "device")]})).await;
    assert_eq!((r.status, r.body), (201, json!({"aliases_processed": 3, "message": "success"})));
    assert_eq!(api.user("u1").await["user_aliases"], json!([alias("first", "crm"), alias("d", "device")]));
    assert_eq!(by_alias(&api, "second", "crm").await, Value::Null);
}

#[tokio::test]
async fn alias_new_for_an_unknown_external_id_adds_nothing() {
    let api = Api::new().await;
    let r = api.post("/users/alias/new", json!({"user_aliases": [{"external_id": "ghost", "alias_name": "n", "alias_label": "crm"}]})).await;
    assert_eq!(r.status, 201);
    assert_eq!(by_alias(&api, "n", "crm").await, Value::Null);
    assert_eq!(api.user("ghost").await, Value::Null);
}

#[tokio::test]
async fn alias_new_rejects_malformed_entries() {
    let api = Api::new().await;
    let r = api.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "n"}]})).await;
    assert_eq!((r.status, r.body), (400, json!({"message": "each entry of 'user_aliases' needs 'alias_label', a non-empty string"})));
    let many: Vec<Value> = (0..51).map(|i| json!({"alias_name": format!("n{i}"), "alias_label": "l"})).collect();
    let r = api.post("/users/alias/new", json!({"user_aliases": many})).await;
    assert_eq!((r.status, r.body), (400, json!({"message": "a single request may not contain more than 50 'user_aliases'"})));
}

#[tokio::test]
async fn alias_update_renames_an_alias_and_keeps_the_profile() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1", "x": 1}]})).await;
    api.post("/users/alias/new", json!({"user_aliases": [{"external_id": "u1", "alias_name": "old", "alias_label": "crm"}]})).await;
    let r = api
        .post("/users/alias/update", json!({"alias_updates": [{"alias_label": "crm", "old_alias_name": "old", "new_alias_name": "new"}]}))
        .await;
    assert_eq!((r.status, r.body), (201, json!({"message": "success"})));
    assert_eq!(by_alias(&api, "old", "crm").await, Value::Null);
    let u = by_alias(&api, "new", "crm").await;
    assert_eq!(u["external_id"], "u1");
    assert_eq!(u["user_aliases"], json!([alias("new", "crm")]));
}

#[tokio::test]
async fn alias_update_of_a_missing_alias_or_to_a_taken_name_changes_nothing() {
    let api = Api::new().await;
    api.post("/users/alias/new", json!({"user_aliases": [{"alias_name": "a", "alias_label": "crm"}, {"alias_name": "b", "alias_label": "crm"}]})).await;
    let upd = |old: &str, new: &str| json!({"alias_label": "crm", "old_alias_name": old, "new_alias_name": new});
    let r = api.post("/users/alias/update", json!({"alias_updates": [upd("ghost", "c"), upd("a", "b")]})).await;
    assert_eq!(r.status, 201);
    assert_eq!(by_alias(&api, "c", "crm").await, Value::Null);
    assert_eq!(by_alias(&api, "a", "crm").await["user_aliases"], json!([alias("a", "crm")]));
    assert_eq!(by_alias(&api, "b", "crm").await["user_aliases"], json!([alias("b", "crm")]));
}

#[tokio::test]
async fn profiles_created_after_a_catch_up_never_replace_existing_ones() {
    // The queue catch-up and the request's own handler must not mint the same ids.
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u", "keep": 1}]})).await;
    let r = api
        .post(
            "/users/alias/new",
            json!({"user_aliases": [
                {"external_id": "u", "alias_name": "a1", "alias_label": "crm"},
                {"alias_name": "a2", "alias_label": "crm"}
            ]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(api.user("u").await["custom_attributes"]["keep"], json!(1));
    let users = api.users(json!({"user_aliases": [{"alias_name": "a2", "alias_label": "crm"}]})).await;
    assert_eq!(users.len(), 1);
    assert!(users[0].get("external_id").is_none());
}
