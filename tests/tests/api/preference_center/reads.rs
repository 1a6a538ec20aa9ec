//! GET /preference_center/v1/list and GET /preference_center/v1/{id}.

use engage_tests::Api;
use serde_json::json;

use super::{body, create};

#[tokio::test]
async fn the_list_has_every_center_of_the_workspace_oldest_first() {
    let api = Api::new().await;
    assert_eq!(api.get("/preference_center/v1/list").await.body, json!({"preference_centers": []}));
    let a = create(&api, body("first")).await;
    engage_tests::tick().await;
    let b = create(&api, body("second")).await;
    create(&Api::new().await, body("elsewhere")).await;
    let r = api.get("/preference_center/v1/list").await;
    assert_eq!(r.status, 200);
    let list = r.body["preference_centers"].as_array().expect("array").clone();
    let ids: Vec<&str> = list.iter().map(|c| c["preference_center_api_id"].as_str().unwrap()).collect();
    assert_eq!(ids, [a.as_str(), b.as_str()]);
    let mut keys: Vec<&String> = list[0].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["created_at", "name", "preference_center_api_id", "updated_at"]);
    assert_eq!(list[1]["name"], "second");
}

#[tokio::test]
async fn an_unknown_or_foreign_center_is_a_404_and_reads_need_their_permissions() {
    let api = Api::new().await;
    let id = create(&api, body("c")).await;
    let r = api.get("/preference_center/v1/no-such-id").await;
    assert_eq!((r.status, r.body["message"].as_str()), (404, Some("Preference center not found")));
    let other = Api::new().await;
    assert_eq!(other.get(&format!("/preference_center/v1/{id}")).await.status, 404);

    let lister = Api::in_workspace(&api.workspace, json!(["preference_center.list"])).await;
    assert_eq!(lister.get("/preference_center/v1/list").await.status, 200);
    let r = lister.get(&format!("/preference_center/v1/{id}")).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["message"], "Access Denied: this API key lacks the 'preference_center.get' permission");
    let getter = Api::in_workspace(&api.workspace, json!(["preference_center.get"])).await;
    assert_eq!(getter.get(&format!("/preference_center/v1/{id}")).await.status, 200);
    assert_eq!(getter.get("/preference_center/v1/list").await.status, 403);
}
