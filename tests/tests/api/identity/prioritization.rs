//! The prioritization rules identify, merge and delete share.

use super::*;

#[tokio::test]
async fn prioritization_may_not_hold_both_identified_and_unidentified() {
    let api = Api::new().await;
    let both = json!(["identified", "unidentified"]);
    let msg = json!({"message": "'prioritization' may contain only one of 'identified' and 'unidentified'"});
    let r = merge(&api, vec![upd(json!({"email": "a@example.com", "prioritization": both}), ext("b"))]).await;
    assert_eq!((r.status, r.body), (400, msg.clone()));
    let r = api
        .post(
            "/users/identify",
            json!({"emails_to_identify": [{"external_id": "x", "email": "a@example.com", "prioritization": both}]}),
        )
        .await;
    assert_eq!((r.status, r.body), (400, msg.clone()));
    let r = api
        .post("/users/delete", json!({"email_addresses": [{"email": "a@example.com", "prioritization": both}]}))
        .await;
    assert_eq!((r.status, r.body), (400, msg));
}

#[tokio::test]
async fn prioritization_is_required_for_email_and_phone_identifiers() {
    let api = Api::new().await;
    let msg = json!({"message": "'prioritization' is required with an 'email' or 'phone' identifier"});
    let r = merge(&api, vec![upd(json!({"phone": "+14155550100"}), ext("b"))]).await;
    assert_eq!((r.status, r.body), (400, msg.clone()));
    let r = api
        .post("/users/identify", json!({"phone_numbers_to_identify": [{"external_id": "x", "phone": "+14155550100"}]}))
        .await;
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
    let r = api
        .post("/users/delete", json!({"email_addresses": [{"email": "a@example.com", "prioritization": least}]}))
        .await;
    assert_eq!(
        (r.status, r.body),
        (400, json!({"message": "'least_recently_updated' is not allowed in the prioritization of /users/delete"}))
    );
    let r = merge(&api, vec![upd(json!({"email": "a@example.com", "prioritization": least}), ext("b"))]).await;
    assert_eq!(r.status, 202);
    let r = api
        .post(
            "/users/identify",
            json!({"emails_to_identify": [{"external_id": "x", "email": "a@example.com", "prioritization": least}]}),
        )
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

    let r = merge(&api, vec![upd(json!({"email": "shared@example.com", "prioritization": unidentified}), ext("keep"))])
        .await;
    assert_eq!(r.status, 202);
    assert_eq!(custom(&api.user("keep").await), json!({"k": true}));

    let r = api
        .post(
            "/users/delete",
            json!({"email_addresses": [{"email": "shared@example.com", "prioritization": unidentified}]}),
        )
        .await;
    assert_eq!((r.status, r.body), (201, json!({"deleted": 0, "message": "success"})));
    assert_eq!(by_email(&api, "shared@example.com").await.len(), 2);
}
