//! Microsoft Entra ID's provisioning, replayed: the requests its provisioning
//! service sends (Microsoft's "Develop and plan provisioning for a SCIM endpoint"
//! tutorial and its SCIM 2.0 compliance notes, with and without the
//! `aadOptscim062020` flag), in order, each answer checked. Entra maps the
//! department to the enterprise extension; the documented create carries none, so
//! that create is replayed on a token with a default department. Entra's user names
//! are made email addresses (this resource's `userName` is one).

use engage_tests::{unique_email, Scim};
use serde_json::{json, Value};

use super::{assert_error, encode, ENTERPRISE_URN, LIST_URN, USER_URN};

const PATCH_URN: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

fn filter(text: &str) -> String {
    format!("/scim/v2/Users?filter={}", encode(text))
}

fn patch(operations: Value) -> Value {
    json!({"schemas": [PATCH_URN], "Operations": operations})
}

pub(crate) async fn run() {
    let entra = Scim::new().await;
    let name = unique_email("Test_User_00aa00aa-bb11-cc22-dd33-44ee44ee44ee");
    let external = format!("0a21f0f2-8d2a-4f8e-bf98-{}", name.len());

    // 1. Test Connection and the existence checks: empty ListResponses.
    for query in [
        format!("userName eq \"{}\"", unique_email("random-guid")),
        format!("userName eq \"{name}\""),
        format!("externalId eq \"{external}\""),
    ] {
        let r = entra.get(&filter(&query)).await;
        assert_eq!(r.status, 200, "{query}: {}", r.body);
        assert_eq!(
            (&r.body["schemas"], &r.body["totalResults"], &r.body["Resources"]),
            (&json!([LIST_URN]), &json!(0), &json!([]))
        );
    }

    // 2. Create: the documented body, with the department mapped to the enterprise
    // extension as Entra's default mapping sends it (and its manager, not kept).
    let create = json!({
        "schemas": [USER_URN, ENTERPRISE_URN],
        "externalId": external,
        "userName": name,
        "active": true,
        "emails": [{"primary": true, "type": "work", "value": name}],
        "meta": {"resourceType": "User"},
        "name": {"formatted": "givenName familyName", "familyName": "familyName", "givenName": "givenName"},
        "roles": [],
        ENTERPRISE_URN: {"department": "marketing", "employeeNumber": "701984", "manager": {"value": "26118915-6090"}},
    });
    let r = entra.call("POST", "/scim/v2/Users", Some(create)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let u = &r.body;
    assert_eq!(
        (&u["userName"], &u["externalId"], &u["active"], &u["department"]),
        (&json!(name), &json!(external), &json!(true), &json!("marketing"))
    );
    assert_eq!(u["schemas"], json!([USER_URN, ENTERPRISE_URN]));
    assert_eq!(u[ENTERPRISE_URN], json!({"department": "marketing"}));
    assert_eq!(u["name"], json!({"givenName": "givenName", "familyName": "familyName"}));
    let id = u["id"].as_str().expect("id").to_string();
    let path = format!("/scim/v2/Users/{id}");

    // 3. Read it; find it by user name and by external id.
    assert_eq!(entra.get(&path).await.body, *u);
    for query in [format!("userName eq \"{name}\""), format!("externalId eq \"{external}\"")] {
        let r = entra.get(&filter(&query)).await;
        assert_eq!((&r.body["totalResults"], &r.body["Resources"][0]["id"]), (&json!(1), &json!(id)), "{query}");
    }

    // 4. Update a multi-valued attribute (not kept) and a name, in one request.
    let r = entra
        .call(
            "PATCH",
            &path,
            Some(patch(json!([
                {"op": "Replace", "path": "emails[type eq \"work\"].value", "value": "updatedEmail@microsoft.com"},
                {"op": "Replace", "path": "name.familyName", "value": "updatedFamilyName"},
            ]))),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["name"]["familyName"], "updatedFamilyName");

    // 5. A new user name: found under it, not under the old one.
    let renamed = unique_email("5b50642d-79fc-4410-9e90-4c077cdd1a59");
    let r =
        entra.call("PATCH", &path, Some(patch(json!([{"op": "Replace", "path": "userName", "value": renamed}])))).await;
    assert_eq!((r.status, &r.body["userName"]), (200, &json!(renamed)), "{}", r.body);
    assert_eq!(entra.get(&filter(&format!("userName eq \"{renamed}\""))).await.body["totalResults"], 1);
    assert_eq!(entra.get(&filter(&format!("userName eq \"{name}\""))).await.body["totalResults"], 0);

    // 6. The enterprise department by its path, the manager (not kept), then the
    // compliance flag's merged replace of several attributes.
    let department = format!("{ENTERPRISE_URN}:department");
    let r = entra
        .call(
            "PATCH",
            &path,
            Some(patch(json!([
                {"op": "Replace", "path": department, "value": "finance"},
                {"op": "Add", "path": "manager", "value": [{"$ref": null, "value": "00aa00aa-bb11"}]},
                {"op": "Add", "path": format!("{ENTERPRISE_URN}:employeeNumber"), "value": "7"},
            ]))),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!((&r.body["department"], &r.body[ENTERPRISE_URN]["department"]), (&json!("finance"), &json!("finance")));
    let merged = json!([{"op": "replace", "value": {
        "displayName": "Bjfe", "name.givenName": "Kkom", "name.familyName": "Unua",
        format!("{ENTERPRISE_URN}:employeeNumber"): "Aklq",
    }}]);
    let r = entra.call("PATCH", &path, Some(patch(merged))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["name"], json!({"givenName": "Kkom", "familyName": "Unua"}));
    assert_eq!(r.body["displayName"], "Bjfe");
    let version = r.header("etag").expect("etag").to_string();

    // 7. Soft delete without the compliance flag: the string "False". Applied, a
    // new version; the user is still read and found, inactive.
    let r =
        entra.call("PATCH", &path, Some(patch(json!([{"op": "Replace", "path": "active", "value": "False"}])))).await;
    assert_eq!((r.status, &r.body["active"]), (200, &json!(false)), "{}", r.body);
    assert_ne!(r.header("etag"), Some(version.as_str()));
    assert_eq!(entra.get(&path).await.body["active"], json!(false));
    let listed = entra.get(&filter(&format!("externalId eq \"{external}\" and active eq false"))).await;
    assert_eq!(listed.body["Resources"][0]["id"], json!(id));

    // 8. Enabled again ("True"), then disabled with the flag (a boolean).
    let r =
        entra.call("PATCH", &path, Some(patch(json!([{"op": "Replace", "path": "active", "value": "True"}])))).await;
    assert_eq!((r.status, &r.body["active"]), (200, &json!(true)));
    let r = entra.call("PATCH", &path, Some(patch(json!([{"op": "replace", "path": "active", "value": false}])))).await;
    assert_eq!((r.status, &r.body["active"]), (200, &json!(false)));

    // 9. Hard delete, 30 days later.
    let gone = entra.call("DELETE", &path, None).await;
    assert_eq!((gone.status, gone.raw.len()), (204, 0));
    assert_error(&entra.get(&path).await, 404, None);

    // The tutorial's other create, verbatim but for the user name: top-level
    // `department` and `manager` null, `addresses` null. With a token that has a
    // default department, it is created with that department.
    let defaulted = Scim::with_default_department("bi").await;
    let joy = unique_email("jyoung");
    let body = json!({
        "schemas": [USER_URN, ENTERPRISE_URN],
        "userName": joy,
        "externalId": "jyoung",
        "active": true,
        "addresses": null,
        "displayName": "Joy Young",
        "emails": [{"type": "work", "value": joy, "primary": true}],
        "meta": {"resourceType": "User"},
        "name": {"familyName": "Young", "givenName": "Joy"},
        "department": null,
        "manager": null,
    });
    let r = defaulted.call("POST", "/scim/v2/Users", Some(body)).await;
    assert_eq!((r.status, &r.body["department"]), (201, &json!("bi")), "{}", r.body);
    let joy_path = format!("/scim/v2/Users/{}", r.body["id"].as_str().expect("id"));
    assert_eq!(defaulted.call("DELETE", &joy_path, None).await.status, 204);
}
