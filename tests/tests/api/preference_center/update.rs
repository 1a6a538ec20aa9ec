//! PUT /preference_center/v1/{id}.

use engage_tests::{tick, Api};
use serde_json::json;

use super::{body, create};

#[tokio::test]
async fn update_replaces_the_templates_and_keeps_what_it_leaves_out() {
    let api = Api::new().await;
    let mut b = body("c");
    b["preference_center_title"] = json!("Kept");
    b["options"] = json!({"meta-viewport-content": "width=device-width"});
    let id = create(&api, b).await;
    let before = api.get(&format!("/preference_center/v1/{id}")).await.body;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    tick().await;
    let r = api
        .put(
            &format!("/preference_center/v1/{id}"),
            json!({"name": "c", "preference_center_page_html": "<p>new</p>", "confirmation_page_html": "<p>done</p>", "state": "draft"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["message"], "success");
    assert_eq!(r.body["preference_center_api_id"], id.as_str());
    assert_eq!(r.body["created_at"], before["created_at"]);
    assert!(r.body["updated_at"].as_str() > before["updated_at"].as_str(), "{} vs {}", r.body, before);

    let after = api.get(&format!("/preference_center/v1/{id}")).await.body;
    assert_eq!(after["preference_center_page_html"], "<p>new</p>");
    assert_eq!(after["confirmation_page_html"], "<p>done</p>");
    assert_eq!(after["state"], "draft");
    assert_eq!(after["preference_center_title"], "Kept");
    assert_eq!(after["preference_center_options"], before["preference_center_options"]);
    assert_eq!(after["updated_at"], r.body["updated_at"]);
}

#[tokio::test]
async fn a_different_name_a_bad_template_or_an_unknown_center_changes_nothing() {
    let api = Api::new().await;
    let id = create(&api, body("c")).await;
    let path = format!("/preference_center/v1/{id}");
    let before = api.get(&path).await.body;

    let renamed = api
        .put(&path, json!({"name": "other", "preference_center_page_html": "x", "confirmation_page_html": "y"}))
        .await;
    assert_eq!(renamed.status, 400);
    assert_eq!(renamed.body["message"], "'name' cannot be changed (this preference center is named 'c')");

    let broken =
        api.put(&path, json!({"preference_center_page_html": "{% if %}", "confirmation_page_html": "y"})).await;
    assert_eq!(broken.status, 400);
    assert_eq!(broken.body["errors"][0]["field"], "preference_center_page_html");

    let missing = api.put(&path, json!({"preference_center_page_html": "x"})).await;
    assert_eq!(missing.status, 400);
    assert_eq!(missing.body["message"], "'confirmation_page_html' is required");

    let bad_state =
        api.put(&path, json!({"preference_center_page_html": "x", "confirmation_page_html": "y", "state": "on"})).await;
    assert_eq!(bad_state.status, 400);

    assert_eq!(api.get(&path).await.body, before);

    let unknown = api
        .put("/preference_center/v1/nope", json!({"preference_center_page_html": "x", "confirmation_page_html": "y"}))
        .await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.body["message"], "Preference center not found");

    let other = Api::new().await;
    let foreign = other.put(&path, json!({"preference_center_page_html": "x", "confirmation_page_html": "y"})).await;
    assert_eq!(foreign.status, 404, "another workspace's center is not there");
    assert_eq!(api.get(&path).await.body, before);
}
