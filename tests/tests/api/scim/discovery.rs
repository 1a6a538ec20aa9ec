//! Discovery: what the server offers, exactly; no rate limit; SCIM's shape for
//! unknown paths and methods.

use engage_tests::Scim;
use serde_json::{json, Value};

use super::{assert_error, ENTERPRISE_URN, LIST_URN, USER_URN};

fn names(attrs: &Value) -> Vec<String> {
    attrs.as_array().expect("attributes").iter().map(|a| a["name"].as_str().expect("name").to_string()).collect()
}

pub(crate) async fn run() {
    let scim = Scim::new().await;

    let spc = scim.get("/scim/v2/ServiceProviderConfig").await;
    assert_eq!(spc.status, 200);
    assert_eq!(spc.header("content-type"), Some("application/scim+json"));
    assert_eq!(spc.header("x-ratelimit-remaining"), None, "discovery is not counted");
    let b = &spc.body;
    assert_eq!(b["schemas"], json!(["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"]));
    assert_eq!(
        (&b["patch"]["supported"], &b["bulk"]["supported"], &b["sort"]["supported"], &b["changePassword"]["supported"]),
        (&json!(true), &json!(false), &json!(false), &json!(false))
    );
    assert_eq!((&b["filter"]["supported"], &b["filter"]["maxResults"]), (&json!(true), &json!(100)));
    assert_eq!(b["etag"]["supported"], json!(true));
    assert_eq!(b["authenticationSchemes"][0]["type"], "oauthbearertoken");

    let types = scim.get("/scim/v2/ResourceTypes").await;
    assert_eq!(
        (types.status, &types.body["schemas"], &types.body["totalResults"]),
        (200, &json!([LIST_URN]), &json!(1))
    );
    let user_type = &types.body["Resources"][0];
    assert_eq!(
        (&user_type["id"], &user_type["endpoint"], &user_type["schema"]),
        (&json!("User"), &json!("/Users"), &json!(USER_URN))
    );
    assert_eq!(user_type["schemaExtensions"], json!([{"schema": ENTERPRISE_URN, "required": false}]));
    assert_eq!(&scim.get("/scim/v2/ResourceTypes/User").await.body, user_type);
    assert!(assert_error(&scim.get("/scim/v2/ResourceTypes/Group").await, 404, None).contains("Group"));

    let schemas = scim.get("/scim/v2/Schemas").await;
    assert_eq!((schemas.status, &schemas.body["totalResults"]), (200, &json!(2)));
    let schema = &schemas.body["Resources"][0];
    assert_eq!(schema["id"], USER_URN);
    assert_eq!(
        names(&schema["attributes"]),
        ["userName", "name", "displayName", "active", "department", "permissions", "createdAt", "lastSignInAt"]
    );
    let active = &schema["attributes"][3];
    assert_eq!((&active["type"], &active["returned"]), (&json!("boolean"), &json!("always")));
    let permissions = &schema["attributes"][5]["subAttributes"];
    assert_eq!(names(permissions), ["companyPermissions", "roles", "appGroup"]);
    assert_eq!(permissions[0]["canonicalValues"], json!(["admin", "manage_company_settings", "add_remove_app_groups"]));
    let department = &schema["attributes"][4];
    assert_eq!(
        (department["canonicalValues"].as_array().map(Vec::len), &department["required"]),
        (Some(7), &json!(true))
    );
    assert_eq!(&scim.get(&format!("/scim/v2/Schemas/{USER_URN}")).await.body, schema);
    // The enterprise extension: its department, the only attribute of it kept.
    let enterprise = &schemas.body["Resources"][1];
    assert_eq!(
        (&enterprise["id"], names(&enterprise["attributes"])),
        (&json!(ENTERPRISE_URN), vec!["department".to_string()])
    );
    assert_eq!(&scim.get(&format!("/scim/v2/Schemas/{ENTERPRISE_URN}")).await.body, enterprise);
    assert_error(&scim.get("/scim/v2/Schemas/urn:nope").await, 404, None);
    // With a token that supplies a default department, a create need not name one.
    let defaulted = Scim::with_default_department("pm").await;
    let theirs = defaulted.get(&format!("/scim/v2/Schemas/{USER_URN}")).await.body;
    assert_eq!(theirs["attributes"][4]["required"], json!(false));

    // /Me and /Bulk are SCIM's, not offered here: 501, not 404 (RFC 7644 §3.11, §3.7).
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        let body = (method != "GET" && method != "DELETE").then(|| json!({"schemas": [USER_URN]}));
        assert!(assert_error(&scim.call(method, "/scim/v2/Me", body).await, 501, None).contains("/Me"), "{method}");
    }
    let bulk = json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:BulkRequest"], "Operations": []});
    assert!(assert_error(&scim.call("POST", "/scim/v2/Bulk", Some(bulk)).await, 501, None).contains("bulk"));
    assert_error(&scim.get("/scim/v2/Bulk").await, 405, None);

    // Paths and methods the server lacks answer in SCIM's shape too.
    let post = scim.call("POST", "/scim/v2/Schemas", None).await;
    assert_error(&post, 405, None);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
    assert_error(&scim.get("/scim/v2/Groups").await, 404, None);
    assert_error(&scim.get("/scim/v2").await, 404, None);
}
