//! SCIM (`/scim/v2`). Dashboard users belong to the deployment, and the company's
//! 5,000 requests a day are shared by every SCIM client of the host under test, so
//! the family runs as one sequence: each file's steps in turn, and last the rate
//! limit, which uses up the rest of the day.

mod auth;
mod create;
mod delete;
mod discovery;
mod entra;
mod limit;
mod okta;
mod patch;
mod read;
mod replace;
mod shapes;

use engage_tests::Reply;
use serde_json::{json, Value};

pub(crate) const USER_URN: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
pub(crate) const ENTERPRISE_URN: &str = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
pub(crate) const ERROR_URN: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
pub(crate) const LIST_URN: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";

/// A valid body for a new dashboard user.
pub(crate) fn user(email: &str) -> Value {
    json!({
        "schemas": [USER_URN],
        "userName": email,
        "name": {"givenName": "Ada", "familyName": "Lovelace"},
        "department": "engineering",
    })
}

/// Asserts a SCIM error: status, `scimType` (or none), the error URN, `status` as
/// a number and SCIM's media type; returns the detail.
pub(crate) fn assert_error(r: &Reply, status: u16, scim_type: Option<&str>) -> String {
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(r.body["schemas"], json!([ERROR_URN]), "{}", r.body);
    assert_eq!(r.body["status"], json!(status), "{}", r.body);
    assert_eq!(r.body["scimType"].as_str(), scim_type, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/scim+json"));
    r.body["detail"].as_str().expect("detail").to_string()
}

/// `filter=userName eq "<name>"`, URL-encoded.
pub(crate) fn by_name(name: &str) -> String {
    let filter = format!("userName eq {}", json!(name));
    format!("/scim/v2/Users?filter={}", encode(&filter))
}

/// Percent-encodes a query value.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn scim_in_order() {
    auth::run().await;
    discovery::run().await;
    create::run().await;
    read::run().await;
    replace::run().await;
    patch::run().await;
    okta::run().await;
    entra::run().await;
    delete::run().await;
    shapes::run().await;
    limit::run().await;
}
