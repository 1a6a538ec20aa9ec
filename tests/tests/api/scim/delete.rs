//! DELETE /scim/v2/Users/{id}: 204, then 404 with the error URN; the name is free
//! again.

use super::{assert_error, by_name, user};
use engage_tests::{unique_email, Scim};

pub(crate) async fn run() {
    let scim = Scim::new().await;
    let email = unique_email("delete");
    let id = scim.create(user(&email)).await["id"].as_str().expect("id").to_string();
    let path = format!("/scim/v2/Users/{id}");

    let gone = scim.call("DELETE", &path, None).await;
    assert_eq!((gone.status, gone.raw.len()), (204, 0));
    assert_eq!(assert_error(&scim.get(&path).await, 404, None), "User not found");
    assert_error(&scim.call("DELETE", &path, None).await, 404, None);
    assert_eq!(scim.get(&by_name(&email)).await.body["totalResults"], 0);
    let listed = scim.get("/scim/v2/Users").await;
    assert!(!listed.body["Resources"].as_array().expect("Resources").iter().any(|u| u["id"] == id.as_str()));
    // The name can be used again, by a new user with a new id.
    let again = scim.create(user(&email)).await;
    assert_ne!(again["id"], id.as_str());
}
