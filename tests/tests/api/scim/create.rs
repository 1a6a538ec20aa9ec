//! POST /scim/v2/Users: the whole resource back, every bad input a 400 with its
//! `scimType` and nothing stored, a taken `userName` a 409.

use engage_tests::{unique_email, Scim};
use serde_json::{json, Value};

use super::{assert_error, by_name, user, ENTERPRISE_URN, USER_URN};

fn full_permissions() -> Value {
    json!({
        "companyPermissions": ["manage_company_settings"],
        "roles": [
            {"roleName": "Editor"},
            {"roleId": "r-2", "roleName": "Viewer", "appGroup": [
                {"appGroupName": "Prod", "appGroupPermissionSets": [
                    {"appGroupPermissionSetName": "Readers", "permissions": ["basic_access"]}
                ]}
            ]}
        ],
        "appGroup": [
            {"appGroupName": "Test Workspace", "appGroupPermissions": ["basic_access", "send_campaigns_canvases"],
             "team": [{"teamName": "Test Team", "teamPermissions": ["basic_access", "export_user_data"]}]},
            {"appGroupId": "ws-2", "appGroupPermissionSets": [{"appGroupPermissionSetID": "ps-1"}]}
        ]
    })
}

/// The long date-time text the platform writes: `Monday, November 23, 2026 3:16:44 PM`.
fn is_long_text(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    let parts: Vec<&str> = s.split(' ').collect();
    parts.len() == 6
        && parts[0].ends_with(',')
        && parts[2].ends_with(',')
        && parts[4].split(':').count() == 3
        && (parts[5] == "AM" || parts[5] == "PM")
}

pub(crate) async fn run() {
    let scim = Scim::new().await;
    let email = unique_email("Create");
    let mut body = user(&email);
    body["permissions"] = full_permissions();
    body["externalId"] = json!("okta-123");
    let r = scim.call("POST", "/scim/v2/Users", Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/scim+json"));
    let u = &r.body;
    let id = u["id"].as_str().expect("id");
    assert_eq!(r.header("location"), u["meta"]["location"].as_str());
    assert!(u["meta"]["location"].as_str().unwrap().ends_with(&format!("/scim/v2/Users/{id}")));
    assert_eq!(r.header("etag"), Some("W/\"1\""));
    assert_eq!(
        (&u["schemas"], &u["userName"], &u["externalId"], &u["department"], &u["active"]),
        (&json!([USER_URN, ENTERPRISE_URN]), &json!(email), &json!("okta-123"), &json!("engineering"), &json!(true))
    );
    assert_eq!(u[ENTERPRISE_URN], json!({"department": "engineering"}));
    assert_eq!(u["name"], json!({"givenName": "Ada", "familyName": "Lovelace"}));
    // The permissions come back as sent, the set's id under the spec's spelling and
    // every list the spec names present.
    let mut expected = full_permissions();
    expected["appGroup"][1]["appGroupPermissionSets"] = json!([{"appGroupPermissionSetId": "ps-1", "permissions": []}]);
    expected["appGroup"][1]["appGroupPermissions"] = json!([]);
    assert_eq!(u["permissions"], expected);
    assert!(is_long_text(&u["createdAt"]), "{}", u["createdAt"]);
    assert!(u.get("lastSignInAt").is_none(), "never signed in: no lastSignInAt");
    assert_eq!(u["meta"]["resourceType"], "User");
    assert_eq!(u["meta"]["created"], u["meta"]["lastModified"]);
    assert_eq!(u["meta"]["version"], "W/\"1\"");

    // Plain JSON is accepted; read-only attributes in a body are ignored; standard
    // SCIM attributes Engage does not keep are accepted and not returned.
    let mut plain = user(&unique_email("plain"));
    plain["id"] = json!("my-own-id");
    plain["createdAt"] = json!("Thursday, January 1, 1970 12:00:00 AM");
    plain["active"] = json!(false);
    plain["displayName"] = json!("Plain User");
    plain["roles"] = json!([{"value": "Admin", "primary": true}]);
    plain["emails"] = json!([{"value": "x@example.com", "primary": true}]);
    let auth = format!("Bearer {}", scim.token);
    let headers = [
        ("Authorization", auth.as_str()),
        ("X-Request-Origin", scim.origin.as_str()),
        ("Content-Type", "application/json"),
    ];
    let r2 = engage_tests::send("POST", "/scim/v2/Users", &headers, Some(plain.to_string().into_bytes())).await;
    assert_eq!(r2.status, 201, "{}", r2.body);
    assert_ne!(r2.body["id"], "my-own-id");
    assert_ne!(r2.body["createdAt"], "Thursday, January 1, 1970 12:00:00 AM");
    assert_eq!(r2.body["active"], false, "a user may be created inactive");
    assert_eq!(r2.body["displayName"], "Plain User", "displayName is kept");
    assert!(r2.body.get("emails").is_none() && r2.body.get("roles").is_none());
    assert!(r2.body.get("permissions").is_none(), "no permissions: no attribute");
    let text =
        [("Authorization", auth.as_str()), ("X-Request-Origin", scim.origin.as_str()), ("Content-Type", "text/plain")];
    let r3 =
        engage_tests::send("POST", "/scim/v2/Users", &text, Some(user(&unique_email("t")).to_string().into_bytes()))
            .await;
    assert_error(&r3, 415, None);

    // userName is unique regardless of case; nothing of the refused user is kept.
    let mut taken = user(&email.to_uppercase());
    taken["department"] = json!("finance");
    let conflict = scim.call("POST", "/scim/v2/Users", Some(taken)).await;
    assert_error(&conflict, 409, Some("uniqueness"));
    let found = scim.get(&by_name(&email)).await;
    assert_eq!(
        (found.body["totalResults"].clone(), found.body["Resources"][0]["department"].clone()),
        (json!(1), json!("engineering"))
    );

    invalid_bodies(&scim).await;
}

/// Each refused body: its status, `scimType` and a word of its detail.
async fn invalid_bodies(scim: &Scim) {
    let email = unique_email("invalid");
    let with = |key: &str, value: Value| {
        let mut b = user(&email);
        b[key] = value;
        b
    };
    let without = |key: &str| {
        let mut b = user(&email);
        b.as_object_mut().unwrap().remove(key);
        b
    };
    let perms = |p: Value| with("permissions", p);
    let many: Vec<Value> = (0..101).map(|i| json!({"roleId": format!("r{i}")})).collect();
    let cases: Vec<(Value, &str, &str)> = vec![
        (without("schemas"), "invalidValue", "'schemas' is required"),
        (with("schemas", json!(["urn:other"])), "invalidValue", "urn:other"),
        (with("schemas", json!("x")), "invalidValue", "array"),
        (without("userName"), "invalidValue", "'userName' is required"),
        (with("userName", json!("not-an-email")), "invalidValue", "email"),
        (with("userName", json!(5)), "invalidValue", "string"),
        (with("userName", json!("")), "invalidValue", "empty"),
        (with("userName", json!(format!("{}@example.com", "a".repeat(300)))), "invalidValue", "longer than 255"),
        (without("name"), "invalidValue", "'name' is required"),
        (with("name", json!({"givenName": "A"})), "invalidValue", "name.familyName"),
        (with("name", json!({"givenName": "A", "familyName": "B", "nick": "C"})), "invalidSyntax", "nick"),
        (with("name", json!("Ada")), "invalidValue", "object"),
        (without("department"), "invalidValue", "'department' is required"),
        (with("department", Value::Null), "invalidValue", "'department' is required"),
        (with(ENTERPRISE_URN, json!({"department": "hr"})), "invalidValue", "enterprise"),
        (with(ENTERPRISE_URN, json!({"department": "bi"})), "invalidValue", "differ"),
        (with(ENTERPRISE_URN, json!({"shoeSize": 9})), "invalidSyntax", "shoeSize"),
        (with(ENTERPRISE_URN, json!("bi")), "invalidValue", "object"),
        (with("department", json!("sales")), "invalidValue", "agency, bi, c_suite"),
        (with("favouriteColour", json!("blue")), "invalidSyntax", "favouriteColour"),
        // An `active` that is neither true nor false is refused, never read as either.
        (with("active", json!("banana")), "invalidValue", "'active' must be true or false"),
        (with("active", json!(0)), "invalidValue", "'active' must be true or false"),
        (with("active", json!("no")), "invalidValue", "'active' must be true or false"),
        (perms(json!([])), "invalidValue", "'permissions' must be an object"),
        (perms(json!({"companyPermissions": ["root"]})), "invalidValue", "permissions.companyPermissions[0]"),
        (perms(json!({"companyPermissions": "admin"})), "invalidValue", "array"),
        (perms(json!({"roles": [{}]})), "invalidValue", "'roleId' or 'roleName'"),
        (perms(json!({"roles": [{"roleName": 3}]})), "invalidValue", "permissions.roles[0].roleName"),
        (perms(json!({"roles": many})), "invalidValue", "more than 100"),
        (
            perms(json!({"appGroup": [{"appGroupPermissions": ["basic_access"]}]})),
            "invalidValue",
            "'appGroupId' or 'appGroupName'",
        ),
        (
            perms(json!({"appGroup": [{"appGroupName": "W", "appGroupPermissions": ["fly"]}]})),
            "invalidValue",
            "appGroupPermissions[0]",
        ),
        // view_pii is a workspace permission, not a team one.
        (
            perms(
                json!({"appGroup": [{"appGroupName": "W", "team": [{"teamName": "T", "teamPermissions": ["view_pii"]}]}]}),
            ),
            "invalidValue",
            "teamPermissions[0]",
        ),
        (
            perms(json!({"appGroup": [{"appGroupName": "W", "team": [{"teamPermissions": []}]}]})),
            "invalidValue",
            "'teamId' or 'teamName'",
        ),
        (
            perms(
                json!({"appGroup": [{"appGroupName": "W", "appGroupPermissionSets": [{"appGroupPermissionSetName": "a"}, {"appGroupPermissionSetName": "b"}]}]}),
            ),
            "invalidValue",
            "at most 1",
        ),
        (
            perms(
                json!({"appGroup": [{"appGroupName": "W", "appGroupPermissionSets": [{"appGroupPermissionSetName": "a", "permissions": ["nope"]}]}]}),
            ),
            "invalidValue",
            "permissions[0]",
        ),
        (perms(json!({"teams": []})), "invalidSyntax", "teams"),
    ];
    for (body, scim_type, needle) in cases {
        let r = scim.call("POST", "/scim/v2/Users", Some(body.clone())).await;
        let detail = assert_error(&r, 400, Some(scim_type));
        assert!(detail.contains(needle), "{body}: '{detail}' lacks '{needle}'");
    }
    for raw in [&b"{"[..], b"[]", b"\"text\"", b""] {
        let auth = format!("Bearer {}", scim.token);
        let headers = [("Authorization", auth.as_str()), ("X-Request-Origin", scim.origin.as_str())];
        let r = engage_tests::send("POST", "/scim/v2/Users", &headers, Some(raw.to_vec())).await;
        assert_error(&r, 400, Some("invalidSyntax"));
    }
    assert_eq!(scim.get(&by_name(&email)).await.body["totalResults"], 0, "no refused body was stored");
}
