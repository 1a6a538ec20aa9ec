//! GET /email/hard_bounces and /email/unsubscribes, POST /email/bounce/remove and
//! /email/spam/remove: the lists follow the state the other endpoints set.

use super::*;

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
