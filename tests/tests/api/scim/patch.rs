//! PATCH /scim/v2/Users/{id}: add, replace and remove by path or with a partial
//! resource; the result checked as a PUT body is; all operations or none.

use engage_tests::{unique_email, Scim};
use serde_json::{json, Value};

use super::{assert_error, by_name, user};

fn ops(operations: Value) -> Value {
    json!({"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": operations})
}

pub(crate) async fn run() {
    let scim = Scim::new().await;
    let email = unique_email("patch");
    let mut first = user(&email);
    first["permissions"] = json!({"companyPermissions": ["admin"], "appGroup": [{"appGroupName": "W", "appGroupPermissions": ["basic_access"]}]});
    let id = scim.create(first).await["id"].as_str().expect("id").to_string();
    let path = format!("/scim/v2/Users/{id}");

    let r = scim
        .call("PATCH", &path, Some(ops(json!([
            {"op": "add", "path": "permissions.companyPermissions", "value": ["manage_company_settings"]},
            {"op": "Replace", "path": "name.givenName", "value": "Augusta"},
            {"op": "add", "path": "externalId", "value": "okta-9"},
            {"op": "replace", "path": "department", "value": "bi"},
            {"op": "add", "path": "permissions.appGroup", "value": [{"appGroupId": "ws-2", "appGroupPermissions": ["view_pii"]}]},
        ]))))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("etag"), Some("W/\"2\""));
    let u = &r.body;
    assert_eq!(u["permissions"]["companyPermissions"], json!(["admin", "manage_company_settings"]));
    assert_eq!(u["permissions"]["appGroup"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        (&u["name"], &u["externalId"], &u["department"]),
        (&json!({"givenName": "Augusta", "familyName": "Lovelace"}), &json!("okta-9"), &json!("bi"))
    );
    assert_eq!(&scim.get(&path).await.body, u, "a later read sees the patch");

    // Without a path, the value is a partial resource: objects merge, lists are replaced.
    let r = scim
        .call("PATCH", &path, Some(ops(json!([{"op": "replace", "value": {"name": {"familyName": "King"}, "permissions": {"companyPermissions": []}}}]))))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["name"], json!({"givenName": "Augusta", "familyName": "King"}));
    assert_eq!(r.body["permissions"]["companyPermissions"], json!([]));
    assert_eq!(r.body["permissions"]["appGroup"].as_array().map(Vec::len), Some(2));

    let r = scim
        .call(
            "PATCH",
            &path,
            Some(ops(json!([{"op": "remove", "path": "permissions"}, {"op": "remove", "path": "externalId"}]))),
        )
        .await;
    assert!(r.body.get("permissions").is_none(), "no permissions: no attribute");
    assert!(r.body.get("externalId").is_none());

    // A new userName moves the user's name; a taken one is 409.
    let renamed = unique_email("patched");
    let r =
        scim.call("PATCH", &path, Some(ops(json!([{"op": "replace", "path": "userName", "value": renamed}])))).await;
    assert_eq!((r.status, &r.body["userName"]), (200, &json!(renamed)));
    assert_eq!(scim.get(&by_name(&email)).await.body["totalResults"], 0);
    scim.create(user(&email)).await;
    let before = scim.get(&path).await.body;
    let taken = ops(
        json!([{"op": "replace", "path": "department", "value": "pm"}, {"op": "replace", "path": "userName", "value": email.to_uppercase()}]),
    );
    assert_error(&scim.call("PATCH", &path, Some(taken)).await, 409, Some("uniqueness"));
    // What identity providers send about attributes Engage does not keep changes
    // nothing else (Entra's value-filter paths, the enterprise extension, dotted keys).
    let entra = ops(json!([
        {"op": "Replace", "path": "emails[type eq \"work\"].value", "value": "x@example.com"},
        {"op": "Add", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber", "value": "7"},
        {"op": "Replace", "value": {"name.givenName": "Ada", "displayName": "Ada K", "active": true}},
        {"op": "Add", "path": "permissions.companyPermissions", "value": ["admin"]},
        {"op": "Add", "path": "permissions.companyPermissions", "value": ["admin"]},
    ]));
    let r = scim.call("PATCH", &path, Some(entra)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body["active"] == json!(true) && r.body.get("emails").is_none());
    assert_eq!(r.body["name"]["givenName"], "Ada");
    // A PATCH that changes nothing is no new version.
    let version = r.header("etag").expect("etag").to_string();
    let same = ops(
        json!([{"op": "replace", "path": "name.givenName", "value": "Ada"}, {"op": "add", "path": "active", "value": "TRUE"}]),
    );
    let r = scim.call("PATCH", &path, Some(same)).await;
    assert_eq!((r.status, r.header("etag")), (200, Some(version.as_str())), "{}", r.body);
    assert_eq!(r.body["permissions"]["companyPermissions"], json!(["admin"]), "add does not repeat a value");
    let before = json!({"department": before["department"], "userName": before["userName"]});

    // All or nothing: an operation that leaves the user invalid refuses the whole request.
    let refused: Vec<(Value, u16, &str, &str)> = vec![
        (ops(json!([{"op": "replace", "path": "active", "value": "banana"}])), 400, "invalidValue", "true or false"),
        (ops(json!([{"op": "replace", "path": "active", "value": 0}])), 400, "invalidValue", "true or false"),
        (ops(json!([{"op": "replace", "value": {"active": "no"}}])), 400, "invalidValue", "true or false"),
        (ops(json!([{"op": "remove", "path": "department"}])), 400, "invalidValue", "department"),
        (ops(json!([{"op": "replace", "path": "id", "value": "mine"}])), 400, "mutability", "'id'"),
        (
            ops(json!([{"op": "add", "path": "department[value eq \"bi\"]", "value": "pm"}])),
            400,
            "invalidPath",
            "filters",
        ),
        (
            ops(json!([{"op": "replace", "path": "department", "value": "pm"}, {"op": "remove", "path": "userName"}])),
            400,
            "invalidValue",
            "'userName' is required",
        ),
        (ops(json!([{"op": "replace", "path": "department", "value": "sales"}])), 400, "invalidValue", "department"),
        (
            ops(json!([{"op": "add", "path": "permissions.companyPermissions", "value": ["root"]}])),
            400,
            "invalidValue",
            "companyPermissions",
        ),
        (ops(json!([{"op": "add", "path": "nickname2", "value": "x"}])), 400, "invalidPath", "nickname2"),
        (ops(json!([{"op": "replace", "value": {"nickname2": "x"}}])), 400, "invalidPath", "nickname2"),
        (ops(json!([{"op": "remove"}])), 400, "noTarget", "path"),
        (
            ops(json!([{"op": "copy", "path": "department", "value": "bi"}])),
            400,
            "invalidValue",
            "add, replace or remove",
        ),
        (ops(json!([])), 400, "invalidValue", "at least one"),
        (json!({"Operations": [{"op": "remove", "path": "externalId"}]}), 400, "invalidValue", "PatchOp"),
    ];
    for (body, status, scim_type, needle) in refused {
        let detail = assert_error(&scim.call("PATCH", &path, Some(body.clone())).await, status, Some(scim_type));
        assert!(detail.contains(needle), "{body}: '{detail}' lacks '{needle}'");
        let now = scim.get(&path).await.body;
        assert_eq!(
            json!({"department": now["department"], "userName": now["userName"]}),
            before,
            "{body} changed the user"
        );
    }
    assert_error(
        &scim.call("PATCH", "/scim/v2/Users/nobody", Some(ops(json!([{"op": "remove", "path": "externalId"}])))).await,
        404,
        None,
    );
}
