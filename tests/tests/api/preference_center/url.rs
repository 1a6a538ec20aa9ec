//! GET /preference_center/v1/{id}/url/{external_id}.

use engage_tests::{link_path, Api};
use serde_json::json;

use super::{body, create};

#[tokio::test]
async fn each_user_gets_a_link_of_their_own_on_this_server() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1"}, {"external_id": "u2"}]})).await;
    let id = create(&api, body("c")).await;
    let r = api.get(&format!("/preference_center/v1/{id}/url/u1")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body.as_object().map(|o| o.len()), Some(1), "{}", r.body);
    let url = r.body["preference_center_url"].as_str().expect("url");
    assert!(link_path(url).starts_with("/preferences/"), "{url}: on a server under test");
    assert_eq!(r.header("x-ratelimit-limit"), Some("1000"));
    let other = api.get(&format!("/preference_center/v1/{id}/url/u2")).await;
    assert_ne!(other.body["preference_center_url"], r.body["preference_center_url"]);
}

#[tokio::test]
async fn unknown_centers_users_and_bad_lifetimes_are_refused() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "u1"}]})).await;
    let id = create(&api, body("c")).await;
    let r = api.get("/preference_center/v1/nope/url/u1").await;
    assert_eq!((r.status, r.body["message"].as_str()), (404, Some("Preference center not found")));
    let r = api.get(&format!("/preference_center/v1/{id}/url/ghost")).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["message"], "User not found: no user has the external_id 'ghost'");
    for bad in ["0", "-1", "x", "99999999999"] {
        let r = api.get(&format!("/preference_center/v1/{id}/url/u1?expires_in={bad}")).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    assert_eq!(api.get(&format!("/preference_center/v1/{id}/url/u1?expires_in=60")).await.status, 200);

    let other = Api::new().await;
    other.track(json!({"attributes": [{"external_id": "u1"}]})).await;
    assert_eq!(
        other.get(&format!("/preference_center/v1/{id}/url/u1")).await.status,
        404,
        "a center of another workspace"
    );

    let no_perm = Api::in_workspace(&api.workspace, json!(["preference_center.get"])).await;
    let r = no_perm.get(&format!("/preference_center/v1/{id}/url/u1")).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["message"], "Access Denied: this API key lacks the 'preference_center.user.get' permission");
}
