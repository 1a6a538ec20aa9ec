//! Preference centers: the API (create, update, list, get, user links), the hosted
//! page and its form.

mod create;
mod page;
mod reads;
mod update;
mod url;

use engage_tests::Api;
use serde_json::{json, Value};

/// A minimal valid body.
pub fn body(name: &str) -> Value {
    json!({
        "name": name,
        "preference_center_page_html": "<p>{{${email_address}}}</p>",
        "confirmation_page_html": "<p>Saved</p>",
    })
}

/// Creates a center; returns its id.
pub async fn create(api: &Api, body: Value) -> String {
    let r = api.post("/preference_center/v1", body).await;
    assert_eq!(r.status, 201, "create failed: {}", r.body);
    r.body["preference_center_api_id"].as_str().expect("id").to_string()
}

/// A user's link path.
pub async fn link(api: &Api, center: &str, user: &str) -> String {
    let r = api.get(&format!("/preference_center/v1/{center}/url/{user}")).await;
    assert_eq!(r.status, 200, "url failed: {}", r.body);
    engage_tests::link_path(r.body["preference_center_url"].as_str().expect("url"))
}
