//! POST /users/external_ids/rename and /users/external_ids/remove.

use super::*;

fn renames(pairs: &[(&str, &str)]) -> Value {
    let items: Vec<Value> =
        pairs.iter().map(|(c, n)| json!({"current_external_id": c, "new_external_id": n})).collect();
    json!({ "external_id_renames": items })
}

/// fidelity-external-ids
#[tokio::test]
async fn a_renamed_user_answers_to_both_ids_until_the_deprecated_one_is_removed() {
    let api = Api::new().await;
    api.track(json!({"attributes": [{"external_id": "old", "plan": "pro"}, {"external_id": "taken"}]})).await;
    let r = api.post("/users/external_ids/rename", renames(&[("old", "new"), ("taken", "new"), ("ghost", "x")])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["external_ids"], json!([{"current_external_id": "old", "new_external_id": "new"}]));
    let errors = r.body["rename_errors"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.iter().map(|e| e[0].clone()).collect::<Vec<_>>(), [json!(1), json!(2)], "{}", r.body);
    // Both ids name the user, in reads and in writes.
    assert_eq!(api.user("new").await["custom_attributes"]["plan"], "pro");
    assert_eq!(api.user("old").await["external_id"], "new");
    api.track(json!({"attributes": [{"external_id": "old", "seen": true}]})).await;
    assert_eq!(api.user("new").await["custom_attributes"]["seen"], true);
    // Only the deprecated id can be removed; then it names nobody.
    let r = api.post("/users/external_ids/remove", json!({"external_ids": ["new", "old"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["removed_ids"], json!(["old"]));
    assert_eq!(r.body["removal_errors"].as_array().map(|e| e[0][0].clone()), Some(json!(0)));
    assert_eq!(api.user("old").await, Value::Null);
    assert_eq!(api.user("new").await["custom_attributes"]["seen"], true);
}

#[tokio::test]
async fn renames_need_their_permission_and_a_body_in_shape() {
    let api = Api::with_permissions(json!(["users.track"])).await;
    let r = api.post("/users/external_ids/rename", renames(&[("a", "b")])).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let api = Api::new().await;
    for body in [json!({}), json!({"external_id_renames": []}), json!({"external_ids": "x"})] {
        assert_eq!(api.post("/users/external_ids/rename", body.clone()).await.status, 400, "{body}");
        assert_eq!(api.post("/users/external_ids/remove", body.clone()).await.status, 400, "{body}");
    }
}
