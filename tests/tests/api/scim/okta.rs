//! Okta's provisioning, replayed: the requests its SCIM 2.0 integration sends
//! (Okta's "SCIM 2.0" reference and its SCIM 2.0 Spec and CRUD test cases), in
//! order, each answer checked. Okta's default profile maps no department, so the
//! token is made with a default one; Okta never deletes (it deactivates), so the
//! closing DELETE is ours, to leave nothing behind. Bodies are Okta's documented
//! ones; only user names and ids are made unique.

use engage_tests::{unique_email, Scim};
use serde_json::{json, Value};

use super::{assert_error, encode, ERROR_URN, LIST_URN, USER_URN};

const PATCH_URN: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

/// Okta's existence check: the user name, then a page of 100.
fn lookup(name: &str) -> String {
    format!("/scim/v2/Users?filter={}&startIndex=1&count=100", encode(&format!("userName eq \"{name}\"")))
}

/// What Okta checks of every user it reads.
fn assert_okta_user(u: &Value, user_name: &str, active: bool) {
    assert!(u["id"].as_str().is_some_and(|id| !id.is_empty()), "{u}");
    assert!(u["schemas"].as_array().is_some_and(|s| s.contains(&json!(USER_URN))), "{u}");
    assert_eq!((&u["userName"], &u["active"]), (&json!(user_name), &json!(active)), "{u}");
    assert!(u["name"]["givenName"].is_string() && u["name"]["familyName"].is_string(), "{u}");
    assert_eq!(u["meta"]["resourceType"], "User");
}

pub(crate) async fn run() {
    let okta = Scim::with_default_department("engineering").await;
    let name = unique_email("test.user");

    // 1. Does the user exist? A ListResponse with nothing, paging fields as integers.
    let r = okta.get(&lookup(&name)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"schemas": [LIST_URN], "totalResults": 0, "itemsPerPage": 0, "startIndex": 1, "Resources": []})
    );

    // 2. Create, with everything Okta sends (emails, locale, groups, password:
    // accepted, not kept) and no department.
    let create = json!({
        "schemas": [USER_URN],
        "userName": name,
        "name": {"givenName": "Test", "familyName": "User"},
        "emails": [{"primary": true, "value": name, "type": "work"}],
        "displayName": "Test User",
        "locale": "en-US",
        "externalId": "00ujl29u0le5T6Aj10h7",
        "groups": [],
        "password": "1mz050nq",
        "active": true,
    });
    let r = okta.call("POST", "/scim/v2/Users", Some(create.clone())).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_okta_user(&r.body, &name, true);
    assert_eq!(
        (&r.body["name"], &r.body["externalId"], &r.body["department"]),
        (&json!({"givenName": "Test", "familyName": "User"}), &json!("00ujl29u0le5T6Aj10h7"), &json!("engineering"))
    );
    assert_eq!(r.body["displayName"], "Test User");
    assert!(r.body.get("password").is_none() && r.body.get("emails").is_none(), "a password is never returned");
    let id = r.body["id"].as_str().expect("id").to_string();
    let path = format!("/scim/v2/Users/{id}");

    // 3. The same create again: 409 with the platform's message.
    let again = okta.call("POST", "/scim/v2/Users", Some(create)).await;
    assert_eq!(assert_error(&again, 409, Some("uniqueness")), "User already exists in the database.");

    // 4. Read it, and find it.
    let read = okta.get(&path).await;
    assert_eq!(read.status, 200);
    assert_okta_user(&read.body, &name, true);
    let found = okta.get(&lookup(&name)).await;
    assert_eq!((&found.body["totalResults"], &found.body["Resources"][0]["id"]), (&json!(1), &json!(id)));

    // 5. Update: Okta reads, then PUTs the whole user back as it knows it (no
    // department, no externalId: both stay; id and meta are read-only).
    let put = json!({
        "schemas": [USER_URN],
        "id": id,
        "userName": name,
        "name": {"givenName": "Another", "middleName": "Excited", "familyName": "User"},
        "emails": [{"primary": true, "value": name, "type": "work", "display": name}],
        "active": true,
        "groups": [],
        "meta": {"resourceType": "User"},
    });
    let r = okta.call("PUT", &path, Some(put.clone())).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_okta_user(&r.body, &name, true);
    assert_eq!(r.body["name"], json!({"givenName": "Another", "familyName": "User"}));
    assert_eq!(
        (&r.body["department"], &r.body["externalId"], &r.body["displayName"]),
        (&json!("engineering"), &json!("00ujl29u0le5T6Aj10h7"), &json!("Test User"))
    );
    assert_eq!(r.header("etag"), Some("W/\"2\""));
    // Okta sends the same PUT again on a later sync: nothing changes, no new version.
    let same = okta.call("PUT", &path, Some(put.clone())).await;
    assert_eq!((same.status, same.header("etag")), (200, Some("W/\"2\"")));

    // 6. Deactivate (unassign, suspend, deactivate all send this), then read: the
    // user is kept, listed and found, inactive.
    let off = json!({"schemas": [PATCH_URN], "Operations": [{"op": "replace", "value": {"active": false}}]});
    let r = okta.call("PATCH", &path, Some(off)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_okta_user(&r.body, &name, false);
    assert_okta_user(&okta.get(&path).await.body, &name, false);
    let found = okta.get(&lookup(&name)).await;
    assert_eq!(found.body["Resources"][0]["active"], json!(false));

    // 7. Reactivate.
    let on = json!({"schemas": [PATCH_URN], "Operations": [{"op": "replace", "value": {"active": true}}]});
    let r = okta.call("PATCH", &path, Some(on)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_okta_user(&okta.get(&path).await.body, &name, true);

    // 8. Apps made with Okta's integration wizard deactivate with a PUT.
    let mut put_off = put;
    put_off["active"] = json!(false);
    let r = okta.call("PUT", &path, Some(put_off)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_okta_user(&okta.get(&path).await.body, &name, false);

    // 9. Okta's Spec test: an unknown id is a 404 in SCIM's error shape.
    let missing = okta.get("/scim/v2/Users/010101001010101011001010101011").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body["schemas"], json!([ERROR_URN]));
    assert!(missing.body["detail"].as_str().is_some_and(|d| !d.is_empty()));

    // 10. Okta's Spec test and import: a page of one, then paging on to the end.
    let r = okta.get("/scim/v2/Users?count=1&startIndex=1").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        (&r.body["schemas"], &r.body["itemsPerPage"], &r.body["startIndex"]),
        (&json!([LIST_URN]), &json!(1), &json!(1))
    );
    let total = r.body["totalResults"].as_u64().expect("an integer");
    let first = &r.body["Resources"][0];
    assert!(first["id"].is_string() && first["userName"].is_string() && first["active"].is_boolean(), "{first}");
    let last = okta.get(&format!("/scim/v2/Users?startIndex={total}&count=100")).await;
    assert_eq!(last.body["Resources"].as_array().map(Vec::len), Some(1));

    // Ours: leave nothing behind.
    assert_eq!(okta.call("DELETE", &path, None).await.status, 204);
    assert_error(&okta.get(&path).await, 404, None);

    // The same create on a token without a default department names what is missing.
    let plain = Scim::new().await;
    let body = json!({"schemas": [USER_URN], "userName": unique_email("no.department"),
                      "name": {"givenName": "Test", "familyName": "User"}, "active": true});
    let detail = assert_error(&plain.call("POST", "/scim/v2/Users", Some(body)).await, 400, Some("invalidValue"));
    assert!(detail.contains("'department' is required") && detail.contains("default department"), "{detail}");
}
