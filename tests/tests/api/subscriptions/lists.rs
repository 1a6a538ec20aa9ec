//! GET /email/hard_bounces and /email/unsubscribes, POST /email/bounce/remove and
//! /email/spam/remove: the lists follow the state the other endpoints set. GET
//! /sms/invalid_phone_numbers and POST /sms/invalid_phone_numbers/remove: the
//! numbers a fixtures file names (Engage sends no SMS), as the platform answers them.

use super::*;
use engage_tests::admin;

async fn phones(api: &Api, query: &str) -> Vec<(String, String)> {
    let r = api.get(&format!("/sms/invalid_phone_numbers?{query}")).await;
    assert_eq!(r.status, 200, "{query}: {}", r.body);
    assert_eq!(r.body["message"], "success");
    r.body["sms"]
        .as_array()
        .expect("sms")
        .iter()
        .map(|e| (e["phone"].as_str().expect("phone").into(), e["invalid_detected_at"].as_str().expect("at").into()))
        .collect()
}

async fn list(api: &Api, path: &str) -> Vec<String> {
    let r = api.get(path).await;
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.body["emails"]
        .as_array()
        .expect("emails")
        .iter()
        .map(|e| e["email"].as_str().expect("email").to_string())
        .collect()
}

/// fidelity-email-lists
#[tokio::test]
async fn the_lists_follow_unsubscribes_blocklists_and_removals() {
    let api = Api::new().await;
    let all = "start_date=2000-01-01&end_date=2099-12-31";
    // A user unsubscribed through track (applied by the queue), and an address blocklisted.
    api.track(
        json!({"attributes": [{"external_id": "u1", "email": "track@example.com", "email_subscribe": "unsubscribed"}]}),
    )
    .await;
    assert_eq!(api.post("/email/blocklist", json!({"email": "bounced@example.com"})).await.status, 201);
    let mut unsubscribed = list(&api, &format!("/email/unsubscribes?{all}")).await;
    unsubscribed.sort();
    assert_eq!(unsubscribed, ["bounced@example.com", "track@example.com"]);
    assert_eq!(list(&api, &format!("/email/hard_bounces?{all}")).await, ["bounced@example.com"]);
    let r = api.get("/email/hard_bounces?email=bounced@example.com").await;
    assert!(r.body["emails"][0]["hard_bounced_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{}", r.body);
    // Another workspace sees none of it.
    assert_eq!(list(&Api::new().await, &format!("/email/unsubscribes?{all}")).await, Vec::<String>::new());

    // Off the bounces: the lists and every profile with the address.
    api.track(json!({"attributes": [{"external_id": "u2", "email": "bounced@example.com"}]})).await;
    assert_eq!(api.user("u2").await["email_hard_bounced"], true);
    assert_eq!(api.post("/email/bounce/remove", json!({"email": ["bounced@example.com"]})).await.status, 201);
    assert_eq!(list(&api, &format!("/email/hard_bounces?{all}")).await, Vec::<String>::new());
    assert_eq!(api.user("u2").await["email_hard_bounced"], false);
    // Subscribed again: off the unsubscribes.
    api.post("/email/status", json!({"email": "track@example.com", "subscription_state": "subscribed"})).await;
    assert_eq!(list(&api, "/email/unsubscribes?email=track@example.com").await, Vec::<String>::new());
    // A day range that ends before today lists nothing.
    assert_eq!(list(&api, "/email/unsubscribes?start_date=2000-01-01&end_date=2000-01-02").await, Vec::<String>::new());
    assert_eq!(api.post("/email/spam/remove", json!({"email": "bounced@example.com"})).await.status, 201);
}

#[tokio::test]
async fn list_queries_and_removals_out_of_shape_are_400s() {
    let api = Api::new().await;
    for q in [
        "",
        "?start_date=2020-01-01",
        "?start_date=2020-02-01&end_date=2020-01-01",
        "?email=nope",
        "?email=a@example.com&limit=0",
        "?email=a@example.com&limit=501",
        "?email=a@example.com&sort_direction=up",
    ] {
        let r = api.get(&format!("/email/unsubscribes{q}")).await;
        assert_eq!(r.status, 400, "{q}: {}", r.body);
    }
    let many: Vec<String> = (0..51).map(|i| format!("u{i}@example.com")).collect();
    assert_eq!(api.post("/email/bounce/remove", json!({"email": many})).await.status, 400);
    assert_eq!(api.post("/email/spam/remove", json!({"email": "not an address"})).await.status, 400);
    let none = Api::with_permissions(json!(["email.status"])).await;
    assert_eq!(none.get("/email/hard_bounces?email=a@example.com").await.status, 403);
}

/// A fixtures file names invalid numbers and listed addresses (with their times or
/// not); the lists answer them in the platform's shape, and the removals take them off
/// (fidelity-sms-invalid-numbers, fidelity-list-fixtures).
#[tokio::test]
async fn fixtures_fill_the_lists_and_the_sms_removal_empties_them() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "b1", "email": "seed-bounce@example.com"}]})).await;
    let file = json!({"workspaces": {&api.workspace: {
        "invalid_phone_numbers": [
            {"phone": "+12183095514", "invalid_detected_at": "2026-03-01T10:00:00Z"},
            {"phone": "14255551212", "invalid_detected_at": "2026-03-02T10:00:00+02:00"},
            {"phone": "+447700900123"}],
        "hard_bounces": [{"email": "seed-bounce@example.com", "hard_bounced_at": "2026-02-01T00:00:00Z"}],
        "unsubscribes": [{"email": "seed-unsub@example.com", "unsubscribed_at": "2026-02-03T00:00:00Z"}]}}});
    let r = admin("POST", "/_engage/seed", file).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // Newest first, without the `+`, by a day range (both days in) or by number.
    let march = phones(&api, "start_date=2026-03-01&end_date=2026-03-02").await;
    assert_eq!(
        march,
        [
            ("12183095514".to_string(), "2026-03-01T10:00:00.000Z".to_string()),
            ("14255551212".to_string(), "2026-03-02T08:00:00.000Z".to_string()),
        ]
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
    );
    let by_number = phones(&api, "phone_numbers[]=14255551212&phone_numbers[]=%2B447700900123").await;
    assert_eq!(by_number.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["447700900123", "14255551212"]);
    assert_eq!(phones(&api, "phone_numbers=12183095514&limit=1&offset=1").await, Vec::new());
    // Another workspace sees none of it.
    assert_eq!(phones(&Api::new().await, "phone_numbers=12183095514").await, Vec::new());

    // The seeded hard bounce marks the user who has the address; the unsubscribe
    // holds for a profile that gets the address later.
    let bounced = api.get("/email/hard_bounces?email=seed-bounce@example.com").await;
    assert_eq!(bounced.body["emails"][0]["hard_bounced_at"], "2026-02-01T00:00:00.000Z", "{}", bounced.body);
    assert_eq!(api.user("b1").await["email_hard_bounced"], true);
    let unsub = api.get("/email/unsubscribes?start_date=2026-02-03&end_date=2026-02-03").await;
    assert_eq!(
        unsub.body["emails"],
        json!([{"email": "seed-unsub@example.com", "unsubscribed_at": "2026-02-03T00:00:00.000Z"}])
    );
    api.track(json!({"attributes": [{"external_id": "u9", "email": "seed-unsub@example.com"}]})).await;
    assert_eq!(api.user("u9").await["email_subscribe"], "unsubscribed");

    // Removed, with or without the `+`; a number not on the list is no error.
    let r = api
        .post(
            "/sms/invalid_phone_numbers/remove",
            json!({"phone_numbers": ["12183095514", "+14255551212", "+15550001111"]}),
        )
        .await;
    assert_eq!((r.status, &r.body), (201, &json!({"message": "success"})));
    assert_eq!(phones(&api, "start_date=2000-01-01&end_date=2099-12-31").await.len(), 1);
}

#[tokio::test]
async fn sms_queries_and_removals_out_of_shape_are_400s_and_need_their_permissions() {
    let api = Api::new().await;
    for q in [
        "",
        "?start_date=2020-01-01",
        "?phone_numbers=1",
        "?phone_numbers=%2B0123",
        "?phone_numbers=abc",
        "?email=a@example.com&start_date=2020-01-01&end_date=2020-01-02",
        "?phone_numbers=12183095514&limit=501",
    ] {
        let r = api.get(&format!("/sms/invalid_phone_numbers{q}")).await;
        assert_eq!(r.status, 400, "{q}: {}", r.body);
        assert!(r.body["message"].is_string(), "{}", r.body);
    }
    let many: Vec<String> = (0..51).map(|i| format!("+1555000{i:04}")).collect();
    for body in [
        json!({}),
        json!({"phone_numbers": []}),
        json!({"phone_numbers": "12183095514"}),
        json!({"phone_numbers": [12183095514_u64]}),
        json!({"phone_numbers": many}),
    ] {
        let r = api.post("/sms/invalid_phone_numbers/remove", body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
    }
    let read_only = Api::with_permissions(json!(["sms.invalid_phone_numbers"])).await;
    assert_eq!(read_only.get("/sms/invalid_phone_numbers?phone_numbers=12183095514").await.status, 200);
    let r = read_only.post("/sms/invalid_phone_numbers/remove", json!({"phone_numbers": ["12183095514"]})).await;
    assert_eq!(r.status, 403);
    let none = Api::with_permissions(json!(["email.status"])).await;
    assert_eq!(none.get("/sms/invalid_phone_numbers?phone_numbers=12183095514").await.status, 403);
}
